// SPDX-License-Identifier: GPL-2.0

//! The reassembly of one received RMPP transfer (Documentation/behaviour.md §2.10), sans-IO.
//!
//! A [`Transfer`] is made from an accepted FIRST segment ([`Transfer::start`]) and is then fed
//! every later DATA segment with the same key ([`Transfer::on_segment`]); finding the transfer
//! by its key is the caller's job, and so is checking version and type first (§2.10.1). Each
//! call answers with a [`Verdict`] that the caller carries out: copy the segment's data to
//! `(n - 1) * data_size` of its own buffer ([`Config::offset`]), send an ACK, STOP or ABORT,
//! deliver. The transfer stores no payload; it tracks which segments are held in a fixed bitmap
//! over the window.
//!
//! The decisions are `mad_rmpp.c`'s (§2.10.3, §2.10.4, §2.10.5): the same ACK at the same
//! moment with the same numbers, the same repeat ACKs, the same silent drops. The deliberate
//! deviations, each a finding of §2.10.10:
//!
//! 1. **The window is a parameter** ([`Config::new`]); C uses `recv_queue_size / 8` for every
//!    transfer ([`window_for_queue`] gives that value).
//! 2. **Segments are validated** (§2.10.10 item 4), where C takes everything on trust:
//!    - the FIRST segment's PayloadLength, when not 0, announces the total payload
//!      `count * 220 - pad` and so fixes the segment count, `ceil(PayloadLength / 220)`; 0 means
//!      unknown, which the IBA allows, and the first LAST then fixes the count;
//!    - a segment numbered beyond a known count is ABORT(S2B), and so is a LAST whose number is
//!      below a segment already held (C leaves such segments on the delivered list, item 5);
//!    - LAST on any segment but the count's, no LAST on the count's, a LAST PayloadLength whose
//!      padding disagrees with the FIRST's total, and a message shorter than its class header
//!      are ABORT(BAD_LEN).
//!
//!    The count is in units of the RMPP data size, 220, because that is how a sender computes
//!    PayloadLength (`send_next_seg`), while the copy offsets and the delivered length use the
//!    class's data size `256 - hdr_size`, as `get_mad_len` does.
//! 3. **Memory is bounded**: a transfer announcing, or reaching, more than
//!    [`Config::max_segments`] segments is refused with STOP(RESX). RESX ("resources
//!    exhausted") is the status the IBA gives STOP for, and a Linux sender ends its send with
//!    `REM_ABORT_ERR` on it (§2.8); C never sends it and has no limit (item 6, §2.10.9).
//!    Limits over several transfers are the caller's; [`Budget`] counts them.
//! 4. **An ABORT ends the transfer**: C keeps a record going after it answered one of its bad
//!    segments with ABORT(BAD_STATUS) or ABORT(BAD_SEG), although the sender gives up on the
//!    ABORT. A completed transfer stays complete: its message is delivered already.
//! 5. **No time inside**: the caller runs an inactivity timer, re-armed whenever a verdict
//!    [`is_progress`](Verdict::is_progress), and calls [`Transfer::expire`] when it fires,
//!    instead of C's 40 s deadline for the whole transfer (item 1).

use super::{
    last_pad,
    signed,
    Ack,
    RmppHdr,
    Status,
    RMPP_DATA, //
};
use crate::mad::wire::{
    IB_MGMT_MAD_SIZE,
    IB_MGMT_RMPP_FLAG_FIRST,
    IB_MGMT_RMPP_FLAG_LAST,
    IB_MGMT_RMPP_HDR, //
};

/// The largest window: C's `recv_queue_size` is at most 8192, so its window is at most 1024.
pub(crate) const MAX_WINDOW: u32 = 1024;

/// The largest `max_segments`: every segment number and window edge then stays below 2^31,
/// where C's signed view of SegmentNumber ([`signed`]) and the unsigned one agree.
pub(crate) const MAX_SEGMENTS: u32 = 0x7FFF_FFFF - MAX_WINDOW;

/// Words of the bitmap of held segments: one bit per segment of the largest window.
const WORDS: usize = 16;

