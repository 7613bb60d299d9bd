// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_rxe`: rmad agents on soft-RoCE (`rxe0`, which the test VM creates on a
//! dummy netdev before loading rmad).

#[kernel::prelude::kunit_tests(rmad_rxe)]
mod tests {
    use crate::{
        engine::{
            agent::{
                Agent,
                AgentConfig,
                RecvHandler, //
            },
            send::{
                SendBuf,
                SendHandle, //
            },
            transport::{
                RecvMad,
                Transport, //
            },
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
        new_mutex,
        prelude::*,
        sync::{
            atomic::{
                Acquire,
                Atomic,
                Release, //
            },
            Arc,
            Mutex, //
        },
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
    fn rxe_user_rmpp_agent_gets_every_segment_of_an_ib_core_answer() -> Result {
        // A user-RMPP agent (IB_MAD_USER_RMPP) asks an ib_core agent, which answers with three
        // RMPP DATA segments sent at once. As in C (Documentation/behaviour.md §2.10.7):
        // segment 1 matches the request; segments 2 and 3 reach the receive handler with no
        // send. Before, segments 2 and 3 were dropped.
        const CLASS: u8 = 0x10;
        let port = crate::verbs::find_port(c"rxe0", 1);
        // The test VM always creates rxe0; without it the suite fails.
        assert!(port.is_some());
        let Some(port) = port else {
            return Ok(());
        };
        let engine = crate::verbs::verbs_engine().ok_or(ENODEV)?;
        let transport: Arc<dyn Transport> = port.clone();
        let responder = IbResponder::start(&port, CLASS);
        let registered = responder.is_some();
        if let Some(r) = &responder {
            r.segments(3);
        }
        let rec = Recorder::new(Behaviour::default())?;
        let a = Agent::register(
            &engine,
            &transport,
            AgentConfig {
                port: 1,
                qp_type: crate::mad::QpType::Gsi,
                // SET only: the ib_core responder has the class's GETs.
                reg: Some(crate::mad::RegReq {
                    mgmt_class: CLASS,
                    class_version: 1,
                    oui: [0; 3],
                    methods: 1 << wire::IB_MGMT_METHOD_SET,
                }),
                rmpp_version: 1,
                flags: wire::IB_MAD_USER_RMPP,
                send_handler: Some(rec.clone()),
                recv_handler: Some(rec.clone()),
            },
        )?;
        let mut buf = rxe_request(&port, &a, 3, wire::IB_MGMT_METHOD_GET, 20_000, 0)?;
        if let Some(c) = buf.mad_mut().get_mut(1) {
            *c = CLASS;
        }
        let posted = post(buf).is_ok();
        let done = rec.wait_sends(1);
        let all = crate::testing::wait_for(|| rec.recv_count() >= 3);
        // Nothing more comes.
        sleep_ms(100);
        let calls = rec.calls()?;
        let stats = a.stats();
        drop(responder);
        a.unregister()?;
        let tid = wire::make_tid(a.hi_tid, 3);
        let unsolicited = |c: Option<&Call>| {
            matches!(c, Some(Call::Recv { tag: None, tid: t, method, .. })
                if *t == tid && *method == wire::IB_MGMT_METHOD_GET_RESP)
        };
        assert!(registered);
        assert!(posted);
        assert!(done);
        assert!(all);
        assert_eq!(calls.len(), 4);
        let matched = matches!(calls.first(), Some(Call::Recv { tag: Some(3), .. }));
        let completed = matches!(calls.get(1), Some(Call::Send { tag: 3, wc, .. })
            if wc.status == WcStatus::Success);
        assert!(matched);
        assert!(completed);
        assert!(unsolicited(calls.get(2)));
        assert!(unsolicited(calls.get(3)));
        assert_eq!(stats.user_rmpp_unmatched, 2);
        assert_eq!(stats.dropped_responses, 0);
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

    /// A receive handler that, on its first MAD, posts `other`'s send and unregisters
    /// `other` once that send is in the device, as a client tearing down a sibling agent on
    /// an answer would.
    #[pin_data]
    struct UnregisterOther {
        /// The other agent and the send to post for it, taken by the first MAD.
        #[pin]
        other: Mutex<Option<(Arc<Agent>, SendBuf)>>,
        /// Transmissions of the other agent when the unregistration began.
        transmitted: Atomic<u64>,
        /// The result of the post (0 or an errno); 1 until the handler ran.
        posted: Atomic<i32>,
        /// The result of the unregistration (0 or an errno); 1 until it returned.
        unregistered: Atomic<i32>,
    }

    impl RecvHandler for UnregisterOther {
        fn recv(&self, _agent: &Arc<Agent>, _send: Option<&SendHandle>, _mad: RecvMad) {
            let Some((other, buf)) = self.other.lock().take() else {
                return;
            };
            let posted = post(buf).map_or_else(|e| e.to_errno(), |_| 0);
            self.posted.store(posted, Release);
            // Until the transmit work handed the send to the QP, then a little longer for
            // rxe to complete it: its completion is then queued behind this very handler if
            // both share the thread that runs it.
            let mut waited = 0;
            while other.stats().transmitted == 0 && waited < 5000 {
                sleep_ms(5);
                waited += 5;
            }
            sleep_ms(200);
            self.transmitted.store(other.stats().transmitted, Release);
            let r = other.unregister().map_or_else(|e| e.to_errno(), |()| 0);
            self.unregistered.store(r, Release);
        }
    }

    #[test]
    fn rxe_recv_handler_unregisters_another_agent_with_a_send_in_the_device() -> Result {
        // Defect 11 of issue 16: a receive handler running in the private QP's completion
        // thread unregisters another agent whose send is in the QP. That send's completion
        // must not wait for the thread the handler blocks (ib_unregister_mad_agent hangs so
        // in C, and the hung-task detector would fire here).
        let port = crate::verbs::find_port(c"rxe0", 1);
        // The test VM always creates rxe0; without it the suite fails.
        assert!(port.is_some());
        let Some(port) = port else {
            return Ok(());
        };
        let engine = crate::verbs::verbs_engine().ok_or(ENODEV)?;
        let transport: Arc<dyn Transport> = port.clone();
        let rec_a = Recorder::new(Behaviour::default())?;
        let rec_b = Recorder::new(Behaviour::default())?;
        let b = crate::testing::register_gsi(&engine, &transport, 1, &rec_b, None)?;
        let b_send = rxe_request(&port, &b, 9, wire::IB_MGMT_METHOD_GET, 20_000, 0)?;
        let handler = Arc::pin_init(
            pin_init!(UnregisterOther {
                other <- new_mutex!(Some((b.clone(), b_send))),
                transmitted: Atomic::new(0),
                posted: Atomic::new(1),
                unregistered: Atomic::new(1),
            }),
            GFP_KERNEL,
        )?;
        let a = Agent::register(
            &engine,
            &transport,
            AgentConfig {
                port: 1,
                qp_type: crate::mad::QpType::Gsi,
                reg: None,
                rmpp_version: 0,
                flags: 0,
                send_handler: Some(rec_a.clone()),
                recv_handler: Some(handler.clone()),
            },
        )?;
        // The answer to this GET runs the handler, in the private QP's receive thread.
        let posted = post(rxe_request(
            &port,
            &a,
            1,
            wire::IB_MGMT_METHOD_GET,
            20_000,
            0,
        )?)
        .is_ok();
        let a_done = rec_a.wait_sends(1);
        let b_done = rec_b.wait_sends(1);
        let b_sends = rec_b.sends()?;
        a.unregister()?;
        assert!(posted);
        assert!(a_done);
        assert_eq!(handler.posted.load(Acquire), 0);
        // The send was in the device when the unregistration began.
        assert_eq!(handler.transmitted.load(Acquire), 1);
        assert_eq!(handler.unregistered.load(Acquire), 0);
        assert!(b_done);
        assert_eq!(&b_sends[..], &[(9, WcStatus::WrFlushErr, 0)][..]);
        Ok(())
    }
}
