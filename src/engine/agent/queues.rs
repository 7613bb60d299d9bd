// SPDX-License-Identifier: GPL-2.0

//! An agent's outstanding sends by where they are: the five queues and the TID index, and
//! every move between them.
//!
//! [`Queues`] is the one owner of these structures: the rest of the agent asks it to link,
//! unlink and move a send, and to show the first or next one, and never reaches into a tree.
//! What a move means for the send (its state, the counters, the timer) is decided elsewhere
//! (`apply.rs`, `direct.rs`); this file knows nothing of an agent and imports nothing of it.
//!
//! The queues and the TID index are intrusive trees ([`crate::sys::rbtree`]) linked through
//! the send's record: a move between queues unlinks the send and links it at the end of the
//! next queue (O(1) amortised, every queue's keys grow), nothing is searched for, and nothing
//! is allocated.

use crate::{
    engine::send::{
        QKey,
        RecordState,
        SendRecord,
        SendRef,
        QUEUE_LINKS,
        TID_LINKS, //
    },
    sys::rbtree::Tree,
};
use kernel::prelude::*;

/// The queues of an agent's sends. Their order (the derived `Ord`) is the order in which the
/// C layer searches its lists for a response's request (Documentation/behaviour.md §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Queue {
    /// Cancelled sends waiting for the timeout work (where C puts them: the head of its wait
    /// list), FIFO: reported in the order of cancellation, where C reports them in reverse
    /// (Documentation/behaviour.md §8.19).
    Cancel,
    /// Sends waiting for a response, by expiry (in nanoseconds: sends C would see expire in
    /// one tick, and report last in first out, keep their order here;
    /// Documentation/behaviour.md §8.19).
    Wait,
    /// The flow-control backlog, FIFO.
    Backlog,
    /// Sends handed to the transport (the C send list), FIFO.
    Flight,
    /// Sends whose handler is due, in the order their statuses were decided.
    Done,
}

/// One queue of sends.
pub(crate) type SendQueue = Tree<SendRecord, QUEUE_LINKS>;

/// The sends that can still be matched, by (TID, class), in the order of their posts.
pub(crate) type TidIndex = Tree<SendRecord, TID_LINKS>;

/// An agent's queues and TID index. It lives in the agent's locked state (`AgentInner`), so
/// every method runs under the agent's lock.
///
/// # Invariants
///
/// - A send is in at most one queue, the one its `RecordState::queue` names (the queues are
///   changed only by [`Queues::enqueue`] and [`Queues::unqueue`], which keep the two in step).
/// - A send is in the TID index at most once.
/// - `seq` grows by one for every key handed out: FIFO keys are unique and grow.
pub(crate) struct Queues {
    cancel: SendQueue,
    wait: SendQueue,
    backlog: SendQueue,
    flight: SendQueue,
    done: SendQueue,
    tids: TidIndex,
    /// Source of unique secondary keys.
    seq: u64,
}

impl Queues {
    /// Empty queues and index.
    pub(super) fn new() -> Self {
        Self {
            cancel: Tree::new(),
            wait: Tree::new(),
            backlog: Tree::new(),
            flight: Tree::new(),
            done: Tree::new(),
            tids: Tree::new(),
            seq: 0,
        }
    }

    /// Queue `q`.
    fn get(&self, q: Queue) -> &SendQueue {
        match q {
            Queue::Cancel => &self.cancel,
            Queue::Wait => &self.wait,
            Queue::Backlog => &self.backlog,
            Queue::Flight => &self.flight,
            Queue::Done => &self.done,
        }
    }

    /// Queue `q`, to change it.
    fn get_mut(&mut self, q: Queue) -> &mut SendQueue {
        match q {
            Queue::Cancel => &mut self.cancel,
            Queue::Wait => &mut self.wait,
            Queue::Backlog => &mut self.backlog,
            Queue::Flight => &mut self.flight,
            Queue::Done => &mut self.done,
        }
    }

