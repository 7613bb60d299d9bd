// SPDX-License-Identifier: GPL-2.0

//! The two-node checks' requester (test flavour): a burst of requests from rxe0 to QP1 of another
//! machine, sent by rmad or by ib_core's C MAD layer (`src/testing/fabric/c_client.c`), with one
//! tally for both so that the two can be compared line for line (tests/vm/fabric.sh).
//!
//! Commands written to `rmad/stress` (`fabric ...`), each leaving one line of figures there:
//!
//! - `fabric rmad|c PEER CLASS METHOD COUNT TIMEOUT_MS RETRIES [cancel | modify MS]
//!   [grh HOP_LIMIT TRAFFIC_CLASS FLOW_LABEL]`: posts COUNT requests (TIDs 0..COUNT) to QP1 of
//!   the peer (an IPv4 address or a GID, see [`parse_peer`]), optionally cancels or re-arms
//!   each at once, and waits until every send handler ran; rmad's line ends with the GRH
//!   fields of the last response as they arrived (`resp_hop_limit` ...);
//! - `serve CLASS [DEV]` / `unserve`: an agent registered in ib_core on this node's rxe0 (or
//!   DEV) answers GETs of CLASS with status 0 (or stops answering);
//! - `respond CLASS [DEV]` / `unrespond`: the same from an rmad agent on rxe0 or DEV (the
//!   responder role: ib_core forwards the requests to rmad, rmad answers from its own QP);
//!   `respond` reports the registration's error, `unrespond` how many requests were answered
//!   and the GRH fields of the last request as they arrived (`hop_limit H traffic_class T
//!   flow_label F`);
//! - `rate PEER CLASS COUNT WINDOW`: COUNT GETs from ib_core's C MAD layer on rxe0, WINDOW
//!   outstanding at once, and how long until the last was answered ([`rate`], for `make
//!   bench`'s responder row);
//! - `serve-rmpp CLASS BYTES`, `respond-rmpp CLASS BYTES` and `rmpp ...`: RMPP transfers
//!   ([`rmpp`]).

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
            GrhFields,
            RecvMad,
            Transport, //
        },
    },
    mad::{
        state::WcStatus,
        wire::{
            self,
            MadHdr, //
        },
        Address,
        GrhAttr, //
    },
    testing::{
        control::Writer,
        ib_responder::IbResponder,
        reg,
        register_gsi,
        requests,
        sleep_ms, //
    },
    verbs, //
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
    time::{
        Instant,
        Monotonic, //
    },
};

/// What happened to a burst of requests; the same fields for rmad and for the C layer
/// (`struct rmad_fabric_tally` in `src/testing/fabric/c_client.h`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Figures {
    /// Send handler calls.
    pub(crate) completed: u32,
    /// ... with `IB_WC_SUCCESS`.
    pub(crate) success: u32,
    /// ... with `IB_WC_RESP_TIMEOUT_ERR`.
    pub(crate) timeout: u32,
    /// ... with `IB_WC_WR_FLUSH_ERR`.
    pub(crate) flushed: u32,
    /// ... with any other status.
    pub(crate) other: u32,
    /// Requests whose handler ran more than once.
    pub(crate) twice: u32,
    /// Requests whose handler never ran.
    pub(crate) never: u32,
    /// Retries, summed over the requests (`send_buf->retries` at completion).
    pub(crate) retries: u32,
    /// Responses delivered to the receive handler with their request.
    pub(crate) responses: u32,
    /// ... whose MAD status was 0.
    pub(crate) status_ok: u32,
    /// ... whose MAD status was 0x000C (unsupported class or version).
    pub(crate) status_unsupported: u32,
    /// ... with any other MAD status.
    pub(crate) status_other: u32,
}

// The layout of `struct rmad_fabric_tally` in `src/testing/fabric/c_client.h`;
// `src/testing/fabric/c_client.c` checks the same numbers in C.
const _: () = {
    assert!(core::mem::size_of::<Figures>() == 48);
    assert!(core::mem::offset_of!(Figures, retries) == 28);
    assert!(core::mem::offset_of!(Figures, status_other) == 44);
};

