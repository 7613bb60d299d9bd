// SPDX-License-Identifier: GPL-2.0

//! The pointers to a send's record, which lives in one object of rmad's slab cache
//! ([`crate::sys::slab`]) with its 256-byte MAD: one allocation per send, as the C layer's
//! `ib_mad_send_wr_private` is.
//!
//! - [`SendRef`] counts a reference of the record, as an `Arc` would (the kernel crate's
//!   `Arc` allocates with `krealloc`, from the kmalloc buckets);
//! - [`BodyBox`] owns the record's body, which moves between the client and the engine as a
//!   `KBox` would, and drops it in place when dropped;
//! - [`TxRef`] and [`TxQueue`] are a transport's hold of a send's one transmission and its
//!   intrusive queue of them, as the kernel crate's `ListArc` and `List` are for an `Arc`.

use super::{
    body::{
        MadInit,
        SendBody,
        TxDest, //
    },
    owner::RecordOwner,
    rec::SendRecord,
};
use crate::{
    engine::agent::queues::{
        QKey,
        QueueItem,
        TidKey,
        QUEUE_LINKS,
        TID_LINKS, //
    },
    sys::{
        rbtree::{
            Links,
            TreeItem,
            TreeRef, //
        },
        slab, //
    },
};
use core::{
    marker::PhantomData,
    ops::{
        Deref,
        DerefMut, //
    },
    ptr::{
        self,
        NonNull, //
    },
};
use kernel::{
    alloc::Flags,
    prelude::*,
    sync::{
        atomic::{
            Acquire,
            Release, //
        },
        Arc,
    },
};

/// A counted reference of a send's record.
///
/// # Invariants
///
/// `ptr` points at a live record in an object of [`slab`], initialised by [`BodyBox::new`],
/// and this value owns one count of its `refs`; the object is freed when the count drops to 0.
pub(crate) struct SendRef<A: RecordOwner> {
    ptr: NonNull<SendRecord<A>>,
}

// SAFETY: A `SendRef` gives shared access to a `SendRecord`, which is `Send + Sync` (its
// mutable parts are locked or atomic); dropping the last one from any thread frees it,
// which any context but NMI may do.
unsafe impl<A: RecordOwner> Send for SendRef<A> {}
// SAFETY: As above.
unsafe impl<A: RecordOwner> Sync for SendRef<A> {}

impl<A: RecordOwner> SendRef<A> {
    /// Gives up this reference for a raw pointer; [`SendRef::from_raw`] takes it back.
    pub(crate) fn into_raw(self) -> *const SendRecord<A> {
        let ptr = self.ptr.as_ptr();
        core::mem::forget(self);
        ptr
    }

    /// Takes back a reference that [`SendRef::into_raw`] gave up.
    ///
    /// # Safety
    ///
    /// `ptr` came from [`SendRef::into_raw`], and its reference is taken back once.
    pub(crate) unsafe fn from_raw(ptr: *const SendRecord<A>) -> Self {
        // SAFETY: `into_raw` returned a non-null pointer.
        let ptr = unsafe { NonNull::new_unchecked(ptr.cast_mut()) };
        // INVARIANT: The caller gives back the count `into_raw` gave up.
        SendRef { ptr }
    }
}

impl<A: RecordOwner> Deref for SendRef<A> {
    type Target = SendRecord<A>;

    fn deref(&self) -> &SendRecord<A> {
        // SAFETY: The record is live while this reference is counted (type invariant).
        unsafe { self.ptr.as_ref() }
    }
}

impl<A: RecordOwner> Clone for SendRef<A> {
    fn clone(&self) -> Self {
        // INVARIANT: The new value owns the count taken here (`Refcount` saturates rather
        // than wrapping to 0).
        self.refs.inc();
        SendRef { ptr: self.ptr }
    }
}

impl<A: RecordOwner> Drop for SendRef<A> {
    fn drop(&mut self) {
        if !self.refs.dec_and_test() {
            return;
        }
        // SAFETY: The count reached 0: this was the last reference, nothing else reads the
        // record. Its body is not dropped here: the `BodyBox` that owned it held a reference,
        // so it dropped the body before this. The object came from `slab::alloc`.
        unsafe {
            ptr::drop_in_place(self.ptr.as_ptr());
            slab::free(self.ptr.cast());
        }
    }
}

