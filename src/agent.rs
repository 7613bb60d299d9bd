// SPDX-License-Identifier: GPL-2.0

//! MAD agents: registration, send buffers, post, modify and cancel, send completions,
//! response matching, timeouts and unregistration, with the semantics of Linux 7.3's
//! `ib_register_mad_agent`, `ib_create_send_mad`, `ib_post_send_mad`, `ib_modify_mad`,
//! `ib_cancel_mad` and `ib_unregister_mad_agent` (mad-spec.md §1–§5).
//!
//! # Structure
//!
//! Each agent has one lock ([`Agent::inner`]) over everything that changes: two ordered trees
//! that index its outstanding sends, the flow-control counters and the bookkeeping of
//! unregistration. Every per-send state change goes through [`state::step`] and is applied by
//! [`Agent::apply`]; nothing else writes a send's state.
//!
//! - The *queue tree* holds every outstanding send exactly once, under a key whose first
//!   element says which of the C layer's lists it is on: cancelled sends awaiting the timeout
//!   work (the head of the C wait list), waiting sends by expiry, the backlog in FIFO order,
//!   sends handed to the transport, and sends whose final status is decided and whose handler
//!   is due. The key order is the order in which the C layer searches its lists, so the first
//!   candidate in key order is the one the C layer would find.
//! - The *TID index* holds every send that can still be matched, by (TID, class, sequence).
//!
//! Both are red-black trees: finding a send for cancel or modify is O(1) through its handle,
//! response matching and every move between lists are O(log n), and nothing scans the
//! outstanding sends. The tree nodes are allocated with the send buffer and travel with it, so
//! post, modify, cancel, completion and timeout processing never allocate.
//!
//! # Where handlers run
//!
//! Never under an rmad lock, and never from post, modify, cancel or free. Send handlers run on
//! the engine's ordered workqueue, from the agent's work item, in the order in which the final
//! statuses were decided; after a matched response the receive handler and then the send
//! handler run in the transport's receive context, one after the other; unregistration
//! delivers the flushes it causes in the calling thread, as the C layer does.

use crate::{
    engine::{
        Engine,
        RegReq, //
    },
    send::{
        RecordState,
        SendBody,
        SendBuf,
        SendCompletion,
        SendHandle,
        SendRecord, //
    },
    state::{
        self,
        Admission,
        CancelWait,
        Event,
        Outcome,
        Place,
        Recv,
        Reject,
        SendFacts,
        SendState,
        WcStatus, //
    },
    transport::{
        PortAttr,
        RecvMad,
        SendWr,
        Transport, //
    },
    wire::{
        self,
        MadHdr, //
    },
    wq,
};
use kernel::{
    alloc::Flags,
    new_condvar, new_spinlock_irq,
    prelude::*,
    rbtree::{
        RBTree,
        RBTreeNodeReservation, //
    },
    sync::{
        Arc,
        CondVar,
        LockedBy,
        SpinLockIrq, //
    },
    task::Task,
    time::{
        msecs_to_jiffies,
        Instant,
        Monotonic, //
    },
    workqueue::{
        impl_has_delayed_work,
        new_delayed_work,
        DelayedWork,
        WorkItem, //
    },
};

/// Key of a send in its agent's queue tree: (queue, primary order, secondary order).
pub(crate) type QKey = (u8, i64, u64);
/// Key of a send in its agent's TID index: (TID, management class, sequence).
pub(crate) type TidKey = (u64, u8, u64);

/// Cancelled sends waiting for the timeout work (the head of the C wait list), FIFO.
const Q_CANCEL: u8 = 0;
/// Sends waiting for a response, by expiry; equal expiries last-in first (as in C).
const Q_WAIT: u8 = 1;
/// The flow-control backlog, FIFO.
const Q_BACKLOG: u8 = 2;
/// Sends handed to the transport (the C send list), FIFO.
const Q_FLIGHT: u8 = 3;
/// Sends whose handler is due, in the order their statuses were decided.
const Q_DONE: u8 = 4;

/// Which special QP an agent uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpType {
    /// QP0, subnet management.
    Smi,
    /// QP1, general services.
    Gsi,
}

/// The send handler (`ib_mad_send_handler`).
pub(crate) trait SendHandler: Send + Sync {
    /// Called exactly once per successful post, with the buffer given back to the client.
    fn send_done(&self, agent: &Arc<Agent>, buf: SendBuf, wc: SendCompletion);
}

/// The receive handler (`ib_mad_recv_handler`).
pub(crate) trait RecvHandler: Send + Sync {
    /// Called for each MAD routed to the agent: a response matched to `send`, or a request
    /// (`send` is `None`). The handler owns `mad`; dropping it is `ib_free_recv_mad`.
    fn recv(&self, agent: &Arc<Agent>, send: Option<&SendHandle>, mad: RecvMad);
}

/// What to register (the arguments of `ib_register_mad_agent`).
pub(crate) struct AgentConfig {
    /// Port number.
    pub(crate) port: u8,
    /// QP0 or QP1.
    pub(crate) qp_type: QpType,
    /// Class registration for unsolicited requests, if any.
    pub(crate) reg: Option<RegReq>,
    /// RMPP version, 0 or 1.
    pub(crate) rmpp_version: u8,
    /// Registration flags (`IB_MAD_USER_RMPP`).
    pub(crate) flags: u32,
    /// The send handler.
    pub(crate) send_handler: Option<Arc<dyn SendHandler>>,
    /// The receive handler.
    pub(crate) recv_handler: Option<Arc<dyn RecvHandler>>,
}