impl Figures {
    /// Writes the figures as one line.
    fn write(&self, out: &mut KVec<u8>, who: &str, extra: &str) -> Result {
        let mut w = Writer(out);
        writeln!(
            w,
            "{who}: completed {} success {} timeout {} flushed {} other {} twice {} never {} retries {} responses {} status_ok {} status_unsupported {} status_other {}{extra}",
            self.completed,
            self.success,
            self.timeout,
            self.flushed,
            self.other,
            self.twice,
            self.never,
            self.retries,
            self.responses,
            self.status_ok,
            self.status_unsupported,
            self.status_other
        )
        .map_err(|_| ENOMEM)
    }
}

/// What to do to each request right after posting it.
#[derive(Clone, Copy)]
enum Action {
    None,
    Cancel,
    Modify(i32),
}

/// A burst: where, what, how many, how long.
#[derive(Clone, Copy)]
struct Burst {
    /// The peer port's GID.
    dgid: [u8; 16],
    /// The index of this port's GID of the same kind (0: IPv6 link-local, 1: IPv4-mapped).
    sgid_index: u8,
    class: u8,
    method: u8,
    count: u32,
    timeout_ms: i32,
    retries: i32,
    action: Action,
    /// Hop limit, traffic class and flow label of the requests' GRH.
    grh: GrhFields,
}

impl Burst {
    /// How long to wait for every handler: every try times out, plus time for emulation.
    fn wait_ms(&self) -> i64 {
        let tries = i64::from(self.retries).saturating_add(1);
        let extra = match self.action {
            Action::Modify(ms) => i64::from(ms),
            _ => 0,
        };
        i64::from(self.timeout_ms)
            .saturating_add(extra)
            .saturating_mul(tries)
            .saturating_add(120_000)
    }
}

/// Handler calls per request, and the figures, filled in by rmad's handlers.
struct Tally {
    calls: KVVec<Atomic<u32>>,
    completed: Atomic<u32>,
    success: Atomic<u32>,
    timeout: Atomic<u32>,
    flushed: Atomic<u32>,
    other: Atomic<u32>,
    retries: Atomic<u32>,
    responses: Atomic<u32>,
    status_ok: Atomic<u32>,
    status_unsupported: Atomic<u32>,
    status_other: Atomic<u32>,
    /// The GRH fields of the last response, as they arrived.
    last_grh: LastGrh,
}

/// The GRH fields of the last MAD seen, as they arrived.
struct LastGrh {
    hop_limit: Atomic<u32>,
    traffic_class: Atomic<u32>,
    flow_label: Atomic<u32>,
}

impl LastGrh {
    /// All zero.
    fn new() -> Self {
        Self {
            hop_limit: Atomic::new(0),
            traffic_class: Atomic::new(0),
            flow_label: Atomic::new(0),
        }
    }

    /// Keeps `f`.
    fn set(&self, f: &GrhFields) {
        self.hop_limit.store(u32::from(f.hop_limit), Relaxed);
        self.traffic_class
            .store(u32::from(f.traffic_class), Relaxed);
        self.flow_label.store(f.flow_label, Relaxed);
    }

    /// Writes them as `PREFIXhop_limit H PREFIXtraffic_class T PREFIXflow_label F`.
    fn write(&self, w: &mut Writer<'_>, prefix: &str) -> Result {
        write!(
            w,
            " {prefix}hop_limit {} {prefix}traffic_class {} {prefix}flow_label {}",
            self.hop_limit.load(Relaxed),
            self.traffic_class.load(Relaxed),
            self.flow_label.load(Relaxed)
        )
        .map_err(|_| ENOMEM)
    }
}