    /// Whether queue `q` holds no send.
    pub(super) fn is_empty(&self, q: Queue) -> bool {
        self.get(q).is_empty()
    }

    /// The first send of queue `q`.
    pub(super) fn first(&self, q: Queue) -> Option<SendRef> {
        self.get(q).first().map(|(_, r)| r.into())
    }

    /// The first key and send of queue `q`.
    pub(super) fn first_entry(&self, q: Queue) -> Option<(QKey, SendRef)> {
        self.get(q).first().map(|(k, r)| (k, r.into()))
    }

    /// The first key and send of queue `q` at or after `bound`.
    pub(super) fn first_entry_from(&self, q: Queue, bound: QKey) -> Option<(QKey, SendRef)> {
        self.get(q).lower_bound(&bound).map(|(k, r)| (k, r.into()))
    }

    /// The key and send after `rec` in queue `q`.
    pub(super) fn next_entry(&self, q: Queue, rec: &SendRecord) -> Option<(QKey, SendRef)> {
        self.get(q).next(rec).map(|(k, r)| (k, r.into()))
    }

    /// The due time of the first waiting send (the head of [`Queue::Wait`]).
    pub(super) fn wait_head(&self) -> Option<i64> {
        self.wait.first().map(|(k, _)| k.0)
    }

    /// A fresh secondary key.
    pub(super) fn next_seq(&mut self) -> u64 {
        // INVARIANT: Every key handed out is one more than the last.
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    /// A key at the end of a FIFO queue.
    pub(super) fn fifo_key(&mut self) -> QKey {
        (0, self.next_seq())
    }

    /// Takes `rec` out of its queue, if it is in one.
    pub(super) fn unqueue(&mut self, rec: &SendRecord, state: &mut RecordState) {
        if let Some(q) = state.queue.take() {
            // The caller holds a reference of its own: this one is never the last.
            drop(self.get_mut(q).remove(rec));
        }
    }

    /// Puts `rec` at `key` in queue `q`, moving it from where it was.
    pub(super) fn enqueue(&mut self, rec: &SendRef, state: &mut RecordState, q: Queue, key: QKey) {
        // The reference the old queue held moves to the new one.
        let held = state
            .queue
            .take()
            .and_then(|old| self.get_mut(old).remove(rec))
            .unwrap_or_else(|| rec.clone());
        match self.get_mut(q).insert(held, key) {
            // INVARIANT: The send is in queue `q`, which `state.queue` names.
            Ok(()) => state.queue = Some(q),
            // Only reachable if the invariant is broken: the send is in a queue that
            // `state.queue` does not name.
            Err(_) => pr_err!("send is in a queue already\n"),
        }
    }

    /// Puts `rec` at the end of the FIFO queue `q`, moving it from where it was.
    pub(super) fn push(&mut self, rec: &SendRef, state: &mut RecordState, q: Queue) {
        let k = self.fifo_key();
        self.enqueue(rec, state, q, k);
    }

    /// Where `rec` is in the C layer's list order: its queue and its key there.
    pub(super) fn position(&self, rec: &SendRecord, state: &RecordState) -> Option<(Queue, QKey)> {
        let q = state.queue?;
        Some((q, self.get(q).key_of(rec)?))
    }

    /// Puts `rec` in the TID index (at its post).
    pub(super) fn track(&mut self, rec: &SendRef, state: &RecordState) {
        if self
            .tids
            .insert(rec.clone(), (state.tid, state.class))
            .is_err()
        {
            // Only reachable if the invariant is broken: a send is posted once at a time.
            pr_err!("send is in the TID index already\n");
        }
    }

    /// Removes `rec` from the TID index, if it is in it.
    pub(super) fn untrack(&mut self, rec: &SendRecord) {
        // The caller holds a reference of its own: this one is never the last.
        drop(self.tids.remove(rec));
    }

    /// The TID index, to look a response's send up in.
    pub(super) fn tids(&self) -> &TidIndex {
        &self.tids
    }
}
