// SPDX-License-Identifier: GPL-2.0

//! Fuzz target `rmpp`: the RMPP machines of `src/mad/rmpp/` against reference models written
//! from Documentation/behaviour.md §1.5, §2.8 and §2.10 (with the deviations the module docs
//! list), never by calling rmad's code:
//!
//! - [`ModelRx`] is the receiver: the held segments in a `BTreeSet`, numbers as `i64` (C's
//!   signed view by arithmetic), the frontier recomputed from the set at every step, each rule
//!   of `continue_rmpp` and of the added validation written out in order;
//! - [`ModelTx`] is the sender's window: `send_next_seg`, `process_rmpp_ack`, `retry_send` with
//!   `ib_retry_rmpp`, over `i64`;
//! - [`ref_sizing`] is §1.5's arithmetic.
//!
//! One input is one of three runs, chosen by its generator:
//!
//! - **garbage**: a receiver with a random window, class header and segment limit is fed up
//!   to 200 random DATA segments (random, often plausible, SegmentNumber, flags, status and
//!   PayloadLength, and an occasional expiry); every verdict and the visible state must be the
//!   model's, and nothing may panic;
//! - **window**: a send window with random count, padding, retries and double-sided window
//!   gets random calls (next, after-send, ACKs with random fields, timeouts, segment headers),
//!   each compared with the model;
//! - **channel**: a send window and a receiver joined by a channel that loses, duplicates and
//!   reorders both segments and ACKs, with ACK timeouts when nothing is in flight and early ones
//!   at random. Both sides are compared with their models at every packet, and: a completed
//!   receiver holds each segment 1 to N exactly once, its buffer is the sent message and its
//!   length `hdr_len + data_len`; every ACK answers a delivered segment, and the ACKs that move
//!   the window number at most N / W + 2; the sender's `last_ack` never moves back; an all-ACKed
//!   sender implies a completed receiver; a clean channel never draws a STOP or ABORT; and
//!   without loss, early timeouts or a double-sided window, every transfer completes.

use super::{
    Disagreement,
    Rng, //
};
use crate::mad::rmpp::recv::{
    Config,
    Phase,
    Transfer,
    Verdict,
    MAX_WINDOW, //
};
use crate::mad::rmpp::send::{
    AckVerdict,
    AfterSend,
    SegHeader,
    Sizing,
    Timeout,
    Window, //
};
use crate::mad::rmpp::{
    Ack,
    RmppHdr,
    Status, //
};
use std::collections::BTreeSet;
use std::format;
use std::string::String;
use std::vec::Vec;

/// The name of this target.
const NAME: &str = "rmpp";

/// RMPP flags, as the IBA numbers them.
const ACTIVE: u8 = 1;
/// FIRST.
const FIRST: u8 = 2;
/// LAST.
const LAST: u8 = 4;

/// C's `int` view of a 32-bit field, by arithmetic.
fn c_int(v: u32) -> i64 {
    if v >= 0x8000_0000 {
        i64::from(v) - (1i64 << 32)
    } else {
        i64::from(v)
    }
}

/// `i64` to `u32`, saturating (model values are in range where they are converted).
fn to_u32(v: i64) -> u32 {
    u32::try_from(v.clamp(0, i64::from(u32::MAX))).unwrap_or(u32::MAX)
}

/// `i64` to `usize`, saturating.
fn to_usize(v: i64) -> usize {
    usize::try_from(v.max(0)).unwrap_or(usize::MAX)
}

// ---------------------------------------------------------------------------------------------
// The receiver model.

/// The model receiver's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MPhase {
    Active,
    Complete,
    Ended,
}

/// The reference receiver: one transfer, every held segment in a set.
#[derive(Clone, Debug)]
pub(crate) struct ModelRx {
    window: i64,
    hdr: i64,
    data: i64,
    max: i64,
    held: BTreeSet<i64>,
    last_ack: i64,
    newwin: i64,
    phase: MPhase,
    /// The number of segments, when the FIRST PayloadLength or a LAST told it.
    count: Option<i64>,
    /// The FIRST PayloadLength, when not 0.
    total: Option<i64>,
    /// The message length, once the LAST is held.
    len: Option<i64>,
}

impl ModelRx {
    /// The highest f with 1..=f all held.
    fn frontier(&self) -> i64 {
        let mut f = 0;
        while self.held.contains(&(f + 1)) {
            f += 1;
        }
        f
    }

    /// ACK(frontier, newwin), remembered as the last ACK.
    fn ack(&mut self) -> Ack {
        self.last_ack = self.frontier();
        Ack {
            seg_num: to_u32(self.last_ack),
            newwin: to_u32(self.newwin),
        }
    }

    /// `start_rmpp` with the added checks: the answer to a segment no transfer has.
    fn start(
        window: u32,
        hdr: usize,
        max: u32,
        h: &RmppHdr,
    ) -> Result<(ModelRx, Verdict), Verdict> {
        if h.status != 0 {
            return Err(Verdict::Reject(Status::BadStatus));
        }
        let first = h.flags & FIRST != 0;
        if (h.seg_num == 1) != first {
            return Err(Verdict::Reject(Status::BadSeg));
        }
        if !first {
            return Err(Verdict::Drop);
        }
        let hdr = i64::try_from(hdr).unwrap_or(0);
        let mut m = ModelRx {
            window: i64::from(window),
            hdr,
            data: 256 - hdr,
            max: i64::from(max),
            held: BTreeSet::new(),
            last_ack: 0,
            newwin: 1,
            phase: MPhase::Active,
            count: None,
            total: None,
            len: None,
        };
        let paylen = i64::from(h.paylen_newwin);
        if paylen != 0 {
            let count = (paylen + 219) / 220;
            if count > m.max {
                return Err(Verdict::Reject(Status::Resx));
            }
            m.count = Some(count);
            m.total = Some(paylen);
        }
        match m.new_segment(1, h) {
            v @ Verdict::Reject(_) => Err(v),
            v => Ok((m, v)),
        }
    }

