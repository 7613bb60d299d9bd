// SPDX-License-Identifier: GPL-2.0

//! The stress driver (test build only): kernel threads that hammer the C API with
//! exactly-once accounting, started from debugfs so that the VM scenario can remove a device
//! while they run.
//!
//! `echo "DEVICE SECONDS [failslab]" > /sys/kernel/debug/rmad/stress` runs [`THREADS`] worker
//! threads on both vCPUs for SECONDS on DEVICE (`rxe0`, or `lb0`: a loopback fabric that the
//! test build offers to the C API). Each worker registers an agent and, until the time is up,
//! creates, posts, modifies, cancels and frees buffers in random order; it also cancels other
//! workers' buffers through handles that may be stale, and its send handler re-posts or frees
//! some buffers itself. Another thread registers and unregisters agents all the while. With
//! `failslab`, the workers' allocations fail as failslab is configured (its task filter): each
//! failure must be a clean error.
//!
//! `echo "handles DEVICE N" > …` runs N create/free cycles with a stale handle kept and
//! checked in each.
//!
//! `cat /sys/kernel/debug/rmad/stress` prints the last run's report as a KTAP document: every
//! successful post got exactly one send-handler call (lost = 0, duplicated = 0), no call
//! through a stale handle acted on an object (wrong-object calls = 0), every error was one the
//! API documents; with the counts by status.

use crate::{
    capi::{
        rmad_agent_hi_tid,
        rmad_cancel_mad,
        rmad_cancel_post,
        rmad_create_send_mad,
        rmad_free_send_mad,
        rmad_modify_mad,
        rmad_port_gid,
        rmad_post_send,
        rmad_register_agent,
        rmad_send_buf_context,
        rmad_send_buf_mad,
        rmad_send_buf_set,
        rmad_unregister_agent,
        RmadAh,
        RmadRecvWc,
        RmadSendWc, //
    },
    testing::{
        capi_client::{
            churn,
            create_mad,
            is_err,
            lid_ah,
            num,
            ptr_errno,
            write_request_header, //
        },
        control::Writer,
        sleep_ms, //
    },
};
use core::{
    ffi::c_void,
    fmt::Write, //
};
use kernel::{
    ffi::{
        c_char,
        c_int, //
    },
    new_condvar, new_mutex,
    prelude::*,
    str::CString,
    sync::{
        atomic::{
            Acquire,
            Atomic,
            Relaxed,
            Release, //
        },
        Arc,
        CondVar,
        Mutex, //
    },
    time::{
        msecs_to_jiffies,
        Instant,
        Monotonic, //
    },
};

/// Worker threads per run.
const THREADS: usize = 4;
/// Buffers each worker juggles.
const SLOTS: usize = 12;
/// Status codes (`enum ib_wc_status`) the report counts.
const WC_SUCCESS: i32 = 0;
const WC_FLUSH: i32 = 5;
const WC_TIMEOUT: i32 = 20;

extern "C" {
    fn rmad_test_kthread_run(
        f: unsafe extern "C" fn(*mut c_void) -> c_int,
        data: *mut c_void,
        name: *const c_char,
    ) -> *mut c_void;
    fn rmad_test_make_it_fail(on: c_int) -> c_int;
}

/// A small pseudo-random generator (xorshift).
struct Rng(u32);

impl Rng {
    fn next(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.0 = x;
        x
    }

    /// True with probability `pct` percent.
    fn pct(&mut self, pct: u32) -> bool {
        self.next() % 100 < pct
    }
}

/// A number as a handle.
fn ptr(h: u64) -> *mut c_void {
    core::ptr::without_provenance_mut(usize::try_from(h).unwrap_or(0))
}

/// Where a buffer of a worker is.
const EMPTY: u32 = 0;
/// The worker owns it.
const OWNED: u32 = 1;
/// It is posted (or being posted): the engine or the handler owns it.
const POSTED: u32 = 2;
/// The handler freed it; the worker folds its counts and empties the slot.
const FREED: u32 = 3;

