// SPDX-License-Identifier: GPL-2.0

//! Group B: the basic lifecycle of a send: success, timeouts, retries, early and duplicate
//! responses, matching rules, the order of timeouts (scenarios 15–24).

use super::*;

// `assert!` and `assert_eq!` that fail the running KUnit case instead of panicking, like those
// the suite module defines for its own cases.
macro_rules! assert {
    ($c:expr $(,)?) => {{
        kernel::kunit_assert!(
            "rmad_conformance",
            c"src/testing/suites/conformance/lifecycle.rs",
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
            c"src/testing/suites/conformance/lifecycle.rs",
            0,
            $l,
            $r
        );
    }};
}

pub(super) fn s15_no_timeout_success_once() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    let h = post(request(&a, CLASS, 15, B, 0, 0)?)?;
    let done = rec.wait_sends(1);
    let late_cancel = h.cancel().map_err(|e| e.to_errno()).err();
    sleep_ms(50);
    let calls = rec.calls()?;
    let me = kernel::task::Task::current_raw().addr();
    finish(&env, &[&rec], &[&a])?;
    assert!(done);
    assert_eq!(late_cancel, Some(EINVAL.to_errno()));
    assert_eq!(calls.len(), 1);
    let ok = matches!(calls.first(), Some(Call::Send { tag: 15, wc, retries: 0, task })
        if wc.status == WcStatus::Success && wc.vendor_err == 0 && *task != me);
    assert!(ok);
    Ok(())
}

pub(super) fn s16_response_then_success_same_thread() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    let (b, brec) = env.responder(2, CLASS)?;
    let _h = post(request(&a, CLASS, 16, B, 5000, 2)?)?;
    let done = rec.wait_sends(1);
    let calls = rec.calls()?;
    finish(&env, &[&rec, &brec], &[&a, &b])?;
    assert!(done);
    assert_eq!(calls.len(), 2);
    let (recv_task, ok_recv) = match calls.first() {
        Some(Call::Recv {
            tag: Some(16),
            method,
            task,
            ..
        }) => (*task, *method == wire::IB_MGMT_METHOD_GET_RESP),
        _ => (0, false),
    };
    let ok_send = matches!(calls.get(1), Some(Call::Send { tag: 16, wc, retries: 0, task })
        if wc.status == WcStatus::Success && *task == recv_task);
    assert!(ok_recv);
    assert!(ok_send);
    Ok(())
}

pub(super) fn s17_timeout_after_all_retries() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    // Nobody is registered for the class on port 2: requests go unanswered.
    let start = Instant::<Monotonic>::now();
    let _h = post(request(&a, CLASS, 17, B, 100, 2)?)?;
    let done = rec.wait_sends(1);
    let elapsed = start.elapsed().as_millis();
    let sends = rec.sends()?;
    let sent = env.fabric().stats().transmitted;
    finish(&env, &[&rec], &[&a])?;
    assert!(done);
    assert_eq!(&sends[..], &[(17, WcStatus::RespTimeoutErr, 2)][..]);
    assert_eq!(sent, 3);
    // Three waits of 100 ms each: the timeout never fires early.
    assert!(elapsed >= 300);
    Ok(())
}

pub(super) fn s18_response_to_second_transmission() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    let (b, brec) = env.responder(2, CLASS)?;
    env.fabric().set_knobs(|k| k.drop_requests = 1);
    let _h = post(request(&a, CLASS, 18, B, 1000, 2)?)?;
    let done = rec.wait_sends(1);
    sleep_ms(100);
    let sends = rec.sends()?;
    let recvs = rec.recv_count();
    let requests = env.fabric().stats().transmitted;
    finish(&env, &[&rec, &brec], &[&a, &b])?;
    assert!(done);
    assert_eq!(&sends[..], &[(18, WcStatus::Success, 1)][..]);
    assert_eq!(recvs, 1);
    // Two requests from A and one response from B: no third transmission.
    assert_eq!(requests, 3);
    Ok(())
}

pub(super) fn s19_early_response() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    let (b, brec) = env.responder(2, CLASS)?;
    let (h, got) = early_response(&env, &a, &rec, 19)?;
    sleep_ms(50);
    let state = a.send_state(&h);
    let before = rec.send_count();
    env.fabric().set_knobs(|k| k.hold = false);
    let done = rec.wait_sends(1);
    let sends = rec.sends()?;
    let early = a.stats().early_responses;
    finish(&env, &[&rec, &brec], &[&a, &b])?;
    assert!(got);
    assert_eq!(state, Some(SendState::EarlyResp));
    assert_eq!(before, 0);
    assert!(done);
    assert_eq!(&sends[..], &[(19, WcStatus::Success, 0)][..]);
    assert_eq!(early, 1);
    Ok(())
}