    /// `continue_rmpp` with the added checks.
    fn segment(&mut self, h: &RmppHdr) -> Verdict {
        if self.phase == MPhase::Ended {
            return Verdict::Drop;
        }
        let bad = if h.status != 0 {
            Some(Status::BadStatus)
        } else if (h.seg_num == 1) != (h.flags & FIRST != 0) {
            Some(Status::BadSeg)
        } else {
            None
        };
        if let Some(s) = bad {
            if self.phase == MPhase::Active {
                self.phase = MPhase::Ended;
            }
            return Verdict::Reject(s);
        }
        let n = c_int(h.seg_num);
        if n > self.newwin {
            return Verdict::Drop;
        }
        if n <= self.last_ack || self.phase == MPhase::Complete {
            return Verdict::Ack(self.ack());
        }
        if self.held.contains(&n) {
            return Verdict::Drop;
        }
        self.new_segment(n, h)
    }

    /// A segment not held, above the last ACK, within the window.
    fn new_segment(&mut self, n: i64, h: &RmppHdr) -> Verdict {
        if let Err(s) = self.validate(n, h) {
            self.phase = MPhase::Ended;
            return Verdict::Reject(s);
        }
        let before = self.frontier();
        self.held.insert(n);
        let after = self.frontier();
        let seg = to_u32(n);
        if n != before + 1 {
            return Verdict::Store { n: seg };
        }
        if self.count == Some(after) {
            self.phase = MPhase::Complete;
            let ack = self.ack();
            return Verdict::Complete {
                n: seg,
                ack,
                len: to_usize(self.len.unwrap_or(-1)),
            };
        }
        if after == self.newwin {
            self.newwin += self.window;
            let ack = self.ack();
            return Verdict::StoreAndAck { n: seg, ack };
        }
        Verdict::Store { n: seg }
    }

    /// The checks C does not make.
    fn validate(&mut self, n: i64, h: &RmppHdr) -> Result<(), Status> {
        let last = h.flags & LAST != 0;
        if let Some(count) = self.count {
            if n > count {
                return Err(Status::S2b);
            }
            if last && n != count {
                return Err(Status::BadLen);
            }
            if !last && n == count {
                return Err(Status::BadLen);
            }
        }
        if n > self.max {
            return Err(Status::Resx);
        }
        if last {
            let paylen = i64::from(h.paylen_newwin);
            let pad = if (0..=220).contains(&paylen) {
                220 - paylen
            } else {
                0
            };
            if let (Some(total), Some(count)) = (self.total, self.count) {
                if count * 220 - total != pad {
                    return Err(Status::BadLen);
                }
            }
            if self.held.iter().any(|m| *m > n) {
                return Err(Status::S2b);
            }
            let len = self.hdr + n * self.data - pad;
            if len < self.hdr {
                return Err(Status::BadLen);
            }
            self.count = Some(n);
            self.len = Some(len);
        }
        Ok(())
    }

    /// The inactivity timer.
    fn expire(&mut self) -> Verdict {
        if self.phase == MPhase::Active {
            self.phase = MPhase::Ended;
            Verdict::Reject(Status::T2l)
        } else {
            Verdict::Drop
        }
    }

