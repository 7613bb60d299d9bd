// SPDX-License-Identifier: GPL-2.0

//! The client's send buffer and the handle of an outstanding send.

use super::{
    owner::RecordOwner,
    refs::{
        BodyBox,
        SendRef, //
    },
};
use crate::mad::{
    retry::Rules,
    state::WcStatus,
    Address, //
};
use kernel::sync::Arc;

/// A send buffer owned by the client (`struct ib_mad_send_buf`).
///
/// Create one with [`Agent::create_send`](crate::engine::agent::Agent::create_send), fill in the
/// MAD, the destination and the timeout, and post it with
/// [`Agent::post`](crate::engine::agent::Agent::post). Dropping it frees it (`ib_free_send_mad`);
/// an agent's unregistration waits until every buffer created on it has been dropped. Never drop
/// one while holding a lock that a handler of the same agent takes.
pub(crate) struct SendBuf<A: RecordOwner> {
    /// The body, which holds the record.
    pub(crate) body: BodyBox<A>,
}

#[cfg_attr(
    not(rmad_test),
    allow(dead_code, reason = "accessors of the Rust API; the C API uses a few")
)]
impl<A: RecordOwner> SendBuf<A> {
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
    pub(crate) fn agent(&self) -> &Arc<A> {
        &self.body.rec().agent
    }

    /// The buffer's record.
    pub(crate) fn rec(&self) -> &SendRef<A> {
        self.body.rec()
    }
}

/// The handle of an outstanding send: what modify and cancel act on.
///
/// It is valid from the post that returned it until the send handler is called for that post;
/// after that every operation returns `EINVAL`.
pub(crate) struct SendHandle<A: RecordOwner> {
    /// The send's record.
    pub(crate) rec: SendRef<A>,
    /// The post the handle is valid for ([`RecordState::gen`](super::RecordState::gen)).
    pub(crate) gen: u64,
}

impl<A: RecordOwner> SendHandle<A> {
    /// The agent of the send.
    pub(crate) fn agent(&self) -> &Arc<A> {
        &self.rec.agent
    }
}

// By hand: a derive would require `A: Clone`.
impl<A: RecordOwner> Clone for SendHandle<A> {
    fn clone(&self) -> Self {
        Self {
            rec: self.rec.clone(),
            gen: self.gen,
        }
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