impl Tally {
    fn new(n: u32) -> Result<Arc<Self>> {
        let n = usize::try_from(n)?;
        let mut calls = KVVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            calls.push(Atomic::new(0), GFP_KERNEL)?;
        }
        Ok(Arc::new(
            Self {
                calls,
                completed: Atomic::new(0),
                success: Atomic::new(0),
                timeout: Atomic::new(0),
                flushed: Atomic::new(0),
                other: Atomic::new(0),
                retries: Atomic::new(0),
                responses: Atomic::new(0),
                status_ok: Atomic::new(0),
                status_unsupported: Atomic::new(0),
                status_other: Atomic::new(0),
                last_grh: LastGrh::new(),
            },
            GFP_KERNEL,
        )?)
    }

    fn figures(&self) -> Figures {
        let (mut twice, mut never) = (0u32, 0u32);
        for c in self.calls.iter() {
            match c.load(Relaxed) {
                0 => never = never.saturating_add(1),
                1 => {}
                _ => twice = twice.saturating_add(1),
            }
        }
        Figures {
            completed: self.completed.load(Relaxed),
            success: self.success.load(Relaxed),
            timeout: self.timeout.load(Relaxed),
            flushed: self.flushed.load(Relaxed),
            other: self.other.load(Relaxed),
            twice,
            never,
            retries: self.retries.load(Relaxed),
            responses: self.responses.load(Relaxed),
            status_ok: self.status_ok.load(Relaxed),
            status_unsupported: self.status_unsupported.load(Relaxed),
            status_other: self.status_other.load(Relaxed),
        }
    }
}

impl SendHandler for Tally {
    fn send_done(&self, _agent: &Arc<Agent>, buf: SendBuf, wc: SendCompletion) {
        if let Some(c) = self.calls.get(buf.context()[0]) {
            c.fetch_add(1, Relaxed);
        }
        let counter = match wc.status {
            WcStatus::Success => &self.success,
            WcStatus::RespTimeoutErr => &self.timeout,
            WcStatus::WrFlushErr => &self.flushed,
            _ => &self.other,
        };
        counter.fetch_add(1, Relaxed);
        self.retries
            .fetch_add(u32::try_from(buf.retries()).unwrap_or(0), Relaxed);
        self.completed.fetch_add(1, Relaxed);
    }
}

impl RecvHandler for Tally {
    fn recv(&self, _agent: &Arc<Agent>, send: Option<&SendHandle>, mad: RecvMad) {
        if send.is_none() {
            return;
        }
        self.responses.fetch_add(1, Relaxed);
        self.last_grh.set(&mad.wc.grh_fields);
        let counter = match MadHdr::parse(&mad.mad).map(|h| h.status) {
            Ok(0) => &self.status_ok,
            Ok(0x000c) => &self.status_unsupported,
            _ => &self.status_other,
        };
        counter.fetch_add(1, Relaxed);
    }
}

/// Sends `b` through rmad: one agent on rxe0 port 1, registered for the burst.
fn run_rmad(b: &Burst, out: &mut KVec<u8>) -> Result {
    let port = verbs::find_port(c"rxe0", 1).ok_or(ENODEV)?;
    let engine = verbs::verbs_engine().ok_or(ENODEV)?;
    let transport: Arc<dyn Transport<Agent>> = port.clone();
    let tally = Tally::new(b.count)?;
    let a = register_gsi(&engine, &transport, 1, &tally, None)?;
    let posted = post_burst(&a, b);
    let done = posted.is_ok() && wait(b.wait_ms(), || tally.completed.load(Relaxed) >= b.count);
    // Late responses and duplicates have time to arrive and be dropped.
    sleep_ms(1_000);
    let dropped = a.stats().dropped_responses;
    let unreg = a.unregister();
    posted?;
    unreg?;
    if !done {
        pr_warn!("fabric: not every send handler ran\n");
    }
    let mut extra = KVec::new();
    let mut w = Writer(&mut extra);
    write!(w, " dropped {dropped}").map_err(|_| ENOMEM)?;
    tally.last_grh.write(&mut w, "resp_")?;
    tally.figures().write(
        out,
        "rmad",
        core::str::from_utf8(&extra).map_err(|_| EINVAL)?,
    )
}

