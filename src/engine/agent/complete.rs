// SPDX-License-Identifier: GPL-2.0

//! Completions: send completions from the transport, the agent's work (timeouts, retries, reporting
//! of cancelled sends; `timeout_sends`, Documentation/behaviour.md §2.4.5) and the delivery of send
//! handlers.

use super::{
    apply::Settle,
    hold::{
        self,
        no_due,
        Due,
        BATCH, //
    },
    rmpp_send,
    Agent,
    AgentInner,
    Queue,
    Q_CANCEL,
    Q_DONE,
    Q_WAIT, //
};
use crate::{
    engine::send::{
        BodyBox,
        RecordState,
        SendBuf,
        SendCompletion,
        SendRef, //
    },
    mad::state::{
        Event,
        SendState,
        WcStatus, //
    },
    sys::{
        rbtree::TreeRef,
        sched,
        trace, //
    },
};
use kernel::{
    prelude::*,
    sync::Arc, //
};

impl Agent {
    /// The transport's report that transmission `gen` of `rec` completed with `status`.
    pub(crate) fn send_completed(rec: &SendRef, gen: u64, status: WcStatus, vendor_err: u32) {
        let this = &rec.agent;
        let mut inner = this.lock();
        Self::with_state(&mut inner, rec, |inner, state| {
            if state.gen != gen {
                return;
            }
            this.trace_send(trace::Ev::SendCompletion, state, status.code());
            if this.complete_direct(inner, rec, state, status, vendor_err) {
                return;
            }
            // A segmented send in flight asks its window what comes next (§2.8).
            let ev = match state.facts.state {
                SendState::SendStart => rmpp_send::after_segment(state, status, this.now_ns())
                    .map(|seg| Event::SegmentCompleted(status, seg)),
                _ => None,
            }
            .unwrap_or(Event::SendCompleted(status));
            let decided = state.status.is_some();
            match this.apply(inner, rec, state, ev) {
                Ok(outcome) => {
                    if outcome.complete.is_some() && !decided {
                        // Statuses decided at a send completion carry its vendor error; one
                        // decided before (an RMPP abort) stands.
                        state.status = outcome.complete.map(|s| (s, vendor_err));
                    }
                    if outcome.transmit {
                        this.send_segment(inner, rec, state);
                    }
                    if outcome.frees_fc_slot {
                        this.dispatch_some(inner);
                    }
                }
                Err(_) => pr_warn!(
                    "send completion for a send in state {:?}\n",
                    state.facts.state
                ),
            }
        });
    }

    /// Takes the send `rec`, whose final status is decided, out of the indexes and returns its
    /// body and completion for the send handler; `None` if it is not due.
    fn take_due(
        self: &Arc<Self>,
        inner: &mut AgentInner,
        rec: &SendRef,
    ) -> Option<(BodyBox, SendCompletion)> {
        Self::with_state(inner, rec, |inner, state| {
            self.take_decided(inner, rec, state)
        })
    }

    /// [`Agent::take_due`] on the state `state` of `rec`, which the caller has out already.
    pub(super) fn take_decided(
        self: &Arc<Self>,
        inner: &mut AgentInner,
        rec: &SendRef,
        state: &mut RecordState,
    ) -> Option<(BodyBox, SendCompletion)> {
        inner.queues.unqueue(rec, state);
        inner.queues.untrack(rec);
        self.apply(inner, rec, state, Event::Delivered).ok()?;
        let (status, vendor_err) = state.status.take()?;
        let wc = SendCompletion {
            status,
            vendor_err,
            post: state.gen,
        };
        let body = state.body.take()?;
        // The handler is called right after this hold; an internal RMPP message has none.
        if !body.internal {
            self.trace_send(trace::Ev::SendHandler, state, status.code());
            inner.stats.completed = inner.stats.completed.saturating_add(1);
        }
        Some((body, wc))
    }

    /// Whether `apply_to` just left the send whose state is `state` to its caller for delivery
    /// ([`Settle::Caller`]): its status is decided, it is in no queue, and no receive
    /// handler of its response runs (the receive path delivers it then).
    pub(super) fn left_to_caller(state: &RecordState) -> bool {
        state.facts.state == SendState::Done && state.queue.is_none() && !state.in_recv
    }

