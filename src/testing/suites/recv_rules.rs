// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_recv_rules`: receive-path rules of the C MAD layer
//! (`drivers/infiniband/core/mad.c`: `validate_mad`, `find_mad_agent`, `ib_mad_complete_recv`,
//! `ib_find_send_mad`, `rcv_has_same_gid`, `ib_response_mad`) on the loopback fabric, one test
//! per rule, named for it, each citing the C rule it pins.
//!
//! As in `rmad_conformance`, agent A is a GSI agent on port 1 (LID 1) with recording handlers
//! and no class registration, and requests use class 0x04 unless a test says otherwise; the
//! responder or peer is on port 2 (LID 2). MADs that C drops before any agent are counted in
//! [`Engine::unrouted`](crate::engine::agent::Engine::unrouted), which the tests read as a difference.
//! Each test observes first, tears down, and asserts last.

use crate::{
    engine::{
        agent::Agent,
        send::SendBuf, //
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
        QpType,
        RegReq, //
    },
    testing::{
        block_queue,
        post,
        reg,
        request,
        requests::gid_address,
        suites::conformance::{
            answer,
            finish,
            mad_hdr,
            mad_to,
            peer,
            post_sa,
            received_tags,
            rmpp_agent,
            sa_agent,
            setup,
            A,
            B,
            CLASS,
            SMI_PORTS, //
        },
        wait_for,
        wait_state,
        Behaviour,
        Call,
        Env,
        Recorder, //
    },
};
use kernel::{
    prelude::*,
    sync::Arc, //
};

/// Offset of the OUI of a vendor-class MAD (bytes 37..40).
const OUI: usize = 37;

/// A LID that no port of the loopback fabric has.
const NOWHERE: u16 = 0x55;

/// The SMP class routed by LID.
const SMP: u8 = wire::IB_MGMT_CLASS_SUBN_LID_ROUTED;

/// `buf` with its MAD header changed by `f`.
fn edit(mut buf: SendBuf, f: impl FnOnce(MadHdr) -> MadHdr) -> Result<SendBuf> {
    let hdr = f(MadHdr::parse(buf.mad()).map_err(|_| EINVAL)?);
    hdr.write(buf.mad_mut()).map_err(|_| EINVAL)?;
    Ok(buf)
}

/// Writes `bytes` into the MAD of `buf` from offset `off` on (what does not fit is left out).
fn set_bytes(buf: &mut SendBuf, off: usize, bytes: &[u8]) {
    if let Some(dst) = buf.mad_mut().get_mut(off..) {
        for (d, s) in dst.iter_mut().zip(bytes) {
            *d = *s;
        }
    }
}

/// Posts from `p` (port 2) to QP1 of port 1 an SA GET_RESP with TID `tid` that carries an RMPP
/// DATA header: segment `seg`, RMPP `flags`.
fn rmpp_response(p: &Arc<Agent>, tid: u64, seg: u32, flags: u8) -> Result {
    let hdr = mad_hdr(
        wire::IB_MGMT_CLASS_SUBN_ADM,
        wire::IB_MGMT_METHOD_GET_RESP,
        tid,
    );
    let mut buf = mad_to(p, 1, hdr, 1, None)?;
    set_bytes(
        &mut buf,
        wire::IB_MGMT_MAD_HDR,
        &[wire::IB_MGMT_RMPP_VERSION, wire::IB_MGMT_RMPP_TYPE_DATA],
    );
    set_bytes(&mut buf, wire::IB_MGMT_MAD_HDR + 4, &seg.to_be_bytes());
    let r = wire::rmpp_hdr_mut(buf.mad_mut()).map_err(|_| EINVAL)?;
    wire::ib_set_rmpp_flags(r, flags).map_err(|_| EINVAL)?;
    post(buf).map(|_| ())
}

/// A tagged request of `class` with `method` from `a` to QP `qpn` of LID `dlid`, with TID
/// `hi_tid:tag` and `timeout_ms`.
fn request_at(
    a: &Arc<Agent>,
    qpn: u32,
    class: u8,
    tag: usize,
    dlid: u16,
    timeout_ms: i32,
) -> Result<SendBuf> {
    let lo = u32::try_from(tag).map_err(|_| EINVAL)?;
    let tid = wire::make_tid(a.hi_tid, lo);
    let mut buf = mad_to(
        a,
        qpn,
        mad_hdr(class, wire::IB_MGMT_METHOD_GET, tid),
        dlid,
        None,
    )?;
    buf.set_timeout_ms(timeout_ms);
    buf.set_context([tag, 0]);
    Ok(buf)
}

