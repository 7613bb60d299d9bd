// SPDX-License-Identifier: GPL-2.0

//! The same hostile datagrams against rmad and against ib_core's own MAD layer, side by side
//! (`rmad_peer.same_datagrams_to_rmad_and_ib_core`).
//!
//! On `rxe0`, an rmad agent and an ib_core agent ([`IbRequester`]) each post one SEND per kind
//! below (class CongestionManagement), which nobody answers: kind `k`'s TID has the low half
//! `k << 8`. Both go to the port's
//! link-local GID (index 0), from that GID: ib_core's address check reads a GRH's DGID where
//! RoCEv2 over IPv4 has an IPv4 header, so it matches no response on an IPv4 GID (rmad
//! decodes the header; Documentation/behaviour.md §8.21), which kind 15 shows. The test VM
//! gives `rmad0` a second IPv6 address, `fd00:2::1`, whose GID is the "other source GID". The
//! peer then sends
//! each kind's datagrams to both layers (rmad's private QP, and QP1 where ib_core receives),
//! marked hostile in the attribute modifier, then one real answer per kind. Both layers'
//! handlers count by kind what they were given, so the table says, per kind, which datagrams
//! each layer took as the response and that every send completed exactly once.

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
    },
    mad::Gid,
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
        ib_requester::{
            IbRequester,
            KindCounts,
            HOSTILE as MARK,
            HOSTILE_AT as MARK_AT,
            KINDS, //
        },
        peer::Peer,
        post,
        register_gsi,
        requests::gid_address,
        rxe_request,
        sleep_ms,
        wait_state,
        WAIT_MS, //
    },
    verbs,
};
use kernel::{
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc, //
    },
};

/// The unanswered sends' timeout: longer than the whole case.
const TIMEOUT_MS: i32 = 60_000;
/// The timeout of the sends through the IPv4-mapped GID: ib_core's always runs out (it
/// matches no answer there), so the case waits for it, but rmad's must outlast the hostile
/// datagrams of every kind, sent before its answer (3 s did not, once, with the host's two
/// cores shared by three VMs).
const IPV4_TIMEOUT_MS: i32 = 10_000;
/// The class of the sends: rxe's `process_mad` answers PerfMgmt MADs at QP1 itself (a zeroed
/// reply to every method but GET), so none would reach the ib_core agent; CongestionManagement
/// goes through.
const CLASS: u8 = wire::IB_MGMT_CLASS_CONG_MGMT;
/// The first bytes of the port's second IPv6 GID (`fd00:2::1`, added by the test VM).
const OTHER_GID_PREFIX: [u8; 4] = [0xfd, 0x00, 0x00, 0x02];
/// Unsolicited responses of the flood.
const FLOOD: u32 = 200;
/// Datagrams of seeded random bytes.
const RANDOM: u32 = 40;

/// The datagrams of a kind.
type Datagrams = KVec<KVec<u8>>;
/// How a kind makes its datagrams, from the agent's `hi_tid` and the response to its send.
type Build = fn(u32, &[u8; wire::IB_MGMT_MAD_SIZE]) -> Result<Datagrams>;

/// What a kind sends, and what each layer does with it.
pub(super) struct Kind {
    /// Its number: its send's TID has the low half `k << 8`.
    pub(super) k: u32,
    /// What it is, for the table.
    pub(super) name: &'static str,
    /// Its datagrams, given the agent's `hi_tid` and the response to its send.
    build: Build,
    /// The addresses of its send and datagrams.
    via: Via,
    /// Its send is cancelled before the datagrams.
    cancelled: bool,
    /// Whether rmad takes a datagram of the kind as the response.
    pub(super) rmad_takes: bool,
    /// Whether ib_core does.
    pub(super) c_takes: bool,
}

/// The addresses a kind uses.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    /// The send goes from and to the link-local GID (index 0), and so do the datagrams.
    LinkLocal,
    /// As [`Via::LinkLocal`], but the datagrams come from the port's second IPv6 GID.
    OtherSource,
    /// Everything through the IPv4-mapped GID (index 1): RoCEv2 over IPv4.
    Ipv4,
}