    /// Takes the send `rec` that `apply` left to its caller into `due` at `*taken`, the next
    /// free place, for delivery after the hold.
    pub(super) fn take_into(
        self: &Arc<Self>,
        inner: &mut AgentInner,
        rec: &SendRef,
        state: &mut RecordState,
        due: &mut [Due],
        taken: &mut u32,
    ) {
        let Some(slot) = usize::try_from(*taken).ok().and_then(|i| due.get_mut(i)) else {
            // Not reachable: a hold decides at most a batch. It waits for the agent's work.
            inner.queues.push(rec, state, Q_DONE);
            self.arm_now(inner);
            return;
        };
        if let Some((body, wc)) = self.take_decided(inner, rec, state) {
            *slot = Some((body, wc));
            *taken = taken.saturating_add(1);
        }
    }

    /// Calls the handlers of the first `n` sends of `due`, taken out under the lock just
    /// dropped, one after the other, and counts them returned.
    pub(super) fn deliver_batch(self: &Arc<Self>, due: &mut [Due], n: u32) {
        if n == 0 {
            return;
        }
        self.in_handler_then(
            || {
                for (body, wc) in due.iter_mut().filter_map(Option::take) {
                    self.call_send_handler(body, wc);
                }
            },
            |inner, ()| self.handlers_returned(inner, n),
        );
    }

    /// Calls the send handler (no lock held): the buffer goes back to the client.
    fn call_send_handler(self: &Arc<Self>, body: BodyBox, wc: SendCompletion) {
        let buf = SendBuf { body };
        if buf.body.internal {
            // An RMPP ACK, STOP or ABORT of the agent's own (§2.10.8): nobody is told.
            drop(buf);
            return;
        }
        match &self.send_handler {
            Some(h) => h.send_done(self, buf, wc),
            None => drop(buf),
        }
    }

    /// Counts `n` send handlers as returned, under the lock `inner`.
    pub(super) fn handlers_returned(&self, inner: &mut AgentInner, n: u32) {
        inner.outstanding = inner.outstanding.saturating_sub(n);
        self.wake(inner);
    }

    /// The receive handler of a response matched to post `gen` of `rec` returned: if the
    /// send's status was decided (at the match, or meanwhile), calls its send handler now,
    /// from inside the same handler frame ([`Agent::in_handler`]); returns how many handlers
    /// it called (0 or 1), for the caller to count as returned. Otherwise the send's
    /// completion delivers it as usual.
    pub(super) fn deliver_after_response(self: &Arc<Self>, rec: &SendRef, gen: u64) -> u32 {
        let taken = {
            let mut inner = self.lock();
            Self::with_state(&mut inner, rec, |inner, state| {
                if state.gen != gen {
                    return None;
                }
                state.in_recv = false;
                if !Self::left_to_caller(state) {
                    return None;
                }
                self.take_decided(inner, rec, state)
            })
        };
        let Some((body, wc)) = taken else {
            return 0;
        };
        self.call_send_handler(body, wc);
        1
    }

    /// Delivers every send whose handler is due, in order: up to [`BATCH`] are taken out under
    /// one hold of the lock, then their handlers are called one after the other without it.
    pub(super) fn deliver_due(self: &Arc<Self>) {
        loop {
            let mut due = no_due();
            let mut n = 0u32;
            {
                let mut inner = self.lock();
                for slot in due.iter_mut() {
                    let Some(rec) = inner.queues.first(Q_DONE) else {
                        break;
                    };
                    match self.take_due(&mut inner, &rec) {
                        Some((body, wc)) => {
                            *slot = Some((body, wc));
                            n = n.saturating_add(1);
                        }
                        // Not reachable: a send in the delivery queue is due. Stop rather than
                        // spin on it.
                        None => break,
                    }
                }
                hold::note_batch(n);
            }
            if n == 0 {
                return;
            }
            self.deliver_batch(&mut due, n);
            sched::cond_resched();
        }
    }

    /// The agent's work: expire waiting sends (in expiry order), report cancelled ones, end the
    /// backlogged sends past their deadline, move the backlog, re-arm the timer, then call the
    /// handlers that are due (`timeout_sends`, Documentation/behaviour.md §2.4.5). Each step
    /// takes the lock for at most [`BATCH`] sends at a time.
    pub(super) fn run_work(self: &Arc<Self>) {
        self.lock().armed_ns = None;
        let now = self.now_ns();
        while self.work_batch(now, Q_WAIT) {
            sched::cond_resched();
        }
        while self.work_batch(now, Q_CANCEL) {
            sched::cond_resched();
        }
        if self.kernel_rmpp() {
            self.rmpp_expire(now);
        }
        // Sends held back past their deadline end before the backlog moves.
        let backlog_ahead = self.expire_backlog(now);
        loop {
            // The guard is dropped at the end of this statement, before the yield.
            let more = self.dispatch_backlog(&mut self.lock(), BATCH);
            if !more {
                break;
            }
            sched::cond_resched();
        }
        {
            let mut inner = self.lock();
            if !inner.dead {
                self.arm_head(&mut inner);
                if let Some(d) = backlog_ahead {
                    self.arm(&mut inner, d);
                }
            }
        }
        self.deliver_due();
    }

