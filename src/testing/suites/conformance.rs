// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_conformance`: the behavioural scenarios of Documentation/behaviour.md §6
//! (groups A–E, G and H) on the loopback fabric, one test each, named with the scenario's
//! number.
//!
//! Unless a test says otherwise, agent A is a GSI agent on port 1 (LID 1) with a recording
//! send and receive handler and no class registration (`sol_fc_max` 128), and requests use
//! class 0x04, which is not flow controlled. Responder B, when there is one, is registered for
//! class 0x04 on port 2 (LID 2) and answers every request. Each test observes first, tears
//! down, and asserts last, so that a failed assertion leaves no agent behind.
//!
//! The scenarios live in one file per group ([`validation`], [`lifecycle`], [`cancel_modify`],
//! [`flow_control`], [`unregister`], [`qp_errors`], [`context`]), with the helpers several
//! groups share here; the suite below lists every case, in scenario order. Their `assert!`s
//! fail the running case, as the suite module's own do.

use crate::{
    engine::{
        agent::{
            Agent,
            AgentConfig, //
        },
        send::SendBuf,
        transport::PortAttr, //
    },
    mad::{
        state::{
            CancelWait,
            SendState,
            WcStatus, //
        },
        wire::{
            self,
            MadHdr, //
        },
        Address,
        GrhAttr,
        QpType,
        RegReq, //
    },
    sys::workqueue::system_dfl,
    testing::{
        block_queue,
        loopback::Fabric,
        post,
        reg,
        request,
        sleep_ms,
        wait_state,
        Behaviour,
        Call,
        Env,
        Recorder, //
    },
};

use kernel::{
    new_spinlock_irq,
    prelude::*,
    sync::Arc,
    time::{
        Instant,
        Monotonic, //
    },
};

use pin_init::stack_pin_init;

mod cancel_modify;
mod context;
mod flow_control;
mod lifecycle;
mod qp_errors;
mod unregister;
mod validation;

/// Port and LID of agent A.
pub(super) const A: u8 = 1;

/// Port and LID of responder B.
pub(super) const B: u16 = 2;

/// A class without flow control.
pub(super) const CLASS: u8 = wire::IB_MGMT_CLASS_PERF_MGMT;

/// The default ports, with QP0 on port 2 too.
pub(super) const SMI_PORTS: [PortAttr; 2] = [
    Fabric::DEFAULT_PORTS[0],
    PortAttr {
        has_smi: true,
        ..Fabric::DEFAULT_PORTS[1]
    },
];

/// A fresh world with agent A on port 1, whose handlers record and behave as `b` says.
pub(super) fn setup(b: Behaviour) -> Result<(Env, Arc<Recorder>, Arc<Agent>)> {
    let env = Env::new()?;
    let rec = Recorder::new(b)?;
    let a = env.agent(A, &rec, None)?;
    Ok((env, rec, a))
}

/// Tears down: frees kept buffers, lifts holds, unregisters `agents`.
pub(super) fn finish(env: &Env, recs: &[&Arc<Recorder>], agents: &[&Arc<Agent>]) -> Result {
    env.fabric().set_knobs(|k| {
        k.hold = false;
        k.delay_ms = 0;
    });
    for r in recs {
        drop(r.release_all());
    }
    for a in agents {
        a.unregister()?;
    }
    Ok(())
}

/// The error of a `Result`, as an errno.
fn errno<T>(r: &Result<T>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(e) => e.to_errno(),
    }
}

/// Posts a request with the fabric on hold and arranges for its response to be processed
/// before its send completion: returns the handle once the receive handler ran.
fn early_response(
    env: &Env,
    a: &Arc<Agent>,
    rec: &Arc<Recorder>,
    tag: usize,
) -> Result<(crate::engine::send::SendHandle, bool)> {
    env.fabric().set_knobs(|k| k.hold = true);
    let h = post(request(a, CLASS, tag, B, 5000, 0)?)?;
    // Queue: [A's send completion, request at B]. Let B see the request first.
    env.fabric().promote_recv();
    env.fabric().release(1);
    // B's response is queued behind A's send completion; move it ahead.
    let start = Instant::<Monotonic>::now();
    while env.fabric().pending() < 3 && start.elapsed().as_millis() < crate::testing::WAIT_MS {
        sleep_ms(5);
    }
    // Queue: [A's send completion, B's send completion, response at A].
    env.fabric().promote_recv();
    env.fabric().release(1);
    let got = rec.wait_recvs(1);
    Ok((h, got))
}

