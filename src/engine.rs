// SPDX-License-Identifier: GPL-2.0

//! The agent engine: agents, their send records, and what agents on all ports share.
//!
//! - [`agent`]: one MAD agent (`ib_mad_agent`): its lock, its sends, post, modify, cancel,
//!   completions, response matching, timeouts and unregistration;
//! - [`send`]: send buffers, the records of outstanding sends and their handles;
//! - [`transport`]: the interface to what carries MADs (the verbs transport in
//!   [`crate::verbs`], and in the test flavour a loopback fabric);
//! - [`Engine`] (this file): what the agents of all ports share.
//!
//! The engine is generic over what it routes to ([`Routed`]), so that this file names no agent
//! type: the agents' file names the engine (an agent holds its engine), and
//! [`agent::Engine`] is the engine of agents that everything else uses.
//!
//! The engine owns the workqueue on which every agent's timeouts and completions run (each
//! agent's in order, agents side by side: one agent's waiting handler holds up no other), the
//! space of `hi_tid` values, the table of agents by `hi_tid` (response routing) and the class
//! registrations (request routing). A received MAD enters here ([`Engine::receive`]) and is
//! routed to one agent, as `ib_mad_recv_done` does.

pub(crate) mod agent;
pub(crate) mod received;
pub(crate) mod record;
pub(crate) mod rmpp_budget;
pub(crate) mod send;
pub(crate) mod transport;

use crate::{
    engine::received::RecvMad,
    mad::{
        wire::{
            self,
            MadHdr, //
        },
        QpType,
        RegReq,
        HI_TID_MAX, //
    },
    sys::workqueue::OwnedQueue, //
};
use kernel::{
    new_spinlock_irq,
    prelude::*,
    rbtree::{
        RBTree,
        RBTreeNodeReservation, //
    },
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
        SpinLockIrq, //
    },
};

/// What the engine routes received MADs to: an agent.
pub(crate) trait Routed: Send + Sync {
    /// Handles a MAD routed to it, whose header is `hdr`.
    fn receive(self: &Arc<Self>, hdr: &MadHdr, recv: RecvMad);
    /// Whether it is on `device` (the transport a MAD came through).
    fn on_device(&self, device: *const ()) -> bool;
    /// Its port.
    fn port(&self) -> u8;
    /// Its QP type.
    fn qp_type(&self) -> QpType;
}

/// A registration in the routing table.
struct Route {
    /// The transport of the agent's device: its address, which cannot be reused while the
    /// route exists (the agent holds the transport).
    device: usize,
    port: u8,
    qp: QpType,
    req: RegReq,
    hi_tid: u32,
}

/// Routing state, under the engine's lock.
///
/// # Invariants
///
/// Every route's `hi_tid` is a key of `agents`. An entry of `agents` is `None` while its agent
/// is being made: its `hi_tid` and class registration are taken (so that no other
/// registration can take them), but nothing is routed to it.
struct Registry<A> {
    /// Agents by `hi_tid`.
    agents: RBTree<u32, Option<Arc<A>>>,
    /// Where the next `hi_tid` search starts (allocation is cyclic).
    next_tid: u32,
    /// Class registrations.
    routes: KVec<Route>,
}

/// State shared by all agents of one engine.
#[pin_data]
pub(crate) struct Engine<A: Routed> {
    /// The queue that runs agents' timeouts and completion deliveries: each agent's work item
    /// in turn with itself, those of different agents at once.
    pub(crate) wq: OwnedQueue,
    /// The ordered queue on which transports process their completion queues (the "CQ
    /// worker").
    pub(crate) cq_wq: OwnedQueue,
    #[pin]
    reg: SpinLockIrq<Registry<A>>,
    /// MADs dropped before reaching an agent: no MAD header, invalid (`validate_mad`), no
    /// agent for them, or one on another device, port or QP type.
    unrouted: Atomic<u64>,
}

impl<A: Routed> Engine<A> {
    /// Creates an engine whose queues are named `name` and `cq_name`.
    pub(crate) fn new(name: &'static CStr, cq_name: &'static CStr) -> Result<Arc<Self>> {
        Arc::pin_init(
            try_pin_init!(Self {
                wq: OwnedQueue::new_reclaim(name)?,
                cq_wq: OwnedQueue::new_ordered(cq_name)?,
                unrouted: Atomic::new(0),
                reg <- new_spinlock_irq!(
                    Registry {
                        agents: RBTree::new(),
                        next_tid: 1,
                        routes: KVec::new(),
                    },
                    "Engine::reg"
                ),
            }),
            GFP_KERNEL,
        )
    }

