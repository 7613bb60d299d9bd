// SPDX-License-Identifier: GPL-2.0

//! The benchmark that `make bench` runs (module parameter `bench=1`): rmad side by side with
//! the C MAD layer on soft-RoCE `rxe0`, in the same boot.
//!
//! The driver is `src/testing/bench/driver.c`: it runs the same rounds (post, settle, memory,
//! modify, response matching, round trip, cancel, simultaneous timeouts) for the C MAD layer, for
//! rmad's exported C API and for rmad's Rust API, through one table of operations per
//! implementation, so that every timed loop makes the same indirect call per operation. This file
//! implements the operations of the Rust API (`rmad_bench_rust_*`), called by that driver from the
//! loading thread only. Figures are printed, never asserted.

pub(crate) mod hold;

use crate::{
    engine::{
        agent::{
            hold::{
                hold_histogram_take,
                hold_timing,
                irqoff_max_ns_take,
                HOLD_BUCKETS, //
            },
            Agent,
            RecvHandler,
            SendHandler, //
        },
        send::{
            SendBuf,
            SendCompletion,
            SendHandle, //
        },
        transport::{
            RecvMad,
            Transport, //
        },
    },
    mad::{
        wire,
        Gid, //
    },
    testing::{
        register_gsi,
        requests,
        sleep_ms, //
    },
    verbs, //
};
use core::ffi::c_void;
use kernel::{
    ffi::c_int,
    prelude::*,
    sync::Arc,
    time::{
        Instant,
        Monotonic, //
    },
};

/// Management class of every benchmark MAD: vendor range 1, which neither ib_core nor rxe
/// answers (the driver's responder answers its GETs).
const CLASS: u8 = 0x0b;
/// GID index of the port's IPv6 link-local GID: requests the responder answers go to QP1 of
/// the port itself through it.
const GID_INDEX: u8 = 0;
/// GID index of the port's IPv4-mapped GID: unanswered sends leave through it.
const SILENT_GID_INDEX: u8 = 1;
/// Destination of the unanswered sends: `::ffff:10.0.0.2`, which no port has (rxe drops them).
const SILENT_GID: Gid = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2];
/// Timeout of sends that wait for a response nobody gives (10 minutes).
const LONG_MS: i32 = 600_000;
/// Timeout of a transaction's GET (`BENCH_TXN_MS` of the driver).
const TXN_MS: i32 = 2_000;
/// Round trips timed per pass (at most).
const RTT_SAMPLE: u32 = 50;
/// Longest wait for the device to take a round's sends.
const WAIT_SENT_MS: i64 = 600_000;
/// The low word of the first TID of the buffers other than the silent sends (`BENCH_LO_BASE`
/// of the driver): the silent sends have `0..n`.
const LO_BASE: usize = 0x4000_0000;

/// What a send is (`enum bench_kind` of the driver), carried in `context[0]`.
const KIND_SILENT: usize = 1;
/// A send with timeout 0, complete once the device took it.
const KIND_MARKER: usize = 2;
/// A GET the responder answers.
const KIND_REQ: usize = 3;
/// The send whose handler holds the delivery queue.
const KIND_GATE: usize = 4;
/// A matched response (receive handler).
const KIND_RESP: usize = 5;
/// A transaction's GET.
const KIND_TXN: usize = 6;

extern "C" {
    /// Counts one event of `kind` (a `KIND_*`) with `status` in the driver's `round`.
    fn rmad_bench_event(round: *mut c_void, kind: c_int, status: c_int);
    /// Runs the benchmark for `n` outstanding sends, each figure timing at least `min_ops`
    /// operations at small `n`, and the scaling rounds with `scale` sends unless 0; `rust` and
    /// `rust2` are the two [`RustBench`]es its `rmad_bench_rust_*` calls get back (the second for
    /// the scaling round's second thread).
    fn rmad_bench_run(
        n: u32,
        reps: u32,
        sample: u32,
        rtt_sample: u32,
        min_ops: u32,
        scale: u32,
        insn: bool,
        rust: *mut c_void,
        rust2: *mut c_void,
    ) -> c_int;
    /// The goodput row for retry policy `policy` (0: the C layer, 1: rmad, 2: rmad with
    /// backoff and a deadline), `secs` seconds, repetition `rep` (`src/testing/bench/goodput.c`).
    fn rmad_bench_goodput(
        dev: *mut crate::verbs::IbDevice,
        policy: c_int,
        secs: u32,
        rep: u32,
    ) -> c_int;
}