/// A test-driven peer on port 2 that records requests and answers only when told.
pub(super) fn peer(env: &Env, class: u8) -> Result<(Arc<Agent>, Arc<Recorder>)> {
    let rec = Recorder::new(Behaviour::default())?;
    let a = env.agent(2, &rec, Some(reg(class)))?;
    Ok((a, rec))
}

/// A request of `CLASS` with tag `tag` from agent `a` to B without a GRH, from source path
/// bits `bits`, waiting a minute (the address checks of `rcv_has_same_gid` without a GRH).
pub(crate) fn lid_routed_request(a: &Arc<Agent>, tag: usize, bits: u8) -> Result<SendBuf> {
    let mut l = request(a, CLASS, tag, B, 60_000, 0)?;
    l.set_ah(Some(Address {
        sl: 0,
        dlid: B,
        src_path_bits: bits,
        grh: None,
    }));
    Ok(l)
}

/// Sends from `from` a response with `tid` and `class` to LID `dlid`, through `grh`.
pub(super) fn answer(
    from: &Arc<Agent>,
    tid: u64,
    class: u8,
    dlid: u16,
    grh: Option<GrhAttr>,
) -> Result {
    let hdr = mad_hdr(class, wire::IB_MGMT_METHOD_GET_RESP, tid);
    post(mad_to(from, 1, hdr, dlid, grh)?).map(|_| ())
}

/// The header of a MAD of `class` with `method` and `tid`, base and class version 1.
pub(super) fn mad_hdr(class: u8, method: u8, tid: u64) -> MadHdr {
    MadHdr {
        base_version: 1,
        mgmt_class: class,
        class_version: 1,
        method,
        tid,
        ..MadHdr::default()
    }
}

/// The low TID words of the requests a peer received, in order.
pub(super) fn received_tags(prec: &Arc<Recorder>) -> Result<KVec<usize>> {
    let mut v = KVec::new();
    for c in prec.calls()?.iter() {
        if let Call::Recv { tid, .. } = c {
            v.push(
                usize::try_from(*tid & 0xffff_ffff).unwrap_or(usize::MAX),
                GFP_KERNEL,
            )?;
        }
    }
    Ok(v)
}

/// A send buffer of `from` for QP `qpn` of LID `dlid` (through `grh`) holding `hdr`, not
/// tagged (`context[0]` is `usize::MAX`).
pub(super) fn mad_to(
    from: &Arc<Agent>,
    qpn: u32,
    hdr: MadHdr,
    dlid: u16,
    grh: Option<GrhAttr>,
) -> Result<SendBuf> {
    let mut buf = from.create_mad(qpn, GFP_KERNEL)?;
    hdr.write(buf.mad_mut()).map_err(|_| EINVAL)?;
    buf.set_ah(Some(Address {
        sl: 0,
        dlid,
        src_path_bits: 0,
        grh,
    }));
    buf.set_context([usize::MAX, 0]);
    Ok(buf)
}

/// Holds the engine's agent work for `ms` milliseconds ([`block_queue`]), so that everything
/// queued meanwhile runs in one go afterwards.
fn block_completions(env: &Env, ms: i64) -> Result {
    let gate = block_queue(&env.engine)?;
    system_dfl()
        .try_spawn(GFP_KERNEL, move || {
            sleep_ms(ms);
            gate.open();
        })
        .map_err(|_| ENOMEM)
}

/// Registers an agent on port 1 with `rmpp_version` and `flags`: send-only (no class
/// registration) without flags, registered for the SA class with them.
pub(super) fn rmpp_agent(
    env: &Env,
    rec: &Arc<Recorder>,
    rmpp_version: u8,
    flags: u32,
) -> Result<Arc<Agent>> {
    Agent::register(
        &env.engine,
        &env.transport,
        AgentConfig {
            port: A,
            qp_type: QpType::Gsi,
            reg: if flags != 0 {
                Some(reg(wire::IB_MGMT_CLASS_SUBN_ADM))
            } else {
                None
            },
            rmpp_version,
            flags,
            retry: Default::default(),
            send_handler: Some(rec.clone()),
            recv_handler: Some(rec.clone()),
        },
    )
}

/// Registers an agent for the SA class on port 1 (`sol_fc_max` 16), with a probe on the
/// fabric's transmission count.
pub(super) fn sa_agent(env: &Env, rec: &Arc<Recorder>) -> Result<Arc<Agent>> {
    rec.set_probe(env.fabric());
    env.agent(A, rec, Some(reg(wire::IB_MGMT_CLASS_SUBN_ADM)))
}

