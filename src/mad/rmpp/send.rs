// SPDX-License-Identifier: GPL-2.0

//! The window of one segmented RMPP send (Documentation/behaviour.md §2.8), sans-IO, and the
//! segment sizes of a send buffer (§1.5).
//!
//! A [`Window`] knows which segments were sent and acknowledged and how far the receiver lets
//! the sender go. The caller asks it which segment goes out next ([`Window::next`],
//! [`Window::after_send`]), what the segment's RMPP header says ([`Window::segment`]), and
//! what an ACK ([`Window::on_ack`]) or an expired wait ([`Window::on_timeout`]) means; it
//! transmits, arms the timer ([`ack_timeout_ms`]) and reports to the client itself, with the
//! send state machine of `state.rs`.
//!
//! The decisions are those of `mad_rmpp.c` (`send_next_seg`, `process_rmpp_ack`,
//! `ib_retry_rmpp`, `ib_process_rmpp_send_wc`) and of `retry_send` in `mad.c`, with these
//! deliberate deviations:
//!
//! 1. **The double-sided first window is checked**: C takes the peer's `repwin` as it is,
//!    from 0 to 2^31 − 1 (§2.10.10 item 11); here it is clamped into [1, `seg_count`].
//! 2. **The ACK timeout is relative for every window**: min(`timeout_ms`, 2000), or 2000 for a
//!    `timeout_ms` of 0. C uses the stored absolute expiry as a relative wait from the second
//!    window on (§2.8, §7.2 item 11).
//! 3. **An ACK beyond what was sent skips what it acknowledges**: C accepts an ACK up to the
//!    window even for segments it has not sent yet and then sends those anyway; here the
//!    next segment is the one after the ACKed ones.
//! 4. **The ACK wait follows the measured round trip** ([`AckClock`]): four smoothed round
//!    trips, at least 50 ms, doubling with each expiry of a window, at most the wait of
//!    deviation 2, and that whole bound when the window has no retry left; a shortened wait
//!    that expires resends without using a retry ([`Window::probe`]). C always waits the
//!    bound, so each lost segment costs it up to 2 s.
//! 5. **A probe is one segment**: the first shortened wait that expires resends only the
//!    segment after the last ACKed one and waits for an ACK again; only if that wait expires
//!    too does the window go back N. A shortened wait may expire while the ACK is on its way
//!    (under emulation a round trip varies tenfold): the ACK then stops the resend after one
//!    segment, where going back N at once resent up to a window before the ACK was seen.

use super::{
    signed,
    RmppHdr,
    Status,
    RMPP_DATA, //
};
use crate::mad::wire::{
    IB_MGMT_MAD_SIZE,
    IB_MGMT_RMPP_FLAG_ACTIVE,
    IB_MGMT_RMPP_FLAG_FIRST,
    IB_MGMT_RMPP_FLAG_LAST,
    IB_MGMT_RMPP_HDR, //
};

/// The longest wait for an ACK, in milliseconds (`send_next_seg`'s 2 seconds).
pub(crate) const ACK_TIMEOUT_MS: u32 = 2000;

/// The wait for an ACK after each window: `timeout_ms` capped at 2000 ms, and 2000 ms when
/// `timeout_ms` is 0 (no response expected); relative, every window (deviation 2).
pub(crate) fn ack_timeout_ms(timeout_ms: u32) -> u32 {
    if timeout_ms == 0 {
        ACK_TIMEOUT_MS
    } else {
        timeout_ms.min(ACK_TIMEOUT_MS)
    }
}

/// The shortest ACK wait the clock sets from its round-trip estimate, in milliseconds.
pub(crate) const ACK_WAIT_MIN_MS: u32 = 50;

