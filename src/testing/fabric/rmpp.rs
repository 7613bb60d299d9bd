// SPDX-License-Identifier: GPL-2.0

//! The two-node RMPP checks (test flavour): one GET answered with an RMPP transfer by a
//! kernel-RMPP ib_core agent on the other machine (`serve-rmpp`), asked for by a kernel-RMPP
//! rmad agent (tests/vm/fabric.sh).
//!
//! - `serve-rmpp CLASS BYTES [DEV]`: a kernel-RMPP ib_core agent on this node's DEV (rxe0 by
//!   default) answers GETs of CLASS with BYTES of data, every byte of segment `n` equal to `n`
//!   modulo 256;
//! - `respond-rmpp CLASS BYTES [DEV]`: a kernel-RMPP rmad agent on DEV answers GETs of
//!   CLASS with a segmented GET_RESP of BYTES, every byte of segment `n` equal to `n` modulo
//!   256 (it replaces `serve-rmpp`'s agent, which would hold the class); `unrespond-rmpp`
//!   stops it: `answered N ok K bad B retries R request_len L` (its sends' completions, the
//!   most retries one used, the length of the last request as reassembled);
//! - `rmpp WHO PEER CLASS TIMEOUT_MS [RETRIES [REQ_BYTES]]`: one GET of CLASS to QP1 of PEER
//!   (see [`super::parse_peer`]) with a response timeout of TIMEOUT_MS and RETRIES retries
//!   (default 0), segmented with REQ_BYTES of data when given, through a kernel-RMPP agent of
//!   rmad (WHO `rmad`; its line: `rmad: rmpp status S len L intact I retries R acks A aborts
//!   B dropped D sent T ms M`, T: transmissions, segments and ACKs) or of ib_core's C MAD
//!   layer (WHO `c`, src/testing/fabric/c_client.c; its line: `c: rmpp status S len L intact I
//!   retries R ms M`); `status -1`: no send completion; M: the milliseconds the GET took.