/// Posts SA requests tagged `tags` with `timeout_ms` from `a`.
pub(super) fn post_sa(
    a: &Arc<Agent>,
    tags: core::ops::Range<usize>,
    timeout_ms: i32,
) -> Result<KVec<crate::engine::send::SendHandle>> {
    let mut v = KVec::new();
    for tag in tags {
        v.push(
            post(request(
                a,
                wire::IB_MGMT_CLASS_SUBN_ADM,
                tag,
                B,
                timeout_ms,
                0,
            )?)?,
            GFP_KERNEL,
        )?;
    }
    Ok(v)
}

#[kernel::prelude::kunit_tests(rmad_conformance)]
mod tests {
    use super::{
        cancel_modify,
        context,
        flow_control,
        lifecycle,
        qp_errors,
        unregister,
        validation, //
    };
    use kernel::prelude::*;

    #[test]
    fn s01_create_zeroed() -> Result {
        validation::s01_create_zeroed()
    }

    #[test]
    fn s02_create_too_large_einval() -> Result {
        validation::s02_create_too_large_einval()
    }

    #[test]
    fn s03_create_rmpp_on_non_kernel_rmpp_agent_einval() -> Result {
        validation::s03_create_rmpp_on_non_kernel_rmpp_agent_einval()
    }

    #[test]
    fn s04_create_on_kernel_rmpp_agent() -> Result {
        validation::s04_create_on_kernel_rmpp_agent()
    }

    #[test]
    fn s05_create_undefined_inputs_einval() -> Result {
        validation::s05_create_undefined_inputs_einval()
    }

    #[test]
    fn s07_post_without_send_handler_einval() -> Result {
        validation::s07_post_without_send_handler_einval()
    }

    #[test]
    fn s08_rmpp_agent_non_rmpp_class_einval() -> Result {
        validation::s08_rmpp_agent_non_rmpp_class_einval()
    }

    #[test]
    fn s09_empty_chain_posts_nothing() -> Result {
        validation::s09_empty_chain_posts_nothing()
    }

    #[test]
    fn s10_chain_stops_at_failed_dispatch() -> Result {
        validation::s10_chain_stops_at_failed_dispatch()
    }

    #[test]
    fn s12_dispatch_failure_no_handler() -> Result {
        validation::s12_dispatch_failure_no_handler()
    }

    #[test]
    fn s13_outstanding_buffer_cannot_be_posted_again() -> Result {
        validation::s13_outstanding_buffer_cannot_be_posted_again()
    }

    #[test]
    fn s14_negative_retries_or_timeout_einval() -> Result {
        validation::s14_negative_retries_or_timeout_einval()
    }

    #[test]
    fn s15_no_timeout_success_once() -> Result {
        lifecycle::s15_no_timeout_success_once()
    }

    #[test]
    fn s16_response_then_success_same_thread() -> Result {
        lifecycle::s16_response_then_success_same_thread()
    }

    #[test]
    fn s17_timeout_after_all_retries() -> Result {
        lifecycle::s17_timeout_after_all_retries()
    }

    #[test]
    fn s18_response_to_second_transmission() -> Result {
        lifecycle::s18_response_to_second_transmission()
    }

    #[test]
    fn s19_early_response() -> Result {
        lifecycle::s19_early_response()
    }

    #[test]
    fn s20_duplicate_response_dropped() -> Result {
        lifecycle::s20_duplicate_response_dropped()
    }

    #[test]
    fn s21_class_mismatch_not_matched() -> Result {
        lifecycle::s21_class_mismatch_not_matched()
    }

    #[test]
    fn s22_address_checks() -> Result {
        lifecycle::s22_address_checks()
    }

    #[test]
    fn s23_directed_route_smp_skips_address_check() -> Result {
        lifecycle::s23_directed_route_smp_skips_address_check()
    }

    #[test]
    fn s24_timeouts_in_expiry_order_then_cancels() -> Result {
        lifecycle::s24_timeouts_in_expiry_order_then_cancels()
    }

    #[test]
    fn q_equal_timeouts_and_cancels_in_order() -> Result {
        lifecycle::q_equal_timeouts_and_cancels_in_order()
    }

    #[test]
    fn q_mixed_timeouts_in_expiry_order() -> Result {
        lifecycle::q_mixed_timeouts_in_expiry_order()
    }

    #[test]
    fn s25_cancel_in_wait_resp_flushes() -> Result {
        cancel_modify::s25_cancel_in_wait_resp_flushes()
    }