/// A reference of a record borrowed from a tree that holds one, for as long as the tree is
/// borrowed.
pub(crate) struct SendBorrow<'a, A: RecordOwner> {
    ptr: NonNull<SendRecord<A>>,
    _p: PhantomData<&'a SendRecord<A>>,
}

// By hand: a derive would require `A: Copy`.
impl<A: RecordOwner> Clone for SendBorrow<'_, A> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<A: RecordOwner> Copy for SendBorrow<'_, A> {}

impl<A: RecordOwner> Deref for SendBorrow<'_, A> {
    type Target = SendRecord<A>;

    fn deref(&self) -> &SendRecord<A> {
        // SAFETY: The tree this was borrowed from holds a reference for `'a`.
        unsafe { self.ptr.as_ref() }
    }
}

impl<A: RecordOwner> From<SendBorrow<'_, A>> for SendRef<A> {
    fn from(b: SendBorrow<'_, A>) -> Self {
        // INVARIANT: The count taken here is the new value's.
        b.refs.inc();
        SendRef { ptr: b.ptr }
    }
}

// SAFETY: `into_raw` gives up one count, `from_raw` takes one back; a borrow derefs to a
// record whose count a tree holds.
unsafe impl<A: RecordOwner> TreeRef for SendRef<A> {
    type Borrowed<'a> = SendBorrow<'a, A>;

    fn into_raw(self) -> *const SendRecord<A> {
        SendRef::into_raw(self)
    }

    unsafe fn from_raw(ptr: *const SendRecord<A>) -> Self {
        // SAFETY: The caller's promise is `SendRef::from_raw`'s.
        unsafe { SendRef::from_raw(ptr) }
    }

    unsafe fn borrow<'a>(ptr: *const SendRecord<A>) -> SendBorrow<'a, A> {
        SendBorrow {
            // SAFETY: The caller gives a pointer of a live record, not null.
            ptr: unsafe { NonNull::new_unchecked(ptr.cast_mut()) },
            _p: PhantomData,
        }
    }
}

/// The owner of a send's body: the client's (in its [`super::SendBuf`]) or the engine's (in
/// the record's state), moved between them as a `KBox` would be. It counts the buffer against
/// its agent until it is dropped (`ib_free_send_mad`): the agent's unregistration waits for
/// that.
///
/// # Invariants
///
/// For each record at most one `BodyBox` exists, and while it does the record's body is
/// initialised and reached only through it; the record's agent counts it among its buffers
/// (`Agent::create_send` counted it before making the record).
pub(crate) struct BodyBox<A: RecordOwner> {
    rec: SendRef<A>,
}

impl<A: RecordOwner> BodyBox<A> {
    /// A new record of `agent` holding `mad` and `body`, in one object of rmad's slab cache,
    /// and the box that owns the body. Allocates with `gfp` only. The caller counted the
    /// buffer against `agent`; on failure its count is given back.
    pub(crate) fn new(agent: &Arc<A>, mad: MadInit, body: SendBody, gfp: Flags) -> Result<Self> {
        let Ok(ptr) = slab::alloc(gfp) else {
            drop((mad, body));
            agent.buffer_freed();
            return Err(ENOMEM);
        };
        let ptr = ptr.cast::<SendRecord<A>>();
        let init = SendRecord::new(agent, mad, body);
        // SAFETY: `ptr` is an object of the cache, whose objects have the size and alignment
        // of a `SendRecord` (the cache is made for it, `slab::Cache::create`); it never moves
        // until freed, so the record is pinned. The initialiser cannot fail.
        let Ok(()) = unsafe { init.__init(ptr.as_ptr()) };
        // INVARIANT: Initialised just above with one count, which this value owns.
        let rec = SendRef { ptr };
        // INVARIANT: The record was made with its body; this is its only `BodyBox`, and the
        // caller counted the buffer.
        Ok(BodyBox { rec })
    }

    /// The record whose body this is.
    pub(crate) fn rec(&self) -> &SendRef<A> {
        &self.rec
    }

