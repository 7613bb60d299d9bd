// SPDX-License-Identifier: GPL-2.0

//! Intrusive red-black trees of `Arc`s: the kernel's `rb_node` lives in the item, so inserting
//! and removing allocate nothing.
//!
//! The kernel crate's [`kernel::rbtree::RBTree`] allocates a node per entry; a send buffer would
//! need one per index it is in, allocated with the buffer and carried along. Here, as with the
//! kernel crate's `List` and `ListLinks`, an item has a [`Links`] field per tree it can be in;
//! a [`Tree`] owns a reference of each item it holds, ordered by a key kept in the item's links.
//!
//! - Removing an item is O(1) amortised (no search: the item names its node); finding the first
//!   or the last item is O(1) (both are cached); inserting is O(log n), and O(1) amortised when
//!   the key is not below the last one (a queue in FIFO or expiry order).
//! - Equal keys are kept in insertion order.
//! - An item is in at most one tree per [`Links`] field at a time: its links record which tree
//!   holds them, so an insert into a second tree fails and a remove from a tree that does not
//!   hold the item finds nothing. Every operation is safe.
//!
//! # Examples
//!
//! ```ignore
//! #[pin_data]
//! struct Item {
//!     #[pin]
//!     links: Links<u64>,
//! }
//! // SAFETY: `links` returns the field `links`, `from_links` is its inverse; the trees of
//! // `Item`s are used by one thread.
//! unsafe impl TreeItem<0> for Item {
//!     type Key = u64;
//!     type Ref = Arc<Item>;
//!     fn links(&self) -> &Links<u64> {
//!         &self.links
//!     }
//!     unsafe fn from_links(l: *const Links<u64>) -> *const Self {
//!         // SAFETY: `l` is the `links` field of an `Item` (the caller's promise).
//!         unsafe { kernel::container_of!(l, Self, links) }
//!     }
//! }
//! let mut t = Tree::<Item, 0>::new();
//! t.insert(item.clone(), 7).map_err(|_| EBUSY)?;
//! assert_eq!(t.remove(&item).is_some(), true);
//! ```

use core::{
    cell::UnsafeCell,
    marker::PhantomData,
    mem::MaybeUninit,
    ops::Deref,
    ptr, //
};
use kernel::{
    bindings,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
        ArcBorrow, //
    },
    types::Opaque,
};

/// A borrow of an item of a tree of `T`s of kind `ID`.
pub(crate) type Borrowed<'a, T, const ID: u64> =
    <<T as TreeItem<ID>>::Ref as TreeRef>::Borrowed<'a>;

/// Source of tree ids; 0 means "in no tree".
static NEXT_ID: Atomic<u64> = Atomic::new(1);

/// The links of an item in one kind of tree: the kernel's `rb_node` and the item's key there.
///
/// # Invariants
///
/// - `owner` is 0 while the links are in no tree, and the id of the [`Tree`] that holds them
///   otherwise.
/// - While `owner` is a tree's id, `node` is linked into that tree, `key` is initialised, and
///   both are read and written only by that tree's methods.
/// - `owner` is read and written only by the methods of the containers (trees and lists) of
///   this kind of links, which the item's [`TreeItem`] implementation promises never run at
///   the same time on one item's links: a plain field, where an atomic would cost every move
///   a call of a C helper (issue 42: "plain fields under the agent's lock").
#[pin_data]
pub(crate) struct Links<K> {
    #[pin]
    node: Opaque<bindings::rb_node>,
    key: UnsafeCell<MaybeUninit<K>>,
    owner: UnsafeCell<u64>,
}

// SAFETY: The links are only touched by the tree that holds them (type invariant), through
// `&mut Tree` for writes; moving the item to another thread moves nothing a tree shares.
unsafe impl<K: Send> Send for Links<K> {}
// SAFETY: Through `&Links` only `owner` is touched outside the holding tree, by the containers
// of this kind of links, which never run at the same time on one item (type invariant, from
// `TreeItem`'s contract); the node and key are accessed through the tree, which `&`/`&mut`
// rules serialise.
unsafe impl<K: Send + Sync> Sync for Links<K> {}

impl<K> Links<K> {
    /// Links in no tree.
    pub(crate) fn new() -> impl PinInit<Self> {
        // INVARIANT: In no tree: `owner` is 0.
        pin_init!(Self {
            node: Opaque::uninit(),
            key: UnsafeCell::new(MaybeUninit::uninit()),
            owner: UnsafeCell::new(0),
        })
    }