/// The handlers of the benchmark's agents: they count each event in the driver's round.
///
/// # Invariants
///
/// `round` is the driver's `struct rmad_bench_round`, which outlives the agents registered
/// with this handler (the driver unregisters them before it frees the round).
struct Handler {
    round: *mut c_void,
}

// SAFETY: `round` is only passed to `rmad_bench_event`, which may be called from any thread
// (it uses atomics and completions).
unsafe impl Send for Handler {}
// SAFETY: As above; `Handler` has no interior state of its own.
unsafe impl Sync for Handler {}

impl Handler {
    /// Counts one event of `kind` with `status`.
    fn event(&self, kind: usize, status: u32) {
        let kind = c_int::try_from(kind).unwrap_or(0);
        let status = c_int::try_from(status).unwrap_or(-1);
        // SAFETY: `round` is alive while the agents are registered (type invariant), and
        // handlers only run while they are.
        unsafe { rmad_bench_event(self.round, kind, status) };
    }
}

impl SendHandler for Handler {
    fn send_done(&self, _agent: &Arc<Agent>, buf: SendBuf, wc: SendCompletion) {
        let kind = buf.context()[0];
        drop(buf);
        self.event(kind, wc.status.code());
    }
}

impl RecvHandler for Handler {
    fn recv(&self, _agent: &Arc<Agent>, send: Option<&SendHandle>, _mad: RecvMad) {
        if send.is_some() {
            self.event(KIND_RESP, 0);
        }
    }
}

/// The state of the Rust implementation between the driver's calls.
pub(crate) struct RustBench {
    /// Number of silent sends.
    n: usize,
    /// Where sends go: the port's own GID.
    dgid: Gid,
    /// The agent of the measured sends, and of the gate (`rounds.c`, round B).
    agent: Option<Arc<Agent>>,
    /// Where the silent sends are created, if not on `agent`: another state's agent (the
    /// driver's `share`, for two threads posting to one agent).
    sends_on: Option<Arc<Agent>>,
    /// The silent sends, until posted.
    bufs: KVec<Option<SendBuf>>,
    /// The silent sends' handles, once posted.
    handles: KVec<Option<SendHandle>>,
    /// How many sends of the agent the device had taken before the last [`RustBench::create`].
    sent_before: u64,
    /// The requests the responder answers, until posted.
    reqs: KVec<Option<SendBuf>>,
    /// The requests' handles, once posted.
    req_handles: KVec<SendHandle>,
    /// The gate's handle, once posted.
    gate_handle: Option<SendHandle>,
    /// The low word of the next TID of a buffer other than a silent send's.
    lo: usize,
}

impl RustBench {
    /// Nothing registered yet.
    fn new() -> Self {
        Self {
            n: 0,
            dgid: [0; 16],
            agent: None,
            sends_on: None,
            bufs: KVec::new(),
            handles: KVec::new(),
            sent_before: 0,
            reqs: KVec::new(),
            req_handles: KVec::new(),
            gate_handle: None,
            lo: LO_BASE,
        }
    }

    /// The low word of the next TID of a buffer other than a silent send's.
    fn next_lo(&mut self) -> usize {
        let lo = self.lo;
        self.lo = lo.wrapping_add(1);
        lo
    }

    /// A send of `a` with `method`, TID low word `lo`, `timeout_ms` and `kind`, to the
    /// responder (`kind` [`KIND_REQ`] or [`KIND_TXN`]) or to nobody.
    fn buf(
        &self,
        a: &Arc<Agent>,
        lo: usize,
        method: u8,
        timeout_ms: i32,
        kind: usize,
    ) -> Result<SendBuf> {
        let lo = u32::try_from(lo).map_err(|_| EINVAL)?;
        let mut buf = requests::mad(a, CLASS, method, lo)?;
        buf.set_ah(Some(if kind == KIND_REQ || kind == KIND_TXN {
            requests::gid_address(self.dgid, GID_INDEX)
        } else {
            requests::gid_address(SILENT_GID, SILENT_GID_INDEX)
        }));
        buf.set_timeout_ms(timeout_ms);
        buf.set_retries(0);
        buf.set_context([kind, 0]);
        Ok(buf)
    }