    /// Whether the transfer's visible state is the model's; probes `holds` at `probe`.
    fn agrees(&self, t: &Transfer, probe: u32) -> Result<(), String> {
        let phase = match t.phase() {
            Phase::Active => MPhase::Active,
            Phase::Complete => MPhase::Complete,
            Phase::Ended => MPhase::Ended,
        };
        let mine = (
            phase,
            i64::from(t.frontier()),
            i64::from(t.last_ack()),
            i64::from(t.newwin()),
            t.count().map(i64::from),
            t.len(),
            t.holds(probe),
            t.no_gaps(),
        );
        let frontier = self.frontier();
        let model = (
            self.phase,
            frontier,
            self.last_ack,
            self.newwin,
            self.count,
            match self.phase {
                MPhase::Complete => self.len.map(to_usize),
                _ => None,
            },
            self.held.contains(&i64::from(probe)),
            self.held.iter().all(|n| *n <= frontier),
        );
        if mine != model {
            return Err(format!(
                "state (phase, frontier, last_ack, newwin, count, len, holds({probe}), \
                 no_gaps): rmad {mine:?}, model {model:?}"
            ));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// The sender model.

/// The reference send window.
#[derive(Clone, Debug)]
pub(crate) struct ModelTx {
    count: i64,
    pad: i64,
    sent: i64,
    last_ack: i64,
    newwin: i64,
    max_retries: u32,
    left: u32,
}

impl ModelTx {
    /// A window, or `None` where rmad refuses one.
    fn new(count: u32, pad: u32, retries: u32, repwin: Option<u32>) -> Option<ModelTx> {
        let count = i64::from(count);
        if count == 0 || pad > 220 || count * 220 > i64::from(u32::MAX) {
            return None;
        }
        let win = i64::from(repwin.unwrap_or(1));
        Some(ModelTx {
            count,
            pad: i64::from(pad),
            sent: 0,
            last_ack: 0,
            newwin: if win < 1 {
                1
            } else if win > count {
                count
            } else {
                win
            },
            max_retries: retries,
            left: retries,
        })
    }

    /// `send_next_seg`'s fields of segment n.
    fn segment(&self, n: u32) -> Option<SegHeader> {
        let k = i64::from(n);
        if k < 1 || k > self.count {
            return None;
        }
        let mut flags = ACTIVE;
        let mut paylen = 0;
        if k == 1 {
            flags |= FIRST;
            paylen = self.count * 220 - self.pad;
        }
        if k == self.count {
            flags |= LAST;
            paylen = 220 - self.pad;
        }
        Some(SegHeader {
            flags,
            seg_num: n,
            paylen: to_u32(paylen),
        })
    }

    fn next(&mut self) -> Option<u32> {
        if self.sent < self.newwin && self.sent < self.count {
            self.sent += 1;
            Some(to_u32(self.sent))
        } else {
            None
        }
    }

    fn after_send(&mut self) -> AfterSend {
        if self.last_ack == self.count {
            return AfterSend::AwaitResponse;
        }
        match self.next() {
            Some(n) => AfterSend::Send(n),
            None => AfterSend::AwaitAck,
        }
    }

    /// `process_rmpp_ack` for a matched send.
    fn on_ack(&mut self, h: &RmppHdr) -> AckVerdict {
        if h.status != 0 {
            return AckVerdict::Abort(Status::BadStatus);
        }
        let seg = c_int(h.seg_num);
        let win = c_int(h.paylen_newwin);
        if win < seg {
            return AckVerdict::Abort(Status::W2s);
        }
        if self.last_ack == self.count {
            return AckVerdict::AlreadyAcked;
        }
        if seg > self.count || seg > self.newwin {
            return AckVerdict::Abort(Status::S2b);
        }
        if win < self.newwin || seg < self.last_ack {
            return AckVerdict::Ignore;
        }
        let advanced = seg > self.last_ack;
        if advanced {
            self.last_ack = seg;
            self.left = self.max_retries;
            if self.sent < seg {
                self.sent = seg;
            }
        }
        self.newwin = win;
        if self.last_ack == self.count {
            AckVerdict::AllAcked
        } else {
            AckVerdict::Progress { advanced }
        }
    }

    /// `retry_send`, then `ib_retry_rmpp`.
    fn on_timeout(&mut self) -> Timeout {
        if self.left == 0 {
            return Timeout::Fail;
        }
        self.left -= 1;
        if self.last_ack == self.count {
            return Timeout::NoResponse;
        }
        self.sent = self.last_ack + 1;
        Timeout::Retry {
            from: to_u32(self.sent),
        }
    }

    /// A shortened ACK wait expired: go back N with no retry used, unless all is ACKed.
    fn probe(&mut self) -> Option<u32> {
        if self.last_ack == self.count {
            return None;
        }
        self.sent = self.last_ack + 1;
        Some(to_u32(self.sent))
    }

    fn agrees(&self, w: &Window) -> Result<(), String> {
        let mine = (
            i64::from(w.seg_count()),
            i64::from(w.sent()),
            i64::from(w.last_ack()),
            i64::from(w.newwin()),
            w.retries_left(),
            w.all_acked(),
        );
        let model = (
            self.count,
            self.sent,
            self.last_ack,
            self.newwin,
            self.left,
            self.last_ack == self.count,
        );
        if mine != model {
            return Err(format!(
                "window (count, sent, last_ack, newwin, retries_left, all_acked): rmad {mine:?}, \
                 model {model:?}"
            ));
        }
        Ok(())
    }
}

/// §1.5's sizes for an RMPP buffer on an IB port: (seg_size, seg_count, pad).
fn ref_sizing(hdr: usize, data: usize) -> Option<(usize, u32, u32)> {
    if !(36..256).contains(&hdr) {
        return None;
    }
    let seg_size = 256 - hdr;
    let pad = if data != 0 {
        let p = seg_size - data % seg_size;
        if p == seg_size {
            0
        } else {
            p
        }
    } else {
        seg_size
    };
    // C's loop: `for (left = data_len + pad; left > 0; left -= seg_size)`.
    let total = data.checked_add(pad)?;
    let count = total.div_ceil(seg_size);
    Some((
        seg_size,
        u32::try_from(count).ok()?,
        u32::try_from(pad).ok()?,
    ))
}

// ---------------------------------------------------------------------------------------------
// Coverage.

/// What the runs reached, so that a test can insist every decision was exercised.
#[derive(Clone, Debug, Default)]
pub(crate) struct Coverage {
    /// Receiver verdicts: Store, StoreAndAck, Complete, Ack, Drop, and Reject of RESX, T2L,
    /// BAD_LEN, BAD_SEG, S2B, BAD_STATUS.
    pub(crate) verdicts: [u64; 11],
    /// Sender answers: Abort of BAD_STATUS, W2S, S2B; AlreadyAcked, Ignore, Progress
    /// (advanced), Progress (not advanced), AllAcked; Retry, NoResponse, Fail.
    pub(crate) sender: [u64; 11],
    /// Channel runs that completed, and those that ended otherwise.
    pub(crate) channel: [u64; 2],
}

/// The names of [`Coverage::verdicts`].
pub(crate) const VERDICTS: [&str; 11] = [
    "Store",
    "StoreAndAck",
    "Complete",
    "Ack",
    "Drop",
    "Reject(Resx)",
    "Reject(T2l)",
    "Reject(BadLen)",
    "Reject(BadSeg)",
    "Reject(S2b)",
    "Reject(BadStatus)",
];

/// The names of [`Coverage::sender`].
pub(crate) const SENDER: [&str; 11] = [
    "Abort(BadStatus)",
    "Abort(W2s)",
    "Abort(S2b)",
    "AlreadyAcked",
    "Ignore",
    "Progress(advanced)",
    "Progress(not advanced)",
    "AllAcked",
    "Retry",
    "NoResponse",
    "Fail",
];

impl Coverage {
    fn verdict(&mut self, v: &Verdict) {
        let i = match v {
            Verdict::Store { .. } => 0,
            Verdict::StoreAndAck { .. } => 1,
            Verdict::Complete { .. } => 2,
            Verdict::Ack(_) => 3,
            Verdict::Drop => 4,
            Verdict::Reject(Status::Resx) => 5,
            Verdict::Reject(Status::T2l) => 6,
            Verdict::Reject(Status::BadLen) => 7,
            Verdict::Reject(Status::BadSeg) => 8,
            Verdict::Reject(Status::S2b) => 9,
            Verdict::Reject(_) => 10,
        };
        self.verdicts[i] += 1;
    }

    fn ack(&mut self, v: &AckVerdict) {
        let i = match v {
            AckVerdict::Abort(Status::BadStatus) => 0,
            AckVerdict::Abort(Status::W2s) => 1,
            AckVerdict::Abort(_) => 2,
            AckVerdict::AlreadyAcked => 3,
            AckVerdict::Ignore => 4,
            AckVerdict::Progress { advanced: true } => 5,
            AckVerdict::Progress { advanced: false } => 6,
            AckVerdict::AllAcked => 7,
        };
        self.sender[i] += 1;
    }

    fn timeout(&mut self, t: &Timeout) {
        let i = match t {
            Timeout::Retry { .. } => 8,
            Timeout::NoResponse => 9,
            Timeout::Fail => 10,
        };
        self.sender[i] += 1;
    }
}

// ---------------------------------------------------------------------------------------------
// Random values.

/// A window: mostly small or C's, sometimes anything allowed.
fn random_window(rng: &mut Rng) -> u32 {
    if rng.chance(3, 4) {
        rng.pick(&[1, 2, 3, 4, 5, 8, 16, 63, 64, 65, 128, 1024])
    } else {
        1 + u32::try_from(rng.below(u64::from(MAX_WINDOW))).unwrap_or(0)
    }
}

/// A class header size: the real ones, or anything a `Config` takes.
fn random_hdr(rng: &mut Rng) -> usize {
    if rng.chance(3, 4) {
        rng.pick(&[36, 40, 56, 64])
    } else {
        36 + rng.index(220)
    }
}

/// A PayloadLength near the interesting values.
fn random_paylen(rng: &mut Rng, count_hint: u32) -> u32 {
    let k = u32::try_from(rng.below(u64::from(count_hint) + 2)).unwrap_or(0);
    match rng.below(6) {
        0 => 0,
        1 => k.saturating_mul(220),
        2 => k
            .saturating_mul(220)
            .saturating_sub(u32::try_from(rng.below(221)).unwrap_or(0)),
        3 => u32::try_from(rng.below(260)).unwrap_or(0),
        4 => rng.edgy_u32(),
        _ => 220 - u32::try_from(rng.below(221)).unwrap_or(0),
    }
}

/// A random DATA segment, often plausible for a receiver in `m`'s state.
fn random_segment(rng: &mut Rng, m: Option<&ModelRx>) -> RmppHdr {
    let (frontier, newwin, count) = match m {
        Some(m) => (m.frontier(), m.newwin, m.count.unwrap_or(m.newwin)),
        None => (0, 1, 10),
    };
    let near =
        |rng: &mut Rng, base: i64| to_u32(base + i64::try_from(rng.below(9)).unwrap_or(0) - 4);
    let seg_num = match rng.below(8) {
        0 => 1,
        1 => to_u32(frontier + 1),
        2 => near(rng, frontier),
        3 => near(rng, newwin),
        4 => near(rng, count),
        5 => rng.edgy_u32(),
        6 => rng.pick(&[0, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF]),
        _ => to_u32(frontier + 1 + i64::try_from(rng.below(70)).unwrap_or(0)),
    };
    let mut flags = ACTIVE;
    if (seg_num == 1) != rng.chance(1, 16) {
        flags |= FIRST;
    }
    if i64::from(seg_num) == count || rng.chance(1, 8) {
        flags |= LAST;
    }
    if rng.chance(1, 16) {
        flags = rng.byte() & 0x7;
    }
    RmppHdr {
        version: 1,
        rmpp_type: 1,
        resp_time: rng.byte() & 0x1F,
        flags,
        status: if rng.chance(1, 16) { rng.byte() } else { 0 },
        seg_num,
        paylen_newwin: random_paylen(rng, to_u32(count)),
    }
}

/// A random segment limit, often small enough to be reached.
fn random_max(rng: &mut Rng) -> u32 {
    if rng.chance(1, 2) {
        rng.pick(&[1, 2, 3, 5, 10, 64, 100, 1000])
    } else {
        1 + u32::try_from(rng.below(3000)).unwrap_or(0)
    }
}

// ---------------------------------------------------------------------------------------------
// The three runs.

/// Compares one receiver step: the verdicts, then the state.
fn same(what: &str, mine: Verdict, model: Verdict) -> Result<(), String> {
    if mine != model {
        return Err(format!("{what}: rmad {mine:?}, model {model:?}"));
    }
    Ok(())
}

/// Garbage: random segments against the receiver model.
fn run_garbage(rng: &mut Rng, cov: &mut Coverage) -> Result<(), String> {
    let window = random_window(rng);
    let hdr = random_hdr(rng);
    let max = random_max(rng);
    garbage(rng, window, hdr, max, cov)
        .map_err(|e| format!("garbage, Config::new({window}, {hdr}, {max}): {e}"))
}

/// One garbage run on a receiver configured with `window`, `hdr` and `max`.
fn garbage(
    rng: &mut Rng,
    window: u32,
    hdr: usize,
    max: u32,
    cov: &mut Coverage,
) -> Result<(), String> {
    let cfg = Config::new(window, hdr, max).ok_or("Config refused a valid configuration")?;
    let mut pair: Option<(Transfer, ModelRx)> = None;
    let steps = 1 + rng.below(200);
    for k in 0..steps {
        let h = random_segment(rng, pair.as_ref().map(|(_, m)| m));
        let ctx = |s: &str| format!("step {k}, {s} {h:?}");
        match &mut pair {
            None => {
                let mine = Transfer::start(cfg, &h);
                let model = ModelRx::start(window, hdr, max, &h);
                match (mine, model) {
                    (Ok((t, v)), Ok((m, mv))) => {
                        same(&ctx("start"), v, mv)?;
                        cov.verdict(&v);
                        m.agrees(&t, h.seg_num).map_err(|e| ctx(&e))?;
                        pair = Some((t, m));
                    }
                    (Err(v), Err(mv)) => {
                        same(&ctx("refused start"), v, mv)?;
                        cov.verdict(&v);
                    }
                    (mine, model) => {
                        return Err(ctx(&format!(
                            "start: rmad {:?}, model {:?}",
                            mine.map(|(_, v)| v),
                            model.map(|(_, v)| v)
                        )))
                    }
                }
            }
            Some((t, m)) => {
                let (v, mv) = if rng.chance(1, 50) {
                    (t.expire(), m.expire())
                } else {
                    (t.on_segment(&h), m.segment(&h))
                };
                same(&ctx("segment"), v, mv)?;
                cov.verdict(&v);
                let probe = if rng.chance(1, 2) {
                    h.seg_num
                } else {
                    to_u32(m.frontier() + i64::try_from(rng.below(5)).unwrap_or(0))
                };
                m.agrees(t, probe).map_err(|e| ctx(&e))?;
                // The caller drops an ended transfer, and sometimes a completed one (its
                // linger is over); the next FIRST starts afresh.
                let gone = match t.phase() {
                    Phase::Ended => rng.chance(3, 4),
                    Phase::Complete => rng.chance(1, 8),
                    Phase::Active => false,
                };
                if gone {
                    pair = None;
                }
            }
        }
    }
    Ok(())
}

/// A random ACK header for a sender in `m`'s state.
fn random_ack(rng: &mut Rng, m: &ModelTx) -> RmppHdr {
    let around =
        |rng: &mut Rng, base: i64| to_u32(base + i64::try_from(rng.below(7)).unwrap_or(0) - 3);
    let seg = match rng.below(5) {
        0 => around(rng, m.last_ack),
        1 => around(rng, m.sent),
        2 => around(rng, m.count),
        3 => rng.edgy_u32(),
        _ => to_u32(m.last_ack + i64::try_from(rng.below(70)).unwrap_or(0)),
    };
    let win = match rng.below(5) {
        0 => around(rng, m.newwin),
        1 => seg.saturating_add(u32::try_from(rng.below(70)).unwrap_or(0)),
        2 => around(rng, i64::from(seg)),
        3 => rng.edgy_u32(),
        _ => to_u32(m.count + i64::try_from(rng.below(5)).unwrap_or(0)),
    };
    RmppHdr {
        version: 1,
        rmpp_type: 2,
        flags: ACTIVE,
        status: if rng.chance(1, 16) { rng.byte() } else { 0 },
        seg_num: seg,
        paylen_newwin: win,
        ..RmppHdr::default()
    }
}

/// Window: random calls against the sender model.
fn run_window(rng: &mut Rng, cov: &mut Coverage) -> Result<(), String> {
    let count = if rng.chance(3, 4) {
        1 + u32::try_from(rng.below(40)).unwrap_or(0)
    } else {
        rng.edgy_u32()
    };
    let pad = if rng.chance(3, 4) {
        u32::try_from(rng.below(221)).unwrap_or(0)
    } else {
        rng.edgy_u32()
    };
    let retries = u32::try_from(rng.below(5)).unwrap_or(0);
    let repwin = if rng.chance(1, 2) {
        None
    } else {
        Some(rng.edgy_u32())
    };
    let mine = Window::new(count, pad, retries, repwin);
    let model = ModelTx::new(count, pad, retries, repwin);
    let (mut w, mut m) = match (mine, model) {
        (None, None) => return Ok(()),
        (Some(w), Some(m)) => (w, m),
        (w, m) => {
            return Err(format!(
                "Window::new({count}, {pad}, {retries}, {repwin:?}): rmad {}, model {}",
                w.is_some(),
                m.is_some()
            ))
        }
    };
    m.agrees(&w)?;
    for k in 0..1 + rng.below(120) {
        let what = match rng.below(7) {
            0 => {
                let (a, b) = (w.next(), m.next());
                (a != b).then(|| format!("next: rmad {a:?}, model {b:?}"))
            }
            6 => {
                let (a, b) = (w.probe(), m.probe());
                (a != b).then(|| format!("probe: rmad {a:?}, model {b:?}"))
            }
            1 => {
                let (a, b) = (w.after_send(), m.after_send());
                (a != b).then(|| format!("after_send: rmad {a:?}, model {b:?}"))
            }
            2 => {
                let (a, b) = (w.on_timeout(), m.on_timeout());
                cov.timeout(&a);
                (a != b).then(|| format!("on_timeout: rmad {a:?}, model {b:?}"))
            }
            3 => {
                let n = match rng.below(3) {
                    0 => 1,
                    1 => to_u32(m.count),
                    _ => rng.edgy_u32(),
                };
                let (a, b) = (w.segment(n), m.segment(n));
                (a != b).then(|| format!("segment({n}): rmad {a:?}, model {b:?}"))
            }
            _ => {
                let h = random_ack(rng, &m);
                let (a, b) = (w.on_ack(&h), m.on_ack(&h));
                cov.ack(&a);
                (a != b).then(|| format!("on_ack({h:?}): rmad {a:?}, model {b:?}"))
            }
        };
        if let Some(what) = what {
            return Err(format!(
                "window, call {k} on Window::new({count}, {pad}, {retries}, {repwin:?}): {what}"
            ));
        }
        m.agrees(&w).map_err(|e| format!("call {k}: {e}"))?;
    }
    Ok(())
}

/// A packet in the channel.
#[derive(Clone, Copy, Debug)]
enum Pkt {
    /// DATA segment n, from the sender.
    Seg(u32),
    /// An ACK, from the receiver.
    Ack(Ack),
    /// A STOP or ABORT, from the receiver.
    Stop(Status),
}

/// The parameters of one channel run.
#[derive(Clone, Copy, Debug)]
struct Channel {
    hdr: usize,
    data_len: usize,
    window: u32,
    max: u32,
    retries: u32,
    repwin: Option<u32>,
    /// Losses, duplicates, early timeouts, per 1000 packets.
    loss: u64,
    dup: u64,
    early: u64,
    /// Packets are taken in random order, not first-in first-out.
    reorder: bool,
}

/// Byte `i` of the message a channel run sends.
fn message_byte(i: usize) -> u8 {
    u8::try_from(i.wrapping_mul(131).wrapping_add(7) % 251).unwrap_or(0)
}

/// Channel: a sender and a receiver over a lossy channel.
fn run_channel(rng: &mut Rng, cov: &mut Coverage) -> Result<(), String> {
    let hdr = random_hdr(rng);
    let seg_size = 256 - hdr;
    let segments = if rng.chance(3, 4) {
        1 + rng.index(12)
    } else {
        1 + rng.index(300)
    };
    let data_len = (segments - 1) * seg_size + rng.index(seg_size + 1);
    let c = Channel {
        hdr,
        data_len,
        window: random_window(rng),
        max: if rng.chance(7, 8) {
            3000
        } else {
            random_max(rng)
        },
        retries: u32::try_from(rng.below(12)).unwrap_or(0),
        repwin: if rng.chance(7, 8) {
            None
        } else {
            Some(rng.edgy_u32())
        },
        loss: if segments <= 12 {
            rng.pick(&[0, 0, 10, 50, 200, 500])
        } else {
            rng.pick(&[0, 0, 10, 50])
        },
        dup: rng.pick(&[0, 0, 10, 100, 300]),
        early: rng.pick(&[0, 0, 0, 5, 20]),
        reorder: rng.chance(1, 2),
    };
    channel(rng, c, cov).map_err(|e| format!("channel, {c:?}: {e}"))
}

/// One channel run with the parameters `c`.
fn channel(rng: &mut Rng, c: Channel, cov: &mut Coverage) -> Result<(), String> {
    let sizing = Sizing::new(c.hdr, c.data_len).ok_or("Sizing refused an RMPP size")?;
    let reference = ref_sizing(c.hdr, c.data_len);
    if Some((sizing.seg_size, sizing.seg_count, sizing.pad)) != reference {
        return Err(format!("sizing: rmad {sizing:?}, model {reference:?}"));
    }
    let count = sizing.seg_count;
    let mut tx = Window::new(count, sizing.pad, c.retries, c.repwin).ok_or("Window refused")?;
    let mut mtx = ModelTx::new(count, sizing.pad, c.retries, c.repwin).ok_or("model refused")?;
    let cfg = Config::new(c.window, c.hdr, c.max).ok_or("Config refused")?;
    let mut rx: Option<(Transfer, ModelRx)> = None;

    let message: Vec<u8> = (0..c.data_len).map(message_byte).collect();
    let total = usize::try_from(count).unwrap_or(0) * sizing.seg_size;
    let mut buf = std::vec![0xA5u8; total];
    let mut copies = std::vec![0u32; usize::try_from(count).unwrap_or(0) + 1];
    let mut flight: Vec<Pkt> = Vec::new();
    let (mut delivered, mut acks, mut moving_acks) = (0u64, 0u64, 0u64);
    let mut completed: Option<usize> = None;
    let mut ended = false;
    let mut rejected = false;
    let mut first_delivered = false;
    let mut last_ack = 0u32;

    // Sends what the window allows: C sends one segment per completion, which is the same.
    let pump = |tx: &mut Window, mtx: &mut ModelTx, flight: &mut Vec<Pkt>| loop {
        let (a, b) = (tx.after_send(), mtx.after_send());
        if a != b {
            return Err(format!("after_send: rmad {a:?}, model {b:?}"));
        }
        match a {
            AfterSend::Send(n) => flight.push(Pkt::Seg(n)),
            _ => return Ok(()),
        }
    };
    pump(&mut tx, &mut mtx, &mut flight)?;

    // Every timeout uses a retry unless an ACK made progress, so the run ends; this is a
    // ceiling far above that bound's typical use.
    let budget = 10_000 + 4 * (u64::from(c.retries) + 2) * (u64::from(count) + 1).pow(2);
    let mut step = 0u64;
    while !ended {
        step += 1;
        if step > budget {
            return Err(format!("no end after {budget} steps"));
        }
        let early = !flight.is_empty() && rng.below(1000) < c.early;
        if flight.is_empty() || early {
            if tx.all_acked() {
                break;
            }
            let (a, b) = (tx.on_timeout(), mtx.on_timeout());
            cov.timeout(&a);
            if a != b {
                return Err(format!("on_timeout: rmad {a:?}, model {b:?}"));
            }
            match a {
                Timeout::Retry { from } => {
                    flight.push(Pkt::Seg(from));
                    pump(&mut tx, &mut mtx, &mut flight)?;
                }
                Timeout::NoResponse => return Err(String::from("NoResponse before all ACKed")),
                Timeout::Fail => break,
            }
            continue;
        }
        let i = if c.reorder {
            rng.index(flight.len())
        } else {
            0
        };
        let p = flight.remove(i);
        if rng.below(1000) < c.dup && flight.len() < 4096 {
            flight.push(p);
        }
        if rng.below(1000) < c.loss {
            continue;
        }
        match p {
            Pkt::Seg(n) => {
                delivered += 1;
                first_delivered |= n == 1;
                let s = tx
                    .segment(n)
                    .ok_or("the window sent a segment it has not")?;
                if Some(s) != mtx.segment(n) {
                    return Err(format!(
                        "segment({n}): rmad {s:?}, model {:?}",
                        mtx.segment(n)
                    ));
                }
                let h = RmppHdr {
                    version: 1,
                    rmpp_type: 1,
                    flags: s.flags,
                    seg_num: n,
                    paylen_newwin: s.paylen,
                    ..RmppHdr::default()
                };
                let v = match &mut rx {
                    None => {
                        let mine = Transfer::start(cfg, &h);
                        let model = ModelRx::start(c.window, c.hdr, c.max, &h);
                        match (mine, model) {
                            (Ok((t, v)), Ok((m, mv))) => {
                                same("start", v, mv)?;
                                m.agrees(&t, n)?;
                                rx = Some((t, m));
                                v
                            }
                            (Err(v), Err(mv)) => {
                                same("refused start", v, mv)?;
                                v
                            }
                            (a, b) => {
                                return Err(format!(
                                    "start: rmad {:?}, model {:?}",
                                    a.map(|(_, v)| v),
                                    b.map(|(_, v)| v)
                                ))
                            }
                        }
                    }
                    Some((t, m)) => {
                        let (v, mv) = (t.on_segment(&h), m.segment(&h));
                        same(&format!("segment {n}"), v, mv)?;
                        m.agrees(t, n)?;
                        v
                    }
                };
                cov.verdict(&v);
                let stored = match v {
                    Verdict::Store { n } => Some((n, None)),
                    Verdict::StoreAndAck { n, ack } | Verdict::Complete { n, ack, .. } => {
                        Some((n, Some(ack)))
                    }
                    Verdict::Ack(a) => {
                        flight.push(Pkt::Ack(a));
                        acks += 1;
                        None
                    }
                    Verdict::Drop => None,
                    Verdict::Reject(s) => {
                        flight.push(Pkt::Stop(s));
                        rejected = true;
                        None
                    }
                };
                if let Some((k, ack)) = stored {
                    if k != n {
                        return Err(format!("verdict for segment {n} names {k}"));
                    }
                    let slot = copies
                        .get_mut(usize::try_from(n).unwrap_or(usize::MAX))
                        .ok_or("stored a segment beyond the count")?;
                    *slot += 1;
                    let at = cfg.offset(n).ok_or("no offset for a stored segment")?;
                    let from = usize::try_from(n - 1).unwrap_or(0) * sizing.seg_size;
                    for j in 0..sizing.seg_size {
                        let byte = message.get(from + j).copied().unwrap_or(0);
                        *buf.get_mut(at + j).ok_or("offset beyond the message")? = byte;
                    }
                    if let Some(a) = ack {
                        flight.push(Pkt::Ack(a));
                        acks += 1;
                        moving_acks += 1;
                    }
                }
                if let Verdict::Complete { len, .. } = v {
                    completed = Some(len);
                }
            }
            Pkt::Ack(a) => {
                let h = a.hdr();
                let (v, mv) = (tx.on_ack(&h), mtx.on_ack(&h));
                cov.ack(&v);
                if v != mv {
                    return Err(format!("on_ack({a:?}): rmad {v:?}, model {mv:?}"));
                }
                mtx.agrees(&tx)?;
                match v {
                    AckVerdict::Abort(s) => {
                        return Err(format!("a clean channel drew ABORT({s:?}) for {a:?}"))
                    }
                    AckVerdict::Progress { .. } | AckVerdict::AllAcked => {
                        pump(&mut tx, &mut mtx, &mut flight)?;
                    }
                    AckVerdict::AlreadyAcked | AckVerdict::Ignore => {}
                }
            }
            // Only the segment limit refuses a clean transfer. The sender ends its send with
            // REM_ABORT_ERR.
            Pkt::Stop(Status::Resx) => ended = true,
            Pkt::Stop(s) => return Err(format!("a clean channel drew {s:?}")),
        }
        if tx.last_ack() < last_ack {
            return Err(format!(
                "last_ack went back from {last_ack} to {}",
                tx.last_ack()
            ));
        }
        last_ack = tx.last_ack();
        if tx.all_acked() && completed.is_none() {
            return Err(String::from(
                "all ACKed, but the receiver has not completed",
            ));
        }
    }

    // What the receiver delivered.
    if let Some(len) = completed {
        if len != c.hdr + c.data_len {
            return Err(format!("length {len}, sent {} + {}", c.hdr, c.data_len));
        }
        if copies.first() != Some(&0) || copies.iter().skip(1).any(|k| *k != 1) {
            return Err(format!("segments not stored exactly once: {copies:?}"));
        }
        let (data, pad) = buf.split_at(c.data_len);
        if data != message.as_slice() || pad.iter().any(|b| *b != 0) {
            return Err(String::from("the reassembled message differs"));
        }
    }
    if acks > delivered {
        return Err(format!("{acks} ACKs for {delivered} segments delivered"));
    }
    let bound = u64::from(count) / u64::from(c.window) + 2;
    if moving_acks > bound {
        return Err(format!(
            "{moving_acks} window ACKs, more than N / W + 2 = {bound}"
        ));
    }
    // Refusals: only the segment limit may draw one on a clean channel.
    if rejected {
        let resx = count > c.max;
        if !resx {
            return Err(String::from(
                "a clean transfer within the limit was refused",
            ));
        }
    } else if count > c.max && first_delivered {
        return Err(String::from("a transfer beyond the limit was not refused"));
    }
    // Liveness: no loss, no early timeout and no double-sided window means completion.
    let clean = c.loss == 0 && c.early == 0 && c.repwin.is_none() && count <= c.max;
    if clean && !(tx.all_acked() && completed.is_some()) {
        return Err(String::from("a lossless transfer did not complete"));
    }
    cov.channel[usize::from(completed.is_none())] += 1;
    Ok(())
}

/// One input: one of the three runs.
fn run_one(rng: &mut Rng, cov: &mut Coverage) -> Result<(), String> {
    match rng.below(3) {
        0 => run_garbage(rng, cov),
        1 => run_window(rng, cov),
        _ => run_channel(rng, cov),
    }
}

/// Runs inputs `first..first + inputs` of `seed`, adding what they reached to `cov`.
fn run_cov(seed: u64, first: u64, inputs: u64, cov: &mut Coverage) -> Result<u64, Disagreement> {
    for i in first..first.saturating_add(inputs) {
        let rng = Rng::for_input(seed, i);
        let mut local = Coverage::default();
        let res = std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| {
            let mut rng = rng.clone();
            run_one(&mut rng, &mut local)
        }))
        .unwrap_or_else(|_| Err(String::from("panicked")));
        if let Err(what) = res {
            return Err(Disagreement {
                target: NAME,
                seed,
                input: i,
                what,
                reproducer: String::from("the run's parameters are named above"),
            });
        }
        for (c, l) in cov.verdicts.iter_mut().zip(local.verdicts) {
            *c += l;
        }
        for (c, l) in cov.sender.iter_mut().zip(local.sender) {
            *c += l;
        }
        for (c, l) in cov.channel.iter_mut().zip(local.channel) {
            *c += l;
        }
    }
    Ok(inputs)
}

/// The target: inputs `first..first + inputs` of `seed`.
pub(crate) fn run_range(seed: u64, first: u64, inputs: u64) -> Result<u64, Disagreement> {
    run_cov(seed, first, inputs, &mut Coverage::default())
}

/// What `inputs` inputs of `seed` reach.
#[cfg(test)]
pub(crate) fn coverage(seed: u64, inputs: u64) -> Result<Coverage, Disagreement> {
    let mut cov = Coverage::default();
    run_cov(seed, 0, inputs, &mut cov)?;
    Ok(cov)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The models agree with the worked figures of the behaviour reference, so that a wrong
    /// model cannot hide a wrong machine.
    #[test]
    fn models_match_worked_cases() {
        // §2.10.4: N = 130, W = 64 in order.
        let seg = |n: u32, flags: u8, paylen: u32| RmppHdr {
            flags: ACTIVE | flags,
            seg_num: n,
            paylen_newwin: paylen,
            ..RmppHdr::default()
        };
        let (mut m, v) = ModelRx::start(64, 56, 1000, &seg(1, FIRST, 130 * 220)).unwrap();
        let mut acks = std::vec![v];
        for n in 2..130 {
            acks.push(m.segment(&seg(n, 0, 0)));
        }
        acks.push(m.segment(&seg(130, LAST, 220)));
        let acks: Vec<Ack> = acks
            .iter()
            .filter_map(|v| match v {
                Verdict::StoreAndAck { ack, .. } | Verdict::Complete { ack, .. } => Some(*ack),
                _ => None,
            })
            .collect();
        let want = [(1, 65), (65, 129), (129, 193), (130, 193)]
            .map(|(seg_num, newwin)| Ack { seg_num, newwin });
        assert_eq!(acks, want);
        assert_eq!(m.len, Some(56 + 130 * 200));
        // §1.5: 56/201 is two segments with 199 bytes of padding; 56/1000 five with none.
        assert_eq!(ref_sizing(56, 201), Some((200, 2, 199)));
        assert_eq!(ref_sizing(56, 1000), Some((200, 5, 0)));
        assert_eq!(ref_sizing(56, 0), Some((200, 1, 200)));
        let t = ModelTx::new(2, 199, 0, None).unwrap();
        assert_eq!(t.segment(1).map(|s| s.paylen), Some(241));
        assert_eq!(
            t.segment(2).map(|s| (s.flags, s.paylen)),
            Some((ACTIVE | LAST, 21))
        );
        assert_eq!(c_int(0x8000_0000), -0x8000_0000);
        assert_eq!(c_int(0xFFFF_FFFF), -1);
    }
}
