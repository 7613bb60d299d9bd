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
//! lock is shared between objects, so operations on different objects never contend; only
//! taking a slot for a new object and giving it back go through the table's free list.
//! Every lock here disables interrupts, so lookups work in any context.

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
const KIND_SHIFT: u32 = INDEX_BITS + GEN_BITS;
/// Mask of the slot index.
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;
/// The largest generation; a slot that reaches it is retired.
const GEN_MAX: u64 = (1 << GEN_BITS) - 1;
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

/// The free list and the count of slots ever used.
struct Alloc {
    /// First free slot, or [`NONE`].
    free_head: u32,
    /// Slots below this index have been used at least once.
    fresh: u32,
}

/// A table of handles to objects of type `T`.
///
/// # Invariants
///
/// - A non-null entry of `top` points to a [`Mid`] that lives until the table is dropped;
///   entries go from null to non-null once and never change again.
/// - A slot is on the free list if and only if its content is `Free` and its generation is
///   below [`GEN_MAX`]; every slot below `alloc.fresh` is on the free list, reserved, live or
///   retired.
#[pin_data(PinnedDrop)]
pub(crate) struct HandleTable<T: Send + Unpin> {
    kind: u64,
    /// Lock class of the slots of this table.
    key: Pin<&'static LockClassKey>,
    top: [Atomic<*mut Mid<T>>; TOP],
    #[pin]
    alloc: SpinLockIrq<Alloc>,
    _t: PhantomData<T>,
}

impl<T: Send + Unpin> HandleTable<T> {
    /// An empty table of handles of `kind`, whose slot locks are of class `key`.
    pub(crate) fn new(
        kind: u64,
        key: Pin<&'static LockClassKey>,
        alloc_key: Pin<&'static LockClassKey>,
    ) -> impl PinInit<Self> {
        pin_init!(Self {
            kind,
            key,
            top: [const { Atomic::new(core::ptr::null_mut()) }; TOP],
            alloc <- SpinLockIrq::new(
                Alloc {
                    free_head: NONE,
                    fresh: 0,
                },
                c"rmad::HandleTable::alloc",
                alloc_key
            ),
            _t: PhantomData,
        })
    }

    /// The handle of slot `index` at generation `gen`.
    fn encode(&self, index: u32, gen: u64) -> u64 {
        (self.kind << KIND_SHIFT) | ((gen & GEN_MAX) << INDEX_BITS) | u64::from(index)
    }

