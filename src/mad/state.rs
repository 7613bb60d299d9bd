// SPDX-License-Identifier: GPL-2.0

//! The send state machine of Linux 7.3's MAD layer (Documentation/behaviour.md §2), as one pure
//! function.
//!
//! Every event that touches an outstanding send (post, dispatch, send completion, response,
//! expiry, modify/cancel, unregister, delivery) goes through [`step`]. It takes what the agent
//! knows about the send ([`SendFacts`]) and the event, and returns the new state together with
//! everything the engine must do about it ([`Outcome`]): where the send is kept now, how the
//! flow-control counters change, whether to transmit, and which handler to call with which
//! status. The engine applies the outcome under the agent lock; nothing here allocates, sleeps
//! or knows about kernel types, so the same file is compiled into the host tests, which check
//! every state/event pair.
//!
//! The transition numbers (T1–T27) are those of Documentation/behaviour.md §2.3. A segmented
//! (kernel-RMPP) send moves through the same states; its window (`rmpp/send.rs`) decides what a
//! segment's completion, an ACK or an expiry means, and hands the result here as one of the
//! RMPP events ([`Event::SegmentCompleted`] to [`Event::SegmentExpired`], §2.8). Local
//! directed-route SMPs have no state here: rmad's transports carry none.

/// Work-completion status delivered to a send handler (`enum ib_wc_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WcStatus {
    /// `IB_WC_SUCCESS` (0).
    Success,
    /// `IB_WC_LOC_QP_OP_ERR` (2): the send could not be dispatched from the backlog.
    LocQpOpErr,
    /// `IB_WC_WR_FLUSH_ERR` (5): the send was cancelled, or its agent unregistered.
    WrFlushErr,
    /// `IB_WC_REM_ABORT_ERR` (16).
    RemAbortErr,
    /// `IB_WC_RESP_TIMEOUT_ERR` (20): no response after every retry.
    RespTimeoutErr,
    /// `IB_WC_GENERAL_ERR` (21).
    GeneralErr,
    /// Any other status, copied from a transport's send completion.
    Other(u32),
}

impl WcStatus {
    /// The numeric value of `enum ib_wc_status`.
    pub(crate) fn code(self) -> u32 {
        match self {
            Self::Success => 0,
            Self::LocQpOpErr => 2,
            Self::WrFlushErr => 5,
            Self::RemAbortErr => 16,
            Self::RespTimeoutErr => 20,
            Self::GeneralErr => 21,
            Self::Other(v) => v,
        }
    }

    /// The status whose numeric value is `code`.
    pub(crate) fn from_code(code: u32) -> Self {
        match code {
            0 => Self::Success,
            2 => Self::LocQpOpErr,
            5 => Self::WrFlushErr,
            16 => Self::RemAbortErr,
            20 => Self::RespTimeoutErr,
            21 => Self::GeneralErr,
            v => Self::Other(v),
        }
    }
}

/// What a cancelled send is waiting for before its `WR_FLUSH_ERR` is delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CancelWait {
    /// It was handed to the transport: the flush is reported at its send completion (T20).
    SendCompletion,
    /// It was waiting for a response or in the backlog: the timeout work reports it (T21).
    TimeoutWork,
}

/// The state of one send buffer (Documentation/behaviour.md §2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SendState {
    /// Not outstanding: never posted, failed to post, or its send handler has been called.
    /// The client owns the buffer.
    Idle,
    /// Held back by solicited flow control, in the agent's backlog.
    Queued,
    /// Handed to the transport, waiting for its send completion.
    SendStart,
    /// Sent, waiting for a response or a timeout.
    WaitResp,
    /// A response was matched before the send completion arrived.
    EarlyResp,
    /// Cancelled; the `WR_FLUSH_ERR` completion is still to come.
    Canceled(CancelWait),
    /// The final status is decided and the send handler is about to be called.
    Done,
}

