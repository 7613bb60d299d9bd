// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_peer`: a hostile peer on `rxe0` sends rmad's private QP datagrams no MAD
//! layer should take (through [`crate::testing::peer::Peer`], a UD QP of its own), while an
//! agent waits for a real answer. Each case counts what rmad dropped and checks that the real
//! answer, sent last, is still matched exactly once.

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
        transport::{
            RecvMad,
            Transport, //
        },
        Engine, //
    },
    mad::wire,
    testing::{
        reg,
        register_gsi,
        sleep_ms,
        Recorder,
        WAIT_MS, //
    },
};
use kernel::sync::{
    atomic::{
        Acquire,
        Atomic,
        Relaxed,
        Release, //
    },
    Arc, //
};

/// A responder whose receive handler, once its agent is being unregistered, registers (and
/// unregisters) an agent for another class on the same port.
struct Reentrant {
    /// Where the handler registers.
    engine: Arc<Engine>,
    transport: Arc<dyn Transport>,
    /// The handlers of the agent it registers.
    other: Arc<Recorder>,
    /// The handler has started.
    entered: Atomic<bool>,
    /// The test thread is about to unregister the responder.
    unregistering: Atomic<bool>,
    /// What the handler's registration returned (0: success, else the errno), once done.
    result: Atomic<i32>,
    /// The handler has returned.
    done: Atomic<bool>,
}

impl SendHandler for Reentrant {
    fn send_done(&self, _agent: &Arc<Agent>, buf: SendBuf, _wc: SendCompletion) {
        drop(buf);
    }
}

impl RecvHandler for Reentrant {
    fn recv(&self, agent: &Arc<Agent>, _send: Option<&SendHandle>, _mad: RecvMad) {
        self.entered.store(true, Release);
        // Bounded: a test that went wrong must not hang the handler forever.
        for _ in 0..WAIT_MS {
            if self.unregistering.load(Acquire) {
                break;
            }
            sleep_ms(1);
        }
        // Long enough for the unregistration to wait for this very handler.
        sleep_ms(300);
        let r = register_gsi(
            &self.engine,
            &self.transport,
            agent.port(),
            &self.other,
            Some(reg(wire::IB_MGMT_CLASS_BM)),
        );
        let code = match r {
            Ok(a) => a.unregister().map_or_else(|e| e.to_errno(), |()| 0),
            Err(e) => e.to_errno(),
        };
        self.result.store(code, Relaxed);
        self.done.store(true, Release);
    }
}

#[kernel::prelude::kunit_tests(rmad_peer)]
mod tests {
    use super::Reentrant;
    use crate::{
        engine::{
            agent::Agent,
            send::SendHandle,
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
            Gid, //
        },
        testing::{
            peer::Peer,
            post,
            reg,
            register_gsi,
            rxe_agent,
            rxe_request,
            sleep_ms,
            wait_state,
            Behaviour,
            Call,
            Recorder,
            WAIT_MS, //
        },
        verbs::VerbsPort, //
    };
    use kernel::{
        prelude::*,
        sync::{
            atomic::{
                Acquire,
                Atomic,
                Relaxed,
                Release, //
            },
            Arc, //
        },
    };

    /// rxe0 port 1, an agent on it with a SEND (unanswered by ib_core, timeout 60 s) waiting
    /// for its response, the peer (sending from the GID the SEND went to, so that its
    /// answers pass the address check), rmad's private QP number and that GID.
    struct World {
        port: Arc<VerbsPort>,
        agent: Arc<Agent>,
        rec: Arc<Recorder>,
        send: SendHandle,
        tid: u64,
        peer: Peer,
        qpn: u32,
        gid: Gid,
    }

    fn world() -> Result<World> {
        let rec = Recorder::new(Behaviour::default())?;
        let (port, agent) = rxe_agent(&rec)?.ok_or(ENODEV)?;
        let send = post(rxe_request(
            &port,
            &agent,
            1,
            wire::IB_MGMT_METHOD_SEND,
            60_000,
            0,
        )?)?;
        let tid = wire::make_tid(agent.hi_tid, 1);
        if !wait_state(&agent, &send, SendState::WaitResp) {
            return Err(ETIMEDOUT);
        }
        let peer = Peer::open(&port, 1).ok_or(ENODEV)?;
        let qpn = port.qp_num().ok_or(ENODEV)?;
        let gid = port.gid(1, 1).ok_or(ENODEV)?;
        Ok(World {
            port,
            agent,
            rec,
            send,
            tid,
            peer,
            qpn,
            gid,
        })
    }

    /// The 256 bytes of a response to `tid` (class 0x04, method SEND with the response bit).
    fn response(tid: u64) -> Result<[u8; wire::IB_MGMT_MAD_SIZE]> {
        let mut mad = [0u8; wire::IB_MGMT_MAD_SIZE];
        MadHdr {
            base_version: 1,
            mgmt_class: wire::IB_MGMT_CLASS_PERF_MGMT,
            class_version: 1,
            method: wire::IB_MGMT_METHOD_SEND | wire::IB_MGMT_METHOD_RESP,
            tid,
            ..MadHdr::default()
        }
        .write(&mut mad)
        .map_err(|_| EINVAL)?;
        Ok(mad)
    }

    /// Waits (at most [`WAIT_MS`]) until `cond` holds.
    fn wait_for(mut cond: impl FnMut() -> bool) -> bool {
        for _ in 0..WAIT_MS / 10 {
            if cond() {
                return true;
            }
            sleep_ms(10);
        }
        cond()
    }