/// The ACK wait of one segmented send, adapted to the round trip it measured (deviation 4).
///
/// C waits [`ack_timeout_ms`] for every window, so a segment lost on a link with a round trip of
/// a millisecond costs two seconds: 1 MiB at 1 % loss spends minutes waiting. The clock times
/// each window's ACK (the time from the window's last segment's send completion to the ACK that
/// moves the window), keeps a smoothed round trip as TCP does (RFC 6298, gain 1/8), and waits
/// four of them, at least [`ACK_WAIT_MIN_MS`], at most [`ack_timeout_ms`]. Every expiry of the
/// same window doubles the wait up to that bound, and a window that had to be sent again gives
/// no sample (Karn's rule), so a slow peer costs retries only until the wait is C's again. The
/// first window, with nothing measured yet, and a window with no retry left wait C's time.
/// A shortened wait that expires costs no retry ([`AckClock::expired`] says which waits were
/// shortened): the window is sent again as a probe, and only waits of the whole bound count
/// against the window's retries, so a late ACK never fails a send sooner than C would.
///
/// # Invariants
///
/// `srtt_ns` is `None` or at least 0; `backoff <= 16`; `short` is true only while a wait
/// armed by [`AckClock::arm`] below the bound runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AckClock {
    /// The smoothed round trip, once an ACK was timed.
    srtt_ns: Option<i64>,
    /// When the send started waiting for the ACK of the current window, if it waits for one
    /// that can be timed.
    since_ns: Option<i64>,
    /// Expiries of the current window: the wait doubles with each.
    backoff: u32,
    /// The wait armed last was shorter than the bound.
    short: bool,
}

impl AckClock {
    /// How long to wait for an ACK now, for a send with `timeout_ms` whose window has
    /// `retries_left`: with none left an expiry ends the send, so it waits the whole bound, as
    /// C does; a shorter wait only ever turns a slow ACK into a retry.
    pub(crate) fn wait_ms(&self, timeout_ms: u32, retries_left: u32) -> u32 {
        let cap = ack_timeout_ms(timeout_ms);
        let Some(srtt) = self.srtt_ns.filter(|_| retries_left > 0) else {
            return cap;
        };
        let base_ms = srtt.saturating_mul(4) / 1_000_000;
        let base = u32::try_from(base_ms)
            .unwrap_or(u32::MAX)
            .clamp(ACK_WAIT_MIN_MS.min(cap), cap);
        base.checked_shl(self.backoff)
            .filter(|w| w >> self.backoff == base)
            .map_or(cap, |w| w.min(cap))
    }

    /// Arms the wait for an ACK: [`AckClock::wait_ms`], remembering whether it is shorter than
    /// the bound, which decides what its expiry costs.
    pub(crate) fn arm(&mut self, timeout_ms: u32, retries_left: u32) -> u32 {
        let ms = self.wait_ms(timeout_ms, retries_left);
        // INVARIANT: set for the wait armed now.
        self.short = ms < ack_timeout_ms(timeout_ms);
        ms
    }

    /// The send waits for an ACK from `now_ns` on (its window's last segment completed).
    pub(crate) fn waiting(&mut self, now_ns: i64) {
        if self.backoff == 0 {
            self.since_ns = Some(now_ns);
        }
    }

    /// An ACK came at `now_ns`; `advanced`: it moved the window. A timed wait gives a sample;
    /// progress ends the window's backoff.
    pub(crate) fn acked(&mut self, now_ns: i64, advanced: bool) {
        if !advanced {
            return;
        }
        if let Some(since) = self.since_ns.take() {
            let sample = now_ns.saturating_sub(since).max(0);
            // INVARIANT: a weighted mean of non-negative values is non-negative.
            self.srtt_ns = Some(match self.srtt_ns {
                None => sample,
                Some(s) => s.saturating_mul(7).saturating_add(sample) / 8,
            });
        }
        self.backoff = 0;
    }

    /// The wait expired: the window is sent again, untimed, and waits twice as long next.
    /// Returns whether the wait that expired was shorter than the bound: then the ACK may be
    /// late rather than lost, and the resend must not use one of the window's retries.
    pub(crate) fn expired(&mut self) -> bool {
        self.since_ns = None;
        // INVARIANT: at most 16; the armed wait is over.
        self.backoff = self.backoff.saturating_add(1).min(16);
        core::mem::replace(&mut self.short, false)
    }

    /// The smoothed round trip in nanoseconds, once measured.
    pub(crate) fn srtt_ns(&self) -> Option<i64> {
        self.srtt_ns
    }
}