    /// Whether the links are in a tree (or a [`crate::sys::fifo::Fifo`]). For a caller that
    /// no container of this kind of links runs beside (the suites').
    #[cfg_attr(not(rmad_test), allow(dead_code, reason = "the tests read it"))]
    pub(crate) fn is_linked(&self) -> bool {
        self.owner() != 0
    }

    /// The id of the container that holds the links, 0 if none.
    fn owner(&self) -> u64 {
        // SAFETY: Only the containers of this kind of links write `owner`, never at the same
        // time as this read (type invariant).
        unsafe { *self.owner.get() }
    }

    /// A fresh id for a container of links (a tree or a list); never 0, never given twice
    /// (a u64 does not wrap).
    pub(super) fn new_owner_id() -> u64 {
        NEXT_ID.fetch_add(1, Relaxed)
    }

    /// Takes the links for the container `id`: `false` if another container holds them.
    pub(super) fn claim(&self, id: u64) -> bool {
        if self.owner() != 0 {
            return false;
        }
        // SAFETY: As in `owner`: no other container of this kind runs on these links now.
        unsafe { *self.owner.get() = id };
        true
    }

    /// Whether the container `id` holds the links.
    pub(super) fn is_held_by(&self, id: u64) -> bool {
        self.owner() == id
    }

    /// Gives the links up: in no container from now on.
    pub(super) fn release(&self) {
        // INVARIANT: In no container: owner 0.
        // SAFETY: As in `owner`: no other container of this kind runs on these links now.
        unsafe { *self.owner.get() = 0 };
    }

    /// The kernel's node of the links, which the container that holds them links.
    pub(super) fn node_ptr(&self) -> *mut bindings::rb_node {
        self.node.get()
    }

    /// Sets the key of the links.
    ///
    /// # Safety
    ///
    /// The caller's container just claimed the links ([`Links::claim`]) and is borrowed
    /// mutably.
    pub(super) unsafe fn set_key(&self, key: K) {
        // SAFETY: The key is read and written only by the container that holds the links
        // (type invariant), which is the caller's, borrowed mutably: nobody reads it meanwhile.
        unsafe { (*self.key.get()).write(key) };
    }

    /// The key of the links.
    ///
    /// # Safety
    ///
    /// A container holds the links (their key is initialised), and the caller borrows it.
    pub(super) unsafe fn key_unchecked(&self) -> K
    where
        K: Copy,
    {
        // SAFETY: Initialised and not written while the holder is borrowed (the caller's
        // promise).
        unsafe { (*self.key.get()).assume_init() }
    }

    /// The item of kind `ID` whose links' node is `node`.
    ///
    /// # Safety
    ///
    /// `node` is the node of the links of kind `ID` of a live `T` (held by a container).
    pub(super) unsafe fn item_of<T: TreeItem<ID, Key = K>, const ID: u64>(
        node: *mut bindings::rb_node,
    ) -> *const T {
        // SAFETY: `node` is the `node` field of links (the caller's promise);
        // `Opaque<rb_node>` is `repr(transparent)` over `rb_node`.
        let links = unsafe {
            kernel::container_of!(node.cast::<Opaque<bindings::rb_node>>(), Links<K>, node)
        };
        // SAFETY: `links` are the links of kind `ID` of a live item (the caller's promise).
        unsafe { T::from_links(links) }
    }
}

/// A counted reference that a [`Tree`] can hold as a raw pointer: `Arc<T>`, or a type of
/// rmad's own (a send's record, [`crate::engine::send::SendRef`]).
///
/// # Safety
///
/// `into_raw` gives up one reference for a pointer to the item, `from_raw` takes back one that
/// `into_raw` gave up; `borrow` makes a value that derefs to the item for as long as a
/// reference of it is held elsewhere, and converts into a reference of its own.
pub(crate) unsafe trait TreeRef: Deref + Sized {
    /// A borrow of an item whose reference the tree holds.
    type Borrowed<'a>: Deref<Target = Self::Target> + Into<Self>
    where
        Self: 'a;

    /// Gives up this reference for a pointer to the item.
    fn into_raw(self) -> *const Self::Target;

    /// Takes back a reference that [`TreeRef::into_raw`] gave up.
    ///
    /// # Safety
    ///
    /// `ptr` came from `into_raw`, and is taken back once.
    unsafe fn from_raw(ptr: *const Self::Target) -> Self;

    /// A borrow of the item at `ptr`.
    ///
    /// # Safety
    ///
    /// A reference of the item is held, elsewhere, for `'a`.
    unsafe fn borrow<'a>(ptr: *const Self::Target) -> Self::Borrowed<'a>
    where
        Self: 'a;
}