pub(super) fn s20_duplicate_response_dropped() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    let (b, brec) = env.responder(2, CLASS)?;
    // B's response is delivered twice.
    // A's request is delivered twice: B answers twice, and the second answer is a
    // duplicate for A.
    env.fabric().set_knobs(|k| k.duplicate = 1);
    let _h = post(request(&a, CLASS, 20, B, 5000, 0)?)?;
    let done = rec.wait_sends(1);
    sleep_ms(200);
    let recvs = rec.recv_count();
    let dropped = a.stats().dropped_responses;
    finish(&env, &[&rec, &brec], &[&a, &b])?;
    assert!(done);
    assert_eq!(recvs, 1);
    assert!(dropped >= 1);
    Ok(())
}

pub(super) fn s21_class_mismatch_not_matched() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    let (p, prec) = peer(&env, CLASS)?;
    let h = post(request(&a, CLASS, 21, B, 60_000, 0)?)?;
    let seen = prec.wait_recvs(1);
    answer(
        &p,
        wire::make_tid(a.hi_tid, 21),
        wire::IB_MGMT_CLASS_BM,
        1,
        None,
    )?;
    sleep_ms(200);
    let recvs = rec.recv_count();
    let waiting = a.send_state(&h);
    let cancel = h.cancel();
    let flushed = rec.wait_sends(1);
    let sends = rec.sends()?;
    finish(&env, &[&rec, &prec], &[&a, &p])?;
    assert!(seen);
    assert_eq!(recvs, 0);
    assert_eq!(waiting, Some(SendState::WaitResp));
    assert!(cancel.is_ok());
    assert!(flushed);
    assert_eq!(&sends[..], &[(21, WcStatus::WrFlushErr, 0)][..]);
    Ok(())
}

pub(super) fn s22_address_checks() -> Result {
    // Port 1 answers to four LIDs (LMC 2): 4..7.
    let ports = [
        PortAttr {
            has_smi: true,
            has_cm: true,
            lid: 4,
            lmc: 2,
        },
        Fabric::DEFAULT_PORTS[1],
    ];
    let env = Env::with_ports(ports)?;
    let (p, prec) = peer(&env, CLASS)?;
    let rec = Recorder::new(Behaviour::default())?;
    let a = env.agent(A, &rec, None)?;
    // A request through a GRH; a response without one does not match.
    let mut g = request(&a, CLASS, 1, B, 60_000, 0)?;
    g.set_ah(Some(Address {
        sl: 0,
        dlid: B,
        src_path_bits: 0,
        grh: Some(GrhAttr {
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
            dgid: [0; 16],
            sgid_index: 0,
        }),
    }));
    let hg = post(g)?;
    // A request from path bits 1: responses must come back to LID 4 + 1.
    let hl = post(super::lid_routed_request(&a, 2, 1)?)?;
    let seen = prec.wait_recvs(2);
    answer(&p, wire::make_tid(a.hi_tid, 1), CLASS, 4, None)?;
    answer(&p, wire::make_tid(a.hi_tid, 2), CLASS, 4 + 2, None)?;
    sleep_ms(200);
    let wrong = rec.recv_count();
    answer(&p, wire::make_tid(a.hi_tid, 2), CLASS, 4 + 1, None)?;
    let right = rec.wait_sends(1);
    let sends = rec.sends()?;
    let _ = hg.cancel();
    let _ = hl.cancel();
    finish(&env, &[&rec, &prec], &[&a, &p])?;
    assert!(seen);
    assert_eq!(wrong, 0);
    assert!(right);
    assert_eq!(sends.first().copied(), Some((2, WcStatus::Success, 0)));
    Ok(())
}

pub(super) fn s23_directed_route_smp_skips_address_check() -> Result {
    let env = Env::with_ports(SMI_PORTS)?;
    let prec = Recorder::new(Behaviour::default())?;
    let rec = Recorder::new(Behaviour::default())?;
    let smi = |port: u8, r: &Arc<Recorder>, reg: Option<RegReq>| {
        env.agent_of(QpType::Smi, port, r, true, reg)
    };
    let p = smi(2, &prec, Some(reg(wire::IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE)))?;
    let a = smi(A, &rec, None)?;
    let mut buf = request(
        &a,
        wire::IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE,
        23,
        B,
        60_000,
        0,
    )?;
    buf.set_context([23, 0]);
    let mut smp = a.create_mad(0, GFP_KERNEL)?;
    smp.mad_mut().copy_from_slice(buf.mad());
    smp.set_ah(buf.ah());
    smp.set_timeout_ms(60_000);
    smp.set_context([23, 0]);
    drop(buf);
    let h = post(smp)?;
    let seen = prec.wait_recvs(1);
    // Answer to the permissive LID through a GRH the request never had: only TID and
    // class count for directed-route SMPs.
    let mut resp = p.create_mad(0, GFP_KERNEL)?;
    let hdr = MadHdr {
        base_version: 1,
        mgmt_class: wire::IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE,
        class_version: 1,
        method: wire::IB_MGMT_METHOD_GET_RESP,
        tid: wire::make_tid(a.hi_tid, 23),
        ..MadHdr::default()
    };
    hdr.write(resp.mad_mut()).map_err(|_| EINVAL)?;
    resp.set_ah(Some(Address {
        sl: 0,
        dlid: 1,
        src_path_bits: 0,
        grh: Some(GrhAttr {
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
            dgid: [0xff; 16],
            sgid_index: 1,
        }),
    }));
    resp.set_context([usize::MAX, 0]);
    post(resp)?;
    let matched = rec.wait_sends(1);
    let sends = rec.sends()?;
    drop(h);
    finish(&env, &[&rec, &prec], &[&a, &p])?;
    assert!(seen);
    assert!(matched);
    assert_eq!(&sends[..], &[(23, WcStatus::Success, 0)][..]);
    Ok(())
}