    /// Registers the agents.
    fn open(&mut self, round: *mut c_void, n: u32) -> Result {
        self.close();
        let n = usize::try_from(n).map_err(|_| EINVAL)?;
        let port = verbs::find_port(c"rxe0", 1).ok_or(ENODEV)?;
        let engine = verbs::verbs_engine().ok_or(ENODEV)?;
        self.dgid = port.gid(1, GID_INDEX).ok_or(ENODEV)?;
        let transport: Arc<dyn Transport<Agent>> = port;
        let handler = Arc::new(Handler { round }, GFP_KERNEL)?;
        self.agent = Some(register_gsi(&engine, &transport, 1, &handler, None)?);
        self.n = n;
        self.lo = LO_BASE;
        self.bufs = KVec::with_capacity(n, GFP_KERNEL)?;
        self.handles = KVec::with_capacity(n, GFP_KERNEL)?;
        Ok(())
    }

    /// Creates the silent sends, with `timeout_ms` (again once the last ones were delivered).
    fn create(&mut self, timeout_ms: i32) -> Result {
        let a = self
            .sends_on
            .clone()
            .or_else(|| self.agent.clone())
            .ok_or(EINVAL)?;
        self.sent_before = self.agent.as_ref().map_or(0, |a| a.stats().transmitted);
        self.bufs.clear();
        self.handles.clear();
        for i in 0..self.n {
            let b = self.buf(&a, i, wire::IB_MGMT_METHOD_SEND, timeout_ms, KIND_SILENT)?;
            self.bufs.push(Some(b), GFP_KERNEL)?;
            self.handles.push(None, GFP_KERNEL)?;
        }
        Ok(())
    }

    /// Posts silent send `i`.
    fn post(&mut self, i: usize) -> Result {
        let slot = self.bufs.get_mut(i).ok_or(EINVAL)?;
        let buf = slot.take().ok_or(EINVAL)?;
        match Agent::post(buf) {
            Ok(h) => {
                if let Some(hs) = self.handles.get_mut(i) {
                    *hs = Some(h);
                }
                Ok(())
            }
            Err(e) => {
                *slot = Some(e.buf);
                Err(e.err)
            }
        }
    }

    /// The handle of silent send `i`.
    fn handle(&self, i: usize) -> Result<&SendHandle> {
        self.handles.get(i).and_then(Option::as_ref).ok_or(EINVAL)
    }

    /// Creates `count` requests, posted by [`RustBench::post_req`]; cancels those of the last
    /// call still posted (`EINVAL` for those whose handler ran) and drops the others.
    fn reqs(&mut self, count: usize) -> Result {
        for h in self.req_handles.iter() {
            let _ = h.cancel();
        }
        self.req_handles.clear();
        self.reqs.clear();
        let a = self.agent.clone().ok_or(EINVAL)?;
        self.reqs.reserve(count, GFP_KERNEL)?;
        self.req_handles.reserve(count, GFP_KERNEL)?;
        for _ in 0..count {
            let lo = self.next_lo();
            let b = self.buf(&a, lo, wire::IB_MGMT_METHOD_GET, LONG_MS, KIND_REQ)?;
            self.reqs.push(Some(b), GFP_KERNEL)?;
        }
        Ok(())
    }

    /// Posts request `j`.
    fn post_req(&mut self, j: usize) -> Result {
        let slot = self.reqs.get_mut(j).ok_or(EINVAL)?;
        let buf = slot.take().ok_or(EINVAL)?;
        match Agent::post(buf) {
            // Room was reserved in `reqs`.
            Ok(h) => self.req_handles.push(h, GFP_KERNEL).map_err(|_| ENOMEM),
            Err(e) => {
                *slot = Some(e.buf);
                Err(e.err)
            }
        }
    }

    /// Creates a send of `kind` with `method` and `timeout_ms` on the agent and posts it; its
    /// handle unless the post failed (which drops it).
    fn post_new(&mut self, method: u8, timeout_ms: i32, kind: usize) -> Result<SendHandle> {
        let lo = self.next_lo();
        let a = self.agent.clone().ok_or(EINVAL)?;
        let buf = self.buf(&a, lo, method, timeout_ms, kind)?;
        Agent::post(buf).map_err(|e| e.err)
    }