/// C's window for a receive queue of `recv_queue_size` entries (`window_size`:
/// `max(max_active >> 3, 1)`), within [1, [`MAX_WINDOW`]].
pub(crate) fn window_for_queue(recv_queue_size: u32) -> u32 {
    (recv_queue_size >> 3).clamp(1, MAX_WINDOW)
}

/// What is fixed for a transfer: its window, its class header and its size limit.
///
/// # Invariants
///
/// `1 <= window <= MAX_WINDOW`; `IB_MGMT_RMPP_HDR <= hdr_size < IB_MGMT_MAD_SIZE`;
/// `1 <= max_segments <= MAX_SEGMENTS`; `hdr_size + max_segments * data_size()` fits in a
/// `usize`, so that no offset or length of a transfer overflows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Config {
    /// W: how far `newwin` moves each time the frontier reaches it.
    window: u32,
    /// The class's data offset (`ib_get_mad_data_offset`): the header bytes of every segment.
    hdr_size: usize,
    /// The most segments a transfer may have.
    max_segments: u32,
}

impl Config {
    /// A configuration, or `None` when a value is outside its invariant's range: a window of 0
    /// or above 1024, a header shorter than the 36 bytes of the common and RMPP headers (the
    /// RMPP header would overlap the data) or without room for data, no segment at all, or
    /// more segments than lengths can count.
    pub(crate) fn new(window: u32, hdr_size: usize, max_segments: u32) -> Option<Self> {
        if !(1..=MAX_WINDOW).contains(&window)
            || !(IB_MGMT_RMPP_HDR..IB_MGMT_MAD_SIZE).contains(&hdr_size)
            || !(1..=MAX_SEGMENTS).contains(&max_segments)
        {
            return None;
        }
        usize::try_from(max_segments)
            .ok()?
            .checked_mul(IB_MGMT_MAD_SIZE.checked_sub(hdr_size)?)?
            .checked_add(hdr_size)?;
        // INVARIANT: every range was checked above.
        Some(Self {
            window,
            hdr_size,
            max_segments,
        })
    }

    /// W, the window.
    pub(crate) fn window(&self) -> u32 {
        self.window
    }

    /// The class header size: bytes 0 to `hdr_size` of segment 1 start the message.
    pub(crate) fn hdr_size(&self) -> usize {
        self.hdr_size
    }

    /// The data bytes each segment carries after its headers, `256 - hdr_size`.
    pub(crate) fn data_size(&self) -> usize {
        // The invariant keeps `hdr_size` below 256.
        IB_MGMT_MAD_SIZE.saturating_sub(self.hdr_size)
    }

    /// The most segments a transfer may have.
    pub(crate) fn max_segments(&self) -> u32 {
        self.max_segments
    }

    /// Where segment `n`'s data goes in the caller's buffer of data bytes, `(n - 1) *
    /// data_size()`; `None` for 0 and above `max_segments`.
    pub(crate) fn offset(&self, n: u32) -> Option<usize> {
        if n == 0 || n > self.max_segments {
            return None;
        }
        usize::try_from(n.checked_sub(1)?)
            .ok()?
            .checked_mul(self.data_size())
    }
}

/// Which path a DATA segment takes before any record is looked up (`process_rmpp_data`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// SegmentNumber 1 with FIRST: [`Transfer::start`] when no transfer has its key, else
    /// [`Transfer::on_segment`].
    First,
    /// Any other segment: [`Transfer::on_segment`] of the transfer with its key; none means a
    /// silent drop.
    Other,
}

/// C's checks of every DATA segment, before the lookup (`process_rmpp_data`): a status gives
/// BAD_STATUS; SegmentNumber 1 without FIRST, or FIRST on another number, gives BAD_SEG. The
/// caller answers an `Err` with an ABORT and drops the segment.
pub(crate) fn precheck(h: &RmppHdr) -> Result<Kind, Status> {
    if h.status != 0 {
        return Err(Status::BadStatus);
    }
    match (h.seg_num == 1, h.flags & IB_MGMT_RMPP_FLAG_FIRST != 0) {
        (true, true) => Ok(Kind::First),
        (false, false) => Ok(Kind::Other),
        _ => Err(Status::BadSeg),
    }
}