/// Where the engine must keep the send after a transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// Where it was.
    Unchanged,
    /// In no agent structure: the send is finished (or the post failed).
    Nowhere,
    /// With the sends handed to the transport.
    InFlight,
    /// In the wait queue, expiring `ms` milliseconds from now.
    Waiting {
        /// Relative timeout in milliseconds.
        ms: u32,
    },
    /// At the tail of the flow-control backlog.
    Backlog,
    /// In the queue of cancelled sends that the timeout work reports, which it is told to run
    /// at once.
    CancelQueue,
}

/// What happens to a received response that was matched against this send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recv {
    /// No response is involved.
    None,
    /// Hand the response to the receive handler (with this send's buffer).
    Deliver,
    /// Drop the response without calling any handler.
    Drop,
}

/// What a segmented send's window makes of a segment's send completion (§2.8 "On each segment
/// completion").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Segment {
    /// The window has room: the next segment goes out now, with no handler call.
    Next,
    /// The window is full (or the last segment is out): wait this long for an ACK.
    AwaitAck(u32),
    /// Every segment is ACKed: wait for the response, or finish when none is expected.
    Finished,
}

/// What a segmented send's window makes of an expired wait (§2.8 "Retry").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SegTimeout {
    /// Go back N: the segment after the last ACKed one goes out now; one retry is used.
    Resend,
    /// Go back N after a wait the ACK clock shortened: as `Resend`, with no retry used.
    Probe,
    /// Everything was ACKed and the response did not come: `RESP_TIMEOUT_ERR`, one retry used
    /// (as C counts it), whatever the retries left.
    NoResponse,
    /// No retry left: `RESP_TIMEOUT_ERR`.
    Fail,
}

/// Change of one flow-control counter.
pub(crate) type Delta = i8;

/// Everything the engine must do about one transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// The send's new state.
    pub(crate) next: SendState,
    /// Where the send is kept from now on.
    pub(crate) place: Place,
    /// Change of the agent's `sol_fc_send_count` (only ever non-zero for flow-controlled sends).
    pub(crate) fc_send: Delta,
    /// Change of the agent's `sol_fc_wait_count`.
    pub(crate) fc_wait: Delta,
    /// Hand the MAD to the transport.
    pub(crate) transmit: bool,
    /// This is a retry: one retry fewer is left and the buffer's `retries` grows by one.
    pub(crate) retry: bool,
    /// Store this relative timeout in the buffer's `timeout_ms` (modify and cancel).
    pub(crate) store_timeout: Option<u32>,
    /// What to do with the response of a [`Event::Response`].
    pub(crate) recv: Recv,
    /// Call the send handler with this status (after the receive handler, if any).
    pub(crate) complete: Option<WcStatus>,
    /// A solicited flow-control slot was freed: the engine must try to dispatch the backlog
    /// before it calls this send's handler.
    pub(crate) frees_fc_slot: bool,
}

impl Outcome {
    /// An outcome that moves to `next` and does nothing else.
    const fn to(next: SendState) -> Self {
        Self {
            next,
            place: Place::Unchanged,
            fc_send: 0,
            fc_wait: 0,
            transmit: false,
            retry: false,
            store_timeout: None,
            recv: Recv::None,
            complete: None,
            frees_fc_slot: false,
        }
    }

    const fn place(mut self, place: Place) -> Self {
        self.place = place;
        self
    }

    const fn complete(mut self, status: WcStatus) -> Self {
        self.complete = Some(status);
        self
    }

    const fn recv(mut self, recv: Recv) -> Self {
        self.recv = recv;
        self
    }

    const fn store(mut self, timeout_ms: u32) -> Self {
        self.store_timeout = Some(timeout_ms);
        self
    }

    /// Adjusts the counters of a flow-controlled send; for other sends they never move.
    const fn fc(mut self, fc: bool, send: Delta, wait: Delta) -> Self {
        if fc {
            self.fc_send = send;
            self.fc_wait = wait;
            // A slot is freed when the send leaves the counted states for good or for the
            // backlog.
            self.frees_fc_slot = send + wait < 0;
        }
        self
    }
}