    /// Parks the box in its record, for whoever holds the record to take back with
    /// [`BodyBox::unpark`]: the C API gives a completed buffer back to its handle this way,
    /// without the handle's lock. The box keeps its count of the record.
    pub(crate) fn park(self) {
        let me = core::mem::ManuallyDrop::new(self);
        // Release: what the box's owner wrote is seen by whoever unparks it.
        me.rec.parked.store(true, Release);
        // INVARIANT: Parked: the box's count of the record stays taken, without a value.
        // SAFETY: `me` is not dropped, so its `rec` is read out once.
        let _ = SendRef::into_raw(unsafe { ptr::read(&me.rec) });
    }

    /// Takes back the box that [`BodyBox::park`] parked in `rec`, if it is parked there.
    pub(crate) fn unpark(rec: &SendRef<A>) -> Option<Self> {
        // Acquire: see `park`.
        rec.parked.cmpxchg(true, false, Acquire).ok()?;
        // INVARIANT: The parked box's count becomes this value's; it is the record's only box.
        Some(BodyBox {
            rec: SendRef { ptr: rec.ptr },
        })
    }

    /// The MAD.
    pub(crate) fn mad(&self) -> &[u8] {
        // SAFETY: The MAD is written only through `mad_mut` and `parts_mut` (the record's
        // invariant), which need this box mutably: not while it is borrowed here. A transport
        // that holds the transmission only reads it.
        unsafe { &*self.rec.mad.get() }
    }

    /// The MAD, to write; empty while a transport holds the send's transmission (not
    /// reachable: the engine writes a MAD only before it transmits it, and the client owns
    /// the buffer only once the transmission is over).
    pub(crate) fn mad_mut(&mut self) -> &mut [u8] {
        self.parts_mut().0
    }

    /// The MAD to write, as [`BodyBox::mad_mut`], and the rest of the body.
    pub(crate) fn parts_mut(&mut self) -> (&mut [u8], &mut SendBody) {
        // Acquire: what the last holder of the transmission read is done (`TxRef::into_ref`
        // and its drop clear the flag with Release).
        let held = self.rec.tx_taken.load(Acquire);
        // SAFETY: The body is initialised and reached only through this box (type
        // invariant), which `&mut self` borrows alone.
        let body = unsafe { (*self.rec.body.get()).assume_init_mut() };
        if held {
            return (&mut [], body);
        }
        // SAFETY: No `TxRef` of the record exists, and none can be taken while this box is
        // borrowed mutably (`TxRef::take` borrows it), so nobody else reads the MAD; this box
        // is its only writer (the record's invariant).
        let mad: &mut [u8] = unsafe { &mut *self.rec.mad.get() };
        (mad, body)
    }
}

impl<A: RecordOwner> Deref for BodyBox<A> {
    type Target = SendBody;

    fn deref(&self) -> &SendBody {
        // SAFETY: The body is initialised and reached only through this box (type invariant).
        unsafe { (*self.rec.body.get()).assume_init_ref() }
    }
}

impl<A: RecordOwner> DerefMut for BodyBox<A> {
    fn deref_mut(&mut self) -> &mut SendBody {
        // SAFETY: As above; `&mut self` makes this the only access.
        unsafe { (*self.rec.body.get()).assume_init_mut() }
    }
}

impl<A: RecordOwner> Drop for BodyBox<A> {
    /// Drops the body in place and gives the buffer's count back to its agent
    /// (`ib_free_send_mad`); the record's memory goes with its last reference.
    fn drop(&mut self) {
        // SAFETY: The body is initialised and this box is its only owner (type invariant); it
        // is not reached again: the box is going.
        unsafe { (*self.rec.body.get()).assume_init_drop() };
        self.rec.agent.buffer_freed();
    }
}

/// A transport's hold of a send's transmission (queued or on the device): at most one exists
/// per record, so the holder alone reads and writes the record's `tx_gen` and `tx_links`.
///
/// # Invariants
///
/// The record's `tx_taken` is set while this value exists (and only then).
pub(crate) struct TxRef<A: RecordOwner> {
    rec: SendRef<A>,
}

impl<A: RecordOwner> TxRef<A> {
    /// The hold of the transmission of the send whose body is `body`; `None` if another
    /// exists. Borrowing the body keeps its MAD from being written while the hold is taken.
    pub(crate) fn take(body: &BodyBox<A>) -> Option<Self> {
        let rec = body.rec();
        // Acquire: what the last holder wrote (`tx_gen`, the links) is seen.
        rec.tx_taken.cmpxchg(false, true, Acquire).ok()?;
        // INVARIANT: Set just above.
        Some(TxRef { rec: rec.clone() })
    }