/// What the caller does with one DATA segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Copy segment `n`'s data to [`Config::offset`]`(n)`; send nothing.
    Store {
        /// The segment number.
        n: u32,
    },
    /// Copy segment `n`'s data, then send `ack`: the frontier reached the window's end, which
    /// moved by W (and segment 1 of a transfer of more than one segment).
    StoreAndAck {
        /// The segment number.
        n: u32,
        /// The ACK to send, to the segment's sender.
        ack: Ack,
    },
    /// Copy segment `n`'s data; the message is whole: send `ack` (built from segment 1's
    /// header in C), then deliver `len` bytes: the class header of segment 1 and
    /// `len - hdr_size` data bytes.
    Complete {
        /// The segment number.
        n: u32,
        /// The final ACK, ACK(N, `newwin`).
        ack: Ack,
        /// The message length, C's `mad_len`: `hdr_size + N * data_size - pad`.
        len: usize,
    },
    /// Drop the segment and send `ack` again: a segment at or below the last ACK, or any
    /// segment within the window of a completed transfer.
    Ack(Ack),
    /// Drop the segment silently: beyond the window, held already, or the transfer ended.
    Drop,
    /// Drop the segment and answer with a STOP or ABORT carrying this status (type
    /// [`Status::rmpp_type`]); unless the transfer was complete, it has ended.
    Reject(Status),
}

impl Verdict {
    /// Whether the transfer moved on (a new segment was stored, the frontier may have moved),
    /// so that the caller re-arms its inactivity timer.
    pub(crate) fn is_progress(&self) -> bool {
        matches!(
            self,
            Self::Store { .. } | Self::StoreAndAck { .. } | Self::Complete { .. }
        )
    }
}

/// Where a transfer is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Segments are being collected.
    Active,
    /// The message was delivered; segments still draw the final ACK (C's COMPLETE record,
    /// kept while the caller lingers, 10 s in C).
    Complete,
    /// Refused with a STOP or ABORT, or expired; every segment is dropped.
    Ended,
}

/// A set of segment numbers above the frontier: bit `i` is segment `frontier + 1 + i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Held([u64; WORDS]);

impl Held {
    /// The empty set.
    const EMPTY: Self = Self([0; WORDS]);

    /// The word and the mask of bit `i`, or `None` beyond the bitmap.
    fn locate(i: u32) -> Option<(usize, u64)> {
        let word = usize::try_from(i / 64).ok()?;
        (word < WORDS).then_some((word, 1u64 << (i % 64)))
    }

    /// Whether bit `i` is set.
    fn get(&self, i: u32) -> bool {
        Self::locate(i)
            .and_then(|(w, m)| self.0.get(w).map(|v| v & m != 0))
            .unwrap_or(false)
    }

    /// Sets bit `i` (nothing beyond the bitmap).
    fn set(&mut self, i: u32) {
        if let Some((w, m)) = Self::locate(i) {
            if let Some(v) = self.0.get_mut(w) {
                *v |= m;
            }
        }
    }

    /// Whether any bit above `i` is set.
    fn any_above(&self, i: u32) -> bool {
        let Some(next) = i.checked_add(1) else {
            return false;
        };
        self.0.iter().enumerate().any(|(w, v)| {
            let first = u32::try_from(w).unwrap_or(u32::MAX).saturating_mul(64);
            // The bits of this word at `next` and above.
            let mask = match next.checked_sub(first) {
                None => u64::MAX,
                Some(k) if k >= 64 => 0,
                Some(k) => u64::MAX << k,
            };
            v & mask != 0
        })
    }

    /// How many bits from bit 0 up are set without a gap.
    fn leading_run(&self) -> u32 {
        let mut run = 0u32;
        for v in self.0 {
            run = run.saturating_add(v.trailing_ones());
            if v != u64::MAX {
                break;
            }
        }
        run
    }

    /// Drops the lowest `k` bits and renumbers the rest down by `k`.
    fn shift_down(&mut self, k: u32) {
        let words = usize::try_from(k / 64).unwrap_or(WORDS);
        let bits = k % 64;
        let old = self.0;
        let at = |i: usize| i.checked_add(words).and_then(|j| old.get(j)).copied();
        for (i, v) in self.0.iter_mut().enumerate() {
            let lo = at(i).unwrap_or(0) >> bits;
            let hi = match (bits, i.checked_add(1).and_then(at)) {
                (0, _) | (_, None) => 0,
                // `b` is below 64, so the shift is too.
                (b, Some(next)) => next << 64u32.saturating_sub(b),
            };
            *v = lo | hi;
        }
    }

