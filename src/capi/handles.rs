// SPDX-License-Identifier: GPL-2.0

//! Handles of the C API: identifiers that are never given out twice, looked up in O(1)
//! without a module-wide lock.
//!
//! An address cannot serve as a handle: the allocator hands the address of a freed object to
//! the next one, so a stale handle would name a live object of someone else. A handle here is a
//! slot index plus the slot's generation. Each time an object leaves its slot the generation
//! grows by one, and a slot whose generation is exhausted is retired for good, so a handle
//! names at most one object for the life of the module and, once that object is gone, nothing
//! at all.
//!
//! # Encoding
//!
//! A handle is a 64-bit value that C sees as an opaque pointer:
//!
//! | bits   | what                                                     |
//! | ------ | -------------------------------------------------------- |
//! | 63     | 0: a handle is never a kernel address, NULL or `ERR_PTR` |
//! | 61..62 | the kind of object (agent, send buffer, receive buffer)  |
//! | 24..60 | the slot's generation                                    |
//! | 0..23  | the slot's index                                         |
//!
//! # Lookup
//!
//! Slots live in leaves of [`LEAF`] slots, reached through a two-level directory of atomic
//! pointers that only ever grows: a lookup is two acquire loads and the slot's own lock. No
//! lock is shared between objects, so operations on different objects never contend; taking
//! a slot for a new object and giving it back go through the table's free list, a lock-free
//! stack (one compare-and-swap each). Every lock here disables interrupts, so lookups work in
//! any context; a create or a free of an object holds one slot lock once (six holds per create
//! and free became three: `make bench`'s C API create + free went from 3.5 to 2.3 µs).

use core::marker::PhantomData;
use kernel::{
    alloc::Flags,
    prelude::*,
    sync::{
        atomic::{
            Acquire,
            Atomic,
            Relaxed,
            Release, //
        },
        LockClassKey, SpinLockIrq,
    },
};

/// Bits of the slot index.
const INDEX_BITS: u32 = 24;
/// Bits of the generation.
const GEN_BITS: u32 = 37;
/// Where the kind starts.
pub(crate) const KIND_SHIFT: u32 = INDEX_BITS + GEN_BITS;
/// Mask of the slot index.
pub(crate) const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;
/// The largest generation; a slot that reaches it is retired.
pub(crate) const GEN_MAX: u64 = (1 << GEN_BITS) - 1;
/// Bits of the index that select a slot in its leaf.
const LEAF_BITS: u32 = 6;
/// Slots per leaf.
pub(crate) const LEAF: usize = 1 << LEAF_BITS;
/// Bits of the index that select a leaf in its middle directory.
const MID_BITS: u32 = 10;
/// Leaves per middle directory.
const MID: usize = 1 << MID_BITS;
/// Middle directories in the top directory: together they cover every index.
const TOP: usize = 1 << (INDEX_BITS - LEAF_BITS - MID_BITS);
/// The end of the free list.
const NONE: u32 = u32::MAX;
/// The number of slots a table can have.
const SLOTS: u32 = 1 << INDEX_BITS;

/// The kind of an agent handle.
pub(crate) const KIND_AGENT: u64 = 1;
/// The kind of a send-buffer handle.
pub(crate) const KIND_BUF: u64 = 2;
/// The kind of a receive-buffer handle.
pub(crate) const KIND_RECV: u64 = 3;

/// What a slot holds.
enum Content<T> {
    /// Nothing; the slot is on the free list (or retired).
    Free,
    /// Taken for an object that is being made: its handle is known, lookups fail.
    Reserved,
    /// A live object.
    Live(T),
}

/// A slot's state, under its lock.
struct SlotState<T> {
    /// Generation of the slot; the handle of its current object carries it.
    gen: u64,
    content: Content<T>,
}

