// SPDX-License-Identifier: GPL-2.0

//! Send buffers and the handles of outstanding sends.
//!
//! The C MAD layer hands clients a raw `ib_mad_send_buf *` for the whole life of a send, so a
//! cancel after the buffer was freed is a use-after-free (Documentation/behaviour.md §7.3). rmad
//! splits the three ownership phases of §2.6 into types:
//!
//! - a [`SendBuf`] is owned by the client while the send is *created* or *completed*: it can be
//!   edited, posted or dropped (which is `ib_free_send_mad`);
//! - [`Agent::post`](crate::engine::agent::Agent::post) consumes it and returns a [`SendHandle`]:
//!   while the send is *outstanding* the engine owns the buffer and the handle can only modify or
//!   cancel it;
//! - the send handler receives the [`SendBuf`] back by value with its [`SendCompletion`].
//!
//! A handle stays memory-safe forever (it keeps the send's record alive) but goes stale as soon
//! as the send completes: modify and cancel through a stale handle return `EINVAL`, exactly like
//! the C layer's "not found", never touching freed memory.

use crate::{
    engine::{
        agent::{
            queues::{
                QKey,
                Queue,
                QueueItem,
                Queued,
                TidKey,
                QUEUE_LINKS,
                TID_LINKS, //
            },
            Agent, AgentInner,
        },
        received::free_in_any_context,
    },
    mad::{
        retry::{
            Clock as RetryClock,
            Rules, //
        },
        rmpp::send::{
            AckClock,
            Window, //
        },
        state::{
            SendFacts,
            SendState,
            WcStatus, //
        },
        wire,
        Address, //
    },
    sys::rbtree::{
        Links,
        TreeItem, //
    },
};
use core::{
    cell::UnsafeCell,
    mem::MaybeUninit, //
};
use kernel::{
    alloc::Flags,
    prelude::*,
    sync::{
        atomic::Atomic,
        Arc,
        LockedBy,
        Refcount, //
    },
};

mod refs;

pub(crate) use refs::{
    BodyBox,
    SendRef,
    TxQueue,
    TxRef, //
};

/// The bytes of a send's MAD: inline up to [`wire::IB_MGMT_MAD_SIZE`] bytes (every IB MAD:
/// no allocation of its own), on the heap beyond (OPA's larger MADs).
///
/// # Invariants
///
/// `Inline::len <= wire::IB_MGMT_MAD_SIZE`.
#[expect(
    clippy::large_enum_variant,
    reason = "inline on purpose: an IB MAD needs no allocation of its own (atomic-safe create)"
)]
pub(crate) enum MadBytes {
    /// Up to 256 bytes, in the body itself.
    Inline {
        /// The MAD's size.
        len: usize,
        /// The bytes; those past `len` are unused.
        bytes: [u8; wire::IB_MGMT_MAD_SIZE],
    },
    /// A larger MAD.
    Heap(KVec<u8>),
}

/// How a new record's MAD is made ([`BodyBox::new`]).
#[allow(
    clippy::large_enum_variant,
    reason = "a MAD of bytes is moved in once, into the record; the common case is `Zeroed`"
)]
pub(crate) enum MadInit {
    /// `len` zero bytes (at most an IB MAD), written where the record lives: no copy.
    Zeroed(usize),
    /// These bytes, moved in.
    Bytes(MadBytes),
}

impl MadInit {
    /// `size` zero bytes: in place up to an IB MAD, allocated with `gfp` above.
    pub(crate) fn zeroed(size: usize, gfp: Flags) -> Result<Self> {
        if size <= wire::IB_MGMT_MAD_SIZE {
            return Ok(Self::Zeroed(size));
        }
        Ok(Self::Bytes(MadBytes::zeroed(size, gfp)?))
    }

