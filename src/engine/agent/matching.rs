// SPDX-License-Identifier: GPL-2.0

//! Received MADs: response matching (`ib_find_send_mad`, Documentation/behaviour.md §4) and the
//! receive handler, followed by the send handler for a matched response.

use super::{
    queues::QKey,
    Agent,
    AgentInner,
    Queue,
    RecvHandler, //
};
use crate::{
    engine::{
        send::{
            RecordState,
            SendHandle,
            SendRef, //
        },
        transport::RecvMad, //
    },
    mad::{
        state::{
            CancelWait,
            Event,
            Recv,
            SendState, //
        },
        wire::{
            self,
            MadHdr, //
        },
        QpType, //
    },
    sys::trace, //
};
use kernel::{
    prelude::*,
    sync::Arc, //
};

impl Agent {
    /// Whether a received response passes the address check against a send
    /// (`rcv_has_same_gid`, Documentation/behaviour.md §4).
    pub(super) fn same_address(&self, state: &RecordState, hdr: &MadHdr, recv: &RecvMad) -> bool {
        if hdr.mgmt_class == wire::IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE {
            return true;
        }
        let Some(ah) = state.ah() else {
            return false;
        };
        let wc = &recv.wc;
        if state.is_response == hdr.is_response() || ah.grh.is_some() != wc.grh.is_some() {
            return false;
        }
        if !state.is_response {
            // Sent a request, received a response: it must have come back to our own LID.
            match (ah.grh, wc.grh) {
                (Some(inner), Some((_, dgid))) => {
                    self.transport.gid(self.port, inner.sgid_index) == Some(dgid)
                }
                _ => {
                    // The LMC now: the subnet manager may change it (C reads the cache too).
                    let lmc = self
                        .transport
                        .port_attr(self.port)
                        .map_or(self.port_attr.lmc, |a| a.lmc);
                    let mask = u8::try_from((1u16 << lmc.min(7)) - 1).unwrap_or(0x7f);
                    lmc == 0 || (ah.src_path_bits & mask) == (wc.dlid_path_bits & mask)
                }
            }
        } else {
            // Sent a response, received a request: it must come from where we sent.
            match (ah.grh, wc.grh) {
                (Some(inner), Some((sgid, _))) => inner.dgid == sgid,
                _ => ah.dlid == wc.slid,
            }
        }
    }

    /// Finds the send a response matches (`ib_find_send_mad`, Documentation/behaviour.md §4): among
    /// the sends with its TID and class, the first in the C layer's list order (wait list with
    /// cancelled sends at its head, then the backlog, then the send list) that passes the address
    /// check. Sends on the send list qualify only while they expect a response. Costs O(log n) plus
    /// the number of sends sharing the TID and class.
    pub(super) fn find_send(
        &self,
        inner: &AgentInner,
        hdr: &MadHdr,
        recv: &RecvMad,
    ) -> Option<SendRef> {
        let mut best: Option<((Queue, QKey), SendRef)> = None;
        let mut next = inner.queues.tids().find(&(hdr.tid, hdr.mgmt_class));
        while let Some(rec) = next {
            let state = rec.state.access(inner);
            let listed = match state.facts.state {
                // A segmented send in flight takes its ACKs (C's ACK timeout is set then).
                SendState::SendStart => state.facts.timeout_ms != 0 || state.seg().is_some(),
                SendState::WaitResp | SendState::Queued => true,
                SendState::Canceled(CancelWait::TimeoutWork) => true,
                _ => false,
            };
            if let Some(at) = inner.queues.position(&rec, state) {
                if listed
                    && best.as_ref().is_none_or(|(b, _)| at < *b)
                    && self.same_address(state, hdr, recv)
                {
                    best = Some((at, rec.into()));
                }
            }
            next = inner.queues.tids().next_same(&rec);
        }
        best.map(|(_, r)| r)
    }

    /// Handles a MAD routed to this agent by the engine.
    pub(crate) fn receive(self: &Arc<Self>, hdr: &MadHdr, recv: RecvMad) {
        if recv.wc.private_request && self.rmpp_version == 0 {
            // An RMPP control message that bypassed QP1 (src/verbs.rs) is for RMPP agents only.
            return;
        }
        let Some(rh) = self.recv_handler.clone() else {
            self.drop_unhandled(hdr);
            return;
        };
        // Kernel RMPP first (Documentation/behaviour.md §2.10.1): a segment is taken, answered or
        // dropped there, and the last one comes back as the whole message.
        let (recv, whole) = if self.kernel_rmpp() {
            let Some(m) = self.reassemble(hdr, recv) else {
                return;
            };
            let h = MadHdr::parse(&m.mad).ok();
            (m, h)
        } else {
            (recv, None)
        };
        let hdr = whole.as_ref().unwrap_or(hdr);
        if hdr.is_response() {
            self.receive_response(&rh, hdr, recv);
        } else if self.enter_recv() {
            self.in_handler_then(
                || rh.recv(self, None, recv),
                |inner, ()| self.recv_returned(inner),
            );
        }
    }

    /// A MAD for an agent without a receive handler: dropped, as in C (which logs it); a
    /// response is counted and traced with the other responses nobody takes.
    fn drop_unhandled(&self, hdr: &MadHdr) {
        if !hdr.is_response() {
            return;
        }
        let mut inner = self.lock();
        if !inner.dead {
            inner.stats.dropped_responses = inner.stats.dropped_responses.saturating_add(1);
            drop(inner);
            self.trace_dropped(hdr);
        }
    }

    /// Counts a receive handler (or the kernel RMPP receive) as running; `false` if the agent
    /// is dead, and nothing runs.
    fn enter_recv(&self) -> bool {
        let mut inner = self.lock();
        if inner.dead {
            return false;
        }
        inner.in_recv = inner.in_recv.saturating_add(1);
        true
    }