/// How `ib_create_send_mad` cuts an RMPP payload into segments on an InfiniBand port (§1.5).
///
/// # Invariants
///
/// `seg_size = 256 - hdr_len` for a `hdr_len` in [36, 256); `seg_count >= 1`;
/// `pad <= seg_size <= 220`; `seg_count * seg_size = data_len + pad`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sizing {
    /// Payload bytes per segment, `256 - hdr_len`.
    pub(crate) seg_size: usize,
    /// The number of segments.
    pub(crate) seg_count: u32,
    /// Bytes of padding at the end of the last segment.
    pub(crate) pad: u32,
}

impl Sizing {
    /// The sizes of an RMPP send buffer with `hdr_len` header bytes and `data_len` payload
    /// bytes: `seg_size = 256 - hdr_len`; `pad = seg_size - data_len % seg_size`, 0 when that
    /// is `seg_size`, and `seg_size` for no data; `seg_count = (data_len + pad) / seg_size`.
    /// `None` where rmad's `create_send` refuses RMPP: a header below 36 bytes or without room
    /// for data, and counts that overflow.
    pub(crate) fn new(hdr_len: usize, data_len: usize) -> Option<Self> {
        if !(IB_MGMT_RMPP_HDR..IB_MGMT_MAD_SIZE).contains(&hdr_len) {
            return None;
        }
        let seg_size = IB_MGMT_MAD_SIZE.checked_sub(hdr_len)?;
        let pad = match data_len.checked_rem(seg_size)? {
            _ if data_len == 0 => seg_size,
            0 => 0,
            r => seg_size.checked_sub(r)?,
        };
        let seg_count = data_len.checked_add(pad)?.checked_div(seg_size)?;
        // INVARIANT: `hdr_len` is in range, `pad <= seg_size`, and `data_len + pad` is a
        // positive multiple of `seg_size`.
        Some(Self {
            seg_size,
            seg_count: u32::try_from(seg_count).ok()?,
            pad: u32::try_from(pad).ok()?,
        })
    }
}

/// The RMPP fields of one DATA segment that change from segment to segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegHeader {
    /// ACTIVE, plus FIRST on segment 1 and LAST on the final segment.
    pub(crate) flags: u8,
    /// SegmentNumber.
    pub(crate) seg_num: u32,
    /// PayloadLength.
    pub(crate) paylen: u32,
}

/// What an ACK means for the send (C's `process_rmpp_ack`, §2.8 "An ACK arrives").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AckVerdict {
    /// A protocol error (BAD_STATUS, W2S or S2B): the caller sends ABORT with this status to
    /// the peer and ends the send with `REM_ABORT_ERR` (`vendor_err` the status), unless the
    /// send is done already (fully ACKed, answered or cancelled), as `abort_send` does. The
    /// window is unchanged.
    Abort(Status),
    /// Every segment was ACKed before: C repeats the double-sided turnaround ACK if the send
    /// waits for a response, and otherwise ignores it.
    AlreadyAcked,
    /// An old ACK: a smaller window or a lower SegmentNumber than already seen. Ignored.
    Ignore,
    /// Accepted, with segments still unacknowledged. `advanced`: `last_ack` moved, and the
    /// retries left went back to the maximum. The window may have grown: a send waiting for
    /// an ACK goes on with [`Window::next`].
    Progress {
        /// `last_ack` moved.
        advanced: bool,
    },
    /// The final segment is ACKed now: the send waits for its response (`timeout_ms`), or is
    /// done with SUCCESS when none is expected.
    AllAcked,
}

/// What an expired wait means (`retry_send` with `ib_retry_rmpp`, §2.8 "Retry").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timeout {
    /// Go back N: send segment `from` (the one after the last ACKed) now, then continue with
    /// [`Window::after_send`]. One retry was used: the caller adds one to `send_buf.retries`.
    Retry {
        /// The segment to send now; it is counted as sent.
        from: u32,
    },
    /// Every segment was ACKed, so the wait was for the response: no RMPP retry; C ends the
    /// send with `RESP_TIMEOUT_ERR` even with retries left. One retry was used, as in C.
    NoResponse,
    /// No retry left: the send ends with `RESP_TIMEOUT_ERR`.
    Fail,
}

/// What to do once a segment's send completion arrived (`ib_process_rmpp_send_wc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AfterSend {
    /// Send segment `n` (counted as sent).
    Send(u32),
    /// Wait for an ACK, [`ack_timeout_ms`] long.
    AwaitAck,
    /// Every segment is ACKed: wait for the response, or complete when none is expected.
    AwaitResponse,
}

