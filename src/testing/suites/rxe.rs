// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_rxe`: rmad agents on soft-RoCE (`rxe0`, which the test VM creates on a
//! dummy netdev before loading rmad).

#[kernel::prelude::kunit_tests(rmad_rxe)]
mod tests {
    use crate::{
        engine::{
            agent::Agent,
            transport::Transport, //
        },
        mad::{
            state::{
                SendState,
                WcStatus, //
            },
            wire, //
        },
        testing::{
            ib_responder::IbResponder,
            post,
            race_cancel,
            requests::{
                gid_address,
                mad_in, //
            },
            rxe_agent,
            rxe_request,
            sleep_ms,
            wait_state,
            Behaviour,
            Call,
            Recorder, //
        },
        verbs::VerbsPort, //
    };
    use kernel::{
        prelude::*,
        sync::Arc,
        time::{
            Instant,
            Monotonic, //
        },
    };

    #[test]
    fn rxe_get_answered_through_qp1() -> Result {
        // One MAD from rmad's private QP to QP1 of the same port. No agent is registered for
        // the class, so ib_core's MAD layer answers it (GET_RESP, status "unsupported").
        let s = setup()?;
        // The test VM always creates rxe0; without it the suite fails.
        assert!(s.is_some());
        let Some((port, a, rec)) = s else {
            return Ok(());
        };
        let h = post(rxe_request(
            &port,
            &a,
            1,
            wire::IB_MGMT_METHOD_GET,
            5000,
            2,
        )?);
        let posted = h.is_ok();
        let done = rec.wait_sends(1);
        let calls = rec.calls()?;
        a.unregister()?;
        assert!(posted);
        assert!(done);
        // Status 0x000C: method/attribute unsupported, ib_core's answer for unserved classes.
        let recv = matches!(calls.first(), Some(Call::Recv { tag: Some(1), method, status, .. })
            if *method == wire::IB_MGMT_METHOD_GET_RESP && *status == 0x000c);
        let send = matches!(calls.get(1), Some(Call::Send { tag: 1, wc, .. })
            if wc.status == WcStatus::Success);
        assert!(recv);
        assert!(send);
        Ok(())
    }

    #[test]
    fn rxe_get_answered_by_ib_core_agent() -> Result {
        // The smallest experiment of the verbs path: a test agent registered in ib_core for
        // congestion management (0x21) answers rmad's GET with status 0.
        let s = setup()?;
        assert!(s.is_some());
        let Some((port, a, rec)) = s else {
            return Ok(());
        };
        let responder = IbResponder::start(&port, wire::IB_MGMT_CLASS_CONG_MGMT);
        let registered = responder.is_some();
        let mut buf = rxe_request(&port, &a, 7, wire::IB_MGMT_METHOD_GET, 5000, 1)?;
        if let Some(c) = buf.mad_mut().get_mut(1) {
            *c = wire::IB_MGMT_CLASS_CONG_MGMT;
        }
        let posted = post(buf).is_ok();
        let done = rec.wait_sends(1);
        let calls = rec.calls()?;
        drop(responder);
        a.unregister()?;
        assert!(registered);
        assert!(posted);
        assert!(done);
        let answered = matches!(calls.first(), Some(Call::Recv { tag: Some(7), method, status, .. })
            if *method == wire::IB_MGMT_METHOD_GET_RESP && *status == 0);
        let send = matches!(calls.get(1), Some(Call::Send { tag: 7, wc, retries: 0, .. })
            if wc.status == WcStatus::Success);
        assert!(answered);
        assert!(send);
        Ok(())
    }

    #[test]
    fn rxe_burst_of_responses_all_matched() -> Result {
        // 512 GETs back to back, no retry: ib_core answers each one, and every response must
        // find a posted receive buffer (512, like the C layer's receive queue) and match its
        // request. A dropped response would show as a timeout.
        const N: usize = 512;
        let s = setup()?;
        assert!(s.is_some());
        let Some((port, a, rec)) = s else {
            return Ok(());
        };
        let mut posted = 0usize;
        for tag in 0..N {
            let buf = rxe_request(&port, &a, tag, wire::IB_MGMT_METHOD_GET, 20_000, 0)?;
            if post(buf).is_ok() {
                posted = posted.saturating_add(1);
            }
        }
        let done = rec.wait_sends(N);
        let sends = rec.sends()?;
        let stats = a.stats();
        a.unregister()?;
        assert_eq!(posted, N);
        assert!(done);
        let ok = sends
            .iter()
            .filter(|(_, st, retries)| *st == WcStatus::Success && *retries == 0)
            .count();
        assert_eq!(ok, N);
        assert_eq!(stats.responses, u64::try_from(N).unwrap_or(0));
        assert_eq!(stats.dropped_responses, 0);
        Ok(())
    }

    /// What [`setup`] gives: the port, the agent, its recorder; `None` without rxe0.
    type Setup = Option<(Arc<VerbsPort>, Arc<Agent>, Arc<Recorder>)>;

