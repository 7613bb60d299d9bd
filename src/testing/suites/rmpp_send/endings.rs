// SPDX-License-Identifier: GPL-2.0

//! Transfers that end early: STOPs, ABORTs and bad ACKs from the peer, hostile control storms, and
//! cancellation at each stage (scenarios 56–58 of Documentation/behaviour.md §6).

use super::*;

// `assert!` and `assert_eq!` that fail the running KUnit case instead of panicking, like those
// the suite module defines for its own cases.
macro_rules! assert {
    ($c:expr $(,)?) => {{
        kernel::kunit_assert!(
            "rmad_rmpp_send",
            c"src/testing/suites/rmpp_send/endings.rs",
            0,
            $c
        );
    }};
}
#[allow(unused_macros)]
macro_rules! assert_eq {
    ($l:expr, $r:expr $(,)?) => {{
        kernel::kunit_assert_eq!(
            "rmad_rmpp_send",
            c"src/testing/suites/rmpp_send/endings.rs",
            0,
            $l,
            $r
        );
    }};
}

pub(super) fn stop_abort_and_bad_acks_end_with_rem_abort_err() -> Result {
    // Scenarios 56 and 58: the peer's STOP(RESX) and ABORT(T2L) end the send with REM_ABORT_ERR and
    // the RMPP status in vendor_err; an ACK whose window is below its segment (W2S) and an
    // ACK beyond the window (S2B) do too, and draw C's ABORT with that status; so do an
    // RMPP message of an unknown version (UNV) and one of an unknown type (BADT), as in
    // C's `abort_send` and `nack_recv`. A STOP for a send that is fully ACKed changes
    // nothing.
    let t = Pair::new(Peer::Script)?;
    let v = wire::IB_MGMT_RMPP_VERSION;
    let cases: [(u32, u8, u8, u8, u32, u32); 6] = [
        (
            10,
            v,
            wire::IB_MGMT_RMPP_TYPE_STOP,
            Status::Resx.code(),
            0,
            0,
        ),
        (
            11,
            v,
            wire::IB_MGMT_RMPP_TYPE_ABORT,
            Status::T2l.code(),
            0,
            0,
        ),
        (12, v, wire::IB_MGMT_RMPP_TYPE_ACK, 0, 3, 2),
        (13, v, wire::IB_MGMT_RMPP_TYPE_ACK, 0, 4, 4),
        (15, 2, wire::IB_MGMT_RMPP_TYPE_ACK, 0, 1, 2),
        (16, v, 9, 0, 1, 2),
    ];
    for (i, (lo, version, ty, status, seg, win)) in cases.into_iter().enumerate() {
        let _h = post(t.transfer(lo, 1000, 0, 0)?)?;
        let _ = t.settle();
        t.control_v(lo, version, ty, status, seg, win)?;
        let _ = t.completions(i.saturating_add(1));
    }
    let _h = post(t.transfer(14, 200, 0, 0)?)?;
    let _ = t.settle();
    t.ack(14, 1, 1)?;
    let acked = t.completions(7);
    t.control(14, wire::IB_MGMT_RMPP_TYPE_STOP, 1, 0, 0)?;
    let _ = t.settle();
    let done = t.rtap.done()?;
    let controls = t.ptap.controls()?;
    let segs = t.ptap.seg_nums()?;
    t.finish()?;
    let statuses: KVec<(WcStatus, u32)> = {
        let mut v = KVec::new();
        for d in done.iter() {
            v.push((d.status, d.vendor_err), GFP_KERNEL)?;
        }
        v
    };
    let rae = WcStatus::RemAbortErr;
    assert!(acked);
    assert_eq!(
        &statuses[..],
        &[
            (rae, 1),
            (rae, 118),
            (rae, u32::from(Status::W2s.code())),
            (rae, u32::from(Status::S2b.code())),
            (rae, u32::from(Status::Unv.code())),
            (rae, u32::from(Status::Badt.code())),
            (WcStatus::Success, 0)
        ][..]
    );
    let abort = |s: Status| (wire::IB_MGMT_RMPP_TYPE_ABORT, s.code());
    let sent: KVec<(u8, u8)> = {
        let mut v = KVec::new();
        for c in controls.iter() {
            v.push((c.1, c.2), GFP_KERNEL)?;
        }
        v
    };
    assert_eq!(
        &sent[..],
        &[
            abort(Status::W2s),
            abort(Status::S2b),
            abort(Status::Unv),
            abort(Status::Badt)
        ][..]
    );
    // One segment each: nothing went out after the end.
    assert_eq!(&segs[..], &[1, 1, 1, 1, 1, 1, 1][..]);
    Ok(())
}