    /// The MAD to transmit.
    pub(crate) fn mad(&self) -> &[u8] {
        // SAFETY: While this hold exists nobody writes the MAD (the record's invariant:
        // `BodyBox::parts_mut` sees `tx_taken` set), and the record lives (this holds a
        // reference).
        unsafe { &*self.rec.mad.get() }
    }

    /// Where the transmission goes, as [`TxRef::set_dest`] stored it.
    pub(crate) fn dest(&self) -> Option<TxDest> {
        // SAFETY: Only the holder of the record's `TxRef`, this value, touches `tx_dest`.
        unsafe { *self.rec.tx_dest.get() }
    }

    /// Stores where the transmission goes, for its holder to read later.
    pub(crate) fn set_dest(&mut self, dest: TxDest) {
        // SAFETY: As in `dest`.
        unsafe { *self.rec.tx_dest.get() = Some(dest) };
    }

    /// Gives the hold up and returns the reference it kept.
    pub(crate) fn into_ref(self) -> SendRef<A> {
        let me = core::mem::ManuallyDrop::new(self);
        // SAFETY: `me` is not dropped, so its `rec` is read out once.
        let rec = unsafe { ptr::read(&me.rec) };
        // Release: what this holder wrote is seen by the next (see `take`).
        rec.tx_taken.store(false, Release);
        rec
    }

    /// Gives the hold up for a raw pointer (a work-request id); [`TxRef::from_raw`] takes it
    /// back.
    pub(crate) fn into_raw(self) -> *const SendRecord<A> {
        let me = core::mem::ManuallyDrop::new(self);
        // SAFETY: `me` is not dropped, so its `rec` is read out once; the hold stays taken.
        SendRef::into_raw(unsafe { ptr::read(&me.rec) })
    }

    /// Takes back a hold that [`TxRef::into_raw`] gave up.
    ///
    /// # Safety
    ///
    /// `ptr` came from [`TxRef::into_raw`], and is taken back once.
    pub(crate) unsafe fn from_raw(ptr: *const SendRecord<A>) -> Self {
        // SAFETY: The caller's promise: the pointer carries the reference `into_raw` gave up.
        let rec = unsafe { SendRef::from_raw(ptr) };
        // INVARIANT: `tx_taken` stayed set while the raw pointer stood for the hold.
        TxRef { rec }
    }
}

impl<A: RecordOwner> Deref for TxRef<A> {
    type Target = SendRecord<A>;

    fn deref(&self) -> &SendRecord<A> {
        &self.rec
    }
}

impl<A: RecordOwner> Drop for TxRef<A> {
    fn drop(&mut self) {
        // Release: as in `into_ref`.
        self.rec.tx_taken.store(false, Release);
    }
}

/// A queue of transmissions, oldest first, linked through their records: queueing allocates
/// nothing.
///
/// # Invariants
///
/// `ends` are the first and the last of a doubly-linked list (through the records' `tx_links`,
/// previous then next) of records whose [`TxRef`]s this queue owns (each given up with
/// [`TxRef::into_raw`]); both are null when it is empty.
pub(crate) struct TxQueue<A: RecordOwner> {
    ends: [*const SendRecord<A>; 2],
}

/// The front of a [`TxQueue`], and the index of a record's link towards it (its previous).
const FRONT: usize = 0;
/// The back of a [`TxQueue`], and the index of a record's link towards it (its next).
const BACK: usize = 1;

// SAFETY: The queue owns `TxRef`s, which may be sent (they hold `SendRef`s).
unsafe impl<A: RecordOwner> Send for TxQueue<A> {}
// SAFETY: Through `&TxQueue` only `is_empty` reads the queue.
unsafe impl<A: RecordOwner> Sync for TxQueue<A> {}

impl<A: RecordOwner> TxQueue<A> {
    /// An empty queue.
    pub(crate) const fn new() -> Self {
        // INVARIANT: Empty.
        Self {
            ends: [ptr::null(); 2],
        }
    }

