// SPDX-License-Identifier: GPL-2.0

//! The one place where a send's state changes ([`Agent::apply`]), and the agent's timer.
//!
//! Every event of every send that no direct path (`direct.rs`) covers goes through `apply`,
//! which asks the pure state machine ([`crate::mad::state::step`]) for the transition and then
//! carries it out: counters, the move between queues ([`super::queues::Queues`]), the TID
//! index, the timer, and the delivery queue.

use super::{
    add_delta,
    hold::{
        self,
        no_due,
        Due,
        BATCH, //
    },
    ms_to_ns,
    retries,
    Agent,
    AgentInner,
    Q_BACKLOG,
    Q_CANCEL,
    Q_DONE,
    Q_FLIGHT, //
};
use crate::{
    engine::{
        agent::Queue,
        send::{
            RecordState,
            SendRecord,
            SendRef, //
        },
    },
    mad::state::{
        self,
        Event,
        Outcome,
        Place,
        Recv,
        Reject,
        SendState,
        WcStatus, //
    },
    sys::{
        sched,
        workqueue, //
    },
};
use kernel::{
    prelude::*,
    sync::Arc,
    time::msecs_to_jiffies, //
};

/// Where [`Agent::apply_to`] puts a send whose final status it decides (unless a receive
/// handler of its response runs: the receive path takes it once that returns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Settle {
    /// The delivery queue, whose sends the agent's work delivers.
    Queue,
    /// Nowhere, when no status decided earlier waits in the delivery queue: the caller takes it
    /// before it drops the lock ([`Agent::left_to_caller`]), into the batch it delivers after
    /// the hold.
    Caller,
}

impl Agent {
    /// Applies `ev` once to every send in the queues `qs`, queue by queue in the order given
    /// and in key order within each; refusals are ignored. Each send present when its queue is
    /// reached is visited once, even when `ev` moves it to a later queue or leaves it where it
    /// is; a send that `ev` leaves in a list queue (one whose keys only grow: a cancelled send
    /// in flight) goes to its end. The lock is taken for at most [`BATCH`] sends at a time,
    /// and a hold never walks past sends it does not visit, so interrupts are never off for
    /// longer than a batch takes, whatever the number of sends. With `deliver`, the handlers
    /// of the sends whose status this decides are called after each hold, in this thread
    /// (unregistration); without, by the agent's work. Process context only.
    pub(super) fn apply_to_all(self: &Arc<Self>, qs: &[Queue], ev: Event, deliver: bool) {
        let settle = if deliver {
            Settle::Caller
        } else {
            Settle::Queue
        };
        for &q in qs {
            // A list is walked from its head, up to the send that was last when the walk
            // began (`stop`; a send the walk leaves there goes past it); a tree from past the
            // send visited last (`bound`): neither searches through sends already visited.
            let mut walk = None;
            let mut bound = (i64::MIN, 0);
            let mut more = true;
            while more {
                let mut due = no_due();
                let mut taken = 0u32;
                let mut inner = self.lock();
                let mut n = 0u32;
                more = false;
                let (list, stop) = *walk
                    .get_or_insert_with(|| (inner.queues.is_list(q), inner.queues.last_key(q)));
                let mut next = if list {
                    inner.queues.first_entry(q)
                } else {
                    inner.queues.first_entry_from(q, bound)
                };
                while let Some((k, rec)) = next {
                    if list && stop.is_none_or(|s| k > s) {
                        break;
                    }
                    if n == BATCH {
                        more = true;
                        break;
                    }
                    // The send after this one in a tree, before `ev` moves this one.
                    next = (!list).then(|| inner.queues.next_entry(q, &rec)).flatten();
                    Self::with_state(&mut inner, &rec, |inner, state| {
                        self.visit(inner, &rec, state, ev, settle, (&mut due, &mut taken));
                        if list && state.queue == Some(q) {
                            inner.queues.push(&rec, state, q);
                        }
                    });
                    if list {
                        next = inner.queues.first_entry(q);
                    }
                    bound = (k.0, k.1.saturating_add(1));
                    n = n.saturating_add(1);
                }
                hold::note_batch(n);
                drop(inner);
                self.deliver_batch(&mut due, taken);
                if more {
                    sched::cond_resched();
                }
            }
        }
    }

    /// [`Agent::apply_to_all`]'s step on one send: `ev` applied, directly where it can be
    /// when its caller delivers ([`Settle::Caller`]), and the send taken into the hold's
    /// batch `out` (sends, and how many) if its status was decided.
    fn visit(
        self: &Arc<Self>,
        inner: &mut AgentInner,
        rec: &SendRef,
        state: &mut RecordState,
        ev: Event,
        settle: Settle,
        out: (&mut [Due], &mut u32),
    ) {
        let (due, taken) = out;
        // The caller holds a reference of its own: the queue's, handed back, goes at once.
        if settle == Settle::Caller && self.end_direct(inner, rec, state, ev, due, taken).is_some()
        {
            return;
        }
        if self.apply_to(inner, rec, state, ev, settle).is_ok() && Self::left_to_caller(state) {
            self.take_into(inner, rec, state, due, taken);
        }
    }

