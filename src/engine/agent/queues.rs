// SPDX-License-Identifier: GPL-2.0

//! The agent's indexes and the one place where a send's state changes ([`Agent::apply`]).
//!
//! Every event of every send goes through `apply`, which asks the pure state machine
//! ([`crate::mad::state::step`]) for the transition and then carries it out: counters, the move
//! between queues of the queue tree, the TID index, the timer, and the delivery queue.

use super::*;

impl Agent {
    /// Applies `ev` once to every send in the queues `qs`, queue by queue in the order given
    /// and in key order within each; refusals are ignored. Each send present when its queue is
    /// reached is visited once, even when `ev` moves it to a later queue or leaves it where it
    /// is. The lock is taken for at most [`BATCH`] sends at a time, so interrupts are never off
    /// for longer than a batch takes, whatever the number of sends. Process context only.
    pub(super) fn apply_to_all(self: &Arc<Self>, qs: &[u8], ev: Event) {
        for &q in qs {
            let mut bound = (q, i64::MIN, 0);
            let mut more = true;
            while more {
                let mut g = self.lock();
                let mut n = 0u32;
                more = false;
                while let Some((k, rec)) = first_entry_from(&g.queues, bound, q) {
                    if n == BATCH {
                        more = true;
                        break;
                    }
                    Self::with_state(&mut g, &rec, |g, st| {
                        let _ = self.apply(g, &rec, st, ev);
                    });
                    bound = (k.0, k.1, k.2.saturating_add(1));
                    n = n.saturating_add(1);
                }
                hold::note_batch(n);
                drop(g);
                if more {
                    sched::cond_resched();
                }
            }
        }
    }

    /// Runs `f` on the state of `rec` while giving it the rest of the agent's state too.
    pub(super) fn with_state<R>(
        g: &mut AgentInner,
        rec: &SendRecord,
        f: impl FnOnce(&mut AgentInner, &mut RecordState) -> R,
    ) -> R {
        let mut st = core::mem::take(rec.state.access_mut(g));
        let r = f(g, &mut st);
        *rec.state.access_mut(g) = st;
        r
    }

    /// A fresh secondary key.
    pub(super) fn next_seq(g: &mut AgentInner) -> u64 {
        g.seq = g.seq.wrapping_add(1);
        g.seq
    }

    /// Takes `rec` out of the queue tree, keeping its node in the body.
    pub(super) fn unqueue(g: &mut AgentInner, st: &mut RecordState) {
        if let Some(k) = st.qkey.take() {
            if let Some(node) = g.queues.remove_node(&k) {
                if let Some(body) = st.body.as_mut() {
                    body.qslot = Some(node.into_reservation());
                }
            }
        }
    }

    /// Puts `rec` in the queue tree under `key`, moving it from where it was.
    pub(super) fn enqueue(
        g: &mut AgentInner,
        rec: &Arc<SendRecord>,
        st: &mut RecordState,
        key: QKey,
    ) {
        Self::unqueue(g, st);
        let Some(slot) = st.body.as_mut().and_then(|b| b.qslot.take()) else {
            // Only reachable if the invariant is broken; keep the send findable by failing
            // loudly rather than losing it.
            pr_err!("send has no queue node\n");
            return;
        };
        g.queues.insert(slot.into_node(key, rec.clone()));
        st.qkey = Some(key);
    }

    /// Removes `rec` from the TID index.
    pub(super) fn untrack(g: &mut AgentInner, st: &mut RecordState) {
        if let Some(k) = st.tkey.take() {
            if let Some(node) = g.tids.remove_node(&k) {
                if let Some(body) = st.body.as_mut() {
                    body.tslot = Some(node.into_reservation());
                }
            }
        }
    }

    /// Makes sure the agent's work runs no later than `due_ns`.
    pub(super) fn arm(self: &Arc<Self>, g: &mut AgentInner, due_ns: i64) {
        if g.dead {
            // Unregistration delivers what is due itself.
            self.idle.notify_all();
            return;
        }
        if g.armed_ns.is_some_and(|a| a <= due_ns) {
            return;
        }
        g.armed_ns = Some(due_ns);
        let delay_ms = due_ns
            .saturating_sub(self.now_ns())
            .max(0)
            .saturating_add(999_999)
            / 1_000_000;
        let delay = msecs_to_jiffies(u32::try_from(delay_ms).unwrap_or(u32::MAX));
        workqueue::rearm::<Agent, 0>(&self.engine.wq, self, delay);
    }

    /// Makes sure the agent's work runs as soon as it can. Cheaper than `arm(g, now)` when the
    /// work is queued already to run immediately, as it is for every send after the first
    /// of a batch of cancels or completions: no clock read then.
    pub(super) fn arm_now(self: &Arc<Self>, g: &mut AgentInner) {
        if g.dead {
            // Unregistration delivers what is due itself.
            self.idle.notify_all();
            return;
        }
        if g.armed_ns == Some(i64::MIN) {
            return;
        }
        // `i64::MIN` is before every due time: `arm` then leaves the work to run at once.
        g.armed_ns = Some(i64::MIN);
        workqueue::rearm::<Agent, 0>(&self.engine.wq, self, 0);
    }