    /// The initialiser of a record's MAD field.
    fn init(self) -> impl Init<UnsafeCell<MadBytes>> {
        // SAFETY: The closure writes a valid `MadBytes` at `slot` (`UnsafeCell` has the layout
        // of what it wraps) and never fails.
        unsafe {
            pin_init::init_from_closure(move |slot: *mut UnsafeCell<MadBytes>| {
                let slot = UnsafeCell::raw_get(slot);
                match self {
                    // INVARIANT: `len` is at most an IB MAD: `MadInit::zeroed` made it so.
                    Self::Zeroed(len) => slot.write(MadBytes::Inline {
                        len: len.min(wire::IB_MGMT_MAD_SIZE),
                        bytes: [0; wire::IB_MGMT_MAD_SIZE],
                    }),
                    Self::Bytes(b) => slot.write(b),
                }
                Ok(())
            })
        }
    }
}

impl MadBytes {
    /// `size` zero bytes.
    pub(crate) fn zeroed(size: usize, gfp: Flags) -> Result<Self> {
        if size <= wire::IB_MGMT_MAD_SIZE {
            // INVARIANT: Checked just above.
            return Ok(Self::Inline {
                len: size,
                bytes: [0; wire::IB_MGMT_MAD_SIZE],
            });
        }
        let mut v = KVec::with_capacity(size, gfp)?;
        v.resize(size, 0, gfp)?;
        Ok(Self::Heap(v))
    }
}

impl core::ops::Deref for MadBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            // By the type invariant the range is in bounds; an empty slice otherwise.
            Self::Inline { len, bytes } => bytes.get(..*len).unwrap_or(&[]),
            Self::Heap(v) => v,
        }
    }
}

impl core::ops::DerefMut for MadBytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            Self::Inline { len, bytes } => bytes.get_mut(..*len).unwrap_or(&mut []),
            Self::Heap(v) => v,
        }
    }
}

/// The RMPP payload of a send buffer: `seg_count * seg_size` zeroed bytes.
///
/// A transfer may be larger than kmalloc gives in one piece (4 MiB; less once memory is
/// fragmented), so a caller that may sleep gets kvmalloc'ed bytes, as the C layer's list of
/// segments would be; a caller that may not (`GFP_ATOMIC`, `GFP_NOWAIT`, possibly in hard
/// interrupt context, where vmalloc is not allowed) gets kmalloc'ed bytes or `ENOMEM`. Either
/// is freed atomic-safely (see `drop`).
pub(crate) enum Segments {
    /// None (a buffer without RMPP): nothing to free, where even an empty vector's drop calls
    /// the allocator.
    None,
    /// From kmalloc: the caller could not sleep.
    Kmalloc(KVec<u8>),
    /// From kvmalloc: the caller could sleep.
    Kvmalloc(KVVec<u8>),
}

impl Segments {
    /// No payload (a buffer without RMPP).
    pub(crate) fn none() -> Self {
        Self::None
    }

    /// `bytes` zero bytes, allocated with `gfp` (vmalloc allowed only if `gfp` may sleep).
    pub(crate) fn zeroed(bytes: usize, gfp: Flags) -> Result<Self> {
        if gfp.contains(GFP_KERNEL) {
            let mut v = KVVec::with_capacity(bytes, gfp)?;
            v.resize(bytes, 0, gfp)?;
            return Ok(Self::Kvmalloc(v));
        }
        let mut v = KVec::with_capacity(bytes, gfp)?;
        v.resize(bytes, 0, gfp)?;
        Ok(Self::Kmalloc(v))
    }
}

impl Drop for Segments {
    /// A buffer may be freed in any context but NMI (the C API's free is atomic-safe).
    fn drop(&mut self) {
        if let Self::Kvmalloc(v) = self {
            free_in_any_context(core::mem::replace(v, KVVec::new()));
        }
    }
}

impl core::ops::Deref for Segments {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Self::None => &[],
            Self::Kmalloc(v) => v,
            Self::Kvmalloc(v) => v,
        }
    }
}

impl core::ops::DerefMut for Segments {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            Self::None => &mut [],
            Self::Kmalloc(v) => v,
            Self::Kvmalloc(v) => v,
        }
    }
}