pub(super) fn hostile_control_storm_each_send_ends_once() -> Result {
    // A hostile peer against segmented sends: eight SETs of 20 segments (two retries per
    // window, no response expected) get only 1 500 random ACKs, STOPs, ABORTs and RMPP
    // messages of unknown type or version, with random statuses, SegmentNumbers and
    // windows (the edges 0, 1, 19, 20, 21, 2^31 and 2^32 - 1 among them), on their TIDs
    // and on two TIDs of no send. Nothing panics (the kernel would), each send completes
    // exactly once with SUCCESS, REM_ABORT_ERR or RESP_TIMEOUT_ERR, some are aborted, no
    // segment beyond 20 goes out, and a clean transfer afterwards completes.
    let t = Pair::new(Peer::Script)?;
    for lo in 0..8u32 {
        let _h = post(t.transfer(0x100 + lo, 20 * 200, 0, 2)?)?;
    }
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let edges = [0u32, 1, 2, 19, 20, 21, 0x8000_0000, u32::MAX];
    let pick = |r: u64, shift: u32, or: u32| {
        let i = usize::try_from((r >> shift) % 12).unwrap_or(0);
        edges.get(i).copied().unwrap_or(or)
    };
    for i in 0..1500u32 {
        let r = next();
        let lo = 0x100 + u32::try_from(r % 10).unwrap_or(0);
        let rmpp_type = match (r >> 8) % 8 {
            0..=3 => wire::IB_MGMT_RMPP_TYPE_ACK,
            4 => wire::IB_MGMT_RMPP_TYPE_STOP,
            5 => wire::IB_MGMT_RMPP_TYPE_ABORT,
            6 => 0,
            _ => 9,
        };
        let version = if (r >> 12) % 16 == 0 {
            2
        } else {
            wire::IB_MGMT_RMPP_VERSION
        };
        let status = if (r >> 16) % 8 == 0 {
            u8::try_from((r >> 20) % 256).unwrap_or(0)
        } else {
            0
        };
        let seg = pick(r, 28, u32::try_from((r >> 32) % 24).unwrap_or(0));
        let win = pick(
            r,
            36,
            seg.saturating_add(u32::try_from((r >> 40) % 8).unwrap_or(0)),
        );
        t.control_v(lo, version, rmpp_type, status, seg, win)?;
        if i % 100 == 99 {
            let _ = t.settle();
        }
    }
    let ended = t.completions(8);
    let _ = t.settle();
    // A second completion of any of them would show by now.
    sleep_ms(500);
    let done = t.rtap.done()?;
    let segs = t.ptap.seg_nums()?;
    let _h = post(t.transfer(0x200, 200, 0, 0)?)?;
    let _ = t.settle();
    t.ack(0x200, 1, 1)?;
    let clean = t.completions(9);
    let after = t.rtap.done()?;
    // The handler records a completion before it returns, and the agent counts the send
    // as returned only once it has: wait for the count rather than read it at once.
    let drained = wait_for(|| t.r.outstanding() == 0);
    t.finish()?;
    let ok = |d: &Done| {
        matches!(
            d.status,
            WcStatus::Success | WcStatus::RemAbortErr | WcStatus::RespTimeoutErr
        )
    };
    assert!(ended);
    assert_eq!(done.len(), 8);
    assert!(done.iter().all(ok));
    assert!(done.iter().any(|d| d.status == WcStatus::RemAbortErr));
    assert!(segs.iter().all(|n| (1..=20).contains(n)));
    assert!(clean);
    assert_eq!(after.len(), 9);
    assert_eq!(after.last().map(|d| d.status), Some(WcStatus::Success));
    assert!(drained);
    Ok(())
}