/// One slot.
#[pin_data]
struct Slot<T> {
    #[pin]
    state: SpinLockIrq<SlotState<T>>,
    /// The next free slot while this one is on the free list; written only under the table's
    /// `alloc` lock.
    next_free: Atomic<u32>,
}

/// A leaf of slots.
type Leaf<T> = [Slot<T>; LEAF];

/// A middle directory: pointers to leaves.
///
/// # Invariants
///
/// A non-null entry points to a pinned leaf that lives until the table is dropped.
struct Mid<T> {
    leaves: [Atomic<*mut Leaf<T>>; MID],
}

/// The head of the free list in one word, for a compare-and-swap: the first free slot (or
/// [`NONE`]) in the low 32 bits, and a count of the changes of the head in the high 32, so
/// that a head that was popped and pushed back between a read and a swap (ABA) fails the
/// swap.
fn free_word(tag: u64, index: u32) -> u64 {
    (tag << 32) | u64::from(index)
}

/// The first free slot of a free-list word: its low 32 bits.
fn free_index(word: u64) -> u32 {
    u32::try_from(word & u64::from(u32::MAX)).unwrap_or(NONE)
}

/// A table of handles to objects of type `T`.
///
/// # Invariants
///
/// - A non-null entry of `top` points to a [`Mid`] that lives until the table is dropped;
///   entries go from null to non-null once and never change again.
/// - A slot is on the free list (a stack from `free`, linked through `next_free`) if and
///   only if its content is `Free` and its generation is below [`GEN_MAX`]; every slot below
///   `fresh` is on the free list, reserved, live or retired (or being taken or given back, by
///   the thread that swaps `free`).
#[pin_data(PinnedDrop)]
pub(crate) struct HandleTable<T: Send + Unpin> {
    kind: u64,
    /// Lock class of the slots of this table.
    key: Pin<&'static LockClassKey>,
    top: [Atomic<*mut Mid<T>>; TOP],
    /// The free list's head ([`free_word`]).
    free: Atomic<u64>,
    /// Slots below this index have been used at least once.
    fresh: Atomic<u32>,
    _t: PhantomData<T>,
}

impl<T: Send + Unpin> HandleTable<T> {
    /// An empty table of handles of `kind`, whose slot locks are of class `key`.
    pub(crate) fn new(kind: u64, key: Pin<&'static LockClassKey>) -> impl PinInit<Self> {
        pin_init!(Self {
            kind,
            key,
            top: [const { Atomic::new(core::ptr::null_mut()) }; TOP],
            free: Atomic::new(free_word(0, NONE)),
            fresh: Atomic::new(0),
            _t: PhantomData,
        })
    }

    /// The handle of slot `index` at generation `gen`.
    pub(crate) fn encode(&self, index: u32, gen: u64) -> u64 {
        (self.kind << KIND_SHIFT) | ((gen & GEN_MAX) << INDEX_BITS) | u64::from(index)
    }

    /// The slot index and generation of `h`, if it is a handle of this table's kind.
    pub(crate) fn decode(&self, h: u64) -> Option<(u32, u64)> {
        // Bit 63 set (kernel addresses, ERR_PTRs) makes the kind field differ too.
        if h >> KIND_SHIFT != self.kind {
            return None;
        }
        let index = u32::try_from(h & INDEX_MASK).ok()?;
        Some((index, (h >> INDEX_BITS) & GEN_MAX))
    }

    /// Sets the generation of slot `index` to `gen`, as that many frees of its objects would;
    /// whether the slot exists. For the `rmad_handles` suite, which cannot wait for 2^37 frees.
    #[cfg(rmad_test)]
    pub(crate) fn age_slot(&self, index: u32, gen: u64) -> bool {
        match self.slot(index) {
            Some(s) => {
                s.state.lock().gen = gen;
                true
            }
            None => false,
        }
    }

