// SPDX-License-Identifier: GPL-2.0

//! Whole transfers with a peer that runs RMPP itself: a second kernel-RMPP agent on the loopback
//! fabric (lossy and slow wires included), and ib_core or rmad on rxe0.

use super::*;

// `assert!` and `assert_eq!` that fail the running KUnit case instead of panicking, like those
// the suite module defines for its own cases.
macro_rules! assert {
    ($c:expr $(,)?) => {{
        kernel::kunit_assert!(
            "rmad_rmpp_send",
            c"src/testing/suites/rmpp_send/peers.rs",
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
            c"src/testing/suites/rmpp_send/peers.rs",
            0,
            $l,
            $r
        );
    }};
}

pub(super) fn kernel_rmpp_peers_carry_1_mib() -> Result {
    // rmad to rmad, both kernel RMPP: 1 MiB is 5 243 segments, windowed by the receiver's
    // ACKs (W = 64); one message of 56 + 1 048 576 bytes at P, every byte in place, and
    // SUCCESS at R with no retry: every segment transmitted once.
    let t = Pair::new(Peer::Kernel)?;
    let _h = post(t.transfer(40, 1 << 20, 0, 0)?)?;
    let completed = t.completions(1);
    let _ = t.settle();
    let got = t.ptap.got()?;
    let done = t.rtap.done()?;
    let stats = t.r.stats();
    let pstats = t.p.rmpp_stats();
    pr_info!(
        "rmpp_send: 1 MiB: {} transmissions, {} ACKs from the receiver\n",
        stats.transmitted,
        pstats.acks
    );
    t.finish()?;
    assert!(completed);
    assert_eq!(got.len(), 1);
    assert_eq!(
        got.first().map(|g| (g.len, g.intact)),
        Some((HDR + (1 << 20), true))
    );
    assert_eq!(
        &done[..],
        &[Done {
            status: WcStatus::Success,
            vendor_err: 0,
            retries: 0
        }][..]
    );
    assert_eq!(stats.transmitted, 5243);
    assert_eq!(pstats.completed, 1);
    Ok(())
}

pub(super) fn kernel_rmpp_peers_recover_a_lost_segment_and_a_lost_ack() -> Result {
    // The first segment and then the first ACK are lost: each is recovered by an ACK
    // timeout (2 s with no response expected: nothing is measured yet) and a go-back-N
    // retry, and 64 KiB (328 segments) arrive intact; the two retries show in the send's
    // count, and nothing else adds one (a later window whose ACK is slower than the
    // measured wait is probed again without using a retry).
    let t = Pair::new(Peer::Kernel)?;
    t.env.fabric().set_knobs(|k| {
        k.drop_requests = 1;
        k.drop_responses = 1;
    });
    let _h = post(t.transfer(41, 64 << 10, 0, 2)?)?;
    let completed = t.completions(1);
    let _ = t.settle();
    let got = t.ptap.got()?;
    let done = t.rtap.done()?;
    let lost = t.env.fabric().stats().lost;
    t.finish()?;
    assert!(completed);
    assert_eq!(lost, 2);
    assert_eq!(
        got.first().map(|g| (g.len, g.intact)),
        Some((HDR + (64 << 10), true))
    );
    assert_eq!(got.len(), 1);
    assert_eq!(done.len(), 1);
    assert_eq!(
        done.first().map(|d| (d.status, d.vendor_err)),
        Some((WcStatus::Success, 0))
    );
    assert_eq!(done.first().map(|d| d.retries), Some(2));
    Ok(())
}