/// A buffer of a worker, as its handle's context.
struct BufRec {
    state: Atomic<u32>,
    /// The buffer's handle (valid while not `EMPTY`/`FREED`).
    handle: Atomic<u64>,
    /// Other workers cancel through this handle only when `dead` is false when they look.
    dead: Atomic<bool>,
    posts: Atomic<u64>,
    calls: Atomic<u64>,
    /// Post id of the last completion (ids grow with every post of a buffer).
    last_done: Atomic<u64>,
    dups: Atomic<u64>,
}

impl BufRec {
    const fn new() -> Self {
        Self {
            state: Atomic::new(EMPTY),
            handle: Atomic::new(0),
            dead: Atomic::new(true),
            posts: Atomic::new(0),
            calls: Atomic::new(0),
            last_done: Atomic::new(0),
            dups: Atomic::new(0),
        }
    }
}

/// Counters of a run, shared by its threads.
struct Counts {
    posts: Atomic<u64>,
    calls: Atomic<u64>,
    lost: Atomic<u64>,
    dups: Atomic<u64>,
    wrong: Atomic<u64>,
    unclean: Atomic<u64>,
    by_status: [Atomic<u64>; 4],
    post_errors: Atomic<u64>,
    create_errors: Atomic<u64>,
    cross_cancels: Atomic<u64>,
    stale_checks: Atomic<u64>,
    registrations: Atomic<u64>,
    reg_errors: Atomic<u64>,
}

impl Counts {
    const fn new() -> Self {
        Self {
            posts: Atomic::new(0),
            calls: Atomic::new(0),
            lost: Atomic::new(0),
            dups: Atomic::new(0),
            wrong: Atomic::new(0),
            unclean: Atomic::new(0),
            by_status: [const { Atomic::new(0) }; 4],
            post_errors: Atomic::new(0),
            create_errors: Atomic::new(0),
            cross_cancels: Atomic::new(0),
            stale_checks: Atomic::new(0),
            registrations: Atomic::new(0),
            reg_errors: Atomic::new(0),
        }
    }

    fn add(c: &Atomic<u64>, n: u64) {
        c.fetch_add(n, Relaxed);
    }

    fn get(c: &Atomic<u64>) -> u64 {
        c.load(Relaxed)
    }
}

/// Whether `e` is an error the C API documents for the call that returned it, in a run
/// where devices go away and allocations fail.
fn clean(e: i32) -> bool {
    [ENOMEM, ENODEV, ESHUTDOWN, EBUSY, ENOSPC, EINVAL]
        .iter()
        .any(|c| c.to_errno() == e)
}

/// One run, shared by its threads.
#[pin_data]
struct Run {
    dev: CString,
    ah: RmadAh,
    failslab: bool,
    deadline: Instant<Monotonic>,
    stop: Atomic<bool>,
    counts: Counts,
    /// Every worker's buffers, for cross-worker cancels through possibly stale handles.
    recs: KVec<KBox<[BufRec; SLOTS]>>,
    running: Atomic<u32>,
    #[pin]
    lock: Mutex<()>,
    #[pin]
    done: CondVar,
}

/// What an agent's handlers need (the agent's context).
struct WorkerCtx {
    run: Arc<Run>,
    rng: Atomic<u32>,
    /// The handler frees every buffer (agents of the churn thread).
    free_all: bool,
}

impl Run {
    fn over(&self) -> bool {
        self.stop.load(Acquire) || self.deadline.elapsed().as_millis() >= 0
    }

    /// A thread of the run ended.
    fn finished(&self) {
        let _g = self.lock.lock();
        self.running.fetch_sub(1, Release);
        self.done.notify_all();
    }

    /// Registers a GSI agent on the run's device with the stress handlers.
    fn register(&self, ctx: &WorkerCtx) -> Option<*mut c_void> {
        // SAFETY: The name is NUL-terminated; the handlers match the prototypes; the context
        // outlives the agent (the thread unregisters before it drops the context).
        let a = unsafe {
            rmad_register_agent(
                self.dev.as_char_ptr(),
                1,
                1,
                core::ptr::null(),
                0,
                Some(stress_send),
                Some(stress_recv),
                core::ptr::from_ref(ctx).cast_mut().cast(),
                0,
            )
        };
        Counts::add(&self.counts.registrations, 1);
        if is_err(a) {
            Counts::add(&self.counts.reg_errors, 1);
            if !clean(ptr_errno(a)) {
                Counts::add(&self.counts.unclean, 1);
            }
            return None;
        }
        Some(a)
    }

