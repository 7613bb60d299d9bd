// SPDX-License-Identifier: GPL-2.0

//! Suite `rmad_capi`, unregistration from where `rmad_unregister_agent` cannot wait
//! (`rmad_unregister_agent_async`), and the agents a client module leaves behind at its
//! unload.

use super::*;

// `assert!` and `assert_eq!` that fail the running KUnit case instead of panicking, like those
// the suite module defines for its own cases.
#[allow(unused_macros)]
macro_rules! assert {
    ($c:expr $(,)?) => {{
        kernel::kunit_assert!("rmad_capi", c"src/testing/suites/capi/unregister.rs", 0, $c);
    }};
}
#[allow(unused_macros)]
macro_rules! assert_eq {
    ($l:expr, $r:expr $(,)?) => {{
        kernel::kunit_assert_eq!(
            "rmad_capi",
            c"src/testing/suites/capi/unregister.rs",
            0,
            $l,
            $r
        );
    }};
}

/// What [`async_release`] saw: that it ran, the sends the probe had seen by then, the task
/// it ran in, and this module's reference count while it ran.
static ASYNC_RELEASED: Atomic<bool> = Atomic::new(false);

static ASYNC_SENDS_AT_RELEASE: Atomic<usize> = Atomic::new(usize::MAX);

static ASYNC_RELEASE_TASK: Atomic<usize> = Atomic::new(0);

static ASYNC_REFCOUNT_AT_RELEASE: Atomic<i32> = Atomic::new(-1);

/// The release function of [`unregister_async_pins_its_owner_until_release`].
///
/// # Safety
///
/// `arg` must be an `Arc<CRecorder>` from `Arc::into_raw`, given up to this call.
unsafe extern "C" fn async_release(arg: *mut c_void) {
    // SAFETY: `arg` is the reference the test leaked for this call, taken back once.
    let probe = unsafe { Arc::from_raw(arg.cast::<CRecorder>()) };
    let sends = probe.sends().map_or(usize::MAX, |s| s.len());
    let owner = <crate::LocalModule as kernel::ModuleMetadata>::THIS_MODULE.as_ptr();
    // SAFETY: `owner` is this module, live: it runs this function.
    let refs = unsafe { kernel::bindings::module_refcount(owner) };
    ASYNC_REFCOUNT_AT_RELEASE.store(refs, Relaxed);
    ASYNC_RELEASE_TASK.store(kernel::task::Task::current_raw() as usize, Relaxed);
    ASYNC_SENDS_AT_RELEASE.store(sends, Relaxed);
    ASYNC_RELEASED.store(true, Release);
}

pub(super) fn unregister_async_pins_its_owner_until_release() -> Result {
    // rmad.h: rmad_unregister_agent_async is atomic-safe and calls no handler; the agent
    // is refused by both unregistrations afterwards; it is unregistered in rmad's thread
    // (its outstanding send flushed), then `release` runs, with `owner` pinned until
    // then. Here `owner` is rmad itself and the call is made with interrupts off.
    //
    // "Calls no handler" is checked by task, not by time: rmad's thread may run on the
    // other CPU while this one still holds the lock, so the flush and the release may
    // come before the lock is dropped; neither may run in this task.
    let own = rxe_ah()?;
    let probe = CRecorder::new(
        CBehaviour {
            free: true,
            ..CBehaviour::default()
        },
        own,
    )?;
    let a = c_agent(&probe)?;
    let b = c_request(a, &own, 1, SEND, 60_000)?;
    // SAFETY: Plain call.
    let posted = unsafe { rmad_post_send_mad(b, core::ptr::null_mut()) } == 0;
    let owner = <crate::LocalModule as kernel::ModuleMetadata>::THIS_MODULE.as_ptr();
    // SAFETY: `owner` is this module, live.
    let before = unsafe { kernel::bindings::module_refcount(owner) };
    let me = kernel::task::Task::current_raw() as usize;
    ASYNC_RELEASED.store(false, Relaxed);
    ASYNC_RELEASE_TASK.store(0, Relaxed);
    ASYNC_REFCOUNT_AT_RELEASE.store(-1, Relaxed);
    let arg = Arc::into_raw(probe.clone()).cast_mut().cast::<c_void>();
    let lock = KBox::pin_init(kernel::new_spinlock_irq!(()), GFP_KERNEL)?;
    let r = {
        let _g = lock.lock();
        // SAFETY: `async_release` takes `arg` once; `owner` contains it (it is rmad).
        unsafe {
            crate::capi::rmad_unregister_agent_async(a, Some(async_release), arg, owner.cast())
        }
    };
    let again = rmad_unregister_agent(a);
    // SAFETY: As above; nothing is queued when this fails.
    let async_again = unsafe {
        crate::capi::rmad_unregister_agent_async(a, None, core::ptr::null_mut(), owner.cast())
    };
    let mut released = false;
    let mut unpinned = false;
    for _ in 0..crate::testing::WAIT_MS / 10 {
        released = ASYNC_RELEASED.load(Acquire);
        // SAFETY: As above.
        unpinned = unsafe { kernel::bindings::module_refcount(owner) } == before;
        if released && unpinned {
            break;
        }
        crate::testing::sleep_ms(10);
    }
    if r != 0 {
        // Not queued: `arg` is still ours.
        // SAFETY: `arg` came from `Arc::into_raw` above and was not taken.
        drop(unsafe { Arc::from_raw(arg.cast::<CRecorder>()) });
    }
    let sends = probe.sends()?;
    let tasks = probe.send_tasks()?;
    assert!(posted);
    assert_eq!(r, 0);
    assert_eq!(again, EINVAL.to_errno());
    assert_eq!(async_again, EINVAL.to_errno());
    assert!(released && unpinned);
    // While `release` ran, `owner` was pinned once more than before the call.
    assert_eq!(
        i64::from(ASYNC_REFCOUNT_AT_RELEASE.load(Relaxed)),
        i64::from(before) + 1
    );
    // Neither the flush nor the release ran in the caller's task.
    assert_eq!(tasks.len(), 1);
    assert!(tasks.iter().all(|&t| t != me));
    assert!(ASYNC_RELEASE_TASK.load(Relaxed) != me);
    // The flush reached the send handler before the release.
    assert_eq!(ASYNC_SENDS_AT_RELEASE.load(Relaxed), 1);
    assert_eq!(sends.first().map(|s| s.2), Some(WC_FLUSH));
    Ok(())
}

