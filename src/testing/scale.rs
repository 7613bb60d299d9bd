// SPDX-License-Identifier: GPL-2.0

//! Many sends at once (test flavour): `make test` writes `scale N` to debugfs `rmad/stress` and
//! reads back the KTAP suite `rmad_scale`.
//!
//! On a fresh loopback fabric, through the Rust API: N requests wait for responses that never
//! come and are then made to expire together; 2 000 are cancelled at once; 2 000 are flushed
//! by unregistration. Every send must reach its handler exactly once with the right status,
//! and no hold of the agent's lock may process more than [`BATCH`] sends (counted by the agent,
//! see `agent/hold.rs`). This runs from a debugfs write rather than as a KUnit case because it
//! takes longer than the hung-task detector lets `insmod` wait for a case under emulation.
//! Times are reported as figures, never asserted.

use crate::{
    engine::{
        agent::{
            hold::{
                batch_max_take,
                hold_timing,
                irqoff_max_ns_take,
                BATCH, //
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
        transport::RecvMad, //
    },
    mad::{
        state::WcStatus,
        wire, //
    },
    testing::{
        block_queue,
        control::Writer,
        post,
        register_gsi,
        request,
        sleep_ms,
        Env, //
    },
};
use core::fmt::Write;
use kernel::{
    alloc::KVVec,
    new_mutex,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc, Mutex,
    },
    time::{
        Instant,
        Monotonic, //
    },
};

/// Sends cancelled at once, and flushed by unregistration.
const BURST: usize = 2_000;
/// How long any phase may take before the case fails (software emulation is slow).
const PHASE_MS: i64 = 600_000;

/// Counts the handler calls of every send, by tag.
struct Tally {
    /// Handler calls per tag.
    calls: KVVec<Atomic<i32>>,
    /// Handler calls in all.
    total: Atomic<i64>,
    /// Calls with `RESP_TIMEOUT_ERR`.
    timed_out: Atomic<i64>,
    /// Calls with `WR_FLUSH_ERR`.
    flushed: Atomic<i64>,
    /// Calls with any other status, or for a tag out of range.
    other: Atomic<i64>,
}

impl Tally {
    fn new(n: usize) -> Result<Arc<Self>> {
        let mut calls = KVVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            calls.push(Atomic::new(0), GFP_KERNEL)?;
        }
        Ok(Arc::new(
            Self {
                calls,
                total: Atomic::new(0),
                timed_out: Atomic::new(0),
                flushed: Atomic::new(0),
                other: Atomic::new(0),
            },
            GFP_KERNEL,
        )?)
    }

    /// Tags called more than once, and tags never called.
    fn dups_and_missing(&self) -> (usize, usize) {
        let mut dup = 0usize;
        let mut missing = 0usize;
        for c in self.calls.iter() {
            match c.load(Relaxed) {
                0 => missing = missing.saturating_add(1),
                1 => {}
                _ => dup = dup.saturating_add(1),
            }
        }
        (dup, missing)
    }
}

impl SendHandler for Tally {
    fn send_done(&self, _agent: &Arc<Agent>, buf: SendBuf, wc: SendCompletion) {
        match self.calls.get(buf.context()[0]) {
            Some(c) => {
                c.fetch_add(1, Relaxed);
            }
            None => {
                self.other.fetch_add(1, Relaxed);
            }
        }
        let counter = match wc.status {
            WcStatus::RespTimeoutErr => &self.timed_out,
            WcStatus::WrFlushErr => &self.flushed,
            _ => &self.other,
        };
        counter.fetch_add(1, Relaxed);
        self.total.fetch_add(1, Relaxed);
        drop(buf);
    }
}

impl RecvHandler for Tally {
    fn recv(&self, _agent: &Arc<Agent>, _send: Option<&SendHandle>, mad: RecvMad) {
        drop(mad);
    }
}

/// Waits (sleeping) until `done` or [`PHASE_MS`]; whether `done` became true.
fn wait_for(mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::<Monotonic>::now();
    while !done() {
        if start.elapsed().as_millis() > PHASE_MS {
            return false;
        }
        sleep_ms(20);
    }
    true
}

/// A LID that no port of the loopback fabric has: the requests go nowhere.
const NOWHERE: u16 = 0x55;

/// What [`waiting`] made: the agent, its tally, the handles of its sends, and the milliseconds
/// the creation and the posts took.
type Waiting = (Arc<Agent>, Arc<Tally>, KVVec<SendHandle>, i64, i64);