    /// Creates a request buffer for `agent` with `rec` as its context.
    fn create(&self, agent: *mut c_void, rec: &BufRec, rng: &mut Rng) -> Option<*mut c_void> {
        let gfp = if rng.pct(20) {
            kernel::bindings::GFP_ATOMIC
        } else {
            kernel::bindings::GFP_KERNEL
        };
        let b = create_mad(agent, gfp);
        if is_err(b) {
            Counts::add(&self.counts.create_errors, 1);
            if !clean(ptr_errno(b)) {
                Counts::add(&self.counts.unclean, 1);
            }
            return None;
        }
        // GET is answered (ib_core on rxe0, the responder on lb0); SEND never is.
        let method = if rng.pct(50) { 0x01 } else { 0x03 };
        if write_request_header(agent, b, method, rng.next()).is_err() {
            Counts::add(&self.counts.wrong, 1);
            return None;
        }
        rec.handle.store(num(b), Relaxed);
        rec.dead.store(false, Release);
        self.set(b, rec, rng);
        Some(b)
    }

    /// Sets destination, a random timeout and `rec` as context.
    fn set(&self, b: *mut c_void, rec: &BufRec, rng: &mut Rng) {
        let timeout = match rng.next() % 4 {
            0 => 0,
            1 => 20,
            _ => 60_000,
        };
        let ctx = core::ptr::from_ref(rec).cast_mut().cast();
        // SAFETY: `ah` is valid; the context outlives the buffer (the run keeps the records).
        let r = unsafe { rmad_send_buf_set(b, &self.ah, timeout, 1, ctx) };
        if r != 0 {
            Counts::add(&self.counts.wrong, 1);
        }
    }

    /// Posts `b` (whose record is `rec`, state `POSTED` already); returns whether it is out.
    fn post(&self, b: *mut c_void, rec: &BufRec) -> bool {
        let mut id = 0u64;
        // Counted first: the send's handler may run before the post returns.
        rec.posts.fetch_add(1, Relaxed);
        // SAFETY: `id` is valid for a write.
        let r = unsafe { rmad_post_send(b, &mut id) };
        if r == 0 {
            Counts::add(&self.counts.posts, 1);
            true
        } else {
            rec.posts.fetch_sub(1, Relaxed);
            Counts::add(&self.counts.post_errors, 1);
            if !clean(r) {
                Counts::add(&self.counts.unclean, 1);
            }
            false
        }
    }

    /// Folds a freed buffer's counts into the run's: posts and handler calls must agree.
    fn fold(&self, rec: &BufRec) {
        let posts = rec.posts.xchg(0, Relaxed);
        let calls = rec.calls.xchg(0, Relaxed);
        Counts::add(&self.counts.lost, posts.saturating_sub(calls));
        Counts::add(&self.counts.dups, calls.saturating_sub(posts));
        Counts::add(&self.counts.dups, rec.dups.xchg(0, Relaxed));
        rec.last_done.store(0, Relaxed);
    }

    /// Every call through a handle that is known to be freed must fail.
    fn check_stale(&self, h: u64) {
        let b = ptr(h);
        let mut id = 0u64;
        // SAFETY: `id` is valid for a write; the handle is never dereferenced by rmad.
        let acted = unsafe {
            [
                rmad_cancel_mad(b) != EINVAL.to_errno(),
                rmad_modify_mad(b, 5) != EINVAL.to_errno(),
                !rmad_send_buf_mad(b).is_null(),
                rmad_free_send_mad(b) != EINVAL.to_errno(),
                rmad_post_send(b, &mut id) != EINVAL.to_errno(),
            ]
        };
        Counts::add(&self.counts.stale_checks, 1);
        Counts::add(
            &self.counts.wrong,
            u64::try_from(acted.iter().filter(|x| **x).count()).unwrap_or(0),
        );
    }
}