/// Whether `calls` are exactly those of a send tagged `tag` whose response matched it: the
/// receive handler with its send, then the send handler with SUCCESS, never retried.
fn matched_once(calls: &[Call], tag: usize) -> bool {
    let up = matches!(calls, [Call::Recv { tag: Some(t), .. }, _] if *t == tag);
    let done = matches!(calls, [_, Call::Send { tag: t, wc, retries: 0, .. }]
        if *t == tag && wc.status == WcStatus::Success);
    up && done
}

/// Waits (at most [`crate::testing::WAIT_MS`]) until the fabric of `env` has processed
/// everything queued on it, and with it every receive handler those MADs called.
fn settle(env: &Env) -> bool {
    wait_for(|| env.fabric().is_idle())
}

#[kernel::prelude::kunit_tests(rmad_recv_rules)]
mod tests {
    use super::*;

    /// The SA class (flow controlled, an RMPP class).
    const SA: u8 = wire::IB_MGMT_CLASS_SUBN_ADM;

    #[test]
    fn smp_class_at_qp1_dropped() -> Result {
        // validate_mad: an SMP class (0x01, 0x81) is accepted only when `qp_num == 0`; at QP1
        // it is dropped, whoever would take it: an SMI agent registered for the class (which
        // then gets it at QP0), or a GSI agent waiting for that TID (a response).
        let env = Env::with_ports(SMI_PORTS)?;
        let rec = Recorder::new(Behaviour::default())?;
        let a = env.agent(A, &rec, None)?;
        let srec = Recorder::new(Behaviour::default())?;
        let s = env.agent_of(QpType::Smi, 2, &srec, true, Some(reg(SMP)))?;
        let before = env.engine.unrouted();
        let h = post(request(&a, SMP, 1, B, 60_000, 0)?)?;
        let waiting = wait_state(&a, &h, SendState::WaitResp);
        // Its answer, at QP1 of port 1, where A waits for it.
        answer(&s, wire::make_tid(a.hi_tid, 1), SMP, 1, None)?;
        let idle = settle(&env);
        let dropped = env.engine.unrouted().saturating_sub(before);
        let (smi_recvs, recvs, state) = (srec.recv_count(), rec.recv_count(), a.send_state(&h));
        // The same GET at QP0 reaches the SMI agent.
        post(request_at(&a, 0, SMP, 2, B, 0)?)?;
        let at_qp0 = srec.wait_recvs(1);
        let _ = h.cancel();
        let all = rec.wait_sends(2);
        let sends = rec.sends()?;
        finish(&env, &[&rec, &srec], &[&a, &s])?;
        assert!(waiting);
        assert!(idle);
        assert_eq!(smi_recvs, 0);
        assert_eq!(recvs, 0);
        assert_eq!(state, Some(SendState::WaitResp));
        // The GET at port 2 and the answer at port 1.
        assert_eq!(dropped, 2);
        assert!(at_qp0);
        assert!(all);
        assert_eq!(sends.len(), 2);
        assert!(sends.contains(&(1, WcStatus::WrFlushErr, 0)));
        assert!(sends.contains(&(2, WcStatus::Success, 0)));
        Ok(())
    }

    #[test]
    fn gsi_class_at_qp0_dropped() -> Result {
        // validate_mad: a class other than 0x01 and 0x81 is accepted only on QP1; at QP0 it is
        // dropped: a request (the GSI responder of its class does not get it), and a response
        // (the SMI agent waiting for that TID does not get it).
        let env = Env::new()?;
        let rec = Recorder::new(Behaviour::default())?;
        // An SMI agent on port 1: it sends from QP0, so answers come back to QP0.
        let s = env.agent_of(QpType::Smi, A, &rec, true, None)?;
        let (b, brec) = env.responder(2, CLASS)?;
        let before = env.engine.unrouted();
        post(request_at(&s, 0, CLASS, 1, B, 0)?)?;
        let sent = rec.wait_sends(1);
        let idle = settle(&env);
        let at_qp0 = brec.recv_count();
        // A GET at QP1: B serves it, and its answer goes to QP0 of port 1.
        let h = post(request(&s, CLASS, 2, B, 60_000, 0)?)?;
        let served = brec.wait_recvs(1);
        let answered = settle(&env);
        let dropped = env.engine.unrouted().saturating_sub(before);
        let (recvs, state) = (rec.recv_count(), s.send_state(&h));
        let _ = h.cancel();
        let all = rec.wait_sends(2);
        let sends = rec.sends()?;
        finish(&env, &[&rec, &brec], &[&s, &b])?;
        assert!(sent);
        assert!(idle);
        assert_eq!(at_qp0, 0);
        assert!(served);
        assert!(answered);
        assert_eq!(recvs, 0);
        assert_eq!(state, Some(SendState::WaitResp));
        // The GET at QP0 of port 2 and the answer at QP0 of port 1.
        assert_eq!(dropped, 2);
        assert!(all);
        assert_eq!(
            &sends[..],
            &[(1, WcStatus::Success, 0), (2, WcStatus::WrFlushErr, 0)][..]
        );
        Ok(())
    }