/// The window of one segmented send.
///
/// # Invariants
///
/// - `1 <= seg_count` and `seg_count * 220` fits in a `u32`; `pad <= 220`;
/// - `last_ack <= sent <= seg_count`; `last_ack <= newwin` and `1 <= newwin`;
/// - `retries_left <= max_retries`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    /// The number of segments.
    seg_count: u32,
    /// The creator's padding of the last segment (§1.5).
    pad: u32,
    /// The highest segment sent in this pass (C's `seg_num`).
    sent: u32,
    /// The highest segment the receiver acknowledged (C's `last_ack`).
    last_ack: u32,
    /// The highest segment the receiver accepts now (C's `newwin`).
    newwin: u32,
    /// The retries each window gets (the buffer's `retries` at post).
    max_retries: u32,
    /// The retries left in this window.
    retries_left: u32,
    /// A probe's one segment went out, and nothing more goes before an ACK (deviation 5).
    probing: bool,
}

impl Window {
    /// The window of a send of `seg_count` segments whose last one has `pad` bytes of padding,
    /// with `retries` retries per window. The first window is 1 segment, or `repwin` (the
    /// double-sided window the receive side noted for a response, §2.10.6) clamped into
    /// [1, `seg_count`] (deviation 1). `None` for no segment, a padding above 220, or a count
    /// whose PayloadLength does not fit.
    pub(crate) fn new(seg_count: u32, pad: u32, retries: u32, repwin: Option<u32>) -> Option<Self> {
        if seg_count == 0 || pad > RMPP_DATA {
            return None;
        }
        seg_count.checked_mul(RMPP_DATA)?;
        // INVARIANT: nothing sent or ACKed yet; a window of at least 1; all retries left.
        Some(Self {
            seg_count,
            pad,
            sent: 0,
            last_ack: 0,
            newwin: repwin.unwrap_or(1).clamp(1, seg_count),
            max_retries: retries,
            retries_left: retries,
            probing: false,
        })
    }

    /// The RMPP fields of segment `n` as `send_next_seg` writes them: ACTIVE always, FIRST on
    /// segment 1 with PayloadLength `seg_count * 220 - pad`, LAST on segment `seg_count` with
    /// PayloadLength `220 - pad`, 0 elsewhere. A single segment has FIRST and LAST and the
    /// LAST value, which C assigns second. `None` outside 1 to `seg_count`.
    pub(crate) fn segment(&self, n: u32) -> Option<SegHeader> {
        if n == 0 || n > self.seg_count {
            return None;
        }
        let mut flags = IB_MGMT_RMPP_FLAG_ACTIVE;
        let mut paylen = 0;
        if n == 1 {
            flags |= IB_MGMT_RMPP_FLAG_FIRST;
            // The invariant keeps `seg_count * 220` in range and `pad` at most 220.
            paylen = self
                .seg_count
                .saturating_mul(RMPP_DATA)
                .saturating_sub(self.pad);
        }
        if n == self.seg_count {
            flags |= IB_MGMT_RMPP_FLAG_LAST;
            paylen = RMPP_DATA.saturating_sub(self.pad);
        }
        Some(SegHeader {
            flags,
            seg_num: n,
            paylen,
        })
    }

    /// The next segment, if the window allows one (below `newwin` and `seg_count`), counted as
    /// sent.
    pub(crate) fn next(&mut self) -> Option<u32> {
        if self.sent >= self.newwin || self.sent >= self.seg_count {
            return None;
        }
        // INVARIANT: `sent` stays at most `seg_count`.
        self.sent = self.sent.saturating_add(1);
        Some(self.sent)
    }