    /// The rxe0 port, and an agent on it whose handlers record.
    fn setup() -> Result<Setup> {
        let rec = Recorder::new(Behaviour::default())?;
        Ok(rxe_agent(&rec)?.map(|(p, a)| (p, a, rec)))
    }

    #[test]
    fn rxe_timeout_with_retries() -> Result {
        let s = setup()?;
        // The test VM always creates rxe0; without it the suite fails.
        assert!(s.is_some());
        let Some((port, a, rec)) = s else {
            return Ok(());
        };
        let start = Instant::<Monotonic>::now();
        let _h = post(rxe_request(
            &port,
            &a,
            2,
            wire::IB_MGMT_METHOD_SEND,
            200,
            2,
        )?)?;
        let done = rec.wait_sends(1);
        let elapsed = start.elapsed().as_millis();
        let sends = rec.sends()?;
        let stats = a.stats();
        a.unregister()?;
        assert!(done);
        assert_eq!(&sends[..], &[(2, WcStatus::RespTimeoutErr, 2)][..]);
        assert_eq!(stats.transmitted, 3);
        assert!(elapsed >= 600);
        Ok(())
    }

    #[test]
    fn rxe_cancel_while_waiting() -> Result {
        let s = setup()?;
        // The test VM always creates rxe0; without it the suite fails.
        assert!(s.is_some());
        let Some((port, a, rec)) = s else {
            return Ok(());
        };
        let h = post(rxe_request(
            &port,
            &a,
            3,
            wire::IB_MGMT_METHOD_SEND,
            60_000,
            0,
        )?)?;
        let _ = wait_state(&a, &h, SendState::WaitResp);
        let waiting = a.send_state(&h);
        let cancel = h.cancel();
        let done = rec.wait_sends(1);
        let sends = rec.sends()?;
        a.unregister()?;
        assert_eq!(waiting, Some(SendState::WaitResp));
        assert!(cancel.is_ok());
        assert!(done);
        assert_eq!(&sends[..], &[(3, WcStatus::WrFlushErr, 0)][..]);
        Ok(())
    }

    #[test]
    fn rxe_pkey_index_beyond_the_table_refused() -> Result {
        // rxe0's P_Key table has the default partition at index 0 only: a send with index 1
        // fails its post, as the device would fail the work request; nothing is sent.
        let s = setup()?;
        assert!(s.is_some());
        let Some((port, a, rec)) = s else {
            return Ok(());
        };
        let gid = port.gid(1, 1).ok_or(ENODEV)?;
        let mut buf = mad_in(
            &a,
            wire::IB_MGMT_CLASS_PERF_MGMT,
            wire::IB_MGMT_METHOD_GET,
            9,
            1,
        )?;
        buf.set_ah(Some(gid_address(gid, 1)));
        buf.set_timeout_ms(1000);
        let refused = post(buf).err();
        let stats = a.stats();
        a.unregister()?;
        assert_eq!(port.pkey(1, 0), Some(0xffff));
        assert_eq!(port.pkey(1, 1), None);
        assert_eq!(refused, Some(EINVAL));
        assert_eq!(stats.transmitted, 0);
        assert_eq!(rec.send_count(), 0);
        Ok(())
    }

    #[test]
    fn rxe_modify_extends_wait() -> Result {
        let s = setup()?;
        // The test VM always creates rxe0; without it the suite fails.
        assert!(s.is_some());
        let Some((port, a, rec)) = s else {
            return Ok(());
        };
        let h = post(rxe_request(
            &port,
            &a,
            4,
            wire::IB_MGMT_METHOD_SEND,
            300,
            0,
        )?)?;
        let _ = wait_state(&a, &h, SendState::WaitResp);
        let from = Instant::<Monotonic>::now();
        let m = h.modify(1500);
        sleep_ms(800);
        let early = rec.send_count();
        let done = rec.wait_sends(1);
        let elapsed = from.elapsed().as_millis();
        let sends = rec.sends()?;
        a.unregister()?;
        assert!(m.is_ok());
        assert_eq!(early, 0);
        assert!(done);
        assert_eq!(&sends[..], &[(4, WcStatus::RespTimeoutErr, 0)][..]);
        assert!(elapsed >= 1500);
        Ok(())
    }

    #[test]
    fn rxe_cancel_races_response() -> Result {
        let s = setup()?;
        // The test VM always creates rxe0; without it the suite fails.
        assert!(s.is_some());
        let Some((port, a, rec)) = s else {
            return Ok(());
        };
        let out = race_cancel(
            &rec,
            25,
            1500,
            |tag| {
                post(rxe_request(
                    &port,
                    &a,
                    tag,
                    wire::IB_MGMT_METHOD_GET,
                    5000,
                    0,
                )?)
            },
            WcStatus::Success,
        )?;
        a.unregister()?;
        pr_info!(
            "races: rxe cancel vs response: {} sends, cancel won {}, lost {}, each completed once: {}\n",
            out.iterations,
            out.cancel_won,
            out.cancel_lost,
            out.exactly_once
        );
        assert!(out.exactly_once);
        assert!(out.cancel_won >= 25);
        assert!(out.cancel_lost >= 25);
        Ok(())
    }
}