/// Flow-control admission facts for a post, read under the agent lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Admission {
    /// The agent's `sol_fc_max`; 0 disables flow control.
    pub(crate) limit: u32,
    /// `sol_fc_send_count + sol_fc_wait_count`.
    pub(crate) in_use: u32,
    /// The backlog is empty.
    pub(crate) backlog_empty: bool,
}

/// An event that concerns one send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// The client posts the send (T1, T2).
    Post(Admission),
    /// The transport refused the transmission started by the post (T3).
    DispatchFailed,
    /// The backlog head is taken for transmission (T4).
    BacklogDispatch,
    /// The transport refused the transmission of a backlog dispatch (T4, failure).
    BacklogDispatchFailed,
    /// The transport reports the send completion with this status (T5, T6, T8, T20).
    SendCompleted(WcStatus),
    /// A response matched this send by TID, class and address (T7, T9, T10, T22).
    Response,
    /// The wait expired in the timeout work; `backlog_empty` tells where a retry goes
    /// (T11, T12, T13, T21).
    Expired {
        /// The agent's backlog is empty.
        backlog_empty: bool,
    },
    /// The transport refused a retransmission (T12 failure → T13).
    RetransmitFailed,
    /// `modify(timeout_ms)`; 0 is cancel (T14–T19, T23).
    Modify(u32),
    /// The agent is being unregistered (T24, T25).
    Unregister,
    /// The send handler has been called; the client owns the buffer again.
    Delivered,
    /// RMPP: a segment's send completion with this status, and what the window makes of it.
    SegmentCompleted(WcStatus, Segment),
    /// RMPP: the transport refused a segment that the window or an ACK sent (not a retry, not
    /// the post's own): C recovers it by the ACK timeout and a retry, so the send waits this
    /// long.
    SegmentDispatchFailed(u32),
    /// RMPP: an ACK opened the window of a send waiting for one; the next segment goes out
    /// (T27).
    WindowOpened,
    /// RMPP: an ACK acknowledged the last segment.
    AllAcked,
    /// RMPP: the transfer was stopped or aborted, by the peer's STOP or ABORT or for a
    /// protocol error in its ACK; the engine stores `REM_ABORT_ERR` with the RMPP status.
    RmppAborted,
    /// RMPP: a segmented send's wait expired, and what its window makes of it.
    SegmentExpired(SegTimeout),
}

/// What the agent knows about one send when an event arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SendFacts {
    /// The current state.
    pub(crate) state: SendState,
    /// Whether the send is a solicited flow-control send (decided at post).
    pub(crate) fc: bool,
    /// The buffer's `timeout_ms`: the relative wait after each transmission; 0 means no
    /// response is expected.
    pub(crate) timeout_ms: u32,
    /// Retries left.
    pub(crate) retries_left: u32,
}

/// Why an event was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reject {
    /// Modify or cancel of a send that is not (or no longer) cancellable: `-EINVAL`.
    NotCancellable,
    /// Post of a send that is already outstanding: `-EBUSY`.
    Outstanding,
    /// The event cannot happen in this state; the engine reports an internal error.
    Impossible,
}

