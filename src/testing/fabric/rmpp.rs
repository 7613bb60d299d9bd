// SPDX-License-Identifier: GPL-2.0

//! The two-node RMPP checks (test flavour): one GET answered with an RMPP transfer by a
//! kernel-RMPP ib_core agent on the other machine (`serve-rmpp`), asked for by a kernel-RMPP
//! agent of rmad or of ib_core's C MAD layer (`src/testing/fabric/c_client.c`), with the same
//! figures for both (tests/vm/fabric.sh).
//!
//! - `serve-rmpp CLASS BYTES`: a kernel-RMPP ib_core agent on this node's rxe0 answers GETs of
//!   CLASS with BYTES of data, every byte of segment `n` equal to `n` modulo 256;
//! - `rmpp rmad|c PEER CLASS TIMEOUT_MS [RETRIES]`: one GET of CLASS to QP1 of PEER (see
//!   [`super::parse_peer`]) with a response timeout of TIMEOUT_MS and RETRIES retries (rmad
//!   only; default 0); its line:
//!   `WHO: rmpp status S len L intact I retries R` (`status -1`: no send completion), and for
//!   rmad `acks A aborts B dropped D`.
//!
//! The C layer's requester (`c`) does not get its answer yet: its GET completes at the device
//! with `WR_FLUSH_ERR` and then times out, on one node and across two; the cause is not found,
//! so tests/vm/fabric.sh runs only rmad's.

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
    ffi::c_int,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
    },
};

/// What one RMPP GET got (`struct rmad_fabric_rmpp` in `src/testing/fabric/c_client.h`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RmppFigures {
    /// The send's completion status; -1 if none came.
    status: i32,
    /// Its retries.
    retries: u32,
    /// The message's length; 0 if none came.
    len: u32,
    /// 1 if every data byte of segment `n` is `n` modulo 256.
    intact: u32,
}

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

extern "C" {
    fn rmad_fabric_c_rmpp(
        dev: *mut verbs::IbDevice,
        dgid: *const u8,
        sgid_index: u8,
        class: u8,
        timeout_ms: c_int,
        wait_ms: i64,
        out: *mut RmppFigures,
    ) -> c_int;
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
        "c" => {
            let mut f = RmppFigures::default();
            let ret = port.with_device(|dev| {
                // SAFETY: `with_device` holds a registration reference on `dev` across the
                // call; `dgid` has 16 bytes and `f` is valid for a write; the call returns only
                // when no handler of its agent runs any more.
                unsafe {
                    rmad_fabric_c_rmpp(
                        dev,
                        dgid.as_ptr(),
                        sgid_index,
                        class,
                        timeout_ms,
                        wait_ms,
                        &mut f,
                    )
                }
            });
            kernel::error::to_result(ret.ok_or(ENODEV)?)?;
            writeln!(
                w,
                "c: rmpp status {} len {} intact {} retries {}",
                f.status, f.len, f.intact, f.retries
            )
            .map_err(|_| ENOMEM)
        }
        _ => Err(EINVAL),
    }
}