    /// Publishes `agent` under a fresh `hi_tid`, with its class registration if any. Fails
    /// with `EINVAL` when the registration's methods overlap another agent's on the same port
    /// and QP (Documentation/behaviour.md §1.3 step 9), `EBUSY` when every `hi_tid` is in use.
    ///
    /// `make` builds the agent once its `hi_tid` is known. The clash check, the `hi_tid` and
    /// the registration are taken in one hold of the lock, before the agent is made, so two
    /// registrations that clash can never both succeed.
    pub(crate) fn publish(
        &self,
        device: *const (),
        port: u8,
        qp: QpType,
        req: Option<RegReq>,
        make: impl FnOnce(u32) -> Result<Arc<A>>,
    ) -> Result<Arc<A>> {
        // Allocate outside the lock; registration may sleep.
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let hi_tid = {
            let mut r = self.reg.lock();
            if let Some(q) = req {
                let clash = r.routes.iter().any(|x| {
                    x.device == device.addr()
                        && x.port == port
                        && x.qp == qp
                        && x.req.mgmt_class == q.mgmt_class
                        && x.req.class_version == q.class_version
                        && (!is_vendor2(q.mgmt_class) || x.req.oui == q.oui)
                        && x.req.methods & q.methods != 0
                });
                if clash {
                    return Err(EINVAL);
                }
            }
            let id = free_tid(&r.agents, r.next_tid).ok_or(EBUSY)?;
            if let Some(q) = req {
                r.routes.push(
                    Route {
                        device: device.addr(),
                        port,
                        qp,
                        req: q,
                        hi_tid: id,
                    },
                    GFP_ATOMIC | __GFP_NOWARN,
                )?;
            }
            r.next_tid = if id >= HI_TID_MAX { 1 } else { id + 1 };
            // INVARIANT: The route above names a reserved entry.
            r.agents.insert(node.into_node(id, None));
            id
        };
        match make(hi_tid) {
            Ok(agent) => {
                let mut r = self.reg.lock();
                if let Some(entry) = r.agents.get_mut(&hi_tid) {
                    *entry = Some(agent.clone());
                }
                Ok(agent)
            }
            Err(e) => {
                self.unpublish(hi_tid);
                Err(e)
            }
        }
    }

    /// Removes the agent with `hi_tid` from routing: from now on responses carrying its
    /// `hi_tid` and requests for its class are dropped.
    pub(crate) fn unpublish(&self, hi_tid: u32) {
        let removed = {
            let mut r = self.reg.lock();
            r.routes.retain(|x| x.hi_tid != hi_tid);
            r.agents.remove(&hi_tid)
        };
        // The table's reference is dropped here, outside the lock.
        drop(removed);
    }

    /// Every registered agent (a snapshot, for device removal).
    pub(crate) fn agents(&self) -> Result<KVec<Arc<A>>> {
        let r = self.reg.lock();
        let mut v = KVec::new();
        for a in r.agents.values().flatten() {
            v.push(a.clone(), GFP_ATOMIC)?;
        }
        Ok(v)
    }

    /// The agent a response with this TID belongs to.
    fn agent_by_tid(&self, tid: u64) -> Option<Arc<A>> {
        self.reg.lock().agents.get(&wire::tid_hi(tid))?.clone()
    }

    /// The agent registered for requests of this class and method on `port`.
    fn agent_by_class(
        &self,
        device: *const (),
        port: u8,
        qp: QpType,
        hdr: &MadHdr,
        oui: [u8; 3],
    ) -> Option<Arc<A>> {
        let r = self.reg.lock();
        let m = u32::from(hdr.method);
        let route = r.routes.iter().find(|x| {
            x.device == device.addr()
                && x.port == port
                && x.qp == qp
                && x.req.mgmt_class == hdr.mgmt_class
                && x.req.class_version == hdr.class_version
                && (!is_vendor2(hdr.mgmt_class) || x.req.oui == oui)
                && m < 128
                && x.req.methods & (1u128 << m) != 0
        })?;
        r.agents.get(&route.hi_tid)?.clone()
    }

