// SPDX-License-Identifier: GPL-2.0

//! Received MADs: response matching (`ib_find_send_mad`, Documentation/behaviour.md §4) and the
//! receive handler, followed by the send handler for a matched response.

use super::{
    Agent,
    AgentInner,
    Queue,
    RecvHandler, //
};
use crate::{
    engine::{
        send::{
            QKey,
            RecordState,
            SendHandle,
            SendRecord, //
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
    pub(super) fn same_address(&self, st: &RecordState, hdr: &MadHdr, recv: &RecvMad) -> bool {
        if hdr.mgmt_class == wire::IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE {
            return true;
        }
        let Some(ah) = st.ah() else {
            return false;
        };
        let wc = &recv.wc;
        if st.is_response == hdr.is_response() || ah.grh.is_some() != wc.grh.is_some() {
            return false;
        }
        if !st.is_response {
            // Sent a request, received a response: it must have come back to our own LID.
            match (ah.grh, wc.grh) {
                (Some(g), Some((_, dgid))) => {
                    self.transport.gid(self.port, g.sgid_index) == Some(dgid)
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
                (Some(g), Some((sgid, _))) => g.dgid == sgid,
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
        g: &AgentInner,
        hdr: &MadHdr,
        recv: &RecvMad,
    ) -> Option<Arc<SendRecord>> {
        let mut best: Option<((Queue, QKey), Arc<SendRecord>)> = None;
        let key = (hdr.tid, hdr.mgmt_class);
        let mut next = g.tids.lower_bound(&key);
        while let Some((k, rec)) = next {
            if k != key {
                break;
            }
            let st = rec.state.access(g);
            let listed = match st.facts.state {
                // A segmented send in flight takes its ACKs (C's ACK timeout is set then).
                SendState::SendStart => st.facts.timeout_ms != 0 || st.seg().is_some(),
                SendState::WaitResp | SendState::Queued => true,
                SendState::Canceled(CancelWait::TimeoutWork) => true,
                _ => false,
            };
            if let Some(at) = Self::position(g, &rec, st) {
                if listed
                    && best.as_ref().is_none_or(|(b, _)| at < *b)
                    && self.same_address(st, hdr, recv)
                {
                    best = Some((at, rec.into()));
                }
            }
            next = g.tids.next(&rec);
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
            // Dropped, as in C (which logs it); a response is counted and traced with the
            // other responses nobody takes.
            if hdr.is_response() {
                let mut g = self.lock();
                if !g.dead {
                    g.stats.dropped_responses = g.stats.dropped_responses.saturating_add(1);
                    drop(g);
                    self.trace_dropped(hdr);
                }
            }
            return;
        };
        // Kernel RMPP first (Documentation/behaviour.md §2.10.1): a segment is taken, answered or
        // dropped there, and the last one comes back as the whole message.
        let (recv, whole) = if self.kernel_rmpp() {
            {
                let mut g = self.lock();
                if g.dead {
                    return;
                }
                g.in_recv = g.in_recv.saturating_add(1);
            }
            let r = self.rmpp_receive(hdr, recv);
            self.recv_done();
            match r {
                Some(m) => {
                    let h = MadHdr::parse(&m.mad).ok();
                    (m, h)
                }
                None => return,
            }
        } else {
            (recv, None)
        };
        let hdr = whole.as_ref().unwrap_or(hdr);
        if !hdr.is_response() {
            {
                let mut g = self.lock();
                if g.dead {
                    return;
                }
                g.in_recv = g.in_recv.saturating_add(1);
            }
            self.in_handler_then(|| rh.recv(self, None, recv), |g, ()| self.recv_returned(g));
            return;
        }

        let handle = {
            let mut g = self.lock();
            if g.dead {
                return;
            }
            let Some(rec) = self.find_send(&g, hdr, &recv) else {
                return self.unmatched(g, &rh, hdr, recv);
            };
            let r = Self::with_state(&mut g, &rec, |g, st| {
                let was = st.facts.state;
                let o = self.apply(g, &rec, st, Event::Response).ok()?;
                if o.frees_fc_slot {
                    // The backlog moves before this send's handler runs (Documentation/behaviour.md
                    // §3.3).
                    self.dispatch_some(g);
                }
                if o.recv != Recv::Deliver {
                    return None;
                }
                if was == SendState::SendStart {
                    g.stats.early_responses = g.stats.early_responses.saturating_add(1);
                }
                self.trace_send(trace::Ev::ResponseMatched, st, u32::from(hdr.status));
                g.stats.responses = g.stats.responses.saturating_add(1);
                // Until the receive handler returns, a status decided for the send waits for
                // it (an early response's send completion may come meanwhile).
                st.in_recv = true;
                Some(st.gen)
            });
            let Some(gen) = r else {
                return self.unmatched(g, &rh, hdr, recv);
            };
            g.in_recv = g.in_recv.saturating_add(1);
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
            |g, delivered| {
                self.handlers_returned(g, *delivered);
                self.recv_returned(g);
            },
        );
    }

    /// A response that matched no send, with the agent's lock `g` held: dropped and counted,
    /// or, on a user-RMPP agent (`IB_MAD_USER_RMPP`) for an active RMPP response of an RMPP
    /// class such as segments 2..N of an answer whose first segment completed the request,
    /// handed to the receive handler with no send (Documentation/behaviour.md §2.10.7). Plain
    /// agents (`rmpp_version` 0) drop those too, unlike C (§8.14).
    fn unmatched(
        self: &Arc<Self>,
        mut g: super::hold::Held<'_>,
        rh: &Arc<dyn RecvHandler>,
        hdr: &MadHdr,
        recv: RecvMad,
    ) {
        let user_rmpp = self.rmpp_version != 0 && self.flags & wire::IB_MAD_USER_RMPP != 0;
        let active = wire::rmpp_hdr(&recv.mad)
            .and_then(wire::ib_get_rmpp_flags)
            .is_ok_and(|f| f & wire::IB_MGMT_RMPP_FLAG_ACTIVE != 0);
        if !(user_rmpp && active && wire::ib_is_mad_class_rmpp(hdr.mgmt_class)) {
            g.stats.dropped_responses = g.stats.dropped_responses.saturating_add(1);
            self.trace_dropped(hdr);
            return;
        }
        g.stats.user_rmpp_unmatched = g.stats.user_rmpp_unmatched.saturating_add(1);
        g.in_recv = g.in_recv.saturating_add(1);
        drop(g);
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

    /// A receive handler returned, counted under the lock `g`.
    pub(super) fn recv_returned(&self, g: &mut AgentInner) {
        g.in_recv = g.in_recv.saturating_sub(1);
        self.wake(g);
    }
}