/// Posts the burst on `a`, acting on each send right after its post.
fn post_burst(a: &Arc<Agent>, b: &Burst) -> Result {
    let ah = Address {
        sl: 0,
        dlid: 0,
        src_path_bits: 0,
        grh: Some(GrhAttr {
            hop_limit: b.grh.hop_limit,
            traffic_class: b.grh.traffic_class,
            flow_label: b.grh.flow_label,
            dgid: b.dgid,
            sgid_index: b.sgid_index,
        }),
    };
    // As a client would: the peer's MAC is resolved once, before the posts.
    a.resolve_address(&ah)?;
    for i in 0..b.count {
        let mut buf = requests::mad(a, b.class, b.method, i)?;
        buf.set_ah(Some(ah));
        buf.set_timeout_ms(b.timeout_ms);
        buf.set_retries(b.retries);
        buf.set_context([usize::try_from(i)?, 0]);
        let h = Agent::post(buf).map_err(|e| e.err)?;
        // A send that completed already cannot be cancelled or re-armed: both are refused
        // (ENOENT/EINVAL) and the send keeps the status it had, as in C.
        let _ = match b.action {
            Action::None => Ok(()),
            Action::Cancel => h.cancel(),
            Action::Modify(ms) => h.modify(ms),
        };
    }
    Ok(())
}

/// Polls `done` every 10 ms for at most `ms` milliseconds; whether it became true.
pub(crate) fn wait(ms: i64, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::<Monotonic>::now();
    while !done() {
        if start.elapsed().as_millis() > ms {
            return false;
        }
        sleep_ms(10);
    }
    true
}

extern "C" {
    fn rmad_fabric_c_burst(
        dev: *mut verbs::IbDevice,
        dgid: *const u8,
        sgid_index: u8,
        class: u8,
        method: u8,
        count: u32,
        timeout_ms: c_int,
        retries: c_int,
        action: c_int,
        action_ms: c_int,
        wait_ms: i64,
        out: *mut Figures,
    ) -> c_int;
}

/// What a windowed run of GETs got (`struct rmad_fabric_rate` in
/// `src/testing/fabric/c_client.h`).
#[repr(C)]
#[derive(Default)]
struct CRate {
    /// From the first post until the last send handler, in ns.
    ns: u64,
    /// Send handlers with `IB_WC_SUCCESS`: a response matched.
    answered: u32,
    /// Retries, summed over the GETs.
    retries: u32,
}

// The layout of `struct rmad_fabric_rate`; `src/testing/fabric/c_client.c` checks the same.
const _: () = {
    assert!(core::mem::size_of::<CRate>() == 16);
    assert!(core::mem::offset_of!(CRate, retries) == 12);
};

extern "C" {
    fn rmad_fabric_c_rate(
        dev: *mut verbs::IbDevice,
        dgid: *const u8,
        sgid_index: u8,
        class: u8,
        count: u32,
        window: u32,
        timeout_ms: c_int,
        retries: c_int,
        wait_ms: i64,
        out: *mut CRate,
    ) -> c_int;
}

/// Response timeout of each GET of `rate`, and its retries.
const RATE_TIMEOUT_MS: c_int = 1_000;
/// As above.
const RATE_RETRIES: c_int = 3;