    /// Creates and posts a marker.
    fn post_marker(&mut self) -> Result {
        self.post_new(wire::IB_MGMT_METHOD_SEND, 0, KIND_MARKER)
            .map(drop)
    }

    /// Creates and posts the gate's send.
    fn post_gate(&mut self) -> Result {
        let h = self.post_new(wire::IB_MGMT_METHOD_SEND, LONG_MS, KIND_GATE)?;
        self.gate_handle = Some(h);
        Ok(())
    }

    /// Creates a send buffer of one MAD on the agent and drops it: what `ib_create_send_mad` and
    /// `ib_free_send_mad` do.
    fn create_free(&self) -> Result {
        let a = self.agent.as_ref().ok_or(EINVAL)?;
        drop(a.create_mad(1, GFP_KERNEL)?);
        Ok(())
    }

    /// Starts a transaction: creates a GET the responder answers and posts it (the send handler
    /// drops it); its handle is not kept.
    fn txn(&mut self) -> Result {
        self.post_new(wire::IB_MGMT_METHOD_GET, TXN_MS, KIND_TXN)
            .map(drop)
    }

    /// Cancels the gate's send: its handler then holds the agent's work.
    fn cancel_gate(&mut self) -> Result {
        self.gate_handle.take().ok_or(EINVAL)?.cancel()
    }

    /// Unregisters the agents (flushing what is outstanding) and frees everything.
    fn close(&mut self) {
        // What is outstanding is cancelled and delivered first, so that the unregistration
        // finds nothing to flush (its batched walk once yielded with the agent's lock held).
        for h in self.handles.iter().flatten() {
            let _ = h.cancel();
        }
        for h in Iterator::chain(self.req_handles.iter(), self.gate_handle.as_ref()) {
            let _ = h.cancel();
        }
        if let Some(a) = self.agent.as_ref() {
            if wait_idle(a).is_err() {
                pr_warn!("bench: an agent still has sends outstanding\n");
            }
        }
        self.req_handles = KVec::new();
        self.handles = KVec::new();
        self.gate_handle = None;
        self.unregister();
    }

    /// Unregisters the agent with what is outstanding still outstanding (the flush that the
    /// driver's unregistration round measures). Buffers not posted are dropped first: an
    /// unregistration waits for every buffer of its agent.
    fn unregister(&mut self) {
        self.bufs = KVec::new();
        self.reqs = KVec::new();
        self.sends_on = None;
        if let Some(a) = self.agent.take() {
            if let Err(e) = a.unregister() {
                pr_err!("bench: unregister failed: {:?}\n", e);
            }
        }
    }
}

/// The driver's view of a result: 0 or a negative errno.
fn code(r: Result) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The Rust implementation behind the driver's `p`.
///
/// # Safety
///
/// `p` is one of the two `RustBench`es that [`run`] passed to `rmad_bench_run`, which calls the
/// `rmad_bench_rust_*` functions while [`run`] waits, with one state from one thread at a time:
/// its own thread, or the scaling round's thread that posts that state's sends while its own
/// thread waits for it.
unsafe fn state<'a>(p: *mut c_void) -> &'a mut RustBench {
    // SAFETY: The caller guarantees that `p` is a live `RustBench` nothing else uses now.
    unsafe { &mut *p.cast::<RustBench>() }
}

/// Driver operation: registers the agents.
///
/// # Safety
///
/// As [`state`]; `round` is the driver's round, alive until after `rmad_bench_rust_close`.
#[no_mangle]
unsafe extern "C" fn rmad_bench_rust_open(p: *mut c_void, round: *mut c_void, n: u32) -> c_int {
    // SAFETY: As the caller guarantees.
    code(unsafe { state(p) }.open(round, n))
}

/// Driver operation: creates the silent sends, with `timeout_ms`.
///
/// # Safety
///
/// As [`state`].
#[no_mangle]
unsafe extern "C" fn rmad_bench_rust_create(p: *mut c_void, timeout_ms: c_int) -> c_int {
    // SAFETY: As the caller guarantees.
    code(unsafe { state(p) }.create(timeout_ms))
}

/// Waits (at most [`WAIT_SENT_MS`]) until the device has taken `n` sends of `a` in all.
fn wait_sent(a: &Agent, n: u64) -> Result {
    let start = Instant::<Monotonic>::now();
    while a.stats().transmitted < n {
        if start.elapsed().as_millis() > WAIT_SENT_MS {
            return Err(ETIMEDOUT);
        }
        // Not longer: a round of few sends repeats this wait hundreds of times.
        sleep_ms(1);
    }
    Ok(())
}