/// Decides the transition of one send for one event (Documentation/behaviour.md §2.3).
///
/// Every per-send state change of the engine goes through this function.
pub(crate) fn step(s: SendFacts, ev: Event) -> Result<Outcome, Reject> {
    use CancelWait::{SendCompletion, TimeoutWork};
    use SendState::*;

    let fc = s.fc;
    let o = match (s.state, ev) {
        // T1/T2: admission. A flow-controlled send waits when the limit is on and either the
        // backlog is not empty (no overtaking) or every slot is in use.
        (Idle, Event::Post(a)) => {
            if fc && a.limit != 0 && (!a.backlog_empty || a.in_use >= a.limit) {
                Outcome::to(Queued).place(Place::Backlog)
            } else {
                let mut o = Outcome::to(SendStart).place(Place::InFlight).fc(fc, 1, 0);
                o.transmit = true;
                o
            }
        }
        (_, Event::Post(_)) => return Err(Reject::Outstanding),

        // T3: the post's own transmission failed; no handler runs, the post returns the error.
        // A concurrent early response or cancel may have moved the send already.
        (SendStart, Event::DispatchFailed) => Outcome::to(Idle).place(Place::Nowhere).fc(fc, -1, 0),
        (EarlyResp | Canceled(SendCompletion), Event::DispatchFailed) => {
            Outcome::to(Idle).place(Place::Nowhere)
        }

        // T4: the backlog head goes to the transport.
        (Queued, Event::BacklogDispatch) => {
            let mut o = Outcome::to(SendStart).place(Place::InFlight).fc(fc, 1, 0);
            o.transmit = true;
            o
        }
        // T4 failure: the handler reports LOC_QP_OP_ERR, even if a cancel came in between.
        (SendStart, Event::BacklogDispatchFailed) => Outcome::to(Done)
            .place(Place::Nowhere)
            .fc(fc, -1, 0)
            .complete(WcStatus::LocQpOpErr),
        (EarlyResp | Canceled(SendCompletion), Event::BacklogDispatchFailed) => Outcome::to(Done)
            .place(Place::Nowhere)
            .complete(WcStatus::LocQpOpErr),

        // T5/T6: the send completed. With a timeout the send waits for its response whatever the
        // completion status was (7.3 swallows the error, Documentation/behaviour.md §7.2 item 1).
        (SendStart, Event::SendCompleted(st)) => {
            if s.timeout_ms != 0 {
                Outcome::to(WaitResp)
                    .place(Place::Waiting { ms: s.timeout_ms })
                    .fc(fc, -1, 1)
            } else {
                Outcome::to(Done)
                    .place(Place::Nowhere)
                    .fc(fc, -1, 0)
                    .complete(st)
            }
        }
        // T8: the response came first; the send completion now reports its own status.
        (EarlyResp, Event::SendCompleted(st)) => {
            Outcome::to(Done).place(Place::Nowhere).complete(st)
        }
        // T20: a cancelled send in flight reports the flush, whatever the transport said.
        (Canceled(SendCompletion), Event::SendCompleted(_)) => Outcome::to(Done)
            .place(Place::Nowhere)
            .complete(WcStatus::WrFlushErr),

        // T7: early response. The receive handler runs now; the send handler at completion.
        (SendStart, Event::Response) if s.timeout_ms != 0 => {
            Outcome::to(EarlyResp).fc(fc, -1, 0).recv(Recv::Deliver)
        }
        // T9/T10: the receive handler, then the send handler with SUCCESS.
        (WaitResp, Event::Response) => Outcome::to(Done)
            .place(Place::Nowhere)
            .fc(fc, 0, -1)
            .recv(Recv::Deliver)
            .complete(WcStatus::Success),
        (Queued, Event::Response) => {
            let mut o = Outcome::to(Done)
                .place(Place::Nowhere)
                .recv(Recv::Deliver)
                .complete(WcStatus::Success);
            // Leaving the backlog lets the next queued send be considered.
            o.frees_fc_slot = fc;
            o
        }
        // T22 and duplicates: a send that expects no response, that already matched one, or
        // that was cancelled drops it.
        (SendStart | EarlyResp | Canceled(_), Event::Response) => {
            Outcome::to(s.state).recv(Recv::Drop)
        }
        (Idle | Done, Event::Response) => Outcome::to(s.state).recv(Recv::Drop),

        // T11/T12/T13: the wait expired.
        (WaitResp, Event::Expired { backlog_empty }) => {
            if s.retries_left == 0 {
                Outcome::to(Done)
                    .place(Place::Nowhere)
                    .fc(fc, 0, -1)
                    .complete(WcStatus::RespTimeoutErr)
            } else if fc && !backlog_empty {
                let mut o = Outcome::to(Queued).place(Place::Backlog).fc(fc, 0, -1);
                o.retry = true;
                o
            } else {
                let mut o = Outcome::to(SendStart).place(Place::InFlight).fc(fc, 1, -1);
                o.retry = true;
                o.transmit = true;
                o
            }
        }
        // T21: the timeout work reports a cancelled send.
        (Canceled(TimeoutWork), Event::Expired { .. }) => Outcome::to(Done)
            .place(Place::Nowhere)
            .complete(WcStatus::WrFlushErr),
        // A retransmission that cannot be dispatched ends with RESP_TIMEOUT_ERR.
        (SendStart, Event::RetransmitFailed) => Outcome::to(Done)
            .place(Place::Nowhere)
            .fc(fc, -1, 0)
            .complete(WcStatus::RespTimeoutErr),

        // T16–T19: cancel.
        (SendStart, Event::Modify(0)) => {
            Outcome::to(Canceled(SendCompletion)).fc(fc, -1, 0).store(0)
        }
        (EarlyResp, Event::Modify(0)) => Outcome::to(Canceled(SendCompletion)).store(0),
        (WaitResp, Event::Modify(0)) => Outcome::to(Canceled(TimeoutWork))
            .place(Place::CancelQueue)
            .fc(fc, 0, -1)
            .store(0),
        (Queued, Event::Modify(0)) => Outcome::to(Canceled(TimeoutWork))
            .place(Place::CancelQueue)
            .store(0),
        // T14: a waiting send waits `t` from now; later retries use `t` too.
        (WaitResp, Event::Modify(t)) => Outcome::to(WaitResp)
            .place(Place::Waiting { ms: t })
            .store(t),
        // T15: `t` applies from the next send completion. After an early response it is only
        // stored: rmad does not re-arm matching (a documented deviation from 7.3).
        (SendStart | EarlyResp | Queued, Event::Modify(t)) => Outcome::to(s.state).store(t),
        // T23 and sends that are not outstanding.
        (Canceled(_) | Done | Idle, Event::Modify(_)) => return Err(Reject::NotCancellable),

        // T24: in flight, the flush comes with the send completion.
        (SendStart, Event::Unregister) => Outcome::to(Canceled(SendCompletion)).fc(fc, -1, 0),
        // An early-answered send is on the send list too, and C's `cancel_mads` marks it
        // CANCELED: its completion reports the flush, not the CQE's status.
        (EarlyResp, Event::Unregister) => Outcome::to(Canceled(SendCompletion)),
        (Canceled(SendCompletion) | Done, Event::Unregister) => Outcome::to(s.state),
        // T25: everything else is flushed now, by the unregistering thread.
        (WaitResp, Event::Unregister) => Outcome::to(Done)
            .place(Place::Nowhere)
            .fc(fc, 0, -1)
            .complete(WcStatus::WrFlushErr),
        (Queued | Canceled(TimeoutWork), Event::Unregister) => Outcome::to(Done)
            .place(Place::Nowhere)
            .complete(WcStatus::WrFlushErr),

        (Done, Event::Delivered) => Outcome::to(Idle),

        // RMPP (§2.8). A segment's completion: the window decides.
        (SendStart, Event::SegmentCompleted(_, Segment::Next)) => {
            let mut o = Outcome::to(SendStart);
            o.transmit = true;
            o
        }
        (SendStart, Event::SegmentCompleted(_, Segment::AwaitAck(ms))) => {
            Outcome::to(WaitResp).place(Place::Waiting { ms })
        }
        (SendStart, Event::SegmentCompleted(st, Segment::Finished)) => {
            if s.timeout_ms != 0 {
                Outcome::to(WaitResp).place(Place::Waiting { ms: s.timeout_ms })
            } else {
                Outcome::to(Done).place(Place::Nowhere).complete(st)
            }
        }
        // Decided before the completion came (an answer, the last ACK with no response
        // expected, an abort, a cancel): as T8 and T20.
        (EarlyResp, Event::SegmentCompleted(st, _)) => {
            Outcome::to(Done).place(Place::Nowhere).complete(st)
        }
        (Canceled(SendCompletion), Event::SegmentCompleted(..)) => Outcome::to(Done)
            .place(Place::Nowhere)
            .complete(WcStatus::WrFlushErr),
        (SendStart, Event::SegmentDispatchFailed(ms)) => {
            Outcome::to(WaitResp).place(Place::Waiting { ms })
        }
        // T27: an ACK opened the window of a send waiting for one; or a wait the ACK clock
        // shortened expired, and the window goes back N without using a retry.
        (WaitResp, Event::WindowOpened | Event::SegmentExpired(SegTimeout::Probe)) => {
            let mut o = Outcome::to(SendStart).place(Place::InFlight);
            o.transmit = true;
            o
        }
        // The last ACK: with no response expected it ends the send (at the segment's
        // completion if one is in flight); otherwise the wait is now for the response.
        (SendStart, Event::AllAcked) if s.timeout_ms == 0 => Outcome::to(EarlyResp),
        (SendStart, Event::AllAcked) => Outcome::to(SendStart),
        (WaitResp, Event::AllAcked) if s.timeout_ms == 0 => Outcome::to(Done)
            .place(Place::Nowhere)
            .complete(WcStatus::Success),
        (WaitResp, Event::AllAcked) => {
            Outcome::to(WaitResp).place(Place::Waiting { ms: s.timeout_ms })
        }
        // STOP or ABORT: a send waiting ends now; one with a segment in flight ends at its
        // completion, with `REM_ABORT_ERR` (C reports the completion's status and loses the
        // abort, §7.2 item 5; Documentation/behaviour.md §8.14).
        (WaitResp, Event::RmppAborted) => Outcome::to(Done)
            .place(Place::Nowhere)
            .complete(WcStatus::RemAbortErr),
        (SendStart, Event::RmppAborted) => Outcome::to(EarlyResp),
        // A send already decided ignores later ACKs, STOPs and ABORTs.
        (EarlyResp | Canceled(_) | Done, Event::AllAcked | Event::RmppAborted) => {
            Outcome::to(s.state)
        }
        (WaitResp, Event::SegmentExpired(SegTimeout::Resend)) => {
            let mut o = Outcome::to(SendStart).place(Place::InFlight);
            o.retry = true;
            o.transmit = true;
            o
        }
        (WaitResp, Event::SegmentExpired(SegTimeout::NoResponse)) => {
            let mut o = Outcome::to(Done)
                .place(Place::Nowhere)
                .complete(WcStatus::RespTimeoutErr);
            o.retry = true;
            o
        }
        (WaitResp, Event::SegmentExpired(SegTimeout::Fail)) => Outcome::to(Done)
            .place(Place::Nowhere)
            .complete(WcStatus::RespTimeoutErr),
        (Canceled(TimeoutWork), Event::SegmentExpired(_)) => Outcome::to(Done)
            .place(Place::Nowhere)
            .complete(WcStatus::WrFlushErr),

        _ => return Err(Reject::Impossible),
    };
    Ok(o)
}