use super::{
    parse_peer,
    parse_u8,
    wait, //
};
use crate::engine::agent::SendSpec;
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
        state::WcStatus,
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
use core::{
    ffi::c_int,
    fmt::Write, //
};
use kernel::{
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
    },
    time::{
        Instant,
        Monotonic, //
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

/// The handlers of `respond-rmpp`: every GET is answered with one segmented GET_RESP.
pub(crate) struct Server {
    /// Data bytes of each answer.
    bytes: i32,
    answered: Atomic<u32>,
    ok: Atomic<u32>,
    bad: Atomic<u32>,
    /// The most retries one answer used.
    retries: Atomic<u32>,
    /// The length of the last request, as reassembled.
    request_len: Atomic<u32>,
}

impl Server {
    /// Handlers that answer with `bytes` of data.
    pub(crate) fn new(bytes: i32) -> Result<Arc<Self>> {
        Ok(Arc::new(
            Server {
                bytes,
                answered: Atomic::new(0),
                ok: Atomic::new(0),
                bad: Atomic::new(0),
                retries: Atomic::new(0),
                request_len: Atomic::new(0),
            },
            GFP_KERNEL,
        )?)
    }

    /// (answered, ok, bad, most retries) so far.
    pub(crate) fn figures(&self) -> (u32, u32, u32, u32) {
        (
            self.answered.load(Relaxed),
            self.ok.load(Relaxed),
            self.bad.load(Relaxed),
            self.retries.load(Relaxed),
        )
    }

    /// The answer of `agent` to the request `req`: its header with GET_RESP, `bytes` of data
    /// in segments, back where it came from; not posted.
    fn answer(&self, agent: &Arc<Agent>, req: &RecvMad) -> Result<SendBuf> {
        let class = req.mad.get(1).copied().ok_or(EINVAL)?;
        let hdr_len = wire::ib_get_mad_data_offset(class).max(wire::IB_MGMT_RMPP_HDR);
        let mut buf = agent.create_send(
            SendSpec {
                remote_qpn: req.wc.src_qp,
                pkey_index: req.wc.pkey_index,
                rmpp_active: true,
                hdr_len: i32::try_from(hdr_len)?,
                data_len: self.bytes,
                base_version: 1,
            },
            GFP_KERNEL,
        )?;
        let head = req.mad.get(..wire::IB_MGMT_MAD_HDR).ok_or(EINVAL)?;
        buf.mad_mut()
            .get_mut(..wire::IB_MGMT_MAD_HDR)
            .ok_or(EINVAL)?
            .copy_from_slice(head);
        if let Some(m) = buf.mad_mut().get_mut(3) {
            *m = wire::IB_MGMT_METHOD_GET_RESP;
        }
        fill_segments(&mut buf)?;
        buf.set_ah(Some(agent.reply_address(&req.wc)?));
        // No response to a response: the ACKs are all it waits for, each window with the
        // retries a lossy link needs.
        buf.set_retries(10);
        Ok(buf)
    }
}

impl RecvHandler for Server {
    fn recv(&self, agent: &Arc<Agent>, send: Option<&SendHandle>, mad: RecvMad) {
        if send.is_some() || wire::ib_response_mad(&mad.mad).unwrap_or(true) {
            return;
        }
        self.request_len
            .store(u32::try_from(mad.mad.len()).unwrap_or(u32::MAX), Relaxed);
        let Ok(buf) = self.answer(agent, &mad) else {
            pr_warn!("fabric: respond-rmpp could not build an answer\n");
            return;
        };
        if Agent::post(buf).is_ok() {
            self.answered.fetch_add(1, Relaxed);
        }
    }
}

impl SendHandler for Server {
    fn send_done(&self, _agent: &Arc<Agent>, buf: SendBuf, wc: SendCompletion) {
        if wc.status == WcStatus::Success {
            self.ok.fetch_add(1, Relaxed);
        } else {
            pr_info!(
                "fabric: respond-rmpp answer ended with {:?} ({})\n",
                wc.status,
                wc.vendor_err
            );
            self.bad.fetch_add(1, Relaxed);
        }
        let r = u32::try_from(buf.retries()).unwrap_or(0);
        if r > self.retries.load(Relaxed) {
            self.retries.store(r, Relaxed);
        }
    }
}

/// `respond-rmpp CLASS BYTES [DEV]` (`Some`, on port 1 of DEV) or `unrespond-rmpp`
/// (`None`), with the agent of `slot`; `ib_core` is `serve-rmpp`'s agent, stopped first.
pub(super) fn respond(
    slot: &mut Option<(Arc<Agent>, Arc<Server>)>,
    ib_core: &mut Option<IbResponder>,
    what: Option<(&str, &str, &CStr)>,
    out: &mut KVec<u8>,
) -> Result {
    let mut w = Writer(out);
    if let Some((a, s)) = slot.take() {
        a.unregister()?;
        if what.is_none() {
            return writeln!(
                w,
                "answered {} ok {} bad {} retries {} request_len {}",
                s.answered.load(Relaxed),
                s.ok.load(Relaxed),
                s.bad.load(Relaxed),
                s.retries.load(Relaxed),
                s.request_len.load(Relaxed)
            )
            .map_err(|_| ENOMEM);
        }
    }
    let Some((class, bytes, dev)) = what else {
        return Err(ENOENT);
    };
    drop(ib_core.take());
    let port = verbs::find_port(dev, 1).ok_or(ENODEV)?;
    let engine = verbs::verbs_engine().ok_or(ENODEV)?;
    let transport: Arc<dyn Transport<Agent>> = port;
    let server = Server::new(bytes.parse().map_err(|_| EINVAL)?)?;
    let a = Agent::register(
        &engine,
        &transport,
        AgentConfig {
            port: 1,
            qp_type: QpType::Gsi,
            reg: Some(crate::testing::reg(parse_u8(class)?)),
            rmpp_version: 1,
            flags: 0,
            retry: Default::default(),
            send_handler: Some(server.clone()),
            recv_handler: Some(server.clone()),
        },
    )?;
    *slot = Some((a, server));
    writeln!(w, "responding").map_err(|_| ENOMEM)
}

/// `serve-rmpp CLASS BYTES [DEV]`: replaces the responder in `slot` by a kernel-RMPP ib_core
/// agent on port 1 of DEV that answers GETs of CLASS with BYTES of data.
pub(super) fn serve(
    slot: &mut Option<IbResponder>,
    class: &str,
    bytes: &str,
    dev: &CStr,
    out: &mut KVec<u8>,
) -> Result {
    // The earlier responder stops first: ib_core would refuse a second one for the class.
    drop(slot.take());
    let port = verbs::find_port(dev, 1).ok_or(ENODEV)?;
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
    let req_bytes: i32 = match words.next() {
        Some(b) => b.parse().map_err(|_| EINVAL)?,
        None => 0,
    };
    if words.next().is_some() || timeout_ms <= 0 || !(0..=10).contains(&retries) || req_bytes < 0 {
        return Err(EINVAL);
    }
    // Every try's response timer and then some: the send handler runs by then.
    let wait_ms = i64::from(timeout_ms)
        .saturating_mul(i64::from(retries).saturating_add(1))
        .saturating_add(10_000);
    let port = verbs::find_port(c"rxe0", 1).ok_or(ENODEV)?;
    let get = GetSpec {
        dgid,
        sgid_index,
        class,
        timeout_ms,
        retries,
        req_bytes,
        wait_ms,
    };
    let start = Instant::<Monotonic>::now();
    // How long the GET took, from its post to its send handler (or to giving up); rmad's
    // requester measures it before it lingers.
    let ms = match who {
        "rmad" => get_through_rmad(&port, &get, &start, out)?,
        "c" => {
            get_through_c(&port, &get, out)?;
            start.elapsed().as_millis()
        }
        _ => return Err(EINVAL),
    };
    writeln!(Writer(out), " ms {}", ms).map_err(|_| ENOMEM)
}

/// One RMPP GET, as `rmpp` parsed it.
struct GetSpec {
    dgid: [u8; 16],
    sgid_index: u8,
    class: u8,
    timeout_ms: i32,
    retries: i32,
    /// Data bytes of a segmented GET; 0: one MAD.
    req_bytes: i32,
    /// How long to wait for the send handler.
    wait_ms: i64,
}

/// How long a completed GET's agent stays registered without a repeated ACK: longer than the
/// peer's longest ACK wait (2 s, `ACK_TIMEOUT_MS`), so that a retransmission the peer sends
/// because it missed the final ACK comes within it.
const LINGER_QUIET_MS: i64 = 3_000;

/// Keeps the agent `a` of a completed GET registered while its response's transfer lingers
/// and the peer still retransmits: if the final ACK was lost, only the lingering transfer
/// ACKs again (unregistration forgets it, and the engine then drops responses carrying the
/// agent's `hi_tid`), and without that ACK the peer's answer ends with RESP_TIMEOUT_ERR
/// once a window has used up its retries. Returns after [`LINGER_QUIET_MS`] without a
/// repeated ACK, or when the transfer is forgotten (10 s after it completed); at once for a
/// response that was not segmented.
fn linger(a: &Arc<Agent>) {
    loop {
        let acks = a.rmpp_stats().acks;
        let more = wait(LINGER_QUIET_MS, || {
            let s = a.rmpp_stats();
            s.acks != acks || s.lingering == 0
        });
        if !more || a.rmpp_stats().lingering == 0 {
            return;
        }
    }
}

/// `rmpp rmad ...`: the GET through a kernel-RMPP rmad agent on `port`; returns the
/// milliseconds from `start` to the GET's send handler (or to giving up).
fn get_through_rmad(
    port: &Arc<verbs::VerbsPort>,
    g: &GetSpec,
    start: &Instant<Monotonic>,
    out: &mut KVec<u8>,
) -> Result<i64> {
    let engine = verbs::verbs_engine().ok_or(ENODEV)?;
    let transport: Arc<dyn Transport<Agent>> = port.clone();
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
            retry: Default::default(),
            send_handler: Some(get.clone()),
            recv_handler: Some(get.clone()),
        },
    )?;
    let ah = requests::gid_address(g.dgid, g.sgid_index);
    let posted = (|| -> Result {
        a.resolve_address(&ah)?;
        let mut buf = if g.req_bytes > 0 {
            segmented_get(&a, g.class, g.req_bytes)?
        } else {
            requests::mad(&a, g.class, wire::IB_MGMT_METHOD_GET, 1)?
        };
        buf.set_ah(Some(ah));
        buf.set_timeout_ms(g.timeout_ms);
        buf.set_retries(g.retries);
        Agent::post(buf).map(|_| ()).map_err(|e| e.err)
    })();
    let done = posted.is_ok() && wait(g.wait_ms, || get.status.load(Relaxed) >= 0);
    let ms = start.elapsed().as_millis();
    let stats = a.rmpp_stats();
    let sent = a.stats().transmitted;
    if done {
        linger(&a);
    }
    let unreg = a.unregister();
    posted?;
    unreg?;
    if !done {
        pr_warn!("fabric: the RMPP GET did not complete\n");
    }
    write!(
        Writer(out),
        "rmad: rmpp status {} len {} intact {} retries {} acks {} aborts {} dropped {} sent {}",
        get.status.load(Relaxed),
        get.len.load(Relaxed),
        get.intact.load(Relaxed),
        get.retries.load(Relaxed),
        stats.acks,
        stats.aborts,
        stats.dropped,
        sent
    )
    .map_err(|_| ENOMEM)?;
    Ok(ms)
}