    #[test]
    fn response_on_other_port_or_qp_type_dropped() -> Result {
        // find_mad_agent routes a response by hi_tid alone, whatever port and QP it arrived at,
        // and ib_find_send_mad then matches it (with LMC 0 and no GRH the address check
        // passes). rmad deviation (Documentation/behaviour.md §8.20): a response must arrive
        // at its agent's port and QP type; a response of the right TID elsewhere is dropped.
        let (env, rec, a) = setup(Behaviour::default())?;
        let (p, prec) = peer(&env, CLASS)?;
        let before = env.engine.unrouted();
        let h = post(request(&a, CLASS, 1, B, 60_000, 0)?)?;
        let seen = prec.wait_recvs(1);
        // The answer, at port 2 (the peer's own LID).
        answer(&p, wire::make_tid(a.hi_tid, 1), CLASS, B, None)?;
        // A class-0x01 GET from A to QP0 of port 2 (where nobody serves it), and its answer
        // at QP0 of port 1: the right port, the other QP type.
        let hs = post(request_at(&a, 0, SMP, 2, B, 60_000)?)?;
        let waiting = wait_state(&a, &hs, SendState::WaitResp);
        let smp_resp = mad_hdr(
            SMP,
            wire::IB_MGMT_METHOD_GET_RESP,
            wire::make_tid(a.hi_tid, 2),
        );
        post(mad_to(&p, 0, smp_resp, 1, None)?)?;
        let idle = settle(&env);
        let dropped = env.engine.unrouted().saturating_sub(before);
        let (recvs, states) = (rec.recv_count(), (a.send_state(&h), a.send_state(&hs)));
        // The answer at port 1, QP1 is matched.
        answer(&p, wire::make_tid(a.hi_tid, 1), CLASS, 1, None)?;
        let matched = rec.wait_sends(1);
        let _ = hs.cancel();
        let all = rec.wait_sends(2);
        let sends = rec.sends()?;
        finish(&env, &[&rec, &prec], &[&a, &p])?;
        assert!(seen);
        assert!(waiting);
        assert!(idle);
        assert_eq!(recvs, 0);
        assert_eq!(
            states,
            (Some(SendState::WaitResp), Some(SendState::WaitResp))
        );
        assert!(matched);
        assert!(all);
        assert_eq!(
            &sends[..],
            &[(1, WcStatus::Success, 0), (2, WcStatus::WrFlushErr, 0)][..]
        );
        // The answer at port 2, the GET at QP0 of port 2, the answer at QP0 of port 1.
        assert_eq!(dropped, 3);
        Ok(())
    }

    #[test]
    fn requests_routed_by_class_version() -> Result {
        // find_mad_agent: a request's agent is looked up in `port_priv->version[class_version]`:
        // a GET of class version 2 never reaches a responder registered for version 1 (it is
        // dropped), and reaches one registered for version 2.
        let (env, rec, a) = setup(Behaviour::default())?;
        let (b1, b1rec) = env.responder(2, CLASS)?;
        let v2 = |tag: usize, timeout_ms: i32| {
            edit(request(&a, CLASS, tag, B, timeout_ms, 0)?, |h| MadHdr {
                class_version: 2,
                ..h
            })
        };
        let before = env.engine.unrouted();
        post(v2(1, 100)?)?;
        let timed_out = rec.wait_sends(1);
        let dropped = env.engine.unrouted().saturating_sub(before);
        let b2rec = Recorder::new(Behaviour {
            respond: true,
            ..Behaviour::default()
        })?;
        let b2 = env.agent(
            2,
            &b2rec,
            Some(RegReq {
                class_version: 2,
                ..reg(CLASS)
            }),
        )?;
        post(v2(2, 5000)?)?;
        let answered = rec.wait_sends(2);
        let sends = rec.sends()?;
        let served = (b1rec.recv_count(), b2rec.recv_count());
        finish(&env, &[&rec, &b1rec, &b2rec], &[&a, &b1, &b2])?;
        assert!(timed_out);
        assert_eq!(dropped, 1);
        assert!(answered);
        assert_eq!(
            &sends[..],
            &[(1, WcStatus::RespTimeoutErr, 0), (2, WcStatus::Success, 0)][..]
        );
        assert_eq!(served, (0, 1));
        Ok(())
    }

