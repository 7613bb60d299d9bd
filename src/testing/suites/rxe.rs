// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_rxe`: rmad agents on soft-RoCE (`rxe0`, which the test VM creates on a
//! dummy netdev before loading rmad). [`hooks`] reaches into `rxe0` and rmad's private QP on
//! it: port queries counted, receive posts failed, the QP failed, an address handle held;
//! [`gid`] holds the case of a GID table change under a handle in use.

mod gid;
mod hooks;
mod ibmad;
mod wc;

#[kernel::prelude::kunit_tests(rmad_rxe)]
mod tests {
    use super::hooks::{
        self,
        FailedRecvPosts,
        PortQueries,
        RQ, //
    };
    use crate::{
        engine::{
            agent::Engine, //
            agent::{
                Agent,
                AgentConfig,
                RecvHandler,
                SendHandler, //
            },
            send::{
                SendBuf,
                SendCompletion,
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
            wire::{
                self,
                MadHdr, //
            },
        },
        testing::{
            ib_responder::IbResponder,
            post,
            race_cancel,
            reg,
            register_gsi,
            requests::{
                answer,
                gid_address,
                mad_in, //
            },
            rxe_agent,
            rxe_request,
            sleep_ms,
            wait_for,
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
                Relaxed,
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
        let r = rxe0()?;
        // The test VM always creates rxe0; without it the suite fails.
        assert!(r.is_some());
        let Some((port, engine, transport)) = r else {
            return Ok(());
        };
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
                retry: Default::default(),
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

    /// What [`rxe0`] gives: the port, the verbs engine, the port as a transport; `None`
    /// without rxe0.
    type Rxe0 = Option<(Arc<VerbsPort>, Arc<Engine>, Arc<dyn Transport<Agent>>)>;

    /// The rxe0 port, for agents registered on it.
    fn rxe0() -> Result<Rxe0> {
        let Some(port) = crate::verbs::find_port(c"rxe0", 1) else {
            return Ok(None);
        };
        let engine = crate::verbs::verbs_engine().ok_or(ENODEV)?;
        let transport: Arc<dyn Transport<Agent>> = port.clone();
        Ok(Some((port, engine, transport)))
    }

    /// What [`setup`] gives: the port, the agent, its recorder; `None` without rxe0.
    type Setup = Option<(Arc<VerbsPort>, Arc<Agent>, Arc<Recorder>)>;

    /// The rxe0 port, and an agent on it whose handlers record.
    #[test]
    fn rxe_posts_reach_the_device_from_the_caller() -> Result {
        // Once the port has the destination's address handle, a post hands its MAD to the
        // device from the caller's context, as ib_post_send_mad does; the first transmission to
        // a destination, whose handle is made sleepably, goes through the port's transmit work.
        // A flow label no other case uses makes the destination new to the port.
        let s = setup()?;
        assert!(s.is_some());
        let Some((port, a, rec)) = s else {
            return Ok(());
        };
        let get = |tag: usize| -> Result<SendBuf> {
            let mut buf = rxe_request(&port, &a, tag, wire::IB_MGMT_METHOD_GET, 5000, 2)?;
            let mut ah = buf.ah().ok_or(EINVAL)?;
            if let Some(g) = ah.grh.as_mut() {
                g.flow_label = 0x5_a5a5;
            }
            buf.set_ah(Some(ah));
            Ok(buf)
        };
        let (now0, queued0) = port.transmissions();
        let first = post(get(1)?).is_ok();
        let first_done = rec.wait_sends(1);
        let (now1, queued1) = port.transmissions();
        let runs1 = port.transmit_runs();
        let mut posted = 0;
        // One at a time: each send completion comes alone.
        for tag in 2..=9 {
            if post(get(tag)?).is_ok() && rec.wait_sends(tag) {
                posted += 1;
            }
        }
        let done = rec.wait_sends(9);
        let (now2, queued2) = port.transmissions();
        let runs2 = port.transmit_runs();
        let sends = rec.sends()?;
        a.unregister()?;
        assert!(first);
        assert!(first_done);
        // The first: by the transmit work, which made the handle.
        assert_eq!(now1.wrapping_sub(now0), 0);
        assert_eq!(queued1.wrapping_sub(queued0), 1);
        assert_eq!(posted, 8);
        assert!(done);
        // The eight after it: from the caller. (A run slower than the handle's freshness, 5 s,
        // sends one of them through the work, which checks the destination again.)
        assert!(now2.wrapping_sub(now1) >= 7);
        assert_eq!(now2.wrapping_sub(now1) + queued2.wrapping_sub(queued1), 8);
        // Their completions woke the transmit work only if one of them went through it (or a
        // port event came): nothing waited for the slots they freed.
        let through_work = queued2.wrapping_sub(queued1);
        pr_info!(
            "rmad_rxe: 8 direct posts: {} through the work, {} runs of it\n",
            through_work,
            runs2.wrapping_sub(runs1)
        );
        assert!(runs2.wrapping_sub(runs1) <= through_work.saturating_mul(2).saturating_add(1));
        let answered = sends.iter().filter(|s| s.1 == WcStatus::Success).count();
        assert_eq!(answered, 9);
        Ok(())
    }

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
        let r = rxe0()?;
        // The test VM always creates rxe0; without it the suite fails.
        assert!(r.is_some());
        let Some((port, engine, transport)) = r else {
            return Ok(());
        };
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
                retry: Default::default(),
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

    /// A responder that answers every request with a GET_RESP to [`Agent::reply_address`], as
    /// a C client answers with `rmad_recv_buf_ah`, counting what it posted and what failed.
    struct Replier {
        answered: Atomic<u32>,
        failed: Atomic<u32>,
    }

    impl SendHandler for Replier {
        fn send_done(&self, _agent: &Arc<Agent>, buf: SendBuf, _wc: SendCompletion) {
            drop(buf);
        }
    }

    impl RecvHandler for Replier {
        fn recv(&self, agent: &Arc<Agent>, send: Option<&SendHandle>, mad: RecvMad) {
            if send.is_some() {
                return;
            }
            let sent = MadHdr::parse(&mad.mad)
                .map_err(|_| EINVAL)
                .and_then(|hdr| {
                    let ah = agent.reply_address(&mad.wc)?;
                    answer(agent, &hdr, mad.wc.src_qp, mad.wc.pkey_index, ah)
                })
                .and_then(post);
            let count = if sent.is_ok() {
                &self.answered
            } else {
                &self.failed
            };
            count.add(1, Relaxed);
        }
    }

    #[test]
    fn rxe_answers_query_no_port() -> Result {
        // Issue 32 B: the reply address of every answered request queried the port for the
        // length of its GID table (on rxe that takes rtnl_lock and, on a netdev without link
        // settings such as rxe0's dummy, logs "speed is unknown"). N GETs of rmad's own
        // requester on rxe0, each answered by rmad's responder through ib_core's QP1 and the
        // reply address: every call of the device's query_port is counted, ib_core's too.
        const N: usize = 100;
        const CLASS: u8 = wire::IB_MGMT_CLASS_SNMP;
        let s = setup()?;
        // The test VM always creates rxe0; without it the suite fails.
        assert!(s.is_some());
        let Some((port, a, rec)) = s else {
            return Ok(());
        };
        let transport: Arc<dyn Transport<Agent>> = port.clone();
        let engine = crate::verbs::verbs_engine().ok_or(ENODEV)?;
        let replier = Arc::new(
            Replier {
                answered: Atomic::new(0),
                failed: Atomic::new(0),
            },
            GFP_KERNEL,
        )?;
        let b = register_gsi(&engine, &transport, 1, &replier, Some(reg(CLASS)))?;
        let queries = PortQueries::start(&port);
        let counting = queries.is_some();
        let mut posted = 0usize;
        for tag in 0..N {
            let mut buf = rxe_request(&port, &a, tag, wire::IB_MGMT_METHOD_GET, 20_000, 0)?;
            if let Some(c) = buf.mad_mut().get_mut(1) {
                *c = CLASS;
            }
            if post(buf).is_ok() {
                posted = posted.saturating_add(1);
            }
        }
        let done = rec.wait_sends(N);
        let counted = queries.as_ref().map(PortQueries::count);
        drop(queries);
        let sends = rec.sends()?;
        b.unregister()?;
        a.unregister()?;
        pr_info!(
            "rxe: {} requests answered through the reply address, {:?} port queries\n",
            replier.answered.load(Relaxed),
            counted
        );
        assert!(counting);
        assert_eq!(posted, N);
        assert!(done);
        let ok = sends
            .iter()
            .filter(|(_, st, _)| *st == WcStatus::Success)
            .count();
        assert_eq!(ok, N);
        assert_eq!(
            replier.answered.load(Relaxed),
            u32::try_from(N).unwrap_or(0)
        );
        assert_eq!(replier.failed.load(Relaxed), 0);
        assert_eq!(counted, Some(0));
        Ok(())
    }

    /// A receive handler that holds the first response it gets until the test opens its gate
    /// (at most [`crate::testing::WAIT_MS`]), as a slow client would, and records every call
    /// like a [`Recorder`].
    struct Held {
        rec: Arc<Recorder>,
        /// The handler holds the first response.
        entered: Atomic<bool>,
        /// The test let it go.
        gate: Atomic<bool>,
    }

    impl SendHandler for Held {
        fn send_done(&self, agent: &Arc<Agent>, buf: SendBuf, wc: SendCompletion) {
            self.rec.send_done(agent, buf, wc);
        }
    }

    impl RecvHandler for Held {
        fn recv(&self, agent: &Arc<Agent>, send: Option<&SendHandle>, mad: RecvMad) {
            if send.is_some() && !self.entered.xchg(true, Relaxed) {
                wait_for(|| self.gate.load(Acquire));
            }
            self.rec.recv(agent, send, mad);
        }
    }

    /// The private port's counters now (all zero once the port is closed).
    fn counts(port: &VerbsPort) -> hooks::VportCounts {
        hooks::counts(port).unwrap_or_default()
    }

    #[test]
    fn rxe_qp_recovered_once_a_held_handler_returns() -> Result {
        // Issue 32 item 3: the recovery of a failed private QP resets it only once every
        // receive flush was handled. A receive handler that holds its response keeps them
        // from draining: the recovery gave up waiting and nothing ran it again until another
        // send, port event or send completion, the QP staying in the error state with no
        // receive posted. Here nothing is posted after the handler returns: the QP must come
        // back with its receive queue full, and answer a later request.
        let r = rxe0()?;
        // The test VM always creates rxe0; without it the suite fails.
        assert!(r.is_some());
        let Some((port, engine, transport)) = r else {
            return Ok(());
        };
        let held = Arc::new(
            Held {
                rec: Recorder::new(Behaviour::default())?,
                entered: Atomic::new(false),
                gate: Atomic::new(false),
            },
            GFP_KERNEL,
        )?;
        let a = register_gsi(&engine, &transport, 1, &held, None)?;
        let before = counts(&port);
        // ib_core answers this GET; the handler holds the answer.
        let first = post(rxe_request(
            &port,
            &a,
            1,
            wire::IB_MGMT_METHOD_GET,
            20_000,
            0,
        )?)
        .is_ok();
        let entered = wait_for(|| held.entered.load(Relaxed));
        // The QP fails as rxe fails it when its netdev refuses a packet; the next send is
        // flushed, and its completion starts the recovery, which waits for the receive
        // flushes queued behind the held handler, and gives up. (Without a timeout the send
        // reports its flush; with one it would wait for its response: behaviour §7.2 item 1.)
        let failed = hooks::qp_error(&port).is_ok();
        let second = post(rxe_request(&port, &a, 2, wire::IB_MGMT_METHOD_GET, 0, 0)?).is_ok();
        let gave_up = wait_for(|| counts(&port).deferred > before.deferred);
        // The handler returns; nothing is posted and no port event comes from here on.
        held.gate.store(true, Release);
        let recovered = wait_for(|| {
            let c = counts(&port);
            c.resets > before.resets && c.rq_posted == RQ
        });
        let after = counts(&port);
        let handled = held.rec.wait_sends(2);
        // A later request is answered.
        let third = post(rxe_request(
            &port,
            &a,
            3,
            wire::IB_MGMT_METHOD_GET,
            20_000,
            0,
        )?)
        .is_ok();
        let answered = held.rec.wait_sends(3);
        let sends = held.rec.sends()?;
        held.gate.store(true, Release);
        a.unregister()?;
        pr_info!(
            "rxe: recovery gave up {} times, QP reset {} times, {} receives posted\n",
            after.deferred.saturating_sub(before.deferred),
            after.resets.saturating_sub(before.resets),
            after.rq_posted
        );
        assert!(first);
        assert!(entered);
        assert!(failed);
        assert!(second);
        assert!(gave_up);
        assert!(recovered);
        assert_eq!(after.rq_posted, RQ);
        assert!(handled);
        assert!(third);
        assert!(answered);
        let status = |tag: usize| sends.iter().find(|s| s.0 == tag).map(|s| s.1);
        assert_eq!(status(1), Some(WcStatus::Success));
        assert_eq!(status(2), Some(WcStatus::WrFlushErr));
        assert_eq!(status(3), Some(WcStatus::Success));
        Ok(())
    }

    #[test]
    fn rxe_failed_receive_posts_are_retried() -> Result {
        // Issue 32 item 3: a receive the device refused to take back (here ENOMEM, from a
        // hook on rxe0's post_recv for the private QP only) was forgotten, and the receive
        // queue stayed one buffer shorter for good: in the recovery's loop that posts every
        // buffer again after a reset, and after each handled receive. Each must be posted
        // again a little later, with nothing else happening.
        const FAILED: u32 = 8;
        let s = setup()?;
        assert!(s.is_some());
        let Some((port, a, rec)) = s else {
            return Ok(());
        };
        let before = counts(&port);
        let full = |c: &hooks::VportCounts| c.rq_posted == RQ;
        // The QP fails; once its receives are flushed, a send starts its recovery, whose
        // first posts fail.
        let failed = hooks::qp_error(&port).is_ok();
        let drained = wait_for(|| counts(&port).rq_posted == 0);
        let refusing = FailedRecvPosts::start(&port, FAILED);
        let hooked = refusing.is_some();
        let flushed = post(rxe_request(&port, &a, 1, wire::IB_MGMT_METHOD_GET, 0, 0)?).is_ok();
        let reset = wait_for(|| counts(&port).resets > before.resets);
        let all_failed = refusing.as_ref().map(FailedRecvPosts::left);
        let refilled = wait_for(|| full(&counts(&port)));
        // One more refusal: the buffer of the answer to this GET, once handled.
        drop(refusing);
        let refusing = FailedRecvPosts::start(&port, 1);
        let answered = post(rxe_request(
            &port,
            &a,
            2,
            wire::IB_MGMT_METHOD_GET,
            20_000,
            0,
        )?)
        .is_ok();
        let done = rec.wait_sends(2);
        let refused = wait_for(|| refusing.as_ref().map(FailedRecvPosts::left) == Some(0));
        let refilled_again = wait_for(|| full(&counts(&port)));
        drop(refusing);
        let sends = rec.sends()?;
        a.unregister()?;
        assert!(failed);
        assert!(drained);
        assert!(hooked);
        assert!(flushed);
        assert!(reset);
        assert_eq!(all_failed, Some(0));
        assert!(refilled);
        assert!(answered);
        assert!(done);
        assert!(refused);
        // Full again (a datagram that arrives later, a stray one included, takes a buffer
        // for as long as it is handled: the count is not read again after the wait).
        assert!(refilled_again);
        let statuses = sends.iter().map(|s| (s.0, s.1));
        assert!(statuses.eq([(1, WcStatus::WrFlushErr), (2, WcStatus::Success)]));
        Ok(())
    }

    #[test]
    fn rxe_handle_in_use_at_a_gid_change_is_retired() -> Result {
        super::gid::handle_in_use_at_a_gid_change_is_retired()
    }

    #[test]
    fn rxe_kept_wc_gives_the_senders_address() -> Result {
        super::wc::kept_wc_gives_the_senders_address()
    }

    #[test]
    fn rxe_ib_mad_header_over_ipv6() -> Result {
        assert_eq!(super::ibmad::header_on_rxe(0), Ok(()));
        Ok(())
    }

    #[test]
    fn rxe_ib_mad_header_over_ipv4() -> Result {
        assert_eq!(super::ibmad::header_on_rxe(1), Ok(()));
        Ok(())
    }

    #[test]
    fn rxe_ib_mad_header_gives_each_kind_of_packet_as_it_came() -> Result {
        for kind in 0..super::ibmad::WC_KINDS {
            assert_eq!((kind, super::ibmad::wc_round_trip(kind)), (kind, Ok(())));
        }
        Ok(())
    }
}
