// SPDX-License-Identifier: GPL-2.0

//! The two-node RMPP checks (test flavour): one GET answered with an RMPP transfer by a
//! kernel-RMPP ib_core agent on the other machine (`serve-rmpp`), asked for by a kernel-RMPP
//! rmad agent (tests/vm/fabric.sh).
//!
//! - `serve-rmpp CLASS BYTES`: a kernel-RMPP ib_core agent on this node's rxe0 answers GETs of
//!   CLASS with BYTES of data, every byte of segment `n` equal to `n` modulo 256;
//! - `rmpp rmad PEER CLASS TIMEOUT_MS [RETRIES]`: one GET of CLASS to QP1 of PEER (see
//!   [`super::parse_peer`]) with a response timeout of TIMEOUT_MS and RETRIES retries (default
//!   0); its line: `rmad: rmpp status S len L intact I retries R acks A aborts B dropped D`
//!   (`status -1`: no send completion).

use super::{
    parse_peer,
    parse_u8,
    wait, //
};
use crate::{
    engine::{
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
        wire,
        QpType, //
    },
    testing::{
        control::Writer,
        ib_responder::IbResponder,
        requests, //
    },
    verbs,
};
use core::fmt::Write;
use kernel::{
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
    },
};

/// The handlers of rmad's GET.
struct Get {
    status: Atomic<i32>,
    retries: Atomic<u32>,
    len: Atomic<u32>,
    intact: Atomic<u32>,
}

impl SendHandler for Get {
    fn send_done(&self, _agent: &Arc<Agent>, buf: SendBuf, wc: SendCompletion) {
        self.retries
            .store(u32::try_from(buf.retries()).unwrap_or(0), Relaxed);
        self.status
            .store(i32::try_from(wc.status.code()).unwrap_or(i32::MAX), Relaxed);
    }
}

impl RecvHandler for Get {
    fn recv(&self, _agent: &Arc<Agent>, send: Option<&SendHandle>, mad: RecvMad) {
        if send.is_none() {
            return;
        }
        let hdr = mad
            .mad
            .get(1)
            .map_or(wire::IB_MGMT_MAD_HDR, |c| wire::ib_get_mad_data_offset(*c));
        let data = wire::IB_MGMT_MAD_SIZE.saturating_sub(hdr).max(1);
        let intact = mad.mad.get(hdr..).is_some_and(|d| {
            d.chunks(data).enumerate().all(|(i, c)| {
                c.iter()
                    .all(|b| usize::from(*b) == (i.saturating_add(1)) % 256)
            })
        });
        self.len
            .store(u32::try_from(mad.mad.len()).unwrap_or(u32::MAX), Relaxed);
        self.intact.store(u32::from(intact), Relaxed);
    }
}

/// `serve-rmpp CLASS BYTES`: replaces the responder in `slot` by a kernel-RMPP ib_core agent
/// on rxe0 that answers GETs of CLASS with BYTES of data.
pub(super) fn serve(
    slot: &mut Option<IbResponder>,
    class: &str,
    bytes: &str,
    out: &mut KVec<u8>,
) -> Result {
    // The earlier responder stops first: ib_core would refuse a second one for the class.
    drop(slot.take());
    let port = verbs::find_port(c"rxe0", 1).ok_or(ENODEV)?;
    let len: u32 = bytes.parse().map_err(|_| EINVAL)?;
    let r = IbResponder::start_rmpp(&port, parse_u8(class)?, len).ok_or(EBUSY)?;
    *slot = Some(r);
    out.extend_from_slice(b"serving\n", GFP_KERNEL)?;
    Ok(())
}

/// `rmpp WHO PEER CLASS TIMEOUT_MS` (the words after `rmpp`).
pub(crate) fn command<'a>(mut words: impl Iterator<Item = &'a str>, out: &mut KVec<u8>) -> Result {
    let who = words.next().ok_or(EINVAL)?;
    let (dgid, sgid_index) = parse_peer(words.next().ok_or(EINVAL)?)?;
    let class = parse_u8(words.next().ok_or(EINVAL)?)?;
    let timeout_ms: i32 = words.next().ok_or(EINVAL)?.parse().map_err(|_| EINVAL)?;
    let retries: i32 = match words.next() {
        Some(r) => r.parse().map_err(|_| EINVAL)?,
        None => 0,
    };
    if words.next().is_some() || timeout_ms <= 0 || !(0..=10).contains(&retries) {
        return Err(EINVAL);
    }
    // Every try's response timer and then some: the send handler runs by then.
    let wait_ms = i64::from(timeout_ms)
        .saturating_mul(i64::from(retries).saturating_add(1))
        .saturating_add(10_000);
    let port = verbs::find_port(c"rxe0", 1).ok_or(ENODEV)?;
    let mut w = Writer(out);
    match who {
        "rmad" => {
            let engine = verbs::verbs_engine().ok_or(ENODEV)?;
            let transport: Arc<dyn Transport> = port.clone();
            let get = Arc::new(
                Get {
                    status: Atomic::new(-1),
                    retries: Atomic::new(0),
                    len: Atomic::new(0),
                    intact: Atomic::new(0),
                },
                GFP_KERNEL,
            )?;
            let a = Agent::register(
                &engine,
                &transport,
                AgentConfig {
                    port: 1,
                    qp_type: QpType::Gsi,
                    reg: None,
                    rmpp_version: 1,
                    flags: 0,
                    send_handler: Some(get.clone()),
                    recv_handler: Some(get.clone()),
                },
            )?;
            let ah = requests::gid_address(dgid, sgid_index);
            let sent = (|| -> Result {
                a.resolve_address(&ah)?;
                let mut buf = requests::mad(&a, class, wire::IB_MGMT_METHOD_GET, 1)?;
                buf.set_ah(Some(ah));
                buf.set_timeout_ms(timeout_ms);
                buf.set_retries(retries);
                Agent::post(buf).map(|_| ()).map_err(|e| e.err)
            })();
            let done = sent.is_ok() && wait(wait_ms, || get.status.load(Relaxed) >= 0);
            let stats = a.rmpp_stats();
            let unreg = a.unregister();
            sent?;
            unreg?;
            if !done {
                pr_warn!("fabric: the RMPP GET did not complete\n");
            }
            writeln!(
                w,
                "rmad: rmpp status {} len {} intact {} retries {} acks {} aborts {} dropped {}",
                get.status.load(Relaxed),
                get.len.load(Relaxed),
                get.intact.load(Relaxed),
                get.retries.load(Relaxed),
                stats.acks,
                stats.aborts,
                stats.dropped
            )
            .map_err(|_| ENOMEM)
        }
        _ => Err(EINVAL),
    }
}