/// The ends of a send that the engine carries out directly, from where the send waits (the wait
/// queue, or the queue of cancelled sends) to its handler, with no retry, no transmission and
/// no response (`src/engine/agent/direct.rs`): the handler's status and the change of
/// `sol_fc_wait_count`, exactly as [`step`] decides `ev` (then [`Event::Delivered`], which
/// leaves the send [`SendState::Idle`]) — the host tests and the `step` fuzz target check it
/// for every state. `None` where `ev` does anything else: the engine asks [`step`].
///
/// - T13: a waiting send expires with no retry left: `RESP_TIMEOUT_ERR`;
/// - T25: a waiting send is flushed by its agent's unregistration;
/// - T21 (and T25 of the same send): a cancelled send's flush is reported.
pub(crate) fn direct_end(s: SendFacts, ev: Event) -> Option<(WcStatus, Delta)> {
    use CancelWait::TimeoutWork;
    use SendState::{
        Canceled,
        WaitResp, //
    };

    let wait: Delta = if s.fc { -1 } else { 0 };
    match (s.state, ev) {
        (WaitResp, Event::Expired { .. }) if s.retries_left == 0 => {
            Some((WcStatus::RespTimeoutErr, wait))
        }
        (WaitResp, Event::Unregister) => Some((WcStatus::WrFlushErr, wait)),
        (Canceled(TimeoutWork), Event::Expired { .. } | Event::Unregister) => {
            Some((WcStatus::WrFlushErr, 0))
        }
        _ => None,
    }
}

