// SPDX-License-Identifier: GPL-2.0

//! Group E: unregistration (scenarios 49–52).

use super::*;

// `assert!` and `assert_eq!` that fail the running KUnit case instead of panicking, like those
// the suite module defines for its own cases.
macro_rules! assert {
    ($c:expr $(,)?) => {{
        kernel::kunit_assert!(
            "rmad_conformance",
            c"src/testing/suites/conformance/unregister.rs",
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
            c"src/testing/suites/conformance/unregister.rs",
            0,
            $l,
            $r
        );
    }};
}

/// Runs `f` on the system workqueue and records marker `m` on `rec` when it returns.
fn spawn_marked(rec: &Arc<Recorder>, m: u32, f: impl FnOnce() + Send + 'static) -> Result {
    let r = rec.clone();
    crate::sys::workqueue::system_dfl()
        .try_spawn(GFP_KERNEL, move || {
            f();
            r.mark(m);
        })
        .map_err(|_| ENOMEM)
}

pub(super) fn s49_unregister_flushes_everything() -> Result {
    let env = Env::new()?;
    let rec = Recorder::new(Behaviour::default())?;
    let a = sa_agent(&env, &rec)?;
    let handles = post_sa(&a, 0..16, 60_000)?;
    // Every w must be waiting before the fabric holds completions.
    let w_ok = handles
        .iter()
        .all(|h| wait_state(&a, h, SendState::WaitResp));
    // q: queued behind the full agent. s: in flight, its completion held.
    let q = post(request(
        &a,
        wire::IB_MGMT_CLASS_SUBN_ADM,
        100,
        B,
        60_000,
        0,
    )?)?;
    env.fabric().set_knobs(|k| k.hold = true);
    let s = post(request(&a, CLASS, 200, B, 60_000, 0)?)?;
    let states = (a.send_state(&q), a.send_state(&s));
    let a2 = a.clone();
    spawn_marked(&rec, 1, move || {
        let _ = a2.unregister();
    })?;
    // The waiting and queued sends are flushed at once, the one in flight is not.
    let flushed = rec.wait_sends(17);
    sleep_ms(100);
    let early = (rec.send_count(), rec.has_mark(1));
    env.fabric().set_knobs(|k| k.hold = false);
    let returned = rec.wait_until(|c| c.contains(&Call::Mark(1)));
    let calls = rec.calls()?;
    drop(handles);
    let _ = (q, s);
    assert!(w_ok);
    assert_eq!(
        states,
        (Some(SendState::Queued), Some(SendState::SendStart))
    );
    assert!(flushed);
    assert_eq!(early, (17, false));
    assert!(returned);
    // All 18 flushes came before unregister returned.
    let flushes = calls
        .iter()
        .take_while(|c| !matches!(c, Call::Mark(1)))
        .filter(|c| matches!(c, Call::Send { wc, .. } if wc.status == WcStatus::WrFlushErr))
        .count();
    assert_eq!(flushes, 18);
    Ok(())
}

pub(super) fn s50_unregister_waits_for_buffers() -> Result {
    let (_env, rec, a) = setup(Behaviour::default())?;
    let buf = a.create_mad(1, GFP_KERNEL)?;
    let a2 = a.clone();
    spawn_marked(&rec, 1, move || {
        let _ = a2.unregister();
    })?;
    sleep_ms(300);
    let blocked = !rec.has_mark(1);
    drop(buf);
    let returned = rec.wait_until(|c| c.contains(&Call::Mark(1)));
    assert!(blocked);
    assert!(returned);
    Ok(())
}

pub(super) fn s51_nothing_after_unregister() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    let (p, prec) = peer(&env, CLASS)?;
    let _h = post(request(&a, CLASS, 51, B, 60_000, 0)?)?;
    let seen = prec.wait_recvs(1);
    a.unregister()?;
    let after = rec.calls()?.len();
    // A late response carrying the old hi_tid is dropped.
    answer(&p, wire::make_tid(a.hi_tid, 51), CLASS, 1, None)?;
    sleep_ms(300);
    let later = rec.calls()?.len();
    let reject = errno(&a.create_mad(1, GFP_KERNEL));
    finish(&env, &[&prec], &[&p])?;
    assert!(seen);
    assert_eq!(after, 1);
    assert_eq!(later, 1);
    assert_eq!(reject, ESHUTDOWN.to_errno());
    Ok(())
}

pub(super) fn s52_unregister_from_own_handler_refused() -> Result {
    let (_env, rec, a) = setup(Behaviour {
        unregister_in_send: true,
        ..Behaviour::default()
    })?;
    let _h = post(request(&a, CLASS, 52, B, 0, 0)?)?;
    let done = rec.wait_sends(1);
    sleep_ms(50);
    let results = rec.inner_results()?;
    a.unregister()?;
    assert!(done);
    assert_eq!(&results[..], &[EDEADLK.to_errno()][..]);
    Ok(())
}