/// What one RMPP GET through the C layer got: `struct rmad_fabric_rmpp` in
/// src/testing/fabric/c_client.h.
#[repr(C)]
#[derive(Default)]
struct CRmpp {
    status: i32,
    retries: u32,
    len: u32,
    intact: u32,
}

extern "C" {
    fn rmad_fabric_c_rmpp(
        dev: *mut verbs::IbDevice,
        dgid: *const u8,
        sgid_index: u8,
        class: u8,
        timeout_ms: c_int,
        retries: c_int,
        req_bytes: u32,
        wait_ms: i64,
        out: *mut CRmpp,
    ) -> c_int;
}

/// `rmpp c ...`: the same GET through a kernel-RMPP agent of ib_core's C MAD layer on
/// `port`'s device; its line: `c: rmpp status S len L intact I retries R`, to which
/// [`command`] adds the time.
fn get_through_c(port: &Arc<verbs::VerbsPort>, g: &GetSpec, out: &mut KVec<u8>) -> Result {
    let mut r = CRmpp::default();
    let req_bytes = u32::try_from(g.req_bytes)?;
    let ret = port.with_device(|dev| {
        // SAFETY: `with_device` holds a registration reference on `dev` across the call;
        // `dgid` has 16 bytes and `r` is valid for a write; the call returns only when it
        // has let go of them and no handler of its agent runs any more.
        unsafe {
            rmad_fabric_c_rmpp(
                dev,
                g.dgid.as_ptr(),
                g.sgid_index,
                g.class,
                g.timeout_ms,
                g.retries,
                req_bytes,
                g.wait_ms,
                &mut r,
            )
        }
    });
    kernel::error::to_result(ret.ok_or(ENODEV)?)?;
    write!(
        Writer(out),
        "c: rmpp status {} len {} intact {} retries {}",
        r.status,
        r.len,
        r.intact,
        r.retries
    )
    .map_err(|_| ENOMEM)
}