    /// The slot index and generation of `h`, if it is a handle of this table's kind.
    fn decode(&self, h: u64) -> Option<(u32, u64)> {
        // Bit 63 set (kernel addresses, ERR_PTRs) makes the kind field differ too.
        if h >> KIND_SHIFT != self.kind {
            return None;
        }
        let index = u32::try_from(h & INDEX_MASK).ok()?;
        Some((index, (h >> INDEX_BITS) & GEN_MAX))
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
    fn take_index(&self, gfp: Flags) -> Result<u32> {
        loop {
            let want = {
                let mut a = self.alloc.lock();
                if a.free_head != NONE {
                    let i = a.free_head;
                    a.free_head = self.slot(i).map_or(NONE, |s| s.next_free.load(Relaxed));
                    return Ok(i);
                }
                if a.fresh >= SLOTS {
                    return Err(ENOSPC);
                }
                let i = a.fresh;
                if self.slot(i).is_some() {
                    // INVARIANT: The slot is handed out now: it becomes reserved.
                    a.fresh = i.saturating_add(1);
                    return Ok(i);
                }
                i
            };
            // Its leaf does not exist yet: allocate it without the lock, then try again.
            self.grow(want, gfp)?;
        }
    }

    /// Puts slot `index` back on the free list.
    fn give_back(&self, index: u32) {
        let Some(slot) = self.slot(index) else {
            return;
        };
        let mut a = self.alloc.lock();
        slot.next_free.store(a.free_head, Relaxed);
        a.free_head = index;
    }

    /// Takes a slot for an object that is about to be made and returns its handle. Lookups of
    /// the handle fail until [`HandleTable::fill`] puts the object in.
    pub(crate) fn reserve(&self, gfp: Flags) -> Result<u64> {
        let index = self.take_index(gfp)?;
        let slot = self.slot(index).ok_or(ENOSPC)?;
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
    pub(crate) fn insert(&self, value: T, gfp: Flags) -> Result<u64, (Error, T)> {
        let h = match self.reserve(gfp) {
            Ok(h) => h,
            Err(e) => return Err((e, value)),
        };
        self.fill(h, value).map_err(|v| (EINVAL, v))?;
        Ok(h)
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
            self.give_back(index);
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

/// Tests of the table alone (the C API's own tests are in `capi_tests.rs`).
#[cfg(rmad_test)]
#[kernel::prelude::kunit_tests(rmad_handles)]
mod tests {
    use super::*;
    use kernel::{
        static_lock_class,
        sync::Arc, //
    };

    /// A table of numbers.
    fn table() -> Result<Pin<KBox<HandleTable<u32>>>> {
        KBox::pin_init(
            HandleTable::new(KIND_BUF, static_lock_class!(), static_lock_class!()),
            GFP_KERNEL,
        )
    }

    #[test]
    fn handle_never_repeats_after_free() -> Result {
        let t = table()?;
        let h1 = t.insert(1, GFP_KERNEL).map_err(|(e, _)| e)?;
        let removed = t.remove(h1, |_| Ok(()))?;
        let h2 = t.insert(2, GFP_KERNEL).map_err(|(e, _)| e)?;
        // The slot is reused, its generation is not.
        assert!(h1 != h2);
        assert_eq!(h1 & INDEX_MASK, h2 & INDEX_MASK);
        assert_eq!(removed, 1);
        assert_eq!(t.with(h1, |v| *v), Err(EINVAL));
        assert_eq!(t.with(h2, |v| *v), Ok(2));
        assert_eq!(t.remove(h1, |_| Ok(())).err(), Some(EINVAL));
        Ok(())
    }

    #[test]
    fn foreign_values_are_refused() -> Result {
        let t = table()?;
        let h = t.insert(7, GFP_KERNEL).map_err(|(e, _)| e)?;
        let other_kind = (h & !(3 << KIND_SHIFT)) | (KIND_AGENT << KIND_SHIFT);
        let ours = Arc::new(0u8, GFP_KERNEL)?;
        let address = u64::try_from(Arc::as_ptr(&ours).addr()).unwrap_or(u64::MAX);
        // ERR_PTR(-EINVAL).
        let err_ptr = u64::MAX - 21;
        for bad in [
            0,
            1,
            u64::MAX,
            err_ptr,
            address,
            other_kind,
            h | (1 << 63),
            h + 1,
        ] {
            assert_eq!(t.with(bad, |v| *v), Err(EINVAL));
        }
        assert_eq!(t.with(h, |v| *v), Ok(7));
        Ok(())
    }

    #[test]
    fn reservation_is_invisible_until_filled() -> Result {
        let t = table()?;
        let h = t.reserve(GFP_KERNEL)?;
        let premature = t.remove(h, |_| Ok(())).err();
        assert_eq!(premature, Some(EINVAL));
        assert_eq!(t.with(h, |v| *v), Err(EINVAL));
        assert!(t.fill(h, 5).is_ok());
        assert_eq!(t.with(h, |v| *v), Ok(5));
        // A second fill of a live slot is refused, and so is releasing it.
        assert_eq!(t.fill(h, 6), Err(6));
        assert_eq!(t.release(h), Err(EINVAL));
        let r = t.reserve(GFP_KERNEL)?;
        assert!(t.release(r).is_ok());
        assert_eq!(t.fill(r, 7), Err(7));
        Ok(())
    }

    #[test]
    fn refusal_keeps_the_object() -> Result {
        let t = table()?;
        let h = t.insert(3, GFP_KERNEL).map_err(|(e, _)| e)?;
        assert_eq!(t.remove(h, |_| Err(EBUSY)).err(), Some(EBUSY));
        assert_eq!(t.with(h, |v| *v), Ok(3));
        Ok(())
    }

    #[test]
    fn many_slots_across_leaves() -> Result {
        let t = table()?;
        let n = LEAF * 40;
        let mut hs = KVec::with_capacity(n, GFP_KERNEL)?;
        for i in 0..n {
            let v = u32::try_from(i).map_err(|_| EINVAL)?;
            hs.push(t.insert(v, GFP_KERNEL).map_err(|(e, _)| e)?, GFP_KERNEL)?;
        }
        let mut ok = true;
        for (i, h) in hs.iter().enumerate() {
            ok &= t.with(*h, |v| *v).ok() == u32::try_from(i).ok();
            // Never NULL, a kernel address or an ERR_PTR: bit 63 is clear.
            ok &= *h != 0 && *h >> 63 == 0;
        }
        for h in hs.iter() {
            ok &= t.remove(*h, |_| Ok(())).is_ok();
        }
        for h in hs.iter() {
            ok &= t.with(*h, |v| *v).is_err();
        }
        assert!(ok);
        Ok(())
    }

    #[test]
    fn million_cycles_stale_handle_stays_stale() -> Result {
        // What makes a stale handle stale is this table: a million create/free cycles with a
        // handle kept from before, checked in each, and every new handle different from it.
        let t = table()?;
        let stale = t.insert(0, GFP_KERNEL).map_err(|(e, _)| e)?;
        let first = t.remove(stale, |_| Ok(()))?;
        let (mut aliases, mut wrong) = (0usize, 0usize);
        for i in 0..1_000_000u32 {
            let h = match t.insert(i, GFP_KERNEL) {
                Ok(h) => h,
                Err(_) => {
                    wrong += 1;
                    continue;
                }
            };
            aliases += usize::from(h == stale);
            wrong += usize::from(t.with(stale, |v| *v).is_ok());
            wrong += usize::from(t.remove(stale, |_| Ok(())).is_ok());
            wrong += usize::from(t.remove(h, |_| Ok(())).ok() != Some(i));
        }
        assert_eq!(first, 0);
        assert_eq!(aliases, 0);
        assert_eq!(wrong, 0);
        Ok(())
    }

    #[test]
    fn retired_slot_is_never_reused() -> Result {
        let t = table()?;
        let h = t.insert(1, GFP_KERNEL).map_err(|(e, _)| e)?;
        let (index, _) = t.decode(h).ok_or(EINVAL)?;
        // Age the slot to its last generation, as ~2^37 frees would.
        if let Some(s) = t.slot(index) {
            s.state.lock().gen = GEN_MAX - 1;
        }
        let last = t.encode(index, GEN_MAX - 1);
        assert!(t.remove(last, |_| Ok(())).is_ok());
        let next = t.insert(2, GFP_KERNEL).map_err(|(e, _)| e)?;
        assert!(t.decode(next).map(|(i, _)| i) != Some(index));
        assert_eq!(t.with(last, |v| *v), Err(EINVAL));
        Ok(())
    }
}
