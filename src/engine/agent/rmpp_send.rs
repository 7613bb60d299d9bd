// SPDX-License-Identifier: GPL-2.0

//! Kernel RMPP, send side (`mad_rmpp.c`, Documentation/behaviour.md §2.8): the segments of a
//! send with `rmpp_active`, one in flight at a time, and what the peer's ACKs, STOPs and
//! ABORTs do to it.
//!
//! The window ([`Window`]) decides; the send state machine ([`state::step`]) moves the send;
//! this file applies both under the agent's lock and builds each segment into the send's MAD
//! just before it is handed to the transport ([`load_segment`]). The control messages a
//! received ACK draws (the double-sided turnaround ACK, the ABORT of a protocol error) are sent
//! after the lock is dropped, through the receive side's `send_control`.
//!
//! Where it differs from C (each pinned by a `rmad_rmpp_send` case, Documentation/behaviour.md
//! §8.14): the ACK wait is relative after every window and bounded by min(`timeout_ms`, 2000)
//! ms (C's is effectively unbounded from the second window on for a `timeout_ms` of 2000 or
//! less), and within that bound it follows the round trip the send measured ([`AckClock`]:
//! four smoothed round trips, at least 50 ms, doubling with each expiry), where C always
//! waits the bound; a STOP or ABORT while a segment is in flight ends the send with
//! `REM_ABORT_ERR` at that segment's completion (C reports the completion's status, normally
//! SUCCESS); the first window of a response is 1 (C may take the window a double-sided peer
//! announced; Linux peers announce 1).

use super::{
    Agent,
    AgentInner, //
};
use crate::{
    engine::{
        send::{
            RecordState,
            SegSend,
            SendBody,
            SendRef, //
        },
        transport::RecvMad, //
    },
    mad::{
        rmpp::{
            self,
            send::{
                AckClock,
                AckVerdict,
                AfterSend,
                Timeout,
                Window, //
            },
            Ack,
            RmppHdr,
            Status, //
        },
        state::{
            Event,
            SegTimeout,
            Segment,
            SendState,
            WcStatus, //
        },
        wire::MadHdr, //
    },
};
use kernel::{
    prelude::*,
    sync::Arc, //
};

/// Writes the segment the window sends now (`sent`) into the send's MAD: its data after the
/// headers, and the RMPP fields `send_next_seg` sets (flags ACTIVE, FIRST and LAST, the
/// SegmentNumber, the PayloadLength), keeping the response time the client set.
pub(super) fn load_segment(state: &mut RecordState) -> Result {
    let Some(body) = state.body.as_mut() else {
        return Err(EINVAL);
    };
    let w = &body.seg.as_ref().ok_or(EINVAL)?.window;
    let n = w.sent();
    let seg = w.segment(n).ok_or(EINVAL)?;
    let (
        mad,
        SendBody {
            segments,
            hdr_len,
            seg_size: size,
            ..
        },
    ) = body.parts_mut();
    let start = usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| i.checked_mul(*size))
        .ok_or(EINVAL)?;
    let end = start.checked_add(*size).ok_or(EINVAL)?;
    let data_end = hdr_len.checked_add(*size).ok_or(EINVAL)?;
    let data = segments.get(start..end).ok_or(EINVAL)?;
    mad.get_mut(*hdr_len..data_end)
        .ok_or(EINVAL)?
        .copy_from_slice(data);
    let mut h = RmppHdr::parse(mad).map_err(|_| EINVAL)?;
    h.flags = seg.flags;
    h.seg_num = seg.seg_num;
    h.paylen_newwin = seg.paylen;
    h.write(mad).map_err(|_| EINVAL)
}