/// An agent on port 1 of `env` with `n` requests waiting for responses that never come, posted
/// with a long timeout; also the milliseconds the creation and the posts took.
fn waiting(env: &Env, n: usize) -> Result<Waiting> {
    let tally = Tally::new(n)?;
    let a = register_gsi(&env.engine, &env.transport, 1, &tally, None)?;
    let start = Instant::<Monotonic>::now();
    // Allocation dominates under the test kernel's sanitizers: both vCPUs create, half each.
    let half = n / 2;
    let other: Arc<Mutex<Option<Result<KVVec<SendBuf>>>>> =
        Arc::pin_init(new_mutex!(None), GFP_KERNEL)?;
    let (a2, other2) = (a.clone(), other.clone());
    crate::sys::workqueue::system_dfl()
        .try_spawn(GFP_KERNEL, move || {
            let r = create(&a2, half..n);
            *other2.lock() = Some(r);
        })
        .map_err(|_| ENOMEM)?;
    let mine = create(&a, 0..half);
    let mut theirs = None;
    wait_for(|| {
        theirs = other.lock().take();
        theirs.is_some()
    });
    let mut bufs = mine?;
    for buf in theirs.ok_or(ETIMEDOUT)??.drain_all() {
        bufs.push(buf, GFP_KERNEL)?;
    }
    let created_ms = start.elapsed().as_millis();
    let start = Instant::<Monotonic>::now();
    let mut handles = KVVec::with_capacity(n, GFP_KERNEL)?;
    for buf in bufs.drain_all() {
        handles.push(post(buf)?, GFP_KERNEL)?;
    }
    let posted_ms = start.elapsed().as_millis();
    let all = u64::try_from(n).unwrap_or(u64::MAX);
    if !wait_for(|| a.stats().transmitted >= all && env.fabric().is_idle()) {
        return Err(ETIMEDOUT);
    }
    Ok((a, tally, handles, created_ms, posted_ms))
}

/// Creates the requests tagged `tags` on `a` (to nowhere, long timeout, no retry).
fn create(a: &Arc<Agent>, tags: core::ops::Range<usize>) -> Result<KVVec<SendBuf>> {
    let mut bufs = KVVec::with_capacity(tags.len(), GFP_KERNEL)?;
    for tag in tags {
        let buf = request(a, wire::IB_MGMT_CLASS_PERF_MGMT, tag, NOWHERE, 600_000, 0)?;
        bufs.push(buf, GFP_KERNEL)?;
    }
    Ok(bufs)
}

/// A fixed permutation step: visiting `i * STRIDE mod n` spreads the order (any n that is
/// not a multiple of the odd prime `STRIDE` gives a permutation).
const STRIDE: usize = 40_503;

/// Runs the suite with `n` simultaneous timeouts; KTAP to `out`. The agents' lock holds are
/// timed meanwhile (the figures it reports).
pub(crate) fn run(n: usize, out: &mut KVec<u8>) -> Result {
    hold_timing(true);
    let r = run_timed(n, out);
    hold_timing(false);
    r
}

