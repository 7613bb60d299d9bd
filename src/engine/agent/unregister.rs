// SPDX-License-Identifier: GPL-2.0

//! Unregistration: `ib_unregister_mad_agent` (Documentation/behaviour.md §1.4).

use super::{
    frames,
    Agent,
    Q_BACKLOG,
    Q_CANCEL,
    Q_DONE,
    Q_FLIGHT,
    Q_WAIT, //
};
use crate::{
    mad::state::Event,
    sys::workqueue, //
};
use kernel::{
    prelude::*,
    sync::{
        atomic::{
            Full,
            Relaxed, //
        },
        Arc, //
    },
};

impl Agent {
    /// `ib_unregister_mad_agent` (Documentation/behaviour.md §1.4): flushes every outstanding send,
    /// stops the routing of MADs to the agent and its timer, calls the handlers that are due in
    /// this thread, and returns once every send handler and receive handler has returned and every
    /// send buffer of the agent has been dropped. After it returns no handler of the agent is ever
    /// called again.
    ///
    /// Called from inside one of the agent's own handlers, send or receive, it would wait for
    /// itself forever: it warns and returns `EDEADLK` at once instead, whatever other handlers
    /// of the agent run at the time (handler calls are tracked per call, see `frames.rs`).
    pub(crate) fn unregister(self: &Arc<Self>) -> Result {
        self.unregister_with(true)
    }

    /// [`Agent::unregister`], waiting for the agent's send buffers to be dropped only if
    /// `wait_buffers`. Without that wait, buffers still held are inert afterwards: the agent
    /// is dead, so a post fails (`ESHUTDOWN`) and no handler runs; dropping one is safe
    /// whenever its owner likes (each holds the agent's memory, none of its client's).
    pub(crate) fn unregister_with(self: &Arc<Self>, wait_buffers: bool) -> Result {
        let me = frames::current_task();
        {
            let mut inner = self.lock();
            if inner.frames.contains(me) {
                drop(inner);
                pr_warn!("unregister called from a handler of the same agent\n");
                return Err(EDEADLK);
            }
            if inner.dead {
                return Err(EINVAL);
            }
            inner.dead = true;
            // Full: a buffer created from now on sees it and gives its count back, or the
            // count read below sees the buffer (`create_send` orders the two the other way).
            self.dying.xchg(true, Full);
        }
        // Sends in flight are marked and flushed at their send completion (T24); waiting,
        // cancelled and queued sends are flushed now (T25), in the C layer's list order. In
        // batches: marking the sends in flight first means that none can move behind the walk
        // into the wait queue (a dead agent neither retries nor dispatches its backlog).
        self.apply_to_all(
            &[Q_FLIGHT, Q_CANCEL, Q_WAIT, Q_BACKLOG],
            Event::Unregister,
            true,
        );
        self.engine.unpublish(self.hi_tid);
        // No MAD reaches the engine for the registration after this (a forwarded MAD being
        // handed over finishes first); unpublished, the engine routes none to the agent.
        if self.forward_key != 0 {
            self.transport.stop_forwarding(self.forward_key);
        }
        workqueue::disable_sync::<Agent, 0>(self);
        loop {
            self.deliver_due();
            let mut inner = self.lock();
            if !inner.queues.is_empty(Q_DONE) {
                continue;
            }
            // A send cancelled between two batches lands in the cancel queue, which the timer
            // no longer serves: flush it here.
            if !inner.queues.is_empty(Q_CANCEL) || !inner.queues.is_empty(Q_WAIT) {
                drop(inner);
                self.apply_to_all(&[Q_CANCEL, Q_WAIT, Q_BACKLOG], Event::Unregister, true);
                continue;
            }
            // Full: a buffer dropped from now on sees `sleeping` and wakes the wait below, or
            // the count read next sees it gone (`buffer_freed` orders the two the other way).
            self.sleeping.xchg(true, Full);
            let buffers = self.buffers.load(Relaxed);
            if inner.outstanding == 0 && (buffers == 0 || !wait_buffers) && inner.in_recv == 0 {
                self.sleeping.store(false, Relaxed);
                drop(inner);
                self.rmpp_clear();
                return Ok(());
            }
            inner.wait(&self.idle);
            self.sleeping.store(false, Relaxed);
        }
    }
}