/// What both layers did with one kind.
pub(super) struct Outcome {
    /// The kind.
    pub(super) kind: &'static Kind,
    /// Hostile datagrams sent to each layer.
    pub(super) sent: usize,
    /// What rmad's handlers saw.
    pub(super) rmad: KindCounts,
    /// What ib_core's handlers saw.
    pub(super) c: KindCounts,
}

impl Kind {
    /// The counts rmad's handlers must show for the kind.
    pub(super) fn expected_rmad(&self) -> KindCounts {
        self.expected(self.rmad_takes, true)
    }

    /// The counts ib_core's handlers must show for the kind: on an IPv4 GID no response
    /// matches (its address check reads a DGID where the receive buffer holds an IPv4
    /// header), so the send times out.
    pub(super) fn expected_c(&self) -> KindCounts {
        self.expected(self.c_takes, self.via != Via::Ipv4)
    }

    /// The counts of a layer that takes the kind's datagrams (or not), and whose answers
    /// match (or never do).
    fn expected(&self, takes: bool, matches: bool) -> KindCounts {
        let cancelled = u32::from(self.cancelled);
        let live = 1 - cancelled;
        let answered = live * u32::from(matches);
        KindCounts {
            hostile: answered * u32::from(takes),
            real: answered * u32::from(!takes),
            unsolicited: 0,
            success: answered,
            flushed: cancelled,
            other: live - answered,
        }
    }
}

/// The 256 bytes of a response to `tid` (class 0x04, method SEND with the response bit).
pub(super) fn response(tid: u64) -> Result<[u8; wire::IB_MGMT_MAD_SIZE]> {
    response_in(wire::IB_MGMT_CLASS_PERF_MGMT, tid)
}

/// The 256 bytes of a response to `tid` in `class` (method SEND with the response bit).
fn response_in(class: u8, tid: u64) -> Result<[u8; wire::IB_MGMT_MAD_SIZE]> {
    let mut mad = [0u8; wire::IB_MGMT_MAD_SIZE];
    MadHdr {
        base_version: 1,
        mgmt_class: class,
        class_version: 1,
        method: wire::IB_MGMT_METHOD_SEND | wire::IB_MGMT_METHOD_RESP,
        tid,
        ..MadHdr::default()
    }
    .write(&mut mad)
    .map_err(|_| EINVAL)?;
    Ok(mad)
}

/// `mad`, marked hostile, with `f` applied.
fn marked(mad: &[u8], f: impl FnOnce(&mut KVec<u8>)) -> Result<KVec<u8>> {
    let mut v = KVec::new();
    v.extend_from_slice(mad, GFP_KERNEL)?;
    if let Some(b) = v.get_mut(MARK_AT) {
        *b = MARK;
    }
    f(&mut v);
    Ok(v)
}

/// One datagram: the marked response with `f` applied.
fn one(mad: &[u8], f: impl FnOnce(&mut KVec<u8>)) -> Result<Datagrams> {
    let mut v = KVec::new();
    v.push(marked(mad, f)?, GFP_KERNEL)?;
    Ok(v)
}

/// Sets byte `at` of `m`.
fn set(m: &mut [u8], at: usize, value: u8) {
    if let Some(b) = m.get_mut(at) {
        *b = value;
    }
}

/// A seeded xorshift64 step: the "random bytes" of the hostile peer.
pub(super) fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// A valid response header, cut to 24, 100 and 255 bytes.
fn short(_hi: u32, mad: &[u8; wire::IB_MGMT_MAD_SIZE]) -> Result<Datagrams> {
    let mut v = KVec::new();
    for len in [24usize, 100, 255] {
        v.push(marked(mad, |m| m.truncate(len))?, GFP_KERNEL)?;
    }
    Ok(v)
}

