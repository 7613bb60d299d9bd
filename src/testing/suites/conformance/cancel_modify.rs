// SPDX-License-Identifier: GPL-2.0

//! Group C: cancel and modify (scenarios 25–40).

use super::*;

// `assert!` and `assert_eq!` that fail the running KUnit case instead of panicking, like those
// the suite module defines for its own cases.
macro_rules! assert {
    ($c:expr $(,)?) => {{
        kernel::kunit_assert!(
            "rmad_conformance",
            c"src/testing/suites/conformance/cancel_modify.rs",
            0,
            $c
        );
    }};
}
#[allow(unused_macros)]
macro_rules! assert_eq {
    ($l:expr, $r:expr $(,)?) => {{
        kernel::kunit_assert_eq!(
            "rmad_conformance",
            c"src/testing/suites/conformance/cancel_modify.rs",
            0,
            $l,
            $r
        );
    }};
}

pub(super) fn s25_cancel_in_wait_resp_flushes() -> Result {
    let (env, rec, a) = setup(Behaviour {
        keep: true,
        ..Behaviour::default()
    })?;
    let h = post(request(&a, CLASS, 25, B, 60_000, 0)?)?;
    let waiting = wait_state(&a, &h, SendState::WaitResp);
    let cancel = h.cancel();
    // Well before the 60 s expiry.
    let flushed = rec.wait_sends(1);
    let sends = rec.sends()?;
    let kept = rec.take_kept();
    let timeout = kept.first().map(|b| b.timeout_ms());
    drop(kept);
    let me = kernel::task::Task::current_raw().addr();
    let other_task = matches!(rec.calls()?.first(), Some(Call::Send { task, .. }) if *task != me);
    finish(&env, &[&rec], &[&a])?;
    assert!(waiting);
    assert!(cancel.is_ok());
    assert!(flushed);
    assert_eq!(&sends[..], &[(25, WcStatus::WrFlushErr, 0)][..]);
    assert_eq!(timeout, Some(0));
    assert!(other_task);
    Ok(())
}

pub(super) fn s26_cancel_in_send_start_flushes_at_completion() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    env.fabric().set_knobs(|k| k.hold = true);
    let h = post(request(&a, CLASS, 26, B, 5000, 0)?)?;
    let state = a.send_state(&h);
    let cancel = h.cancel();
    sleep_ms(100);
    let before = rec.send_count();
    // The transport reports success; the handler still sees the flush.
    env.fabric().set_knobs(|k| k.hold = false);
    let flushed = rec.wait_sends(1);
    let sends = rec.sends()?;
    finish(&env, &[&rec], &[&a])?;
    assert_eq!(state, Some(SendState::SendStart));
    assert!(cancel.is_ok());
    assert_eq!(before, 0);
    assert!(flushed);
    assert_eq!(&sends[..], &[(26, WcStatus::WrFlushErr, 0)][..]);
    Ok(())
}

pub(super) fn s27_double_cancel_einval() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    let h = post(request(&a, CLASS, 27, B, 60_000, 0)?)?;
    let first = h.cancel();
    let second = h.cancel().map_err(|e| e.to_errno()).err();
    let flushed = rec.wait_sends(1);
    sleep_ms(100);
    let count = rec.send_count();
    finish(&env, &[&rec], &[&a])?;
    assert!(first.is_ok());
    assert_eq!(second, Some(EINVAL.to_errno()));
    assert!(flushed);
    assert_eq!(count, 1);
    Ok(())
}

pub(super) fn s28_modify_after_completion_einval() -> Result {
    let (env, rec, a) = setup(Behaviour {
        keep: true,
        ..Behaviour::default()
    })?;
    let h = post(request(&a, CLASS, 28, B, 0, 0)?)?;
    let done = rec.wait_sends(1);
    // The buffer is kept, not freed: the handle is merely stale.
    let m0 = h.modify(0).map_err(|e| e.to_errno()).err();
    let m50 = h.modify(50).map_err(|e| e.to_errno()).err();
    finish(&env, &[&rec], &[&a])?;
    assert!(done);
    assert_eq!(m0, Some(EINVAL.to_errno()));
    assert_eq!(m50, Some(EINVAL.to_errno()));
    Ok(())
}

pub(super) fn s29_cancel_from_recv_handler_einval() -> Result {
    let (env, rec, a) = setup(Behaviour {
        cancel_in_recv: true,
        ..Behaviour::default()
    })?;
    let (b, brec) = env.responder(2, CLASS)?;
    let _h = post(request(&a, CLASS, 29, B, 5000, 0)?)?;
    let done = rec.wait_sends(1);
    let results = rec.inner_results()?;
    let sends = rec.sends()?;
    finish(&env, &[&rec, &brec], &[&a, &b])?;
    assert!(done);
    assert_eq!(&results[..], &[EINVAL.to_errno()][..]);
    assert_eq!(&sends[..], &[(29, WcStatus::Success, 0)][..]);
    Ok(())
}