/// Runs `rate PEER CLASS COUNT WINDOW` (the words after `rate`): COUNT GETs of CLASS from
/// ib_core's C MAD layer on rxe0 to QP1 of the peer, WINDOW outstanding at once, answered by
/// whatever the peer runs (`serve` or `respond` there); one line: `requests C answered A
/// retries R ns T`.
pub(crate) fn rate<'a>(mut words: impl Iterator<Item = &'a str>, out: &mut KVec<u8>) -> Result {
    let (dgid, sgid_index) = parse_peer(words.next().ok_or(EINVAL)?)?;
    let class = parse_u8(words.next().ok_or(EINVAL)?)?;
    let count: u32 = words.next().ok_or(EINVAL)?.parse().map_err(|_| EINVAL)?;
    let window: u32 = words.next().ok_or(EINVAL)?.parse().map_err(|_| EINVAL)?;
    if words.next().is_some() || count == 0 || count > 1_000_000 || window == 0 {
        return Err(EINVAL);
    }
    let mut f = CRate::default();
    let port = verbs::find_port(c"rxe0", 1).ok_or(ENODEV)?;
    let ret = port.with_device(|dev| {
        // SAFETY: `with_device` holds a registration reference on `dev` across the call;
        // `dgid` has 16 bytes and `f` is valid for a write; the call returns only when it
        // has let go of all three and no handler of its agent runs any more.
        unsafe {
            rmad_fabric_c_rate(
                dev,
                dgid.as_ptr(),
                sgid_index,
                class,
                count,
                window,
                RATE_TIMEOUT_MS,
                RATE_RETRIES,
                120_000,
                &mut f,
            )
        }
    });
    kernel::error::to_result(ret.ok_or(ENODEV)?)?;
    writeln!(
        Writer(out),
        "requests {count} answered {} retries {} ns {}",
        f.answered,
        f.retries,
        f.ns
    )
    .map_err(|_| ENOMEM)
}

/// Sends `b` through ib_core's C MAD layer.
fn run_c(b: &Burst, out: &mut KVec<u8>) -> Result {
    let mut f = Figures::default();
    let (action, action_ms) = match b.action {
        Action::None => (0, 0),
        Action::Cancel => (1, 0),
        Action::Modify(ms) => (2, ms),
    };
    let port = verbs::find_port(c"rxe0", 1).ok_or(ENODEV)?;
    let ret = port.with_device(|dev| {
        // SAFETY: `with_device` holds a registration reference on `dev` across the call;
        // `dgid` has 16 bytes and `f` is valid for a write; the call returns only when it
        // has let go of all three and no handler of its agent runs any more.
        unsafe {
            rmad_fabric_c_burst(
                dev,
                b.dgid.as_ptr(),
                b.sgid_index,
                b.class,
                b.method,
                b.count,
                b.timeout_ms,
                b.retries,
                action,
                action_ms,
                b.wait_ms(),
                &mut f,
            )
        }
    });
    kernel::error::to_result(ret.ok_or(ENODEV)?)?;
    f.write(out, "c", "")
}

/// Parses a peer: `A.B.C.D`, reached through its IPv4-mapped GID (`::ffff:A.B.C.D`, the one
/// rxe gives an IPv4 address) from this port's GID 1; or a GID as sysfs shows it (eight
/// groups of four hexadecimal digits, here the peer's IPv6 link-local GID), from GID 0.
fn parse_peer(s: &str) -> Result<([u8; 16], u8)> {
    let mut gid = [0u8; 16];
    if s.contains(':') {
        let mut parts = s.split(':');
        for pair in gid.chunks_exact_mut(2) {
            let group = u16::from_str_radix(parts.next().ok_or(EINVAL)?, 16).map_err(|_| EINVAL)?;
            pair.copy_from_slice(&group.to_be_bytes());
        }
        return if parts.next().is_some() {
            Err(EINVAL)
        } else {
            Ok((gid, 0))
        };
    }
    gid[10] = 0xff;
    gid[11] = 0xff;
    let mut parts = s.split('.');
    for b in gid.iter_mut().skip(12) {
        *b = parts.next().ok_or(EINVAL)?.parse().map_err(|_| EINVAL)?;
    }
    if parts.next().is_some() {
        return Err(EINVAL);
    }
    Ok((gid, 1))
}

/// Parses a number written in decimal or, with `0x`, in hexadecimal.
fn parse_u8(s: &str) -> Result<u8> {
    match s.strip_prefix("0x") {
        Some(h) => u8::from_str_radix(h, 16).map_err(|_| EINVAL),
        None => s.parse().map_err(|_| EINVAL),
    }
}