    /// The slot with `index`, if its leaf exists.
    fn slot(&self, index: u32) -> Option<&Slot<T>> {
        let i = usize::try_from(index).ok()?;
        let mid = self.top.get(i >> (LEAF_BITS + MID_BITS))?.load(Acquire);
        if mid.is_null() {
            return None;
        }
        // SAFETY: A published middle directory lives until the table is dropped (type
        // invariant), which `&self` prevents; the acquire load pairs with its publication.
        let mid = unsafe { &*mid };
        let leaf = mid.leaves.get((i >> LEAF_BITS) & (MID - 1))?.load(Acquire);
        if leaf.is_null() {
            return None;
        }
        // SAFETY: As above, for the leaf (invariant of `Mid`).
        let leaf = unsafe { &*leaf };
        leaf.get(i & (LEAF - 1))
    }

    /// Makes sure the leaf of slot `index` exists.
    fn grow(&self, index: u32, gfp: Flags) -> Result {
        let i = usize::try_from(index).map_err(|_| ENOSPC)?;
        let top = self.top.get(i >> (LEAF_BITS + MID_BITS)).ok_or(ENOSPC)?;
        let mut mid = top.load(Acquire);
        if mid.is_null() {
            let fresh = KBox::<Mid<T>>::new_uninit(gfp | __GFP_ZERO | __GFP_NOWARN)?;
            // SAFETY: The allocation is zeroed, and all-zero bytes are a `Mid` whose entries are
            // all null pointers.
            let fresh = KBox::into_raw(unsafe { fresh.assume_init() });
            // INVARIANT: The entry goes from null to a directory that lives until the table is
            // dropped; if another thread published one first, ours is freed again.
            match top.cmpxchg(core::ptr::null_mut(), fresh, Release) {
                Ok(_) => mid = fresh,
                Err(theirs) => {
                    // SAFETY: `fresh` came from `KBox::into_raw` above and was never shared.
                    drop(unsafe { KBox::from_raw(fresh) });
                    mid = theirs;
                }
            }
        }
        // SAFETY: `mid` is a published middle directory (see `slot`).
        let mid = unsafe { &*mid };
        let entry = mid.leaves.get((i >> LEAF_BITS) & (MID - 1)).ok_or(ENOSPC)?;
        if !entry.load(Acquire).is_null() {
            return Ok(());
        }
        let key = self.key;
        let leaf = KBox::pin_init(
            pin_init::pin_init_array_from_fn::<_, LEAF, Slot<T>, core::convert::Infallible>(|_| {
                pin_init!(Slot {
                    state <- SpinLockIrq::new(
                        SlotState {
                            gen: 0,
                            content: Content::Free,
                        },
                        c"rmad::HandleTable::slot",
                        key
                    ),
                    next_free: Atomic::new(NONE),
                })
            }),
            gfp | __GFP_NOWARN,
        )?;
        // SAFETY: The leaf is never moved out of its allocation: it is only reached through the
        // pointer published below and freed in place by `drop`.
        let leaf = KBox::into_raw(unsafe { Pin::into_inner_unchecked(leaf) });
        // INVARIANT: As for the middle directory.
        if entry.cmpxchg(core::ptr::null_mut(), leaf, Release).is_err() {
            // SAFETY: `leaf` came from `KBox::into_raw` above and was never shared.
            drop(unsafe { KBox::from_raw(leaf) });
        }
        Ok(())
    }

