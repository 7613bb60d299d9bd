// SPDX-License-Identifier: GPL-2.0

//! MAD agents: registration, send buffers, post, modify and cancel, send completions,
//! response matching, timeouts and unregistration, with the semantics of Linux 7.3's
//! `ib_register_mad_agent`, `ib_create_send_mad`, `ib_post_send_mad`, `ib_modify_mad`,
//! `ib_cancel_mad` and `ib_unregister_mad_agent` (Documentation/behaviour.md §1–§5).
//!
//! # Structure
//!
//! Each agent has one lock ([`Agent::inner`]) over everything that changes: the queues and the
//! index of its outstanding sends, the flow-control counters and the bookkeeping of
//! unregistration. Every per-send state change goes through [`state::step`] and is applied by
//! [`Agent::apply`]; nothing else writes a send's state.
//!
//! - The *queues* hold every outstanding send exactly once, in the queue that says which of
//!   the C layer's lists it is on: cancelled sends awaiting the timeout work (the head of the C
//!   wait list), waiting sends by expiry, the backlog in FIFO order, sends handed to the
//!   transport, and sends whose final status is decided and whose handler is due. The order
//!   of the queues and of the keys within each is the order in which the C layer searches its
//!   lists, so the first candidate in that order is the one the C layer would find.
//! - The *TID index* holds every send that can still be matched, by (TID, class), in the order
//!   of their posts.
//!
//! All are intrusive (`queues.rs`: red-black trees of [`crate::sys::rbtree`], and lists of
//! [`crate::sys::fifo`] for the queues whose sends arrive in key order), linked through the
//! send's record: finding a send for cancel or modify is O(1) through its handle, response
//! matching is O(log n), a move between queues is O(1) amortised (each queue's keys grow, and
//! a tree caches its last place), and nothing scans the outstanding sends. The links are part of the send's
//! record, so post, modify, cancel, completion and timeout processing never allocate.
//!
//! # Where things are
//!
//! This file holds the types and registration; each path has a file of its own under
//! `agent/`: `spec.rs` and `create.rs` (send buffers), `post.rs` (post, chains, the backlog), `cancel.rs`
//! (modify and cancel), `complete.rs` (send completions, timeouts and handler delivery),
//! `matching.rs` (received MADs and response matching), `unregister.rs`, `queues.rs` (the
//! queues and the TID index, and every move between them), `apply.rs` ([`Agent::apply`],
//! where every state change the table decides happens) and `direct.rs` (the common
//! transitions in straight-line code).
//!
//! # Where handlers run
//!
//! Never under an rmad lock, and never from post, modify, cancel or free. Send handlers run on
//! the engine's workqueue, from the agent's work item, in the order in which the final
//! statuses were decided (the work items of different agents run side by side, so a handler
//! that waits holds up only its own agent); after a matched response the receive handler and then the send
//! handler run in the transport's receive context, one after the other; unregistration
//! delivers the flushes it causes in the calling thread, as the C layer does.