/// Waits (at most [`WAIT_SENT_MS`]) until `a` has nothing outstanding.
fn wait_idle(a: &Agent) -> Result {
    let start = Instant::<Monotonic>::now();
    while a.outstanding() > 0 {
        if start.elapsed().as_millis() > WAIT_SENT_MS {
            return Err(ETIMEDOUT);
        }
        sleep_ms(5);
    }
    Ok(())
}

/// Waits until the agent on `rxe0` with `hi_tid` (an agent of the C API) has nothing
/// outstanding.
#[no_mangle]
extern "C" fn rmad_bench_rust_wait_idle(hi_tid: u32) -> c_int {
    code(find_agent(hi_tid).and_then(|a| wait_idle(&a)))
}

/// The agent with `hi_tid` on the verbs engine.
fn find_agent(hi_tid: u32) -> Result<Arc<Agent>> {
    verbs::verbs_engine()
        .ok_or(ENODEV)?
        .agents()?
        .into_iter()
        .find(|a| a.hi_tid == hi_tid)
        .ok_or(ENOENT)
}

/// Driver operation: waits until the device has taken the silent sends.
///
/// # Safety
///
/// As [`state`].
#[no_mangle]
unsafe extern "C" fn rmad_bench_rust_wait_sent_p(p: *mut c_void) -> c_int {
    // SAFETY: As the caller guarantees.
    let s = unsafe { state(p) };
    let n = u64::try_from(s.n)
        .ok()
        .and_then(|n| n.checked_add(s.sent_before))
        .unwrap_or(u64::MAX);
    code(s.agent.as_ref().ok_or(EINVAL).and_then(|a| wait_sent(a, n)))
}

/// Waits until the device has taken `n` sends in all of the agent on `rxe0` with `hi_tid` (an
/// agent of the C API).
#[no_mangle]
extern "C" fn rmad_bench_rust_wait_sent(hi_tid: u32, n: u64) -> c_int {
    code(find_agent(hi_tid).and_then(|a| wait_sent(&a, n)))
}

/// How many sends of the agent on `rxe0` with `hi_tid` (an agent of the C API) the device has
/// taken; 0 without such an agent.
#[no_mangle]
extern "C" fn rmad_bench_rust_transmitted(hi_tid: u32) -> u64 {
    find_agent(hi_tid).map_or(0, |a| a.stats().transmitted)
}

/// Driver operation: posts silent send `i`.
///
/// # Safety
///
/// As [`state`].
#[no_mangle]
unsafe extern "C" fn rmad_bench_rust_post(p: *mut c_void, i: u32) -> c_int {
    let Ok(i) = usize::try_from(i) else {
        return EINVAL.to_errno();
    };
    // SAFETY: As the caller guarantees.
    code(unsafe { state(p) }.post(i))
}

/// Driver operation: modifies silent send `i` to `ms` (`ib_modify_mad`).
///
/// # Safety
///
/// As [`state`].
#[no_mangle]
unsafe extern "C" fn rmad_bench_rust_modify(p: *mut c_void, i: u32, ms: c_int) -> c_int {
    let Ok(i) = usize::try_from(i) else {
        return EINVAL.to_errno();
    };
    // SAFETY: As the caller guarantees.
    let s = unsafe { state(p) };
    code(s.handle(i).and_then(|h| h.modify(ms)))
}

/// Driver operation: cancels silent send `i` (`ib_cancel_mad`).
///
/// # Safety
///
/// As [`state`].
#[no_mangle]
unsafe extern "C" fn rmad_bench_rust_cancel(p: *mut c_void, i: u32) -> c_int {
    let Ok(i) = usize::try_from(i) else {
        return EINVAL.to_errno();
    };
    // SAFETY: As the caller guarantees.
    let s = unsafe { state(p) };
    code(s.handle(i).and_then(SendHandle::cancel))
}

/// Driver operation: creates `count` requests (see [`RustBench::reqs`]).
///
/// # Safety
///
/// As [`state`].
#[no_mangle]
unsafe extern "C" fn rmad_bench_rust_reqs(p: *mut c_void, count: u32) -> c_int {
    let Ok(count) = usize::try_from(count) else {
        return EINVAL.to_errno();
    };
    // SAFETY: As the caller guarantees.
    code(unsafe { state(p) }.reqs(count))
}