    #[test]
    fn s26_cancel_in_send_start_flushes_at_completion() -> Result {
        cancel_modify::s26_cancel_in_send_start_flushes_at_completion()
    }

    #[test]
    fn s27_double_cancel_einval() -> Result {
        cancel_modify::s27_double_cancel_einval()
    }

    #[test]
    fn s28_modify_after_completion_einval() -> Result {
        cancel_modify::s28_modify_after_completion_einval()
    }

    #[test]
    fn s29_cancel_from_recv_handler_einval() -> Result {
        cancel_modify::s29_cancel_from_recv_handler_einval()
    }

    #[test]
    fn s30_cancel_after_early_response_flushes() -> Result {
        cancel_modify::s30_cancel_after_early_response_flushes()
    }

    #[test]
    fn q_modify_after_early_response_keeps_duplicates_out() -> Result {
        cancel_modify::q_modify_after_early_response_keeps_duplicates_out()
    }

    #[test]
    fn s31_response_after_cancel_dropped() -> Result {
        cancel_modify::s31_response_after_cancel_dropped()
    }

    #[test]
    fn s33_modify_extends_wait_and_retries() -> Result {
        cancel_modify::s33_modify_extends_wait_and_retries()
    }

    #[test]
    fn s34_modify_shortens_wait() -> Result {
        cancel_modify::s34_modify_shortens_wait()
    }

    #[test]
    fn s35_modify_after_cancel_einval() -> Result {
        cancel_modify::s35_modify_after_cancel_einval()
    }

    #[test]
    fn s36_modify_send_start_without_timeout_waits() -> Result {
        cancel_modify::s36_modify_send_start_without_timeout_waits()
    }

    #[test]
    fn s37_cancel_and_modify_under_callers_spinlock() -> Result {
        cancel_modify::s37_cancel_and_modify_under_callers_spinlock()
    }

    #[test]
    fn s40_cancel_in_overflow_still_transmitted() -> Result {
        cancel_modify::s40_cancel_in_overflow_still_transmitted()
    }

    #[test]
    fn s61_send_queue_overflow_fifo() -> Result {
        qp_errors::s61_send_queue_overflow_fifo()
    }

    #[test]
    fn s60_hardware_error_status() -> Result {
        qp_errors::s60_hardware_error_status()
    }

    #[test]
    fn s41_flow_control_backlog() -> Result {
        flow_control::s41_flow_control_backlog()
    }

    #[test]
    fn s42_non_fc_sends_bypass_backlog() -> Result {
        flow_control::s42_non_fc_sends_bypass_backlog()
    }

    #[test]
    fn s43_cancel_queued_never_transmitted() -> Result {
        flow_control::s43_cancel_queued_never_transmitted()
    }

    #[test]
    fn s44_fc_retry_goes_to_backlog_tail() -> Result {
        flow_control::s44_fc_retry_goes_to_backlog_tail()
    }

    #[test]
    fn s45_agent_without_recv_handler_has_no_flow_control() -> Result {
        flow_control::s45_agent_without_recv_handler_has_no_flow_control()
    }

    #[test]
    fn s46_queued_time_does_not_count() -> Result {
        flow_control::s46_queued_time_does_not_count()
    }

    #[test]
    fn s47_backlog_dispatch_failure() -> Result {
        flow_control::s47_backlog_dispatch_failure()
    }

    #[test]
    fn s47_backlog_dispatch_into_removed_device_flushed() -> Result {
        flow_control::s47_backlog_dispatch_into_removed_device_flushed()
    }

    #[test]
    fn s48_chain_stops_after_queued_element() -> Result {
        flow_control::s48_chain_stops_after_queued_element()
    }

    #[test]
    fn s49_unregister_flushes_everything() -> Result {
        unregister::s49_unregister_flushes_everything()
    }

    #[test]
    fn s50_unregister_waits_for_buffers() -> Result {
        unregister::s50_unregister_waits_for_buffers()
    }

    #[test]
    fn s51_nothing_after_unregister() -> Result {
        unregister::s51_nothing_after_unregister()
    }

    #[test]
    fn s52_unregister_from_own_handler_refused() -> Result {
        unregister::s52_unregister_from_own_handler_refused()
    }

    #[test]
    fn s62_handlers_unlocked_and_may_sleep() -> Result {
        context::s62_handlers_unlocked_and_may_sleep()
    }

    #[test]
    fn s63_api_usable_with_interrupts_disabled() -> Result {
        context::s63_api_usable_with_interrupts_disabled()
    }
}
