// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_capi`: the exported C API as a hostile or careless C client uses it, on
//! `rxe0` (which the test VM creates before loading rmad).
//!
//! Its promises under test: a handle is never given out twice, so a stale agent, buffer or
//! post handle is an error forever and never acts on a newer object (`handles.rs`); a buffer
//! re-posted from its own send handler stays cancellable, unregistering from the agent's own
//! receive handler is refused, and a received MAD kept by its handler stays the client's,
//! past unregistration, until freed (`handlers.rs`); the atomic-safe calls work from a timer
//! and an hrtimer under lockdep (`contexts.rs`); kernel RMPP works through the API
//! (`rmpp.rs`); the asynchronous unregistration allocates nothing and pins its owner, and
//! what a module leaves registered ends at its unload (`unregister.rs`). The cases live in
//! those files; the suite module below names them.

use crate::{
    capi::{
        closing,
        devices,
        module_going,
        rmad_agent_context,
        rmad_agent_hi_tid,
        rmad_cancel_mad,
        rmad_cancel_post,
        rmad_create_send_mad,
        rmad_free_recv_mad,
        rmad_free_send_mad,
        rmad_get_rmpp_segment,
        rmad_keep_recv_mad,
        rmad_modify_mad,
        rmad_modify_post,
        rmad_port_gid,
        rmad_post_send,
        rmad_post_send_mad,
        rmad_recv_buf_ah,
        rmad_recv_buf_mad,
        rmad_register_agent,
        rmad_resolve_ah,
        rmad_send_buf_mad,
        rmad_send_buf_seg_count,
        rmad_send_buf_set,
        rmad_unregister_agent,
        rmad_unregister_agent_async,
        set_code,
        RmadAh,
        RmadRecvWc,
        RmadRegReq,
        RmadSendWc, //
        CREATE_GFP_SEEN,
        REGISTERED_DELAY_MS,
    },
    mad::wire,
    testing::{
        allocs,
        atomic_calls::{
            call_from,
            AtomicResult,
            FROM_HRTIMER,
            FROM_TIMER, //
        },
        capi_client::{
            c_agent,
            c_recorder_recv,
            c_recorder_send,
            c_request,
            churn,
            create_mad,
            is_err,
            num,
            ptr_errno,
            rxe_ah,
            stale_buf_calls_succeeding,
            to_handle,
            CBehaviour,
            CRecorder, //
        },
        lb0,
        post,
        register_gsi,
        request,
        Behaviour,
        Recorder, //
    },
};
use core::ffi::c_void;
use kernel::{
    prelude::*,
    sync::{
        atomic::{
            Acquire,
            Atomic,
            Relaxed,
            Release, //
        },
        Arc, //
    },
    time::{
        Delta,
        Instant,
        Monotonic, //
    },
};

/// `IB_WC_WR_FLUSH_ERR`.
const WC_FLUSH: i32 = 5;
/// Methods used: GET is answered by ib_core (status 0x000C), SEND never is.
const GET: u8 = 0x01;
const SEND: u8 = 0x03;

/// What the receive handlers of [`register_race_recv`]'s agents saw.
struct RegisterRace {
    /// Requests received.
    seen: Atomic<u32>,
    /// Of those, requests whose agent handle `rmad_agent_context` did not know.
    unknown: Atomic<u32>,
}

/// The send handler of the register-race agents (they send nothing).
///
/// # Safety
///
/// Called by rmad with a valid completion.
unsafe extern "C" fn register_race_send(_agent: *mut c_void, wc: *mut RmadSendWc) {
    // SAFETY: rmad passes a valid completion for the duration of the call.
    let _ = rmad_free_send_mad(unsafe { (*wc).send_buf });
}

/// The receive handler of the register-race agents: is the handle it got already the
/// agent's?
///
/// # Safety
///
/// Called by rmad with a valid receive completion whose context is a live [`RegisterRace`].
unsafe extern "C" fn register_race_recv(
    agent: *mut c_void,
    _buf: *mut c_void,
    wc: *const RmadRecvWc,
) {
    // SAFETY: rmad passes a valid receive completion for the duration of the call; its context
    // is the `RegisterRace` the test keeps alive until every agent is unregistered.
    let r = unsafe { &*(*wc).context.cast::<RegisterRace>() };
    r.seen.add(1, Relaxed);
    if rmad_agent_context(agent).is_null() {
        r.unknown.add(1, Relaxed);
    }
}

/// A fresh [`RegisterRace`].
fn register_race() -> Result<Arc<RegisterRace>> {
    Ok(Arc::new(
        RegisterRace {
            seen: Atomic::new(0),
            unknown: Atomic::new(0),
        },
        GFP_KERNEL,
    )?)
}