/// Driver operation: creates a send buffer and drops it.
///
/// # Safety
///
/// As [`state`].
#[no_mangle]
unsafe extern "C" fn rmad_bench_rust_create_free(p: *mut c_void) -> c_int {
    // SAFETY: As the caller guarantees.
    code(unsafe { state(p) }.create_free())
}

/// Driver operation: starts a transaction (see [`RustBench::txn`]).
///
/// # Safety
///
/// As [`state`].
#[no_mangle]
unsafe extern "C" fn rmad_bench_rust_txn(p: *mut c_void) -> c_int {
    // SAFETY: As the caller guarantees.
    code(unsafe { state(p) }.txn())
}

/// Driver operation: posts request `j`.
///
/// # Safety
///
/// As [`state`].
#[no_mangle]
unsafe extern "C" fn rmad_bench_rust_post_req(p: *mut c_void, j: u32) -> c_int {
    let Ok(j) = usize::try_from(j) else {
        return EINVAL.to_errno();
    };
    // SAFETY: As the caller guarantees.
    code(unsafe { state(p) }.post_req(j))
}

/// Driver operation: creates and posts a marker.
///
/// # Safety
///
/// As [`state`].
#[no_mangle]
unsafe extern "C" fn rmad_bench_rust_post_marker(p: *mut c_void) -> c_int {
    // SAFETY: As the caller guarantees.
    code(unsafe { state(p) }.post_marker())
}

/// Driver operation: creates and posts the gate's send.
///
/// # Safety
///
/// As [`state`].
#[no_mangle]
unsafe extern "C" fn rmad_bench_rust_post_gate(p: *mut c_void) -> c_int {
    // SAFETY: As the caller guarantees.
    code(unsafe { state(p) }.post_gate())
}

/// Driver operation: cancels the gate's send.
///
/// # Safety
///
/// As [`state`].
#[no_mangle]
unsafe extern "C" fn rmad_bench_rust_cancel_gate(p: *mut c_void) -> c_int {
    // SAFETY: As the caller guarantees.
    code(unsafe { state(p) }.cancel_gate())
}

/// Driver operation: drops the buffers not posted and unregisters the agents, which flush
/// what is outstanding.
///
/// # Safety
///
/// As [`state`].
#[no_mangle]
unsafe extern "C" fn rmad_bench_rust_unregister(p: *mut c_void) {
    // SAFETY: As the caller guarantees.
    unsafe { state(p) }.unregister();
}

/// Driver operation: cancels what is outstanding, waits for it, unregisters and frees.
///
/// # Safety
///
/// As [`state`].
#[no_mangle]
unsafe extern "C" fn rmad_bench_rust_close(p: *mut c_void) {
    // SAFETY: As the caller guarantees.
    unsafe { state(p) }.close();
}

/// Driver operation: `p` creates its silent sends on `owner`'s agent from now on.
///
/// # Safety
///
/// As [`state`], for both `p` and `owner`, which are two different states.
#[no_mangle]
unsafe extern "C" fn rmad_bench_rust_share(p: *mut c_void, owner: *mut c_void) {
    // SAFETY: As the caller guarantees; `owner` is only read.
    let agent = unsafe { state(owner) }.agent.clone();
    // SAFETY: As the caller guarantees.
    unsafe { state(p) }.sends_on = agent;
}

/// Driver operation: times the holds of every agent's lock from now on (`on`), or not.
#[no_mangle]
extern "C" fn rmad_bench_rust_hold_timing(on: bool) {
    hold_timing(on);
}

// Indexes of what [`rmad_bench_rust_holds_take`] writes (`BENCH_HOLDS_*` of `bench.h`).
/// The number of holds.
const HOLDS_COUNT: usize = 0;
/// The bucket bound under which half of them ended.
const HOLDS_P50: usize = 1;
/// The bucket bound under which 99 % of them ended.
const HOLDS_P99: usize = 2;
/// The bucket bound under which 99.9 % of them ended.
const HOLDS_P999: usize = 3;
/// The longest.
const HOLDS_MAX: usize = 4;
/// How many lasted more than 100 µs.
const HOLDS_OVER_100US: usize = 5;
/// How many values [`rmad_bench_rust_holds_take`] writes.
const HOLDS: usize = 6;

