// SPDX-License-Identifier: GPL-2.0

//! An agent's outstanding sends by where they are: the five queues and the TID index, and
//! every move between them.
//!
//! [`Queues`] is the one owner of these structures: the rest of the agent asks it to link,
//! unlink and move a send, and to show the first or next one, and never reaches into a tree.
//! What a move means for the send (its state, the counters, the timer) is decided elsewhere
//! (`apply.rs`, `direct.rs`); this file knows nothing of an agent or a record and imports
//! nothing of either: [`Queues`] is generic over what it queues ([`QueueItem`], a send's
//! record) and reads of its state only what [`Queued`] gives (the queue it is in, its TID).
//!
//! The queues and the TID index are intrusive, linked through the send's record: lists
//! ([`crate::sys::fifo`]) for the queues whose sends arrive in key order, trees
//! ([`crate::sys::rbtree`]) for the others, and buckets of small trees
//! ([`crate::sys::buckets`]) for the index, which is only ever searched for one key. A move
//! between queues unlinks the send and links it into the next queue: O(1) in a list, O(log n)
//! at most in a tree (O(1) amortised where its keys grow); nothing is searched for, and
//! nothing is allocated.

use super::wait::WaitQueue;
use crate::sys::{
    buckets::Buckets,
    fifo::Fifo,
    rbtree::{
        Borrowed,
        Tree,
        TreeItem, //
    },
};
use core::ptr::NonNull;
use kernel::prelude::*;

/// Key of a send in the queue its agent keeps it in: (primary order, secondary order).
pub(crate) type QKey = (i64, u64);
/// Key of a send in its agent's TID index: (TID, management class); sends of equal keys are
/// kept in the order of their posts.
pub(crate) type TidKey = (u64, u8);

/// The kind of links (a send's record's `qlinks`) that link an item into its agent's queues.
pub(crate) const QUEUE_LINKS: u64 = 0;
/// The kind of links (a send's record's `tlinks`) that link an item into its agent's TID
/// index.
pub(crate) const TID_LINKS: u64 = 1;

// The kinds are written out in the bounds below: a bound on a named constant is not matched
// with the value it stands for when the compiler elaborates a supertrait.
const _: () = assert!(QUEUE_LINKS == 0 && TID_LINKS == 1);

/// What the queues keep: items with links of both kinds (a send's record). Generic, so that
/// this file imports nothing of the records or the agent.
pub(crate) trait QueueItem: TreeItem<0, Key = QKey> + TreeItem<1, Key = TidKey> {
    /// A reference for the TID index, the same count as `r`.
    fn tid_ref(r: QRef<Self>) -> <Self as TreeItem<1>>::Ref;
}

/// The counted reference of a queued item.
pub(crate) type QRef<T> = <T as TreeItem<0>>::Ref;

/// What the queues read and write of an item's locked state: the queue it is in, and its key
/// in the TID index. A send's `RecordState`.
pub(crate) trait Queued {
    /// The queue the item is in, if any.
    fn queue_mut(&mut self) -> &mut Option<Queue>;
    /// The queue the item is in, if any.
    fn queue(&self) -> Option<Queue>;
    /// The item's key in the TID index: (TID, class) captured at its post.
    fn tid_key(&self) -> TidKey;
}

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

/// A queue of sends in key order, whatever their keys: the backlog (whose deadlines' walk
/// resumes by key).
pub(crate) type SendQueue<T> = Tree<T, QUEUE_LINKS>;

/// A queue of sends whose keys only grow: sends are appended and taken from anywhere.
pub(crate) type SendFifo<T> = Fifo<T, QUEUE_LINKS>;

/// Buckets of the TID index: at N = 100 outstanding sends an insert or a removal meets an
/// empty or one-node tree, at N = 10 000 one of some 40 nodes (2 KiB per agent).
const TID_BUCKETS: usize = 256;

/// The sends that can still be matched, by (TID, class), in the order of their posts.
pub(crate) type TidIndex<T> = Buckets<T, TID_LINKS, TID_BUCKETS>;

/// An agent's queues and TID index. It lives in the agent's locked state (`AgentInner`), so
/// every method runs under the agent's lock.
///
/// The queues whose sends arrive in key order (cancelled, in flight, due: their keys grow
/// with `seq`) are lists, where an append or a removal is a few pointer writes; the wait
/// queue keeps the sends that come due in order in a list too ([`WaitQueue`]); the backlog,
/// whose deadlines' walk resumes by key, is a tree.
///
/// # Invariants
///
/// - A send is in at most one queue, the one its `RecordState::queue` names (the queues are
///   changed only by [`Queues::enqueue`] and [`Queues::unqueue`], which keep the two in step).
/// - A send is in the TID index at most once.
/// - `seq` grows by one for every key handed out: FIFO keys are unique and grow.
pub(crate) struct Queues<T: QueueItem> {
    cancel: SendFifo<T>,
    wait: WaitQueue<T, QUEUE_LINKS>,
    backlog: SendQueue<T>,
    flight: SendFifo<T>,
    done: SendFifo<T>,
    tids: TidIndex<T>,
    /// Source of unique secondary keys.
    seq: u64,
}