    /// What follows a segment's successful send completion: wait for the response once all is
    /// ACKed, else the next segment if the window allows and no probe waits for its ACK, else
    /// wait for an ACK.
    pub(crate) fn after_send(&mut self) -> AfterSend {
        if self.all_acked() {
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

    /// Takes an ACK matched to this send: `h` carries its status, SegmentNumber and
    /// NewWindowLast. C's checks in C's order, numbers compared as C's signed `int`: a status
    /// is BAD_STATUS; NewWindowLast below SegmentNumber is W2S; a send fully ACKed before
    /// ignores the rest; SegmentNumber beyond `seg_count` or the window is S2B; a smaller
    /// window or a lower SegmentNumber is old; otherwise the ACK is taken.
    pub(crate) fn on_ack(&mut self, h: &RmppHdr) -> AckVerdict {
        if h.status != 0 {
            return AckVerdict::Abort(Status::BadStatus);
        }
        let seg = signed(h.seg_num);
        let win = signed(h.paylen_newwin);
        if win < seg {
            return AckVerdict::Abort(Status::W2s);
        }
        if self.all_acked() {
            return AckVerdict::AlreadyAcked;
        }
        if seg > i64::from(self.seg_count) || seg > i64::from(self.newwin) {
            return AckVerdict::Abort(Status::S2b);
        }
        if win < i64::from(self.newwin) || seg < i64::from(self.last_ack) {
            return AckVerdict::Ignore;
        }
        // `last_ack <= seg <= win`, both non-negative now, and `seg <= seg_count`.
        let (Ok(seg), Ok(win)) = (u32::try_from(seg), u32::try_from(win)) else {
            return AckVerdict::Ignore;
        };
        let advanced = seg > self.last_ack;
        if advanced {
            // INVARIANT: `seg <= seg_count`; `sent` follows (deviation 3).
            self.last_ack = seg;
            self.sent = self.sent.max(seg);
            self.retries_left = self.max_retries;
        }
        // The receiver answered: sending goes on from where it is.
        self.probing = false;
        // INVARIANT: `win >= seg >= last_ack`, and `win >= old newwin >= 1`.
        self.newwin = win;
        if self.all_acked() {
            AckVerdict::AllAcked
        } else {
            AckVerdict::Progress { advanced }
        }
    }

    /// The wait for an ACK or a response expired (`retry_send`, then `ib_retry_rmpp`): without
    /// retries left the send fails; otherwise one retry is used, and unless everything was
    /// ACKed the transfer goes back to the segment after the last ACKed one (go-back-N),
    /// which is sent even if the window has no room (C's probe).
    pub(crate) fn on_timeout(&mut self) -> Timeout {
        if self.retries_left == 0 {
            return Timeout::Fail;
        }
        self.retries_left = self.retries_left.saturating_sub(1);
        self.probing = false;
        match self.go_back() {
            Some(from) => Timeout::Retry { from },
            None => Timeout::NoResponse,
        }
    }

    /// A shortened ACK wait expired (deviation 4): no retry is used. The first time, the
    /// segment after the last ACKed one goes alone, and the window waits for an ACK before it
    /// sends more (deviation 5); if that wait expires as well, the window goes back N as a
    /// retry does. Returns the segment to send now, or `None` when everything is ACKed (the
    /// wait was for the response, which [`Window::on_timeout`] decides).
    pub(crate) fn probe(&mut self) -> Option<u32> {
        let from = self.go_back()?;
        self.probing = !self.probing;
        Some(from)
    }

    /// Goes back N: the segment after the last ACKed one is sent next, and returned; `None`
    /// when everything is ACKed.
    fn go_back(&mut self) -> Option<u32> {
        if self.all_acked() {
            return None;
        }
        // INVARIANT: not all ACKed, so `last_ack + 1 <= seg_count`.
        self.sent = self.last_ack.saturating_add(1);
        Some(self.sent)
    }

    /// Whether a probe's segment waits for its ACK before more is sent.
    pub(crate) fn probing(&self) -> bool {
        self.probing
    }

    /// Whether every segment is ACKed.
    pub(crate) fn all_acked(&self) -> bool {
        self.last_ack == self.seg_count
    }

    /// The number of segments.
    pub(crate) fn seg_count(&self) -> u32 {
        self.seg_count
    }

    /// The highest segment sent in this pass.
    pub(crate) fn sent(&self) -> u32 {
        self.sent
    }

    /// The highest segment ACKed.
    pub(crate) fn last_ack(&self) -> u32 {
        self.last_ack
    }

    /// The highest segment the receiver accepts now.
    pub(crate) fn newwin(&self) -> u32 {
        self.newwin
    }

    /// The retries left in this window.
    pub(crate) fn retries_left(&self) -> u32 {
        self.retries_left
    }
}