use crate::{
    engine::{
        record::{
            RecordOwner,
            RecordState,
            SendBuf,
            SendCompletion,
            SendHandle,
            SendRecord, //
        },
        rmpp_budget::PortBudget,
        transport::{
            PortAttr,
            RecvMad,
            Transport, //
        },
        Routed, //
    },
    mad::{
        retry::Rules,
        state::{
            self,
            SendState, //
        },
        wire::{
            self,
            MadHdr, //
        },
        QpType,
        RegReq, //
    },
};
use kernel::{
    new_condvar, new_mutex, new_spinlock_irq,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Full,
            Relaxed, //
        },
        Arc,
        CondVar,
        LockedBy,
        Mutex,
        SpinLockIrq, //
    },
    time::{
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

mod apply;
mod cancel;
mod complete;
mod create;
mod direct;
mod frames;
mod handler_calls;
pub(crate) mod hold;
mod matching;
mod post;
pub(crate) mod queues;
mod reply;
mod retries;
mod rmpp_recv;
mod rmpp_send;
mod rmpp_transfers;
mod spec;
mod unregister;
mod wait;

pub(crate) use queues::Queue;
#[cfg_attr(not(rmad_test), allow(unused_imports, reason = "the tests read them"))]
pub(crate) use rmpp_transfers::{
    MAX_BYTES as RMPP_MAX_BYTES,
    MAX_LINGERING as RMPP_MAX_LINGERING,
    MAX_PER_SENDER as RMPP_MAX_PER_SENDER,
    MAX_TRANSFERS as RMPP_MAX_TRANSFERS, //
};
pub(crate) use spec::SendSpec;

/// The engine of agents: routing by `hi_tid` and class, the workqueues (`super::Engine`).
pub(crate) type Engine = super::Engine<Agent>;

/// [`Queue::Cancel`].
const Q_CANCEL: Queue = Queue::Cancel;
/// [`Queue::Wait`].
const Q_WAIT: Queue = Queue::Wait;
/// [`Queue::Backlog`].
const Q_BACKLOG: Queue = Queue::Backlog;
/// [`Queue::Flight`].
const Q_FLIGHT: Queue = Queue::Flight;
/// [`Queue::Done`].
const Q_DONE: Queue = Queue::Done;

/// The send handler (`ib_mad_send_handler`).
pub(crate) trait SendHandler: Send + Sync {
    /// Called exactly once per successful post, with the buffer given back to the client.
    fn send_done(&self, agent: &Arc<Agent>, buf: SendBuf<Agent>, wc: SendCompletion);
}

/// The receive handler (`ib_mad_recv_handler`).
pub(crate) trait RecvHandler: Send + Sync {
    /// Called for each MAD routed to the agent: a response matched to `send`, or a request
    /// (`send` is `None`). The handler owns `mad`; dropping it is `ib_free_recv_mad`.
    fn recv(&self, agent: &Arc<Agent>, send: Option<&SendHandle<Agent>>, mad: RecvMad);
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
    /// The retry rules of the agent's new send buffers (Documentation/behaviour.md §2.11).
    pub(crate) retry: Rules,
    /// The send handler.
    pub(crate) send_handler: Option<Arc<dyn SendHandler>>,
    /// The receive handler.
    pub(crate) recv_handler: Option<Arc<dyn RecvHandler>>,
}

/// What registration decided for a new agent, besides its [`AgentConfig`].
struct Parts {
    /// The high 32 bits of the agent's TIDs.
    hi_tid: u32,
    /// The port's attributes.
    port_attr: PortAttr,
    /// The agent's flow-control limit.
    sol_fc_max: u32,
    /// The transport's forwarding of the agent's registration (0: none).
    forward_key: u64,
    /// What the port's kernel-RMPP agents may hold together while reassembling.
    rmpp_budget: Arc<PortBudget>,
}

/// Per-agent counters, for the demonstration and debugging.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Stats {
    /// Successful posts.
    pub(crate) posted: u64,
    /// Transmissions handed to the device, retries included.
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
    /// Responses dropped (unmatched, duplicate, for a cancelled send, or for an agent without
    /// a receive handler).
    pub(crate) dropped_responses: u64,
    /// Send handler calls.
    pub(crate) completed: u64,
    /// Active RMPP responses that matched no send and went to a user-RMPP agent's receive
    /// handler without one (Documentation/behaviour.md §2.10.7).
    pub(crate) user_rmpp_unmatched: u64,
    /// Sends put in the flow-control backlog.
    pub(crate) backlogged: u64,
    /// The waits for a response the agent began, in order (test flavour: the retry rules'
    /// schedules are checked against it).
    #[cfg(rmad_test)]
    pub(crate) waits: WaitLog,
}

/// The first [`WaitLog::CAP`] waits for a response an agent began, in milliseconds (rounded
/// down), oldest first.
#[cfg(rmad_test)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WaitLog {
    /// The waits; those past `len` are 0.
    pub(crate) ms: [u32; WaitLog::CAP],
    /// How many waits began (also past [`WaitLog::CAP`]).
    pub(crate) len: usize,
}

#[cfg(rmad_test)]
impl WaitLog {
    /// Waits kept.
    pub(crate) const CAP: usize = 24;

    /// Notes a wait of `ns` nanoseconds.
    pub(crate) fn note(&mut self, ns: i64) {
        let ms = u32::try_from(ns / 1_000_000).unwrap_or(u32::MAX);
        if let Some(slot) = self.ms.get_mut(self.len) {
            *slot = ms;
        }
        self.len = self.len.saturating_add(1);
    }

    /// The waits kept.
    pub(crate) fn as_slice(&self) -> &[u32] {
        self.ms.get(..self.len.min(Self::CAP)).unwrap_or(&[])
    }
}

