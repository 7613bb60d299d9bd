// SPDX-License-Identifier: GPL-2.0

//! Suite `rmad_capi`, what rmad's watch of module unloads waits for: an agent of the going
//! module that another thread is unregistering (until its handler has returned), and nothing
//! of any other module (a handler that blocks elsewhere never holds up an unrelated unload).
//!
//! The agent under test is a C client's responder on port 1 of `lb0` whose receive handler
//! blocks until the case opens its gate; `module_going` is called with a made-up module
//! address, as [`super::unregister`] does.

use super::*;

// `assert!` and `assert_eq!` that fail the running KUnit case instead of panicking, like those
// the suite module defines for its own cases.
#[allow(unused_macros)]
macro_rules! assert {
    ($c:expr $(,)?) => {{
        kernel::kunit_assert!("rmad_capi", c"src/testing/suites/capi/unload.rs", 0, $c);
    }};
}
#[allow(unused_macros)]
macro_rules! assert_eq {
    ($l:expr, $r:expr $(,)?) => {{
        kernel::kunit_assert_eq!("rmad_capi", c"src/testing/suites/capi/unload.rs", 0, $l, $r);
    }};
}

/// The class the blocking responder serves.
const CLASS: u8 = wire::IB_MGMT_CLASS_DEVICE_MGMT;

/// How long the cases wait for a call that must return at once, or must not return yet.
const SETTLE_MS: i64 = 2000;

/// [`blocking_recv`] was entered, and has returned.
static ENTERED: Atomic<bool> = Atomic::new(false);
static RETURNED: Atomic<bool> = Atomic::new(false);

/// Opens [`blocking_recv`]'s gate.
static GATE: Atomic<bool> = Atomic::new(false);

/// A receive handler that blocks until [`GATE`] opens (at most [`crate::testing::WAIT_MS`]).
///
/// # Safety
///
/// Any arguments: they are not used.
unsafe extern "C" fn blocking_recv(_agent: *mut c_void, _buf: *mut c_void, _wc: *const RmadRecvWc) {
    ENTERED.store(true, Release);
    let start = Instant::<Monotonic>::now();
    while !GATE.load(Acquire) && start.elapsed().as_millis() < crate::testing::WAIT_MS {
        crate::testing::sleep_ms(1);
    }
    RETURNED.store(true, Release);
}

/// The send handler of the blocking responder (it sends nothing).
///
/// # Safety
///
/// Any arguments: they are not used.
unsafe extern "C" fn quiet_send(_agent: *mut c_void, _wc: *mut RmadSendWc) {}

/// A responder for GETs of [`CLASS`] on port 1 of `lb0`, whose receive handler is
/// [`blocking_recv`], and a request to it from a sender on port 2, which the responder is
/// inside when this returns (its gate closed); returns the responder and the sender.
fn responder_blocked_in_recv() -> Result<(*mut c_void, Arc<crate::engine::agent::Agent>)> {
    ENTERED.store(false, Relaxed);
    RETURNED.store(false, Relaxed);
    GATE.store(false, Relaxed);
    let reg = RmadRegReq {
        mgmt_class: CLASS,
        mgmt_class_version: 1,
        oui: [0; 3],
        method_mask: [1 << wire::IB_MGMT_METHOD_GET, 0],
    };
    // Any address that is not NULL: the handlers do not read it, and `rmad_agent_context`
    // gives NULL once the handle is stale.
    let context = core::ptr::from_ref(&GATE).cast_mut().cast::<c_void>();
    // SAFETY: The name is NUL-terminated and `reg` valid; the handlers match the C prototypes
    // and do not use the context.
    let a = unsafe {
        rmad_register_agent(
            lb0::NAME.as_char_ptr(),
            1,
            1,
            &reg,
            0,
            Some(quiet_send),
            Some(blocking_recv),
            context,
            0,
        )
    };
    if is_err(a) {
        return Err(Error::from_errno(ptr_errno(a)));
    }
    let (engine, transport) = devices::find(lb0::NAME, 2).ok_or(ENODEV)?;
    let rec = Recorder::new(Behaviour::default())?;
    let sender = register_gsi(&engine, &transport, 2, &rec, None)?;
    // Timeout 0: the request completes once the fabric took it.
    let sent = request(&sender, CLASS, 1, 1, 0, 0).and_then(post).is_ok();
    if !sent || !crate::testing::wait_for(|| ENTERED.load(Acquire)) {
        GATE.store(true, Release);
        let _ = sender.unregister();
        let _ = rmad_unregister_agent(a);
        return Err(ETIMEDOUT);
    }
    Ok((a, sender))
}

/// A thread's end: set once it returned, and the value it returned.
type Ended = (Arc<Atomic<bool>>, Arc<Atomic<i32>>);