    #[test]
    fn unregistered_method_not_delivered() -> Result {
        // find_mad_agent: `method_table[class]->agent[method]` must hold an agent: a SEND to a
        // responder that registered GET and SET only reaches nobody (it is dropped); a GET of
        // the same class reaches it.
        let (env, rec, a) = setup(Behaviour::default())?;
        let (b, brec) = env.responder(2, CLASS)?;
        let before = env.engine.unrouted();
        post(edit(request(&a, CLASS, 1, B, 0, 0)?, |h| MadHdr {
            method: wire::IB_MGMT_METHOD_SEND,
            ..h
        })?)?;
        let sent = rec.wait_sends(1);
        let idle = settle(&env);
        let dropped = env.engine.unrouted().saturating_sub(before);
        let served_send = brec.recv_count();
        post(request(&a, CLASS, 2, B, 5000, 0)?)?;
        let answered = rec.wait_sends(2);
        let sends = rec.sends()?;
        let served = brec.recv_count();
        finish(&env, &[&rec, &brec], &[&a, &b])?;
        assert!(sent);
        assert!(idle);
        assert_eq!(dropped, 1);
        assert_eq!(served_send, 0);
        assert!(answered);
        assert_eq!(
            &sends[..],
            &[(1, WcStatus::Success, 0), (2, WcStatus::Success, 0)][..]
        );
        assert_eq!(served, 1);
        Ok(())
    }

    #[test]
    fn vendor_range1_oui_ignored() -> Result {
        // find_mad_agent: a class of vendor range 1 (0x09–0x0F) is routed like any class;
        // bytes 37..40, where range 2 carries its OUI, are not looked at.
        let (env, rec, a) = setup(Behaviour::default())?;
        let (b9, b9rec) = env.responder(2, 0x09)?;
        let (bf, bfrec) = env.responder(2, 0x0f)?;
        for (tag, class) in [(1usize, 0x09u8), (2, 0x0f)] {
            let mut g = request(&a, class, tag, B, 5000, 0)?;
            set_bytes(&mut g, OUI, &[0x00, 0x14, 0x05]);
            post(g)?;
        }
        let answered = rec.wait_sends(2);
        let sends = rec.sends()?;
        let served = (b9rec.recv_count(), bfrec.recv_count());
        finish(&env, &[&rec, &b9rec, &bfrec], &[&a, &b9, &bf])?;
        assert!(answered);
        assert_eq!(sends.len(), 2);
        assert!(sends.contains(&(1, WcStatus::Success, 0)));
        assert!(sends.contains(&(2, WcStatus::Success, 0)));
        assert_eq!(served, (1, 1));
        Ok(())
    }

    #[test]
    fn vendor_range2_routed_by_oui() -> Result {
        // find_mad_agent → find_vendor_oui: a request of vendor range 2 (0x30–0x4F) goes to the
        // agent registered for its class and the OUI at bytes 37..40; an OUI nobody
        // registered reaches nobody (it is dropped).
        const VENDOR2: u8 = wire::IB_MGMT_CLASS_VENDOR_RANGE2_START;
        let (x, y, z) = ([0x00, 0x14, 0x05], [0x00, 0x02, 0xc9], [0x00, 0x19, 0x9d]);
        let (env, rec, a) = setup(Behaviour::default())?;
        let responder = |oui: [u8; 3]| -> Result<_> {
            let r = Recorder::new(Behaviour {
                respond: true,
                ..Behaviour::default()
            })?;
            let b = env.agent(
                2,
                &r,
                Some(RegReq {
                    oui,
                    ..reg(VENDOR2)
                }),
            )?;
            Ok((b, r))
        };
        let (bx, bxrec) = responder(x)?;
        let (by, byrec) = responder(y)?;
        let before = env.engine.unrouted();
        for (tag, oui) in [(1usize, x), (2, y), (3, z)] {
            let mut g = request(&a, VENDOR2, tag, B, 200, 0)?;
            set_bytes(&mut g, OUI, &oui);
            post(g)?;
        }
        let done = rec.wait_sends(3);
        let sends = rec.sends()?;
        let dropped = env.engine.unrouted().saturating_sub(before);
        let tags = (received_tags(&bxrec)?, received_tags(&byrec)?);
        finish(&env, &[&rec, &bxrec, &byrec], &[&a, &bx, &by])?;
        assert!(done);
        assert_eq!(sends.len(), 3);
        assert!(sends.contains(&(1, WcStatus::Success, 0)));
        assert!(sends.contains(&(2, WcStatus::Success, 0)));
        assert!(sends.contains(&(3, WcStatus::RespTimeoutErr, 0)));
        assert_eq!(&tags.0[..], &[1][..]);
        assert_eq!(&tags.1[..], &[2][..]);
        assert_eq!(dropped, 1);
        Ok(())
    }