pub(super) fn kernel_rmpp_responder_answers_256_kib_over_a_slow_lossy_wire() -> Result {
    // The responder role: R answers P's GET with a segmented GET_RESP of 256 KiB (no
    // response to wait for, so only ACKs drive it), over a wire that takes 1 ms each way
    // and loses a few segments and ACKs: P reassembles it once, intact, and R's answer
    // completes with SUCCESS.
    let t = Pair::new(Peer::Kernel)?;
    t.r.unregister()?;
    let server = crate::testing::fabric::rmpp::Server::new(256 << 10)?;
    let r = Agent::register(
        &t.env.engine,
        &t.env.transport,
        AgentConfig {
            port: 1,
            qp_type: QpType::Gsi,
            reg: Some(reg(SA)),
            rmpp_version: 1,
            flags: 0,
            retry: Default::default(),
            send_handler: Some(server.clone()),
            recv_handler: Some(server.clone()),
        },
    )?;
    t.env.fabric().set_knobs(|k| k.delay_ms = 1);
    let get = mad_to(
        &t.p,
        1,
        mad_hdr(
            SA,
            wire::IB_MGMT_METHOD_GET,
            wire::make_tid(t.p.hi_tid, 0x99),
        ),
        1,
        None,
    )?;
    let mut get = get;
    get.set_timeout_ms(25_000);
    let _h = post(get)?;
    let mut lossy = 0;
    let done = wait_for(|| {
        lossy += 1;
        if lossy % 200 == 0 {
            t.env.fabric().set_knobs(|k| {
                k.drop_requests = 1;
                k.drop_responses = 1;
            });
        }
        server.figures().1 + server.figures().2 > 0
    }) || wait_for(|| server.figures().1 + server.figures().2 > 0);
    let _ = t.settle();
    let figures = server.figures();
    let got = t.ptap.got()?;
    let lost = t.env.fabric().stats().lost;
    pr_info!(
        "rmpp_send: responder 256 KiB: answers {:?}, {} lost, P transfers {:?}\n",
        figures,
        lost,
        t.p.rmpp_stats()
    );
    r.unregister()?;
    t.p.unregister()?;
    assert!(done);
    assert_eq!((figures.0, figures.1, figures.2), (1, 1, 0));
    assert_eq!(
        got.first().map(|g| (g.matched, g.len, g.intact)),
        Some((true, HDR + (256 << 10), true))
    );
    Ok(())
}

pub(super) fn rxe_rmad_responder_answers_rmad_with_a_segmented_response() -> Result {
    // rmad on both ends of rxe0: a kernel-RMPP rmad agent registered for the SA class
    // (ib_core forwards it the GET) answers with 20 000 bytes from the private QP; the
    // requester's ACKs come back to that private QP, which takes them although they are
    // requests (Documentation/behaviour.md §8.21). One message, intact, and SUCCESS on
    // both sides.
    let tap = Tap::new()?;
    let found = rxe_rmpp_agent(&tap)?;
    assert!(found.is_some());
    let Some((port, r)) = found else {
        return Ok(());
    };
    let engine = crate::verbs::verbs_engine().ok_or(ENODEV)?;
    let transport: Arc<dyn Transport<Agent>> = port.clone();
    let server = crate::testing::fabric::rmpp::Server::new(20_000)?;
    let s = Agent::register(
        &engine,
        &transport,
        AgentConfig {
            port: 1,
            qp_type: QpType::Gsi,
            reg: Some(reg(SA)),
            rmpp_version: 1,
            flags: 0,
            retry: Default::default(),
            send_handler: Some(server.clone()),
            recv_handler: Some(server.clone()),
        },
    );
    let Ok(s) = s else {
        r.unregister()?;
        assert!(s.is_ok());
        return Ok(());
    };
    let mut get = crate::testing::requests::mad(&r, SA, wire::IB_MGMT_METHOD_GET, 61)?;
    get.set_ah(Some(gid_address(port.gid(1, 0).ok_or(ENODEV)?, 0)));
    get.set_timeout_ms(20_000);
    let posted = post(get).is_ok();
    let done = wait_for(|| tap.done().is_ok_and(|d| !d.is_empty()));
    let answered = wait_for(|| server.figures().1 + server.figures().2 > 0);
    let figures = server.figures();
    let got = tap.got()?;
    let d = tap.done()?;
    pr_info!(
        "rmpp_send: rxe0 rmad responder: answers {:?}, requester {:?}, port {:?}\n",
        figures,
        r.rmpp_stats(),
        port.drops().requests
    );
    s.unregister()?;
    r.unregister()?;
    assert!(posted);
    assert!(done);
    assert!(answered);
    assert_eq!((figures.0, figures.1, figures.2), (1, 1, 0));
    assert_eq!(
        got.first().map(|g| (g.matched, g.len, g.intact)),
        Some((true, HDR + 20_000, true))
    );
    assert_eq!(d.first().map(|x| x.status), Some(WcStatus::Success));
    Ok(())
}

