// SPDX-License-Identifier: GPL-2.0

//! Unregistration: `ib_unregister_mad_agent` (mad-spec.md §1.4).

use super::*;

impl Agent {
    /// `ib_unregister_mad_agent` (mad-spec.md §1.4): flushes every outstanding send, stops
    /// the routing of MADs to the agent and its timer, calls the handlers that are due in this
    /// thread, and returns once every send handler and receive handler has returned and every
    /// send buffer of the agent has been dropped. After it returns no handler of the agent is
    /// ever called again.
    ///
    /// Called from one of the agent's own handlers it would wait for itself forever: it warns
    /// and returns `EDEADLK` instead.
    pub(crate) fn unregister(self: &Arc<Self>) -> Result {
        let me = Task::current_raw().addr();
        {
            let mut g = self.inner.lock();
            if g.handler_task == me {
                drop(g);
                pr_warn!("unregister called from a handler of the same agent\n");
                return Err(EDEADLK);
            }
            if g.dead {
                return Err(EINVAL);
            }
            g.dead = true;
            // Waiting, cancelled and queued sends are flushed now (T25), in the C layer's list
            // order; sends in flight are marked and flushed at their send completion (T24).
            self.apply_to_all(
                &mut g,
                &[Q_CANCEL, Q_WAIT, Q_BACKLOG, Q_FLIGHT],
                Event::Unregister,
            );
        }
        self.engine.unpublish(self.hi_tid);
        wq::disable_sync::<Agent, 0>(self);
        loop {
            self.deliver_due();
            let mut g = self.inner.lock();
            if first_in(&g.queues, Q_DONE).is_some() {
                continue;
            }
            if g.outstanding == 0 && g.buffers == 0 && g.in_recv == 0 {
                return Ok(());
            }
            self.idle.wait(&mut g);
        }
    }
}