/// Runs `f` in a thread of the system's queue; the returned flag is set once it returned, and
/// the value it returned (as an `i32`) stored in the second.
fn in_thread(f: impl FnOnce() -> i32 + Send + 'static) -> Result<Ended> {
    let done = Arc::new(Atomic::<bool>::new(false), GFP_KERNEL)?;
    let value = Arc::new(Atomic::<i32>::new(i32::MIN), GFP_KERNEL)?;
    let (d, v) = (done.clone(), value.clone());
    crate::sys::workqueue::system_dfl()
        .try_spawn(GFP_KERNEL, move || {
            v.store(f(), Relaxed);
            d.store(true, Release);
        })
        .map_err(|_| ENOMEM)?;
    Ok((done, value))
}

/// Whether `flag` is set within `ms` milliseconds.
fn set_within(flag: &Atomic<bool>, ms: i64) -> bool {
    let start = Instant::<Monotonic>::now();
    while start.elapsed().as_millis() < ms {
        if flag.load(Acquire) {
            return true;
        }
        crate::testing::sleep_ms(1);
    }
    flag.load(Acquire)
}

pub(super) fn unrelated_unload_waits_for_no_blocked_handler() -> Result {
    // Every module that unloads passes through rmad's notifier, a failed insmod too. Agent A's
    // receive handler blocks and A's asynchronous unregistration (asked for from another
    // thread) waits for it in rmad's queue: the unload of a module that has nothing
    // registered returns at once, while the handler still blocks. Before, the notifier always
    // flushed the queue of asynchronous unregistrations, and so waited for that handler.
    const UNRELATED: usize = 0x3000;
    let (a, sender) = responder_blocked_in_recv()?;
    let handle = num(a);
    // SAFETY: No release function; `handle` is checked by rmad.
    let (asked, asked_r) = in_thread(move || unsafe {
        rmad_unregister_agent_async(
            to_handle(handle),
            None,
            core::ptr::null_mut(),
            core::ptr::null_mut(),
        )
    })?;
    let asked_returned = set_within(&asked, SETTLE_MS);
    // The unregistration is queued, and waits for the handler.
    crate::testing::sleep_ms(50);
    let (going, ended) =
        in_thread(|| i32::try_from(module_going(|addr| addr == UNRELATED)).unwrap_or(i32::MAX))?;
    let going_returned = set_within(&going, SETTLE_MS);
    let still_blocked = !RETURNED.load(Acquire);
    GATE.store(true, Release);
    let handler_returned = set_within(&RETURNED, crate::testing::WAIT_MS);
    let going_done = set_within(&going, crate::testing::WAIT_MS);
    let gone = crate::testing::wait_for(|| rmad_agent_context(a).is_null());
    let unreg = sender.unregister().is_ok();
    let (asked_r, ended) = (asked_r.load(Relaxed), ended.load(Relaxed));
    // A failed assertion ends the case without its destructors: nothing is left to them.
    drop((sender, asked, going));
    assert!(asked_returned);
    assert_eq!(asked_r, 0);
    assert!(going_returned);
    assert!(still_blocked);
    assert_eq!(ended, 0);
    assert!(handler_returned && going_done && gone);
    assert!(unreg);
    Ok(())
}

pub(super) fn going_module_waits_for_an_unregistration_in_progress() -> Result {
    // The notifier must not return while an agent with code in the going module has a handler
    // running. Thread T1 unregisters A (whose handlers are "in" GOING) while A's receive
    // handler blocks, and so waits for it; thread T2 then handles GOING's unload: it returns
    // only after the handler has. Before, T2 passed over A (claimed by T1) and returned at once.
    const GOING: usize = 0x4000;
    let (a, sender) = responder_blocked_in_recv()?;
    let owned = set_code(a, GOING).is_ok();
    let handle = num(a);
    let (t1, t1_r) = in_thread(move || rmad_unregister_agent(to_handle(handle)))?;
    // T2 starts once T1 has claimed A (and waits for its handler).
    let claimed = crate::testing::wait_for(|| closing(a).unwrap_or(false));
    let (t2, ended) = in_thread(|| {
        // What T2 found when it returned: whether the handler had returned.
        let n = module_going(|addr| addr == GOING);
        let handler_done = RETURNED.load(Acquire);
        i32::try_from(n).unwrap_or(i32::MAX) | if handler_done { 1 << 16 } else { 0 }
    })?;
    let t2_early = set_within(&t2, SETTLE_MS);
    let t1_early = t1.load(Acquire);
    GATE.store(true, Release);
    let t1_done = set_within(&t1, crate::testing::WAIT_MS);
    let t2_done = set_within(&t2, crate::testing::WAIT_MS);
    let unreg = sender.unregister().is_ok();
    let (t1_r, t2_value) = (t1_r.load(Relaxed), ended.load(Relaxed));
    let gone = rmad_agent_context(a).is_null();
    // A failed assertion ends the case without its destructors: nothing is left to them.
    drop((sender, t1, t2));
    assert!(owned && claimed);
    assert!(!t1_early);
    assert!(!t2_early);
    assert!(t1_done && t2_done);
    assert_eq!(t1_r, 0);
    // T2 ended nothing itself (T1 did), and returned after the handler.
    assert_eq!(t2_value, 1 << 16);
    assert!(gone);
    assert!(unreg);
    Ok(())
}