/// The send handler of stress agents.
///
/// # Safety
///
/// `wc` must point to a completion valid for the call, whose context is a live `WorkerCtx`
/// (rmad calls it so for the agents the workers register).
unsafe extern "C" fn stress_send(_agent: *mut c_void, wc: *mut RmadSendWc) {
    // SAFETY: rmad passes a valid completion for the duration of the call.
    let wc = unsafe { &*wc };
    // SAFETY: The context is the thread's `WorkerCtx`, alive until its agent is unregistered.
    let ctx = unsafe { &*wc.context.cast::<WorkerCtx>() };
    let run = &ctx.run;
    let b = wc.send_buf;
    let recp = rmad_send_buf_context(b).cast::<BufRec>();
    // The completion carries the same context (include/rmad.h): counted wrong if not.
    if recp.is_null() || wc.buf_context != recp.cast::<c_void>() {
        Counts::add(&run.counts.wrong, 1);
        return;
    }
    // SAFETY: The context of a stress buffer is its record, which the run keeps alive.
    let rec = unsafe { &*recp };
    rec.calls.fetch_add(1, Relaxed);
    Counts::add(&run.counts.calls, 1);
    if wc.post_id <= rec.last_done.load(Relaxed) {
        rec.dups.fetch_add(1, Relaxed);
    }
    rec.last_done.store(wc.post_id, Relaxed);
    let k = match wc.status {
        WC_SUCCESS => 0,
        WC_FLUSH => 1,
        WC_TIMEOUT => 2,
        _ => 3,
    };
    if let Some(c) = run.counts.by_status.get(k) {
        Counts::add(c, 1);
    }
    let mut rng = Rng(ctx.rng.fetch_add(0x9e37_79b9, Relaxed) | 1);
    if !ctx.free_all && !run.over() && rng.pct(20) {
        // Re-post from the handler.
        run.set(b, rec, &mut rng);
        if run.post(b, rec) {
            return;
        }
    }
    if ctx.free_all || run.over() || rng.pct(15) {
        // Free from the handler.
        rec.dead.store(true, Release);
        let h = num(b);
        if rmad_free_send_mad(b) != 0 {
            Counts::add(&run.counts.wrong, 1);
        }
        run.check_stale(h);
        rec.state.store(FREED, Release);
        return;
    }
    rec.state.store(OWNED, Release);
}

/// The receive handler of stress agents: responses only; nothing to do.
///
/// # Safety
///
/// None beyond a C receive handler's: it reads nothing.
unsafe extern "C" fn stress_recv(_agent: *mut c_void, _buf: *mut c_void, _wc: *const RmadRecvWc) {}

/// A worker thread's start.
struct Start {
    run: Arc<Run>,
    index: usize,
}

/// A worker thread: juggles its buffers until the run is over.
///
/// # Safety
///
/// `data` must be a `KBox<Start>` leaked for this thread (as `spawn` does).
unsafe extern "C" fn worker_thread(data: *mut c_void) -> c_int {
    // SAFETY: `data` is a `KBox<Start>` leaked by `spawn` for this thread.
    let start = unsafe { KBox::from_raw(data.cast::<Start>()) };
    let run = start.run.clone();
    // `run` refused `failslab` on a kernel without fault injection, so these cannot fail.
    if run.failslab {
        // SAFETY: Plain call on the current task.
        let _ = unsafe { rmad_test_make_it_fail(1) };
    }
    worker(&run, start.index);
    if run.failslab {
        // SAFETY: As above.
        let _ = unsafe { rmad_test_make_it_fail(0) };
    }
    drop(start);
    run.finished();
    0
}