    /// Runs `f` on the state of `rec` while giving it the rest of the agent's state too.
    pub(super) fn with_state<R>(
        inner: &mut AgentInner,
        rec: &SendRecord,
        f: impl FnOnce(&mut AgentInner, &mut RecordState) -> R,
    ) -> R {
        let mut state = core::mem::take(rec.state.access_mut(inner));
        let r = f(inner, &mut state);
        *rec.state.access_mut(inner) = state;
        r
    }

    /// Makes sure the agent's work runs no later than `due_ns`.
    pub(super) fn arm(self: &Arc<Self>, inner: &mut AgentInner, due_ns: i64) {
        if inner.dead {
            // Unregistration delivers what is due itself.
            self.wake(inner);
            return;
        }
        if inner.armed_ns.is_some_and(|a| a <= due_ns) {
            return;
        }
        inner.armed_ns = Some(due_ns);
        let delay_ms = due_ns
            .saturating_sub(self.now_ns())
            .max(0)
            .saturating_add(999_999)
            / 1_000_000;
        let delay = msecs_to_jiffies(u32::try_from(delay_ms).unwrap_or(u32::MAX));
        workqueue::rearm::<Agent, 0>(&self.engine.wq, self, delay);
    }

    /// Makes sure the agent's work runs as soon as it can. Cheaper than `arm(inner, now)` when the
    /// work is queued already to run immediately, as it is for every send after the first
    /// of a batch of cancels or completions: no clock read then.
    pub(super) fn arm_now(self: &Arc<Self>, inner: &mut AgentInner) {
        if inner.dead {
            // Unregistration delivers what is due itself.
            self.wake(inner);
            return;
        }
        if inner.armed_ns == Some(i64::MIN) {
            return;
        }
        // `i64::MIN` is before every due time: `arm` then leaves the work to run at once.
        inner.armed_ns = Some(i64::MIN);
        workqueue::rearm::<Agent, 0>(&self.engine.wq, self, 0);
    }

    /// Keeps the timer no later than the head of the wait queue (Documentation/behaviour.md §3.2).
    pub(super) fn arm_head(self: &Arc<Self>, inner: &mut AgentInner) {
        if let Some(due) = inner.queues.wait_head() {
            self.arm(inner, due);
        }
    }

    /// Applies `ev` to the send `rec`, a send whose final status this decides going to the
    /// delivery queue ([`Settle::Queue`]).
    pub(super) fn apply(
        self: &Arc<Self>,
        inner: &mut AgentInner,
        rec: &SendRef,
        state: &mut RecordState,
        ev: Event,
    ) -> Result<Outcome, Reject> {
        self.apply_to(inner, rec, state, ev, Settle::Queue)
    }

    /// Applies `ev` to the send `rec`: the one place where a send's state changes. A send whose
    /// final status this decides goes where `settle` says.
    pub(super) fn apply_to(
        self: &Arc<Self>,
        inner: &mut AgentInner,
        rec: &SendRef,
        state: &mut RecordState,
        ev: Event,
        settle: Settle,
    ) -> Result<Outcome, Reject> {
        // A send that opted into other retry rules than the C layer's asks them around the
        // step (src/mad/retry.rs); the others read no clock here.
        let retry = self.retry_step(state);
        let facts = retry.map_or(state.facts, |r| r.facts(state, ev));
        let mut outcome = state::step(facts, ev)?;
        let wait = retry.and_then(|r| {
            let wait_ns = r.after(state, ev, &mut outcome)?;
            Some((r.now_ns, wait_ns))
        });
        let was = state.facts.state;
        Self::count_step(inner, state, &outcome);
        self.move_to(inner, rec, state, outcome.place, wait);
        if was != SendState::Queued && outcome.next == SendState::Queued {
            // Held back with a deadline: the work must look at it then.
            if let Some(d) = retries::backlog_deadline(state) {
                self.arm(inner, d);
            }
        }
        if outcome.next == SendState::Done || outcome.next == SendState::Idle {
            inner.queues.untrack(rec);
        }
        if let Some(status) = outcome.complete {
            self.settle(inner, rec, state, status, outcome.recv, settle);
        }
        Ok(outcome)
    }

