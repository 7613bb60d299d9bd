// SPDX-License-Identifier: GPL-2.0

//! Completions: send completions from the transport, the agent's work (timeouts, retries,
//! reporting of cancelled sends; `timeout_sends`, mad-spec.md §2.4.5) and the delivery of
//! send handlers.

use super::*;

impl Agent {
    /// The transport's report that transmission `gen` of `rec` completed with `status`.
    pub(crate) fn send_completed(
        rec: &Arc<SendRecord>,
        gen: u64,
        status: WcStatus,
        vendor_err: u32,
    ) {
        let this = &rec.agent;
        let mut g = this.inner.lock();
        Self::with_state(&mut g, rec, |g, st| {
            if st.gen != gen {
                return;
            }
            match this.apply(g, rec, st, Event::SendCompleted(status)) {
                Ok(o) => {
                    if let Some(s) = o.complete {
                        // Statuses decided at a send completion carry its vendor error.
                        st.status = Some((s, vendor_err));
                    }
                    if o.frees_fc_slot {
                        this.dispatch_backlog(g);
                    }
                }
                Err(_) => pr_warn!("send completion for a send in state {:?}\n", st.facts.state),
            }
        });
    }

    /// Calls the send handler for `rec`, whose final status is decided.
    pub(super) fn deliver_one(self: &Arc<Self>, rec: &Arc<SendRecord>) {
        let taken = {
            let mut g = self.inner.lock();
            let t = Self::with_state(&mut g, rec, |g, st| {
                Self::unqueue(g, st);
                Self::untrack(g, st);
                self.apply(g, rec, st, Event::Delivered).ok()?;
                let (status, vendor_err) = st.status.take()?;
                let wc = SendCompletion {
                    status,
                    vendor_err,
                    post: st.gen,
                };
                Some((st.body.take()?, wc))
            });
            if t.is_some() {
                g.stats.completed = g.stats.completed.saturating_add(1);
            }
            t
        };
        let Some((body, wc)) = taken else {
            return;
        };
        let buf = SendBuf {
            rec: rec.clone(),
            body,
        };
        self.in_handler(|| match &self.send_handler {
            Some(h) => h.send_done(self, buf, wc),
            None => drop(buf),
        });
        let mut g = self.inner.lock();
        g.outstanding = g.outstanding.saturating_sub(1);
        if g.dead {
            self.idle.notify_all();
        }
    }

    /// Delivers every send whose handler is due, one at a time, in order.
    pub(super) fn deliver_due(self: &Arc<Self>) {
        loop {
            let next = first_in(&self.inner.lock().queues, Q_DONE);
            match next {
                Some(rec) => self.deliver_one(&rec),
                None => return,
            }
        }
    }

    /// The agent's work: expire waiting sends (in expiry order), report cancelled ones, move
    /// the backlog, re-arm the timer, then call the handlers that are due
    /// (`timeout_sends`, mad-spec.md §2.4.5).
    pub(super) fn run_work(self: &Arc<Self>) {
        {
            let mut g = self.inner.lock();
            g.armed_ns = None;
            if !g.dead {
                let now = self.now_ns();
                while let Some((k, rec)) = first_entry(&g.queues, Q_WAIT) {
                    if k.1 > now {
                        break;
                    }
                    Self::with_state(&mut g, &rec, |g, st| {
                        let ev = Event::Expired {
                            backlog_empty: g.backlog == 0,
                        };
                        if let Ok(o) = self.apply(g, &rec, st, ev) {
                            if o.transmit && self.transmit(g, &rec, st).is_err() {
                                let _ = self.apply(g, &rec, st, Event::RetransmitFailed);
                            }
                        }
                    });
                }
                while let Some(rec) = first_in(&g.queues, Q_CANCEL) {
                    Self::with_state(&mut g, &rec, |g, st| {
                        let _ = self.apply(
                            g,
                            &rec,
                            st,
                            Event::Expired {
                                backlog_empty: true,
                            },
                        );
                    });
                }
                self.dispatch_backlog(&mut g);
                self.arm_head(&mut g);
            }
        }
        self.deliver_due();
    }
}