pub(super) fn abort_while_a_segment_is_in_flight_is_rem_abort_err() -> Result {
    // §7.2 item 5 not copied (behaviour §8.14): the peer's ABORT arrives before segment
    // 1's send completion (the segment itself is lost, the ABORT overtakes the
    // completion). C marks the send done and reports the completion's SUCCESS; rmad
    // reports REM_ABORT_ERR with the status, at that completion.
    let t = Pair::new(Peer::Script)?;
    t.env.fabric().set_knobs(|k| {
        k.hold = true;
        k.drop_requests = 1;
    });
    let h = post(t.transfer(20, 1000, 0, 0)?)?;
    t.control(
        20,
        wire::IB_MGMT_RMPP_TYPE_ABORT,
        Status::Unspec.code(),
        0,
        0,
    )?;
    let promoted = t.env.fabric().promote_recv();
    t.env.fabric().release(1);
    let early = wait_state(&t.r, &h, SendState::EarlyResp);
    t.env.fabric().set_knobs(|k| k.hold = false);
    t.env.fabric().release(16);
    let completed = t.completions(1);
    let done = t.rtap.done()?;
    t.finish()?;
    assert!(promoted);
    assert!(early);
    assert!(completed);
    assert_eq!(
        &done[..],
        &[Done {
            status: WcStatus::RemAbortErr,
            vendor_err: u32::from(Status::Unspec.code()),
            retries: 0
        }][..]
    );
    Ok(())
}

pub(super) fn cancel_at_each_stage_flushes_and_later_acks_are_ignored() -> Result {
    // Scenario 57: cancel with segment 1 in flight, while the send waits for an ACK, and while it waits
    // for the response after the last ACK: WR_FLUSH_ERR each time; a second cancel is
    // EINVAL; ACKs that come after open no window and send nothing.
    let t = Pair::new(Peer::Script)?;
    let mut results = KVec::new();
    // In flight.
    t.env.fabric().set_knobs(|k| k.hold = true);
    let h = post(t.transfer(30, 1000, 0, 0)?)?;
    results.push(h.cancel().is_ok(), GFP_KERNEL)?;
    results.push(h.cancel() == Err(EINVAL), GFP_KERNEL)?;
    t.env.fabric().set_knobs(|k| k.hold = false);
    t.env.fabric().release(16);
    let _ = t.settle();
    t.ack(30, 1, 5)?;
    // Waiting for an ACK.
    let h = post(t.transfer(31, 1000, 0, 0)?)?;
    results.push(wait_state(&t.r, &h, SendState::WaitResp), GFP_KERNEL)?;
    results.push(h.cancel().is_ok(), GFP_KERNEL)?;
    let _ = t.settle();
    t.ack(31, 1, 5)?;
    // Waiting for the response.
    let h = post(t.transfer(32, 200, 30_000, 0)?)?;
    let _ = t.settle();
    t.ack(32, 1, 1)?;
    let _ = t.settle();
    results.push(t.r.send_state(&h) == Some(SendState::WaitResp), GFP_KERNEL)?;
    results.push(h.cancel().is_ok(), GFP_KERNEL)?;
    let all = t.completions(3);
    let _ = t.settle();
    let done = t.rtap.done()?;
    let segs = t.ptap.seg_nums()?;
    t.finish()?;
    assert!(results.iter().all(|r| *r));
    assert!(all);
    assert_eq!(done.len(), 3);
    assert!(done.iter().all(|d| d.status == WcStatus::WrFlushErr));
    assert_eq!(&segs[..], &[1, 1, 1][..]);
    Ok(())
}