/// What the window of a send in flight makes of its segment's completion with `status`, at
/// `now_ns`: an error is recovered by the ACK wait and a retry, as in C (which swallows it).
/// A wait for an ACK starts the send's [`AckClock`].
pub(super) fn after_segment(
    state: &mut RecordState,
    status: WcStatus,
    now_ns: i64,
) -> Option<Segment> {
    let timeout_ms = state.facts.timeout_ms;
    let SegSend { window: w, clock } = state.seg_mut()?;
    let next = if status != WcStatus::Success {
        if w.all_acked() {
            AfterSend::AwaitResponse
        } else {
            AfterSend::AwaitAck
        }
    } else {
        w.after_send()
    };
    Some(match next {
        AfterSend::Send(_) => Segment::Next,
        AfterSend::AwaitAck => {
            let left = w.retries_left();
            clock.waiting(now_ns);
            Segment::AwaitAck(clock.arm(timeout_ms, left))
        }
        AfterSend::AwaitResponse => Segment::Finished,
    })
}

/// What the window of a send waiting makes of an expired wait; the next ACK wait is longer.
/// A wait the clock shortened costs no retry (a probe): only a wait of C's length counts.
pub(super) fn on_expiry(w: &mut Window, clock: &mut AckClock) -> SegTimeout {
    if clock.expired() && w.probe().is_some() {
        return SegTimeout::Probe;
    }
    match w.on_timeout() {
        Timeout::Retry { .. } => SegTimeout::Resend,
        Timeout::NoResponse => SegTimeout::NoResponse,
        Timeout::Fail => SegTimeout::Fail,
    }
}

/// A control message an ACK, STOP or ABORT draws, sent once the agent's lock is dropped.
enum Reply {
    /// Nothing.
    None,
    /// ABORT with this status to the peer (`nack_recv`).
    Abort(Status),
    /// The double-sided turnaround ACK (`ack_ds_ack`): SegmentNumber 0, NewWindowLast 1.
    Turnaround,
}

impl Agent {
    /// Whether `rec` is a segmented send that the peer's ACK, STOP or ABORT still concerns:
    /// in flight or waiting, and not fully ACKed.
    fn rmpp_open(state: &RecordState) -> bool {
        matches!(
            state.facts.state,
            SendState::SendStart | SendState::WaitResp
        ) && state.seg().is_some()
    }

    /// An ACK that reached this kernel-RMPP agent (`process_rmpp_ack`): matched like a response
    /// to a segmented send, whose window it moves; a malformed one draws C's ABORT, matched or
    /// not.
    pub(super) fn rmpp_ack(self: &Arc<Self>, hdr: &MadHdr, h: &RmppHdr, recv: &RecvMad) {
        let reply = {
            let mut inner = self.lock();
            if inner.dead {
                return;
            }
            let rec = self
                .find_send(&inner, hdr, recv)
                .filter(|rec| Self::rmpp_open(rec.state.access(&inner)));
            match rec {
                Some(rec) => Self::with_state(&mut inner, &rec, |inner, state| {
                    self.ack_send(inner, &rec, state, h)
                }),
                // C's checks before it looks for the send.
                None if h.status != 0 => Reply::Abort(Status::BadStatus),
                None if rmpp::signed(h.paylen_newwin) < rmpp::signed(h.seg_num) => {
                    Reply::Abort(Status::W2s)
                }
                None => Reply::None,
            }
        };
        self.send_reply(reply, recv);
    }