/// The right hi_tid, TIDs no send has: unsolicited responses.
fn flood(hi: u32, _mad: &[u8; wire::IB_MGMT_MAD_SIZE]) -> Result<Datagrams> {
    let mut v = KVec::new();
    for i in 1..=FLOOD {
        let tid = wire::make_tid(hi, (FLOOD_KIND << 8) | i);
        v.push(marked(&response_in(CLASS, tid)?, |_| ())?, GFP_KERNEL)?;
    }
    Ok(v)
}

/// Seeded random bytes whose base version is not 1.
fn random(_hi: u32, _mad: &[u8; wire::IB_MGMT_MAD_SIZE]) -> Result<Datagrams> {
    let mut v = KVec::new();
    let mut x = 0x0016_0008_d1ff_0001u64;
    for _ in 0..RANDOM {
        let mut m = KVec::new();
        while m.len() < wire::IB_MGMT_MAD_SIZE {
            m.extend_from_slice(&xorshift(&mut x).to_le_bytes(), GFP_KERNEL)?;
        }
        if m.first() == Some(&wire::IB_MGMT_BASE_VERSION) {
            set(&mut m, 0, 2);
        }
        v.push(m, GFP_KERNEL)?;
    }
    Ok(v)
}

/// The kind of the flood (its TIDs' kind bits).
const FLOOD_KIND: u32 = 10;

/// Every kind, in the order sent.
pub(super) static KINDS_SENT: [Kind; 15] = [
    Kind {
        k: 1,
        name: "valid header cut to 24, 100, 255 bytes",
        build: short,
        via: Via::LinkLocal,
        cancelled: false,
        rmad_takes: false,
        c_takes: true,
    },
    Kind {
        k: 2,
        name: "base version 2",
        build: |_, m| one(m, |m| set(m, 0, 2)),
        via: Via::LinkLocal,
        cancelled: false,
        rmad_takes: false,
        c_takes: false,
    },
    Kind {
        k: 3,
        name: "class version 2",
        build: |_, m| one(m, |m| set(m, 2, 2)),
        via: Via::LinkLocal,
        cancelled: false,
        rmad_takes: true,
        c_takes: true,
    },
    Kind {
        k: 4,
        name: "right TID, wrong class (0x06)",
        build: |_, m| one(m, |m| set(m, 1, wire::IB_MGMT_CLASS_DEVICE_MGMT)),
        via: Via::LinkLocal,
        cancelled: false,
        rmad_takes: false,
        c_takes: false,
    },
    Kind {
        k: 5,
        name: "RMPP flags on a class without RMPP",
        build: |_, m| {
            one(m, |m| {
                set(m, 24, 1);
                set(m, 25, wire::IB_MGMT_RMPP_TYPE_DATA);
                set(m, 26, wire::IB_MGMT_RMPP_FLAG_ACTIVE);
            })
        },
        via: Via::LinkLocal,
        cancelled: false,
        rmad_takes: true,
        c_takes: true,
    },
    Kind {
        k: 6,
        name: "right TID, request method (GET)",
        build: |_, m| one(m, |m| set(m, 3, wire::IB_MGMT_METHOD_GET)),
        via: Via::LinkLocal,
        cancelled: false,
        rmad_takes: false,
        c_takes: false,
    },
    Kind {
        k: 7,
        name: "right TID from another source GID",
        build: |_, m| one(m, |_| ()),
        via: Via::OtherSource,
        cancelled: false,
        rmad_takes: true,
        c_takes: true,
    },
    Kind {
        k: 8,
        name: "right TID, method TRAP_REPRESS",
        build: |_, m| one(m, |m| set(m, 3, wire::IB_MGMT_METHOD_TRAP_REPRESS)),
        via: Via::LinkLocal,
        cancelled: false,
        rmad_takes: true,
        c_takes: true,
    },
    Kind {
        k: 9,
        name: "a cancelled send's TID",
        build: |_, m| one(m, |_| ()),
        via: Via::LinkLocal,
        cancelled: true,
        rmad_takes: false,
        c_takes: false,
    },
    Kind {
        k: FLOOD_KIND,
        name: "unsolicited responses, right hi_tid",
        build: flood,
        via: Via::LinkLocal,
        cancelled: false,
        rmad_takes: false,
        c_takes: false,
    },
    Kind {
        k: 11,
        name: "a hi_tid no agent has",
        build: |_, m| {
            one(m, |m| {
                for (i, b) in 0x7fff_fff0u32.to_be_bytes().into_iter().enumerate() {
                    set(m, 8 + i, b);
                }
            })
        },
        via: Via::LinkLocal,
        cancelled: false,
        rmad_takes: false,
        c_takes: false,
    },
    Kind {
        k: 12,
        name: "seeded random bytes",
        build: random,
        via: Via::LinkLocal,
        cancelled: false,
        rmad_takes: false,
        c_takes: false,
    },
    Kind {
        k: 13,
        name: "right TID, SMP class (0x01) at a GSI QP",
        build: |_, m| one(m, |m| set(m, 1, wire::IB_MGMT_CLASS_SUBN_LID_ROUTED)),
        via: Via::LinkLocal,
        cancelled: false,
        rmad_takes: false,
        c_takes: false,
    },
    Kind {
        k: 14,
        name: "the answer again after it completed",
        build: |_, m| {
            let mut v = KVec::new();
            v.push(marked(m, |_| ())?, GFP_KERNEL)?;
            Ok(v)
        },
        via: Via::LinkLocal,
        cancelled: false,
        // Sent after the real answer (see `run`): nobody takes it.
        rmad_takes: false,
        c_takes: false,
    },
    Kind {
        k: 15,
        name: "the answer on an IPv4 GID (RoCEv2 over IPv4)",
        build: |_, m| one(m, |_| ()),
        via: Via::Ipv4,
        cancelled: false,
        rmad_takes: true,
        c_takes: false,
    },
];

