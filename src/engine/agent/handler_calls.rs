// SPDX-License-Identifier: GPL-2.0

//! Calls of an agent's handlers with the calling task marked as inside them, in the agent's
//! list of handler calls in progress (`frames.rs`), so that an unregistration from inside one
//! refuses instead of waiting for itself.

use super::{
    frames::Frame,
    Agent,
    AgentInner, //
};

impl Agent {
    /// Calls `f`, a call of one of this agent's handlers, with the current task marked as
    /// inside it (see the module documentation). Takes the agent's lock twice, never while
    /// `f` runs.
    pub(super) fn in_handler<R>(&self, f: impl FnOnce() -> R) -> R {
        self.in_handler_then(f, |_, _| {})
    }

    /// [`Agent::in_handler`], then `after`, given what `f` returned, in the same hold of the
    /// lock that unlinks the frame (the bookkeeping of the calls that returned: one hold fewer
    /// per call).
    pub(super) fn in_handler_then<R>(
        &self,
        f: impl FnOnce() -> R,
        after: impl FnOnce(&mut AgentInner, &R),
    ) -> R {
        let frame = core::pin::pin!(Frame::current());
        let frame: &Frame = &frame;
        // SAFETY: `frame` is pinned on this stack frame and unlinked below before it goes.
        unsafe { self.lock().frames.link(frame) };
        let r = f();
        let mut inner = self.lock();
        inner.frames.unlink(frame);
        after(&mut inner, &r);
        r
    }
}
