// SPDX-License-Identifier: GPL-2.0

//! Owned workqueues and re-armable delayed work.
//!
//! The 7.3 kernel crate can enqueue work on the system queues (only on those 7.3 deprecated:
//! [`system_dfl`] and [`system_percpu`] give the others) but cannot allocate a queue of
//! its own, flush or destroy one, move a pending delayed work item to an earlier time, or
//! cancel one. rmad needs all of these: completions are delivered on a queue that the module
//! owns and drains at unload, and an agent's timer must move earlier when a send with an
//! earlier deadline starts waiting. This module wraps the C functions once, behind a safe API,
//! with the reference-counting argument written down in one place.
//!
//! # Reference counting
//!
//! A work item whose pointer type is `Arc<T>` owns one reference to `T` for every queued
//! instance: `WorkItemPointer::run` turns the `work_struct` back into an `Arc<T>` with
//! `Arc::from_raw`. [`rearm`] therefore leaks one reference before it calls
//! `mod_delayed_work_on` and takes it back when the call reports that the item was already
//! pending (the pending instance owns a reference already). [`disable_sync`] takes back the
//! reference of an instance that it removed from the queue.

use core::ptr::NonNull;
use kernel::{
    bindings,
    ffi::c_int,
    prelude::*,
    sync::Arc,
    time::Jiffies,
    workqueue::{
        HasDelayedWork,
        HasWork,
        Queue,
        Work,
        WorkItem, //
    },
};

/// The kernel's default system queue for work that needs no CPU of its own (`system_dfl_wq`,
/// unbound). 7.3 marks the queues that the kernel crate's `system()` and `system_unbound()`
/// return (`system_wq`, `system_unbound_wq`) deprecated and logs a warning at the first item
/// queued on one; this and [`system_percpu`] are what it asks for instead. Only the suites
/// queue work there (their threads).
#[cfg(rmad_test)]
pub(crate) fn system_dfl() -> &'static Queue {
    // SAFETY: `system_dfl_wq` is a C global, allocated at boot and never destroyed.
    unsafe { Queue::from_raw(bindings::system_dfl_wq) }
}

/// The kernel's per-CPU system queue (`system_percpu_wq`): what `system_wq` was, under its
/// new name (see [`system_dfl`]).
pub(crate) fn system_percpu() -> &'static Queue {
    // SAFETY: `system_percpu_wq` is a C global, allocated at boot and never destroyed.
    unsafe { Queue::from_raw(bindings::system_percpu_wq) }
}

/// The number of items of a queue that may run at once unless it says otherwise
/// (`WQ_DFL_ACTIVE`).
#[cfg(rmad_test)]
pub(crate) const DEFAULT_ACTIVE: c_int = 1024;

#[cfg(rmad_test)]
const _: () = assert!(bindings::wq_consts_WQ_DFL_ACTIVE == 1024);

/// A workqueue that rmad allocated (ordered: one item at a time, in queueing order; or
/// unbound, several at once); drained and destroyed when dropped.
///
/// # Invariants
///
/// `ptr` points to a workqueue returned by `alloc_workqueue` that has not been destroyed.
pub(crate) struct OwnedQueue {
    ptr: NonNull<bindings::workqueue_struct>,
}

// SAFETY: A workqueue may be used and destroyed from any thread.
unsafe impl Send for OwnedQueue {}
// SAFETY: All operations on a workqueue are internally synchronised.
unsafe impl Sync for OwnedQueue {}

impl OwnedQueue {
    /// Allocates an ordered, unbound queue named `name` that may be used on memory-reclaim
    /// paths, like the C MAD layer's per-port `ib_mad<port>` queue.
    pub(crate) fn new_ordered(name: &'static CStr) -> Result<Self> {
        let flags = bindings::wq_flags_WQ_UNBOUND
            | bindings::wq_flags___WQ_ORDERED
            | bindings::wq_flags_WQ_MEM_RECLAIM;
        Self::alloc(name, flags, 1)
    }

    /// Allocates an unbound queue named `name` whose items run concurrently (up to the
    /// kernel's default limit): for work that may block, so that one item never waits for
    /// another.
    pub(crate) fn new_concurrent(name: &'static CStr) -> Result<Self> {
        Self::alloc(name, bindings::wq_flags_WQ_UNBOUND, 0)
    }

    /// Allocates an unbound queue named `name` whose items run concurrently and that may be
    /// used on memory-reclaim paths: the agents' work, where one agent's handler may wait (the
    /// connection manager's send handler does, in `ib_destroy_cm_id`) without holding up
    /// another agent's. One work item never runs twice at once, so each agent's work stays in
    /// order.
    pub(crate) fn new_reclaim(name: &'static CStr) -> Result<Self> {
        Self::alloc(
            name,
            bindings::wq_flags_WQ_UNBOUND | bindings::wq_flags_WQ_MEM_RECLAIM,
            0,
        )
    }

    /// Lets at most `n` items of this queue (one of [`OwnedQueue::new_concurrent`] or
    /// [`OwnedQueue::new_reclaim`]) run at once on each NUMA node (an unbound queue shares its
    /// limit out among the nodes, at least `min(n, 8)` each): on the test VM, one node, the
    /// suites hold every agent's work of an engine behind one item with 1, and give the
    /// default back with [`DEFAULT_ACTIVE`].
    #[cfg(rmad_test)]
    pub(crate) fn set_max_active(&self, n: c_int) {
        // SAFETY: By the type invariant the pointer is a live workqueue; it was not allocated
        // ordered (only `new_ordered` does that), so the call does not refuse it.
        unsafe { bindings::workqueue_set_max_active(self.ptr.as_ptr(), n) }
    }