/// The kind sent after the real answers.
const AFTER_ANSWER: u32 = 14;

/// Per-kind counters of an rmad agent's handlers, as [`IbRequester`] keeps them in C.
struct RmadCounts {
    hostile: [Atomic<u32>; KINDS_USIZE],
    real: [Atomic<u32>; KINDS_USIZE],
    unsolicited: [Atomic<u32>; KINDS_USIZE],
    success: [Atomic<u32>; KINDS_USIZE],
    flushed: [Atomic<u32>; KINDS_USIZE],
    other: [Atomic<u32>; KINDS_USIZE],
}

/// [`KINDS`] as an array length.
const KINDS_USIZE: usize = KINDS as usize;

/// A zero counter per kind.
fn zeros() -> [Atomic<u32>; KINDS_USIZE] {
    core::array::from_fn(|_| Atomic::new(0))
}

/// The kind bits of the TID in the first 16 bytes of `mad`.
fn kind_of(mad: &[u8]) -> usize {
    let lo = mad
        .get(12..16)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map_or(0, u32::from_be_bytes);
    usize::try_from((lo >> 8) % KINDS).unwrap_or(0)
}

/// Adds one to counter `kind` of `c`.
fn bump(c: &[Atomic<u32>; KINDS_USIZE], kind: usize) {
    if let Some(a) = c.get(kind) {
        a.fetch_add(1, Relaxed);
    }
}

impl RmadCounts {
    fn counts(&self, kind: u32) -> KindCounts {
        let i = usize::try_from(kind).unwrap_or(0);
        let read = |c: &[Atomic<u32>; KINDS_USIZE]| c.get(i).map_or(0, |a| a.load(Relaxed));
        KindCounts {
            hostile: read(&self.hostile),
            real: read(&self.real),
            unsolicited: read(&self.unsolicited),
            success: read(&self.success),
            flushed: read(&self.flushed),
            other: read(&self.other),
        }
    }
}

impl SendHandler for RmadCounts {
    fn send_done(&self, _agent: &Arc<Agent>, buf: SendBuf, wc: SendCompletion) {
        let kind = kind_of(buf.mad());
        match wc.status {
            WcStatus::Success => bump(&self.success, kind),
            WcStatus::WrFlushErr => bump(&self.flushed, kind),
            _ => bump(&self.other, kind),
        }
    }
}