/// The state of an agent that its lock protects.
///
/// # Invariants
///
/// - Every send whose state is not `Idle` is in exactly one of the queues of `queues`, the one its
///   `RecordState::queue` names and that matches its state (see [`Queue`]), except a `Done`
///   send left to whoever decided it, who takes it for its handler before dropping the lock,
///   or left to the receive path while the receive handler of its response runs
///   (`RecordState::in_recv`), which takes it when that handler returns; other sends are in
///   none.
/// - A send is in the TID index of `queues` from its post until its state is `Done`.
/// - Only this agent's sends are in its queues and index.
/// - `fc_send` and `fc_wait` count the flow-controlled sends in `SendStart` and `WaitResp`;
///   `backlog` counts the sends in `Q_BACKLOG`, and `backlog_deadlines` those of them with a
///   deadline (Documentation/behaviour.md §2.11).
pub(crate) struct AgentInner {
    queues: queues::Queues<SendRecord<Agent>>,
    fc_send: u32,
    fc_wait: u32,
    backlog: u32,
    /// Sends in the backlog with a deadline: while there are any, the agent's work looks for
    /// those whose deadline passed ([`Agent::expire_backlog`]).
    backlog_deadlines: u32,
    /// Successful posts whose send handler has not returned yet.
    outstanding: u32,
    /// Receive handlers running.
    in_recv: u32,
    /// Unregistration has started: no new posts, no timer.
    dead: bool,
    /// When the agent's work is due, if it is queued (nanoseconds since `Agent::epoch`).
    armed_ns: Option<i64>,
    /// The handler calls in progress, by task (unregistration refuses to wait for itself).
    frames: frames::Frames,
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
    transport: Arc<dyn Transport<Agent>>,
    port: u8,
    port_attr: PortAttr,
    qp_type: QpType,
    rmpp_version: u8,
    flags: u32,
    /// The retry rules a new send buffer starts with.
    retry_default: Rules,
    /// The flow-control limit (`sol_fc_max`); 0 disables flow control.
    pub(crate) sol_fc_max: u32,
    send_handler: Option<Arc<dyn SendHandler>>,
    recv_handler: Option<Arc<dyn RecvHandler>>,
    /// What the transport forwards to the engine for this agent's registration
    /// ([`Transport::forward`]), stopped at unregistration.
    forward_key: u64,
    /// Origin of the agent's clock.
    epoch: Instant<Monotonic>,
    #[pin]
    pub(crate) inner: SpinLockIrq<AgentInner>,
    /// Signalled when `outstanding`, `buffers` or `in_recv` drops, or a handler becomes due,
    /// while unregistration waits (`Agent::sleeping`).
    #[pin]
    idle: CondVar,
    /// Send buffers created and not yet dropped. Counted without the lock, up by a creation
    /// (which gives its count back once it sees `dying`) and down by a drop (which takes the
    /// lock only while unregistration sleeps, to wake it).
    buffers: Atomic<u32>,
    /// Unregistration has started (`AgentInner::dead`, for what reads no locked state).
    dying: Atomic<bool>,
    /// Unregistration sleeps on `idle` (only then is a wake-up worth its cost). Written under
    /// the lock; read under it, and without it by a buffer's drop.
    sleeping: Atomic<bool>,
    /// Transmissions handed to the device, retries included ([`Stats::transmitted`]): counted
    /// without the lock by a transport's transmit path.
    transmitted: Atomic<u64>,
    /// Runs timeouts and delivers completions, on the engine's queue ([`Engine::wq`]).
    #[pin]
    work: DelayedWork<Agent>,
    /// The RMPP transfers being reassembled (kernel-RMPP agents). Taken before `inner`,
    /// never inside it.
    #[pin]
    rmpp: Mutex<rmpp_transfers::Recvs>,
}

impl Routed for Agent {
    fn receive(self: &Arc<Self>, hdr: &MadHdr, recv: RecvMad) {
        Agent::receive(self, hdr, recv);
    }

    fn on_device(&self, device: *const ()) -> bool {
        Agent::on_device(self, device)
    }

    fn port(&self) -> u8 {
        self.port
    }

    fn qp_type(&self) -> QpType {
        self.qp_type
    }
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
    pub(crate) buf: SendBuf<Agent>,
}

/// The result of a chained post that did not fail.
#[cfg_attr(
    not(rmad_test),
    expect(dead_code, reason = "Rust API that only the test flavour calls")
)]
pub(crate) struct Chain {
    /// Handles of the posted elements, in chain order.
    pub(crate) posted: KVec<SendHandle<Agent>>,
    /// Elements after one that flow control queued: not posted, back with the client.
    pub(crate) unposted: KVec<SendBuf<Agent>>,
}