/// Per-agent counters, for the demonstration and debugging.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stats {
    /// Successful posts.
    pub(crate) posted: u64,
    /// Transmissions handed to the transport, retries included.
    pub(crate) transmitted: u64,
    /// Retransmissions.
    pub(crate) retried: u64,
    /// Sends that ended with `RESP_TIMEOUT_ERR`.
    pub(crate) timed_out: u64,
    /// Successful cancels.
    pub(crate) cancelled: u64,
    /// Responses matched before their send completion.
    pub(crate) early_responses: u64,
    /// Responses matched.
    pub(crate) responses: u64,
    /// Responses dropped (unmatched, duplicate or for a cancelled send).
    pub(crate) dropped_responses: u64,
    /// Send handler calls.
    pub(crate) completed: u64,
    /// Sends put in the flow-control backlog.
    pub(crate) backlogged: u64,
}

/// The state of an agent that its lock protects.
///
/// # Invariants
///
/// - Every send whose state is not `Idle` is in `queues` exactly once, under the key stored
///   in its `RecordState::qkey`, in the queue that matches its state (see the `Q_*` constants),
///   except a `Done` send whose handler is being called inline after its receive handler.
/// - A send is in `tids` (under `RecordState::tkey`) from its post until its state is `Done`.
/// - `fc_send` and `fc_wait` count the flow-controlled sends in `SendStart` and `WaitResp`;
///   `backlog` counts the sends in `Q_BACKLOG`.
pub(crate) struct AgentInner {
    queues: RBTree<QKey, Arc<SendRecord>>,
    tids: RBTree<TidKey, Arc<SendRecord>>,
    /// Source of unique secondary keys.
    seq: u64,
    fc_send: u32,
    fc_wait: u32,
    backlog: u32,
    /// Successful posts whose send handler has not returned yet.
    outstanding: u32,
    /// Send buffers created and not yet dropped.
    buffers: u32,
    /// Receive handlers running.
    in_recv: u32,
    /// Unregistration has started: no new posts, no timer.
    dead: bool,
    /// When the agent's work is due, if it is queued (nanoseconds since `Agent::epoch`).
    armed_ns: Option<i64>,
    /// The task that is running one of this agent's handlers, if any (for scenario 52).
    handler_task: usize,
    stats: Stats,
}

/// A MAD agent (`struct ib_mad_agent`).
///
/// # Invariants
///
/// `hi_tid` is in [1, 2^24 − 1] and identifies the agent in its engine until unregistration.
#[pin_data]
pub(crate) struct Agent {
    /// Upper 32 bits of the TIDs of this agent's requests.
    pub(crate) hi_tid: u32,
    engine: Arc<Engine>,
    transport: Arc<dyn Transport>,
    port: u8,
    port_attr: PortAttr,
    qp_type: QpType,
    rmpp_version: u8,
    flags: u32,
    /// The flow-control limit (`sol_fc_max`); 0 disables flow control.
    pub(crate) sol_fc_max: u32,
    send_handler: Option<Arc<dyn SendHandler>>,
    recv_handler: Option<Arc<dyn RecvHandler>>,
    /// Origin of the agent's clock.
    epoch: Instant<Monotonic>,
    #[pin]
    pub(crate) inner: SpinLockIrq<AgentInner>,
    /// Signalled when `outstanding`, `buffers` or `in_recv` drops, or a handler becomes due
    /// during unregistration.
    #[pin]
    idle: CondVar,
    /// Runs timeouts and delivers completions, on the engine's ordered queue.
    #[pin]
    work: DelayedWork<Agent>,
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self> for Agent { self.work }
}

impl WorkItem for Agent {
    type Pointer = Arc<Agent>;

    fn run(this: Arc<Agent>) {
        this.run_work();
    }
}

/// A post that failed: the error and the buffer, back in the caller's hands.
pub(crate) struct PostError {
    /// Why the post failed.
    pub(crate) err: Error,
    /// The buffer, unchanged but for its `retries`, which a post always resets.
    pub(crate) buf: SendBuf,
}

/// The result of a chained post that did not fail.
pub(crate) struct Chain {
    /// Handles of the posted elements, in chain order.
    pub(crate) posted: KVec<SendHandle>,
    /// Elements after one that flow control queued: not posted, back with the client.
    pub(crate) unposted: KVec<SendBuf>,
}

/// A chained post that failed.
pub(crate) struct ChainError {
    /// Why the failed element could not be posted.
    pub(crate) err: Error,
    /// Handles of the elements posted before it.
    pub(crate) posted: KVec<SendHandle>,
    /// The element that failed (`*bad_send_buf`).
    pub(crate) failed: Option<SendBuf>,
    /// The elements after it, not posted.
    pub(crate) unposted: KVec<SendBuf>,
}

/// Token that counts a send buffer against its agent until the buffer is dropped.
pub(crate) struct BufToken(Arc<Agent>);

impl Drop for BufToken {
    fn drop(&mut self) {
        self.0.buffer_freed();
    }
}

/// Recv queue size the flow-control limits are computed from (`recv_queue_size`).
const RECV_QUEUE_SIZE: u32 = 512;

/// Adds a counter delta, saturating at the type's bounds.
fn add_delta(v: u32, d: i8) -> u32 {
    if d >= 0 {
        v.saturating_add(u32::from(d.unsigned_abs()))
    } else {
        v.saturating_sub(u32::from(d.unsigned_abs()))
    }
}

/// Milliseconds as nanoseconds, saturating.
fn ms_to_ns(ms: u32) -> i64 {
    i64::from(ms).saturating_mul(1_000_000)
}