/// One queue, whichever kind it is.
enum Of<'a, T: QueueItem> {
    /// A tree.
    Tree(&'a SendQueue<T>),
    /// A list.
    Fifo(&'a SendFifo<T>),
    /// The wait queue.
    Wait(&'a WaitQueue<T, QUEUE_LINKS>),
}

impl<T: QueueItem> Queues<T> {
    /// Empty queues and index.
    pub(super) fn new() -> Self {
        Self {
            cancel: Fifo::new(),
            wait: WaitQueue::new(),
            backlog: Tree::new(),
            flight: Fifo::new(),
            done: Fifo::new(),
            tids: Buckets::new(),
            seq: 0,
        }
    }

    /// Queue `q`.
    fn get(&self, q: Queue) -> Of<'_, T> {
        match q {
            Queue::Cancel => Of::Fifo(&self.cancel),
            Queue::Wait => Of::Wait(&self.wait),
            Queue::Backlog => Of::Tree(&self.backlog),
            Queue::Flight => Of::Fifo(&self.flight),
            Queue::Done => Of::Fifo(&self.done),
        }
    }

    /// Takes `rec` out of queue `q`, with the queue's reference; `None` if `q` does not hold it.
    // Inlined, as the queues' own operations are: a call per move costs a modify 50
    // instructions.
    #[inline(always)]
    fn remove(&mut self, q: Queue, rec: &T) -> Option<QRef<T>> {
        match q {
            Queue::Cancel => self.cancel.remove(rec),
            Queue::Wait => self.wait.remove(rec),
            Queue::Backlog => self.backlog.remove(rec),
            Queue::Flight => self.flight.remove(rec),
            Queue::Done => self.done.remove(rec),
        }
    }

    /// Puts `held` at `key` in queue `q`; gives it back if it is in a queue already (or, in a
    /// list, if `key` is below the last one's).
    #[inline(always)]
    fn insert(&mut self, q: Queue, held: QRef<T>, key: QKey) -> Result<(), QRef<T>> {
        match q {
            Queue::Cancel => self.cancel.push_back(held, key),
            Queue::Wait => self.wait.insert(held, key),
            Queue::Backlog => self.backlog.insert(held, key),
            Queue::Flight => self.flight.push_back(held, key),
            Queue::Done => self.done.push_back(held, key),
        }
    }

    /// Whether queue `q` holds no send.
    pub(super) fn is_empty(&self, q: Queue) -> bool {
        match self.get(q) {
            Of::Tree(t) => t.is_empty(),
            Of::Fifo(f) => f.is_empty(),
            Of::Wait(w) => w.is_empty(),
        }
    }

    /// The first send of queue `q`.
    pub(super) fn first(&self, q: Queue) -> Option<QRef<T>> {
        self.first_entry(q).map(|(_, r)| r)
    }

    /// The first key and send of queue `q`.
    pub(super) fn first_entry(&self, q: Queue) -> Option<(QKey, QRef<T>)> {
        match self.get(q) {
            Of::Tree(t) => t.first().map(|(k, r)| (k, r.into())),
            Of::Fifo(f) => f.first().map(|(k, r)| (k, r.into())),
            Of::Wait(w) => w.first().map(|(k, r)| (k, r.into())),
        }
    }

    /// The first key of queue `q` and the address of its send, without a reference of its
    /// own: the queue's keeps the send alive while it is in the queue ([`Queues::take_out`]
    /// hands that reference to whoever takes it out).
    pub(super) fn first_entry_ptr(&self, q: Queue) -> Option<(QKey, NonNull<T>)> {
        let at = |(k, r): (QKey, Borrowed<'_, T, 0>)| (k, NonNull::from(&*r));
        match self.get(q) {
            Of::Tree(t) => t.first().map(at),
            Of::Fifo(f) => f.first().map(at),
            Of::Wait(w) => w.first().map(at),
        }
    }

    /// The first key and send of queue `q` at or after `bound` (in a list, a walk from its
    /// head: for the trees, where it is a search).
    pub(super) fn first_entry_from(&self, q: Queue, bound: QKey) -> Option<(QKey, QRef<T>)> {
        match self.get(q) {
            Of::Tree(t) => t.lower_bound(&bound).map(|(k, r)| (k, r.into())),
            Of::Fifo(f) => f.lower_bound(&bound).map(|(k, r)| (k, r.into())),
            Of::Wait(w) => w.lower_bound(&bound).map(|(k, r)| (k, r.into())),
        }
    }

    /// The key and send after `rec` in queue `q`.
    pub(super) fn next_entry(&self, q: Queue, rec: &T) -> Option<(QKey, QRef<T>)> {
        match self.get(q) {
            Of::Tree(t) => t.next(rec).map(|(k, r)| (k, r.into())),
            Of::Fifo(f) => f.next(rec).map(|(k, r)| (k, r.into())),
            Of::Wait(w) => w.next(rec).map(|(k, r)| (k, r.into())),
        }
    }

    /// Whether queue `q` is a list: its sends come in key order (their keys only grow), and
    /// are appended ([`Queues::push`]) and taken from anywhere.
    pub(super) fn is_list(&self, q: Queue) -> bool {
        matches!(self.get(q), Of::Fifo(_))
    }

    /// The key of the last send of queue `q`, if `q` is a list and holds any.
    pub(super) fn last_key(&self, q: Queue) -> Option<QKey> {
        match self.get(q) {
            Of::Fifo(f) => f.last_key(),
            Of::Tree(_) | Of::Wait(_) => None,
        }
    }

    /// The due time of the first waiting send (the head of [`Queue::Wait`]).
    pub(super) fn wait_head(&self) -> Option<i64> {
        self.wait.first().map(|(k, _)| k.0)
    }

    /// A fresh secondary key.
    fn next_seq(&mut self) -> u64 {
        // INVARIANT: Every key handed out is one more than the last.
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    /// Takes `rec` out of its queue, if it is in one.
    pub(super) fn unqueue(&mut self, rec: &T, state: &mut impl Queued) {
        if let Some(q) = state.queue_mut().take() {
            // The caller holds a reference of its own: this one is never the last.
            drop(self.remove(q, rec));
        }
    }

    /// Takes `rec` out of its queue, if it is in one, and returns the queue's reference of it.
    pub(super) fn take_out(&mut self, rec: &T, state: &mut impl Queued) -> Option<QRef<T>> {
        let q = state.queue_mut().take()?;
        self.remove(q, rec)
    }

    /// Puts `rec` at `key` in queue `q`, moving it from where it was.
    fn enqueue(&mut self, rec: &QRef<T>, state: &mut impl Queued, q: Queue, key: QKey)
    where
        QRef<T>: Clone,
    {
        // The reference the old queue held moves to the new one.
        let held = state
            .queue_mut()
            .take()
            .and_then(|old| self.remove(old, rec))
            .unwrap_or_else(|| rec.clone());
        match self.insert(q, held, key) {
            // INVARIANT: The send is in queue `q`, which `state.queue` names.
            Ok(()) => *state.queue_mut() = Some(q),
            // Only reachable if the invariant is broken: the send is in a queue that
            // `state.queue` does not name (keys of the lists only grow: `next_seq`).
            Err(_) => pr_err!("send is in a queue already\n"),
        }
    }

    /// Puts `rec` at the end of queue `q` (not [`Queue::Wait`]: see [`Queues::wait`]), moving
    /// it from where it was.
    pub(super) fn push(&mut self, rec: &QRef<T>, state: &mut impl Queued, q: Queue)
    where
        QRef<T>: Clone,
    {
        let k = (0, self.next_seq());
        self.enqueue(rec, state, q, k);
    }

    /// Puts `rec` in the wait queue, due at `due` (after the sends due before or at it),
    /// moving it from where it was.
    pub(super) fn wait(&mut self, rec: &QRef<T>, state: &mut impl Queued, due: i64)
    where
        QRef<T>: Clone,
    {
        // Among equal due times the send queued later comes first.
        let k = (due, u64::MAX - self.next_seq());
        self.enqueue(rec, state, Queue::Wait, k);
    }

    /// Where `rec` is in the C layer's list order: its queue and its key there.
    pub(super) fn position(&self, rec: &T, state: &impl Queued) -> Option<(Queue, QKey)> {
        let q = state.queue()?;
        let k = match self.get(q) {
            Of::Tree(t) => t.key_of(rec),
            Of::Fifo(f) => f.key_of(rec),
            Of::Wait(w) => w.key_of(rec),
        };
        Some((q, k?))
    }

    /// Puts `rec` in the TID index (at its post).
    pub(super) fn track(&mut self, rec: &QRef<T>, state: &impl Queued)
    where
        QRef<T>: Clone,
    {
        if self
            .tids
            .insert(T::tid_ref(rec.clone()), state.tid_key())
            .is_err()
        {
            // Only reachable if the invariant is broken: a send is posted once at a time.
            pr_err!("send is in the TID index already\n");
        }
    }

    /// Removes `rec` from the TID index, if it is in it.
    pub(super) fn untrack(&mut self, rec: &T) {
        // The caller holds a reference of its own: this one is never the last.
        drop(self.tids.remove(rec));
    }

    /// The TID index, to look a response's send up in.
    pub(super) fn tids(&self) -> &TidIndex<T> {
        &self.tids
    }
}
