// SPDX-License-Identifier: GPL-2.0

//! Intrusive FIFO lists through the same [`Links`] as [`crate::sys::rbtree`]'s trees: for a
//! queue whose items arrive in key order, a doubly linked list does what a tree does at a
//! fraction of the cost (an append and a removal are a few pointer writes, where a tree
//! rebalances).
//!
//! An item's links are in at most one container of their kind at a time, tree or list: both
//! take their ids from one source and record the holder in the links, so an item can move
//! between a [`Tree`](crate::sys::rbtree::Tree) and a [`Fifo`] of the same kind of links, and
//! an insert into a second container fails. A list keeps each item's key in its links, as a
//! tree does, so that a reader can compare positions across containers.
//!
//! The kernel crate's `List` holds `ListArc`s of the kernel's `Arc`; a send's record is counted
//! by a reference of rmad's own ([`crate::engine::send::SendRef`]), which a [`TreeRef`] covers.

use super::rbtree::{
    Borrowed,
    Links,
    TreeItem,
    TreeRef, //
};
use core::{
    marker::PhantomData,
    ptr, //
};
use kernel::{
    bindings,
    prelude::*, //
};

/// A list of references of `T`s in key order, linked through `T`'s links of kind `ID`: the
/// links' `rb_node` holds the previous item's node (`rb_left`) and the next one's (`rb_right`).
///
/// # Invariants
///
/// - `id` is unique among trees and lists, and not 0.
/// - The nodes from `first`, following `rb_right`, are the `node`s of the links of kind `ID`
///   of the items whose `owner` is `id`, `len` of them, ending with `last`; `rb_left` links
///   them back; the list owns one reference of each item (from [`TreeRef::into_raw`]).
/// - Following `rb_right`, the keys are non-decreasing.
pub(crate) struct Fifo<T: TreeItem<ID>, const ID: u64> {
    first: *mut bindings::rb_node,
    last: *mut bindings::rb_node,
    len: usize,
    id: u64,
    _p: PhantomData<T::Ref>,
}

// SAFETY: The list owns references of `T`s; sending it sends them.
unsafe impl<T: TreeItem<ID> + Send + Sync, const ID: u64> Send for Fifo<T, ID> {}
// SAFETY: Through `&Fifo` the items are only read.
unsafe impl<T: TreeItem<ID> + Send + Sync, const ID: u64> Sync for Fifo<T, ID> {}

impl<T: TreeItem<ID>, const ID: u64> Fifo<T, ID> {
    /// An empty list.
    pub(crate) fn new() -> Self {
        // INVARIANT: A fresh id from the trees' source, and no node.
        Self {
            first: ptr::null_mut(),
            last: ptr::null_mut(),
            len: 0,
            id: Links::<T::Key>::new_owner_id(),
            _p: PhantomData,
        }
    }

    /// The number of items.
    #[cfg_attr(not(rmad_test), allow(dead_code, reason = "the tests read it"))]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether the list holds no item.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The key and a borrow of the item whose node is `node`, for as long as the list is
    /// borrowed.
    ///
    /// # Safety
    ///
    /// `node` is a node of this list.
    unsafe fn entry(&self, node: *mut bindings::rb_node) -> (T::Key, Borrowed<'_, T, ID>) {
        // SAFETY: `node` is in this list (the caller's promise), so it is the node of the
        // links of kind `ID` of a live item (type invariant), whose key the list wrote.
        let item = unsafe { Links::<T::Key>::item_of::<T, ID>(node) };
        // SAFETY: As above; the list owns a reference of the item, which it gives up only
        // through `&mut self`: the item lives as long as this borrow of the list.
        unsafe { ((*item).links().key_unchecked(), T::Ref::borrow(item)) }
    }

    /// Appends `item` under `key`. Fails, giving `item` back, if it is in a tree or list of
    /// this kind already, or if `key` is below the last item's (the list keeps key order).
    #[inline]
    pub(crate) fn push_back(&mut self, item: T::Ref, key: T::Key) -> Result<(), T::Ref> {
        if self.last_key().is_some_and(|last| key < last) {
            return Err(item);
        }
        let links = item.links();
        if !links.claim(self.id) {
            return Err(item);
        }
        // SAFETY: The links are this list's now, and it is borrowed mutably.
        unsafe { links.set_key(key) };
        let node = links.node_ptr();
        // SAFETY: `node` is this list's now; `last`, when not null, is its last node.
        unsafe {
            (*node).rb_left = self.last;
            (*node).rb_right = ptr::null_mut();
            if self.last.is_null() {
                self.first = node;
            } else {
                (*self.last).rb_right = node;
            }
        }
        self.last = node;
        self.len = self.len.saturating_add(1);
        // INVARIANT: The list owns the reference given up here; the owner is this list; the
        // key is not below the one before it.
        let _ = item.into_raw();
        Ok(())
    }