    /// Applies the ACK `h` to the segmented send `rec` (state `state`), under the agent's lock.
    fn ack_send(
        self: &Arc<Self>,
        inner: &mut AgentInner,
        rec: &SendRef,
        state: &mut RecordState,
        h: &RmppHdr,
    ) -> Reply {
        let timeout_ms = state.facts.timeout_ms;
        let Some(SegSend { window: w, clock }) = state.seg_mut() else {
            return Reply::None;
        };
        let was_acked = w.all_acked();
        let verdict = w.on_ack(h);
        if let AckVerdict::Progress { advanced: true } | AckVerdict::AllAcked = verdict {
            clock.acked(self.now_ns(), true);
        }
        match verdict {
            AckVerdict::Abort(s) => {
                if !was_acked {
                    self.abort_send(inner, rec, state, s.code());
                }
                Reply::Abort(s)
            }
            AckVerdict::AlreadyAcked
                if state.facts.state == SendState::WaitResp && timeout_ms != 0 =>
            {
                Reply::Turnaround
            }
            AckVerdict::AlreadyAcked | AckVerdict::Ignore => Reply::None,
            AckVerdict::Progress { .. } => {
                let opens = state.facts.state == SendState::WaitResp
                    && state.seg_mut().is_some_and(|s| s.window.next().is_some());
                if opens && self.apply(inner, rec, state, Event::WindowOpened).is_ok() {
                    self.send_segment(inner, rec, state);
                }
                Reply::None
            }
            AckVerdict::AllAcked => {
                let _ = self.apply(inner, rec, state, Event::AllAcked);
                if timeout_ms != 0 {
                    Reply::Turnaround
                } else {
                    Reply::None
                }
            }
        }
    }

    /// Ends the segmented send `rec` for a STOP, an ABORT or a protocol error, with
    /// `REM_ABORT_ERR` and the RMPP status `code` as its vendor error (`abort_send`); now if it
    /// is waiting, at its segment's completion if one is in flight.
    fn abort_send(
        self: &Arc<Self>,
        inner: &mut AgentInner,
        rec: &SendRef,
        state: &mut RecordState,
        code: u8,
    ) {
        let was = state.facts.state;
        if let Ok(outcome) = self.apply(inner, rec, state, Event::RmppAborted) {
            if outcome.next != was {
                state.status = Some((WcStatus::RemAbortErr, u32::from(code)));
            }
        }
    }

    /// A STOP or ABORT from the peer (`process_rmpp_stop`, `process_rmpp_abort`), or an RMPP
    /// message of unknown version or type (`abort_send`), with the
    /// RMPP status its send ends with: the segmented send it matches, if still open and not
    /// fully ACKed, ends with `REM_ABORT_ERR`.
    pub(super) fn rmpp_stopped(self: &Arc<Self>, hdr: &MadHdr, recv: &RecvMad, code: u8) {
        let mut inner = self.lock();
        if inner.dead {
            return;
        }
        let Some(rec) = self.find_send(&inner, hdr, recv) else {
            return;
        };
        Self::with_state(&mut inner, &rec, |inner, state| {
            let acked = state.seg().is_none_or(|s| s.window.all_acked());
            if Self::rmpp_open(state) && !acked {
                self.abort_send(inner, &rec, state, code);
            }
        });
    }

    /// Hands the segment the window chose to the transport, after an ACK or a segment's
    /// completion opened room for it; if the transport refuses, the send waits for the ACK
    /// timeout and its retry (C's "send failure will just result in a timeout/retry").
    pub(super) fn send_segment(
        self: &Arc<Self>,
        inner: &mut AgentInner,
        rec: &SendRef,
        state: &mut RecordState,
    ) {
        match self.transmit(inner, state, false) {
            Ok(handed) => self.trace_sent(state, handed),
            Err(_) => {
                let timeout_ms = state.facts.timeout_ms;
                let ms = match state.seg_mut() {
                    Some(SegSend { window, clock }) => clock.arm(timeout_ms, window.retries_left()),
                    None => AckClock::default().arm(timeout_ms, 0),
                };
                let _ = self.apply(inner, rec, state, Event::SegmentDispatchFailed(ms));
            }
        }
    }

    /// Sends the control message an ACK drew, answering the MAD `recv`.
    fn send_reply(self: &Arc<Self>, reply: Reply, recv: &RecvMad) {
        match reply {
            Reply::None => {}
            Reply::Abort(s) => self.send_control(Self::reject(s, recv, None)),
            Reply::Turnaround => {
                let a = Ack {
                    seg_num: 0,
                    newwin: 1,
                };
                self.send_control(Self::answer(a, recv));
            }
        }
    }
}
