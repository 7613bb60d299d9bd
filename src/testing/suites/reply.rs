// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_reply`: the address that answers a received MAD, on the loopback fabric.
//! It must be the one `ib_init_ah_attr_from_wc` builds: the request's source LID, SL and
//! path bits; with a GRH, the request's source GID from this port's GID the request was sent
//! to (wherever it is in the GID table), its traffic class and flow label, and hop limit 0xFF.

#[kernel::prelude::kunit_tests(rmad_reply)]
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
            wire,
            Address,
            GrhAttr, //
        },
        testing::{
            loopback::FAR_GID_INDEX,
            post,
            reg,
            register_gsi,
            request,
            sleep_ms,
            Behaviour,
            Env,
            Recorder,
            WAIT_MS, //
        },
    };
    use kernel::{
        new_spinlock,
        prelude::*,
        sync::{
            Arc,
            SpinLock, //
        },
    };

    /// A responder that records the reply address of the first request it gets.
    #[pin_data]
    struct Replier {
        #[pin]
        addr: SpinLock<Option<Result<Address>>>,
    }

    impl SendHandler for Replier {
        fn send_done(&self, _agent: &Arc<Agent>, buf: SendBuf, _wc: SendCompletion) {
            drop(buf);
        }
    }

    impl RecvHandler for Replier {
        fn recv(&self, agent: &Arc<Agent>, send: Option<&SendHandle>, mad: RecvMad) {
            if send.is_none() {
                let a = agent.reply_address(&mad.wc);
                self.addr.lock().get_or_insert(a);
            }
        }
    }

    /// Waits (at most [`WAIT_MS`]) for the replier's record.
    fn wait_addr(r: &Replier) -> Option<Result<Address>> {
        for _ in 0..WAIT_MS {
            if let Some(a) = r.addr.lock().take() {
                return Some(a);
            }
            sleep_ms(1);
        }
        None
    }

    #[test]
    fn reply_address_is_ib_init_ah_attr_from_wcs() -> Result {
        let env = Env::new()?;
        let rec = Recorder::new(Behaviour::default())?;
        let a = env.agent(1, &rec, None)?;
        let replier = Arc::pin_init(
            pin_init!(Replier {
                addr <- new_spinlock!(None),
            }),
            GFP_KERNEL,
        )?;
        let class = wire::IB_MGMT_CLASS_PERF_MGMT;
        let b = register_gsi(&env.engine, &env.transport, 2, &replier, Some(reg(class)))?;
        let far = env.transport.gid(2, FAR_GID_INDEX).ok_or(ENODEV)?;
        let mine = env.transport.gid(1, 0).ok_or(ENODEV)?;
        // A request with SL 3, through a GRH to port 2's GID at index 20.
        let mut buf = request(&a, class, 1, 2, 0, 0)?;
        buf.set_ah(Some(Address {
            dlid: 2,
            src_path_bits: 0,
            sl: 3,
            grh: Some(GrhAttr {
                dgid: far,
                sgid_index: 0,
                hop_limit: 9,
                traffic_class: 7,
                flow_label: 0x12345,
            }),
        }));
        let posted = post(buf).is_ok();
        let got = wait_addr(&replier);
        let _ = rec.wait_sends(1);
        let unreg = (a.unregister(), b.unregister());
        assert!(posted);
        assert!(unreg.0.is_ok() && unreg.1.is_ok());
        let want = Address {
            dlid: 1,
            src_path_bits: 0,
            sl: 3,
            grh: Some(GrhAttr {
                dgid: mine,
                sgid_index: FAR_GID_INDEX,
                hop_limit: 0xff,
                traffic_class: 7,
                flow_label: 0x12345,
            }),
        };
        assert!(got == Some(Ok(want)));
        Ok(())
    }
}