    /// Routes a MAD that arrived on `device` (the transport it came through) to its agent
    /// (`ib_mad_recv_done`): responses by the `hi_tid` in their TID, requests by class
    /// registration, both on that device and port only, as ib_core keeps agents per port of
    /// each device. MADs that fail validation or have no agent are dropped.
    pub(crate) fn receive(&self, device: *const (), recv: RecvMad) {
        match self.route(device, &recv) {
            Some((agent, hdr)) => agent.receive(&hdr, recv),
            None => {
                self.unrouted.add(1, Relaxed);
            }
        }
    }

    /// The agent `recv` goes to, and its parsed header; `None` if it is dropped.
    fn route(&self, device: *const (), recv: &RecvMad) -> Option<(Arc<A>, MadHdr)> {
        let hdr = MadHdr::parse(&recv.mad).ok()?;
        let qp = if recv.wc.dst_qp == 0 {
            QpType::Smi
        } else {
            QpType::Gsi
        };
        if !mad_is_valid(&hdr, qp) {
            return None;
        }
        let agent = if hdr.is_response() {
            self.agent_by_tid(hdr.tid)
        } else {
            let oui = oui_of(&recv.mad);
            self.agent_by_class(device, recv.wc.port, qp, &hdr, oui)
        }?;
        (agent.on_device(device) && agent.port() == recv.wc.port && agent.qp_type() == qp)
            .then_some((agent, hdr))
    }

    /// MADs dropped before reaching an agent, since the engine was made.
    pub(crate) fn unrouted(&self) -> u64 {
        self.unrouted.load(Relaxed)
    }
}

/// Whether a class is in vendor range 2 (registrations carry an OUI).
fn is_vendor2(class: u8) -> bool {
    (wire::IB_MGMT_CLASS_VENDOR_RANGE2_START..=wire::IB_MGMT_CLASS_VENDOR_RANGE2_END)
        .contains(&class)
}

/// The OUI of a vendor-range-2 MAD (bytes 37..40).
fn oui_of(mad: &[u8]) -> [u8; 3] {
    mad.get(37..40)
        .and_then(|s| <[u8; 3]>::try_from(s).ok())
        .unwrap_or([0; 3])
}

/// The receive-side validation of Documentation/behaviour.md §2.4.4 step 1 (`validate_mad`):
/// the base version, SMPs on QP0 only and the rest on QP1 only, and CM MADs other than
/// ClassPortInfo with method SEND only.
fn mad_is_valid(hdr: &MadHdr, qp: QpType) -> bool {
    let smp = hdr.mgmt_class == wire::IB_MGMT_CLASS_SUBN_LID_ROUTED
        || hdr.mgmt_class == wire::IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE;
    let cm_rule = hdr.mgmt_class != wire::IB_MGMT_CLASS_CM
        || hdr.attr_id == wire::IB_MGMT_CLASSPORTINFO_ATTR_ID
        || hdr.method == wire::IB_MGMT_METHOD_SEND;
    hdr.base_version == wire::IB_MGMT_BASE_VERSION && smp == (qp == QpType::Smi) && cm_rule
}

/// The first unused `hi_tid` at or after `start`, wrapping around once within
/// [1, [`HI_TID_MAX`]]; `None` when all are in use.
fn free_tid<A>(agents: &RBTree<u32, Option<Arc<A>>>, start: u32) -> Option<u32> {
    let mut id = start.clamp(1, HI_TID_MAX);
    let mut wrapped = false;
    loop {
        if agents.get(&id).is_none() {
            return Some(id);
        }
        if id >= HI_TID_MAX {
            if wrapped {
                return None;
            }
            wrapped = true;
            id = 1;
        } else {
            id += 1;
        }
        if wrapped && id >= start {
            return None;
        }
    }
}

impl<A: Routed> Engine<A> {
    /// Waits until both queues are idle. Called by the engine's owner after every agent is
    /// unregistered and every fabric shut down, before it drops its reference, so that the
    /// last reference is never dropped from inside one of the engine's own work items.
    pub(crate) fn quiesce(&self) {
        self.cq_wq.flush();
        self.wq.flush();
        self.cq_wq.flush();
    }
}