/// A post that goes straight to the transport (T1 with room; the direct path of
/// `src/engine/agent/direct.rs`): the change of `sol_fc_send_count`, exactly as [`step`]
/// decides [`Event::Post`] when it transmits — the host tests and the `step` fuzz target check
/// it for every state. `None` for every other post: held back (T2), or refused.
pub(crate) fn direct_post(s: SendFacts, a: Admission) -> Option<Delta> {
    if s.state != SendState::Idle
        || (s.fc && a.limit != 0 && (!a.backlog_empty || a.in_use >= a.limit))
    {
        return None;
    }
    Some(if s.fc { 1 } else { 0 })
}

/// What a send completion does to a send when the engine carries it out directly
/// ([`direct_completion`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Completed {
    /// T5: the send waits `ms` milliseconds for its response (WAIT_RESP, in the wait queue);
    /// `sol_fc_send_count` and `sol_fc_wait_count` change by `fc_send` and `fc_wait`.
    Wait {
        /// Relative timeout in milliseconds (the send's `timeout_ms`).
        ms: u32,
        /// Change of `sol_fc_send_count`.
        fc_send: Delta,
        /// Change of `sol_fc_wait_count`.
        fc_wait: Delta,
    },
    /// T6 (a send that expects no response and is not flow-controlled), T8 (the response came
    /// first) and T20 (a cancelled send in flight: `WR_FLUSH_ERR`, whatever the transport
    /// said): the send is DONE, out of every queue, and its handler gets `status`.
    Done(WcStatus),
}

