// SPDX-License-Identifier: GPL-2.0

//! An intrusive index by key: a fixed array of small red-black trees, a key's bucket chosen
//! by its hash, linked through the same [`Links`] as [`crate::sys::rbtree`]'s trees.
//!
//! One tree of every item costs each insert a descent past log2(n) nodes and a rebalance,
//! and each removal a rebalance and the upkeep of the cached first node. An index that is
//! only ever searched for one key at a time does not need one order over every item: spread
//! over `B` buckets, an insert or a removal usually meets an empty or one-node tree (a few
//! pointer writes), and a bucket that many keys share is still a tree, so the worst case stays
//! O(log n). Each bucket remembers its last node, so that keys that only grow (TIDs counted
//! up) are appended without a descent, as in a [`crate::sys::rbtree::Tree`]. Nothing is
//! allocated: the buckets are part of the index, the nodes of the items.
//!
//! Items of equal keys are kept in insertion order, as in a [`crate::sys::rbtree::Tree`].

use super::rbtree::{
    key_at,
    link_in_order,
    release_all,
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

/// A key that [`Buckets`] can spread over its buckets.
pub(crate) trait BucketKey: Ord + Copy {
    /// The key's bits, mixed so that its high bits depend on all of them (the buckets take
    /// the high bits).
    fn hash(&self) -> u64;
}

/// One bucket: a red-black tree and its rightmost node.
struct Bucket {
    root: bindings::rb_root,
    last: *mut bindings::rb_node,
}

/// Fibonacci hashing's multiplier, 2^64 divided by the golden ratio: a product's high bits
/// depend on every bit of the factor, so keys that differ only in low bits (TIDs counted up
/// by one) land in different buckets.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

impl BucketKey for (u64, u8) {
    fn hash(&self) -> u64 {
        (self.0 ^ u64::from(self.1).rotate_right(8)).wrapping_mul(GOLDEN)
    }
}

impl BucketKey for u32 {
    fn hash(&self) -> u64 {
        u64::from(*self).wrapping_mul(GOLDEN)
    }
}

/// An index of references of `T`s by key, over `B` buckets (a power of two), linked through
/// `T`'s links of kind `ID`.
///
/// # Invariants
///
/// - `id` is unique among trees, lists and indexes, and not 0.
/// - Every node in `buckets[i]` is the `node` of the links of kind `ID` of an item whose
///   `owner` is `id` and whose key hashes to bucket `i` ([`Buckets::bucket_of`]); the index
///   owns one reference of that item (from [`TreeRef::into_raw`]); `len` counts them.
/// - In-order within a bucket, the keys are non-decreasing, and items of equal keys are in
///   insertion order; the bucket's `last` is its rightmost node (null when it is empty).
pub(crate) struct Buckets<T: TreeItem<ID>, const ID: u64, const B: usize> {
    buckets: [Bucket; B],
    len: usize,
    id: u64,
    _p: PhantomData<T::Ref>,
}

// SAFETY: The index owns references of `T`s; sending it sends them.
unsafe impl<T: TreeItem<ID> + Send + Sync, const ID: u64, const B: usize> Send
    for Buckets<T, ID, B>
{
}
// SAFETY: Through `&Buckets` the items are only read.
unsafe impl<T: TreeItem<ID> + Send + Sync, const ID: u64, const B: usize> Sync
    for Buckets<T, ID, B>
{
}

impl<T: TreeItem<ID>, const ID: u64, const B: usize> Buckets<T, ID, B>
where
    T::Key: BucketKey,
{
    /// Bits of the hash that choose a bucket.
    const BITS: u32 = {
        assert!(B.is_power_of_two() && B > 1);
        B.trailing_zeros()
    };

    /// An empty index.
    pub(crate) fn new() -> Self {
        // INVARIANT: A fresh id (a u64 does not wrap), and no node.
        Self {
            buckets: [const {
                Bucket {
                    root: bindings::rb_root {
                        rb_node: ptr::null_mut(),
                    },
                    last: ptr::null_mut(),
                }
            }; B],
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

    /// The bucket of `key`: the high bits of its hash.
    fn bucket_of(key: &T::Key) -> usize {
        let shift = 64u32.saturating_sub(Self::BITS);
        usize::try_from(key.hash() >> shift).unwrap_or(0) & (B - 1)
    }

    /// The key and a borrow of the item whose node is `node`, for as long as the index is
    /// borrowed.
    ///
    /// # Safety
    ///
    /// `node` is a node of this index.
    unsafe fn entry(&self, node: *mut bindings::rb_node) -> (T::Key, Borrowed<'_, T, ID>) {
        // SAFETY: `node` is in this index (the caller's promise), so its item is live; the
        // index owns a reference of it, which it gives up only through `&mut self`.
        unsafe {
            let item = Links::<T::Key>::item_of::<T, ID>(node);
            ((*item).links().key_unchecked(), T::Ref::borrow(item))
        }
    }

    /// Inserts `item` under `key`, after the items of equal keys. Fails, giving `item` back,
    /// if it is in a container of this kind of links already.
    #[inline]
    pub(crate) fn insert(&mut self, item: T::Ref, key: T::Key) -> Result<(), T::Ref> {
        let links = item.links();
        if !links.claim(self.id) {
            return Err(item);
        }
        // SAFETY: The links are this index's now, and it is borrowed mutably.
        unsafe { links.set_key(key) };
        let node = links.node_ptr();
        let Some(bucket) = self.buckets.get_mut(Self::bucket_of(&key)) else {
            // Not reachable: `bucket_of` masks its result below `B`.
            links.release();
            return Err(item);
        };
        // SAFETY: The bucket's nodes are those of live items of kind `ID` (type invariant),
        // `last` its rightmost; `node` is in no container (its owner was 0), its key just set.
        let (_, rightmost) =
            unsafe { link_in_order::<T, ID>(&raw mut bucket.root, bucket.last, node, key) };
        if rightmost {
            bucket.last = node;
        }
        self.len = self.len.saturating_add(1);
        // INVARIANT: The index owns the reference given up here; the owner is this index; the
        // item is in its key's bucket, after equal keys, and `last` is the rightmost node.
        let _ = item.into_raw();
        Ok(())
    }

    /// Removes `item` and returns the index's reference of it; `None` if this index does not
    /// hold it.
    #[inline]
    pub(crate) fn remove(&mut self, item: &T) -> Option<T::Ref> {
        let links = item.links();
        if !links.is_held_by(self.id) {
            return None;
        }
        // SAFETY: The index holds the links: their key is initialised.
        let key = unsafe { links.key_unchecked() };
        let bucket = self.buckets.get_mut(Self::bucket_of(&key))?;
        let node = links.node_ptr();
        // SAFETY: The node is in the bucket of its key (type invariant).
        unsafe {
            if node == bucket.last {
                // The rightmost node has no right child: without a left one its predecessor
                // is its parent (null for a lone root, the common case), with no call.
                bucket.last = if (*node).rb_left.is_null() {
                    let parent = (*node).__rb_parent_color & !3;
                    ptr::with_exposed_provenance_mut(parent)
                } else {
                    bindings::rb_prev(node)
                };
            }
            bindings::rb_erase(node, &raw mut bucket.root);
        }
        self.len = self.len.saturating_sub(1);
        // INVARIANT: Out of the index: owner 0, and its reference goes to the caller.
        links.release();
        // SAFETY: The index owned one reference of `item`, from `TreeRef::into_raw`.
        Some(unsafe { T::Ref::from_raw(ptr::from_ref(item)) })
    }

    /// The first item (in insertion order) whose key is `key`.
    pub(crate) fn find(&self, key: &T::Key) -> Option<Borrowed<'_, T, ID>> {
        let mut node = self.buckets.get(Self::bucket_of(key))?.root.rb_node;
        let mut best = ptr::null_mut();
        while !node.is_null() {
            // SAFETY: `node` is a node of this index.
            let k = unsafe { key_at::<T, ID>(node) };
            // The leftmost of the equal keys is the first inserted.
            if k >= *key {
                if k == *key {
                    best = node;
                }
                // SAFETY: As above.
                node = unsafe { (*node).rb_left };
            } else {
                // SAFETY: As above.
                node = unsafe { (*node).rb_right };
            }
        }
        // SAFETY: `best` is a node of this index when not null.
        (!best.is_null()).then(|| unsafe { self.entry(best).1 })
    }

    /// The item after `item` whose key is the same; `None` if there is none or this index
    /// does not hold `item`.
    pub(crate) fn next_same(&self, item: &T) -> Option<Borrowed<'_, T, ID>> {
        let links = item.links();
        if !links.is_held_by(self.id) {
            return None;
        }
        // SAFETY: `item` is in this index (just checked): its key is initialised, and its
        // successor in the bucket, when not null, is a node of this index.
        unsafe {
            let key = links.key_unchecked();
            let next = bindings::rb_next(links.node_ptr());
            if next.is_null() {
                return None;
            }
            let (k, it) = self.entry(next);
            (k == key).then_some(it)
        }
    }
}

impl<T: TreeItem<ID>, const ID: u64, const B: usize> Drop for Buckets<T, ID, B> {
    /// Gives up the index's reference of each item it still holds.
    fn drop(&mut self) {
        // An agent's index is empty when it goes (its sends are flushed first): then no bucket
        // is looked at.
        if self.len == 0 {
            return;
        }
        for bucket in self.buckets.iter().filter(|b| !b.root.rb_node.is_null()) {
            // SAFETY: The bucket's nodes are those of live items of kind `ID` whose
            // references the index owns (type invariant); nothing reads them after this.
            unsafe { release_all::<T, ID>(&bucket.root) };
        }
    }
}
