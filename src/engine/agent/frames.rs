// SPDX-License-Identifier: GPL-2.0

//! Which tasks are inside a handler of an agent right now.
//!
//! Unregistration waits for every handler of its agent to return, so called from one of those
//! handlers it would wait for itself: it must refuse (`EDEADLK`) instead. That needs the answer
//! to "is the current task inside a handler of this agent?" for every call, not one slot per
//! agent: handlers of one agent run at the same time in several tasks (the completion work, a
//! transport's receive context, an unregistering thread), and one task can be inside handlers
//! of several agents at once (a handler that unregisters another agent runs that agent's
//! handlers).
//!
//! Every handler call therefore links a [`Frame`] that lives on the calling task's stack into
//! its agent's [`Frames`] for exactly the duration of the call (`Agent::in_handler`, in
//! `handler_calls.rs`). Linking and unlinking need no allocation, so they cannot fail. This
//! file imports nothing of the agent, whose locked state holds the list.

use core::{
    cell::UnsafeCell,
    marker::PhantomPinned, //
};
use kernel::{
    prelude::*,
    task::Task, //
};

/// A handler call in progress: one entry of an agent's [`Frames`].
pub(super) struct Frame {
    /// The task that runs the handler.
    task: usize,
    /// The next frame of the list; read and written only under the agent's lock.
    next: UnsafeCell<*const Frame>,
    /// A frame is linked by address.
    _pin: PhantomPinned,
}

/// The handler calls in progress of one agent, under the agent's lock.
///
/// # Invariants
///
/// `head` is null or points to a [`Frame`], whose `next` obeys the same rule. Every frame in
/// the list lives on the stack of a task that is inside `Agent::in_handler` for this agent,
/// and is unlinked (under the agent's lock) before that call returns.
pub(crate) struct Frames {
    head: *const Frame,
}

// SAFETY: The pointers are only followed under the agent's lock, and each points to a frame
// that stays alive while it is linked (type invariant), whichever thread owns the list.
unsafe impl Send for Frames {}

impl Frames {
    /// No handler call in progress.
    pub(crate) const fn new() -> Self {
        Self {
            head: core::ptr::null(),
        }
    }

    /// Whether `task` is inside a handler call of this agent.
    pub(super) fn contains(&self, task: usize) -> bool {
        let mut p = self.head;
        while !p.is_null() {
            // SAFETY: Linked frames are alive (type invariant); `next` is only accessed under
            // the agent's lock, which the caller holds through `&self`.
            let f = unsafe { &*p };
            if f.task == task {
                return true;
            }
            // SAFETY: As above.
            p = unsafe { *f.next.get() };
        }
        false
    }

    /// Links `f`.
    ///
    /// # Safety
    ///
    /// `f` must stay alive and unmoved until it is unlinked with [`Frames::unlink`].
    pub(super) unsafe fn link(&mut self, f: &Frame) {
        // SAFETY: `next` is only accessed under the agent's lock (`&mut self`).
        unsafe { *f.next.get() = self.head };
        // INVARIANT: The caller keeps `f` alive until it is unlinked.
        self.head = f;
    }

    /// Unlinks `f`, which must have been linked by [`Frames::link`].
    pub(super) fn unlink(&mut self, f: &Frame) {
        let target: *const Frame = f;
        let mut at: *mut *const Frame = &mut self.head;
        // SAFETY: `at` points to `head` or to the `next` of a linked (alive) frame, all of which
        // are only accessed under the agent's lock (`&mut self`).
        unsafe {
            while !(*at).is_null() {
                if *at == target {
                    // INVARIANT: `f` leaves the list; the rest stays linked.
                    *at = *f.next.get();
                    return;
                }
                at = (**at).next.get();
            }
        }
        pr_err!("handler frame was not linked\n");
    }
}

impl Frame {
    /// A frame of a handler call by the current task, to pin on its stack and link.
    pub(super) fn current() -> Self {
        Self {
            task: current_task(),
            next: UnsafeCell::new(core::ptr::null()),
            _pin: PhantomPinned,
        }
    }
}

/// The current task, as a number to compare.
pub(super) fn current_task() -> usize {
    Task::current_raw().addr()
}
