// SPDX-License-Identifier: GPL-2.0

//! Group D: solicited flow control (scenarios 41–48).

use super::*;

// `assert!` and `assert_eq!` that fail the running KUnit case instead of panicking, like those
// the suite module defines for its own cases.
macro_rules! assert {
    ($c:expr $(,)?) => {{
        kernel::kunit_assert!(
            "rmad_conformance",
            c"src/testing/suites/conformance/flow_control.rs",
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
            c"src/testing/suites/conformance/flow_control.rs",
            0,
            $l,
            $r
        );
    }};
}

/// Cancels every handle (stale ones just return `EINVAL`).
fn cancel_all(handles: &[crate::engine::send::SendHandle]) {
    for h in handles {
        let _ = h.cancel();
    }
}

pub(super) fn s41_flow_control_backlog() -> Result {
    let env = Env::new()?;
    let (p, prec) = peer(&env, wire::IB_MGMT_CLASS_SUBN_ADM)?;
    let rec = Recorder::new(Behaviour::default())?;
    let a = sa_agent(&env, &rec)?;
    let limit = a.sol_fc_max;
    let handles = post_sa(&a, 0..20, 60_000)?;
    let sent = env.fabric().stats().transmitted;
    let backlogged = a.stats().backlogged;
    let seen = prec.wait_recvs(16);
    answer(
        &p,
        wire::make_tid(a.hi_tid, 0),
        wire::IB_MGMT_CLASS_SUBN_ADM,
        1,
        None,
    )?;
    let done = rec.wait_sends(1);
    let more = prec.wait_recvs(17);
    let tags = received_tags(&prec)?;
    let probes = rec.probes()?;
    cancel_all(&handles);
    let all = rec.wait_sends(20);
    finish(&env, &[&rec, &prec], &[&a, &p])?;
    assert_eq!(limit, 16);
    assert_eq!(sent, 16);
    assert_eq!(backlogged, 4);
    assert!(seen);
    assert!(done);
    assert!(more);
    // The oldest backlogged send (16) went out, and before the handler of send 0 ran:
    // 16 requests + 1 response + 1 dispatch.
    assert_eq!(tags.get(16).copied(), Some(16));
    assert_eq!(probes.first().copied(), Some((0, 18)));
    assert!(all);
    Ok(())
}

pub(super) fn s42_non_fc_sends_bypass_backlog() -> Result {
    let env = Env::new()?;
    let rec = Recorder::new(Behaviour::default())?;
    let a = sa_agent(&env, &rec)?;
    let handles = post_sa(&a, 0..17, 60_000)?;
    let before = env.fabric().stats().transmitted;
    let h1 = post(request(&a, CLASS, 100, B, 60_000, 0)?)?;
    let h2 = post(request(&a, wire::IB_MGMT_CLASS_SUBN_ADM, 101, B, 0, 0)?)?;
    let after = env.fabric().stats().transmitted;
    let s1 = a.send_state(&h1);
    cancel_all(&handles);
    let _ = h1.cancel();
    drop(h2);
    let all = rec.wait_sends(19);
    finish(&env, &[&rec], &[&a])?;
    assert_eq!(before, 16);
    assert_eq!(after, 18);
    assert!(s1 != Some(SendState::Queued));
    assert!(all);
    Ok(())
}

pub(super) fn s43_cancel_queued_never_transmitted() -> Result {
    let env = Env::new()?;
    let (p, prec) = peer(&env, wire::IB_MGMT_CLASS_SUBN_ADM)?;
    let rec = Recorder::new(Behaviour::default())?;
    let a = sa_agent(&env, &rec)?;
    let handles = post_sa(&a, 0..19, 60_000)?;
    // 16, 17 and 18 are queued; cancel 17.
    let q = handles.get(17).map(|h| (a.send_state(h), h.cancel()));
    let flushed = rec.wait_sends(1);
    let first = rec.sends()?;
    // Free two slots: 16 then 18 go out, 17 never.
    let seen = prec.wait_recvs(16);
    answer(
        &p,
        wire::make_tid(a.hi_tid, 0),
        wire::IB_MGMT_CLASS_SUBN_ADM,
        1,
        None,
    )?;
    answer(
        &p,
        wire::make_tid(a.hi_tid, 1),
        wire::IB_MGMT_CLASS_SUBN_ADM,
        1,
        None,
    )?;
    let more = prec.wait_recvs(18);
    sleep_ms(100);
    let tags = received_tags(&prec)?;
    cancel_all(&handles);
    let all = rec.wait_sends(19);
    finish(&env, &[&rec, &prec], &[&a, &p])?;
    let ok_q = matches!(q, Some((Some(SendState::Queued), Ok(()))));
    assert!(ok_q);
    assert!(flushed);
    assert_eq!(first.first().copied(), Some((17, WcStatus::WrFlushErr, 0)));
    assert!(seen);
    assert!(more);
    assert_eq!(tags.len(), 18);
    assert_eq!(tags.get(16..).map(|t| t == [16, 18]), Some(true));
    assert!(all);
    Ok(())
}

