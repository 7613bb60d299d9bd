// SPDX-License-Identifier: GPL-2.0

//! The opt-in retry rules (deadline, backoff, one-shot modify) around a send's state step: the
//! engine asks [`crate::mad::retry::plan`] and applies its answer; nothing here decides.
//!
//! A send with the C layer's rules, and every segmented (kernel-RMPP) send, is not asked about
//! and reads no clock: its waits are the state table's own.

use super::{
    hold::{
        self,
        BATCH, //
    },
    Agent,
    AgentInner,
    Q_BACKLOG, //
};
use crate::{
    engine::send::{
        RecordState,
        SendRef, //
    },
    mad::{
        retry::{
            self,
            Rules,
            Tick, //
        },
        state::{
            Event,
            Outcome,
            Place,
            SendFacts,
            SendState,
            WcStatus, //
        },
    },
    sys::{
        sched,
        trace, //
    },
};
use kernel::sync::Arc;

/// The deadline of the send whose state is `state`, if its rules set one (nanoseconds of its
/// agent's clock). Every post starts the clock afresh, and only the rules' own `Posted` step
/// sets a deadline, so a send with the C layer's rules, or a segmented one, has none.
pub(super) fn backlog_deadline(state: &RecordState) -> Option<i64> {
    state.body.as_ref()?.retry_clock.deadline_ns
}

/// The rules that apply to one step of a send that opted into some, and the time of the step.
#[derive(Clone, Copy)]
pub(super) struct RetryStep {
    /// The send's rules.
    rules: Rules,
    /// The engine's clock at the step.
    pub(super) now_ns: i64,
}

impl Agent {
    /// Whether the send whose state is `state` opted into retry rules that apply to it (a
    /// segmented send keeps its windows' rules): its steps then read the clock around the
    /// state table's ([`Agent::retry_step`]).
    pub(super) fn asks_retry_rules(state: &RecordState) -> bool {
        state
            .body
            .as_ref()
            .is_some_and(|b| !b.retry.is_c_layer() && b.seg.is_none())
    }

    /// The rules for a step of the send whose state is `state`, if it opted into any that apply.
    pub(super) fn retry_step(&self, state: &RecordState) -> Option<RetryStep> {
        if !Self::asks_retry_rules(state) {
            return None;
        }
        Some(RetryStep {
            rules: state.body.as_ref()?.retry,
            now_ns: self.now_ns(),
        })
    }

    /// Ends the send `rec`, held back by flow control past its deadline, as a retransmission
    /// the device refused ends (T4 then T13): `RESP_TIMEOUT_ERR`, not transmitted. A retry
    /// counted when it entered the backlog is taken back: it never went out.
    pub(super) fn end_past_deadline(
        self: &Arc<Self>,
        inner: &mut AgentInner,
        rec: &SendRef,
        state: &mut RecordState,
    ) {
        if self
            .apply(inner, rec, state, Event::BacklogDispatch)
            .is_err()
        {
            return;
        }
        if let Some(b) = state.body.as_mut() {
            if b.retries > 0 {
                b.retries = b.retries.saturating_sub(1);
                inner.stats.retried = inner.stats.retried.saturating_sub(1);
            }
        }
        if self
            .apply(inner, rec, state, Event::RetransmitFailed)
            .is_ok()
        {
            self.trace_send(trace::Ev::Timeout, state, WcStatus::RespTimeoutErr.code());
        }
    }

    /// Ends every send in the backlog whose deadline passed by `now`
    /// ([`Agent::end_past_deadline`]; their handlers run from the delivery queue), holding the
    /// lock for at most [`BATCH`] sends at a time; returns the earliest deadline still ahead
    /// there. It walks the backlog only while a send in it has a deadline.
    pub(super) fn expire_backlog(self: &Arc<Self>, now: i64) -> Option<i64> {
        let mut ahead: Option<i64> = None;
        let mut bound = (i64::MIN, 0);
        loop {
            let mut inner = self.lock();
            if inner.dead || inner.backlog_deadlines == 0 {
                return ahead;
            }
            let mut n = 0u32;
            let mut more = false;
            let mut next = inner.queues.first_entry_from(Q_BACKLOG, bound);
            while let Some((k, rec)) = next {
                if n == BATCH {
                    more = true;
                    break;
                }
                // The send after this one, before this one leaves the backlog.
                next = inner.queues.next_entry(Q_BACKLOG, &rec);
                Self::with_state(&mut inner, &rec, |inner, state| {
                    match backlog_deadline(state) {
                        Some(d) if d <= now => self.end_past_deadline(inner, &rec, state),
                        Some(d) => ahead = Some(ahead.map_or(d, |a| a.min(d))),
                        None => {}
                    }
                });
                bound = (k.0, k.1.saturating_add(1));
                n = n.saturating_add(1);
            }
            hold::note_batch(n);
            drop(inner);
            if !more {
                return ahead;
            }
            sched::cond_resched();
        }
    }
}

impl RetryStep {
    /// Whether the send's deadline has passed: no transmission of it may start.
    pub(super) fn deadline_passed(&self, state: &RecordState) -> bool {
        state.body.as_ref().is_some_and(|body| {
            !retry::plan(self.rules, body.retry_clock, Tick::Expired, self.now_ns).retry
        })
    }

    /// The facts the state step of `ev` reads: once the deadline has passed, an expiry finds no
    /// retry left, so no retry starts after it.
    pub(super) fn facts(&self, state: &RecordState, ev: Event) -> SendFacts {
        let mut facts = state.facts;
        if matches!(ev, Event::Expired { .. }) && self.deadline_passed(state) {
            facts.retries_left = 0;
        }
        facts
    }

    /// After the state step of `ev` decided `outcome`: the send's clock moves on, a one-shot
    /// modify keeps its timeout out of the later waits, and the wait (in nanoseconds from
    /// [`RetryStep::now_ns`]) that replaces the outcome's, if it waits.
    pub(super) fn after(
        &self,
        state: &mut RecordState,
        ev: Event,
        outcome: &mut Outcome,
    ) -> Option<i64> {
        let body = state.body.as_mut()?;
        let tick = match (ev, outcome.place) {
            (Event::Post(_), _) => Tick::Posted,
            (Event::SendCompleted(_), Place::Waiting { .. }) => Tick::Sent {
                timeout_ms: state.facts.timeout_ms,
            },
            (Event::Modify(ms), _) if ms != 0 && outcome.next != SendState::Idle => {
                Tick::Modified {
                    ms,
                    waiting: matches!(outcome.place, Place::Waiting { .. }),
                    timeout_ms: state.facts.timeout_ms,
                }
            }
            _ => return None,
        };
        let plan = retry::plan(self.rules, body.retry_clock, tick, self.now_ns);
        body.retry_clock = plan.clock;
        if !plan.store {
            if let Tick::Modified { .. } = tick {
                outcome.store_timeout = None;
            }
        }
        plan.wait_ns
    }
}
