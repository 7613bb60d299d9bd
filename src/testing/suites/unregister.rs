// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_unregister`: unregistration (`ib_unregister_mad_agent`) from inside
//! handlers, on the loopback fabric. Each case would hang forever (and trip the hung-task
//! detector) if unregistration waited for the handler that called it.

#[kernel::prelude::kunit_tests(rmad_unregister)]
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
            transport::RecvMad, //
        },
        mad::wire,
        testing::{
            post,
            register_gsi,
            request,
            Behaviour,
            Env,
            Recorder, //
        },
    };
    use kernel::{
        new_condvar, new_spinlock,
        prelude::*,
        sync::{
            Arc,
            CondVar,
            SpinLock, //
        },
        time::msecs_to_jiffies,
    };

    const CLASS: u8 = wire::IB_MGMT_CLASS_PERF_MGMT;
    /// Port of the requester, and LID of the responder's port.
    const A: u8 = 1;
    const B: u16 = 2;

    #[test]
    fn from_own_recv_handler_refused() -> Result {
        let env = Env::new()?;
        let (b, brec) = env.responder(2, CLASS)?;
        let rec = Recorder::new(Behaviour {
            unregister_in_recv: true,
            ..Behaviour::default()
        })?;
        let a = env.agent(A, &rec, None)?;
        let _h = post(request(&a, CLASS, 1, B, 5000, 0)?)?;
        let answered = rec.wait_recvs(1) && rec.wait_sends(1);
        let results = rec.inner_results()?;
        a.unregister()?;
        drop(brec.take_kept());
        b.unregister()?;
        assert!(answered);
        assert_eq!(&results[..], &[EDEADLK.to_errno()][..]);
        Ok(())
    }

    #[test]
    fn from_own_send_handler_while_another_handler_runs() -> Result {
        // The first send's handler (completion work) sleeps; meanwhile a response to the
        // second send runs the receive and send handlers inline in the fabric's receive
        // context, and returns. Then the first handler unregisters: it is still inside a
        // handler of the agent, whatever the other handler did in between.
        let env = Env::new()?;
        let (b, brec) = env.responder(2, CLASS)?;
        let rec = Recorder::new(Behaviour {
            unregister_in_send: true,
            sleep_in_send_ms: 500,
            ..Behaviour::default()
        })?;
        let a = env.agent(A, &rec, None)?;
        // No response expected: its handler runs at its send completion.
        let _first = post(request(&a, wire::IB_MGMT_CLASS_BM, 1, B, 0, 0)?)?;
        let _second = post(request(&a, CLASS, 2, B, 5000, 0)?)?;
        let both = rec.wait_sends(2);
        let results = rec.inner_results()?;
        a.unregister()?;
        drop(brec.take_kept());
        b.unregister()?;
        assert!(both);
        assert_eq!(&results[..], &[EDEADLK.to_errno(), EDEADLK.to_errno()][..]);
        Ok(())
    }

    /// Handlers that unregister a target agent from inside the send handler and record what
    /// that returned.
    #[pin_data]
    struct Unregisterer {
        /// Taken back at the end of the test: agents and their handlers would otherwise keep
        /// each other alive.
        #[pin]
        target: SpinLock<Option<Arc<Agent>>>,
        #[pin]
        results: SpinLock<KVec<i32>>,
        #[pin]
        changed: CondVar,
    }

    impl Unregisterer {
        fn new() -> Result<Arc<Self>> {
            Arc::pin_init(
                pin_init!(Self {
                    target <- new_spinlock!(None),
                    results <- new_spinlock!(KVec::new()),
                    changed <- new_condvar!("Unregisterer::changed"),
                }),
                GFP_KERNEL,
            )
        }

        /// Waits until `n` results are in, at most 20 s.
        fn wait(&self, n: usize) -> bool {
            let mut g = self.results.lock();
            for _ in 0..200 {
                if g.len() >= n {
                    return true;
                }
                let _ = self
                    .changed
                    .wait_interruptible_timeout(&mut g, msecs_to_jiffies(100));
            }
            g.len() >= n
        }
    }

    impl SendHandler for Unregisterer {
        fn send_done(&self, _agent: &Arc<Agent>, buf: SendBuf, _wc: SendCompletion) {
            drop(buf);
            let target = self.target.lock().clone();
            if let Some(t) = target {
                let r = match t.unregister() {
                    Ok(()) => 0,
                    Err(e) => e.to_errno(),
                };
                let _ = self.results.lock().push(r, GFP_ATOMIC);
                self.changed.notify_all();
            }
        }
    }

    impl RecvHandler for Unregisterer {
        fn recv(&self, _agent: &Arc<Agent>, _send: Option<&SendHandle>, _mad: RecvMad) {}
    }

    #[test]
    fn nested_across_agents() -> Result {
        // A's send handler unregisters B; B's flushed send is delivered in that same thread,
        // and B's handler unregisters A: A's handler is on the stack, so that is refused,
        // while B's unregistration (called from A's handler) goes through.
        let env = Env::new()?;
        let ha = Unregisterer::new()?;
        let hb = Unregisterer::new()?;
        let a = register_gsi(&env.engine, &env.transport, A, &ha, None)?;
        let b = register_gsi(&env.engine, &env.transport, A, &hb, None)?;
        *ha.target.lock() = Some(b.clone());
        *hb.target.lock() = Some(a.clone());
        // B waits for a response that never comes; A's send completes at once.
        let _waiting = post(request(&b, wire::IB_MGMT_CLASS_BM, 1, B, 60_000, 0)?)?;
        let _go = post(request(&a, wire::IB_MGMT_CLASS_BM, 2, B, 0, 0)?)?;
        let done = ha.wait(1) && hb.wait(1);
        let ra = ha.results.lock().first().copied();
        let rb = hb.results.lock().first().copied();
        let again = b.unregister().err().map(|e| e.to_errno());
        a.unregister()?;
        drop(ha.target.lock().take());
        drop(hb.target.lock().take());
        assert!(done);
        // A's handler unregistered B; B's handler was refused A.
        assert_eq!(ra, Some(0));
        assert_eq!(rb, Some(EDEADLK.to_errno()));
        assert_eq!(again, Some(EINVAL.to_errno()));
        Ok(())
    }
}