/// [`run`], with the holds timed.
fn run_timed(n: usize, out: &mut KVec<u8>) -> Result {
    let mut w = Writer(out);
    let _ = write!(w, "KTAP version 1\n1..1\n    KTAP version 1\n");
    let _ = write!(w, "    # Subtest: rmad_scale\n    1..5\n");
    let mut all_ok = true;
    let mut case = |w: &mut Writer<'_>, i: u32, name: &str, ok: bool| {
        all_ok &= ok;
        let _ = writeln!(w, "    {}ok {i} {name}", if ok { "" } else { "not " });
    };

    // What one outstanding send allocates (the Rust API): its record (in an `Arc`, with the
    // links of the agent's trees), and its body with the inline MAD (suite `rmad_allocs`
    // counts the allocations).
    let _ = writeln!(
        w,
        "    # per send: record {} B + body {} B (2 allocations)",
        core::mem::size_of::<crate::engine::send::SendRecord>().saturating_add(8),
        core::mem::size_of::<crate::engine::send::SendBody>(),
    );

    // 1, 2: n timeouts expiring together.
    let env = Env::new()?;
    let (a, tally, handles, created_ms, posted_ms) = waiting(&env, n)?;
    let _ = batch_max_take();
    let _ = irqoff_max_ns_take();
    // Every send is re-armed to expire 2 s from now: they all expire within the time this
    // loop takes.
    let start = Instant::<Monotonic>::now();
    let mut refused = 0usize;
    for h in handles.iter() {
        if h.modify(2_000).is_err() {
            refused = refused.saturating_add(1);
        }
    }
    let armed_ms = start.elapsed().as_millis();
    let want = i64::try_from(n).unwrap_or(i64::MAX);
    let all = u64::try_from(n).unwrap_or(u64::MAX);
    // When the agent had decided every timeout, then when every handler had run.
    let decided = wait_for(|| a.stats().timed_out >= all);
    let decided_ms = start.elapsed().as_millis().saturating_sub(2_000);
    let delivered = decided && wait_for(|| tally.total.load(Relaxed) >= want);
    let spread_ms = start.elapsed().as_millis().saturating_sub(2_000);
    // Let a duplicate show up if there is one.
    sleep_ms(500);
    let (dup, missing) = tally.dups_and_missing();
    let timeouts_batch = batch_max_take();
    let _ = writeln!(
        w,
        "    # {n} timeouts: created in {created_ms} ms, posted in {posted_ms} ms, re-armed in {armed_ms} ms, all decided {decided_ms} ms and all delivered {spread_ms} ms after the first expiry; {} timed out, {} other, {dup} twice, {missing} never, {refused} refused; longest lock hold {} ns, at most {timeouts_batch} sends per hold",
        tally.timed_out.load(Relaxed),
        tally.other.load(Relaxed) + tally.flushed.load(Relaxed),
        irqoff_max_ns_take()
    );
    case(
        &mut w,
        1,
        "timeouts_delivered_exactly_once",
        delivered
            && refused == 0
            && dup == 0
            && missing == 0
            && tally.timed_out.load(Relaxed) == want
            && tally.total.load(Relaxed) == want,
    );
    // The first expiries come in far more than a batch at once, so full batches are seen.
    case(
        &mut w,
        2,
        "timeout_work_holds_lock_for_one_batch",
        timeouts_batch == i64::from(BATCH),
    );
    drop(handles);
    a.unregister()?;
    drop(env);

    // 3, 4: a burst of cancels, reported by the agent's work in batches.
    let env = Env::new()?;
    let (a, tally, handles, _, _) = waiting(&env, BURST)?;
    // The work cannot run until every cancel is in: the engine's queue is held.
    let gate = block_queue(&env.engine)?;
    let _ = batch_max_take();
    let mut refused = 0usize;
    for i in 0..BURST {
        let j = i.wrapping_mul(STRIDE) % BURST;
        if handles.get(j).is_none_or(|h| h.cancel().is_err()) {
            refused = refused.saturating_add(1);
        }
    }
    gate.open();
    let burst = i64::try_from(BURST).unwrap_or(i64::MAX);
    let delivered = wait_for(|| tally.total.load(Relaxed) >= burst);
    sleep_ms(500);
    let (dup, missing) = tally.dups_and_missing();
    let cancel_batch = batch_max_take();
    let _ = writeln!(
        w,
        "    # {BURST} cancels: {} flushed, {dup} twice, {missing} never, {refused} refused; at most {cancel_batch} sends per hold",
        tally.flushed.load(Relaxed)
    );
    case(
        &mut w,
        3,
        "cancel_burst_delivered_exactly_once",
        delivered
            && refused == 0
            && dup == 0
            && missing == 0
            && tally.flushed.load(Relaxed) == burst,
    );
    case(
        &mut w,
        4,
        "cancel_burst_holds_lock_for_one_batch",
        cancel_batch == i64::from(BATCH),
    );
    drop(handles);
    a.unregister()?;
    drop(env);

    // 5: unregistration flushes everything, a batch at a time.
    let env = Env::new()?;
    let (a, tally, handles, _, _) = waiting(&env, BURST)?;
    drop(handles);
    let _ = batch_max_take();
    let unreg = a.unregister();
    let (dup, missing) = tally.dups_and_missing();
    let unreg_batch = batch_max_take();
    let _ = writeln!(
        w,
        "    # unregister with {BURST} waiting: {:?}, {} flushed, {dup} twice, {missing} never; at most {unreg_batch} sends per hold",
        unreg,
        tally.flushed.load(Relaxed)
    );
    case(
        &mut w,
        5,
        "unregister_flushes_exactly_once_in_batches",
        unreg.is_ok()
            && dup == 0
            && missing == 0
            && tally.flushed.load(Relaxed) == burst
            && unreg_batch == i64::from(BATCH),
    );
    drop(env);

    let _ = writeln!(w, "{}ok 1 rmad_scale", if all_ok { "" } else { "not " });
    Ok(())
}