/// The upper bound, in ns, of the bucket of `h` where the share `num / den` of its `count`
/// holds was reached (bucket 0 ends at 1 µs, bucket `k` at 2^k µs); 0 without holds.
fn hold_quantile(h: &[i64; HOLD_BUCKETS], count: i64, num: i64, den: i64) -> i64 {
    // The rank of the hold that reaches the share, rounded up: at least 1.
    let rank = count
        .checked_mul(num)
        .and_then(|x| x.checked_add(den - 1))
        .and_then(|x| x.checked_div(den))
        .unwrap_or(count)
        .max(1);
    let mut seen = 0i64;
    for (k, v) in h.iter().enumerate() {
        seen = seen.saturating_add(*v);
        if seen >= rank {
            return 1000i64
                .checked_shl(u32::try_from(k).unwrap_or(u32::MAX))
                .unwrap_or(i64::MAX);
        }
    }
    0
}

/// Driver operation: the distribution of the timed holds since the last call, written to
/// `out` unless it is null (`HOLDS` values, see `bench.h`), and reset.
///
/// # Safety
///
/// `out` is null or points to `HOLDS` writable `s64`s.
#[no_mangle]
unsafe extern "C" fn rmad_bench_rust_holds_take(out: *mut i64) {
    let (h, over) = hold_histogram_take();
    let max = irqoff_max_ns_take();
    if out.is_null() {
        return;
    }
    let count = h.iter().fold(0i64, |a, v| a.saturating_add(*v));
    let mut v = [0i64; HOLDS];
    v[HOLDS_COUNT] = count;
    v[HOLDS_P50] = hold_quantile(&h, count, 1, 2);
    v[HOLDS_P99] = hold_quantile(&h, count, 99, 100);
    v[HOLDS_P999] = hold_quantile(&h, count, 999, 1000);
    v[HOLDS_MAX] = max;
    v[HOLDS_OVER_100US] = over;
    // SAFETY: As the caller guarantees, `out` points to `HOLDS` writable values.
    unsafe { core::ptr::copy_nonoverlapping(v.as_ptr(), out, HOLDS) };
}

/// Runs the benchmark for `n` outstanding sends, `reps` repetitions, with at most `sample`
/// timed modifies, cancels and matched responses per pass, each figure timing at least
/// `min_ops` operations at small `n`, and the scaling rounds with `scale` sends each unless 0;
/// with `insn`, the timed windows are marked for an instruction count (`bench/insn.h`).
pub(crate) fn run(n: u32, reps: u32, sample: u32, min_ops: u32, scale: u32, insn: bool) -> Result {
    let mut b = KBox::new(RustBench::new(), GFP_KERNEL)?;
    let mut b2 = KBox::new(RustBench::new(), GFP_KERNEL)?;
    let p = core::ptr::from_mut::<RustBench>(&mut b).cast::<c_void>();
    let p2 = core::ptr::from_mut::<RustBench>(&mut b2).cast::<c_void>();
    // SAFETY: `p` and `p2` are two `RustBench`es that stay alive and unused here until the
    // call returns; the driver uses each from one thread at a time (see [`state`]).
    let r = unsafe { rmad_bench_run(n, reps, sample, RTT_SAMPLE, min_ops, scale, insn, p, p2) };
    // The second may have its sends on the first's agent: it closes first.
    b2.close();
    b.close();
    kernel::error::to_result(r)
}

/// Runs the goodput row for the retry policy named `policy` (`c`, `rmad`, `rmad-backoff`) for
/// `secs` seconds as repetition `rep`; its figures go to the console.
pub(crate) fn goodput(policy: &str, secs: u32, rep: u32) -> Result {
    let policy = match policy {
        "c" => 0,
        "rmad" => 1,
        "rmad-backoff" => 2,
        _ => return Err(EINVAL),
    };
    let port = crate::verbs::find_port(c"rxe0", 1).ok_or(ENODEV)?;
    let ret = port.with_device(|dev| {
        // SAFETY: `with_device` holds a registration reference on `dev` across the call; the
        // driver unregisters every agent it registered on it before it returns.
        unsafe { rmad_bench_goodput(dev, policy, secs, rep) }
    });
    kernel::error::to_result(ret.ok_or(ENODEV)?)
}
