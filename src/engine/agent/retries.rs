// SPDX-License-Identifier: GPL-2.0

//! The opt-in retry rules (deadline, backoff, one-shot modify) around a send's state step: the
//! engine asks [`crate::mad::retry::plan`] and applies its answer; nothing here decides.
//!
//! A send with the C layer's rules, and every segmented (kernel-RMPP) send, is not asked about
//! and reads no clock: its waits are the state table's own.

use super::Agent;
use crate::{
    engine::send::RecordState,
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
            SendState, //
        },
    },
};

/// The rules that apply to one step of a send that opted into some, and the time of the step.
#[derive(Clone, Copy)]
pub(super) struct RetryStep {
    /// The send's rules.
    rules: Rules,
    /// The engine's clock at the step.
    pub(super) now_ns: i64,
}

impl Agent {
    /// The rules for a step of the send whose state is `state`, if it opted into any that apply
    /// (a segmented send keeps its windows' rules).
    pub(super) fn retry_step(&self, state: &RecordState) -> Option<RetryStep> {
        let body = state.body.as_ref()?;
        if body.retry.is_c_layer() || body.seg.is_some() {
            return None;
        }
        Some(RetryStep {
            rules: body.retry,
            now_ns: self.now_ns(),
        })
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
