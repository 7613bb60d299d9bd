// SPDX-License-Identifier: GPL-2.0

//! What a send buffer holds besides its record's links and state: the MAD's bytes, the RMPP
//! payload, the body that moves between the client and the engine, and where a queued
//! transmission goes.

use crate::{
    engine::received::free_in_any_context,
    mad::{
        retry::{
            Clock as RetryClock,
            Rules, //
        },
        rmpp::send::{
            AckClock,
            Window, //
        },
        wire,
        Address, //
    },
};
use core::cell::UnsafeCell;
use kernel::{
    alloc::Flags,
    prelude::*, //
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

/// How a new record's MAD is made ([`BodyBox::new`](super::BodyBox::new)).
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
    pub(super) fn init(self) -> impl Init<UnsafeCell<MadBytes>> {
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
/// reached through the [`BodyBox`](super::BodyBox)).
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