/// The part of a send buffer that moves between the client and the engine (its MAD, which a
/// transport reads while the send's transmission is queued, is beside it in the record and
/// reached through the [`BodyBox`]).
pub(crate) struct SendBody {
    /// RMPP payload segments, `seg_count * seg_size` bytes (empty without RMPP).
    pub(crate) segments: Segments,
    /// `hdr_len` of the create call.
    pub(crate) hdr_len: usize,
    /// `data_len` of the create call.
    pub(crate) data_len: usize,
    /// Number of RMPP segments (0 without RMPP).
    pub(crate) seg_count: usize,
    /// Payload bytes per RMPP segment (`mad_size - hdr_len`).
    pub(crate) seg_size: usize,
    /// An RMPP control message of the agent's own: its completion calls no handler.
    pub(crate) internal: bool,
    /// Destination QP number.
    pub(crate) remote_qpn: u32,
    /// P_Key table index.
    pub(crate) pkey_index: u16,
    /// Relative response timeout in milliseconds; 0 means no response is expected.
    pub(crate) timeout_ms: i32,
    /// Retries before a post; retransmissions performed when the send handler runs.
    pub(crate) retries: i32,
    /// The retry rules the send opted into (its agent's default unless the client set them).
    pub(crate) retry: Rules,
    /// What those rules remember of the current post (the engine's, from post to delivery).
    pub(crate) retry_clock: RetryClock,
    /// Destination; a wire send needs one.
    pub(crate) ah: Option<Address>,
    /// Two words that belong to the client.
    pub(crate) context: [usize; 2],
    /// A segmented send's window and ACK clock, from its post to its end (kernel RMPP): the
    /// engine's state of the post, kept here (the engine owns the body meanwhile) so that the
    /// record of every send stays small.
    pub(crate) seg: Option<SegSend>,
}

impl SendBody {
    /// Sets the retry rules of the next post; what the rules remembered of an earlier post
    /// goes with the old rules (the post starts its own clock too).
    pub(crate) fn set_retry(&mut self, rules: Rules) {
        self.retry = rules;
        self.retry_clock = RetryClock::default();
    }

    /// RMPP segment `n` (numbered from 1): `seg_size` bytes of the payload; `None` out of
    /// range and for a buffer without segments.
    pub(crate) fn segment_mut(&mut self, n: usize) -> Option<&mut [u8]> {
        if n == 0 || n > self.seg_count {
            return None;
        }
        let start = n.checked_sub(1)?.checked_mul(self.seg_size)?;
        let end = start.checked_add(self.seg_size)?;
        self.segments.get_mut(start..end)
    }
}

/// The state of a segmented send's post (kernel RMPP).
pub(crate) struct SegSend {
    /// Which segments are sent and ACKed, and the retries left.
    pub(crate) window: Window,
    /// How long the send waits for an ACK (reset at each post).
    pub(crate) clock: AckClock,
}

// A body with its inline MAD takes at most 512 bytes of its record.
const _: () = assert!(core::mem::size_of::<SendBody>() <= 512);

/// Where a queued transmission goes, copied into the record by the transport that queues it,
/// so that it hands the transmission to the device later without the agent's lock (the body
/// is the engine's meanwhile).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TxDest {
    /// Destination.
    pub(crate) ah: Address,
    /// Destination QP number.
    pub(crate) remote_qpn: u32,
    /// P_Key index.
    pub(crate) pkey_index: u16,
    /// The send's response timeout when queued (for the trace of the hand-over).
    pub(crate) timeout_ms: u32,
    /// Its retransmissions so far (likewise).
    pub(crate) retries: u32,
}

