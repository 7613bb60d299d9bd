// SPDX-License-Identifier: GPL-2.0

//! The record of a send buffer: the one object of rmad's slab cache a send takes.

use super::{
    body::{
        MadBytes,
        MadInit,
        SendBody,
        TxDest, //
    },
    owner::RecordOwner,
};
use crate::{
    engine::agent::queues::{
        QKey,
        TidKey, //
    },
    sys::rbtree::Links,
};
use core::{
    cell::UnsafeCell,
    mem::MaybeUninit, //
};
use kernel::{
    prelude::*,
    sync::{
        atomic::Atomic,
        Arc,
        LockedBy,
        Refcount, //
    },
};

/// The record of one send buffer, shared by the buffer, its handles and the agent's indexes,
/// with the buffer's body: the one object of rmad's slab cache a send takes ([`SendRef`]).
///
/// It carries the links of every index a send is in, so that posting, moving between queues,
/// completing and cancelling allocate nothing: its agent's queues and TID index (intrusive
/// trees, [`crate::sys::rbtree`]) and a transport's transmit queue ([`TxQueue`]). A send has at
/// most one transmission queued or on the device at a time (a retry starts only after the
/// previous send completion), and [`TxRef::take`] refuses a second one.
///
/// # Invariants
///
/// - `refs` counts the [`SendRef`]s of the record (a [`BodyBox`] and a [`TxRef`] hold one each);
///   the record lives in its slab object until it drops to 0.
/// - `body` is initialised while the record's one [`BodyBox`] exists or is parked (`parked`,
///   [`BodyBox::park`]), and reached only through that box; a parked box keeps its count of
///   `refs`.
/// - `mad` is written only through the record's [`BodyBox`], and only while `tx_taken` is clear;
///   while it is set, the holder of the [`TxRef`] may read it too.
/// - `tx_links` and `tx_dest` are touched only by the holder of the record's [`TxRef`], which
///   exists while `tx_taken` is set.
#[pin_data]
pub(crate) struct SendRecord<A: RecordOwner> {
    /// The references of the record ([`SendRef`]).
    pub(super) refs: Refcount,
    /// The agent the buffer was created on; it never changes.
    pub(crate) agent: Arc<A>,
    /// Mutable state, protected by the agent's lock.
    pub(crate) state: LockedBy<A::State, A::Locked>,
    /// The post generation of the transmission queued or on the device.
    pub(crate) tx_gen: Atomic<u64>,
    /// Links in one of the agent's queues, only ever linked into a tree of `agent`'s, under its
    /// lock.
    #[pin]
    pub(crate) qlinks: Links<QKey>,
    /// Links in the agent's TID index, only ever linked into `agent`'s, under its lock.
    #[pin]
    pub(crate) tlinks: Links<TidKey>,
    /// Links in a transmit queue (previous, next), touched only by the holder of the
    /// record's [`TxRef`].
    pub(super) tx_links: UnsafeCell<[*const SendRecord<A>; 2]>,
    /// Where a queued transmission goes, written and read by the holder of its [`TxRef`].
    pub(super) tx_dest: UnsafeCell<Option<TxDest>>,
    /// Whether a [`TxRef`] of the record exists (it is queued or on the device).
    pub(super) tx_taken: Atomic<bool>,
    /// Whether the record's [`BodyBox`] is parked in it ([`BodyBox::park`]).
    pub(super) parked: Atomic<bool>,
    /// The MAD: `mad_size` bytes, the headers first. Written through the [`BodyBox`] (by the
    /// client, or by the engine before it transmits), read by a transport through the
    /// [`TxRef`] while the transmission waits for the device.
    pub(super) mad: UnsafeCell<MadBytes>,
    /// The buffer's body, owned by its one [`BodyBox`] (which drops it in place).
    pub(super) body: UnsafeCell<MaybeUninit<SendBody>>,
}

// SAFETY: The record's shared parts are atomic or locked (`state` by its agent's lock); the
// transmit links are touched only by the one holder of the `TxRef`, the body only by its one
// `BodyBox`, each of which may move between threads.
unsafe impl<A: RecordOwner> Send for SendRecord<A> {}
// SAFETY: As above.
unsafe impl<A: RecordOwner> Sync for SendRecord<A> {}

impl<A: RecordOwner> SendRecord<A> {
    /// A new record of a buffer of `agent`, with `mad` and `body` (only [`BodyBox::new`] makes
    /// one).
    pub(super) fn new(agent: &Arc<A>, mad: MadInit, body: SendBody) -> impl PinInit<Self> {
        let state = agent.new_state();
        let agent = agent.clone();
        pin_init!(SendRecord {
            refs: Refcount::new(1),
            agent,
            state,
            tx_gen: Atomic::new(0),
            qlinks <- Links::new(),
            tlinks <- Links::new(),
            tx_links: UnsafeCell::new([core::ptr::null(); 2]),
            tx_dest: UnsafeCell::new(None),
            tx_taken: Atomic::new(false),
            parked: Atomic::new(false),
            mad <- mad.init(),
            body: UnsafeCell::new(MaybeUninit::new(body)),
        })
    }

    /// The layout of a record: what rmad's slab cache is made for.
    pub(crate) fn layout() -> core::alloc::Layout {
        core::alloc::Layout::new::<Self>()
    }
}