    #[test]
    fn response_to_agent_without_recv_handler_dropped() -> Result {
        // ib_mad_recv_done: the agent found (by hi_tid) has no recv_handler, so the MAD is
        // dropped: the response never matches its send, which times out. rmad counts it with
        // the responses it drops.
        let env = Env::new()?;
        let rec = Recorder::new(Behaviour::default())?;
        let a = env.agent_of(QpType::Gsi, A, &rec, false, None)?;
        let (b, brec) = env.responder(2, CLASS)?;
        post(request(&a, CLASS, 1, B, 1000, 0)?)?;
        let done = rec.wait_sends(1);
        let sends = rec.sends()?;
        let served = brec.recv_count();
        let (responses, dropped) = (a.stats().responses, a.stats().dropped_responses);
        finish(&env, &[&rec, &brec], &[&a, &b])?;
        assert!(done);
        assert_eq!(served, 1);
        assert_eq!(&sends[..], &[(1, WcStatus::RespTimeoutErr, 0)][..]);
        assert_eq!(responses, 0);
        assert_eq!(dropped, 1);
        Ok(())
    }

    #[test]
    fn unmatched_active_rmpp_response_dropped() -> Result {
        // ib_mad_complete_recv: on an agent without kernel RMPP (rmpp_version 0), an unmatched
        // response of an RMPP class with RMPP ACTIVE goes to recv_handler with send_buf NULL.
        // rmad deviation (Documentation/behaviour.md §8.14): it is dropped and counted in
        // dropped_responses like any unmatched response; a matched one goes up as one MAD with
        // its send.
        let (env, rec, a) = setup(Behaviour::default())?;
        let prec = Recorder::new(Behaviour::default())?;
        let p = env.agent(2, &prec, None)?;
        let rmpp = |lo: u32| -> Result {
            let flags = wire::IB_MGMT_RMPP_FLAG_ACTIVE
                | wire::IB_MGMT_RMPP_FLAG_FIRST
                | wire::IB_MGMT_RMPP_FLAG_LAST;
            rmpp_response(&p, wire::make_tid(a.hi_tid, lo), 1, flags)
        };
        let h = post(request(&a, SA, 9, B, 60_000, 0)?)?;
        let waiting = wait_state(&a, &h, SendState::WaitResp);
        // A's hi_tid with a low half no send has.
        rmpp(0x0909)?;
        let idle = settle(&env);
        let (recvs, dropped) = (rec.recv_count(), a.stats().dropped_responses);
        rmpp(9)?;
        let matched = rec.wait_sends(1);
        let calls = rec.calls()?;
        finish(&env, &[&rec, &prec], &[&a, &p])?;
        assert!(waiting);
        assert!(idle);
        assert_eq!(recvs, 0);
        assert_eq!(dropped, 1);
        assert!(matched);
        assert!(matched_once(&calls, 9));
        Ok(())
    }

    #[test]
    fn user_rmpp_unmatched_segments_reach_the_handler() -> Result {
        // ib_mad_complete_recv on a user-RMPP agent (IB_MAD_USER_RMPP, Documentation/behaviour.md
        // §2.10.7): segment 1 of a segmented answer matches the request (receive handler with
        // the send, then the send handler); segments 2 and 3, and an active segment with a TID
        // nobody sent, go to the receive handler with no send. A response without ACTIVE that
        // matches nothing is dropped as usual.
        let env = Env::new()?;
        let rec = Recorder::new(Behaviour::default())?;
        let a = rmpp_agent(&env, &rec, 1, wire::IB_MAD_USER_RMPP)?;
        let prec = Recorder::new(Behaviour::default())?;
        let p = env.agent(2, &prec, None)?;
        let segment = |lo: u32, seg: u32, flags: u8| {
            rmpp_response(&p, wire::make_tid(a.hi_tid, lo), seg, flags)
        };
        let active = wire::IB_MGMT_RMPP_FLAG_ACTIVE;
        let h = post(request(&a, SA, 9, B, 60_000, 0)?)?;
        let waiting = wait_state(&a, &h, SendState::WaitResp);
        segment(9, 1, active | wire::IB_MGMT_RMPP_FLAG_FIRST)?;
        let matched = rec.wait_sends(1);
        segment(9, 2, active)?;
        segment(9, 3, active | wire::IB_MGMT_RMPP_FLAG_LAST)?;
        segment(0x0909, 1, active | wire::IB_MGMT_RMPP_FLAG_FIRST)?;
        segment(9, 4, 0)?;
        let idle = settle(&env);
        let calls = rec.calls()?;
        let stats = a.stats();
        finish(&env, &[&rec, &prec], &[&a, &p])?;
        let tid = wire::make_tid(a.hi_tid, 9);
        let unsolicited =
            |c: &Call, want: u64| matches!(c, Call::Recv { tag: None, tid, .. } if *tid == want);
        assert!(waiting);
        assert!(matched);
        assert!(idle);
        assert_eq!(calls.len(), 5);
        assert!(matched_once(calls.get(..2).unwrap_or(&[]), 9));
        assert!(calls.get(2).is_some_and(|c| unsolicited(c, tid)));
        assert!(calls.get(3).is_some_and(|c| unsolicited(c, tid)));
        assert!(calls
            .get(4)
            .is_some_and(|c| unsolicited(c, wire::make_tid(a.hi_tid, 0x0909))));
        assert_eq!(stats.user_rmpp_unmatched, 3);
        assert_eq!(stats.dropped_responses, 1);
        assert_eq!(stats.responses, 1);
        Ok(())
    }