// SAFETY: `Arc`'s own raw conversions and borrow, which keep its count as the trait requires.
unsafe impl<T> TreeRef for Arc<T> {
    type Borrowed<'a>
        = ArcBorrow<'a, T>
    where
        T: 'a;

    fn into_raw(self) -> *const T {
        Arc::into_raw(self)
    }

    unsafe fn from_raw(ptr: *const T) -> Self {
        // SAFETY: The caller's promise is `Arc::from_raw`'s.
        unsafe { Arc::from_raw(ptr) }
    }

    unsafe fn borrow<'a>(ptr: *const T) -> ArcBorrow<'a, T>
    where
        T: 'a,
    {
        // SAFETY: `ptr` came from `Arc::into_raw` and a reference is held for `'a` (the
        // caller's promise).
        unsafe { ArcBorrow::from_raw(ptr) }
    }
}

/// A type whose references can be in a [`Tree`] of kind `ID`, through one of its [`Links`].
///
/// # Safety
///
/// `links` returns the same field of `self` every time, a field that never moves while the item
/// is referenced (it is structurally pinned); `from_links` is its inverse: given a pointer to
/// that field of an item, it returns a pointer to the item. The containers (trees and
/// [`crate::sys::fifo::Fifo`]s) that are ever asked to hold or release one item through these
/// links never run at the same time: they are used under one lock, or by one thread.
pub(crate) unsafe trait TreeItem<const ID: u64>: Sized {
    /// The key the tree orders its items by.
    type Key: Ord + Copy;

    /// The counted reference the tree holds of each item.
    type Ref: TreeRef<Target = Self>;

    /// The links of kind `ID`.
    fn links(&self) -> &Links<Self::Key>;

    /// The item whose links of kind `ID` are at `links`.
    ///
    /// # Safety
    ///
    /// `links` is the address of the links of kind `ID` of a live item.
    unsafe fn from_links(links: *const Links<Self::Key>) -> *const Self;
}

/// An ordered set of references of `T`s, linked through `T`'s links of kind `ID`.
///
/// # Invariants
///
/// - `id` is unique among trees and not 0.
/// - Every node in `root` is the `node` of the links of kind `ID` of an item whose `owner` is
///   `id`, and the tree owns one reference of that item (from [`TreeRef::into_raw`]); `len` counts
///   them.
/// - In-order, the keys are non-decreasing, and items of equal keys are in insertion order.
/// - `first` and `last` are the leftmost and rightmost nodes (null when empty).
pub(crate) struct Tree<T: TreeItem<ID>, const ID: u64> {
    root: bindings::rb_root,
    first: *mut bindings::rb_node,
    last: *mut bindings::rb_node,
    len: usize,
    id: u64,
    _p: PhantomData<T::Ref>,
}

// SAFETY: The tree owns references of `T`s; sending it sends them.
unsafe impl<T: TreeItem<ID> + Send + Sync, const ID: u64> Send for Tree<T, ID> {}
// SAFETY: Through `&Tree` the items are only read.
unsafe impl<T: TreeItem<ID> + Send + Sync, const ID: u64> Sync for Tree<T, ID> {}