/// The body of worker `index`.
fn worker(run: &Arc<Run>, index: usize) {
    let Ok(ctx) = KBox::new(
        WorkerCtx {
            run: run.clone(),
            rng: Atomic::new(0x0123_4567u32.wrapping_mul(u32::try_from(index).unwrap_or(0) + 1)),
            free_all: false,
        },
        GFP_KERNEL,
    ) else {
        Counts::add(&run.counts.reg_errors, 1);
        return;
    };
    let Some(recs) = run.recs.get(index) else {
        return;
    };
    let mut rng = Rng(0x9e37_79b9 ^ u32::try_from(index).unwrap_or(0).wrapping_mul(7919) | 1);
    let mut agent = None;
    let mut last_dead = 0u64;
    while !run.over() {
        crate::sys::sched::cond_resched();
        let Some(a) = agent.or_else(|| run.register(&ctx)) else {
            sleep_ms(10);
            continue;
        };
        agent = Some(a);
        if last_dead != 0 {
            run.check_stale(last_dead);
        }
        if rng.pct(5) {
            let mut gid = [0u8; 16];
            // SAFETY: The name is NUL-terminated; `gid` has 16 bytes.
            let r = unsafe { rmad_port_gid(run.dev.as_char_ptr(), 1, 1, gid.as_mut_ptr()) };
            if r != 0 && !clean(r) {
                Counts::add(&run.counts.unclean, 1);
            }
        }
        if rng.pct(10) {
            cross_cancel(run, &mut rng);
        }
        let Some(rec) = recs.get(usize::try_from(rng.next()).unwrap_or(0) % SLOTS) else {
            continue;
        };
        match rec.state.load(Acquire) {
            EMPTY => {
                if run.create(a, rec, &mut rng).is_some() {
                    rec.state.store(OWNED, Release);
                }
            }
            OWNED => {
                let b = ptr(rec.handle.load(Relaxed));
                if rng.pct(85) {
                    rec.state.store(POSTED, Release);
                    if !run.post(b, rec) {
                        rec.state.store(OWNED, Release);
                    }
                } else {
                    rec.dead.store(true, Release);
                    if rmad_free_send_mad(b) != 0 {
                        Counts::add(&run.counts.wrong, 1);
                    }
                    run.fold(rec);
                    last_dead = num(b);
                    rec.state.store(EMPTY, Release);
                }
            }
            POSTED => {
                let b = ptr(rec.handle.load(Relaxed));
                let r = match rng.next() % 3 {
                    0 => rmad_cancel_mad(b),
                    1 => rmad_modify_mad(b, i32::try_from(rng.next() % 50).unwrap_or(0)),
                    _ => rmad_cancel_post(b, u64::from(rng.next() % 4)),
                };
                // Outstanding or already decided: 0 or EINVAL, nothing else.
                if r != 0 && r != EINVAL.to_errno() {
                    Counts::add(&run.counts.unclean, 1);
                }
                if rng.pct(30) {
                    sleep_ms(1);
                }
            }
            FREED => {
                run.fold(rec);
                rec.state.store(EMPTY, Release);
            }
            _ => {}
        }
    }
    // Wind down. Once the run is over every handler frees its buffer, but a handler that
    // started before may still hand one back: free what comes back and cancel what is out,
    // until every buffer is gone; then unregistration has nothing left to wait for.
    let start = Instant::<Monotonic>::now();
    loop {
        let mut left = 0;
        for rec in recs.iter() {
            match rec.state.load(Acquire) {
                OWNED => {
                    rec.dead.store(true, Release);
                    let b = ptr(rec.handle.load(Relaxed));
                    if rmad_free_send_mad(b) != 0 {
                        Counts::add(&run.counts.wrong, 1);
                    }
                    run.check_stale(num(b));
                    run.fold(rec);
                    rec.state.store(EMPTY, Release);
                }
                POSTED => {
                    left += 1;
                    let _ = rmad_cancel_mad(ptr(rec.handle.load(Relaxed)));
                }
                FREED => {
                    run.fold(rec);
                    rec.state.store(EMPTY, Release);
                }
                _ => {}
            }
        }
        if left == 0 || start.elapsed().as_millis() > 90_000 {
            break;
        }
        sleep_ms(5);
    }
    if let Some(a) = agent {
        if rmad_unregister_agent(a) != 0 {
            Counts::add(&run.counts.wrong, 1);
        }
        // Every handler has returned: the records are final.
        if !is_err(rmad_create_send_mad(
            a,
            1,
            0,
            0,
            24,
            232,
            kernel::bindings::GFP_KERNEL,
            1,
        )) {
            Counts::add(&run.counts.wrong, 1);
        }
    }
    for rec in recs.iter() {
        let s = rec.state.load(Acquire);
        if s == POSTED {
            // Posted but never completed: the post is lost.
            Counts::add(&run.counts.lost, 1);
        }
        run.fold(rec);
        rec.state.store(EMPTY, Release);
    }
    drop(ctx);
}

