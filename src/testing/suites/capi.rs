// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_capi`: the exported C API as a hostile or careless C client uses it, on
//! `rxe0` (which the test VM creates before loading rmad).
//!
//! Its promises under test: a handle is never given out twice, so a stale agent, buffer or
//! post handle is an error forever and never acts on a newer object; a buffer re-posted from
//! its own send handler stays cancellable; unregistering from the agent's own receive handler
//! is refused; the atomic-safe calls work from a timer and an hrtimer under lockdep; and a
//! received MAD kept by its handler stays the client's, past unregistration, until freed.

use crate::{
    capi::{
        devices,
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
        RmadAh,
        RmadRecvWc,
        RmadRegReq,
        RmadSendWc, //
        CREATE_GFP_SEEN,
        REGISTERED_DELAY_MS,
    },
    mad::wire,
    testing::{
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

#[kernel::prelude::kunit_tests(rmad_capi)]
mod tests {
    use super::*;

    #[test]
    fn buffer_handle_never_aliases() -> Result {
        let ah = rxe_ah()?;
        let probe = CRecorder::new(CBehaviour::default(), ah)?;
        let a = c_agent(&probe)?;
        let mut aliases = 0usize;
        let mut wrong = 0usize;
        for i in 0..20u32 {
            let h1 = c_request(a, &ah, i, SEND, 0)?;
            let freed = rmad_free_send_mad(h1);
            let h2 = c_request(a, &ah, i, SEND, 0)?;
            aliases += usize::from(h1 == h2);
            wrong += usize::from(freed != 0);
            wrong += stale_buf_calls_succeeding(h1);
            // The newer buffer is untouched by the calls on the stale one.
            wrong += usize::from(rmad_send_buf_mad(h2).is_null());
            wrong += usize::from(rmad_free_send_mad(h2) != 0);
        }
        let unreg = rmad_unregister_agent(a);
        assert_eq!(aliases, 0);
        assert_eq!(wrong, 0);
        assert_eq!(unreg, 0);
        Ok(())
    }

    #[test]
    fn agent_handle_never_aliases() -> Result {
        let ah = rxe_ah()?;
        let probe = CRecorder::new(CBehaviour::default(), ah)?;
        let mut aliases = 0usize;
        let mut wrong = 0usize;
        for _ in 0..20 {
            let a1 = c_agent(&probe)?;
            wrong += usize::from(rmad_unregister_agent(a1) != 0);
            let a2 = c_agent(&probe)?;
            aliases += usize::from(a1 == a2);
            wrong += usize::from(rmad_unregister_agent(a1) != EINVAL.to_errno());
            wrong += usize::from(rmad_agent_hi_tid(a1) != 0);
            wrong += usize::from(!rmad_agent_context(a1).is_null());
            let b = create_mad(a1, kernel::bindings::GFP_KERNEL);
            wrong += usize::from(!is_err(b) || ptr_errno(b) != EINVAL.to_errno());
            // The newer agent still works.
            wrong += usize::from(rmad_agent_hi_tid(a2) == 0);
            wrong += usize::from(rmad_agent_context(a2) != probe.ctx());
            wrong += usize::from(rmad_unregister_agent(a2) != 0);
        }
        assert_eq!(aliases, 0);
        assert_eq!(wrong, 0);
        Ok(())
    }

    #[test]
    fn old_post_never_acts_on_a_repost() -> Result {
        let ah = rxe_ah()?;
        let probe = CRecorder::new(CBehaviour::default(), ah)?;
        let a = c_agent(&probe)?;
        let b = c_request(a, &ah, 1, SEND, 60_000)?;
        let (mut p1, mut p2) = (0u64, 0u64);
        // SAFETY: `p1` is valid for a write.
        let r1 = unsafe { rmad_post_send(b, &mut p1) };
        let c1 = rmad_cancel_post(b, p1);
        let flushed = probe.wait_sends(1);
        // A cancel sets the buffer's timeout to 0, as `ib_cancel_mad` does: without a new one,
        // the re-post would complete at its send completion, which can beat the cancel below.
        // SAFETY: `ah` is valid for reads; `p2` is valid for a write.
        let (set, r2) = unsafe {
            (
                rmad_send_buf_set(b, &ah, 60_000, 0, core::ptr::null_mut()),
                rmad_post_send(b, &mut p2),
            )
        };
        // The first post is over: its id must not reach the second.
        let stale_cancel = rmad_cancel_post(b, p1);
        let stale_modify = rmad_modify_post(b, p1, 10);
        let c2 = rmad_cancel_post(b, p2);
        let both = probe.wait_sends(2);
        let sends = probe.sends()?;
        pr_info!(
            "capi: post {} cancel {} re-post {} cancel {}; stale {} {}; completions {:?}\n",
            r1,
            c1,
            r2,
            c2,
            stale_cancel,
            stale_modify,
            &sends[..]
        );
        let free = rmad_free_send_mad(b);
        let unreg = rmad_unregister_agent(a);
        assert_eq!((r1, c1, set, r2, c2), (0, 0, 0, 0, 0));
        assert!(flushed && both);
        assert!(p1 != p2);
        assert_eq!(stale_cancel, EINVAL.to_errno());
        assert_eq!(stale_modify, EINVAL.to_errno());
        assert_eq!(sends.len(), 2);
        assert!(sends.iter().all(|s| s.2 == WC_FLUSH));
        assert!(sends.first().map(|s| s.1) == Some(p1) && sends.get(1).map(|s| s.1) == Some(p2));
        assert_eq!((free, unreg), (0, 0));
        Ok(())
    }

    #[test]
    fn stale_handle_survives_many_create_free_cycles() -> Result {
        let ah = rxe_ah()?;
        let probe = CRecorder::new(CBehaviour::default(), ah)?;
        let a = c_agent(&probe)?;
        let stale = c_request(a, &ah, 0, SEND, 0)?;
        let freed = rmad_free_send_mad(stale);
        let c = churn(a, stale, CYCLES);
        let unreg = rmad_unregister_agent(a);
        pr_info!(
            "capi: {} create/free cycles in {} ms, {} aliases, {} wrong results\n",
            CYCLES,
            c.ms,
            c.aliases,
            c.wrong
        );
        let (aliases, wrong) = (c.aliases, c.wrong + c.failed);
        assert_eq!(freed, 0);
        assert_eq!(aliases, 0);
        assert_eq!(wrong, 0);
        assert_eq!(unreg, 0);
        Ok(())
    }

    /// Create/free cycles of [`stale_handle_survives_many_create_free_cycles`]. Each costs
    /// about 1.5 ms in the test VM (KASAN, kmemleak and lockdep record every allocation), and
    /// KUnit cases stay well below the hung-task detector's 30 s; `rmad_handles` runs a million
    /// cycles of the handle table alone, and the stress driver more of these.
    const CYCLES: usize = 5_000;

    #[test]
    fn repost_from_handler_stays_cancellable() -> Result {
        let ah = rxe_ah()?;
        let probe = CRecorder::new(CBehaviour::default(), ah)?;
        let a = c_agent(&probe)?;
        let b = c_request(a, &ah, 7, SEND, 0)?;
        let mut not_cancellable = 0usize;
        let mut lost = 0usize;
        let mut stale_ok = 0usize;
        const N: usize = 500;
        for i in 0..N {
            probe.inner.lock().repost_armed = true;
            // SAFETY: Plain call.
            let _ = unsafe { rmad_send_buf_set(b, &ah, 0, 0, core::ptr::null_mut()) };
            let mut p0 = 0u64;
            // SAFETY: `p0` is valid for a write.
            if unsafe { rmad_post_send(b, &mut p0) } != 0 {
                lost += 1;
                break;
            }
            // The handler re-posts it (long timeout) when the first post completes.
            let want = (i + 1) * 2;
            if !probe.wait(|g| g.reposts.len() > i) {
                lost += 1;
                break;
            }
            stale_ok += usize::from(rmad_cancel_post(b, p0) == 0);
            let r = if i % 2 == 0 {
                rmad_cancel_mad(b)
            } else {
                let p1 = probe.inner.lock().reposts.get(i).copied().unwrap_or(0);
                rmad_cancel_post(b, p1)
            };
            not_cancellable += usize::from(r != 0);
            if !probe.wait_sends(want) {
                lost += 1;
                break;
            }
        }
        let results = probe.results()?;
        let sends = probe.sends()?;
        let free = rmad_free_send_mad(b);
        let unreg = rmad_unregister_agent(a);
        pr_info!(
            "capi: {} re-posts from the handler, {} not cancellable, {} stale post ids accepted\n",
            results.len(),
            not_cancellable,
            stale_ok
        );
        assert_eq!(lost, 0);
        assert_eq!(not_cancellable, 0);
        assert_eq!(stale_ok, 0);
        assert!(results.iter().all(|r| *r == 0));
        assert_eq!(sends.len(), N * 2);
        assert_eq!(sends.iter().filter(|s| s.2 == WC_FLUSH).count(), N);
        assert_eq!((free, unreg), (0, 0));
        Ok(())
    }

    #[test]
    fn unregister_from_own_recv_handler_refused() -> Result {
        let ah = rxe_ah()?;
        let probe = CRecorder::new(
            CBehaviour {
                free: true,
                unregister_in_recv: true,
                ..CBehaviour::default()
            },
            ah,
        )?;
        let a = c_agent(&probe)?;
        let b = c_request(a, &ah, 3, GET, 5000)?;
        // SAFETY: Plain call.
        let posted = unsafe { rmad_post_send_mad(b, core::ptr::null_mut()) };
        // ib_core answers the GET; the response reaches the receive handler.
        let answered = probe.wait(|g| g.recvs >= 1) && probe.wait_sends(1);
        let results = probe.results()?;
        let unreg = rmad_unregister_agent(a);
        assert_eq!(posted, 0);
        assert!(answered);
        assert_eq!(&results[..], &[EDEADLK.to_errno()][..]);
        assert_eq!(unreg, 0);
        Ok(())
    }

    #[test]
    fn recv_kept_past_unregister_until_freed() -> Result {
        let own = rxe_ah()?;
        let probe = CRecorder::new(
            CBehaviour {
                free: true,
                keep_first_recv: true,
                ..CBehaviour::default()
            },
            own,
        )?;
        let a = c_agent(&probe)?;
        let mut posted = 0;
        for lo in 0..2 {
            let b = c_request(a, &own, lo, GET, 5000)?;
            // SAFETY: Plain call.
            posted += usize::from(unsafe { rmad_post_send_mad(b, core::ptr::null_mut()) } == 0);
        }
        // ib_core answers both GETs; the first answer is kept, the second is not.
        let answered = probe.wait(|g| g.recvs >= 2) && probe.wait_sends(2);
        let (n_calls, first, second) = {
            let g = probe.inner.lock();
            let c = &g.recv_calls;
            (c.len(), c.first().copied(), c.get(1).copied())
        };
        let none = (0, 0, 0);
        let (first, second) = (first.unwrap_or(none), second.unwrap_or(none));
        let (kept, other) = (to_handle(first.0), to_handle(second.0));
        let mut len = 0u32;
        // SAFETY: `len` is valid for a write.
        let mad = unsafe { rmad_recv_buf_mad(kept, &mut len) }.cast::<u8>();
        // SAFETY: A non-NULL MAD is valid for `len` bytes until it is freed (below).
        let method = (!mad.is_null()).then(|| unsafe { *mad.add(3) });
        let mut ah = RmadAh { has_grh: 0, ..own };
        // SAFETY: `ah` is valid for writes (or NULL on purpose).
        let reply = unsafe {
            (
                rmad_recv_buf_ah(a, kept, &mut ah),
                rmad_recv_buf_ah(a, kept, core::ptr::null_mut()),
                rmad_recv_buf_ah(a, other, &mut RmadAh { ..own }),
            )
        };
        // The unkept MAD ended with its handler; the kept one cannot be kept twice.
        let ended = (
            // SAFETY: NULL `len` is allowed.
            unsafe { rmad_recv_buf_mad(other, core::ptr::null_mut()) }.is_null(),
            rmad_free_recv_mad(other),
            rmad_keep_recv_mad(other),
            rmad_keep_recv_mad(kept),
        );
        let unreg = rmad_unregister_agent(a);
        // Past unregistration the kept MAD is still there, until it is freed.
        // SAFETY: NULL `len` is allowed.
        let after = unsafe { rmad_recv_buf_mad(kept, core::ptr::null_mut()) }.cast::<u8>();
        // SAFETY: `ah` is valid for a write.
        let stale_agent = unsafe { rmad_recv_buf_ah(a, kept, &mut ah) };
        let freed = (rmad_free_recv_mad(kept), rmad_free_recv_mad(kept));
        // SAFETY: NULL `len` is allowed.
        let gone = unsafe { rmad_recv_buf_mad(kept, core::ptr::null_mut()) }.is_null();
        assert_eq!(posted, 2);
        assert!(answered);
        assert_eq!(n_calls, 2);
        assert!([first, second].iter().all(|c| c.0 != 0 && c.1 == 1));
        assert_eq!(first.2, 0);
        assert_eq!(len, 256);
        assert!(method.is_some_and(|m| m & 0x80 != 0));
        // The answer came from rxe0's own GID 1 to itself: the reply goes back there.
        assert_eq!(reply, (0, EINVAL.to_errno(), EINVAL.to_errno()));
        assert_eq!(
            (ah.has_grh, ah.sgid_index, ah.dgid),
            (1, own.sgid_index, own.dgid)
        );
        let einval = EINVAL.to_errno();
        assert_eq!(ended, (true, einval, einval, einval));
        assert_eq!(unreg, 0);
        assert_eq!(after, mad);
        assert_eq!(stale_agent, einval);
        assert_eq!(freed, (0, einval));
        assert!(gone);
        Ok(())
    }

    #[test]
    fn calls_on_one_buffer_never_wait_for_another() -> Result {
        // While one thread holds buffer B's slot (as a call on B does), another thread's
        // calls on buffer A, of another agent, complete: no lock is shared between them. With
        // a module-wide lock they would wait until B is let go, after the bound below, in
        // every attempt. One attempt can also miss for a reason outside rmad: the holder spins
        // with interrupts off, so a caller that landed on the holder's CPU, or that waits for
        // an IPI to it, cannot go on; up to three attempts, each with a new pair of buffers.
        let ah = rxe_ah()?;
        let probe = CRecorder::new(CBehaviour::default(), ah)?;
        let (a, b) = (c_agent(&probe)?, c_agent(&probe)?);
        let mut outcomes = [Outcome::default(); 3];
        let mut attempts = 0;
        let mut failed = 0;
        for (i, o) in (1u32..).zip(outcomes.iter_mut()) {
            match calls_while_another_is_held(&probe, a, b, &ah, i) {
                Ok(seen) => *o = seen,
                Err(e) => {
                    failed = e.to_errno();
                    break;
                }
            }
            attempts += 1;
            if o.inside {
                break;
            }
        }
        // Unregistered before any assertion: the probe must outlive the agents.
        let unreg = (rmad_unregister_agent(a), rmad_unregister_agent(b));
        let used = &outcomes[..attempts];
        assert_eq!(failed, 0);
        // Every call succeeded in every attempt, whether it finished inside or not.
        assert!(used.iter().all(|o| o.calls == [0, 0, 0, 0]));
        assert!(used.iter().any(|o| o.inside));
        assert_eq!(unreg, (0, 0));
        Ok(())
    }

    /// What one attempt of [`calls_on_one_buffer_never_wait_for_another`] saw.
    #[derive(Clone, Copy, Default)]
    struct Outcome {
        /// The calls on A finished while B's slot was held.
        inside: bool,
        /// What `rmad_send_buf_mad` (0 when non-NULL), set, post, modify and cancel returned,
        /// the first two folded into one.
        calls: [i32; 4],
    }

    /// Posts, modifies and cancels a new buffer of agent `a` from another thread while this
    /// one holds the slot of a new buffer of agent `b` for up to 5 s; once the cancelled send
    /// has reached `probe`'s handler (the `lo`th), frees both buffers.
    fn calls_while_another_is_held(
        probe: &Arc<CRecorder>,
        a: *mut c_void,
        b: *mut c_void,
        ah: &RmadAh,
        lo: u32,
    ) -> Result<Outcome> {
        let ba = c_request(a, ah, lo.checked_mul(2).ok_or(EINVAL)?, SEND, 60_000)?;
        let bb = c_request(
            b,
            ah,
            lo.checked_mul(2)
                .ok_or(EINVAL)?
                .checked_add(1)
                .ok_or(EINVAL)?,
            SEND,
            60_000,
        )?;
        let shared = Arc::pin_init(
            pin_init!(Shared {
                held: Atomic::new(false),
                done: Atomic::new(false),
                calls: [
                    Atomic::new(0),
                    Atomic::new(0),
                    Atomic::new(0),
                    Atomic::new(0)
                ],
            }),
            GFP_KERNEL,
        )?;
        let (s2, ah2, ba2) = (shared.clone(), *ah, num(ba));
        kernel::workqueue::system_unbound().try_spawn(GFP_KERNEL, move || {
            while !s2.held.load(Acquire) {
                core::hint::spin_loop();
            }
            let ba = core::ptr::without_provenance_mut(usize::try_from(ba2).unwrap_or(0));
            let mut post = 0u64;
            // SAFETY: Plain calls; `post` is valid for a write.
            let codes = unsafe {
                let set = if rmad_send_buf_mad(ba).is_null() {
                    EINVAL.to_errno()
                } else {
                    rmad_send_buf_set(ba, &ah2, 60_000, 0, core::ptr::null_mut())
                };
                let posted = rmad_post_send(ba, &mut post);
                [
                    set,
                    posted,
                    rmad_modify_post(ba, post, 50_000),
                    rmad_cancel_post(ba, post),
                ]
            };
            for (slot, code) in s2.calls.iter().zip(codes) {
                slot.store(code, Relaxed);
            }
            s2.done.store(true, Release);
        })?;
        let mut inside = false;
        let held = crate::capi::hold_buf_slot(bb, || {
            shared.held.store(true, Release);
            // Bounded in time: with a shared lock the other thread could not finish while we
            // hold it. 5 s stays well inside the soft-lockup and RCU-stall detectors' 20 s.
            let start = Instant::<Monotonic>::now();
            while start.elapsed() < Delta::from_secs(5) {
                inside = shared.done.load(Acquire);
                if inside {
                    break;
                }
                core::hint::spin_loop();
            }
        });
        // The other thread must never wait forever, whatever happened here.
        shared.held.store(true, Release);
        held?;
        // B is let go: the calls finish now if they had not (bounded, in case they hang).
        for _ in 0..20_000 {
            if shared.done.load(Acquire) {
                break;
            }
            crate::testing::sleep_ms(1);
        }
        if !shared.done.load(Acquire) {
            return Err(ETIMEDOUT);
        }
        let calls = shared.calls.each_ref().map(|c| c.load(Relaxed));
        if !probe.wait_sends(usize::try_from(lo)?) {
            return Err(ETIMEDOUT);
        }
        let frees = (rmad_free_send_mad(ba), rmad_free_send_mad(bb));
        if frees != (0, 0) {
            return Err(EBUSY);
        }
        Ok(Outcome { inside, calls })
    }

    /// What the two threads of [`calls_while_another_is_held`] share.
    #[pin_data]
    struct Shared {
        held: Atomic<bool>,
        /// Set once the calls on A have all returned.
        done: Atomic<bool>,
        /// Their return codes (see [`Outcome::calls`]).
        calls: [Atomic<i32>; 4],
    }

    #[test]
    fn resolve_ah_resolves_and_checks_its_arguments() -> Result {
        // rxe0's own GID resolves (to its own MAC: loopback), an address without a GRH needs
        // nothing, bad arguments are refused. (An unreachable destination cannot be made on
        // rxe0's dummy netdev, which needs no ARP: the two-node suite checks that one.)
        let own = rxe_ah()?;
        let no_grh = RmadAh { has_grh: 0, ..own };
        let probe = CRecorder::new(CBehaviour::default(), own)?;
        let a = c_agent(&probe)?;
        // SAFETY: Plain calls; the addresses are valid for reads (or NULL on purpose).
        let got = unsafe {
            (
                rmad_resolve_ah(a, &own),
                rmad_resolve_ah(a, &no_grh),
                rmad_resolve_ah(a, core::ptr::null()),
                rmad_resolve_ah(core::ptr::null_mut(), &own),
            )
        };
        let unreg = rmad_unregister_agent(a);
        assert_eq!(got.0, 0);
        assert_eq!(got.1, 0);
        assert_eq!(got.2, EINVAL.to_errno());
        assert_eq!(got.3, EINVAL.to_errno());
        assert_eq!(unreg, 0);
        Ok(())
    }

    #[test]
    fn calls_from_timer_and_hrtimer() -> Result {
        let ah = rxe_ah()?;
        let probe = CRecorder::new(
            CBehaviour {
                free: true,
                keep_all_recvs: true,
                ..CBehaviour::default()
            },
            ah,
        )?;
        let a = c_agent(&probe)?;
        // A kernel-RMPP agent's buffer of 56 + 1 000 bytes (5 segments of 200), whose
        // segments the callbacks read; `race` outlives the agent (unregistered below).
        let race = register_race()?;
        let ra = sa_rmpp_agent(&race, 0);
        let rb = if is_err(ra) {
            core::ptr::null_mut()
        } else {
            rmad_create_send_mad(ra, 1, 0, 1, 56, 1000, kernel::bindings::GFP_KERNEL, 1)
        };
        let mut results = [AtomicResult::default(), AtomicResult::default()];
        let mut ran = [EINVAL.to_errno(); 2];
        let mut gone = [false; 2];
        for (where_, ((res, ran), gone)) in results
            .iter_mut()
            .zip(ran.iter_mut())
            .zip(gone.iter_mut())
            .enumerate()
        {
            // A GET that ib_core answers: its answer is kept, and handed to the callback.
            let g = c_request(a, &ah, 20 + u32::try_from(where_)?, GET, 5000)?;
            // SAFETY: Plain call.
            let _ = unsafe { rmad_post_send_mad(g, core::ptr::null_mut()) };
            let _ = probe.wait(|p| p.recv_calls.len() > where_);
            let recv = to_handle(probe.inner.lock().recv_calls.get(where_).map_or(0, |c| c.0));
            let b = c_request(a, &ah, 9, SEND, 60_000)?;
            let from = [FROM_TIMER, FROM_HRTIMER]
                .get(where_)
                .copied()
                .ok_or(EINVAL)?;
            *ran = match call_from(from, a, b, recv, rb) {
                Ok(r) => {
                    *res = r;
                    0
                }
                Err(e) => e,
            };
            // SAFETY: NULL `len` is allowed.
            *gone = unsafe { rmad_recv_buf_mad(recv, core::ptr::null_mut()) }.is_null();
            // The GET's completion (freed by the probe) and the cancelled post's (flushed);
            // then the second buffer is ours to free.
            let _ = probe.wait_sends(2 * where_ + 2);
            let _ = rmad_free_send_mad(b);
        }
        let unreg = rmad_unregister_agent(a);
        let hi_tid = rmad_agent_hi_tid(a);
        let rmpp_freed = !is_err(rb) && rmad_free_send_mad(rb) == 0;
        let rmpp_unreg = !is_err(ra) && rmad_unregister_agent(ra) == 0;
        let [t, h] = &results;
        pr_info!("capi: from timer {:?}\n", t);
        pr_info!("capi: from hrtimer {:?}\n", h);
        assert_eq!(ran, [0, 0]);
        // The timer ran in softirq context, the hrtimer in hard interrupt context.
        assert!(t.softirq != 0 && t.hardirq == 0);
        assert!(h.hardirq != 0 && h.irqs_off != 0);
        for r in &results {
            assert_eq!((r.post, r.modify, r.modify_mad, r.cancel), (0, 0, 0, 0));
            assert_eq!(
                (r.set, r.context_ok, r.retries, r.agent_context_ok),
                (0, 1, 2, 1)
            );
            assert_eq!(r.cancel_again, EINVAL.to_errno());
            assert_eq!(r.free_busy, EBUSY.to_errno());
            assert!(r.hi_tid != 0);
            assert_eq!((r.create, r.mad_ok, r.free), (0, 1, 0));
            assert_eq!(r.stale_free, EINVAL.to_errno());
            assert_eq!(r.send_len, 256);
            assert_eq!((r.recv_mad_ok, r.recv_free), (1, 0));
            assert_eq!(
                (r.seg_count, r.seg_size, r.seg_ok, r.seg_beyond_null),
                (5, 200, 1, 1)
            );
        }
        assert!(rmpp_freed && rmpp_unreg);
        assert_eq!(gone, [true, true]);
        assert_eq!(unreg, 0);
        assert_eq!(hi_tid, 0);
        Ok(())
    }

    #[test]
    fn handlers_see_a_finished_handle() -> Result {
        // A request that reaches an agent while `rmad_register_agent` is still running must
        // already find the handle its handler gets usable (rmad.h: handlers that run before
        // registration returns "receive the agent's handle already"). A flood of requests for
        // the class races a loop that registers and unregisters the agent on lb0.
        const ROUNDS: usize = 100;
        let class = wire::IB_MGMT_CLASS_DEVICE_MGMT;
        let (engine, transport) = devices::find(lb0::NAME, 2).ok_or(ENODEV)?;
        let rec = Recorder::new(Behaviour::default())?;
        let sender = register_gsi(&engine, &transport, 2, &rec, None)?;
        let race = register_race()?;
        let stop = Arc::new(Atomic::<bool>::new(false), GFP_KERNEL)?;
        let flooded = Arc::new(Atomic::<u32>::new(0), GFP_KERNEL)?;
        let (s2, stop2, flooded2) = (sender.clone(), stop.clone(), flooded.clone());
        kernel::workqueue::system_unbound()
            .try_spawn(GFP_KERNEL, move || {
                let mut tag = 0usize;
                // Bounded: the loop stops at the test's signal or after 200 000 requests.
                while !stop2.load(Acquire) && tag < 200_000 {
                    // Timeout 0: each request completes when the fabric took it.
                    if let Ok(b) = request(&s2, class, tag, 1, 0, 0) {
                        if post(b).is_ok() {
                            flooded2.add(1, Relaxed);
                        }
                    }
                    tag += 1;
                    if tag % 64 == 0 {
                        crate::sys::sched::cond_resched();
                    }
                }
                stop2.store(true, Release);
            })
            .map_err(|_| ENOMEM)?;
        let reg = RmadRegReq {
            mgmt_class: class,
            mgmt_class_version: 1,
            oui: [0; 3],
            method_mask: [1 << wire::IB_MGMT_METHOD_GET, 0],
        };
        let (mut registered, mut unregistered) = (0usize, 0usize);
        // Each registration lingers once its agent is routable, before it returns.
        REGISTERED_DELAY_MS.store(2, Relaxed);
        for _ in 0..ROUNDS {
            // SAFETY: The name is NUL-terminated and `reg` valid; the handlers match the C
            // prototypes; the context outlives the agent (unregistered below).
            let a = unsafe {
                rmad_register_agent(
                    lb0::NAME.as_char_ptr(),
                    1,
                    1,
                    &reg,
                    0,
                    Some(register_race_send),
                    Some(register_race_recv),
                    Arc::as_ptr(&race).cast_mut().cast(),
                    0,
                )
            };
            if is_err(a) {
                continue;
            }
            registered += 1;
            unregistered += usize::from(rmad_unregister_agent(a) == 0);
        }
        REGISTERED_DELAY_MS.store(0, Relaxed);
        stop.store(true, Release);
        // The flood ends within one request of the signal; its sends then complete.
        let start = Instant::<Monotonic>::now();
        while start.elapsed().as_millis() < crate::testing::WAIT_MS
            && u64::from(flooded.load(Relaxed)) > u64::try_from(rec.send_count()).unwrap_or(0)
        {
            crate::testing::sleep_ms(10);
        }
        let unreg = sender.unregister();
        let (seen, unknown) = (race.seen.load(Relaxed), race.unknown.load(Relaxed));
        pr_info!(
            "capi: {} registrations, {} requests flooded, {} reached an agent, {} with an unknown handle\n",
            registered,
            flooded.load(Relaxed),
            seen,
            unknown
        );
        assert_eq!(registered, ROUNDS);
        assert_eq!(unregistered, ROUNDS);
        assert!(unreg.is_ok());
        // The race happened: requests reached the agents while they came and went.
        assert!(seen > 0);
        assert_eq!(unknown, 0);
        Ok(())
    }

    #[test]
    fn kernel_rmpp_agent_segments_through_the_c_api() -> Result {
        // rmad.h: rmpp_version 1 without IB_MAD_USER_RMPP is kernel RMPP: an RMPP buffer of
        // 56 + 201 bytes is 2 segments of 200 bytes, rmad_send_buf_seg_count() says so, and
        // rmad_get_rmpp_segment() reaches segments 1 and 2, 200 bytes apart, and nothing else;
        // with the flag (user RMPP) rmpp_active is -EINVAL, as in C. `race` outlives the
        // agents (unregistered below).
        let race = register_race()?;
        let mut codes = [0i32; 2];
        let mut shape = None;
        let mut registered = 0;
        for (i, flags) in [0, wire::IB_MAD_USER_RMPP].into_iter().enumerate() {
            let a = sa_rmpp_agent(&race, flags);
            if is_err(a) {
                continue;
            }
            registered += 1;
            let b = rmad_create_send_mad(a, 1, 0, 1, 56, 201, kernel::bindings::GFP_KERNEL, 1);
            if let Some(c) = codes.get_mut(i) {
                *c = if is_err(b) { ptr_errno(b) } else { 0 };
            }
            if !is_err(b) {
                let mut size = 0u32;
                // SAFETY: `size` is a valid `u32`.
                let count = unsafe { rmad_send_buf_seg_count(b, &mut size) };
                let segs = [1, 2, 3, 0, -1].map(|n| rmad_get_rmpp_segment(b, n) as usize);
                let apart = segs[1].wrapping_sub(segs[0]);
                let reached = segs.map(|p| p != 0);
                shape = Some((count, size, apart, reached));
                let _ = rmad_free_send_mad(b);
            }
            let _ = rmad_unregister_agent(a);
        }
        assert_eq!(registered, 2);
        assert_eq!(codes[0], 0);
        assert_eq!(codes[1], EINVAL.to_errno());
        assert_eq!(
            shape,
            Some((2, 200, 200, [true, true, false, false, false]))
        );
        Ok(())
    }

    #[test]
    fn kernel_rmpp_agent_gets_an_ib_core_transfer_as_one_message() -> Result {
        // rmad.h, @mad_len: on a kernel-RMPP agent, a reassembled message. A kernel-RMPP
        // ib_core agent on rxe0 answers a GET of the SA class with 20 000 bytes (100 segments);
        // the C API's receive handler gets it once, 56 + 20 000 bytes, kept past the handler
        // and read back with every byte where it belongs.
        const SA: u8 = wire::IB_MGMT_CLASS_SUBN_ADM;
        let port = crate::verbs::find_port(c"rxe0", 1);
        // The test VM always creates rxe0; without it the suite fails.
        assert!(port.is_some());
        let Some(port) = port else {
            return Ok(());
        };
        let responder = crate::testing::ib_responder::IbResponder::start_rmpp(&port, SA, 20_000);
        assert!(responder.is_some());
        // To the IPv6 link-local GID, where ib_core's RMPP sender can match ACKs.
        let mut own = rxe_ah()?;
        own.sgid_index = 0;
        // SAFETY: The name is NUL-terminated; `dgid` has 16 bytes.
        kernel::error::to_result(unsafe {
            rmad_port_gid(c"rxe0".as_char_ptr(), 1, 0, own.dgid.as_mut_ptr())
        })?;
        let probe = CRecorder::new(
            CBehaviour {
                free: true,
                keep_first_recv: true,
                ..CBehaviour::default()
            },
            own,
        )?;
        // SAFETY: The name is NUL-terminated; the handlers match the C prototypes; the context
        // outlives the agent (unregistered below).
        let a = unsafe {
            rmad_register_agent(
                c"rxe0".as_char_ptr(),
                1,
                1,
                core::ptr::null(),
                1,
                Some(c_recorder_send),
                Some(c_recorder_recv),
                probe.ctx(),
                0,
            )
        };
        assert!(!is_err(a));
        if is_err(a) {
            return Ok(());
        }
        let b = c_request(a, &own, 1, GET, 20_000)?;
        // SAFETY: The client owns the buffer; its MAD has 256 bytes.
        unsafe { *rmad_send_buf_mad(b).cast::<u8>().add(1) = SA };
        // SAFETY: Plain call.
        let posted = unsafe { rmad_post_send_mad(b, core::ptr::null_mut()) } == 0;
        let done = probe.wait(|g| g.recvs >= 1) && probe.wait_sends(1);
        let first = probe.inner.lock().recv_calls.first().copied();
        let kept = to_handle(first.map_or(0, |c| c.0));
        let mut len = 0u32;
        // SAFETY: `len` is valid for a write.
        let mad = unsafe { rmad_recv_buf_mad(kept, &mut len) }.cast::<u8>();
        let intact = !mad.is_null() && {
            // SAFETY: A non-NULL MAD is valid for `len` bytes until it is freed (below).
            let bytes = unsafe { core::slice::from_raw_parts(mad, usize::try_from(len)?) };
            bytes.get(56..).is_some_and(|d| {
                d.chunks(200)
                    .enumerate()
                    .all(|(i, c)| c.iter().all(|x| usize::from(*x) == (i + 1) % 256))
            })
        };
        let freed = rmad_free_recv_mad(kept);
        let unreg = rmad_unregister_agent(a);
        drop(responder);
        assert!(posted);
        assert!(done);
        assert_eq!(first.map(|c| c.2), Some(0));
        assert_eq!(len, 20_056);
        assert!(intact);
        assert_eq!(freed, 0);
        assert_eq!(unreg, 0);
        Ok(())
    }

    #[test]
    fn s32_modify_and_cancel_null_einval() -> Result {
        // Scenario 32: `ib_modify_mad(NULL, x)` is -EINVAL; so are rmad's other calls that
        // name a post, on a NULL buffer.
        let null = core::ptr::null_mut();
        let results = [
            rmad_modify_mad(null, 10),
            rmad_cancel_mad(null),
            rmad_modify_post(null, 1, 10),
            rmad_cancel_post(null, 1),
        ];
        assert_eq!(results, [EINVAL.to_errno(); 4]);
        Ok(())
    }

    #[test]
    fn create_honours_noio_and_nofs() -> Result {
        // A caller's GFP_NOIO or GFP_NOFS must hold for every allocation of the create: none
        // may recurse into IO or filesystem reclaim.
        let io = 1u32 << kernel::bindings::___GFP_IO_BIT;
        let fs = 1u32 << kernel::bindings::___GFP_FS_BIT;
        let kernel_mask = kernel::bindings::GFP_KERNEL;
        let ah = rxe_ah()?;
        let probe = CRecorder::new(CBehaviour::default(), ah)?;
        let a = c_agent(&probe)?;
        let mut seen = [0u32; 3];
        for (s, mask) in
            seen.iter_mut()
                .zip([kernel_mask & !(io | fs), kernel_mask & !fs, kernel_mask])
        {
            let b = create_mad(a, mask);
            *s = CREATE_GFP_SEEN.load(Relaxed);
            if !is_err(b) {
                let _ = rmad_free_send_mad(b);
            }
        }
        let unreg = rmad_unregister_agent(a);
        let [noio, nofs, full] = seen;
        pr_info!(
            "capi: allocation masks noio {:#x} nofs {:#x} kernel {:#x}\n",
            noio,
            nofs,
            full
        );
        assert_eq!(unreg, 0);
        assert_eq!(noio & (io | fs), 0);
        assert_eq!(nofs & (io | fs), io);
        assert_eq!(full & (io | fs), io | fs);
        Ok(())
    }

    /// What [`async_release`] saw: that it ran, the sends the probe had seen by then, the task
    /// it ran in, and this module's reference count while it ran.
    static ASYNC_RELEASED: Atomic<bool> = Atomic::new(false);
    static ASYNC_SENDS_AT_RELEASE: Atomic<usize> = Atomic::new(usize::MAX);
    static ASYNC_RELEASE_TASK: Atomic<usize> = Atomic::new(0);
    static ASYNC_REFCOUNT_AT_RELEASE: Atomic<i32> = Atomic::new(-1);

    /// The release function of [`unregister_async_pins_its_owner_until_release`].
    ///
    /// # Safety
    ///
    /// `arg` must be an `Arc<CRecorder>` from `Arc::into_raw`, given up to this call.
    unsafe extern "C" fn async_release(arg: *mut c_void) {
        // SAFETY: `arg` is the reference the test leaked for this call, taken back once.
        let probe = unsafe { Arc::from_raw(arg.cast::<CRecorder>()) };
        let sends = probe.sends().map_or(usize::MAX, |s| s.len());
        let owner = <crate::LocalModule as kernel::ModuleMetadata>::THIS_MODULE.as_ptr();
        // SAFETY: `owner` is this module, live: it runs this function.
        let refs = unsafe { kernel::bindings::module_refcount(owner) };
        ASYNC_REFCOUNT_AT_RELEASE.store(refs, Relaxed);
        ASYNC_RELEASE_TASK.store(kernel::task::Task::current_raw() as usize, Relaxed);
        ASYNC_SENDS_AT_RELEASE.store(sends, Relaxed);
        ASYNC_RELEASED.store(true, Release);
    }

    #[test]
    fn unregister_async_pins_its_owner_until_release() -> Result {
        // rmad.h: rmad_unregister_agent_async is atomic-safe and calls no handler; the agent
        // is refused by both unregistrations afterwards; it is unregistered in rmad's thread
        // (its outstanding send flushed), then `release` runs, with `owner` pinned until
        // then. Here `owner` is rmad itself and the call is made with interrupts off.
        //
        // "Calls no handler" is checked by task, not by time: rmad's thread may run on the
        // other CPU while this one still holds the lock, so the flush and the release may
        // come before the lock is dropped; neither may run in this task.
        let own = rxe_ah()?;
        let probe = CRecorder::new(
            CBehaviour {
                free: true,
                ..CBehaviour::default()
            },
            own,
        )?;
        let a = c_agent(&probe)?;
        let b = c_request(a, &own, 1, SEND, 60_000)?;
        // SAFETY: Plain call.
        let posted = unsafe { rmad_post_send_mad(b, core::ptr::null_mut()) } == 0;
        let owner = <crate::LocalModule as kernel::ModuleMetadata>::THIS_MODULE.as_ptr();
        // SAFETY: `owner` is this module, live.
        let before = unsafe { kernel::bindings::module_refcount(owner) };
        let me = kernel::task::Task::current_raw() as usize;
        ASYNC_RELEASED.store(false, Relaxed);
        ASYNC_RELEASE_TASK.store(0, Relaxed);
        ASYNC_REFCOUNT_AT_RELEASE.store(-1, Relaxed);
        let arg = Arc::into_raw(probe.clone()).cast_mut().cast::<c_void>();
        let lock = KBox::pin_init(kernel::new_spinlock_irq!(()), GFP_KERNEL)?;
        let r = {
            let _g = lock.lock();
            // SAFETY: `async_release` takes `arg` once; `owner` contains it (it is rmad).
            unsafe {
                crate::capi::rmad_unregister_agent_async(a, Some(async_release), arg, owner.cast())
            }
        };
        let again = rmad_unregister_agent(a);
        // SAFETY: As above; nothing is queued when this fails.
        let async_again = unsafe {
            crate::capi::rmad_unregister_agent_async(a, None, core::ptr::null_mut(), owner.cast())
        };
        let mut released = false;
        let mut unpinned = false;
        for _ in 0..crate::testing::WAIT_MS / 10 {
            released = ASYNC_RELEASED.load(Acquire);
            // SAFETY: As above.
            unpinned = unsafe { kernel::bindings::module_refcount(owner) } == before;
            if released && unpinned {
                break;
            }
            crate::testing::sleep_ms(10);
        }
        if r != 0 {
            // Not queued: `arg` is still ours.
            // SAFETY: `arg` came from `Arc::into_raw` above and was not taken.
            drop(unsafe { Arc::from_raw(arg.cast::<CRecorder>()) });
        }
        let sends = probe.sends()?;
        let tasks = probe.send_tasks()?;
        assert!(posted);
        assert_eq!(r, 0);
        assert_eq!(again, EINVAL.to_errno());
        assert_eq!(async_again, EINVAL.to_errno());
        assert!(released && unpinned);
        // While `release` ran, `owner` was pinned once more than before the call.
        assert_eq!(
            i64::from(ASYNC_REFCOUNT_AT_RELEASE.load(Relaxed)),
            i64::from(before) + 1
        );
        // Neither the flush nor the release ran in the caller's task.
        assert_eq!(tasks.len(), 1);
        assert!(tasks.iter().all(|&t| t != me));
        assert!(ASYNC_RELEASE_TASK.load(Relaxed) != me);
        // The flush reached the send handler before the release.
        assert_eq!(ASYNC_SENDS_AT_RELEASE.load(Relaxed), 1);
        assert_eq!(sends.first().map(|s| s.2), Some(WC_FLUSH));
        Ok(())
    }
}