    /// Whether the queue holds nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.ends[FRONT].is_null()
    }

    /// The links of `rec`, which this queue holds or is about to.
    ///
    /// # Safety
    ///
    /// `rec` is a live record whose `TxRef` this queue owns or is about to own.
    unsafe fn links<'a>(rec: *const SendRecord<A>) -> &'a mut [*const SendRecord<A>; 2] {
        // SAFETY: The caller's promise: the `TxRef`'s holder (this queue, through `&mut self`)
        // alone touches the links.
        unsafe { &mut *(*rec).tx_links.get() }
    }

    /// Queues `tx` at the end `side` ([`FRONT`] or [`BACK`]).
    fn push(&mut self, side: usize, tx: TxRef<A>) {
        let other = side ^ 1;
        let rec = tx.into_raw();
        let old = self.ends[side];
        // SAFETY: This queue owns `rec`'s hold from now on, and `old` when not null.
        unsafe {
            let links = Self::links(rec);
            links[side] = ptr::null();
            links[other] = old;
            match old.is_null() {
                true => self.ends[other] = rec,
                false => Self::links(old)[side] = rec,
            }
        }
        // INVARIANT: `rec` is linked beyond the old end.
        self.ends[side] = rec;
    }

    /// Takes the transmission at the end `side` ([`FRONT`] or [`BACK`]).
    fn pop(&mut self, side: usize) -> Option<TxRef<A>> {
        let other = side ^ 1;
        let rec = self.ends[side];
        if rec.is_null() {
            return None;
        }
        // SAFETY: `rec` is in this queue; so is its neighbour when not null.
        unsafe {
            let next = Self::links(rec)[other];
            self.ends[side] = next;
            match next.is_null() {
                true => self.ends[other] = ptr::null(),
                false => Self::links(next)[side] = ptr::null(),
            }
        }
        // INVARIANT: `rec` is unlinked; its hold goes to the caller.
        // SAFETY: The queue owned the hold, from `TxRef::into_raw`.
        Some(unsafe { TxRef::from_raw(rec) })
    }

    /// Queues `tx` last.
    pub(crate) fn push_back(&mut self, tx: TxRef<A>) {
        self.push(BACK, tx);
    }

    /// Queues `tx` first.
    pub(crate) fn push_front(&mut self, tx: TxRef<A>) {
        self.push(FRONT, tx);
    }

    /// Takes the oldest transmission.
    pub(crate) fn pop_front(&mut self) -> Option<TxRef<A>> {
        self.pop(FRONT)
    }

    /// Takes the newest transmission.
    pub(crate) fn pop_back(&mut self) -> Option<TxRef<A>> {
        self.pop(BACK)
    }
}

impl<A: RecordOwner> Default for TxQueue<A> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A: RecordOwner> Drop for TxQueue<A> {
    fn drop(&mut self) {
        while self.pop_front().is_some() {}
    }
}

// SAFETY: `links` returns the structurally pinned field `qlinks` every time; `from_links` is
// its `container_of`. Only the queues of the record's agent hold it through them (`Queues`, in
// the agent's locked state), always under the agent's lock.
unsafe impl<A: RecordOwner> TreeItem<QUEUE_LINKS> for SendRecord<A> {
    type Key = QKey;
    type Ref = SendRef<A>;

    fn links(&self) -> &Links<QKey> {
        &self.qlinks
    }

    unsafe fn from_links(links: *const Links<QKey>) -> *const Self {
        // SAFETY: `links` is the `qlinks` field of a live record (the caller's promise).
        unsafe { kernel::container_of!(links, Self, qlinks) }
    }
}

// SAFETY: `links` returns the structurally pinned field `tlinks` every time; `from_links` is
// its `container_of`. Only the TID index of the record's agent holds it through them, always
// under the agent's lock.
unsafe impl<A: RecordOwner> TreeItem<TID_LINKS> for SendRecord<A> {
    type Key = TidKey;
    type Ref = SendRef<A>;

    fn links(&self) -> &Links<TidKey> {
        &self.tlinks
    }

    unsafe fn from_links(links: *const Links<TidKey>) -> *const Self {
        // SAFETY: `links` is the `tlinks` field of a live record (the caller's promise).
        unsafe { kernel::container_of!(links, Self, tlinks) }
    }
}

impl<A: RecordOwner> QueueItem for SendRecord<A> {
    fn tid_ref(r: SendRef<A>) -> SendRef<A> {
        r
    }
}