pub(super) fn s44_fc_retry_goes_to_backlog_tail() -> Result {
    let env = Env::new()?;
    let (p, prec) = peer(&env, wire::IB_MGMT_CLASS_SUBN_ADM)?;
    let rec = Recorder::new(Behaviour::default())?;
    let a = sa_agent(&env, &rec)?;
    let mut handles = KVec::new();
    // Send 0 times out quickly with one retry; 1..15 wait long; 16 and 17 are queued.
    handles.push(
        post(request(&a, wire::IB_MGMT_CLASS_SUBN_ADM, 0, B, 200, 1)?)?,
        GFP_KERNEL,
    )?;
    for tag in 1..18 {
        handles.push(
            post(request(
                &a,
                wire::IB_MGMT_CLASS_SUBN_ADM,
                tag,
                B,
                60_000,
                0,
            )?)?,
            GFP_KERNEL,
        )?;
    }
    // 0 expires: it goes behind 17 in the backlog, and its freed slot takes 16.
    let requeued = handles
        .first()
        .is_some_and(|h| wait_state(&a, h, SendState::Queued));
    let seen = prec.wait_recvs(17);
    // Free two more slots: 17, then the retry of 0.
    answer(
        &p,
        wire::make_tid(a.hi_tid, 1),
        wire::IB_MGMT_CLASS_SUBN_ADM,
        1,
        None,
    )?;
    answer(
        &p,
        wire::make_tid(a.hi_tid, 2),
        wire::IB_MGMT_CLASS_SUBN_ADM,
        1,
        None,
    )?;
    let more = prec.wait_recvs(19);
    let tags = received_tags(&prec)?;
    let done0 = rec.wait_until(|c| c.iter().any(|x| matches!(x, Call::Send { tag: 0, .. })));
    let sends = rec.sends()?;
    cancel_all(&handles);
    let all = rec.wait_sends(18);
    finish(&env, &[&rec, &prec], &[&a, &p])?;
    assert!(requeued);
    assert!(seen);
    assert!(more);
    assert_eq!(tags.get(16..).map(|t| t == [16, 17, 0]), Some(true));
    assert!(done0);
    let retried = sends.iter().any(|s| s.0 == 0 && s.2 == 1);
    assert!(retried);
    assert!(all);
    Ok(())
}

pub(super) fn s45_agent_without_recv_handler_has_no_flow_control() -> Result {
    let env = Env::new()?;
    let rec = Recorder::new(Behaviour::default())?;
    let a = env.agent_of(QpType::Gsi, A, &rec, false, None)?;
    let mut handles = KVec::new();
    for tag in 0..1000 {
        handles.push(
            post(request(&a, wire::IB_MGMT_CLASS_CM, tag, B, 60_000, 0)?)?,
            GFP_KERNEL,
        )?;
    }
    let stats = a.stats();
    let limit = a.sol_fc_max;
    cancel_all(&handles);
    let all = rec.wait_sends(1000);
    finish(&env, &[&rec], &[&a])?;
    assert_eq!(limit, 0);
    assert_eq!(stats.backlogged, 0);
    assert_eq!(stats.transmitted, 1000);
    assert!(all);
    Ok(())
}

