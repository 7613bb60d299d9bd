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
    Phase,
    Transfer,
    Verdict, //
};
use crate::mad::rmpp::send::{
    AckVerdict,
    AfterSend,
    SegHeader,
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

#[path = "rmpp/runs.rs"]
mod runs;
use runs::run_one;

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
    /// A probe's one segment waits for its ACK.
    probing: bool,
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
            probing: false,
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
        if self.probing {
            return AfterSend::AwaitAck;
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
        self.probing = false;
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
        self.probing = false;
        if self.last_ack == self.count {
            return Timeout::NoResponse;
        }
        self.sent = self.last_ack + 1;
        Timeout::Retry {
            from: to_u32(self.sent),
        }
    }

    /// A shortened ACK wait expired, with no retry used, unless all is ACKed: the segment
    /// after the last ACKed one alone (then an ACK is awaited), or, after such a probe with no
    /// ACK since, go back N.
    fn probe(&mut self) -> Option<u32> {
        if self.last_ack == self.count {
            return None;
        }
        self.sent = self.last_ack + 1;
        self.probing = !self.probing;
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
            w.probing(),
        );
        let model = (
            self.count,
            self.sent,
            self.last_ack,
            self.newwin,
            self.left,
            self.last_ack == self.count,
            self.probing,
        );
        if mine != model {
            return Err(format!(
                "window (count, sent, last_ack, newwin, retries_left, all_acked, probing): rmad \
                 {mine:?}, model {model:?}"
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