pub(super) fn unregister_async_allocates_nothing() -> Result {
    // rmad.h: rmad_unregister_agent_async allocates nothing (what it needs was made at
    // registration), so it cannot fail for lack of memory, inside a handler or anywhere else.
    // Counted exactly: the slab allocations of this task during the call.
    let own = rxe_ah()?;
    let probe = CRecorder::new(CBehaviour::default(), own)?;
    let a = c_agent(&probe)?;
    let (r, counted) = allocs::count(|| {
        // SAFETY: No release function; `a` is validated by rmad.
        unsafe {
            rmad_unregister_agent_async(a, None, core::ptr::null_mut(), core::ptr::null_mut())
        }
    })?;
    // The agent goes in rmad's thread: its handle is stale once that has run.
    let mut gone = false;
    for _ in 0..crate::testing::WAIT_MS / 10 {
        gone = rmad_agent_context(a).is_null();
        if gone {
            break;
        }
        crate::testing::sleep_ms(10);
    }
    if !gone {
        // Its handlers may still run: the probe, their context, must stay.
        core::mem::forget(probe.clone());
    }
    pr_info!("capi: rmad_unregister_agent_async: {:?}\n", counted);
    assert_eq!(r, 0);
    assert_eq!(counted.allocs, 0);
    assert!(gone);
    Ok(())
}

/// Whether [`going_release`] ran.
static GOING_RELEASED: Atomic<bool> = Atomic::new(false);

/// The release function of [`module_unload_ends_what_its_module_left`]'s asynchronous
/// unregistration.
///
/// # Safety
///
/// Any argument: it is not used.
unsafe extern "C" fn going_release(_arg: *mut c_void) {
    GOING_RELEASED.store(true, Release);
}

pub(super) fn module_unload_ends_what_its_module_left() -> Result {
    // rmad.h: whatever a client module leaves registered, rmad unregisters when that module
    // unloads (after its exit, before its memory goes), without calling the agent's handlers
    // again, and an asynchronous unregistration asked for before has released its client by
    // then. Three agents pretend to have their handlers elsewhere (addresses that are only
    // compared, the going module's memory being the one address `GOING`): one in the going
    // module with a send outstanding, one in it whose asynchronous unregistration was asked
    // for, one in another module.
    const GOING: usize = 0x1000;
    const OTHER: usize = 0x2000;
    let own = rxe_ah()?;
    let probe = CRecorder::new(CBehaviour::default(), own)?;
    let (left, asked, other) = (c_agent(&probe)?, c_agent(&probe)?, c_agent(&probe)?);
    let owners = [(left, GOING), (asked, GOING), (other, OTHER)]
        .into_iter()
        .all(|(a, m)| set_code(a, m).is_ok());
    let b = c_request(left, &own, 1, SEND, 60_000)?;
    // SAFETY: Plain call.
    let posted = unsafe { rmad_post_send_mad(b, core::ptr::null_mut()) };
    GOING_RELEASED.store(false, Relaxed);
    // SAFETY: `going_release` ignores its argument; no module is pinned (NULL owner).
    let asked_r = unsafe {
        rmad_unregister_agent_async(
            asked,
            Some(going_release),
            core::ptr::null_mut(),
            core::ptr::null_mut(),
        )
    };
    let ended = module_going(|addr| addr == GOING);
    let released = GOING_RELEASED.load(Acquire);
    let sends = probe.sends()?;
    let gone = (
        rmad_agent_context(left).is_null(),
        rmad_agent_context(asked).is_null(),
    );
    let other_live = rmad_agent_context(other) == probe.ctx();
    // The buffer the going module held is inert, and still frees.
    // SAFETY: Plain call.
    let post_again = unsafe { rmad_post_send_mad(b, core::ptr::null_mut()) };
    let freed = rmad_free_send_mad(b);
    let unreg = (rmad_unregister_agent(left), rmad_unregister_agent(other));
    assert!(owners);
    assert_eq!((posted, asked_r), (0, 0));
    // Only the agent nobody was unregistering: the other one was its asynchronous
    // unregistration's, which had run when the unload went on.
    assert_eq!(ended, 1);
    assert!(released);
    // The flush of the outstanding send called no handler of the gone module.
    assert_eq!(sends.len(), 0);
    assert_eq!(gone, (true, true));
    assert!(other_live);
    assert_eq!(post_again, ESHUTDOWN.to_errno());
    assert_eq!(freed, 0);
    assert_eq!(unreg, (EINVAL.to_errno(), 0));
    Ok(())
}