    /// `alloc_workqueue(name, flags, max_active)`.
    fn alloc(name: &'static CStr, flags: bindings::wq_flags, max_active: c_int) -> Result<Self> {
        // SAFETY: The format `"%s"` consumes exactly the one string argument given, which is a
        // NUL-terminated string that outlives the queue (`'static`).
        let ptr = unsafe {
            bindings::alloc_workqueue_noprof(
                c"%s".as_char_ptr(),
                flags,
                max_active,
                name.as_char_ptr(),
            )
        };
        // INVARIANT: A non-null result is a freshly allocated workqueue.
        Ok(Self {
            ptr: NonNull::new(ptr).ok_or(ENOMEM)?,
        })
    }

    /// The queue, for the kernel crate's `enqueue` functions.
    pub(crate) fn queue(&self) -> &Queue {
        // SAFETY: By the type invariant the pointer is a live workqueue, and it stays live for
        // as long as `self` is borrowed.
        unsafe { Queue::from_raw(self.ptr.as_ptr()) }
    }

    /// Waits until every item queued so far has run.
    pub(crate) fn flush(&self) {
        // SAFETY: By the type invariant the pointer is a live workqueue.
        unsafe { bindings::__flush_workqueue(self.ptr.as_ptr()) }
    }
}

impl Drop for OwnedQueue {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the pointer is a live workqueue; it is never used again.
        // `destroy_workqueue` drains queued items first. Delayed work must have been cancelled
        // by its owners (see [`disable_sync`]): every delayed item in rmad belongs to an object
        // that is torn down before its queue.
        unsafe { bindings::destroy_workqueue(self.ptr.as_ptr()) }
    }
}

/// The `delayed_work` that contains the work item `ID` of `this`.
///
/// # Safety
///
/// `this` must point to a live `T`.
unsafe fn delayed_work_of<T, const ID: u64>(this: *const T) -> *mut bindings::delayed_work
where
    T: HasDelayedWork<T, ID>,
{
    // SAFETY: The caller promises that `this` is valid.
    let work = unsafe { <T as HasWork<T, ID>>::raw_get_work(this.cast_mut()) };
    // SAFETY: `work` points into the live `T`.
    let work = unsafe { Work::raw_get(work) };
    // SAFETY: `HasDelayedWork` guarantees that the `work_struct` is the `work` field of a
    // `delayed_work`.
    unsafe { kernel::container_of!(work, bindings::delayed_work, work) }
}

/// Queues the delayed work item `ID` of `this` on `queue` to run `delay` jiffies from now,
/// whether or not it is already pending (`mod_delayed_work`): a pending item is moved to the
/// new time, which may be earlier or later.
///
/// The caller must not call this after [`disable_sync`] on the same item.
pub(crate) fn rearm<T, const ID: u64>(queue: &OwnedQueue, this: &Arc<T>, delay: Jiffies)
where
    T: WorkItem<ID, Pointer = Arc<T>> + HasDelayedWork<T, ID> + Send + Sync + 'static,
{
    // The reference that a newly queued instance will own.
    let raw = Arc::into_raw(this.clone());
    // SAFETY: `raw` comes from a live `Arc<T>`.
    let dwork = unsafe { delayed_work_of::<T, ID>(raw) };
    // SAFETY: `dwork` belongs to a live `T` whose work function is `T::Pointer::run`, which
    // takes back the reference leaked above when it runs; the queue is live.
    let was_pending = unsafe {
        bindings::mod_delayed_work_on(
            bindings::wq_misc_consts_WORK_CPU_UNBOUND as c_int,
            queue.ptr.as_ptr(),
            dwork,
            delay,
        )
    };
    if was_pending {
        // SAFETY: The pending instance already owns a reference, so the one leaked above was
        // not consumed; take it back.
        drop(unsafe { Arc::from_raw(raw) });
    }
}

/// Cancels the delayed work item `ID` of `this` and prevents it from being queued again; waits
/// for a running instance to finish.
pub(crate) fn disable_sync<T, const ID: u64>(this: &Arc<T>)
where
    T: WorkItem<ID, Pointer = Arc<T>> + HasDelayedWork<T, ID> + Send + Sync + 'static,
{
    let raw = Arc::as_ptr(this);
    // SAFETY: `raw` points to the live `T` that `this` keeps alive.
    let dwork = unsafe { delayed_work_of::<T, ID>(raw) };
    // SAFETY: `dwork` is a live, initialised delayed work item.
    let was_pending = unsafe { bindings::disable_delayed_work_sync(dwork) };
    if was_pending {
        // SAFETY: The cancelled instance owned one reference, leaked by `rearm` (or by
        // `enqueue`); it will never run, so take the reference back.
        drop(unsafe { Arc::from_raw(raw) });
    }
}

/// Cancels the work item `ID` of `this` and prevents it from being queued again (queueing it
/// fails from now on); waits for a running instance to finish.
pub(crate) fn disable_work_sync<T, const ID: u64>(this: &Arc<T>)
where
    T: WorkItem<ID, Pointer = Arc<T>> + HasWork<T, ID> + Send + Sync + 'static,
{
    let raw = Arc::as_ptr(this);
    // SAFETY: `raw` points to the live `T` that `this` keeps alive.
    let work = unsafe { Work::raw_get(<T as HasWork<T, ID>>::raw_get_work(raw.cast_mut())) };
    // SAFETY: `work` is a live, initialised work item.
    let was_pending = unsafe { bindings::disable_work_sync(work) };
    if was_pending {
        // SAFETY: The cancelled instance owned one reference, leaked by `enqueue`; it will
        // never run, so take the reference back.
        drop(unsafe { Arc::from_raw(raw) });
    }
}