pub(super) fn s46_queued_time_does_not_count() -> Result {
    let env = Env::new()?;
    let (p, prec) = peer(&env, wire::IB_MGMT_CLASS_SUBN_ADM)?;
    let rec = Recorder::new(Behaviour::default())?;
    let a = sa_agent(&env, &rec)?;
    let handles = post_sa(&a, 0..16, 60_000)?;
    let q = post(request(&a, wire::IB_MGMT_CLASS_SUBN_ADM, 16, B, 300, 0)?)?;
    let queued = a.send_state(&q);
    // Queued for a while, far longer than its timeout.
    sleep_ms(1000);
    let still = a.send_state(&q);
    let seen = prec.wait_recvs(16);
    let start = Instant::<Monotonic>::now();
    answer(
        &p,
        wire::make_tid(a.hi_tid, 0),
        wire::IB_MGMT_CLASS_SUBN_ADM,
        1,
        None,
    )?;
    let done = rec.wait_until(|c| c.iter().any(|x| matches!(x, Call::Send { tag: 16, .. })));
    let waited = start.elapsed().as_millis();
    let sends = rec.sends()?;
    cancel_all(&handles);
    let all = rec.wait_sends(17);
    finish(&env, &[&rec, &prec], &[&a, &p])?;
    assert_eq!(queued, Some(SendState::Queued));
    assert_eq!(still, Some(SendState::Queued));
    assert!(seen);
    assert!(done);
    assert!(sends.contains(&(16, WcStatus::RespTimeoutErr, 0)));
    // The 300 ms wait started at its transmission, not at its post.
    assert!(waited >= 300);
    assert!(all);
    Ok(())
}

pub(super) fn s47_backlog_dispatch_failure() -> Result {
    backlog_dispatch_failure(false, WcStatus::LocQpOpErr)
}

/// Scenario 47 on a device that went away between two batches of its removal's cancels (the
/// transport refuses with `ENODEV`): the send is flushed like the others, `WR_FLUSH_ERR`
/// (Documentation/behaviour.md §8.24).
pub(super) fn s47_backlog_dispatch_into_removed_device_flushed() -> Result {
    backlog_dispatch_failure(true, WcStatus::WrFlushErr)
}

/// Scenario 47, the refused dispatch failing with `ENODEV` if `gone`; the failed send's
/// handler must report `want`.
fn backlog_dispatch_failure(gone: bool, want: WcStatus) -> Result {
    let env = Env::new()?;
    let (p, prec) = peer(&env, wire::IB_MGMT_CLASS_SUBN_ADM)?;
    let rec = Recorder::new(Behaviour::default())?;
    let a = sa_agent(&env, &rec)?;
    let handles = post_sa(&a, 0..18, 60_000)?;
    let seen = prec.wait_recvs(16);
    // B's answer passes; the dispatch of 16 that it triggers fails; 17 is tried next.
    env.fabric().set_knobs(|k| {
        k.pass_before_fail = 1;
        k.fail_posts = 1;
        k.fail_gone = gone;
    });
    answer(
        &p,
        wire::make_tid(a.hi_tid, 0),
        wire::IB_MGMT_CLASS_SUBN_ADM,
        1,
        None,
    )?;
    let two = rec.wait_sends(2);
    let got17 = prec.wait_recvs(17);
    let tags = received_tags(&prec)?;
    let sends = rec.sends()?;
    cancel_all(&handles);
    let all = rec.wait_sends(18);
    finish(&env, &[&rec, &prec], &[&a, &p])?;
    assert!(seen);
    assert!(two);
    assert!(sends.contains(&(16, want, 0)));
    assert!(got17);
    assert_eq!(tags.get(16).copied(), Some(17));
    assert!(all);
    Ok(())
}

pub(super) fn s48_chain_stops_after_queued_element() -> Result {
    let env = Env::new()?;
    let rec = Recorder::new(Behaviour::default())?;
    let a = sa_agent(&env, &rec)?;
    let handles = post_sa(&a, 0..16, 60_000)?;
    let mut chain = KVec::new();
    chain.push(
        request(&a, wire::IB_MGMT_CLASS_SUBN_ADM, 16, B, 60_000, 0)?,
        GFP_KERNEL,
    )?;
    chain.push(request(&a, CLASS, 17, B, 0, 0)?, GFP_KERNEL)?;
    let sent_before = env.fabric().stats().transmitted;
    let r = Agent::post_chain(chain);
    let sent_after = env.fabric().stats().transmitted;
    let (ok, posted, unposted) = match r {
        Ok(c) => {
            let tags: Option<usize> = c.unposted.first().map(|b| b.context()[0]);
            for h in c.posted.iter() {
                let _ = h.cancel();
            }
            (true, c.posted.len(), tags)
        }
        Err(_) => (false, 0, None),
    };
    cancel_all(&handles);
    let all = rec.wait_sends(17);
    sleep_ms(50);
    let count = rec.send_count();
    finish(&env, &[&rec], &[&a])?;
    assert!(ok);
    assert_eq!(posted, 1);
    assert_eq!(unposted, Some(17));
    assert_eq!(sent_before, sent_after);
    assert!(all);
    // 17 was neither transmitted nor completed: it came back to the caller.
    assert_eq!(count, 17);
    Ok(())
}