/// Runs `fabric WHO PEER CLASS METHOD COUNT TIMEOUT_MS RETRIES [cancel | modify MS]` (the
/// words after `fabric`).
pub(crate) fn command<'a>(mut words: impl Iterator<Item = &'a str>, out: &mut KVec<u8>) -> Result {
    let who = words.next().ok_or(EINVAL)?;
    let (dgid, sgid_index) = parse_peer(words.next().ok_or(EINVAL)?)?;
    let mut b = Burst {
        dgid,
        sgid_index,
        class: parse_u8(words.next().ok_or(EINVAL)?)?,
        method: parse_u8(words.next().ok_or(EINVAL)?)?,
        count: words.next().ok_or(EINVAL)?.parse().map_err(|_| EINVAL)?,
        timeout_ms: words.next().ok_or(EINVAL)?.parse().map_err(|_| EINVAL)?,
        retries: words.next().ok_or(EINVAL)?.parse().map_err(|_| EINVAL)?,
        action: Action::None,
        grh: GrhFields {
            hop_limit: 64,
            ..GrhFields::default()
        },
    };
    while let Some(word) = words.next() {
        let mut number =
            || -> Result<u32> { words.next().ok_or(EINVAL)?.parse().map_err(|_| EINVAL) };
        match word {
            "cancel" => b.action = Action::Cancel,
            "modify" => b.action = Action::Modify(i32::try_from(number()?)?),
            "grh" => {
                b.grh = GrhFields {
                    hop_limit: u8::try_from(number()?)?,
                    traffic_class: u8::try_from(number()?)?,
                    flow_label: number()?,
                }
            }
            _ => return Err(EINVAL),
        }
    }
    if b.count == 0 || b.count > 100_000 {
        return Err(EINVAL);
    }
    match who {
        "rmad" => run_rmad(&b, out),
        // The C layer's burst builds its own address (`src/testing/fabric/c_client.c`).
        "c" if b.grh.traffic_class == 0 && b.grh.flow_label == 0 && b.grh.hop_limit == 64 => {
            run_c(&b, out)
        }
        _ => Err(EINVAL),
    }
}

pub(crate) mod rmpp;

/// The responders this node runs.
struct Served {
    /// `serve`: an agent in ib_core.
    ib_core: Option<IbResponder>,
    /// `serve-rmpp`: a kernel-RMPP agent in ib_core.
    rmpp: Option<IbResponder>,
    /// `respond`: an rmad agent, and its handlers.
    rmad: Option<(Arc<Agent>, Arc<Responder>)>,
    /// `respond-rmpp`: a kernel-RMPP rmad agent, and its handlers.
    rmad_rmpp: Option<(Arc<Agent>, Arc<rmpp::Server>)>,
}

kernel::sync::global_lock! {
    // SAFETY: Initialized by `init` before any other use.
    unsafe(uninit) static SERVED: Mutex<Served> = Served {
        ib_core: None,
        rmpp: None,
        rmad: None,
        rmad_rmpp: None,
    };
}

/// An rmad agent's handlers that answer every GET with a GET_RESP of status 0, back to where
/// the GET came from.
struct Responder {
    answered: Atomic<u32>,
    /// The GRH fields of the last request, as they arrived.
    last_grh: LastGrh,
}

impl SendHandler for Responder {
    fn send_done(&self, _agent: &Arc<Agent>, buf: SendBuf, wc: SendCompletion) {
        if wc.status == WcStatus::Success {
            self.answered.fetch_add(1, Relaxed);
        }
        drop(buf);
    }
}

impl RecvHandler for Responder {
    fn recv(&self, agent: &Arc<Agent>, send: Option<&SendHandle>, mad: RecvMad) {
        let Ok(req) = MadHdr::parse(&mad.mad) else {
            return;
        };
        if send.is_some() || req.is_response() || req.method != wire::IB_MGMT_METHOD_GET {
            return;
        }
        self.last_grh.set(&mad.wc.grh_fields);
        let answer = || -> Result {
            let ah = agent.reply_address(&mad.wc)?;
            let req = MadHdr { status: 0, ..req };
            let buf = requests::answer(agent, &req, mad.wc.src_qp, mad.wc.pkey_index, ah)?;
            Agent::post(buf).map(|_| ()).map_err(|e| e.err)
        };
        if let Err(e) = answer() {
            pr_warn!("fabric responder: no answer ({:?})\n", e);
        }
    }
}

