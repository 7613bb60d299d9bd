// SPDX-License-Identifier: GPL-2.0

//! The cancel path: `ib_modify_mad` and `ib_cancel_mad` through a handle
//! (Documentation/behaviour.md §1.7).
//!
//! O(1): the handle names the send's record directly, the post generation tells a stale
//! handle apart, and the state machine decides; nothing is allocated, nothing sleeps, and no
//! handler is called.

use super::{
    Agent,
    AgentInner,
    Q_BACKLOG,
    Q_FLIGHT,
    Q_WAIT, //
};
use crate::{
    engine::send::{
        RecordState,
        SendHandle,
        SendRef, //
    },
    mad::state::{
        Event,
        SendState, //
    },
    sys::trace, //
};
use kernel::{
    prelude::*,
    sync::Arc, //
};

impl Agent {
    /// `ib_modify_mad` through a handle (0 cancels).
    pub(crate) fn modify(self: &Arc<Self>, h: &SendHandle, timeout_ms: i32) -> Result {
        let t = u32::try_from(timeout_ms).map_err(|_| EINVAL)?;
        let mut inner = self.lock();
        Self::with_state(&mut inner, &h.rec, |inner, state| {
            if state.gen != h.gen {
                return Err(EINVAL);
            }
            self.modify_locked(inner, &h.rec, state, t)
        })
    }

    /// Applies a modify (0: cancel) to the outstanding send `rec` and traces it.
    fn modify_locked(
        self: &Arc<Self>,
        inner: &mut AgentInner,
        rec: &SendRef,
        state: &mut RecordState,
        t: u32,
    ) -> Result {
        self.apply(inner, rec, state, Event::Modify(t))
            .map_err(|_| EINVAL)?;
        let ev = if t == 0 {
            trace::Ev::Cancel
        } else {
            trace::Ev::Modify
        };
        self.trace_send(ev, state, 0);
        Ok(())
    }

    /// `ib_modify_mad` on whatever post of `rec` is outstanding (the C API, where a buffer
    /// names its current post): `EINVAL` if none is.
    pub(crate) fn modify_current(self: &Arc<Self>, rec: &SendRef, timeout_ms: i32) -> Result {
        let t = u32::try_from(timeout_ms).map_err(|_| EINVAL)?;
        let mut inner = self.lock();
        Self::with_state(&mut inner, rec, |inner, state| {
            if state.facts.state == SendState::Idle {
                return Err(EINVAL);
            }
            self.modify_locked(inner, rec, state, t)
        })
    }

    /// Cancels every outstanding send of the agent, as `ib_cancel_mad` would one by one: the
    /// transport under the agent is going away, in batches (see
    /// [`Agent::apply_to_all`]). Each send's handler then reports
    /// `WR_FLUSH_ERR` exactly once: at once for waiting and queued sends, at their (flushed)
    /// send completion for sends in flight.
    pub(crate) fn cancel_all(self: &Arc<Self>) {
        // Sends in flight first: once marked, none of them can move to the wait queue behind
        // the walk (the lock is dropped between batches). Already cancelled sends refuse;
        // that is fine.
        self.apply_to_all(&[Q_FLIGHT, Q_WAIT, Q_BACKLOG], Event::Modify(0), false);
    }

    /// Whether the agent sends through `t`.
    pub(crate) fn uses_transport(&self, t: *const ()) -> bool {
        core::ptr::eq(Arc::as_ptr(&self.transport).cast::<()>(), t)
    }

    /// Whether the agent is on `device` ([`Transport::device`]).
    pub(crate) fn on_device(&self, device: *const ()) -> bool {
        core::ptr::eq(self.transport.device(), device)
    }

    /// The agent's device ([`Transport::device`]).
    pub(crate) fn device(&self) -> *const () {
        self.transport.device()
    }
}
