// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_devices`: two devices on one engine, as a host with two HCAs has (the
//! verbs transport runs every RDMA device on one engine). Here two loopback fabrics, each a
//! device with ports 1 and 2: registrations are per device and port, and a response is
//! matched only on the device its send went out of.

#[kernel::prelude::kunit_tests(rmad_devices)]
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
            wire::{
                self,
                MadHdr, //
            },
            Address,
        },
        testing::{
            loopback::{
                Fabric,
                Loopback, //
            },
            post,
            reg,
            register_gsi,
            request,
            sleep_ms,
            wait_state,
            Behaviour,
            Env,
            Recorder, //
        },
    };
    use kernel::{
        prelude::*,
        sync::Arc, //
    };

    /// A second device on `env`'s engine; shut down by [`Second::drop`].
    struct Second {
        lb: Arc<Loopback>,
        transport: Arc<dyn Transport<Agent>>,
    }

    impl Second {
        fn new(env: &Env) -> Result<Self> {
            let lb = Loopback::new(&env.engine, Fabric::DEFAULT_PORTS)?;
            let transport: Arc<dyn Transport<Agent>> = lb.clone();
            Ok(Self { lb, transport })
        }
    }

    impl Drop for Second {
        fn drop(&mut self) {
            self.lb.fabric.shutdown();
        }
    }

    /// Posts, from `from`, a GET_RESP with TID `tid` of class `class` to LID `dlid`.
    fn respond_to(from: &Arc<Agent>, tid: u64, class: u8, dlid: u16) -> Result {
        let mut buf = from.create_mad(1, GFP_KERNEL)?;
        MadHdr {
            base_version: 1,
            mgmt_class: class,
            class_version: 1,
            method: wire::IB_MGMT_METHOD_GET_RESP,
            tid,
            ..MadHdr::default()
        }
        .write(buf.mad_mut())
        .map_err(|_| EINVAL)?;
        buf.set_ah(Some(Address {
            dlid,
            src_path_bits: 0,
            grh: None,
            sl: 0,
        }));
        buf.set_context([usize::MAX, 0]);
        post(buf).map(|_| ())
    }

    #[test]
    fn same_class_served_on_two_devices() -> Result {
        // ib_core keeps registrations per port of each device: the same class and methods on
        // port 2 of both devices, each answering its own device's requests only.
        let env = Env::new()?;
        let second = Second::new(&env)?;
        let class = wire::IB_MGMT_CLASS_DEVICE_MGMT;
        let (ra, rb) = (
            Recorder::new(Behaviour {
                respond: true,
                ..Behaviour::default()
            })?,
            Recorder::new(Behaviour {
                respond: true,
                ..Behaviour::default()
            })?,
        );
        let resp_a = register_gsi(&env.engine, &env.transport, 2, &ra, Some(reg(class)));
        let resp_b = register_gsi(&env.engine, &second.transport, 2, &rb, Some(reg(class)));
        let (qa, qb) = (
            Recorder::new(Behaviour::default())?,
            Recorder::new(Behaviour::default())?,
        );
        let a = register_gsi(&env.engine, &env.transport, 1, &qa, None)?;
        let b = register_gsi(&env.engine, &second.transport, 1, &qb, None)?;
        let both = resp_a.is_ok() && resp_b.is_ok();
        let (mut answered_a, mut answered_b) = (false, false);
        if both {
            answered_a = post(request(&a, class, 1, 2, 10_000, 0)?).is_ok() && qa.wait_sends(1);
            answered_b = post(request(&b, class, 2, 2, 10_000, 0)?).is_ok() && qb.wait_sends(1);
        }
        let (served_a, served_b) = (ra.recv_count(), rb.recv_count());
        let (sa, sb) = (qa.sends()?, qb.sends()?);
        for r in [resp_a, resp_b].into_iter().flatten() {
            r.unregister()?;
        }
        a.unregister()?;
        b.unregister()?;
        drop(second);
        assert!(both);
        assert!(answered_a && answered_b);
        assert_eq!((served_a, served_b), (1, 1));
        assert_eq!(&sa[..], &[(1, WcStatus::Success, 0)][..]);
        assert_eq!(&sb[..], &[(2, WcStatus::Success, 0)][..]);
        Ok(())
    }

    #[test]
    fn responses_never_cross_devices() -> Result {
        // A's send on device 1 waits for an answer from LID 2. A response with its TID from
        // LID 2 of device 2 arrives on device 2's port 1, the same port number, the same
        // source LID: it is not A's (in C, `ib_find_send_mad` never sees it: agents are per
        // device), and A's send stays waiting.
        let env = Env::new()?;
        let second = Second::new(&env)?;
        let class = wire::IB_MGMT_CLASS_PERF_MGMT;
        let rec = Recorder::new(Behaviour::default())?;
        let a = env.agent(1, &rec, None)?;
        let other = Recorder::new(Behaviour::default())?;
        let spoofer = register_gsi(&env.engine, &second.transport, 2, &other, None)?;
        let h = post(request(&a, class, 7, 2, 60_000, 0)?)?;
        let waiting = wait_state(&a, &h, SendState::WaitResp);
        let tid = wire::make_tid(a.hi_tid, 7);
        let spoofed = respond_to(&spoofer, tid, class, 1).is_ok() && other.wait_sends(1);
        // Time for the response to arrive and, wrongly, match.
        sleep_ms(200);
        let still = a.send_state(&h);
        let recvs = rec.recv_count();
        let cancel = h.cancel();
        let flushed = rec.wait_sends(1);
        let sends = rec.sends()?;
        a.unregister()?;
        spoofer.unregister()?;
        drop(second);
        assert!(waiting && spoofed);
        assert_eq!(still, Some(SendState::WaitResp));
        assert_eq!(recvs, 0);
        assert!(cancel.is_ok() && flushed);
        assert_eq!(&sends[..], &[(7, WcStatus::WrFlushErr, 0)][..]);
        Ok(())
    }

    #[test]
    fn retry_into_a_removed_device_is_flushed() -> Result {
        // A device's removal cancels its agents' sends in batches; an expiry between two
        // batches retransmits into the closed port, which refuses with ENODEV. That send is
        // flushed like every other send of the removal, not timed out.
        let env = Env::new()?;
        let rec = Recorder::new(Behaviour::default())?;
        let a = env.agent(1, &rec, None)?;
        // Nobody answers at LID 2: the send waits 50 ms, then retries once.
        let h = post(request(&a, wire::IB_MGMT_CLASS_PERF_MGMT, 5, 2, 50, 1)?)?;
        let waiting = wait_state(&a, &h, SendState::WaitResp);
        env.fabric().set_knobs(|k| {
            k.fail_posts = 1;
            k.fail_gone = true;
        });
        let done = rec.wait_sends(1);
        let sends = rec.sends()?;
        a.unregister()?;
        assert!(waiting);
        assert!(done);
        assert_eq!(sends.first().map(|s| s.1), Some(WcStatus::WrFlushErr));
        Ok(())
    }
}