/// Sets up the state of `serve` (module load, test flavour).
pub(crate) fn init() {
    // SAFETY: Called once, from the module initializer, before any command.
    unsafe { SERVED.init() };
}

/// `serve CLASS [DEV]`: an ib_core agent on DEV (rxe0 by default) answers GETs of CLASS
/// (replacing an earlier one); `unserve`: it stops. Both leave one line in `out`.
pub(crate) fn serve(class: Option<(&str, &CStr)>, out: &mut KVec<u8>) -> Result {
    let mut served = SERVED.lock();
    // The earlier responder stops first: ib_core would refuse a second one for the class.
    drop(served.ib_core.take());
    let Some((class, dev)) = class else {
        return out
            .extend_from_slice(b"unserved\n", GFP_KERNEL)
            .map_err(Into::into);
    };
    let port = verbs::find_port(dev, 1).ok_or(ENODEV)?;
    let r = IbResponder::start(&port, parse_u8(class)?).ok_or(EBUSY)?;
    served.ib_core = Some(r);
    out.extend_from_slice(b"serving\n", GFP_KERNEL)?;
    Ok(())
}

/// `respond CLASS [DEV]`: an rmad agent on DEV (rxe0 by default) registered for GETs of CLASS
/// answers them (the line says `responding`, or `refused <errno>`); `unrespond`: it is
/// unregistered (`answered N`).
pub(crate) fn respond(class: Option<(&str, &CStr)>, out: &mut KVec<u8>) -> Result {
    let mut served = SERVED.lock();
    let mut w = Writer(out);
    if let Some((a, r)) = served.rmad.take() {
        a.unregister()?;
        if class.is_none() {
            write!(w, "answered {}", r.answered.load(Relaxed)).map_err(|_| ENOMEM)?;
            r.last_grh.write(&mut w, "")?;
            return writeln!(w).map_err(|_| ENOMEM);
        }
    }
    let Some((class, dev)) = class else {
        return Err(ENOENT);
    };
    let port = verbs::find_port(dev, 1).ok_or(ENODEV)?;
    let engine = verbs::verbs_engine().ok_or(ENODEV)?;
    let transport: Arc<dyn Transport<Agent>> = port;
    let r = Arc::new(
        Responder {
            answered: Atomic::new(0),
            last_grh: LastGrh::new(),
        },
        GFP_KERNEL,
    )?;
    match register_gsi(&engine, &transport, 1, &r, Some(reg(parse_u8(class)?))) {
        Ok(a) => {
            served.rmad = Some((a, r));
            writeln!(w, "responding").map_err(|_| ENOMEM)
        }
        Err(e) => writeln!(w, "refused {}", e.to_errno()).map_err(|_| ENOMEM),
    }
}

/// `serve-rmpp CLASS BYTES [DEV]` ([`rmpp::serve`]).
pub(crate) fn serve_rmpp(class: &str, bytes: &str, dev: &CStr, out: &mut KVec<u8>) -> Result {
    rmpp::serve(&mut SERVED.lock().rmpp, class, bytes, dev, out)
}

/// `respond-rmpp CLASS BYTES [DEV]` and `unrespond-rmpp` ([`rmpp::respond`]).
pub(crate) fn respond_rmpp(what: Option<(&str, &str, &CStr)>, out: &mut KVec<u8>) -> Result {
    let served = &mut *SERVED.lock();
    rmpp::respond(&mut served.rmad_rmpp, &mut served.rmpp, what, out)
}

/// Stops the responders (module unload).
pub(crate) fn exit() {
    let mut served = SERVED.lock();
    if let Some((a, _)) = served.rmad_rmpp.take() {
        let _ = a.unregister();
    }
    drop(served.ib_core.take());
    drop(served.rmpp.take());
    if let Some((a, _)) = served.rmad.take() {
        let _ = a.unregister();
    }
}