    /// Takes a slot off the free list, or a slot never used before.
    fn take_index(&self, gfp: Flags) -> Result<(u32, &Slot<T>)> {
        loop {
            let head = self.free.load(Acquire);
            let index = free_index(head);
            if index != NONE {
                // A slot of the list is never freed (leaves live as long as the table), so its
                // link can be read even if another thread takes it meanwhile: then the head has
                // changed, its count with it, and the swap fails.
                let slot = self.slot(index);
                let next = slot.map_or(NONE, |s| s.next_free.load(Relaxed));
                let word = free_word((head >> 32).wrapping_add(1) & u64::from(u32::MAX), next);
                // INVARIANT: The slot leaves the list; its taker reserves or fills it.
                if self.free.cmpxchg(head, word, Acquire).is_ok() {
                    // Only existing slots are ever pushed.
                    return slot.map(|s| (index, s)).ok_or(ENOSPC);
                }
                continue;
            }
            let fresh = self.fresh.load(Relaxed);
            if fresh >= SLOTS {
                return Err(ENOSPC);
            }
            let Some(slot) = self.slot(fresh) else {
                // Its leaf does not exist yet: allocate it, then try again.
                self.grow(fresh, gfp)?;
                continue;
            };
            // INVARIANT: The slot is handed out now: its taker reserves or fills it.
            if self
                .fresh
                .cmpxchg(fresh, fresh.saturating_add(1), Relaxed)
                .is_ok()
            {
                return Ok((fresh, slot));
            }
        }
    }