    /// Keeps the timer no later than the head of the wait queue (Documentation/behaviour.md §3.2).
    pub(super) fn arm_head(self: &Arc<Self>, g: &mut AgentInner) {
        let head = g
            .queues
            .cursor_lower_bound(&(Q_WAIT, i64::MIN, 0))
            .map(|c| *c.current().0)
            .filter(|k| k.0 == Q_WAIT);
        if let Some(k) = head {
            self.arm(g, k.1);
        }
    }

    /// Applies `ev` to the send `rec`: the one place where a send's state changes.
    pub(super) fn apply(
        self: &Arc<Self>,
        g: &mut AgentInner,
        rec: &Arc<SendRecord>,
        st: &mut RecordState,
        ev: Event,
    ) -> Result<Outcome, Reject> {
        let o = state::step(st.facts, ev)?;
        let was = st.facts.state;
        g.fc_send = add_delta(g.fc_send, o.fc_send);
        g.fc_wait = add_delta(g.fc_wait, o.fc_wait);
        if was == SendState::Queued && o.next != SendState::Queued {
            g.backlog = g.backlog.saturating_sub(1);
        }
        if o.next == SendState::Queued && was != SendState::Queued {
            g.backlog = g.backlog.saturating_add(1);
            g.stats.backlogged = g.stats.backlogged.saturating_add(1);
        }
        if o.retry {
            st.facts.retries_left = st.facts.retries_left.saturating_sub(1);
            if let Some(b) = st.body.as_mut() {
                b.retries = b.retries.saturating_add(1);
            }
            g.stats.retried = g.stats.retried.saturating_add(1);
        }
        if let Some(t) = o.store_timeout {
            st.facts.timeout_ms = t;
            if let Some(b) = st.body.as_mut() {
                b.timeout_ms = i32::try_from(t).unwrap_or(i32::MAX);
            }
        }
        st.facts.state = o.next;
        if matches!(o.next, SendState::Canceled(_)) && !matches!(was, SendState::Canceled(_)) {
            // A cancel wins over a status decided before the completion it waits for (an RMPP
            // abort during a segment in flight): the send reports the flush.
            st.status = None;
        }

        // The clock is read only where a due time needs it: a post, a send completion and a
        // delivery need none, and a clock read is not free (under emulation least of all).
        match o.place {
            Place::Unchanged => {}
            Place::Nowhere => Self::unqueue(g, st),
            Place::InFlight => {
                let k = (Q_FLIGHT, 0, Self::next_seq(g));
                Self::enqueue(g, rec, st, k);
            }
            Place::Waiting { ms } => {
                let due = self.now_ns().saturating_add(ms_to_ns(ms));
                let k = (Q_WAIT, due, u64::MAX - Self::next_seq(g));
                Self::enqueue(g, rec, st, k);
                self.arm_head(g);
            }
            Place::Backlog => {
                let k = (Q_BACKLOG, 0, Self::next_seq(g));
                Self::enqueue(g, rec, st, k);
            }
            Place::CancelQueue => {
                let k = (Q_CANCEL, 0, Self::next_seq(g));
                Self::enqueue(g, rec, st, k);
                self.arm_now(g);
            }
        }
        if o.next == SendState::Done || o.next == SendState::Idle {
            Self::untrack(g, st);
        }
        if let Some(status) = o.complete {
            if st.status.is_none() {
                st.status = Some((status, 0));
            }
            match status {
                WcStatus::RespTimeoutErr => g.stats.timed_out = g.stats.timed_out.saturating_add(1),
                WcStatus::WrFlushErr => g.stats.cancelled = g.stats.cancelled.saturating_add(1),
                _ => {}
            }
            // A matched response delivers inline, after the receive handler; everything else
            // through the agent's work.
            if o.recv != Recv::Deliver {
                let k = (Q_DONE, 0, Self::next_seq(g));
                Self::enqueue(g, rec, st, k);
                self.arm_now(g);
            }
        }
        Ok(o)
    }
}

/// The first send of queue `q`.
pub(super) fn first_in(queues: &RBTree<QKey, Arc<SendRecord>>, q: u8) -> Option<Arc<SendRecord>> {
    first_entry(queues, q).map(|(_, r)| r)
}

/// The first key and send of queue `q`.
pub(super) fn first_entry(
    queues: &RBTree<QKey, Arc<SendRecord>>,
    q: u8,
) -> Option<(QKey, Arc<SendRecord>)> {
    first_entry_from(queues, (q, i64::MIN, 0), q)
}

/// The first key and send of queue `q` at or after `bound`.
pub(super) fn first_entry_from(
    queues: &RBTree<QKey, Arc<SendRecord>>,
    bound: QKey,
    q: u8,
) -> Option<(QKey, Arc<SendRecord>)> {
    let c = queues.cursor_lower_bound(&bound)?;
    let (k, rec) = c.current();
    (k.0 == q).then(|| (*k, rec.clone()))
}