/// The SA class's GET on port 1 of lb0, registered through the C API with RMPP version 1 and
/// `flags` (kernel RMPP without `IB_MAD_USER_RMPP`), handled by the register-race handlers
/// with `race` as context; the agent handle or an `ERR_PTR`.
fn sa_rmpp_agent(race: &Arc<RegisterRace>, flags: u32) -> *mut c_void {
    let reg = RmadRegReq {
        mgmt_class: wire::IB_MGMT_CLASS_SUBN_ADM,
        mgmt_class_version: 2,
        oui: [0; 3],
        method_mask: [1 << wire::IB_MGMT_METHOD_GET, 0],
    };
    // SAFETY: The name is NUL-terminated and `reg` valid; the handlers match the C
    // prototypes; the caller keeps the context alive until the agent is unregistered.
    unsafe {
        rmad_register_agent(
            lb0::NAME.as_char_ptr(),
            1,
            1,
            &reg,
            1,
            Some(register_race_send),
            Some(register_race_recv),
            Arc::as_ptr(race).cast_mut().cast(),
            flags,
        )
    }
}

mod contexts;
mod handlers;
mod handles;
mod rmpp;
mod unload;
mod unregister;

#[kernel::prelude::kunit_tests(rmad_capi)]
mod tests {
    use super::{
        contexts,
        handlers,
        handles,
        rmpp,
        unload,
        unregister, //
    };
    use kernel::prelude::*;

    #[test]
    fn buffer_handle_never_aliases() -> Result {
        handles::buffer_handle_never_aliases()
    }

    #[test]
    fn agent_handle_never_aliases() -> Result {
        handles::agent_handle_never_aliases()
    }

    #[test]
    fn old_post_never_acts_on_a_repost() -> Result {
        handles::old_post_never_acts_on_a_repost()
    }

    #[test]
    fn stale_handle_survives_many_create_free_cycles() -> Result {
        handles::stale_handle_survives_many_create_free_cycles()
    }

    #[test]
    fn repost_from_handler_stays_cancellable() -> Result {
        handlers::repost_from_handler_stays_cancellable()
    }

    #[test]
    fn unregister_from_own_recv_handler_refused() -> Result {
        handlers::unregister_from_own_recv_handler_refused()
    }

    #[test]
    fn recv_kept_past_unregister_until_freed() -> Result {
        handlers::recv_kept_past_unregister_until_freed()
    }

    #[test]
    fn calls_on_one_buffer_never_wait_for_another() -> Result {
        contexts::calls_on_one_buffer_never_wait_for_another()
    }

    #[test]
    fn resolve_ah_resolves_and_checks_its_arguments() -> Result {
        contexts::resolve_ah_resolves_and_checks_its_arguments()
    }

    #[test]
    fn calls_from_timer_and_hrtimer() -> Result {
        contexts::calls_from_timer_and_hrtimer()
    }

    #[test]
    fn handlers_see_a_finished_handle() -> Result {
        handlers::handlers_see_a_finished_handle()
    }

    #[test]
    fn kernel_rmpp_agent_segments_through_the_c_api() -> Result {
        rmpp::kernel_rmpp_agent_segments_through_the_c_api()
    }

    #[test]
    fn kernel_rmpp_agent_gets_an_ib_core_transfer_as_one_message() -> Result {
        rmpp::kernel_rmpp_agent_gets_an_ib_core_transfer_as_one_message()
    }

    #[test]
    fn s32_modify_and_cancel_null_einval() -> Result {
        handles::s32_modify_and_cancel_null_einval()
    }

    #[test]
    fn create_honours_noio_and_nofs() -> Result {
        contexts::create_honours_noio_and_nofs()
    }

    #[test]
    fn unregister_async_pins_its_owner_until_release() -> Result {
        unregister::unregister_async_pins_its_owner_until_release()
    }

    #[test]
    fn unregister_async_allocates_nothing() -> Result {
        unregister::unregister_async_allocates_nothing()
    }

    #[test]
    fn module_unload_ends_what_its_module_left() -> Result {
        unregister::module_unload_ends_what_its_module_left()
    }

    #[test]
    fn unrelated_unload_waits_for_no_blocked_handler() -> Result {
        unload::unrelated_unload_waits_for_no_blocked_handler()
    }

    #[test]
    fn going_module_waits_for_an_unregistration_in_progress() -> Result {
        unload::going_module_waits_for_an_unregistration_in_progress()
    }

    #[test]
    fn large_kept_mad_freed_with_a_spinlock_held() -> Result {
        contexts::large_kept_mad_freed_with_a_spinlock_held()
    }
}