impl<T: TreeItem<ID>, const ID: u64> Tree<T, ID> {
    /// An empty tree.
    pub(crate) fn new() -> Self {
        // INVARIANT: A fresh id (a u64 does not wrap), and no node.
        Self {
            root: bindings::rb_root {
                rb_node: ptr::null_mut(),
            },
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

    /// Whether the tree holds no item.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The item whose node is `node`.
    ///
    /// # Safety
    ///
    /// `node` is a node of this tree.
    unsafe fn item(node: *mut bindings::rb_node) -> *const T {
        // SAFETY: `node` is in this tree (the caller's promise), so it is the node of the
        // links of kind `ID` of a live item (type invariant).
        unsafe { Links::<T::Key>::item_of::<T, ID>(node) }
    }

    /// The key of the item whose node is `node`.
    ///
    /// # Safety
    ///
    /// `node` is a node of this tree.
    unsafe fn key(node: *mut bindings::rb_node) -> T::Key {
        // SAFETY: `node` is in this tree (caller's promise): its item is live, and its key is
        // initialised and not written while the tree is borrowed (type invariant).
        unsafe { key_at::<T, ID>(node) }
    }

    /// A borrow of the item whose node is `node`, for as long as the tree is borrowed.
    ///
    /// # Safety
    ///
    /// `node` is a node of this tree.
    unsafe fn borrow(&self, node: *mut bindings::rb_node) -> Borrowed<'_, T, ID> {
        // SAFETY: The tree owns a reference of the item (type invariant), which it gives up
        // only through `&mut self`: the item lives as long as this borrow of the tree.
        unsafe { T::Ref::borrow(Self::item(node)) }
    }

    /// Inserts `item` under `key`, after the items of equal keys. Fails, giving `item` back,
    /// if it is in a tree of this kind already.
    // Inlined into its few callers: a call costs a move into a tree 50 instructions.
    #[inline(always)]
    pub(crate) fn insert(&mut self, item: T::Ref, key: T::Key) -> Result<(), T::Ref> {
        let links = item.links();
        if !links.claim(self.id) {
            return Err(item);
        }
        // SAFETY: The links are this tree's now, and it is borrowed mutably.
        unsafe { links.set_key(key) };
        let node = links.node_ptr();
        // SAFETY: The tree's nodes are those of live items of kind `ID` (type invariant),
        // `last` its rightmost; `node` is in no tree (its owner was 0), its key just set.
        let (leftmost, rightmost) =
            unsafe { link_in_order::<T, ID>(&raw mut self.root, self.last, node, key) };
        if leftmost {
            self.first = node;
        }
        if rightmost {
            self.last = node;
        }
        self.len = self.len.saturating_add(1);
        // INVARIANT: The tree owns the reference given up here; the owner is this tree; the
        // key's place keeps the order, after equal keys.
        let _ = item.into_raw();
        Ok(())
    }

    /// Removes `item` and returns the tree's reference of it; `None` if this tree does not
    /// hold it.
    #[inline]
    pub(crate) fn remove(&mut self, item: &T) -> Option<T::Ref> {
        let links = item.links();
        if !links.is_held_by(self.id) {
            return None;
        }
        let node = links.node_ptr();
        if node == self.first {
            // SAFETY: `node` is in this tree.
            self.first = unsafe { bindings::rb_next(node) };
        }
        if node == self.last {
            // SAFETY: `node` is in this tree.
            self.last = unsafe { bindings::rb_prev(node) };
        }
        // SAFETY: `node` is in this tree.
        unsafe { bindings::rb_erase(node, &raw mut self.root) };
        self.len = self.len.saturating_sub(1);
        // INVARIANT: Out of the tree: owner 0, and the tree's reference goes to the caller.
        links.release();
        // SAFETY: The tree owned one reference of `item`, from `TreeRef::into_raw`.
        Some(unsafe { T::Ref::from_raw(ptr::from_ref(item)) })
    }

    /// The key of `item` in this tree; `None` if this tree does not hold it.
    pub(crate) fn key_of(&self, item: &T) -> Option<T::Key> {
        let links = item.links();
        // SAFETY: The item is in this tree (checked first): its key is initialised, and
        // written only through `&mut self`.
        links
            .is_held_by(self.id)
            .then(|| unsafe { links.key_unchecked() })
    }

    /// The first item and its key.
    pub(crate) fn first(&self) -> Option<(T::Key, Borrowed<'_, T, ID>)> {
        if self.first.is_null() {
            return None;
        }
        // SAFETY: `first` is a node of this tree (type invariant).
        Some(unsafe { (Self::key(self.first), self.borrow(self.first)) })
    }

    /// The first item whose key is not below `key`, and its key.
    pub(crate) fn lower_bound(&self, key: &T::Key) -> Option<(T::Key, Borrowed<'_, T, ID>)> {
        let mut node = self.root.rb_node;
        let mut best = ptr::null_mut();
        while !node.is_null() {
            // SAFETY: `node` is a node of this tree.
            if unsafe { Self::key(node) } >= *key {
                best = node;
                // SAFETY: As above.
                node = unsafe { (*node).rb_left };
            } else {
                // SAFETY: As above.
                node = unsafe { (*node).rb_right };
            }
        }
        if best.is_null() {
            return None;
        }
        // SAFETY: `best` is a node of this tree.
        Some(unsafe { (Self::key(best), self.borrow(best)) })
    }

    /// The item after `item`, and its key; `None` at the end or if this tree does not hold
    /// `item`.
    pub(crate) fn next(&self, item: &T) -> Option<(T::Key, Borrowed<'_, T, ID>)> {
        self.key_of(item)?;
        // SAFETY: `item` is in this tree (just checked), so its node is.
        let next = unsafe { bindings::rb_next(item.links().node.get()) };
        if next.is_null() {
            return None;
        }
        // SAFETY: The successor of a node of this tree is one.
        Some(unsafe { (Self::key(next), self.borrow(next)) })
    }
}

impl<T: TreeItem<ID>, const ID: u64> Default for Tree<T, ID> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: TreeItem<ID>, const ID: u64> Drop for Tree<T, ID> {
    /// Gives up the tree's reference of each item it still holds.
    fn drop(&mut self) {
        // SAFETY: The tree's nodes are those of live items of kind `ID` whose references it
        // owns (type invariant), and nothing reads them after this.
        unsafe { release_all::<T, ID>(&self.root) };
    }
}

/// The key of the item whose node of kind `ID` is `node`.
///
/// # Safety
///
/// `node` is the node of the links of kind `ID` of a live `T`, held by a container that the
/// caller borrows (its key is initialised and not written meanwhile).
pub(super) unsafe fn key_at<T: TreeItem<ID>, const ID: u64>(
    node: *mut bindings::rb_node,
) -> T::Key {
    // SAFETY: The caller's promise.
    unsafe {
        (*Links::<T::Key>::item_of::<T, ID>(node))
            .links()
            .key_unchecked()
    }
}

/// Links `node`, under `key`, into the red-black tree at `root` after the nodes of equal keys,
/// and rebalances. `last` is the tree's rightmost node (or null), tried first: a key not below
/// its key goes right after it without a descent (a queue in FIFO or expiry order, TIDs
/// counted up). Returns whether `node` is now the leftmost node and the rightmost.
///
/// # Safety
///
/// The nodes of `root` are those of the links of kind `ID` of live `T`s, held by the caller's
/// container, borrowed mutably; `last` is its rightmost node or null; `node` is the node of
/// links of kind `ID` that the caller's container just claimed and set to `key`.
// Inlined into its callers: a call costs a move into a tree 50 instructions.
#[inline(always)]
pub(super) unsafe fn link_in_order<T: TreeItem<ID>, const ID: u64>(
    root: *mut bindings::rb_root,
    last: *mut bindings::rb_node,
    node: *mut bindings::rb_node,
    key: T::Key,
) -> (bool, bool) {
    let mut parent = ptr::null_mut();
    // SAFETY: `root` is valid (the caller's promise).
    let mut link: *mut *mut bindings::rb_node = unsafe { &raw mut (*root).rb_node };
    let (mut leftmost, mut rightmost) = (true, true);
    // SAFETY: `last` is a node of the tree when not null.
    if !last.is_null() && unsafe { key_at::<T, ID>(last) } <= key {
        parent = last;
        // SAFETY: `parent` is a node of the tree; the right child of the rightmost node is
        // empty.
        link = unsafe { &raw mut (*parent).rb_right };
        leftmost = false;
    } else {
        // SAFETY: `link` points at the root or at a child field of a node of the tree.
        while !unsafe { *link }.is_null() {
            // SAFETY: As above.
            parent = unsafe { *link };
            // SAFETY: `parent` is a node of the tree; equal keys go right, after the ones
            // there.
            if key < unsafe { key_at::<T, ID>(parent) } {
                // SAFETY: As above.
                link = unsafe { &raw mut (*parent).rb_left };
                rightmost = false;
            } else {
                // SAFETY: As above.
                link = unsafe { &raw mut (*parent).rb_right };
                leftmost = false;
            }
        }
    }
    // SAFETY: `node` is in no tree (the caller's promise); `parent` and `link` are the place
    // found above, an empty child of `parent` (or the empty root).
    unsafe {
        bindings::rb_link_node(node, parent, link);
        bindings::rb_insert_color(node, root);
    }
    (leftmost, rightmost)
}

/// Gives up the reference of each item in the red-black tree at `root`, and frees its links.
///
/// # Safety
///
/// The nodes of `root` are those of the links of kind `ID` of live `T`s, each holding one
/// reference (from [`TreeRef::into_raw`]) that the caller's container owns; nothing reads the
/// tree after this.
pub(super) unsafe fn release_all<T: TreeItem<ID>, const ID: u64>(root: *const bindings::rb_root) {
    // SAFETY: `root` is a valid tree (the caller's promise).
    let mut next = unsafe { bindings::rb_first_postorder(root) };
    while !next.is_null() {
        let node = next;
        // In post-order a node comes after its children: computing the next one reads only
        // nodes still in place.
        // SAFETY: `node` is a node of the tree.
        next = unsafe { bindings::rb_next_postorder(node) };
        // SAFETY: As above: its item is live.
        let item = unsafe { Links::<T::Key>::item_of::<T, ID>(node) };
        // SAFETY: As above.
        unsafe { (*item).links().release() };
        // SAFETY: The container owned one reference of the item, from `TreeRef::into_raw`.
        drop(unsafe { T::Ref::from_raw(item) });
    }
}
