// SPDX-License-Identifier: GPL-2.0

//! The wait queue: the sends waiting for a response, in the order of their due times.
//!
//! Due times mostly come in order: the sends of an agent that share a timeout are due in the
//! order they began to wait, as the C layer's append to its wait list assumes. Such a run is
//! kept in a list ([`crate::sys::fifo`]), where a send is linked and unlinked with a few
//! pointer writes; a send due before the list's last goes to a tree ([`crate::sys::rbtree`]).
//! The queue's order is the merge of the two, by key. One list: each more one costs every
//! operation a look at it, which cost a timeout more than the tree it saves (issue 42: with
//! four lists a timeout took 825 instructions, with one 750, with the tree alone 802).

use crate::sys::{
    fifo::Fifo,
    rbtree::{
        Borrowed,
        Tree, //
        TreeItem,
    },
};

/// A key of the wait queue: the due time, and a number that tells sends of one due time
/// apart (unique).
type Key = (i64, u64);

/// A key and a send of the wait queue, borrowed from it.
type Entry<'a, T, const ID: u64> = (Key, Borrowed<'a, T, ID>);

/// The earlier of two entries (a key and a borrowed send) by key, either of which may be
/// missing.
fn earlier<B>(a: Option<(Key, B)>, b: Option<(Key, B)>) -> Option<(Key, B)> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y.0 < x.0 { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Sends (`T`s, through their links of kind `ID`) by due time (see the module's
/// documentation). Generic, as the list and the tree are, so that it knows nothing of a send.
///
/// # Invariants
///
/// The list's keys are non-decreasing (a [`Fifo`]'s own invariant); a send is in at most
/// one of the list and the tree (they share the send's links).
pub(crate) struct WaitQueue<T: TreeItem<ID, Key = Key>, const ID: u64> {
    list: Fifo<T, ID>,
    tree: Tree<T, ID>,
}

impl<T: TreeItem<ID, Key = Key>, const ID: u64> WaitQueue<T, ID> {
    /// An empty queue.
    pub(super) fn new() -> Self {
        Self {
            list: Fifo::new(),
            tree: Tree::new(),
        }
    }

    /// Whether no send waits.
    pub(super) fn is_empty(&self) -> bool {
        self.list.is_empty() && self.tree.is_empty()
    }

    /// Puts `held` at `key`: at the end of the list if it comes in order there, else in the
    /// tree. Gives it back if it is in a queue already.
    #[inline(always)]
    pub(super) fn insert(&mut self, held: T::Ref, key: Key) -> Result<(), T::Ref> {
        if self.list.last_key().is_none_or(|last| last <= key) {
            self.list.push_back(held, key)
        } else {
            self.tree.insert(held, key)
        }
    }

    /// Takes `rec` out, with the queue's reference; `None` if the queue does not hold it.
    #[inline(always)]
    pub(super) fn remove(&mut self, rec: &T) -> Option<T::Ref> {
        self.list.remove(rec).or_else(|| self.tree.remove(rec))
    }

    /// The key of `rec`; `None` if the queue does not hold it.
    pub(super) fn key_of(&self, rec: &T) -> Option<Key> {
        self.list.key_of(rec).or_else(|| self.tree.key_of(rec))
    }

    /// The first send and its key.
    pub(super) fn first(&self) -> Option<Entry<'_, T, ID>> {
        earlier(self.list.first(), self.tree.first())
    }

    /// The first send whose key is not below `bound`, and its key.
    pub(super) fn lower_bound(&self, bound: &Key) -> Option<Entry<'_, T, ID>> {
        earlier(self.list.lower_bound(bound), self.tree.lower_bound(bound))
    }

    /// The send after `rec`, and its key; `None` at the end or if the queue does not hold
    /// `rec`. Keys are unique (their second part is a sequence number), so the send after
    /// `rec` is the earlier of its successor where it is and the first of the other at or past
    /// its key plus one (a walk of the list from its head, short when the sends before `rec`
    /// have left, as they have in every walk of the wait queue: expiry, cancel-all,
    /// unregistration).
    pub(super) fn next(&self, rec: &T) -> Option<Entry<'_, T, ID>> {
        if let Some(k) = self.list.key_of(rec) {
            let past = (k.0, k.1.saturating_add(1));
            return earlier(self.list.next(rec), self.tree.lower_bound(&past));
        }
        let k = self.tree.key_of(rec)?;
        let past = (k.0, k.1.saturating_add(1));
        earlier(self.tree.next(rec), self.list.lower_bound(&past))
    }
}