impl Agent {
    /// `ib_register_mad_agent`: validates the request in the C layer's order (mad-spec.md
    /// §1.3), allocates a `hi_tid` and publishes the agent.
    pub(crate) fn register(
        engine: &Arc<Engine>,
        transport: &Arc<dyn Transport>,
        cfg: AgentConfig,
    ) -> Result<Arc<Agent>> {
        let attr = transport.port_attr(cfg.port);
        // 1. Port capability (an unknown port is checked in step 6).
        if let Some(a) = attr {
            let capable = match cfg.qp_type {
                QpType::Smi => a.has_smi,
                QpType::Gsi => a.has_cm,
            };
            if !capable {
                return Err(EPROTONOSUPPORT);
            }
        }
        // 2. is implied by the type. 3. RMPP version.
        if cfg.rmpp_version > 1 {
            return Err(EINVAL);
        }
        // 4./5. The registration, or its absence.
        match cfg.reg {
            Some(r) => {
                let c = r.mgmt_class;
                let bad = r.class_version >= 0x83
                    || cfg.recv_handler.is_none()
                    || (c >= 80 && c != wire::IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE)
                    || c == 0
                    || ((wire::IB_MGMT_CLASS_VENDOR_RANGE2_START
                        ..=wire::IB_MGMT_CLASS_VENDOR_RANGE2_END)
                        .contains(&c)
                        && r.oui == [0; 3])
                    || (cfg.rmpp_version != 0 && !wire::ib_is_mad_class_rmpp(c))
                    || (cfg.qp_type == QpType::Smi
                        && c != wire::IB_MGMT_CLASS_SUBN_LID_ROUTED
                        && c != wire::IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE)
                    || (cfg.qp_type == QpType::Gsi
                        && (c == wire::IB_MGMT_CLASS_SUBN_LID_ROUTED
                            || c == wire::IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE));
                if bad {
                    return Err(EINVAL);
                }
            }
            None => {
                if cfg.send_handler.is_none() || cfg.flags & wire::IB_MAD_USER_RMPP != 0 {
                    return Err(EINVAL);
                }
            }
        }
        // 6. The port must exist.
        let port_attr = attr.ok_or(ENODEV)?;
        let sol_fc_max = state::sol_fc_max(
            cfg.recv_handler.is_some(),
            cfg.reg.map(|r| r.mgmt_class),
            RECV_QUEUE_SIZE,
        );
        // 8./9. `hi_tid` and the registration table.
        engine.publish(cfg.port, cfg.qp_type, cfg.reg, |hi_tid| {
            Arc::pin_init(
                pin_init!(Agent {
                    hi_tid,
                    engine: engine.clone(),
                    transport: transport.clone(),
                    port: cfg.port,
                    port_attr,
                    qp_type: cfg.qp_type,
                    rmpp_version: cfg.rmpp_version,
                    flags: cfg.flags,
                    sol_fc_max,
                    send_handler: cfg.send_handler,
                    recv_handler: cfg.recv_handler,
                    epoch: Instant::now(),
                    inner <- new_spinlock_irq!(
                        AgentInner {
                            queues: RBTree::new(),
                            tids: RBTree::new(),
                            seq: 0,
                            fc_send: 0,
                            fc_wait: 0,
                            backlog: 0,
                            outstanding: 0,
                            buffers: 0,
                            in_recv: 0,
                            dead: false,
                            armed_ns: None,
                            handler_task: 0,
                            stats: Stats::default(),
                        },
                        "Agent::inner"
                    ),
                    idle <- new_condvar!("Agent::idle"),
                    work <- new_delayed_work!("Agent::work"),
                }),
                GFP_KERNEL,
            )
        })
    }

    /// The port the agent sends from.
    pub(crate) fn port(&self) -> u8 {
        self.port
    }

    /// QP0 or QP1.
    pub(crate) fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// Whether the kernel does RMPP for this agent.
    fn kernel_rmpp(&self) -> bool {
        wire::ib_mad_kernel_rmpp_agent(self.rmpp_version, self.flags)
    }

    /// A snapshot of the counters.
    pub(crate) fn stats(&self) -> Stats {
        self.inner.lock().stats
    }

    /// Number of posts whose send handler has not returned.
    pub(crate) fn outstanding(&self) -> u32 {
        self.inner.lock().outstanding
    }

    /// Number of send buffers created on the agent and not yet dropped.
    pub(crate) fn buffers(&self) -> u32 {
        self.inner.lock().buffers
    }

    /// The state of the send `h` names, if `h` is still its current post.
    pub(crate) fn send_state(&self, h: &SendHandle) -> Option<SendState> {
        let g = self.inner.lock();
        let st = h.rec.state.access(&g);
        (st.gen == h.gen).then_some(st.facts.state)
    }