impl RecvHandler for RmadCounts {
    fn recv(&self, _agent: &Arc<Agent>, send: Option<&SendHandle>, mad: RecvMad) {
        let kind = kind_of(&mad.mad);
        if send.is_none() {
            bump(&self.unsolicited, kind);
        } else if mad.mad.get(MARK_AT) == Some(&MARK) {
            bump(&self.hostile, kind);
        } else {
            bump(&self.real, kind);
        }
    }
}

/// One layer under test: where its datagrams go, and its hi_tid.
struct Target {
    qpn: u32,
    hi: u32,
}

/// The port's addresses and a peer on each.
struct Addrs {
    /// The link-local GID (index 0) and the IPv4-mapped one (index 1).
    link_local: Gid,
    ipv4: Gid,
    /// Peers sending from the link-local GID, the second IPv6 GID, the IPv4-mapped GID.
    peers: [Peer; 3],
}

impl Addrs {
    /// The GID a kind's send goes to (and from), and its index.
    fn dest(&self, via: Via) -> (&Gid, u8) {
        match via {
            Via::LinkLocal | Via::OtherSource => (&self.link_local, 0),
            Via::Ipv4 => (&self.ipv4, 1),
        }
    }

    /// The peer a kind's datagrams come from.
    fn peer(&self, via: Via) -> &Peer {
        match via {
            Via::LinkLocal => &self.peers[0],
            Via::OtherSource => &self.peers[1],
            Via::Ipv4 => &self.peers[2],
        }
    }

    /// Sends `d` as `via` says to `t`.
    fn send(&self, via: Via, t: &Target, d: &[u8]) -> Result {
        self.peer(via).send(t.qpn, self.dest(via).0, d)
    }
}

/// Sends each datagram of `kind` to `t`; how many went.
fn send_kind(kind: &Kind, t: &Target, a: &Addrs) -> Result<usize> {
    let mad = response_in(CLASS, wire::make_tid(t.hi, kind.k << 8))?;
    let mut sent = 0usize;
    for d in (kind.build)(t.hi, &mad)?.iter() {
        sent += usize::from(a.send(kind.via, t, d).is_ok());
    }
    Ok(sent)
}

/// Runs every kind against both layers on rxe0; one outcome per kind.
pub(super) fn run() -> Result<KVec<Outcome>> {
    let port = verbs::find_port(c"rxe0", 1).ok_or(ENODEV)?;
    let engine = verbs::verbs_engine().ok_or(ENODEV)?;
    let transport: Arc<dyn Transport<Agent>> = port.clone();
    let other = (1..=u8::MAX)
        .find(|&i| {
            port.gid(1, i)
                .is_some_and(|g| g.starts_with(&OTHER_GID_PREFIX))
        })
        .ok_or(ENOENT)?;
    let addrs = Addrs {
        link_local: port.gid(1, 0).ok_or(ENODEV)?,
        ipv4: port.gid(1, 1).ok_or(ENODEV)?,
        peers: [
            Peer::open(&port, 0).ok_or(ENODEV)?,
            Peer::open(&port, other).ok_or(ENODEV)?,
            Peer::open(&port, 1).ok_or(ENODEV)?,
        ],
    };
    let counts = Arc::new(
        RmadCounts {
            hostile: zeros(),
            real: zeros(),
            unsolicited: zeros(),
            success: zeros(),
            flushed: zeros(),
            other: zeros(),
        },
        GFP_KERNEL,
    )?;
    // What can fail first: no rmad agent is left behind then.
    let c = IbRequester::start(&port).ok_or(ENODEV)?;
    let qpn = port.qp_num().ok_or(ENODEV)?;
    let agent = register_gsi(&engine, &transport, 1, &counts, None)?;
    let rmad = Target {
        qpn,
        hi: agent.hi_tid,
    };
    let ib_core = Target {
        qpn: 1,
        hi: c.hi_tid(),
    };
    let result = drive(&agent, &counts, &c, [&rmad, &ib_core], &addrs);
    let unreg = agent.unregister();
    drop(c);
    let out = result?;
    unreg?;
    Ok(out)
}