/// What the engine knows about an outstanding send, under its agent's lock.
#[derive(Default)]
pub(crate) struct RecordState {
    /// Incremented at every post; a [`SendHandle`] is valid only for its own post.
    pub(crate) gen: u64,
    /// State and the facts the state machine reads.
    pub(crate) facts: SendFacts,
    /// The body while the engine owns the send.
    pub(crate) body: Option<BodyBox>,
    /// The agent's queue the send is in, if any (its key there is in [`SendRecord::qlinks`]).
    pub(crate) queue: Option<Queue>,
    /// The status decided for the send handler, and its vendor error.
    pub(crate) status: Option<(WcStatus, u32)>,
    /// TID captured at post.
    pub(crate) tid: u64,
    /// Management class captured at post.
    pub(crate) class: u8,
    /// Method captured at post (for tracing).
    pub(crate) method: u8,
    /// Attribute ID captured at post (for tracing).
    pub(crate) attr_id: u16,
    /// The posted MAD is itself a response.
    pub(crate) is_response: bool,
    /// The receive handler of a response matched to this post is running. A status decided
    /// meanwhile (its send completion came on another CQ, or a cancel) waits in no queue, and
    /// the receive path calls the send handler once the receive handler returned: the C
    /// layer's order, whatever the transport's CQs do (Documentation/behaviour.md §8.7).
    pub(crate) in_recv: bool,
}

impl Queued for RecordState {
    fn queue_mut(&mut self) -> &mut Option<Queue> {
        &mut self.queue
    }

    fn queue(&self) -> Option<Queue> {
        self.queue
    }

    fn tid_key(&self) -> TidKey {
        (self.tid, self.class)
    }
}

/// What a trace event tells of a send (besides its agent's device, port and QP, and the
/// status): a copy taken under the agent's lock, to trace without it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SendTrace {
    /// The TID.
    pub(crate) tid: u64,
    /// The relative response timeout.
    pub(crate) timeout_ms: u32,
    /// Retransmissions performed.
    pub(crate) retries: u32,
    /// The attribute ID.
    pub(crate) attr_id: u16,
    /// The management class.
    pub(crate) class: u8,
    /// The method.
    pub(crate) method: u8,
}

impl RecordState {
    /// What a trace event tells of the send now.
    pub(crate) fn trace_fields(&self) -> SendTrace {
        SendTrace {
            tid: self.tid,
            timeout_ms: self.facts.timeout_ms,
            retries: self
                .body
                .as_ref()
                .map_or(0, |b| u32::try_from(b.retries).unwrap_or(0)),
            attr_id: self.attr_id,
            class: self.class,
            method: self.method,
        }
    }

    /// The destination, while the engine owns the body (the client cannot change it then).
    pub(crate) fn ah(&self) -> Option<Address> {
        self.body.as_ref()?.ah
    }

    /// The state of a segmented send's post, while the engine owns the body.
    pub(crate) fn seg(&self) -> Option<&SegSend> {
        self.body.as_ref()?.seg.as_ref()
    }

    /// The state of a segmented send's post, to change it.
    pub(crate) fn seg_mut(&mut self) -> Option<&mut SegSend> {
        self.body.as_mut()?.seg.as_mut()
    }
}

impl Default for SendFacts {
    fn default() -> Self {
        Self {
            state: SendState::Idle,
            fc: false,
            timeout_ms: 0,
            retries_left: 0,
        }
    }
}

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
pub(crate) struct SendRecord {
    /// The references of the record ([`SendRef`]).
    refs: Refcount,
    /// The agent the buffer was created on; it never changes.
    pub(crate) agent: Arc<Agent>,
    /// Mutable state, protected by the agent's lock.
    pub(crate) state: LockedBy<RecordState, AgentInner>,
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
    tx_links: UnsafeCell<[*const SendRecord; 2]>,
    /// Where a queued transmission goes, written and read by the holder of its [`TxRef`].
    tx_dest: UnsafeCell<Option<TxDest>>,
    /// Whether a [`TxRef`] of the record exists (it is queued or on the device).
    tx_taken: Atomic<bool>,
    /// Whether the record's [`BodyBox`] is parked in it ([`BodyBox::park`]).
    parked: Atomic<bool>,
    /// The MAD: `mad_size` bytes, the headers first. Written through the [`BodyBox`] (by the
    /// client, or by the engine before it transmits), read by a transport through the
    /// [`TxRef`] while the transmission waits for the device.
    mad: UnsafeCell<MadBytes>,
    /// The buffer's body, owned by its one [`BodyBox`] (which drops it in place).
    body: UnsafeCell<MaybeUninit<SendBody>>,
}

