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
//!
//! The types are those of `src/engine/record.rs`, named here for the engine's [`Agent`].

pub(crate) use super::record::{
    MadInit,
    SegSend,
    Segments,
    SendBody,
    SendCompletion,
    SendTrace,
    TxDest, //
};
use super::{
    agent::Agent,
    record, //
};
use kernel::prelude::*;

/// The record of one send buffer of an agent ([`record::SendRecord`]).
pub(crate) type SendRecord = record::SendRecord<Agent>;
/// What the engine keeps of a send under its agent's lock ([`record::RecordState`]).
pub(crate) type RecordState = record::RecordState<Agent>;
/// A counted reference of a send's record ([`record::SendRef`]).
pub(crate) type SendRef = record::SendRef<Agent>;
/// The owner of a send's body ([`record::BodyBox`]).
pub(crate) type BodyBox = record::BodyBox<Agent>;
/// A transport's hold of a send's transmission ([`record::TxRef`]).
pub(crate) type TxRef = record::TxRef<Agent>;
/// A transport's queue of transmissions ([`record::TxQueue`]).
pub(crate) type TxQueue = record::TxQueue<Agent>;
/// A send buffer owned by the client ([`record::SendBuf`]).
pub(crate) type SendBuf = record::SendBuf<Agent>;
/// The handle of an outstanding send ([`record::SendHandle`]).
pub(crate) type SendHandle = record::SendHandle<Agent>;

// A send buffer is one object of at most 768 bytes (the C layer's `ib_mad_send_wr_private`
// with its MAD takes a 1 KiB kmalloc object).
const _: () = assert!(core::mem::size_of::<SendRecord>() <= 768);

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

    /// `context[0]` of the send while the engine owns it (the receive handler may read the
    /// request it was matched to); `None` once the buffer is back with the client.
    pub(crate) fn tag(&self) -> Option<usize> {
        let inner = self.rec.agent.lock();
        let state = self.rec.state.access(&inner);
        state.body.as_ref().map(|b| b.context[0])
    }
}