pub(super) fn s30_cancel_after_early_response_flushes() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    let (b, brec) = env.responder(2, CLASS)?;
    let (h, got) = early_response(&env, &a, &rec, 30)?;
    let cancel = h.cancel();
    env.fabric().set_knobs(|k| k.hold = false);
    let done = rec.wait_sends(1);
    let sends = rec.sends()?;
    let recvs = rec.recv_count();
    finish(&env, &[&rec, &brec], &[&a, &b])?;
    assert!(got);
    assert!(cancel.is_ok());
    assert!(done);
    assert_eq!(recvs, 1);
    assert_eq!(&sends[..], &[(30, WcStatus::WrFlushErr, 0)][..]);
    Ok(())
}

pub(super) fn q_modify_after_early_response_keeps_duplicates_out() -> Result {
    // 7.3 re-arms matching when an early-responded send is modified, so a duplicate response
    // reaches the receive handler twice and a flow-control counter underflows
    // (Documentation/behaviour.md §7.2 item 4). In rmad a modify leaves the send EARLY_RESP, which
    // matches no response.
    let (env, rec, a) = setup(Behaviour::default())?;
    let (b, brec) = env.responder(2, CLASS)?;
    let (h, got) = early_response(&env, &a, &rec, 32)?;
    let m = h.modify(5000);
    // A second response with the same TID, processed while the send is still in flight.
    answer(&b, wire::make_tid(a.hi_tid, 32), CLASS, 1, None)?;
    let start = Instant::<Monotonic>::now();
    while env.fabric().pending() < 4 && start.elapsed().as_millis() < crate::testing::WAIT_MS {
        sleep_ms(5);
    }
    env.fabric().promote_recv();
    env.fabric().release(1);
    sleep_ms(100);
    let still = a.send_state(&h);
    env.fabric().set_knobs(|k| k.hold = false);
    let done = rec.wait_sends(1);
    sleep_ms(200);
    let recvs = rec.recv_count();
    let sends = rec.sends()?;
    finish(&env, &[&rec, &brec], &[&a, &b])?;
    assert!(got);
    assert!(m.is_ok());
    assert_eq!(still, Some(SendState::EarlyResp));
    assert!(done);
    assert_eq!(recvs, 1);
    assert_eq!(&sends[..], &[(32, WcStatus::Success, 0)][..]);
    Ok(())
}

pub(super) fn s31_response_after_cancel_dropped() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    let (p, prec) = peer(&env, CLASS)?;
    let h = post(request(&a, CLASS, 31, B, 60_000, 0)?)?;
    let seen = prec.wait_recvs(1);
    let waiting = wait_state(&a, &h, SendState::WaitResp);
    // The timeout work cannot run while the queue is busy: the response arrives between
    // the cancel and the flush.
    block_completions(&env, 500)?;
    let cancel = h.cancel();
    let state = a.send_state(&h);
    answer(&p, wire::make_tid(a.hi_tid, 31), CLASS, 1, None)?;
    let flushed = rec.wait_sends(1);
    let recvs = rec.recv_count();
    let dropped = a.stats().dropped_responses;
    let sends = rec.sends()?;
    finish(&env, &[&rec, &prec], &[&a, &p])?;
    assert!(seen);
    assert!(waiting);
    assert!(cancel.is_ok());
    assert_eq!(state, Some(SendState::Canceled(CancelWait::TimeoutWork)));
    assert!(flushed);
    assert_eq!(recvs, 0);
    assert_eq!(dropped, 1);
    assert_eq!(&sends[..], &[(31, WcStatus::WrFlushErr, 0)][..]);
    Ok(())
}

pub(super) fn s33_modify_extends_wait_and_retries() -> Result {
    let (env, rec, a) = setup(Behaviour {
        keep: true,
        ..Behaviour::default()
    })?;
    let h = post(request(&a, CLASS, 33, B, 500, 1)?)?;
    let waiting = wait_state(&a, &h, SendState::WaitResp);
    let start = Instant::<Monotonic>::now();
    let m = h.modify(1500);
    // Nothing at the old expiry.
    sleep_ms(1000);
    let early = rec.send_count();
    let done = rec.wait_sends(1);
    let elapsed = start.elapsed().as_millis();
    let sends = rec.sends()?;
    let kept = rec.take_kept();
    let timeout = kept.first().map(|b| b.timeout_ms());
    drop(kept);
    finish(&env, &[&rec], &[&a])?;
    assert!(waiting);
    assert!(m.is_ok());
    assert_eq!(early, 0);
    assert!(done);
    assert_eq!(&sends[..], &[(33, WcStatus::RespTimeoutErr, 1)][..]);
    // The retry waited 1500 ms too.
    assert!(elapsed >= 3000);
    assert_eq!(timeout, Some(1500));
    Ok(())
}