    #[test]
    fn grh_response_must_reach_sgid_of_send() -> Result {
        // rcv_has_same_gid, request sent with a GRH: the response matches only if its DGID is
        // the local GID at the send's sgid_index (`rdma_query_gid` against
        // `recv_buf.grh->dgid`).
        let (env, rec, a) = setup(Behaviour::default())?;
        let (p, prec) = peer(&env, CLASS)?;
        let gid = |port: u8, index: u8| env.transport.gid(port, index).ok_or(EINVAL);
        let mut g = request(&a, CLASS, 1, B, 60_000, 0)?;
        g.set_ah(Some(Address {
            dlid: B,
            ..gid_address(gid(2, 0)?, 0)
        }));
        let h = post(g)?;
        let seen = prec.wait_recvs(1);
        let tid = wire::make_tid(a.hi_tid, 1);
        // To port 1's GID at index 1, not the send's index 0.
        answer(&p, tid, CLASS, 1, gid_address(gid(A, 1)?, 0).grh)?;
        let idle = settle(&env);
        let (recvs, dropped) = (rec.recv_count(), a.stats().dropped_responses);
        let state = a.send_state(&h);
        answer(&p, tid, CLASS, 1, gid_address(gid(A, 0)?, 0).grh)?;
        let matched = rec.wait_sends(1);
        let sends = rec.sends()?;
        finish(&env, &[&rec, &prec], &[&a, &p])?;
        assert!(seen);
        assert!(idle);
        assert_eq!(recvs, 0);
        assert_eq!(dropped, 1);
        assert_eq!(state, Some(SendState::WaitResp));
        assert!(matched);
        assert_eq!(&sends[..], &[(1, WcStatus::Success, 0)][..]);
        Ok(())
    }

    #[test]
    fn no_fall_through_after_canceled_match() -> Result {
        // ib_find_send_mad: the first send that passes the predicate decides, and if it is
        // CANCELED there is no match; it does not go on to a later send with the same TID.
        // A cancelled send heads the wait list, so it comes first.
        let (env, rec, a) = setup(Behaviour::default())?;
        let (p, prec) = peer(&env, CLASS)?;
        let h1 = post(request(&a, CLASS, 11, B, 60_000, 0)?)?;
        let mut second = request(&a, CLASS, 11, B, 60_000, 0)?;
        second.set_context([12, 0]);
        let h2 = post(second)?;
        let seen = prec.wait_recvs(2);
        let waiting =
            wait_state(&a, &h1, SendState::WaitResp) && wait_state(&a, &h2, SendState::WaitResp);
        // Nothing runs on the agents' queue until the gate opens: the first send stays
        // cancelled, unflushed, while the response is matched.
        let gate = block_queue(&env.engine)?;
        let cancel = h1.cancel();
        let state1 = a.send_state(&h1);
        let sent = answer(&p, wire::make_tid(a.hi_tid, 11), CLASS, 1, None);
        let idle = settle(&env);
        let (recvs, dropped) = (rec.recv_count(), a.stats().dropped_responses);
        let state2 = a.send_state(&h2);
        gate.open();
        let _ = h2.cancel();
        let all = rec.wait_sends(2);
        let sends = rec.sends()?;
        finish(&env, &[&rec, &prec], &[&a, &p])?;
        assert!(seen);
        assert!(waiting);
        assert!(cancel.is_ok());
        assert_eq!(state1, Some(SendState::Canceled(CancelWait::TimeoutWork)));
        assert!(sent.is_ok());
        assert!(idle);
        assert_eq!(recvs, 0);
        assert_eq!(dropped, 1);
        assert_eq!(state2, Some(SendState::WaitResp));
        assert!(all);
        assert_eq!(
            &sends[..],
            &[(11, WcStatus::WrFlushErr, 0), (12, WcStatus::WrFlushErr, 0)][..]
        );
        Ok(())
    }