    /// The counters and facts that the step `outcome` of the send whose state is `state` changes:
    /// flow control, the backlog, retries, a stored timeout, and the new state.
    fn count_step(inner: &mut AgentInner, state: &mut RecordState, outcome: &Outcome) {
        let was = state.facts.state;
        inner.fc_send = add_delta(inner.fc_send, outcome.fc_send);
        inner.fc_wait = add_delta(inner.fc_wait, outcome.fc_wait);
        let deadline = retries::backlog_deadline(state).is_some();
        if was == SendState::Queued && outcome.next != SendState::Queued {
            inner.backlog = inner.backlog.saturating_sub(1);
            if deadline {
                inner.backlog_deadlines = inner.backlog_deadlines.saturating_sub(1);
            }
        }
        if outcome.next == SendState::Queued && was != SendState::Queued {
            inner.backlog = inner.backlog.saturating_add(1);
            inner.stats.backlogged = inner.stats.backlogged.saturating_add(1);
            if deadline {
                inner.backlog_deadlines = inner.backlog_deadlines.saturating_add(1);
            }
        }
        if outcome.retry {
            state.facts.retries_left = state.facts.retries_left.saturating_sub(1);
            if let Some(b) = state.body.as_mut() {
                b.retries = b.retries.saturating_add(1);
            }
            inner.stats.retried = inner.stats.retried.saturating_add(1);
        }
        if let Some(t) = outcome.store_timeout {
            state.facts.timeout_ms = t;
            if let Some(b) = state.body.as_mut() {
                b.timeout_ms = i32::try_from(t).unwrap_or(i32::MAX);
            }
        }
        state.facts.state = outcome.next;
        if matches!(outcome.next, SendState::Canceled(_)) && !matches!(was, SendState::Canceled(_))
        {
            // A cancel wins over a status decided before the completion it waits for (an RMPP
            // abort during a segment in flight): the send reports the flush.
            state.status = None;
        }
    }

    /// Moves the send `rec` to the queue `place` names, at the end of its key order. A wait
    /// the retry rules decided (`wait`: the time they read, and the wait in nanoseconds)
    /// replaces the one `place` names.
    // Inlined into both callers (`apply_to`, and the direct send completion): an outlined call
    // costs a modify 27 instructions.
    #[inline(always)]
    pub(super) fn move_to(
        self: &Arc<Self>,
        inner: &mut AgentInner,
        rec: &SendRef,
        state: &mut RecordState,
        place: Place,
        wait: Option<(i64, i64)>,
    ) {
        // The clock is read only where a due time needs it: a post, a send completion and a
        // delivery need none, and a clock read is not free (under emulation least of all).
        match place {
            Place::Unchanged => {}
            Place::Nowhere => inner.queues.unqueue(rec, state),
            Place::InFlight => {
                inner.queues.push(rec, state, Q_FLIGHT);
            }
            Place::Waiting { ms } => {
                let (now, wait_ns) = wait.unwrap_or_else(|| (self.now_ns(), ms_to_ns(ms)));
                #[cfg(rmad_test)]
                inner.stats.waits.note(wait_ns);
                let due = now.saturating_add(wait_ns);
                inner.queues.wait(rec, state, due);
                self.arm_head(inner);
            }
            Place::Backlog => {
                inner.queues.push(rec, state, Q_BACKLOG);
            }
            Place::CancelQueue => {
                inner.queues.push(rec, state, Q_CANCEL);
                self.arm_now(inner);
            }
        }
    }

    /// The send `rec`'s final status is `status`: counted, and the send put where its send
    /// handler will be called from. A matched response delivers inline, after the receive
    /// handler (`recv`); a send decided in a hold that delivers what it decides goes to that
    /// hold's batch if nothing decided earlier waits ([`Settle::Caller`]); everything else
    /// through the delivery queue.
    pub(super) fn settle(
        self: &Arc<Self>,
        inner: &mut AgentInner,
        rec: &SendRef,
        state: &mut RecordState,
        status: WcStatus,
        recv: Recv,
        settle: Settle,
    ) {
        if state.status.is_none() {
            state.status = Some((status, 0));
        }
        match status {
            WcStatus::RespTimeoutErr => {
                inner.stats.timed_out = inner.stats.timed_out.saturating_add(1)
            }
            WcStatus::WrFlushErr => inner.stats.cancelled = inner.stats.cancelled.saturating_add(1),
            _ => {}
        }
        if recv == Recv::Deliver {
            return;
        }
        if state.in_recv {
            // INVARIANT: The receive path takes it once its receive handler returned
            // (`Agent::deliver_after_response`).
            inner.queues.unqueue(rec, state);
        } else if settle == Settle::Caller && inner.queues.is_empty(Q_DONE) {
            // INVARIANT: The caller takes it before it drops the lock.
            inner.queues.unqueue(rec, state);
        } else {
            inner.queues.push(rec, state, Q_DONE);
            self.arm_now(inner);
        }
    }
}