/// A send completion with status `st` that the engine carries out directly
/// (`src/engine/agent/direct.rs`), exactly as [`step`] decides [`Event::SendCompleted`] —
/// the host tests and the `step` fuzz target check it for every state. `None` where the
/// completion does anything else (a flow-controlled send that frees its slot, a completion in
/// a state that has none): the engine asks [`step`].
pub(crate) fn direct_completion(s: SendFacts, st: WcStatus) -> Option<Completed> {
    match s.state {
        SendState::SendStart if s.timeout_ms != 0 => Some(Completed::Wait {
            ms: s.timeout_ms,
            fc_send: if s.fc { -1 } else { 0 },
            fc_wait: if s.fc { 1 } else { 0 },
        }),
        SendState::SendStart if !s.fc => Some(Completed::Done(st)),
        SendState::EarlyResp => Some(Completed::Done(st)),
        SendState::Canceled(CancelWait::SendCompletion) => {
            Some(Completed::Done(WcStatus::WrFlushErr))
        }
        _ => None,
    }
}

/// Whether a send is a solicited flow-control send (Documentation/behaviour.md §3.3): it expects a
/// response, it is not an active kernel-RMPP transfer, and its class is CM, SA or a
/// subnet-management class.
pub(crate) fn is_solicited_fc(mgmt_class: u8, timeout_ms: u32, kernel_rmpp_active: bool) -> bool {
    timeout_ms != 0 && !kernel_rmpp_active && matches!(mgmt_class, 0x07 | 0x03 | 0x01 | 0x81)
}

/// The flow-control limit fixed at registration (Documentation/behaviour.md §1.3): 0 without a
/// receive handler; otherwise by the registered class (`None` for a send-only registration).
pub(crate) fn sol_fc_max(
    has_recv_handler: bool,
    reg_class: Option<u8>,
    recv_queue_size: u32,
) -> u32 {
    if !has_recv_handler {
        return 0;
    }
    match reg_class {
        None | Some(0x07) => recv_queue_size / 4,
        Some(0x03) => recv_queue_size / 32,
        Some(0x01 | 0x81) => recv_queue_size.min(512) / 4,
        Some(_) => 0,
    }
}