    /// Removes `item` and returns the list's reference of it; `None` if this list does not
    /// hold it.
    #[inline]
    pub(crate) fn remove(&mut self, item: &T) -> Option<T::Ref> {
        let links = item.links();
        if !links.is_held_by(self.id) {
            return None;
        }
        let node = links.node_ptr();
        // SAFETY: `node` is in this list; its neighbours, when not null, are too.
        unsafe {
            let (prev, next) = ((*node).rb_left, (*node).rb_right);
            if prev.is_null() {
                self.first = next;
            } else {
                (*prev).rb_right = next;
            }
            if next.is_null() {
                self.last = prev;
            } else {
                (*next).rb_left = prev;
            }
        }
        self.len = self.len.saturating_sub(1);
        // INVARIANT: Out of the list: owner 0, and the list's reference goes to the caller.
        links.release();
        // SAFETY: The list owned one reference of `item`, from `TreeRef::into_raw`.
        Some(unsafe { T::Ref::from_raw(ptr::from_ref(item)) })
    }

    /// The key of `item` in this list; `None` if this list does not hold it.
    pub(crate) fn key_of(&self, item: &T) -> Option<T::Key> {
        let links = item.links();
        // SAFETY: The item is in this list (checked first): its key is initialised, and
        // written only through `&mut self`.
        links
            .is_held_by(self.id)
            .then(|| unsafe { links.key_unchecked() })
    }

    /// The key of the last item.
    pub(crate) fn last_key(&self) -> Option<T::Key> {
        // SAFETY: `last` is a node of this list when not null.
        (!self.last.is_null()).then(|| unsafe { self.entry(self.last).0 })
    }

    /// The first item and its key.
    pub(crate) fn first(&self) -> Option<(T::Key, Borrowed<'_, T, ID>)> {
        // SAFETY: `first` is a node of this list when not null.
        (!self.first.is_null()).then(|| unsafe { self.entry(self.first) })
    }

    /// The first item whose key is not below `key`, and its key: a walk from the head, for
    /// the rare reader that resumes a walk from a key (see [`Fifo::next`] for one that holds
    /// the item it stopped at).
    pub(crate) fn lower_bound(&self, key: &T::Key) -> Option<(T::Key, Borrowed<'_, T, ID>)> {
        let mut node = self.first;
        while !node.is_null() {
            // SAFETY: `node` is a node of this list.
            let (k, it) = unsafe { self.entry(node) };
            if k >= *key {
                return Some((k, it));
            }
            // SAFETY: As above.
            node = unsafe { (*node).rb_right };
        }
        None
    }

    /// The item after `item`, and its key; `None` at the end or if this list does not hold
    /// `item`.
    pub(crate) fn next(&self, item: &T) -> Option<(T::Key, Borrowed<'_, T, ID>)> {
        self.key_of(item)?;
        // SAFETY: `item` is in this list (just checked), so its node is.
        let next = unsafe { (*item.links().node_ptr()).rb_right };
        // SAFETY: The successor of a node of this list is one.
        (!next.is_null()).then(|| unsafe { self.entry(next) })
    }
}

impl<T: TreeItem<ID>, const ID: u64> Default for Fifo<T, ID> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: TreeItem<ID>, const ID: u64> Drop for Fifo<T, ID> {
    /// Gives up the list's reference of each item it still holds.
    fn drop(&mut self) {
        let mut node = self.first;
        while !node.is_null() {
            // SAFETY: `node` is a node of this list: its item is live (the list holds a
            // reference of it), and its successor is read before that reference goes.
            let item = unsafe {
                let item = Links::<T::Key>::item_of::<T, ID>(node);
                node = (*node).rb_right;
                item
            };
            // SAFETY: As above.
            unsafe { (*item).links().release() };
            // SAFETY: The list owned one reference of the item, from `TreeRef::into_raw`;
            // nothing reads the list's nodes after this loop.
            drop(unsafe { T::Ref::from_raw(item) });
        }
    }
}
