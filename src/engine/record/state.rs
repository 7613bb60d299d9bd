// SPDX-License-Identifier: GPL-2.0

//! What the engine keeps of each send under its agent's lock.

use super::{body::SegSend, owner::RecordOwner, refs::BodyBox};
use crate::{
    engine::agent::queues::{
        Queue,
        Queued,
        TidKey, //
    },
    mad::{
        state::{
            SendFacts,
            SendState,
            WcStatus, //
        },
        Address, //
    },
};
/// What the engine knows about an outstanding send, under its agent's lock.
pub(crate) struct RecordState<A: RecordOwner> {
    /// Incremented at every post; a [`SendHandle`](super::SendHandle) is valid only for its
    /// own post.
    pub(crate) gen: u64,
    /// State and the facts the state machine reads.
    pub(crate) facts: SendFacts,
    /// The body while the engine owns the send.
    pub(crate) body: Option<BodyBox<A>>,
    /// The agent's queue the send is in, if any (its key there is in
    /// [`SendRecord::qlinks`](super::SendRecord::qlinks)).
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

impl<A: RecordOwner> Queued for RecordState<A> {
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

impl<A: RecordOwner> RecordState<A> {
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

impl<A: RecordOwner> Default for RecordState<A> {
    fn default() -> Self {
        Self {
            gen: 0,
            facts: SendFacts::default(),
            body: None,
            queue: None,
            status: None,
            tid: 0,
            class: 0,
            method: 0,
            attr_id: 0,
            is_response: false,
            in_recv: false,
        }
    }
}
