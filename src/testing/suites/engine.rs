// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_engine`: registration and routing shared by all agents.

#[kernel::prelude::kunit_tests(rmad_engine)]
mod tests {
    use crate::{
        engine::{
            agent::{
                Agent,
                RecvHandler,
                SendHandler, //
            },
            send::{
                SendBuf,
                SendCompletion,
                SendHandle, //
            },
            transport::RecvMad,
        },
        mad::{
            wire::{
                self,
                MadHdr, //
            },
            RegReq, //
        },
        testing::{
            post,
            reg,
            register_gsi,
            request,
            sleep_ms,
            wait_for,
            Behaviour,
            Call,
            Env,
            Recorder, //
        },
    };
    use kernel::{
        new_spinlock,
        prelude::*,
        sync::{
            atomic::{
                Acquire,
                Atomic,
                Relaxed,
                Release, //
            },
            Arc, SpinLock,
        },
        time::{
            delay::udelay,
            Delta,
            Instant,
            Monotonic, //
        },
    };

    /// How long a send handler waits for another agent's before it gives up: far longer than
    /// a completion takes to be delivered, even under emulation.
    const BLOCK_MS: i64 = 10_000;

    /// A send handler that waits, as the connection manager's does in `ib_destroy_cm_id`,
    /// until another agent's send handler ran.
    struct Waiter {
        /// The other agent's send handler ran.
        other_ran: Arc<Atomic<bool>>,
        /// This handler started waiting.
        started: Atomic<bool>,
        /// 0: not returned yet; 1: the other handler ran while this one waited; 2: it did not
        /// within [`BLOCK_MS`].
        outcome: Atomic<i32>,
    }

    impl SendHandler for Waiter {
        fn send_done(&self, _agent: &Arc<Agent>, _buf: SendBuf, _wc: SendCompletion) {
            self.started.store(true, Release);
            let start = Instant::<Monotonic>::now();
            while !self.other_ran.load(Acquire) && start.elapsed().as_millis() < BLOCK_MS {
                sleep_ms(1);
            }
            let ran = self.other_ran.load(Acquire);
            self.outcome.store(if ran { 1 } else { 2 }, Release);
        }
    }

    impl RecvHandler for Waiter {
        fn recv(&self, _agent: &Arc<Agent>, _send: Option<&SendHandle>, _mad: RecvMad) {}
    }

    /// A send handler that says it ran.
    struct Marker {
        /// Set when the handler runs.
        ran: Arc<Atomic<bool>>,
    }

    impl SendHandler for Marker {
        fn send_done(&self, _agent: &Arc<Agent>, _buf: SendBuf, _wc: SendCompletion) {
            self.ran.store(true, Release);
        }
    }

    impl RecvHandler for Marker {
        fn recv(&self, _agent: &Arc<Agent>, _send: Option<&SendHandle>, _mad: RecvMad) {}
    }

    /// What the other thread of a round saw.
    #[pin_data]
    struct Round {
        ready: Atomic<u32>,
        done: Atomic<bool>,
        #[pin]
        agent: SpinLock<Option<Arc<Agent>>>,
    }

    /// Spins until `n` parties are ready (bounded: a stuck party fails the round, not the
    /// kernel).
    fn meet(r: &Round, n: u32) {
        r.ready.add(1, Relaxed);
        for _ in 0..1_000_000 {
            if r.ready.load(Acquire) >= n {
                return;
            }
            core::hint::spin_loop();
        }
    }

    #[test]
    fn clashing_registrations_have_one_winner() -> Result {
        // Documentation/behaviour.md §1.3 step 9: of two registrations for the same class and
        // method on the same port, exactly one succeeds, however they interleave.
        const ROUNDS: usize = 400;
        let env = Env::new()?;
        let rec = Recorder::new(Behaviour::default())?;
        let (mut one, mut two, mut none) = (0usize, 0usize, 0usize);
        for _ in 0..ROUNDS {
            let round = Arc::pin_init(
                pin_init!(Round {
                    ready: Atomic::new(0),
                    done: Atomic::new(false),
                    agent <- new_spinlock!(None),
                }),
                GFP_KERNEL,
            )?;
            let (r2, rec2, engine, transport) = (
                round.clone(),
                rec.clone(),
                env.engine.clone(),
                env.transport.clone(),
            );
            crate::sys::workqueue::system_dfl().try_spawn(GFP_KERNEL, move || {
                meet(&r2, 2);
                let a = crate::testing::register_gsi(
                    &engine,
                    &transport,
                    1,
                    &rec2,
                    Some(reg(wire::IB_MGMT_CLASS_PERF_MGMT)),
                );
                *r2.agent.lock() = a.ok();
                r2.done.store(true, Release);
            })?;
            meet(&round, 2);
            let mine = env
                .agent(1, &rec, Some(reg(wire::IB_MGMT_CLASS_PERF_MGMT)))
                .ok();
            let mut waited = 0;
            while !round.done.load(Acquire) && waited < 2_000_000 {
                udelay(Delta::from_micros(10));
                waited += 10;
            }
            let theirs = round.agent.lock().take();
            match (mine.is_some(), theirs.is_some()) {
                (true, true) => two += 1,
                (false, false) => none += 1,
                _ => one += 1,
            }
            for a in [mine, theirs].iter().flatten() {
                a.unregister()?;
            }
        }
        pr_info!(
            "engine: {} rounds: one winner {}, two {}, none {}\n",
            ROUNDS,
            one,
            two,
            none
        );
        assert_eq!(two, 0);
        assert_eq!(none, 0);
        assert_eq!(one, ROUNDS);
        Ok(())
    }