pub(super) fn s34_modify_shortens_wait() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    let h = post(request(&a, CLASS, 34, B, 600_000, 0)?)?;
    let waiting = wait_state(&a, &h, SendState::WaitResp);
    let m = h.modify(50);
    // Handled long before the original ten minutes.
    let done = rec.wait_sends(1);
    let sends = rec.sends()?;
    finish(&env, &[&rec], &[&a])?;
    assert!(waiting);
    assert!(m.is_ok());
    assert!(done);
    assert_eq!(&sends[..], &[(34, WcStatus::RespTimeoutErr, 0)][..]);
    Ok(())
}

pub(super) fn s35_modify_after_cancel_einval() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    env.fabric().set_knobs(|k| k.hold = true);
    let h = post(request(&a, CLASS, 35, B, 5000, 0)?)?;
    let cancel = h.cancel();
    let m = h.modify(100).map_err(|e| e.to_errno()).err();
    let state = a.send_state(&h);
    env.fabric().set_knobs(|k| k.hold = false);
    let done = rec.wait_sends(1);
    let sends = rec.sends()?;
    finish(&env, &[&rec], &[&a])?;
    assert!(cancel.is_ok());
    assert_eq!(m, Some(EINVAL.to_errno()));
    assert_eq!(state, Some(SendState::Canceled(CancelWait::SendCompletion)));
    assert!(done);
    assert_eq!(&sends[..], &[(35, WcStatus::WrFlushErr, 0)][..]);
    Ok(())
}

pub(super) fn s36_modify_send_start_without_timeout_waits() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    env.fabric().set_knobs(|k| k.hold = true);
    let h = post(request(&a, CLASS, 36, B, 0, 1)?)?;
    let m = h.modify(200);
    env.fabric().set_knobs(|k| k.hold = false);
    let waited = wait_state(&a, &h, SendState::WaitResp);
    let done = rec.wait_sends(1);
    let sends = rec.sends()?;
    let sent = env.fabric().stats().transmitted;
    finish(&env, &[&rec], &[&a])?;
    assert!(m.is_ok());
    assert!(waited);
    assert!(done);
    assert_eq!(&sends[..], &[(36, WcStatus::RespTimeoutErr, 1)][..]);
    assert_eq!(sent, 2);
    Ok(())
}

pub(super) fn s37_cancel_and_modify_under_callers_spinlock() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    stack_pin_init!(let lock = new_spinlock_irq!(0u32, "s37"));
    env.fabric().set_knobs(|k| k.hold = true);
    let in_flight = post(request(&a, CLASS, 1, B, 5000, 0)?)?;
    env.fabric().set_knobs(|k| k.hold = false);
    let waiting = post(request(&a, CLASS, 2, B, 60_000, 0)?)?;
    let w = wait_state(&a, &waiting, SendState::WaitResp);
    let codes = {
        // Interrupts are off here; cancel and modify must neither sleep nor call a
        // handler (which would take the same lock, below, and deadlock).
        let mut g = lock.lock();
        *g += 1;
        [
            in_flight.modify(100),
            waiting.modify(60_000),
            waiting.cancel(),
            waiting.cancel(),
            in_flight.cancel(),
        ]
        .map(|r| errno(&r))
    };
    let done = rec.wait_sends(2);
    // Handlers ran afterwards, on another thread, while nothing held the lock.
    let _g = lock.lock();
    drop(_g);
    finish(&env, &[&rec], &[&a])?;
    assert!(w);
    assert!(done);
    assert_eq!(codes[1], 0);
    assert_eq!(codes[2], 0);
    assert_eq!(codes[3], EINVAL.to_errno());
    Ok(())
}

pub(super) fn s40_cancel_in_overflow_still_transmitted() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    env.fabric().set_knobs(|k| {
        k.hold = true;
        k.sq_size = 1;
    });
    let _b1 = post(request(&a, CLASS, 1, B, 0, 0)?)?;
    let b2 = post(request(&a, CLASS, 2, B, 0, 0)?)?;
    // b2 waits in the overflow list: only b1's completion and packet are queued.
    let queued = env.fabric().pending();
    let cancel = b2.cancel();
    env.fabric().set_knobs(|k| k.hold = false);
    let done = rec.wait_sends(2);
    let sends = rec.sends()?;
    let delivered = env.fabric().stats().delivered;
    finish(&env, &[&rec], &[&a])?;
    assert_eq!(queued, 2);
    assert!(cancel.is_ok());
    assert!(done);
    assert_eq!(
        &sends[..],
        &[(1, WcStatus::Success, 0), (2, WcStatus::WrFlushErr, 0)][..]
    );
    // Both packets went out, the cancelled one included.
    assert_eq!(delivered, 2);
    Ok(())
}