    /// One hold's worth of the agent's work on queue `q`: up to [`BATCH`] waiting sends that
    /// expired by `now` (retransmitted or timed out), or cancelled sends reported; the sends
    /// whose status this decides are delivered right after the hold (unless statuses decided
    /// earlier wait: then after those). Returns whether there may be more.
    fn work_batch(self: &Arc<Self>, now: i64, q: Queue) -> bool {
        let mut due = no_due();
        let mut taken = 0u32;
        let mut inner = self.lock();
        let mut n = 0u32;
        let mut more = false;
        while !inner.dead {
            let Some((k, first)) = inner.queues.first_entry_ptr(q) else {
                break;
            };
            if q == Q_WAIT && k.0 > now {
                break;
            }
            if n == BATCH {
                more = true;
                break;
            }
            // SAFETY: The queue holds a reference of the send, which keeps it alive while it
            // is there; it leaves the queue below only by `end_direct`, which hands that
            // reference back, or after `expire` took one of its own. Either is returned by
            // the closure, so it outlives `with_state`'s last touch of the send.
            let send = unsafe { first.as_ref() };
            let _kept = Self::with_state(&mut inner, send, |inner, state| {
                // A segmented send that waits asks its window (go-back-N, §2.8 "Retry").
                let waiting = state.facts.state == SendState::WaitResp;
                let ev = match state.seg_mut() {
                    Some(s) if waiting => {
                        Event::SegmentExpired(rmpp_send::on_expiry(&mut s.window, &mut s.clock))
                    }
                    _ => Event::Expired {
                        backlog_empty: q == Q_CANCEL || inner.backlog == 0,
                    },
                };
                // The common ends take no reference of the send: the queue's comes back.
                if let Some(held) = self.end_direct(inner, send, state, ev, &mut due, &mut taken) {
                    return held;
                }
                // SAFETY: The queue holds a reference of the send (see above) while this one
                // is taken.
                let rec: SendRef = unsafe { <SendRef as TreeRef>::borrow(first.as_ptr()) }.into();
                self.expire(inner, &rec, state, ev, (&mut due, &mut taken));
                rec
            });
            n = n.saturating_add(1);
        }
        hold::note_batch(n);
        drop(inner);
        self.deliver_batch(&mut due, taken);
        more
    }

    /// The general path of [`Agent::work_batch`] for the send `rec` (state `state`) and its
    /// expiry `ev`: the state table's step, a retransmission or the send taken into the hold's
    /// batch `out` (sends, and how many) if its status was decided.
    fn expire(
        self: &Arc<Self>,
        inner: &mut AgentInner,
        rec: &SendRef,
        state: &mut RecordState,
        ev: Event,
        out: (&mut [Due], &mut u32),
    ) {
        let (due, taken) = out;
        if let Ok(outcome) = self.apply_to(inner, rec, state, ev, Settle::Caller) {
            if outcome.retry {
                self.trace_send(trace::Ev::Retry, state, 0);
            }
            if outcome.complete == Some(WcStatus::RespTimeoutErr) {
                self.trace_send(trace::Ev::Timeout, state, WcStatus::RespTimeoutErr.code());
            }
            if outcome.transmit {
                match self.transmit(inner, state, false) {
                    Ok(handed) => self.trace_sent(state, handed),
                    Err(e) => {
                        if e == ENODEV {
                            // The device went away between two batches of its removal's
                            // cancels: flushed like the rest of them.
                            state.status = Some((WcStatus::WrFlushErr, 0));
                        }
                        let _ = self.apply_to(
                            inner,
                            rec,
                            state,
                            Event::RetransmitFailed,
                            Settle::Caller,
                        );
                    }
                }
            }
        }
        if Self::left_to_caller(state) {
            self.take_into(inner, rec, state, due, taken);
        }
    }

    /// Moves a batch of the backlog after a flow-control slot was freed; if more could move,
    /// the agent's work moves the rest.
    pub(super) fn dispatch_some(self: &Arc<Self>, inner: &mut AgentInner) {
        if self.dispatch_backlog(inner, BATCH) {
            let now = self.now_ns();
            self.arm(inner, now);
        }
    }
}