pub(super) fn s24_timeouts_in_expiry_order_then_cancels() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    // The agents' queue is busy while b1 and b2 expire and c is cancelled, so one run of
    // the timeout work sees all three.
    block_completions(&env, 1500)?;
    let _b1 = post(request(&a, CLASS, 1, B, 50, 0)?)?;
    let _b2 = post(request(&a, CLASS, 2, B, 100, 0)?)?;
    let c = post(request(&a, CLASS, 3, B, 60_000, 0)?)?;
    let _ = wait_state(&a, &c, SendState::WaitResp);
    let cancel = c.cancel();
    let done = rec.wait_sends(3);
    let sends = rec.sends()?;
    finish(&env, &[&rec], &[&a])?;
    assert!(cancel.is_ok());
    assert!(done);
    assert_eq!(
        &sends[..],
        &[
            (1, WcStatus::RespTimeoutErr, 0),
            (2, WcStatus::RespTimeoutErr, 0),
            (3, WcStatus::WrFlushErr, 0)
        ][..]
    );
    Ok(())
}

/// The order Documentation/behaviour.md §8.19 describes: sends posted back to back with the same
/// timeout expire in post order (rmad compares expiries in nanoseconds; C, in ticks, reports
/// sends expiring in one tick last in, first out), and several cancels are reported in the
/// order of cancellation (C reports them in reverse).
pub(super) fn q_equal_timeouts_and_cancels_in_order() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    // The agent's queue is busy while the first three expire and the last three are
    // cancelled, so one run of the agent's work reports all six.
    block_completions(&env, 1500)?;
    let mut handles = KVec::new();
    for tag in 1..=3 {
        handles.push(post(request(&a, CLASS, tag, B, 50, 0)?)?, GFP_KERNEL)?;
    }
    for tag in 4..=6 {
        handles.push(post(request(&a, CLASS, tag, B, 60_000, 0)?)?, GFP_KERNEL)?;
    }
    let waiting = handles
        .iter()
        .skip(3)
        .all(|h| wait_state(&a, h, SendState::WaitResp));
    // Cancelled as 6, 4, 5.
    let cancels = [5usize, 3, 4].map(|i| handles.get(i).map(|h| h.cancel().is_ok()));
    let done = rec.wait_sends(6);
    let sends = rec.sends()?;
    finish(&env, &[&rec], &[&a])?;
    assert!(waiting);
    assert_eq!(cancels, [Some(true); 3]);
    assert!(done);
    assert_eq!(
        &sends[..],
        &[
            (1, WcStatus::RespTimeoutErr, 0),
            (2, WcStatus::RespTimeoutErr, 0),
            (3, WcStatus::RespTimeoutErr, 0),
            (6, WcStatus::WrFlushErr, 0),
            (4, WcStatus::WrFlushErr, 0),
            (5, WcStatus::WrFlushErr, 0)
        ][..]
    );
    Ok(())
}

/// Sends with different timeouts, posted interleaved, expire in the order of their due times
/// (the wait queue keeps a run of sends due in order in a list and the others in a tree,
/// src/engine/agent/wait.rs; both must give one order): the 10 ms send posted last first, the
/// 400 ms ones last, equal timeouts in post order.
pub(super) fn q_mixed_timeouts_in_expiry_order() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    // The agent's queue is busy while all seven expire, so one run of the agent's work
    // reports them all, in the order of the wait queue.
    block_completions(&env, 1500)?;
    let timeouts = [400, 100, 250, 100, 400, 50, 10];
    let mut handles = KVec::new();
    for (tag, ms) in (1usize..).zip(timeouts) {
        handles.push(post(request(&a, CLASS, tag, B, ms, 0)?)?, GFP_KERNEL)?;
    }
    let done = rec.wait_sends(timeouts.len());
    let sends = rec.sends()?;
    finish(&env, &[&rec], &[&a])?;
    assert!(done);
    let want = [7usize, 6, 2, 4, 3, 1, 5].map(|tag| (tag, WcStatus::RespTimeoutErr, 0));
    assert_eq!(&sends[..], &want[..]);
    Ok(())
}