    #[test]
    fn short_datagrams_are_dropped_and_counted() -> Result {
        let w = world()?;
        let full = response(w.tid)?;
        let before = w.port.drops().short;
        // A valid response header, cut short: 0 to 255 bytes.
        let lens = [0usize, 1, 23, 24, 100, 255];
        let mut sent = 0usize;
        for len in lens {
            let part = full.get(..len).ok_or(EINVAL)?;
            sent += usize::from(w.peer.send(w.qpn, &w.gid, part).is_ok());
        }
        let dropped = wait_for(|| w.port.drops().short - before >= 6);
        // Then the real answer, whole.
        let answered = w.peer.send(w.qpn, &w.gid, &full).is_ok() && w.rec.wait_sends(1);
        let calls = w.rec.calls()?;
        let short = w.port.drops().short - before;
        let unreg = w.agent.unregister();
        drop(w.send);
        pr_info!("peer: {} short datagrams sent, {} dropped\n", sent, short);
        assert_eq!(sent, lens.len());
        assert!(dropped);
        assert_eq!(short, 6);
        assert!(answered);
        // Exactly one receive-handler call, for the whole answer, and then its send handler.
        let recvs = calls
            .iter()
            .filter(|c| matches!(c, Call::Recv { .. }))
            .count();
        let matched = calls
            .iter()
            .any(|c| matches!(c, Call::Recv { tag: Some(1), .. }));
        let success = calls
            .iter()
            .any(|c| matches!(c, Call::Send { tag: 1, wc, .. } if wc.status == WcStatus::Success));
        assert_eq!(recvs, 1);
        assert!(matched);
        assert!(success);
        assert!(unreg.is_ok());
        Ok(())
    }

    #[test]
    fn requests_at_the_private_qp_are_dropped_and_counted() -> Result {
        // A responder for class 0x06 GETs on rxe0: requests reach it through QP1, where ib_core
        // checks them and forwards them. The same request sent straight to rmad's private QP
        // must not reach it.
        let rec = Recorder::new(Behaviour::default())?;
        let port = crate::verbs::find_port(c"rxe0", 1).ok_or(ENODEV)?;
        let engine = crate::verbs::verbs_engine().ok_or(ENODEV)?;
        let transport: Arc<dyn Transport> = port.clone();
        let class = wire::IB_MGMT_CLASS_DEVICE_MGMT;
        let responder = register_gsi(&engine, &transport, 1, &rec, Some(reg(class)))?;
        let peer = Peer::open(&port, 1).ok_or(ENODEV)?;
        let qpn = port.qp_num().ok_or(ENODEV)?;
        let gid = port.gid(1, 1).ok_or(ENODEV)?;
        let mut mad = [0u8; wire::IB_MGMT_MAD_SIZE];
        MadHdr {
            base_version: 1,
            mgmt_class: class,
            class_version: 1,
            method: wire::IB_MGMT_METHOD_GET,
            tid: 0x1234_0000_0001,
            ..MadHdr::default()
        }
        .write(&mut mad)
        .map_err(|_| EINVAL)?;
        let before = port.drops().requests;
        let to_private = peer.send(qpn, &gid, &mad).is_ok();
        let dropped = wait_for(|| port.drops().requests > before);
        // Through QP1, as requests travel: the responder gets it.
        let to_qp1 = peer.send(1, &gid, &mad).is_ok();
        let served = rec.wait_recvs(1);
        // Time for a second delivery, which must not come.
        sleep_ms(200);
        let recvs = rec.recv_count();
        let requests = port.drops().requests - before;
        let unreg = responder.unregister();
        drop(peer);
        assert!(to_private && to_qp1);
        assert!(dropped);
        assert_eq!(requests, 1);
        assert!(served);
        assert_eq!(recvs, 1);
        assert!(unreg.is_ok());
        Ok(())
    }

    #[test]
    fn handler_registers_while_its_agent_unregisters() -> Result {
        // Unregistering a responder waits for its receive handler in progress; that handler
        // registers an agent of another class on the same port meanwhile. Both must complete
        // (in C they do: ib_core drops its registration lock before the wait).
        let port = crate::verbs::find_port(c"rxe0", 1).ok_or(ENODEV)?;
        let engine = crate::verbs::verbs_engine().ok_or(ENODEV)?;
        let transport: Arc<dyn Transport> = port.clone();
        let r = Arc::new(
            Reentrant {
                engine: engine.clone(),
                transport: transport.clone(),
                other: Recorder::new(Behaviour::default())?,
                entered: Atomic::new(false),
                unregistering: Atomic::new(false),
                result: Atomic::new(EINPROGRESS.to_errno()),
                done: Atomic::new(false),
            },
            GFP_KERNEL,
        )?;
        let class = wire::IB_MGMT_CLASS_DEVICE_MGMT;
        let responder = register_gsi(&engine, &transport, 1, &r, Some(reg(class)))?;
        let peer = Peer::open(&port, 1).ok_or(ENODEV)?;
        let gid = port.gid(1, 1).ok_or(ENODEV)?;
        let mut mad = [0u8; wire::IB_MGMT_MAD_SIZE];
        MadHdr {
            base_version: 1,
            mgmt_class: class,
            class_version: 1,
            method: wire::IB_MGMT_METHOD_GET,
            tid: 0x1234_0000_0002,
            ..MadHdr::default()
        }
        .write(&mut mad)
        .map_err(|_| EINVAL)?;
        let sent = peer.send(1, &gid, &mad).is_ok();
        let entered = wait_for(|| r.entered.load(Acquire));
        r.unregistering.store(true, Release);
        let unreg = responder.unregister();
        let done = r.done.load(Acquire);
        drop(peer);
        assert!(sent && entered);
        assert!(unreg.is_ok());
        // The unregistration returned after the handler, whose registration succeeded.
        assert!(done);
        assert_eq!(r.result.load(Relaxed), 0);
        Ok(())
    }
}