    /// Kernel RMPP's receive of `recv` (counted as a running receive): the whole message once
    /// its last segment came, `None` while it is not whole or was taken by RMPP.
    fn reassemble(self: &Arc<Self>, hdr: &MadHdr, recv: RecvMad) -> Option<RecvMad> {
        if !self.enter_recv() {
            return None;
        }
        let whole = self.rmpp_receive(hdr, recv);
        self.recv_done();
        whole
    }

    /// A response: matched to its send and handed to the receive handler, then the send
    /// handler; or, matching none, handled by [`Agent::unmatched`].
    fn receive_response(self: &Arc<Self>, rh: &Arc<dyn RecvHandler>, hdr: &MadHdr, recv: RecvMad) {
        let handle = {
            let mut inner = self.lock();
            if inner.dead {
                return;
            }
            let Some(rec) = self.find_send(&inner, hdr, &recv) else {
                return self.unmatched(inner, rh, hdr, recv);
            };
            let matched = Self::with_state(&mut inner, &rec, |inner, state| {
                self.match_response(inner, &rec, state, hdr)
            });
            let Some(gen) = matched else {
                return self.unmatched(inner, rh, hdr, recv);
            };
            inner.in_recv = inner.in_recv.saturating_add(1);
            SendHandle { rec, gen }
        };
        // One handler frame for both calls: the receive handler, then, once its send's status
        // is decided (at the match for a response after the send completion; for an early
        // response, if its send completion came while the receive handler ran), the send
        // handler in this thread, as the C layer's CQ worker does.
        self.in_handler_then(
            || {
                rh.recv(self, Some(&handle), recv);
                self.deliver_after_response(&handle.rec, handle.gen)
            },
            |inner, delivered| {
                self.handlers_returned(inner, *delivered);
                self.recv_returned(inner);
            },
        );
    }

    /// Under the agent's lock: the response with header `hdr` matched the send `rec`, whose
    /// state is `state`. Returns the post it answers, if the state machine delivers it (the
    /// send then waits for its receive handler to return).
    fn match_response(
        self: &Arc<Self>,
        inner: &mut AgentInner,
        rec: &SendRef,
        state: &mut RecordState,
        hdr: &MadHdr,
    ) -> Option<u64> {
        let was = state.facts.state;
        let outcome = self.apply(inner, rec, state, Event::Response).ok()?;
        if outcome.frees_fc_slot {
            // The backlog moves before this send's handler runs (Documentation/behaviour.md
            // §3.3).
            self.dispatch_some(inner);
        }
        if outcome.recv != Recv::Deliver {
            return None;
        }
        if was == SendState::SendStart {
            inner.stats.early_responses = inner.stats.early_responses.saturating_add(1);
        }
        self.trace_send(trace::Ev::ResponseMatched, state, u32::from(hdr.status));
        inner.stats.responses = inner.stats.responses.saturating_add(1);
        // Until the receive handler returns, a status decided for the send waits for it (an
        // early response's send completion may come meanwhile).
        state.in_recv = true;
        Some(state.gen)
    }

    /// A response that matched no send, with the agent's lock `inner` held: dropped and counted,
    /// or, on a user-RMPP agent (`IB_MAD_USER_RMPP`) for an active RMPP response of an RMPP
    /// class such as segments 2..N of an answer whose first segment completed the request,
    /// handed to the receive handler with no send (Documentation/behaviour.md §2.10.7). Plain
    /// agents (`rmpp_version` 0) drop those too, unlike C (§8.14).
    fn unmatched(
        self: &Arc<Self>,
        mut inner: super::hold::Held<'_>,
        rh: &Arc<dyn RecvHandler>,
        hdr: &MadHdr,
        recv: RecvMad,
    ) {
        let user_rmpp = self.rmpp_version != 0 && self.flags & wire::IB_MAD_USER_RMPP != 0;
        let active = wire::rmpp_hdr(&recv.mad)
            .and_then(wire::ib_get_rmpp_flags)
            .is_ok_and(|f| f & wire::IB_MGMT_RMPP_FLAG_ACTIVE != 0);
        if !(user_rmpp && active && wire::ib_is_mad_class_rmpp(hdr.mgmt_class)) {
            inner.stats.dropped_responses = inner.stats.dropped_responses.saturating_add(1);
            self.trace_dropped(hdr);
            return;
        }
        inner.stats.user_rmpp_unmatched = inner.stats.user_rmpp_unmatched.saturating_add(1);
        inner.in_recv = inner.in_recv.saturating_add(1);
        drop(inner);
        self.in_handler(|| rh.recv(self, None, recv));
        self.recv_done();
    }

    /// Traces a response that matched no send that takes one.
    fn trace_dropped(&self, hdr: &MadHdr) {
        trace::fire(trace::Ev::ResponseDropped, || trace::Info {
            dev: self.device_name().as_char_ptr(),
            tid: hdr.tid,
            qp_num: if self.qp_type == QpType::Smi { 0 } else { 1 },
            timeout_ms: 0,
            retries: 0,
            attr_id: hdr.attr_id,
            status: hdr.status,
            port: self.port,
            mgmt_class: hdr.mgmt_class,
            method: hdr.method,
        });
    }

    /// A receive handler returned.
    pub(super) fn recv_done(&self) {
        self.recv_returned(&mut self.lock());
    }

    /// A receive handler returned, counted under the lock `inner`.
    pub(super) fn recv_returned(&self, inner: &mut AgentInner) {
        inner.in_recv = inner.in_recv.saturating_sub(1);
        self.wake(inner);
    }
}