/// Cancels a random buffer of a random worker through a handle that may be stale: if its
/// owner had freed it before we looked, the cancel must fail.
fn cross_cancel(run: &Run, rng: &mut Rng) {
    let w = usize::try_from(rng.next()).unwrap_or(0) % THREADS;
    let s = usize::try_from(rng.next()).unwrap_or(0) % SLOTS;
    let Some(rec) = run.recs.get(w).and_then(|r| r.get(s)) else {
        return;
    };
    let h = rec.handle.load(Acquire);
    let dead = rec.dead.load(Acquire);
    if h == 0 || h != rec.handle.load(Acquire) {
        return;
    }
    Counts::add(&run.counts.cross_cancels, 1);
    let r = rmad_cancel_mad(ptr(h));
    if dead && r != EINVAL.to_errno() {
        Counts::add(&run.counts.wrong, 1);
    }
}

/// The agent-churn thread: registers, posts and unregisters agents until the run is over.
///
/// # Safety
///
/// As for [`worker_thread`].
unsafe extern "C" fn churn_thread(data: *mut c_void) -> c_int {
    // SAFETY: `data` is a `KBox<Start>` leaked by `spawn` for this thread.
    let start = unsafe { KBox::from_raw(data.cast::<Start>()) };
    let run = start.run.clone();
    drop(start);
    let rec = BufRec::new();
    let mut rng = Rng(0xdead_beef);
    if let Ok(ctx) = KBox::new(
        WorkerCtx {
            run: run.clone(),
            rng: Atomic::new(77),
            free_all: true,
        },
        GFP_KERNEL,
    ) {
        while !run.over() {
            let Some(a) = run.register(&ctx) else {
                sleep_ms(10);
                continue;
            };
            if let Some(b) = run.create(a, &rec, &mut rng) {
                rec.state.store(POSTED, Release);
                if !run.post(b, &rec) {
                    rec.dead.store(true, Release);
                    let _ = rmad_free_send_mad(b);
                    rec.state.store(EMPTY, Release);
                }
            }
            // Unregistration flushes the send, whose handler frees it (`free_all`).
            let r = rmad_unregister_agent(a);
            if r != 0 {
                Counts::add(&run.counts.wrong, 1);
            }
            run.fold(&rec);
            rec.state.store(EMPTY, Release);
            // The old agent handle must never work again.
            if rmad_agent_hi_tid(a) != 0 || rmad_unregister_agent(a) != EINVAL.to_errno() {
                Counts::add(&run.counts.wrong, 1);
            }
            crate::sys::sched::cond_resched();
        }
        drop(ctx);
    }
    run.finished();
    0
}

/// Starts a kernel thread running `f` for `run`.
fn spawn(run: &Arc<Run>, index: usize, f: unsafe extern "C" fn(*mut c_void) -> c_int) -> Result {
    let start = KBox::into_raw(KBox::new(
        Start {
            run: run.clone(),
            index,
        },
        GFP_KERNEL,
    )?);
    run.running.fetch_add(1, Release);
    // SAFETY: `f` takes ownership of `start`; the name is NUL-terminated.
    let t = unsafe { rmad_test_kthread_run(f, start.cast(), c"rmad_stress".as_char_ptr()) };
    if is_err(t) {
        run.running.fetch_sub(1, Release);
        // SAFETY: The thread was not created, so `start` is still ours.
        drop(unsafe { KBox::from_raw(start) });
        return Err(ENOMEM);
    }
    Ok(())
}

/// The destination of requests on `dev`.
fn ah_for(dev: &CStr) -> Result<RmadAh> {
    let mut ah = lid_ah(2);
    if dev.to_bytes() != b"lb0" {
        ah.dlid = 0;
        ah.has_grh = 1;
        ah.sgid_index = 1;
        // SAFETY: The name is NUL-terminated; `dgid` has 16 bytes.
        let r = unsafe { rmad_port_gid(dev.as_char_ptr(), 1, 1, ah.dgid.as_mut_ptr()) };
        kernel::error::to_result(r)?;
    }
    Ok(ah)
}