/// A chained post that failed.
#[cfg_attr(
    not(rmad_test),
    expect(dead_code, reason = "Rust API that only the test flavour calls")
)]
pub(crate) struct ChainError {
    /// Why the failed element could not be posted.
    pub(crate) err: Error,
    /// Handles of the elements posted before it.
    pub(crate) posted: KVec<SendHandle<Agent>>,
    /// The element that failed (`*bad_send_buf`).
    pub(crate) failed: Option<SendBuf<Agent>>,
    /// The elements after it, not posted.
    pub(crate) unposted: KVec<SendBuf<Agent>>,
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
    /// `ib_register_mad_agent`: validates the request in the C layer's order
    /// (Documentation/behaviour.md §1.3), allocates a `hi_tid` and publishes the agent.
    #[cfg_attr(
        not(rmad_test),
        allow(
            dead_code,
            reason = "the Rust API's common case; the C API needs the hook"
        )
    )]
    pub(crate) fn register(
        engine: &Arc<Engine>,
        transport: &Arc<dyn Transport<Agent>>,
        cfg: AgentConfig,
    ) -> Result<Arc<Agent>> {
        Self::register_with(engine, transport, cfg, |_| Ok(()))
    }

    /// [`Agent::register`], calling `before_routable` with the new agent before any MAD can
    /// reach it (or its handlers): what its handlers need of the caller (the C API's handle)
    /// is in place when the first one runs. Its error fails the registration.
    pub(crate) fn register_with(
        engine: &Arc<Engine>,
        transport: &Arc<dyn Transport<Agent>>,
        cfg: AgentConfig,
        before_routable: impl FnOnce(&Arc<Agent>) -> Result,
    ) -> Result<Arc<Agent>> {
        let attr = transport.port_attr(cfg.port);
        Self::check_config(&cfg, attr)?;
        // 6. The port must exist.
        let port_attr = attr.ok_or(ENODEV)?;
        let rmpp_budget = transport.rmpp_budget(cfg.port).ok_or(ENODEV)?;
        // The device's own MAD layer hands over what the registration selects (or refuses,
        // with its error). Before the routing table: a request may arrive at once.
        let forward_key = match &cfg.reg {
            Some(r) => transport.forward(cfg.port, cfg.qp_type, r)?,
            None => 0,
        };
        let sol_fc_max = state::sol_fc_max(
            cfg.recv_handler.is_some(),
            cfg.reg.map(|r| r.mgmt_class),
            RECV_QUEUE_SIZE,
        );
        // 8./9. `hi_tid` and the registration table.
        let device = transport.device();
        let (port, qp_type, reg) = (cfg.port, cfg.qp_type, cfg.reg);
        let agent = engine.publish(device, port, qp_type, reg, |hi_tid| {
            let parts = Parts {
                hi_tid,
                port_attr,
                sol_fc_max,
                forward_key,
                rmpp_budget,
            };
            let init = Self::new(engine.clone(), transport.clone(), cfg, parts);
            let agent = Arc::pin_init(init, GFP_KERNEL)?;
            before_routable(&agent)?;
            Ok(agent)
        });
        if agent.is_err() && forward_key != 0 {
            transport.stop_forwarding(forward_key);
        }
        agent
    }

    /// Steps 1 to 5 of `ib_register_mad_agent`'s checks: what the port can carry (`attr`, if
    /// the port exists), the RMPP version, and the registration or its absence.
    fn check_config(cfg: &AgentConfig, attr: Option<PortAttr>) -> Result {
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
        let bad = match &cfg.reg {
            Some(r) => Self::refused_reg(cfg, r),
            None => cfg.send_handler.is_none() || cfg.flags & wire::IB_MAD_USER_RMPP != 0,
        };
        if bad {
            return Err(EINVAL);
        }
        Ok(())
    }

    /// Whether the class registration `r` of `cfg` is one that 7.3 refuses (step 4).
    fn refused_reg(cfg: &AgentConfig, r: &RegReq) -> bool {
        let c = r.mgmt_class;
        r.class_version >= 0x83
            || cfg.recv_handler.is_none()
            || (c >= 80 && c != wire::IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE)
            || c == 0
            || ((wire::IB_MGMT_CLASS_VENDOR_RANGE2_START..=wire::IB_MGMT_CLASS_VENDOR_RANGE2_END)
                .contains(&c)
                && r.oui == [0; 3])
            || (cfg.rmpp_version != 0 && !wire::ib_is_mad_class_rmpp(c))
            || (cfg.qp_type == QpType::Smi
                && c != wire::IB_MGMT_CLASS_SUBN_LID_ROUTED
                && c != wire::IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE)
            || (cfg.qp_type == QpType::Gsi
                && (c == wire::IB_MGMT_CLASS_SUBN_LID_ROUTED
                    || c == wire::IB_MGMT_CLASS_SUBN_DIRECTED_ROUTE))
    }

    /// A new agent of `engine` on `transport`, as `cfg` asks, with what registration decided
    /// (`parts`).
    fn new(
        engine: Arc<Engine>,
        transport: Arc<dyn Transport<Agent>>,
        cfg: AgentConfig,
        parts: Parts,
    ) -> impl PinInit<Self> {
        pin_init!(Agent {
            hi_tid: parts.hi_tid,
            engine,
            transport,
            port: cfg.port,
            port_attr: parts.port_attr,
            qp_type: cfg.qp_type,
            rmpp_version: cfg.rmpp_version,
            flags: cfg.flags,
            retry_default: cfg.retry,
            sol_fc_max: parts.sol_fc_max,
            send_handler: cfg.send_handler,
            recv_handler: cfg.recv_handler,
            forward_key: parts.forward_key,
            epoch: Instant::now(),
            inner <- new_spinlock_irq!(
                AgentInner {
                    queues: queues::Queues::new(),
                    fc_send: 0,
                    fc_wait: 0,
                    backlog: 0,
                    backlog_deadlines: 0,
                    outstanding: 0,
                    in_recv: 0,
                    dead: false,
                    armed_ns: None,
                    frames: frames::Frames::new(),
                    stats: Stats::default(),
                },
                "Agent::inner"
            ),
            idle <- new_condvar!("Agent::idle"),
            buffers: Atomic::new(0),
            dying: Atomic::new(false),
            sleeping: Atomic::new(false),
            transmitted: Atomic::new(0),
            work <- new_delayed_work!("Agent::work"),
            rmpp <- new_mutex!(rmpp_transfers::Recvs::new(parts.rmpp_budget), "Agent::rmpp"),
        })
    }

    /// The port the agent sends from.
    pub(crate) fn port(&self) -> u8 {
        self.port
    }

    /// Whether the kernel does RMPP for this agent.
    fn kernel_rmpp(&self) -> bool {
        wire::ib_mad_kernel_rmpp_agent(self.rmpp_version, self.flags)
    }

    /// A snapshot of the counters.
    pub(crate) fn stats(&self) -> Stats {
        let mut s = self.lock().stats;
        s.transmitted = self.transmitted.load(Relaxed);
        s
    }

    /// Number of posts whose send handler has not returned.
    pub(crate) fn outstanding(&self) -> u32 {
        self.lock().outstanding
    }

    /// Number of send buffers created on the agent and not yet dropped.
    #[cfg_attr(
        not(rmad_test),
        expect(dead_code, reason = "Rust API that only the test flavour calls")
    )]
    pub(crate) fn buffers(&self) -> u32 {
        self.buffers.load(Relaxed)
    }

    /// The state of the send `h` names, if `h` is still its current post.
    pub(crate) fn send_state(&self, h: &SendHandle<Agent>) -> Option<SendState> {
        let inner = self.lock();
        let state = h.rec.state.access(&inner);
        (state.gen == h.gen).then_some(state.facts.state)
    }

    /// Wakes unregistration if it sleeps, to look again at what it waits for. Called with the
    /// lock held (`_g`): unregistration decides to sleep and sleeps under it.
    fn wake(&self, _g: &AgentInner) {
        if self.sleeping.load(Relaxed) {
            self.idle.notify_all();
        }
    }

    /// Nanoseconds since the agent's epoch.
    fn now_ns(&self) -> i64 {
        (Instant::<Monotonic>::now() - self.epoch).as_nanos()
    }
}

impl RecordOwner for Agent {
    type Locked = AgentInner;
    type State = RecordState<Agent>;

    fn new_state(&self) -> LockedBy<RecordState<Agent>, AgentInner> {
        LockedBy::new(&self.inner, RecordState::default())
    }

    /// Called when a send buffer of this agent is dropped (`ib_free_send_mad`): no lock
    /// unless the agent is being unregistered.
    fn buffer_freed(&self) {
        // Full: ordered against `dying` as unregistration's store of it is against its reads
        // of the count (see `unregister_with`): one of the two sees the other.
        let was = self.buffers.fetch_sub(1, Full);
        if was == 0 {
            // Not reachable: every buffer was counted at its creation.
            self.buffers.store(0, Relaxed);
        }
        if self.sleeping.load(Relaxed) {
            self.wake(&self.lock());
        }
    }
}