pub(super) fn response_first_window_is_1_whatever_the_requester_announced() -> Result {
    // The deviation of behaviour §8.14 (no `repwin`): P's GET, then an ACK(0, 10) for it
    // (a requester announcing a window of 10 before the response, as a non-Linux one may;
    // C would send segments 1-10 at once). R's 10-segment GET_RESP still sends segment 1
    // alone; P's ACK(1, 10) (method GET, reaching R through its registration) lets 2-10
    // go, and ACK(10, 10) completes the response with SUCCESS.
    let t = Pair::new(Peer::Script)?;
    let ptid = wire::make_tid(t.p.hi_tid, 9);
    let get = wire::IB_MGMT_METHOD_GET;
    post(mad_to(&t.p, 1, mad_hdr(SA, get, ptid), 1, None)?)?;
    let asked = t.settle();
    let p_ack = |seg: u32, newwin: u32| -> Result {
        let mut buf = mad_to(&t.p, 1, mad_hdr(SA, get, ptid), 1, None)?;
        RmppHdr {
            version: wire::IB_MGMT_RMPP_VERSION,
            rmpp_type: wire::IB_MGMT_RMPP_TYPE_ACK,
            flags: A,
            seg_num: seg,
            paylen_newwin: newwin,
            ..RmppHdr::default()
        }
        .write(buf.mad_mut())
        .map_err(|_| EINVAL)?;
        post(buf).map(|_| ())
    };
    p_ack(0, 10)?;
    let announced = t.settle();
    let mut resp = segmented(&t.r, wire::IB_MGMT_METHOD_GET_RESP, ptid, 2000)?;
    resp.set_ah(Some(Address {
        sl: 0,
        dlid: 2,
        src_path_bits: 0,
        grh: None,
    }));
    resp.set_retries(3);
    let _h = post(resp)?;
    let idle1 = t.settle();
    let first = t.ptap.seg_nums()?;
    p_ack(1, 10)?;
    let idle2 = t.settle();
    let second = t.ptap.seg_nums()?;
    p_ack(10, 10)?;
    let completed = t.completions(1);
    let done = t.rtap.done()?;
    t.finish()?;
    assert!(asked && announced && idle1 && idle2);
    assert_eq!(&first[..], &[1][..]);
    assert_eq!(&second[..], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10][..]);
    assert!(completed);
    assert_eq!(
        done.first().map(|d| (d.status, d.retries)),
        Some((WcStatus::Success, 0))
    );
    Ok(())
}

pub(super) fn rxe_segmented_request_to_ib_core_answered_with_a_segmented_response() -> Result {
    // Interoperation with ib_core's RMPP on rxe0, both directions in one exchange: rmad
    // sends a GET of 20 000 bytes (100 segments) to a kernel-RMPP ib_core agent, which
    // reassembles it (its ACKs window rmad's segments) and answers with 20 000 bytes of its
    // own, which rmad reassembles and matches. rmad's send completes with SUCCESS and
    // ib_core's with SUCCESS too (it got rmad's final ACK).
    let tap = Tap::new()?;
    let found = rxe_rmpp_agent(&tap)?;
    // The test VM always creates rxe0; without it the suite fails.
    assert!(found.is_some());
    let Some((port, r)) = found else {
        return Ok(());
    };
    let responder = IbResponder::start_rmpp(&port, SA, 20_000);
    assert!(responder.is_some());
    let Some(responder) = responder else {
        r.unregister()?;
        return Ok(());
    };
    let tid = wire::make_tid(r.hi_tid, 60);
    let mut buf = segmented(&r, wire::IB_MGMT_METHOD_GET, tid, 20_000)?;
    // To the IPv6 link-local GID (ib_core's RMPP over RoCEv2 matches ACKs there only,
    // Documentation/behaviour.md §8.21).
    buf.set_ah(Some(gid_address(port.gid(1, 0).ok_or(ENODEV)?, 0)));
    buf.set_timeout_ms(60_000);
    buf.set_retries(3);
    let count = buf.seg_count();
    let posted = post(buf).is_ok();
    let done = wait_for(|| tap.done().is_ok_and(|d| !d.is_empty()));
    let acked = wait_for(|| responder.sent() == (1, 0));
    let sent = responder.sent();
    drop(responder);
    let got = tap.got()?;
    let d = tap.done()?;
    let stats = r.stats();
    r.unregister()?;
    pr_info!(
        "rmpp_send: rxe0: {} segments, {} transmissions, ib_core answers {:?}\n",
        count,
        stats.transmitted,
        sent
    );
    assert!(posted);
    assert_eq!(count, 100);
    assert!(done);
    assert!(acked);
    assert_eq!(
        got.first().map(|g| (g.matched, g.len, g.intact)),
        Some((true, HDR + 20_000, true))
    );
    assert_eq!(d.first().map(|x| x.status), Some(WcStatus::Success));
    Ok(())
}