/// One stress run; writes its KTAP report to `out`.
pub(crate) fn run(name: &CStr, secs: u32, failslab: bool, out: &mut KVec<u8>) -> Result {
    if failslab {
        // Asks whether this kernel has failslab's per-task flag (`EOPNOTSUPP` if not), and
        // leaves the caller's flag off.
        // SAFETY: Plain call on the current task.
        kernel::error::to_result(unsafe { rmad_test_make_it_fail(0) })?;
    }
    let ah = ah_for(name)?;
    let mut recs = KVec::with_capacity(THREADS, GFP_KERNEL)?;
    for _ in 0..THREADS {
        recs.push(
            KBox::new([const { BufRec::new() }; SLOTS], GFP_KERNEL)?,
            GFP_KERNEL,
        )?;
    }
    let ms = i64::from(secs).saturating_mul(1000);
    let dev = CString::try_from(name)?;
    let run = Arc::pin_init(
        pin_init!(Run {
            dev,
            ah,
            failslab,
            deadline: Instant::<Monotonic>::now() + kernel::time::Delta::from_millis(ms),
            stop: Atomic::new(false),
            counts: Counts::new(),
            recs,
            running: Atomic::new(0),
            lock <- new_mutex!(()),
            done <- new_condvar!("stress::done"),
        }),
        GFP_KERNEL,
    )?;
    let mut started = 0;
    for i in 0..THREADS {
        if spawn(&run, i, worker_thread).is_ok() {
            started += 1;
        }
    }
    let churn = spawn(&run, THREADS, churn_thread).is_ok();
    // Wait for every thread, with a generous bound past the deadline.
    let mut g = run.lock.lock();
    let mut waited = 0i64;
    while run.running.load(Acquire) != 0 && waited < ms.saturating_add(120_000) {
        let _ = run
            .done
            .wait_interruptible_timeout(&mut g, msecs_to_jiffies(100));
        waited = waited.saturating_add(100);
    }
    drop(g);
    let stuck = run.running.load(Acquire);
    report(name, &run, started, churn, stuck, failslab, out)
}

/// Writes the KTAP report of a run.
fn report(
    dev: &CStr,
    run: &Run,
    started: usize,
    churn: bool,
    stuck: u32,
    failslab: bool,
    out: &mut KVec<u8>,
) -> Result {
    let c = &run.counts;
    let g = Counts::get;
    let name = dev.to_str().unwrap_or("dev");
    let suite = if failslab { "failslab_" } else { "" };
    let st = |i: usize| c.by_status.get(i).map_or(0, g);
    let mut w = Writer(out);
    let _ = write!(w, "KTAP version 1\n1..1\n    KTAP version 1\n");
    let _ = writeln!(w, "    # Subtest: rmad_stress_{suite}{name}");
    let _ = writeln!(
        w,
        "    # threads {} churn {} posts {} handler calls {} success {} flushed {} timed out {} other {} lost {} duplicated {} wrong-object {} unclean errors {}",
        started, churn, g(&c.posts), g(&c.calls), st(0), st(1), st(2), st(3), g(&c.lost),
        g(&c.dups), g(&c.wrong), g(&c.unclean)
    );
    let _ = writeln!(
        w,
        "    # post errors {} create errors {} registrations {} failed {} cross-worker cancels {} stale-handle checks {}",
        g(&c.post_errors), g(&c.create_errors), g(&c.registrations), g(&c.reg_errors),
        g(&c.cross_cancels), g(&c.stale_checks)
    );
    pr_info!(
        "stress {}{}: posts {} calls {} success {} flushed {} timed out {} other {} lost {} dup {} wrong {} unclean {} post errors {} create errors {}\n",
        suite, name, g(&c.posts), g(&c.calls), st(0), st(1), st(2), st(3), g(&c.lost),
        g(&c.dups), g(&c.wrong), g(&c.unclean), g(&c.post_errors), g(&c.create_errors)
    );
    let cases = [
        (
            "threads_ran_and_stopped",
            started == THREADS && churn && stuck == 0,
        ),
        // Sends end every way: answered, cancelled, and (on the loopback fabric, where the
        // device stays) timed out.
        (
            "sends_ended_every_way",
            st(0) > 0 && st(1) > 0 && (st(2) > 0 || dev.to_bytes() != b"lb0"),
        ),
        (
            "each_post_completed_once",
            g(&c.lost) == 0 && g(&c.dups) == 0 && g(&c.posts) == g(&c.calls),
        ),
        (
            "no_wrong_object_calls",
            g(&c.wrong) == 0 && g(&c.stale_checks) > 0,
        ),
        ("errors_are_documented", g(&c.unclean) == 0),
        (
            "failslab_failed_some_calls",
            !failslab || g(&c.create_errors) + g(&c.reg_errors) + g(&c.post_errors) > 0,
        ),
    ];
    let _ = writeln!(w, "    1..{}", cases.len());
    let mut all = true;
    for (i, (n, ok)) in cases.iter().enumerate() {
        all &= *ok;
        let _ = writeln!(w, "    {}ok {} {}", if *ok { "" } else { "not " }, i + 1, n);
    }
    let _ = writeln!(
        w,
        "{}ok 1 rmad_stress_{suite}{name}",
        if all { "" } else { "not " }
    );
    Ok(())
}