/// A GET of `class` from `a`, TID 1, segmented with `bytes` of data, every byte of segment `n`
/// equal to `n` modulo 256.
fn segmented_get(a: &Arc<Agent>, class: u8, bytes: i32) -> Result<SendBuf> {
    let hdr_len = wire::ib_get_mad_data_offset(class).max(wire::IB_MGMT_RMPP_HDR);
    let mut buf = a.create_send(
        SendSpec {
            rmpp_active: true,
            hdr_len: i32::try_from(hdr_len)?,
            data_len: bytes,
            ..SendSpec::mad(1)
        },
        GFP_KERNEL,
    )?;
    let plain = requests::mad(a, class, wire::IB_MGMT_METHOD_GET, 1)?;
    let head = plain.mad().get(..wire::IB_MGMT_MAD_HDR).ok_or(EINVAL)?;
    buf.mad_mut()
        .get_mut(..wire::IB_MGMT_MAD_HDR)
        .ok_or(EINVAL)?
        .copy_from_slice(head);
    drop(plain);
    fill_segments(&mut buf)?;
    Ok(buf)
}

/// Fills every RMPP segment `n` of `buf` with the byte `n` modulo 256.
pub(crate) fn fill_segments(buf: &mut SendBuf) -> Result {
    for n in 1..=buf.seg_count() {
        let byte = u8::try_from(n % 256).unwrap_or(0);
        buf.rmpp_segment(n).ok_or(EINVAL)?.fill(byte);
    }
    Ok(())
}