    /// Whether no bit is set.
    fn is_empty(&self) -> bool {
        self.0.iter().all(|v| *v == 0)
    }
}

/// One transfer being reassembled: C's `struct mad_rmpp_recv` without its buffers, key, AH and
/// timers.
///
/// # Invariants
///
/// Once [`Transfer::start`] has returned it:
///
/// - `1 <= frontier <= newwin <= frontier + W` and `last_ack <= frontier`;
/// - `held` has bits only for segments in `(frontier, newwin]` (below bit W);
/// - every held segment, the frontier included, is at most `max_segments`, and at most `count`
///   when the count is known;
/// - `expected_pad` is known only with `count`; `len` is known exactly when the segment `count`
///   (the LAST) is held, and then `count` is known;
/// - [`Phase::Complete`] means `frontier == count`, with `held` empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Transfer {
    /// Window, header size and segment limit.
    cfg: Config,
    /// Where the transfer is in its life.
    phase: Phase,
    /// The highest n for which segments 1 to n are all held (C's `seg_num`).
    frontier: u32,
    /// SegmentNumber of the last ACK built (C's `last_ack`).
    last_ack: u32,
    /// The last SegmentNumber of the window (C's `newwin`).
    newwin: u32,
    /// The held segments above the frontier.
    held: Held,
    /// The number of segments, once the FIRST PayloadLength or a LAST told it.
    count: Option<u32>,
    /// The padding the FIRST PayloadLength implies, `count * 220 - PayloadLength`, when it was
    /// not 0.
    expected_pad: Option<u32>,
    /// The message length, once the LAST segment is held.
    len: Option<usize>,
}

impl Transfer {
    /// Starts a transfer with its FIRST segment (C's `start_rmpp`, §2.10.3), which the caller
    /// found no transfer for.
    ///
    /// On success the caller keeps the transfer and carries out the verdict: for a FIRST
    /// without LAST that is [`Verdict::StoreAndAck`] with ACK(1, 1 + W); for FIRST and LAST,
    /// [`Verdict::Complete`] with ACK(1, 1). `Err` holds what to do instead, with no transfer:
    /// [`Verdict::Reject`] (the checks of [`precheck`], a count above `max_segments`, or the
    /// segment checks of [`Transfer::on_segment`]), or [`Verdict::Drop`] for a segment that is
    /// not a FIRST (C: no record, a silent drop).
    pub(crate) fn start(cfg: Config, h: &RmppHdr) -> Result<(Self, Verdict), Verdict> {
        match precheck(h) {
            Err(s) => return Err(Verdict::Reject(s)),
            Ok(Kind::Other) => return Err(Verdict::Drop),
            Ok(Kind::First) => {}
        }
        // A record as `create_rmpp_recv` makes it, before segment 1 is counted: frontier 0,
        // window 1, so that segment 1 takes the path of every other new segment and gets
        // exactly C's ACK(1, 1 + W), or completes with ACK(1, 1).
        let mut t = Self {
            cfg,
            phase: Phase::Active,
            frontier: 0,
            last_ack: 0,
            newwin: 1,
            held: Held::EMPTY,
            count: None,
            expected_pad: None,
            len: None,
        };
        if h.paylen_newwin != 0 {
            let count = h.paylen_newwin.div_ceil(RMPP_DATA);
            if count > cfg.max_segments {
                return Err(Verdict::Reject(Status::Resx));
            }
            // `count * 220` exceeds PayloadLength by less than 220; wide, it cannot overflow.
            let pad = u64::from(count)
                .checked_mul(u64::from(RMPP_DATA))
                .and_then(|t| t.checked_sub(u64::from(h.paylen_newwin)))
                .and_then(|p| u32::try_from(p).ok())
                .ok_or(Verdict::Reject(Status::BadLen))?;
            t.count = Some(count);
            t.expected_pad = Some(pad);
        }
        match t.accept(1, h) {
            v @ Verdict::Reject(_) => Err(v),
            // INVARIANT: `accept` stored segment 1, so the frontier is 1 and `newwin` at least
            // 1; nothing above it is held yet.
            v => Ok((t, v)),
        }
    }