    /// `ib_create_send_mad`: allocates a zeroed send buffer with the size rules and all the
    /// validation of mad-spec.md §1.5; every case the C layer leaves undefined is `EINVAL`.
    /// Allocates with `gfp` only, so `GFP_ATOMIC` makes it usable in atomic context.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn create_send(
        self: &Arc<Self>,
        remote_qpn: u32,
        pkey_index: u16,
        rmpp_active: bool,
        hdr_len: i32,
        data_len: i32,
        gfp: Flags,
        base_version: u8,
    ) -> Result<SendBuf> {
        // Only OPA ports use 2048-byte MADs; rmad's ports are InfiniBand ports.
        let _ = base_version;
        let mad_size = wire::IB_MGMT_MAD_SIZE;
        let hdr = usize::try_from(hdr_len).map_err(|_| EINVAL)?;
        let data = usize::try_from(data_len).map_err(|_| EINVAL)?;
        if hdr > mad_size
            || (rmpp_active && hdr < wire::IB_MGMT_RMPP_HDR)
            || (!rmpp_active && hdr < wire::IB_MGMT_MAD_HDR)
            || (rmpp_active && hdr == mad_size && data > 0)
        {
            return Err(EINVAL);
        }
        let seg_size = mad_size - hdr;
        let pad = if data != 0 && seg_size != 0 {
            match seg_size - data % seg_size {
                p if p == seg_size => 0,
                p => p,
            }
        } else {
            seg_size
        };
        let message_size = hdr
            .checked_add(data)
            .and_then(|v| v.checked_add(pad))
            .ok_or(EINVAL)?;
        if self.kernel_rmpp() {
            if !rmpp_active && message_size > mad_size {
                return Err(EINVAL);
            }
        } else if rmpp_active || message_size > mad_size {
            return Err(EINVAL);
        }
        let (seg_count, segments) = if rmpp_active {
            let count = (message_size - hdr).div_ceil(seg_size.max(1));
            let bytes = count.checked_mul(seg_size).ok_or(EINVAL)?;
            let mut v = KVec::with_capacity(bytes, gfp)?;
            v.resize(bytes, 0, gfp)?;
            (count, v)
        } else {
            (0, KVec::new())
        };
        let mut mad = KVec::with_capacity(mad_size, gfp)?;
        mad.resize(mad_size, 0, gfp)?;
        if rmpp_active {
            if let Ok(r) = wire::rmpp_hdr_mut(&mut mad) {
                // RMPP version and type DATA; the header is at least 12 bytes long.
                if let [version, kind, ..] = r {
                    *version = self.rmpp_version;
                    *kind = wire::IB_MGMT_RMPP_TYPE_DATA;
                }
                let _ = wire::ib_set_rmpp_flags(r, wire::IB_MGMT_RMPP_FLAG_ACTIVE);
            }
        }
        let qslot = RBTreeNodeReservation::new(gfp)?;
        let tslot = RBTreeNodeReservation::new(gfp)?;
        let rec = Arc::new(
            SendRecord {
                agent: self.clone(),
                state: LockedBy::new(&self.inner, RecordState::default()),
            },
            gfp,
        )?;
        // Count the buffer last, once nothing can fail.
        let token = {
            let mut g = self.inner.lock();
            if g.dead {
                return Err(ESHUTDOWN);
            }
            g.buffers = g.buffers.saturating_add(1);
            BufToken(self.clone())
        };
        let body = KBox::new(
            SendBody {
                mad,
                segments,
                hdr_len: hdr,
                data_len: data,
                seg_count,
                seg_size: if rmpp_active { seg_size } else { 0 },
                remote_qpn,
                pkey_index,
                timeout_ms: 0,
                retries: 0,
                ah: None,
                context: [0; 2],
                qslot: Some(qslot),
                tslot: Some(tslot),
                _token: token,
            },
            gfp,
        )?;
        Ok(SendBuf { rec, body })
    }

    /// Called when a send buffer of this agent is dropped (`ib_free_send_mad`).
    fn buffer_freed(&self) {
        let mut g = self.inner.lock();
        g.buffers = g.buffers.saturating_sub(1);
        if g.dead {
            self.idle.notify_all();
        }
    }

    /// Nanoseconds since the agent's epoch.
    fn now_ns(&self) -> i64 {
        (Instant::<Monotonic>::now() - self.epoch).as_nanos()
    }

    /// Runs `f` on the state of `rec` while giving it the rest of the agent's state too.
    fn with_state<R>(
        g: &mut AgentInner,
        rec: &SendRecord,
        f: impl FnOnce(&mut AgentInner, &mut RecordState) -> R,
    ) -> R {
        let mut st = core::mem::take(rec.state.access_mut(g));
        let r = f(g, &mut st);
        *rec.state.access_mut(g) = st;
        r
    }

    /// A fresh secondary key.
    fn next_seq(g: &mut AgentInner) -> u64 {
        g.seq = g.seq.wrapping_add(1);
        g.seq
    }

    /// Takes `rec` out of the queue tree, keeping its node in the body.
    fn unqueue(g: &mut AgentInner, st: &mut RecordState) {
        if let Some(k) = st.qkey.take() {
            if let Some(node) = g.queues.remove_node(&k) {
                if let Some(body) = st.body.as_mut() {
                    body.qslot = Some(node.into_reservation());
                }
            }
        }
    }

    /// Puts `rec` in the queue tree under `key`, moving it from where it was.
    fn enqueue(g: &mut AgentInner, rec: &Arc<SendRecord>, st: &mut RecordState, key: QKey) {
        Self::unqueue(g, st);
        let Some(slot) = st.body.as_mut().and_then(|b| b.qslot.take()) else {
            // Only reachable if the invariant is broken; keep the send findable by failing
            // loudly rather than losing it.
            pr_err!("send has no queue node\n");
            return;
        };
        g.queues.insert(slot.into_node(key, rec.clone()));
        st.qkey = Some(key);
    }

    /// Removes `rec` from the TID index.
    fn untrack(g: &mut AgentInner, st: &mut RecordState) {
        if let Some(k) = st.tkey.take() {
            if let Some(node) = g.tids.remove_node(&k) {
                if let Some(body) = st.body.as_mut() {
                    body.tslot = Some(node.into_reservation());
                }
            }
        }
    }

    /// Makes sure the agent's work runs no later than `due_ns`.
    fn arm(self: &Arc<Self>, g: &mut AgentInner, due_ns: i64) {
        if g.dead {
            // Unregistration delivers what is due itself.
            self.idle.notify_all();
            return;
        }
        if g.armed_ns.is_some_and(|a| a <= due_ns) {
            return;
        }
        g.armed_ns = Some(due_ns);
        let delay_ms = due_ns
            .saturating_sub(self.now_ns())
            .max(0)
            .saturating_add(999_999)
            / 1_000_000;
        let delay = msecs_to_jiffies(u32::try_from(delay_ms).unwrap_or(u32::MAX));
        wq::rearm::<Agent, 0>(&self.engine.wq, self, delay);
    }

    /// Keeps the timer no later than the head of the wait queue (mad-spec.md §3.2).
    fn arm_head(self: &Arc<Self>, g: &mut AgentInner) {
        let head = g
            .queues
            .cursor_lower_bound(&(Q_WAIT, i64::MIN, 0))
            .map(|c| *c.current().0)
            .filter(|k| k.0 == Q_WAIT);
        if let Some(k) = head {
            self.arm(g, k.1);
        }
    }

    /// Applies `ev` to the send `rec`: the one place where a send's state changes.
    fn apply(
        self: &Arc<Self>,
        g: &mut AgentInner,
        rec: &Arc<SendRecord>,
        st: &mut RecordState,
        ev: Event,
    ) -> Result<Outcome, Reject> {
        let o = state::step(st.facts, ev)?;
        let was = st.facts.state;
        g.fc_send = add_delta(g.fc_send, o.fc_send);
        g.fc_wait = add_delta(g.fc_wait, o.fc_wait);
        if was == SendState::Queued && o.next != SendState::Queued {
            g.backlog = g.backlog.saturating_sub(1);
        }
        if o.next == SendState::Queued && was != SendState::Queued {
            g.backlog = g.backlog.saturating_add(1);
            g.stats.backlogged = g.stats.backlogged.saturating_add(1);
        }
        if o.retry {
            st.facts.retries_left = st.facts.retries_left.saturating_sub(1);
            if let Some(b) = st.body.as_mut() {
                b.retries = b.retries.saturating_add(1);
            }
            g.stats.retried = g.stats.retried.saturating_add(1);
        }
        if let Some(t) = o.store_timeout {
            st.facts.timeout_ms = t;
            if let Some(b) = st.body.as_mut() {
                b.timeout_ms = i32::try_from(t).unwrap_or(i32::MAX);
            }
        }
        st.facts.state = o.next;

        let now = self.now_ns();
        match o.place {
            Place::Unchanged => {}
            Place::Nowhere => Self::unqueue(g, st),
            Place::InFlight => {
                let k = (Q_FLIGHT, 0, Self::next_seq(g));
                Self::enqueue(g, rec, st, k);
            }
            Place::Waiting { ms } => {
                let due = now.saturating_add(ms_to_ns(ms));
                let k = (Q_WAIT, due, u64::MAX - Self::next_seq(g));
                Self::enqueue(g, rec, st, k);
                self.arm_head(g);
            }
            Place::Backlog => {
                let k = (Q_BACKLOG, 0, Self::next_seq(g));
                Self::enqueue(g, rec, st, k);
            }
            Place::CancelQueue => {
                let k = (Q_CANCEL, 0, Self::next_seq(g));
                Self::enqueue(g, rec, st, k);
                self.arm(g, now);
            }
        }
        if o.next == SendState::Done || o.next == SendState::Idle {
            Self::untrack(g, st);
        }
        if let Some(status) = o.complete {
            if st.status.is_none() {
                st.status = Some((status, 0));
            }
            match status {
                WcStatus::RespTimeoutErr => g.stats.timed_out = g.stats.timed_out.saturating_add(1),
                WcStatus::WrFlushErr => g.stats.cancelled = g.stats.cancelled.saturating_add(1),
                _ => {}
            }
            // A matched response delivers inline, after the receive handler; everything else
            // through the agent's work.
            if o.recv != Recv::Deliver {
                let k = (Q_DONE, 0, Self::next_seq(g));
                Self::enqueue(g, rec, st, k);
                self.arm(g, now);
            }
        }
        Ok(o)
    }

    /// Hands the send to the transport.
    fn transmit(&self, g: &mut AgentInner, rec: &Arc<SendRecord>, st: &RecordState) -> Result {
        let body = st.body.as_ref().ok_or(EINVAL)?;
        let ah = st.ah.ok_or(EINVAL)?;
        self.transport.post_send(
            self.port,
            SendWr {
                mad: &body.mad,
                ah,
                remote_qpn: body.remote_qpn,
                src_qpn: if self.qp_type == QpType::Smi { 0 } else { 1 },
                pkey_index: body.pkey_index,
                rec,
                gen: st.gen,
            },
        )?;
        g.stats.transmitted = g.stats.transmitted.saturating_add(1);
        Ok(())
    }

    /// Moves backlog heads to the transport while the flow-control limit allows
    /// (`process_backlog_mads`, mad-spec.md §3.3).
    fn dispatch_backlog(self: &Arc<Self>, g: &mut AgentInner) {
        loop {
            if g.backlog == 0 || g.fc_send.saturating_add(g.fc_wait) >= self.sol_fc_max {
                return;
            }
            let Some(rec) = first_in(&g.queues, Q_BACKLOG) else {
                return;
            };
            Self::with_state(g, &rec, |g, st| {
                if self.apply(g, &rec, st, Event::BacklogDispatch).is_ok()
                    && self.transmit(g, &rec, st).is_err()
                {
                    let _ = self.apply(g, &rec, st, Event::BacklogDispatchFailed);
                    st.status = Some((WcStatus::LocQpOpErr, 0));
                }
            });
        }
    }

    /// `ib_post_send_mad` for one buffer. On success the engine owns the buffer until the send
    /// handler gets it back; on failure the buffer comes back with the error and no handler
    /// will run. Never sleeps, never calls a handler; usable with interrupts disabled.
    pub(crate) fn post(buf: SendBuf) -> Result<SendHandle, PostError> {
        let agent = buf.rec.agent.clone();
        agent.post_one(buf)
    }

    /// `ib_post_send_mad` for a chain (`send_buf->next`): posts `bufs` in order and stops at
    /// the first failure, which returns the error, the failed buffer and the buffers after it;
    /// the earlier posts stand.
    ///
    /// Like 7.3, the chain also stops, successfully, after an element that flow control put in
    /// the backlog (mad-spec.md §1.6 step 7, [QUIRK]). Where C silently drops the rest of the
    /// chain, rmad hands the unposted buffers back in [`Chain::unposted`] so that nothing is
    /// lost.
    pub(crate) fn post_chain(bufs: KVec<SendBuf>) -> Result<Chain, ChainError> {
        // Room for every outcome is reserved first, so that no buffer is ever dropped for
        // want of memory.
        let n = bufs.len();
        let (mut posted, mut unposted) = match (
            KVec::<SendHandle>::with_capacity(n, GFP_ATOMIC),
            KVec::<SendBuf>::with_capacity(n, GFP_ATOMIC),
        ) {
            (Ok(p), Ok(u)) => (p, u),
            _ => {
                return Err(ChainError {
                    err: ENOMEM,
                    posted: KVec::new(),
                    failed: None,
                    unposted: bufs,
                })
            }
        };
        let mut failed = None;
        let mut stop = false;
        let mut err = None;
        for buf in bufs {
            if stop {
                let _ = unposted.push_within_capacity(buf);
                continue;
            }
            match Agent::post(buf) {
                Ok(h) => {
                    // Flow control queued it: 7.3 processes no further element.
                    stop = h.agent().send_state(&h) == Some(SendState::Queued);
                    let _ = posted.push_within_capacity(h);
                }
                Err(e) => {
                    err = Some(e.err);
                    failed = Some(e.buf);
                    stop = true;
                }
            }
        }
        match err {
            None => Ok(Chain { posted, unposted }),
            Some(err) => Err(ChainError {
                err,
                posted,
                failed,
                unposted,
            }),
        }
    }

    fn post_one(self: &Arc<Self>, buf: SendBuf) -> Result<SendHandle, PostError> {
        let fail = |err: Error, buf: SendBuf| Err(PostError { err, buf });
        let Ok(hdr) = MadHdr::parse(buf.mad()) else {
            return fail(EINVAL, buf);
        };
        // mad-spec.md §1.6 steps 2 and 3, then the cases the C layer leaves undefined.
        if self.send_handler.is_none()
            || (self.rmpp_version != 0 && !wire::ib_is_mad_class_rmpp(hdr.mgmt_class))
            || buf.body.ah.is_none()
            || buf.body.retries < 0
            || buf.body.timeout_ms < 0
        {
            return fail(EINVAL, buf);
        }
        let rmpp_active = self.kernel_rmpp()
            && wire::rmpp_hdr(buf.mad())
                .and_then(wire::ib_get_rmpp_flags)
                .is_ok_and(|f| f & wire::IB_MGMT_RMPP_FLAG_ACTIVE != 0);
        if rmpp_active {
            // Segmented RMPP transfers are not carried by rmad's transports.
            return fail(EOPNOTSUPP, buf);
        }
        // The checks above make both conversions lossless.
        let timeout_ms = u32::try_from(buf.body.timeout_ms).unwrap_or(0);
        let retries = u32::try_from(buf.body.retries).unwrap_or(0);
        let fc = state::is_solicited_fc(hdr.mgmt_class, timeout_ms, rmpp_active);

        let SendBuf { rec, mut body } = buf;
        let mut g = self.inner.lock();
        if g.dead {
            drop(g);
            return fail(ESHUTDOWN, SendBuf { rec, body });
        }
        let res = Self::with_state(&mut g, &rec, |g, st| {
            if st.facts.state != SendState::Idle {
                // Only reachable through the C API: the buffer is outstanding already.
                return Err((EBUSY, body));
            }
            body.retries = 0;
            let tslot = body.tslot.take();
            st.gen = st.gen.wrapping_add(1);
            st.tid = hdr.tid;
            st.class = hdr.mgmt_class;
            st.is_response = hdr.is_response();
            st.ah = body.ah;
            st.status = None;
            st.facts = SendFacts {
                state: SendState::Idle,
                fc,
                timeout_ms,
                retries_left: retries,
            };
            st.body = Some(body);
            if let Some(slot) = tslot {
                let k = (st.tid, st.class, Self::next_seq(g));
                g.tids.insert(slot.into_node(k, rec.clone()));
                st.tkey = Some(k);
            }
            let adm = Admission {
                limit: self.sol_fc_max,
                in_use: g.fc_send.saturating_add(g.fc_wait),
                backlog_empty: g.backlog == 0,
            };
            let transmit = self
                .apply(g, &rec, st, Event::Post(adm))
                .is_ok_and(|o| o.transmit);
            if transmit {
                if let Err(e) = self.transmit(g, &rec, st) {
                    // T3: the post fails, no handler will run, the client gets the buffer.
                    let _ = self.apply(g, &rec, st, Event::DispatchFailed);
                    Self::untrack(g, st);
                    return match st.body.take() {
                        Some(body) => Err((e, body)),
                        None => Ok(None),
                    };
                }
            }
            g.outstanding = g.outstanding.saturating_add(1);
            g.stats.posted = g.stats.posted.saturating_add(1);
            Ok(Some(st.gen))
        });
        drop(g);
        match res {
            Ok(Some(gen)) => Ok(SendHandle { rec, gen }),
            // The body is always recovered above; this arm only keeps the types honest.
            Ok(None) => {
                pr_err!("failed post lost its buffer\n");
                Ok(SendHandle { rec, gen: 0 })
            }
            Err((err, body)) => fail(err, SendBuf { rec, body }),
        }
    }

    /// `ib_modify_mad` through a handle (0 cancels).
    pub(crate) fn modify(self: &Arc<Self>, h: &SendHandle, timeout_ms: i32) -> Result {
        let t = u32::try_from(timeout_ms).map_err(|_| EINVAL)?;
        let mut g = self.inner.lock();
        Self::with_state(&mut g, &h.rec, |g, st| {
            if st.gen != h.gen {
                return Err(EINVAL);
            }
            self.apply(g, &h.rec, st, Event::Modify(t))
                .map(|_| ())
                .map_err(|_| EINVAL)
        })
    }

    /// The transport's report that transmission `gen` of `rec` completed with `status`.
    pub(crate) fn send_completed(
        rec: &Arc<SendRecord>,
        gen: u64,
        status: WcStatus,
        vendor_err: u32,
    ) {
        let this = &rec.agent;
        let mut g = this.inner.lock();
        Self::with_state(&mut g, rec, |g, st| {
            if st.gen != gen {
                return;
            }
            match this.apply(g, rec, st, Event::SendCompleted(status)) {
                Ok(o) => {
                    if let Some(s) = o.complete {
                        // Statuses decided at a send completion carry its vendor error.
                        st.status = Some((s, vendor_err));
                    }
                    if o.frees_fc_slot {
                        this.dispatch_backlog(g);
                    }
                }
                Err(_) => pr_warn!(
                    "send completion for a send in state {:?}\n",
                    st.facts.state
                ),
            }
        });
    }

    /// Whether a received response passes the address check against a send
    /// (`rcv_has_same_gid`, mad-spec.md §4).
    fn same_address(&self, st: &RecordState, hdr: &MadHdr, recv: &RecvMad) -> bool {
        if hdr.mgmt_class == wire::IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE {
            return true;
        }
        let Some(ah) = st.ah else {
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
                    let lmc = self.port_attr.lmc;
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

    /// Finds the send a response matches (`ib_find_send_mad`, mad-spec.md §4): among the
    /// sends with its TID and class, the first in the C layer's list order (wait list with
    /// cancelled sends at its head, then the backlog, then the send list) that passes the
    /// address check. Sends on the send list qualify only while they expect a response. Costs
    /// O(log n) plus the number of sends sharing the TID and class.
    fn find_send(&self, g: &AgentInner, hdr: &MadHdr, recv: &RecvMad) -> Option<Arc<SendRecord>> {
        let mut best: Option<(QKey, Arc<SendRecord>)> = None;
        let mut bound = (hdr.tid, hdr.mgmt_class, 0);
        while let Some(c) = g.tids.cursor_lower_bound(&bound) {
            let (k, rec) = c.current();
            if k.0 != hdr.tid || k.1 != hdr.mgmt_class {
                break;
            }
            bound = (k.0, k.1, k.2.saturating_add(1));
            let st = rec.state.access(g);
            let listed = match st.facts.state {
                SendState::SendStart => st.facts.timeout_ms != 0,
                SendState::WaitResp | SendState::Queued => true,
                SendState::Canceled(CancelWait::TimeoutWork) => true,
                _ => false,
            };
            if let Some(q) = st.qkey {
                if listed
                    && best.as_ref().is_none_or(|(b, _)| q < *b)
                    && self.same_address(st, hdr, recv)
                {
                    best = Some((q, rec.clone()));
                }
            }
            if k.2 == u64::MAX {
                break;
            }
        }
        best.map(|(_, r)| r)
    }

    /// Handles a MAD routed to this agent by the engine.
    pub(crate) fn receive(self: &Arc<Self>, hdr: &MadHdr, recv: RecvMad) {
        let Some(rh) = self.recv_handler.clone() else {
            return;
        };
        if !hdr.is_response() {
            {
                let mut g = self.inner.lock();
                if g.dead {
                    return;
                }
                g.in_recv = g.in_recv.saturating_add(1);
            }
            rh.recv(self, None, recv);
            self.recv_done();
            return;
        }

        let (handle, inline) = {
            let mut g = self.inner.lock();
            if g.dead {
                return;
            }
            let Some(rec) = self.find_send(&g, hdr, &recv) else {
                g.stats.dropped_responses = g.stats.dropped_responses.saturating_add(1);
                return;
            };
            let r = Self::with_state(&mut g, &rec, |g, st| {
                let was = st.facts.state;
                let o = self.apply(g, &rec, st, Event::Response).ok()?;
                if o.frees_fc_slot {
                    // The backlog moves before this send's handler runs (mad-spec.md §3.3).
                    self.dispatch_backlog(g);
                }
                if o.recv != Recv::Deliver {
                    return None;
                }
                if was == SendState::SendStart {
                    g.stats.early_responses = g.stats.early_responses.saturating_add(1);
                }
                g.stats.responses = g.stats.responses.saturating_add(1);
                Some((st.gen, o.complete.is_some()))
            });
            let Some((gen, inline)) = r else {
                g.stats.dropped_responses = g.stats.dropped_responses.saturating_add(1);
                return;
            };
            g.in_recv = g.in_recv.saturating_add(1);
            (SendHandle { rec, gen }, inline)
        };
        rh.recv(self, Some(&handle), recv);
        if inline {
            // "Response before request": the send handler follows in this thread.
            self.deliver_one(&handle.rec);
        }
        self.recv_done();
    }

    /// A receive handler returned.
    fn recv_done(&self) {
        let mut g = self.inner.lock();
        g.in_recv = g.in_recv.saturating_sub(1);
        if g.dead {
            self.idle.notify_all();
        }
    }

    /// Calls the send handler for `rec`, whose final status is decided.
    fn deliver_one(self: &Arc<Self>, rec: &Arc<SendRecord>) {
        let me = Task::current_raw().addr();
        let taken = {
            let mut g = self.inner.lock();
            let t = Self::with_state(&mut g, rec, |g, st| {
                Self::unqueue(g, st);
                Self::untrack(g, st);
                self.apply(g, rec, st, Event::Delivered).ok()?;
                let (status, vendor_err) = st.status.take()?;
                Some((st.body.take()?, SendCompletion { status, vendor_err }))
            });
            if t.is_some() {
                g.handler_task = me;
                g.stats.completed = g.stats.completed.saturating_add(1);
            }
            t
        };
        let Some((body, wc)) = taken else {
            return;
        };
        let buf = SendBuf {
            rec: rec.clone(),
            body,
        };
        match &self.send_handler {
            Some(h) => h.send_done(self, buf, wc),
            None => drop(buf),
        }
        let mut g = self.inner.lock();
        g.handler_task = 0;
        g.outstanding = g.outstanding.saturating_sub(1);
        if g.dead {
            self.idle.notify_all();
        }
    }

    /// Delivers every send whose handler is due, one at a time, in order.
    fn deliver_due(self: &Arc<Self>) {
        loop {
            let next = first_in(&self.inner.lock().queues, Q_DONE);
            match next {
                Some(rec) => self.deliver_one(&rec),
                None => return,
            }
        }
    }

    /// The agent's work: expire waiting sends (in expiry order), report cancelled ones, move
    /// the backlog, re-arm the timer, then call the handlers that are due
    /// (`timeout_sends`, mad-spec.md §2.4.5).
    fn run_work(self: &Arc<Self>) {
        {
            let mut g = self.inner.lock();
            g.armed_ns = None;
            if !g.dead {
                let now = self.now_ns();
                while let Some((k, rec)) = first_entry(&g.queues, Q_WAIT) {
                    if k.1 > now {
                        break;
                    }
                    Self::with_state(&mut g, &rec, |g, st| {
                        let ev = Event::Expired {
                            backlog_empty: g.backlog == 0,
                        };
                        if let Ok(o) = self.apply(g, &rec, st, ev) {
                            if o.transmit && self.transmit(g, &rec, st).is_err() {
                                let _ = self.apply(g, &rec, st, Event::RetransmitFailed);
                            }
                        }
                    });
                }
                while let Some(rec) = first_in(&g.queues, Q_CANCEL) {
                    Self::with_state(&mut g, &rec, |g, st| {
                        let _ = self.apply(
                            g,
                            &rec,
                            st,
                            Event::Expired {
                                backlog_empty: true,
                            },
                        );
                    });
                }
                self.dispatch_backlog(&mut g);
                self.arm_head(&mut g);
            }
        }
        self.deliver_due();
    }

    /// `ib_unregister_mad_agent` (mad-spec.md §1.4): flushes every outstanding send, stops
    /// the routing of MADs to the agent and its timer, calls the handlers that are due in this
    /// thread, and returns once every send handler and receive handler has returned and every
    /// send buffer of the agent has been dropped. After it returns no handler of the agent is
    /// ever called again.
    ///
    /// Called from one of the agent's own handlers it would wait for itself forever: it warns
    /// and returns `EDEADLK` instead.
    pub(crate) fn unregister(self: &Arc<Self>) -> Result {
        let me = Task::current_raw().addr();
        {
            let mut g = self.inner.lock();
            if g.handler_task == me {
                drop(g);
                pr_warn!("unregister called from a handler of the same agent\n");
                return Err(EDEADLK);
            }
            if g.dead {
                return Err(EINVAL);
            }
            g.dead = true;
            // Waiting, cancelled and queued sends are flushed now (T25), in the C layer's list
            // order; sends in flight are marked and flushed at their send completion (T24).
            for q in [Q_CANCEL, Q_WAIT, Q_BACKLOG] {
                while let Some(rec) = first_in(&g.queues, q) {
                    Self::with_state(&mut g, &rec, |g, st| {
                        let _ = self.apply(g, &rec, st, Event::Unregister);
                    });
                }
            }
            let mut after: Option<QKey> = None;
            loop {
                let bound = after.map_or((Q_FLIGHT, i64::MIN, 0), |k| {
                    (k.0, k.1, k.2.saturating_add(1))
                });
                let Some((k, rec)) = first_entry_from(&g.queues, bound, Q_FLIGHT) else {
                    break;
                };
                Self::with_state(&mut g, &rec, |g, st| {
                    let _ = self.apply(g, &rec, st, Event::Unregister);
                });
                after = Some(k);
            }
        }
        self.engine.unpublish(self.hi_tid);
        wq::disable_sync::<Agent, 0>(self);
        loop {
            self.deliver_due();
            let mut g = self.inner.lock();
            if first_in(&g.queues, Q_DONE).is_some() {
                continue;
            }
            if g.outstanding == 0 && g.buffers == 0 && g.in_recv == 0 {
                return Ok(());
            }
            self.idle.wait(&mut g);
        }
    }
}

/// The first send of queue `q`.
fn first_in(queues: &RBTree<QKey, Arc<SendRecord>>, q: u8) -> Option<Arc<SendRecord>> {
    first_entry(queues, q).map(|(_, r)| r)
}

/// The first key and send of queue `q`.
fn first_entry(queues: &RBTree<QKey, Arc<SendRecord>>, q: u8) -> Option<(QKey, Arc<SendRecord>)> {
    first_entry_from(queues, (q, i64::MIN, 0), q)
}

/// The first key and send of queue `q` at or after `bound`.
fn first_entry_from(
    queues: &RBTree<QKey, Arc<SendRecord>>,
    bound: QKey,
    q: u8,
) -> Option<(QKey, Arc<SendRecord>)> {
    let c = queues.cursor_lower_bound(&bound)?;
    let (k, rec) = c.current();
    (k.0 == q).then(|| (*k, rec.clone()))
}