    #[test]
    fn timeout0_send_in_flight_not_matched() -> Result {
        // ib_find_send_mad: a send still on the send list (SEND_START) is a candidate only if
        // `wr->timeout` is non-zero. A response that overtakes the send completions of two
        // sends with its TID, the first with timeout 0, passes over that one and matches the
        // second (an early response); the first completes with SUCCESS, unmatched.
        let (env, rec, a) = setup(Behaviour::default())?;
        let prec = Recorder::new(Behaviour::default())?;
        let p = env.agent(2, &prec, None)?;
        // Nothing is processed until released: both sends stay in SEND_START. They go to a
        // LID nobody has, so only their completions are queued.
        env.fabric().set_knobs(|k| k.hold = true);
        let first = post(request(&a, CLASS, 12, NOWHERE, 0, 0)?)?;
        let mut second = request(&a, CLASS, 12, NOWHERE, 60_000, 0)?;
        second.set_context([13, 0]);
        let second = post(second)?;
        let sent = answer(&p, wire::make_tid(a.hi_tid, 12), CLASS, 1, None);
        // Queue: both completions, the answer's, then the answer at A, which goes first.
        let promoted = env.fabric().promote_recv();
        env.fabric().release(1);
        let got = rec.wait_recvs(1);
        let states = (a.send_state(&first), a.send_state(&second));
        env.fabric().set_knobs(|k| k.hold = false);
        let done = rec.wait_sends(2);
        let idle = settle(&env);
        let calls = rec.calls()?;
        let sends = rec.sends()?;
        let stats = a.stats();
        finish(&env, &[&rec, &prec], &[&a, &p])?;
        assert!(sent.is_ok());
        assert!(promoted);
        assert!(got);
        assert_eq!(
            states,
            (Some(SendState::SendStart), Some(SendState::EarlyResp))
        );
        assert!(done);
        assert!(idle);
        let recvs = calls
            .iter()
            .filter(|c| matches!(c, Call::Recv { .. }))
            .count();
        assert_eq!(recvs, 1);
        let second_up = calls
            .iter()
            .any(|c| matches!(c, Call::Recv { tag: Some(13), .. }));
        assert!(second_up);
        assert_eq!(
            &sends[..],
            &[(12, WcStatus::Success, 0), (13, WcStatus::Success, 0)][..]
        );
        assert_eq!((stats.early_responses, stats.dropped_responses), (1, 0));
        Ok(())
    }

    #[test]
    fn queued_send_matched_by_response() -> Result {
        // ib_find_send_mad searches the backlog too: a QUEUED send (held back by flow
        // control) is matched by its response: ib_mark_mad_done, recv_handler with its send,
        // then the send handler with SUCCESS. It is never transmitted.
        let env = Env::new()?;
        let (p, prec) = peer(&env, SA)?;
        let rec = Recorder::new(Behaviour::default())?;
        let a = sa_agent(&env, &rec)?;
        // Sends 0..15 fill A's flow-control window (16); 16 waits in the backlog.
        let handles = post_sa(&a, 0..17, 60_000)?;
        let queued = handles.get(16).and_then(|h| a.send_state(h));
        let seen = prec.wait_recvs(16);
        answer(&p, wire::make_tid(a.hi_tid, 16), SA, 1, None)?;
        let done = rec.wait_until(|c| c.iter().any(|x| matches!(x, Call::Send { tag: 16, .. })));
        let idle = settle(&env);
        let calls = rec.calls()?;
        let transmitted = a.stats().transmitted;
        let tags = received_tags(&prec)?;
        for h in handles.iter() {
            let _ = h.cancel();
        }
        let all = rec.wait_sends(17);
        finish(&env, &[&rec, &prec], &[&a, &p])?;
        assert_eq!(queued, Some(SendState::Queued));
        assert!(seen);
        assert!(done);
        assert!(idle);
        assert!(matched_once(&calls, 16));
        assert_eq!(transmitted, 16);
        assert_eq!(tags.len(), 16);
        assert!(!tags.contains(&16));
        assert!(all);
        Ok(())
    }