    #[test]
    fn cm_requests_only_send_or_class_port_info() -> Result {
        // `validate_mad`: a CM MAD other than ClassPortInfo is dropped unless its method is
        // SEND. A responder for CM GETs and SENDs gets the SEND and the ClassPortInfo GET, not
        // the GET of another attribute.
        let env = Env::new()?;
        let rec = Recorder::new(Behaviour::default())?;
        let a = env.agent(1, &rec, None)?;
        let peer_rec = Recorder::new(Behaviour::default())?;
        let methods = (1u128 << wire::IB_MGMT_METHOD_GET) | (1u128 << wire::IB_MGMT_METHOD_SEND);
        let b = env.agent(
            2,
            &peer_rec,
            Some(RegReq {
                methods,
                ..reg(wire::IB_MGMT_CLASS_CM)
            }),
        )?;
        let cases = [
            (wire::IB_MGMT_METHOD_GET, 0x0010u16),
            (wire::IB_MGMT_METHOD_SEND, 0x0010),
            (
                wire::IB_MGMT_METHOD_GET,
                wire::IB_MGMT_CLASSPORTINFO_ATTR_ID,
            ),
        ];
        let mut posted = 0;
        for (tag, (method, attr)) in cases.iter().enumerate() {
            let mut buf = request(&a, wire::IB_MGMT_CLASS_CM, tag, 2, 0, 0)?;
            let hdr = MadHdr {
                method: *method,
                attr_id: *attr,
                ..MadHdr::parse(buf.mad()).map_err(|_| EINVAL)?
            };
            hdr.write(buf.mad_mut()).map_err(|_| EINVAL)?;
            posted += usize::from(post(buf).is_ok());
        }
        let sent = rec.wait_sends(3);
        let got = peer_rec.wait_recvs(2);
        // Time for a third, which must not come.
        crate::testing::sleep_ms(200);
        let recvs = peer_rec.recv_count();
        let calls = peer_rec.calls()?;
        let tids: KVec<u64> = {
            let mut v = KVec::new();
            for c in calls.iter() {
                if let Call::Recv { tid, .. } = c {
                    v.push(*tid, GFP_KERNEL)?;
                }
            }
            v
        };
        let unreg = (a.unregister(), b.unregister());
        assert_eq!(posted, 3);
        assert!(sent && got);
        assert_eq!(recvs, 2);
        assert!(tids
            .iter()
            .copied()
            .eq([1u32, 2].map(|lo| wire::make_tid(a.hi_tid, lo))));
        assert!(unreg.0.is_ok() && unreg.1.is_ok());
        Ok(())
    }

    #[test]
    fn a_waiting_send_handler_stalls_no_other_agent() -> Result {
        // A send handler may wait for another agent's completion (the connection manager's
        // send handler can call `ib_destroy_cm_id`, which waits for its messages on the REP
        // agent): the other agent's completions keep being delivered meanwhile. One queue that
        // runs every agent's deliveries in turn would hold them behind the waiting handler.
        let env = Env::new()?;
        let other_ran = Arc::new(Atomic::new(false), GFP_KERNEL)?;
        let waiter = Arc::new(
            Waiter {
                other_ran: other_ran.clone(),
                started: Atomic::new(false),
                outcome: Atomic::new(0),
            },
            GFP_KERNEL,
        )?;
        let marker = Arc::new(
            Marker {
                ran: other_ran.clone(),
            },
            GFP_KERNEL,
        )?;
        let a = register_gsi(&env.engine, &env.transport, 1, &waiter, None)?;
        let b = register_gsi(&env.engine, &env.transport, 1, &marker, None)?;
        let class = wire::IB_MGMT_CLASS_PERF_MGMT;
        let first = post(request(&a, class, 1, 2, 0, 0)?).is_ok();
        let waiting = wait_for(|| waiter.started.load(Acquire));
        let second = post(request(&b, class, 2, 2, 0, 0)?).is_ok();
        let returned = wait_for(|| waiter.outcome.load(Acquire) != 0);
        let outcome = waiter.outcome.load(Acquire);
        let unreg = (a.unregister(), b.unregister());
        assert!(first && second);
        assert!(waiting);
        assert!(returned);
        assert_eq!(outcome, 1);
        assert!(other_ran.load(Acquire));
        assert!(unreg.0.is_ok() && unreg.1.is_ok());
        Ok(())
    }
}
