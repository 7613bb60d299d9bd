// SPDX-License-Identifier: GPL-2.0

//! The direct paths: the common ends of a send carried out in straight-line code.
//!
//! [`Agent::apply_to`] is the general transition: it asks the state table
//! ([`crate::mad::state::step`]) and then carries out whatever the outcome says, and a send
//! whose status it decides goes through it a second time for its delivery. The ends that
//! [`state::direct_end`] names — an expiry with no retry left, the report of a cancelled
//! send's flush, and an unregistration's flush of a waiting or cancelled send — need only a
//! fixed part of that: unlink the send from its queue and from the TID index, count, and hand
//! it to the handler's batch. So does a post that goes straight to the transport
//! ([`state::direct_post`]): count, and link the send at the end of the in-flight queue; and
//! a send completion ([`state::direct_completion`]): count, and move the send to the wait
//! queue, or decide its status. The table stays the specification: `direct_end`,
//! `direct_post` and `direct_completion` are checked against `step` for every state on the
//! host (`tests/host`: `direct_ends_equal_the_table`, `direct_posts_equal_the_table`,
//! `direct_completions_equal_the_table` and the `step` fuzz target), and a send these paths
//! do not cover in every respect takes the general one.

use super::{
    add_delta,
    apply::Settle,
    hold::Due,
    Agent,
    AgentInner,
    Q_DONE,
    Q_FLIGHT, //
};
use crate::{
    engine::send::{
        RecordState,
        SendCompletion,
        SendRecord,
        SendRef, //
    },
    mad::state::{
        self,
        Admission,
        Completed,
        Event,
        Place,
        Recv,
        SendState,
        WcStatus, //
    },
    sys::trace,
};
use kernel::sync::Arc;

impl Agent {
    /// Ends the send `rec` (state `state`) for `ev` straight into `due` at `*taken`, the next
    /// free place, for delivery after this hold, when `ev` is one of the ends of
    /// [`state::direct_end`]: the same counters, traces and queue moves as
    /// [`Agent::apply_to`] with [`super::apply::Settle::Caller`] followed by
    /// [`Agent::take_into`]. Returns `None` if it did not (nothing changed: the caller takes
    /// the general path); otherwise the reference of the send that its queue held, which the
    /// caller keeps for as long as it touches the send (its own need not be taken: see
    /// [`Agent::work_batch`]). Every direct end is of a send in a queue.
    pub(super) fn end_direct(
        self: &Arc<Self>,
        inner: &mut AgentInner,
        rec: &SendRecord,
        state: &mut RecordState,
        ev: Event,
        due: &mut [Due],
        taken: &mut u32,
    ) -> Option<SendRef> {
        let (status, fc_wait) = state::direct_end(state.facts, ev)?;
        let body = state.body.as_ref()?;
        // The general path: retry rules beyond the C layer's (they read the clock around the
        // step), a segmented send (its window decides), a receive handler of its response
        // still running, a status decided earlier (it stands), or sends already waiting in
        // the delivery queue (this one must be delivered after them).
        if !body.retry.is_c_layer()
            || body.seg.is_some()
            || state.in_recv
            || state.status.is_some()
            || state.queue.is_none()
            || !inner.queues.is_empty(Q_DONE)
        {
            return None;
        }
        let slot = usize::try_from(*taken).ok().and_then(|i| due.get_mut(i))?;
        // Not `None`: the send is in a queue (checked above), which holds a reference of it.
        let held = inner.queues.take_out(rec, state)?;
        inner.queues.untrack(rec);
        inner.fc_wait = add_delta(inner.fc_wait, fc_wait);
        // Delivered right after this hold: the send is the client's again (DONE, then IDLE).
        state.facts.state = SendState::Idle;
        if status == WcStatus::RespTimeoutErr {
            inner.stats.timed_out = inner.stats.timed_out.saturating_add(1);
            self.trace_send(trace::Ev::Timeout, state, status.code());
        } else {
            inner.stats.cancelled = inner.stats.cancelled.saturating_add(1);
        }
        let Some(body) = state.body.take() else {
            return Some(held);
        };
        if !body.internal {
            self.trace_send(trace::Ev::SendHandler, state, status.code());
            inner.stats.completed = inner.stats.completed.saturating_add(1);
        }
        *slot = Some((
            body,
            SendCompletion {
                status,
                vendor_err: 0,
                post: state.gen,
            },
        ));
        *taken = taken.saturating_add(1);
        Some(held)
    }

    /// Carries out the post of `rec` (state `state`, just begun) with admission `adm` when it
    /// goes straight to the transport ([`state::direct_post`]): the same counters and queue
    /// move as [`Agent::apply`] with [`Event::Post`]. Returns whether it did; if not, nothing
    /// changed and the caller takes the general path.
    pub(super) fn post_direct(
        inner: &mut AgentInner,
        rec: &SendRef,
        state: &mut RecordState,
        adm: Admission,
    ) -> bool {
        // Retry rules beyond the C layer's start their clock at the post: the general path.
        if Self::asks_retry_rules(state) {
            return false;
        }
        let Some(fc_send) = state::direct_post(state.facts, adm) else {
            return false;
        };
        inner.fc_send = add_delta(inner.fc_send, fc_send);
        state.facts.state = SendState::SendStart;
        inner.queues.push(rec, state, Q_FLIGHT);
        true
    }

    /// Carries out the send completion of `rec` (state `state`) with status `st` and
    /// `vendor_err` when [`state::direct_completion`] covers it: the same counters, queue moves
    /// and timer as [`Agent::apply`] with [`Event::SendCompleted`], and the status stored as
    /// [`Agent::send_completed`] stores it. Returns whether it did; if not, nothing changed and
    /// the caller takes the general path.
    pub(super) fn complete_direct(
        self: &Arc<Self>,
        inner: &mut AgentInner,
        rec: &SendRef,
        state: &mut RecordState,
        st: WcStatus,
        vendor_err: u32,
    ) -> bool {
        // The general path: retry rules beyond the C layer's (they decide the wait), a
        // segmented send (its window decides), a status decided earlier (an RMPP abort: it
        // stands), or a receive handler of the send's response still running.
        if Self::asks_retry_rules(state)
            || state.body.as_ref().is_none_or(|b| b.seg.is_some())
            || state.status.is_some()
            || state.in_recv
        {
            return false;
        }
        match state::direct_completion(state.facts, st) {
            Some(Completed::Wait {
                ms,
                fc_send,
                fc_wait,
            }) => {
                inner.fc_send = add_delta(inner.fc_send, fc_send);
                inner.fc_wait = add_delta(inner.fc_wait, fc_wait);
                state.facts.state = SendState::WaitResp;
                self.move_to(inner, rec, state, Place::Waiting { ms }, None);
                true
            }
            Some(Completed::Done(status)) => {
                state.facts.state = SendState::Done;
                inner.queues.untrack(rec);
                state.status = Some((status, vendor_err));
                self.settle(inner, rec, state, status, Recv::None, Settle::Queue);
                true
            }
            None => false,
        }
    }
}