/// N create/free cycles on `dev` with a stale handle checked in each; KTAP report to `out`.
pub(crate) fn handles(name: &CStr, n: usize, out: &mut KVec<u8>) -> Result {
    let ah = ah_for(name)?;
    let dev = CString::try_from(name)?;
    let run = Arc::pin_init(
        pin_init!(Run {
            dev,
            ah,
            failslab: false,
            deadline: Instant::<Monotonic>::now() + kernel::time::Delta::from_secs(3600),
            stop: Atomic::new(false),
            counts: Counts::new(),
            recs: KVec::new(),
            running: Atomic::new(0),
            lock <- new_mutex!(()),
            done <- new_condvar!("stress::done"),
        }),
        GFP_KERNEL,
    )?;
    let ctx = KBox::new(
        WorkerCtx {
            run: run.clone(),
            rng: Atomic::new(1),
            free_all: true,
        },
        GFP_KERNEL,
    )?;
    let a = run.register(&ctx).ok_or(ENODEV)?;
    let stale = create_mad(a, kernel::bindings::GFP_KERNEL);
    let freed_ok = !is_err(stale) && rmad_free_send_mad(stale) == 0;
    let c = churn(a, stale, n);
    let (aliases, wrong, failed, ms) =
        (c.aliases, c.wrong + usize::from(!freed_ok), c.failed, c.ms);
    let unreg = rmad_unregister_agent(a);
    drop(ctx);
    let name = name.to_str().unwrap_or("dev");
    pr_info!(
        "stress handles {}: {} create/free cycles in {} ms: {} aliases of the stale handle, {} wrong results, {} failed creates\n",
        name, n, ms, aliases, wrong, failed
    );
    let mut w = Writer(out);
    let _ = write!(w, "KTAP version 1\n1..1\n    KTAP version 1\n");
    let _ = writeln!(w, "    # Subtest: rmad_stress_handles_{name}");
    let _ = writeln!(
        w,
        "    # {n} cycles in {ms} ms: aliases {aliases}, wrong {wrong}, failed creates {failed}"
    );
    let ok1 = aliases == 0 && wrong == 0;
    let ok2 = failed == 0 && unreg == 0;
    let _ = writeln!(w, "    1..2");
    let _ = writeln!(
        w,
        "    {}ok 1 stale_handle_refused_every_cycle",
        if ok1 { "" } else { "not " }
    );
    let _ = writeln!(
        w,
        "    {}ok 2 every_cycle_completed",
        if ok2 { "" } else { "not " }
    );
    let _ = writeln!(
        w,
        "{}ok 1 rmad_stress_handles_{name}",
        if ok1 && ok2 { "" } else { "not " }
    );
    Ok(())
}