    /// Puts slot `index`, `slot`, back on the free list.
    fn give_back(&self, index: u32, slot: &Slot<T>) {
        let mut head = self.free.load(Relaxed);
        loop {
            slot.next_free.store(free_index(head), Relaxed);
            let word = free_word((head >> 32).wrapping_add(1) & u64::from(u32::MAX), index);
            // Release: the slot's link (and its emptied state) are seen by its next taker.
            match self.free.cmpxchg(head, word, Release) {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    /// Takes a slot for an object that is about to be made and returns its handle. Lookups of
    /// the handle fail until [`HandleTable::fill`] puts the object in.
    pub(crate) fn reserve(&self, gfp: Flags) -> Result<u64> {
        let (index, slot) = self.take_index(gfp)?;
        let mut g = slot.state.lock();
        g.content = Content::Reserved;
        Ok(self.encode(index, g.gen))
    }

    /// Puts `value` in the slot that [`HandleTable::reserve`] returned `h` for; gives it back
    /// if `h` is not a reservation.
    pub(crate) fn fill(&self, h: u64, value: T) -> Result<(), T> {
        let Some(slot) = self
            .decode(h)
            .and_then(|(i, gen)| Some((self.slot(i)?, gen)))
        else {
            return Err(value);
        };
        let mut g = slot.0.state.lock();
        if g.gen != slot.1 || !matches!(g.content, Content::Reserved) {
            return Err(value);
        }
        g.content = Content::Live(value);
        Ok(())
    }

    /// Allocates a handle for `value`.
    #[cfg_attr(not(rmad_test), allow(dead_code, reason = "the tests use it"))]
    pub(crate) fn insert(&self, value: T, gfp: Flags) -> Result<u64, (Error, T)> {
        match self.take_index(gfp) {
            Ok((index, slot)) => Ok(self.fill_taken(index, slot, |_| value)),
            Err(e) => Err((e, value)),
        }
    }

    /// Allocates a handle for the object that `make` makes, given the handle, under the slot's
    /// lock (it must not sleep): one hold of the lock, where [`HandleTable::reserve`] and
    /// [`HandleTable::fill`] take two. `make` is not called if no slot is left.
    pub(crate) fn insert_with(&self, gfp: Flags, make: impl FnOnce(u64) -> T) -> Result<u64> {
        let (index, slot) = self.take_index(gfp)?;
        Ok(self.fill_taken(index, slot, make))
    }

    /// Puts the object that `make` makes in slot `index` (`slot`), just taken off the free
    /// list, and returns its handle.
    fn fill_taken(&self, index: u32, slot: &Slot<T>, make: impl FnOnce(u64) -> T) -> u64 {
        let mut g = slot.state.lock();
        let h = self.encode(index, g.gen);
        // INVARIANT: The taken slot holds a live object.
        g.content = Content::Live(make(h));
        h
    }

    /// Runs `f` on the live object that `h` names, under its slot's lock. `EINVAL` if `h` names
    /// none: not a handle of this table, stale, or an object that is still being made.
    pub(crate) fn with<R>(&self, h: u64, f: impl FnOnce(&mut T) -> R) -> Result<R> {
        let (index, gen) = self.decode(h).ok_or(EINVAL)?;
        let slot = self.slot(index).ok_or(EINVAL)?;
        let mut g = slot.state.lock();
        if g.gen != gen {
            return Err(EINVAL);
        }
        match &mut g.content {
            Content::Live(v) => Ok(f(v)),
            _ => Err(EINVAL),
        }
    }

    /// Ends the object that `h` names, if `may` agrees, and returns it: from now on `h` is
    /// stale forever. `EINVAL` if `h` names no live object (a reservation included: only
    /// [`HandleTable::release`] ends one).
    pub(crate) fn remove(&self, h: u64, may: impl FnOnce(&mut T) -> Result) -> Result<T> {
        self.end(h, |c| match c {
            Content::Live(v) => may(v),
            _ => Err(EINVAL),
        })?
        .ok_or(EINVAL)
    }

    /// The first `Some` that `f` returns for a live object, given its handle, in slot order;
    /// `f` runs under each object's slot lock in turn. A scan of every slot ever used: for
    /// rare events (a client module's unload), not for lookups.
    pub(crate) fn find_map<R>(&self, mut f: impl FnMut(u64, &mut T) -> Option<R>) -> Option<R> {
        let used = self.fresh.load(Relaxed);
        for index in 0..used {
            let Some(slot) = self.slot(index) else {
                continue;
            };
            let mut g = slot.state.lock();
            let gen = g.gen;
            if let Content::Live(v) = &mut g.content {
                if let Some(r) = f(self.encode(index, gen), v) {
                    return Some(r);
                }
            }
        }
        None
    }

    /// Gives back the reservation `h` (its object could not be made): from now on `h` is
    /// stale forever.
    pub(crate) fn release(&self, h: u64) -> Result {
        self.end(h, |c| match c {
            Content::Reserved => Ok(()),
            _ => Err(EINVAL),
        })
        .map(drop)
    }

    /// Empties the slot of `h` if `may` agrees with its content, and returns the object it
    /// held, if any.
    fn end(&self, h: u64, may: impl FnOnce(&mut Content<T>) -> Result) -> Result<Option<T>> {
        let (index, gen) = self.decode(h).ok_or(EINVAL)?;
        let slot = self.slot(index).ok_or(EINVAL)?;
        let (value, retired) = {
            let mut g = slot.state.lock();
            if g.gen != gen {
                return Err(EINVAL);
            }
            may(&mut g.content)?;
            let old = core::mem::replace(&mut g.content, Content::Free);
            // INVARIANT: The generation grows, so `h` never names anything again; a slot that
            // has used up its generations stays off the free list.
            g.gen = g.gen.saturating_add(1);
            let value = match old {
                Content::Live(v) => Some(v),
                _ => None,
            };
            (value, g.gen >= GEN_MAX)
        };
        if !retired {
            self.give_back(index, slot);
        }
        // The object is dropped by the caller, outside every lock of the table.
        Ok(value)
    }
}

#[pinned_drop]
impl<T: Send + Unpin> PinnedDrop for HandleTable<T> {
    fn drop(self: Pin<&mut Self>) {
        for top in self.top.iter() {
            let mid = top.load(Acquire);
            if mid.is_null() {
                continue;
            }
            // SAFETY: `mid` came from `KBox::into_raw` in `grow` and is freed only here, once;
            // nobody can look it up any more (`self` is being dropped).
            let mid = unsafe { KBox::from_raw(mid) };
            for entry in mid.leaves.iter() {
                let leaf = entry.load(Acquire);
                if !leaf.is_null() {
                    // SAFETY: As above, for the leaf; it is dropped in place.
                    drop(unsafe { KBox::from_raw(leaf) });
                }
            }
        }
    }
}