    /// Takes one later DATA segment of this transfer's key (C's `continue_rmpp`, §2.10.4, with
    /// the checks of `process_rmpp_data` first and the deviations of the module doc).
    ///
    /// In this order: an ended transfer drops everything; [`precheck`] failures are rejected;
    /// a SegmentNumber above `newwin` is dropped; one at or below `last_ack` (as C's signed
    /// `int`, so 0 and 2^31 and above are too), or any segment once complete, draws the repeat
    /// ACK(frontier, `newwin`); a segment held already is dropped silently; a new one is
    /// validated, stored, and then completes the message, moves the window with an ACK, or
    /// just waits for the gap below it to fill.
    pub(crate) fn on_segment(&mut self, h: &RmppHdr) -> Verdict {
        if self.phase == Phase::Ended {
            return Verdict::Drop;
        }
        if let Err(s) = precheck(h) {
            if self.phase == Phase::Active {
                self.phase = Phase::Ended;
            }
            return Verdict::Reject(s);
        }
        let n = signed(h.seg_num);
        if n > i64::from(self.newwin) {
            return Verdict::Drop;
        }
        if n <= i64::from(self.last_ack) || self.phase == Phase::Complete {
            return Verdict::Ack(self.ack());
        }
        // Above `last_ack` (at least 0) and at most `newwin`, so a positive `u32`.
        let Ok(n) = u32::try_from(n) else {
            return Verdict::Drop;
        };
        match self.bit(n) {
            Some(i) if !self.held.get(i) => self.accept(n, h),
            // At or below the frontier, or held above it.
            _ => Verdict::Drop,
        }
    }

    /// The inactivity timer fired: an active transfer ends, answered with ABORT(T2L) as C's
    /// deadline does; a completed or ended one is simply dropped by the caller.
    pub(crate) fn expire(&mut self) -> Verdict {
        if self.phase == Phase::Active {
            self.phase = Phase::Ended;
            Verdict::Reject(Status::T2l)
        } else {
            Verdict::Drop
        }
    }

    /// The bit of segment `n` in `held`, if `n` is above the frontier.
    fn bit(&self, n: u32) -> Option<u32> {
        n.checked_sub(self.frontier)?.checked_sub(1)
    }

    /// Builds an ACK from the current state; C's `format_ack` records it as the last ACK.
    fn ack(&mut self) -> Ack {
        self.last_ack = self.frontier;
        Ack {
            seg_num: self.frontier,
            newwin: self.newwin,
        }
    }