// SAFETY: The record's shared parts are atomic or locked (`state` by its agent's lock); the
// transmit links are touched only by the one holder of the `TxRef`, the body only by its one
// `BodyBox`, each of which may move between threads.
unsafe impl Send for SendRecord {}
// SAFETY: As above.
unsafe impl Sync for SendRecord {}

// A send buffer is one object of at most 768 bytes (the C layer's `ib_mad_send_wr_private`
// with its MAD takes a 1 KiB kmalloc object).
const _: () = assert!(core::mem::size_of::<SendRecord>() <= 768);

impl SendRecord {
    /// A new record of a buffer of `agent`, with `mad` and `body` (only [`BodyBox::new`] makes
    /// one).
    fn new(agent: &Arc<Agent>, mad: MadInit, body: SendBody) -> impl PinInit<Self> {
        let state = LockedBy::new(&agent.inner, RecordState::default());
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

// SAFETY: `links` returns the structurally pinned field `qlinks` every time; `from_links` is
// its `container_of`. Only the queues of the record's agent hold it through them (`Queues`, in
// the agent's locked state), always under the agent's lock.
unsafe impl TreeItem<QUEUE_LINKS> for SendRecord {
    type Key = QKey;
    type Ref = SendRef;

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
unsafe impl TreeItem<TID_LINKS> for SendRecord {
    type Key = TidKey;
    type Ref = SendRef;

    fn links(&self) -> &Links<TidKey> {
        &self.tlinks
    }

    unsafe fn from_links(links: *const Links<TidKey>) -> *const Self {
        // SAFETY: `links` is the `tlinks` field of a live record (the caller's promise).
        unsafe { kernel::container_of!(links, Self, tlinks) }
    }
}

impl QueueItem for SendRecord {
    fn tid_ref(r: SendRef) -> SendRef {
        r
    }
}

/// A send buffer owned by the client (`struct ib_mad_send_buf`).
///
/// Create one with [`Agent::create_send`](crate::engine::agent::Agent::create_send), fill in the
/// MAD, the destination and the timeout, and post it with
/// [`Agent::post`](crate::engine::agent::Agent::post). Dropping it frees it (`ib_free_send_mad`);
/// an agent's unregistration waits until every buffer created on it has been dropped. Never drop
/// one while holding a lock that a handler of the same agent takes.
pub(crate) struct SendBuf {
    /// The body, which holds the record.
    pub(crate) body: BodyBox,
}

#[cfg_attr(
    not(rmad_test),
    allow(dead_code, reason = "accessors of the Rust API; the C API uses a few")
)]
impl SendBuf {
    /// The MAD bytes (`mad_size` of them).
    pub(crate) fn mad(&self) -> &[u8] {
        self.body.mad()
    }

    /// The MAD bytes, to fill in before posting.
    pub(crate) fn mad_mut(&mut self) -> &mut [u8] {
        self.body.mad_mut()
    }

    /// RMPP segment `n` (numbered from 1), as `ib_get_rmpp_segment`; `None` out of range.
    pub(crate) fn rmpp_segment(&mut self, n: usize) -> Option<&mut [u8]> {
        self.body.segment_mut(n)
    }

    /// Relative response timeout in milliseconds (0: no response expected).
    pub(crate) fn timeout_ms(&self) -> i32 {
        self.body.timeout_ms
    }

    /// Sets the response timeout used from the next post on.
    pub(crate) fn set_timeout_ms(&mut self, ms: i32) {
        self.body.timeout_ms = ms;
    }