    #[test]
    fn trap_repress_and_bm_responses_match() -> Result {
        // ib_response_mad: besides a method with the response bit, TRAP_REPRESS (0x07) is a
        // response, and so is a BM-class (0x05) MAD with bit 0 of attr_mod set; each is routed
        // by hi_tid and matches its send (a TRAP, a BM SEND). A BM MAD without the bit is a
        // request, and matches nothing.
        let (env, rec, a) = setup(Behaviour::default())?;
        let prec = Recorder::new(Behaviour::default())?;
        let p = env.agent(2, &prec, None)?;
        let bm = wire::IB_MGMT_CLASS_BM;
        let send = wire::IB_MGMT_METHOD_SEND;
        let with_method = |class: u8, tag: usize, method: u8| {
            edit(request(&a, class, tag, B, 60_000, 0)?, |h| MadHdr {
                method,
                ..h
            })
        };
        let trap = post(with_method(CLASS, 1, wire::IB_MGMT_METHOD_TRAP)?)?;
        let bm_send = post(with_method(bm, 2, send)?)?;
        let waiting = wait_state(&a, &trap, SendState::WaitResp)
            && wait_state(&a, &bm_send, SendState::WaitResp);
        let (t1, t2) = (wire::make_tid(a.hi_tid, 1), wire::make_tid(a.hi_tid, 2));
        post(mad_to(&p, 1, mad_hdr(bm, send, t2), 1, None)?)?;
        let idle = settle(&env);
        let (recvs, state) = (rec.recv_count(), a.send_state(&bm_send));
        let repress = mad_hdr(CLASS, wire::IB_MGMT_METHOD_TRAP_REPRESS, t1);
        post(mad_to(&p, 1, repress, 1, None)?)?;
        let bm_resp = MadHdr {
            attr_mod: wire::IB_BM_ATTR_MOD_RESP,
            ..mad_hdr(bm, send, t2)
        };
        post(mad_to(&p, 1, bm_resp, 1, None)?)?;
        let done = rec.wait_sends(2);
        let sends = rec.sends()?;
        let calls = rec.calls()?;
        finish(&env, &[&rec, &prec], &[&a, &p])?;
        assert!(waiting);
        assert!(idle);
        assert_eq!(recvs, 0);
        assert_eq!(state, Some(SendState::WaitResp));
        assert!(done);
        assert_eq!(sends.len(), 2);
        assert!(sends.contains(&(1, WcStatus::Success, 0)));
        assert!(sends.contains(&(2, WcStatus::Success, 0)));
        let repressed = calls.iter().any(|c| {
            matches!(c, Call::Recv { tag: Some(1), method, .. }
                if *method == wire::IB_MGMT_METHOD_TRAP_REPRESS)
        });
        assert!(repressed);
        let bm_up = calls
            .iter()
            .any(|c| matches!(c, Call::Recv { tag: Some(2), method, .. } if *method == send));
        assert!(bm_up);
        Ok(())
    }

    #[test]
    fn lmc_read_at_match_not_at_registration() -> Result {
        // rcv_has_same_gid without a GRH: the path bits are compared under the LMC the port
        // has when the response arrives (ib_get_cached_lmc), not the one it had when the
        // agent registered. Port 1 starts with LID 1, LMC 0; then the subnet manager gives it
        // LID 4, LMC 2 (4..7). A response to 4 + 2 for a request from path bits 1 must not
        // match (with LMC 0 every path bit would); the one to 4 + 1 does.
        let env = Env::new()?;
        let (p, prec) = peer(&env, CLASS)?;
        let rec = Recorder::new(Behaviour::default())?;
        let a = env.agent(A, &rec, None)?;
        env.fabric().set_port_attr(
            1,
            crate::engine::transport::PortAttr {
                lid: 4,
                lmc: 2,
                ..crate::testing::loopback::Fabric::DEFAULT_PORTS[0]
            },
        );
        let h = post(crate::testing::suites::conformance::lid_routed_request(
            &a, 2, 1,
        )?)?;
        let seen = prec.wait_recvs(1);
        answer(&p, wire::make_tid(a.hi_tid, 2), CLASS, 4 + 2, None)?;
        crate::testing::sleep_ms(200);
        let wrong = rec.recv_count();
        answer(&p, wire::make_tid(a.hi_tid, 2), CLASS, 4 + 1, None)?;
        let right = rec.wait_sends(1);
        let sends = rec.sends()?;
        let _ = h.cancel();
        finish(&env, &[&rec, &prec], &[&a, &p])?;
        assert!(seen);
        assert_eq!(wrong, 0);
        assert!(right);
        assert_eq!(sends.first().copied(), Some((2, WcStatus::Success, 0)));
        Ok(())
    }
}