    /// The checks of a new segment `n` (above the frontier, within the window, not held) that
    /// C does not make, in this order: beyond a known count (S2B); LAST anywhere but at the
    /// count, or missing there (BAD_LEN); beyond `max_segments` (RESX); for LAST, padding
    /// that disagrees with the FIRST's total (BAD_LEN), held segments above it (S2B), and a
    /// length below the class header (BAD_LEN). Returns the message length for a LAST.
    fn check(&self, n: u32, h: &RmppHdr) -> Result<Option<usize>, Status> {
        let last = h.flags & IB_MGMT_RMPP_FLAG_LAST != 0;
        if let Some(count) = self.count {
            if n > count {
                return Err(Status::S2b);
            }
            if last != (n == count) {
                return Err(Status::BadLen);
            }
        }
        if n > self.cfg.max_segments {
            return Err(Status::Resx);
        }
        if !last {
            return Ok(None);
        }
        let pad = last_pad(h.paylen_newwin);
        if self.expected_pad.is_some_and(|p| p != pad) {
            return Err(Status::BadLen);
        }
        if self.bit(n).is_some_and(|i| self.held.any_above(i)) {
            return Err(Status::S2b);
        }
        let pad = usize::try_from(pad).map_err(|_| Status::BadLen)?;
        // The `Config` invariant keeps `hdr_size + n * data_size` in range for n up to
        // `max_segments`.
        let len = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(self.cfg.data_size()))
            .and_then(|d| d.checked_add(self.cfg.hdr_size))
            .and_then(|l| l.checked_sub(pad))
            .filter(|l| *l >= self.cfg.hdr_size)
            .ok_or(Status::BadLen)?;
        Ok(Some(len))
    }

    /// Validates and stores new segment `n`, then moves the frontier over every segment held
    /// above it, and decides as `continue_rmpp` does once the segment is linked.
    fn accept(&mut self, n: u32, h: &RmppHdr) -> Verdict {
        let len = match self.check(n, h) {
            Ok(len) => len,
            Err(s) => {
                self.phase = Phase::Ended;
                return Verdict::Reject(s);
            }
        };
        if let Some(len) = len {
            // INVARIANT: the LAST is held, so the count is known (it was `n` or it is now).
            self.count = Some(n);
            self.len = Some(len);
        }
        // INVARIANT: `n` is in `(frontier, newwin]`, so its bit is below W.
        if let Some(i) = self.bit(n) {
            self.held.set(i);
        }
        if n != self.frontier.saturating_add(1) {
            // Above a gap: only stored.
            return Verdict::Store { n };
        }
        // Segment n is linked right after the frontier: C's `update_seg_num` moves the
        // frontier over every contiguous held segment, n included.
        let run = self.held.leading_run();
        self.held.shift_down(run);
        // INVARIANT: the run ends at most at `newwin`, and the bits left stay below it.
        self.frontier = self.frontier.saturating_add(run);
        match (self.count, self.len) {
            (Some(count), Some(len)) if count == self.frontier => {
                // INVARIANT: segment `count` is the highest held, so nothing is left above.
                self.phase = Phase::Complete;
                Verdict::Complete {
                    n,
                    ack: self.ack(),
                    len,
                }
            }
            _ if self.frontier == self.newwin => {
                // INVARIANT: `newwin` becomes `frontier + W`, with nothing held above the
                // frontier, since nothing is held beyond the old `newwin`.
                self.newwin = self.newwin.saturating_add(self.cfg.window);
                Verdict::StoreAndAck { n, ack: self.ack() }
            }
            _ => Verdict::Store { n },
        }
    }

    /// The configuration the transfer was started with.
    pub(crate) fn config(&self) -> Config {
        self.cfg
    }

    /// Where the transfer is in its life.
    pub(crate) fn phase(&self) -> Phase {
        self.phase
    }

    /// The frontier: segments 1 to this are all held.
    pub(crate) fn frontier(&self) -> u32 {
        self.frontier
    }

    /// SegmentNumber of the last ACK.
    pub(crate) fn last_ack(&self) -> u32 {
        self.last_ack
    }

    /// The last SegmentNumber of the window.
    pub(crate) fn newwin(&self) -> u32 {
        self.newwin
    }

    /// The number of segments, once known.
    pub(crate) fn count(&self) -> Option<u32> {
        self.count
    }

    /// The message length, once complete.
    pub(crate) fn len(&self) -> Option<usize> {
        match self.phase {
            Phase::Complete => self.len,
            _ => None,
        }
    }

    /// Whether segment `n` is held (stored by an earlier verdict).
    pub(crate) fn holds(&self, n: u32) -> bool {
        match self.bit(n) {
            Some(i) => self.held.get(i),
            None => n != 0,
        }
    }

    /// Whether nothing is held above the frontier.
    pub(crate) fn no_gaps(&self) -> bool {
        self.held.is_empty()
    }
}

/// How many transfers a scope (an agent, a port) has in progress, against a limit: the
/// caller's bound on concurrent transfers.
///
/// # Invariants
///
/// `active <= limit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Budget {
    /// The most transfers at once.
    limit: u32,
    /// The transfers counted now.
    active: u32,
}

impl Budget {
    /// A budget of `limit` transfers, none in use.
    pub(crate) fn new(limit: u32) -> Self {
        Self { limit, active: 0 }
    }

    /// Counts one more transfer if the limit allows; `false` means refuse it (STOP(RESX)).
    pub(crate) fn try_acquire(&mut self) -> bool {
        if self.active >= self.limit {
            return false;
        }
        // INVARIANT: `active` was below `limit`.
        self.active = self.active.saturating_add(1);
        true
    }

    /// A counted transfer ended.
    pub(crate) fn release(&mut self) {
        self.active = self.active.saturating_sub(1);
    }

    /// The transfers counted now.
    pub(crate) fn active(&self) -> u32 {
        self.active
    }
}