    /// Before a post: retries wanted. In the send handler: retransmissions performed.
    pub(crate) fn retries(&self) -> i32 {
        self.body.retries
    }

    /// Sets the number of retries for the next post.
    pub(crate) fn set_retries(&mut self, retries: i32) {
        self.body.retries = retries;
    }

    /// Sets the retry rules of the next post (Documentation/behaviour.md §2.11); a deadline
    /// longer than [`crate::mad::retry::MAX_DEADLINE_MS`] counts as that.
    pub(crate) fn set_retry_rules(&mut self, rules: Rules) {
        self.body.set_retry(rules);
    }

    /// The destination.
    pub(crate) fn ah(&self) -> Option<Address> {
        self.body.ah
    }

    /// Sets the destination.
    pub(crate) fn set_ah(&mut self, ah: Option<Address>) {
        self.body.ah = ah;
    }

    /// The client's two context words.
    pub(crate) fn context(&self) -> [usize; 2] {
        self.body.context
    }

    /// Sets the client's two context words.
    pub(crate) fn set_context(&mut self, context: [usize; 2]) {
        self.body.context = context;
    }

    /// `hdr_len` of the create call.
    pub(crate) fn hdr_len(&self) -> usize {
        self.body.hdr_len
    }

    /// `data_len` of the create call.
    pub(crate) fn data_len(&self) -> usize {
        self.body.data_len
    }

    /// Number of RMPP segments (0 for a plain MAD).
    pub(crate) fn seg_count(&self) -> usize {
        self.body.seg_count
    }

    /// Payload bytes per RMPP segment.
    pub(crate) fn seg_size(&self) -> usize {
        self.body.seg_size
    }

    /// The agent the buffer belongs to.
    pub(crate) fn agent(&self) -> &Arc<Agent> {
        &self.body.rec().agent
    }

    /// The buffer's record.
    pub(crate) fn rec(&self) -> &SendRef {
        self.body.rec()
    }
}

/// The handle of an outstanding send: what modify and cancel act on.
///
/// It is valid from the post that returned it until the send handler is called for that post;
/// after that every operation returns `EINVAL`.
#[derive(Clone)]
pub(crate) struct SendHandle {
    pub(crate) rec: SendRef,
    pub(crate) gen: u64,
}

impl SendHandle {
    /// `ib_cancel_mad`: cancels the send. On success the send handler will be called exactly
    /// once with `IB_WC_WR_FLUSH_ERR`, later and from the completion workqueue; `EINVAL` means
    /// the send was already cancelled or its final status is already decided. Never sleeps,
    /// never allocates, never calls a handler; usable with interrupts disabled.
    #[cfg_attr(
        not(rmad_test),
        expect(dead_code, reason = "Rust API that only the test flavour calls")
    )]
    pub(crate) fn cancel(&self) -> Result {
        self.modify(0)
    }

    /// `ib_modify_mad`: sets a new response timeout, from now if the send is waiting for a
    /// response (0 cancels). Same context rules as [`SendHandle::cancel`].
    pub(crate) fn modify(&self, timeout_ms: i32) -> Result {
        self.rec.agent.modify(self, timeout_ms)
    }

    /// The agent of the send.
    pub(crate) fn agent(&self) -> &Arc<Agent> {
        &self.rec.agent
    }
}

/// What the send handler learns about a completed send (`struct ib_mad_send_wc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SendCompletion {
    /// Final status.
    pub(crate) status: WcStatus,
    /// Vendor error of the transport completion the status came from (0 otherwise).
    pub(crate) vendor_err: u32,
    /// The post that completed: the generation its [`SendHandle`] carries.
    pub(crate) post: u64,
}

impl SendHandle {
    /// `context[0]` of the send while the engine owns it (the receive handler may read the
    /// request it was matched to); `None` once the buffer is back with the client.
    pub(crate) fn tag(&self) -> Option<usize> {
        let inner = self.rec.agent.lock();
        let state = self.rec.state.access(&inner);
        state.body.as_ref().map(|b| b.context[0])
    }
}