/// Posts the sends, sends the datagrams and the answers, and collects the counts.
fn drive(
    agent: &Arc<Agent>,
    counts: &RmadCounts,
    c: &IbRequester,
    targets: [&Target; 2],
    addrs: &Addrs,
) -> Result<KVec<Outcome>> {
    let port = verbs::find_port(c"rxe0", 1).ok_or(ENODEV)?;
    let mut handles = KVec::new();
    for kind in KINDS_SENT.iter() {
        let tag = usize::try_from(kind.k << 8).map_err(|_| EINVAL)?;
        // Sends to an IPv4 GID wait less: ib_core's never gets its answer.
        let timeout = if kind.via == Via::Ipv4 {
            IPV4_TIMEOUT_MS
        } else {
            TIMEOUT_MS
        };
        let (gid, index) = addrs.dest(kind.via);
        let mut buf = rxe_request(&port, agent, tag, wire::IB_MGMT_METHOD_SEND, timeout, 0)?;
        buf.set_ah(Some(gid_address(*gid, index)));
        if let Some(c) = buf.mad_mut().get_mut(1) {
            *c = CLASS;
        }
        handles.push(post(buf)?, GFP_KERNEL)?;
        c.post(kind.k, gid, index, timeout)?;
    }
    for h in handles.iter() {
        if !wait_state(agent, h, SendState::WaitResp) {
            return Err(ETIMEDOUT);
        }
    }
    for (kind, h) in KINDS_SENT.iter().zip(handles.iter()) {
        if kind.cancelled {
            h.cancel()?;
            // SAFETY: Nothing answers this send (the peer has sent nothing yet) and its
            // timeout is a minute away.
            unsafe { c.cancel(kind.k) };
        }
    }
    let mut sent = KVec::new();
    let mut send_all = |kind: &Kind| -> Result {
        let to_rmad = send_kind(kind, targets[0], addrs)?;
        let to_c = send_kind(kind, targets[1], addrs)?;
        sent.push((kind.k, to_rmad.min(to_c)), GFP_KERNEL)?;
        Ok(())
    };
    for kind in KINDS_SENT.iter().filter(|k| k.k != AFTER_ANSWER) {
        send_all(kind)?;
    }
    // The real answers, unmarked, from the GID each send went to.
    for kind in KINDS_SENT.iter() {
        let via = if kind.via == Via::OtherSource {
            Via::LinkLocal
        } else {
            kind.via
        };
        for t in targets {
            addrs.send(
                via,
                t,
                &response_in(CLASS, wire::make_tid(t.hi, kind.k << 8))?,
            )?;
        }
    }
    let settled = |k: &Kind| {
        let (r, cc) = (counts.counts(k.k), c.counts(k.k));
        r.success + r.flushed + r.other > 0 && cc.success + cc.flushed + cc.other > 0
    };
    let mut waited = 0;
    while !KINDS_SENT.iter().all(settled) && waited < WAIT_MS {
        sleep_ms(10);
        waited += 10;
    }
    // Responses to completed sends, then time for anything that would still, wrongly, reach
    // a handler.
    for kind in KINDS_SENT.iter().filter(|k| k.k == AFTER_ANSWER) {
        send_all(kind)?;
    }
    sleep_ms(300);
    let mut out = KVec::new();
    for kind in KINDS_SENT.iter() {
        let n = sent
            .iter()
            .find(|(k, _)| *k == kind.k)
            .map_or(0, |(_, n)| *n);
        out.push(
            Outcome {
                kind,
                sent: n,
                rmad: counts.counts(kind.k),
                c: c.counts(kind.k),
            },
            GFP_KERNEL,
        )?;
    }
    Ok(out)
}
