// SPDX-License-Identifier: GPL-2.0

//! `rmad_unregister_agent_async`: unregistration from where `rmad_unregister_agent` cannot
//! wait, above all one of the agent's own handlers (where it is `EDEADLK`).
//!
//! The call claims the agent (a second unregistration is refused), pins the module of the
//! client's release function and queues a work item on rmad's own queue. The work item
//! unregisters the agent as `rmad_unregister_agent` does, in rmad's thread, once the handler
//! that asked has returned; then it calls the release function and unpins its module. So the
//! client's code and memory stay until no handler of the agent can run, and a client module
//! can be unloaded only after that: nothing of rmad ever calls into freed module text. The
//! queue is drained before rmad's tables go (`exit`), so the work item's own code (rmad's)
//! outlives it too.

use super::*;
use kernel::{
    impl_has_work, new_work,
    workqueue::{
        Work,
        WorkItem, //
    },
};

/// A client's release function: `void (*)(void *arg)`.
type ReleaseFn = Option<unsafe extern "C" fn(*mut c_void)>;

extern "C" {
    /// `try_module_get(owner)`, for Rust (`src/capi/exports.c`).
    fn rmad_capi_module_get(owner: *mut c_void) -> bool;
    /// `module_put(owner)`.
    fn rmad_capi_module_put(owner: *mut c_void);
}

/// One unregistration that waits for its turn.
///
/// # Invariants
///
/// `owner` is null or a module that this item holds a reference on (taken by
/// `rmad_capi_module_get`), put back once, after `release` returned.
#[pin_data]
struct Pending {
    handle: u64,
    agent: Arc<Agent>,
    wait_buffers: bool,
    release: ReleaseFn,
    arg: usize,
    owner: *mut c_void,
    #[pin]
    work: Work<Pending>,
}

// SAFETY: The module pointer is a reference count the item owns, usable from any thread; the
// release function and its argument are the client's, who promised they may be called from
// rmad's thread (rmad.h).
unsafe impl Send for Pending {}
// SAFETY: Nothing of `Pending` is changed after it is queued.
unsafe impl Sync for Pending {}

impl_has_work! {
    impl HasWork<Self> for Pending { self.work }
}

impl WorkItem for Pending {
    type Pointer = Arc<Pending>;

    fn run(this: Arc<Pending>) {
        // Not inside any handler of the agent: this waits for the one that asked, if it still
        // runs, and for every other.
        if this.agent.unregister_with(this.wait_buffers).is_ok() {
            if let Ok(t) = tables() {
                drop(t.agents.remove(this.handle, |_| Ok(())));
            }
        }
        if let Some(f) = this.release {
            // SAFETY: The client's release function with its argument, once, with no handler
            // of the agent running or to come; its module is pinned (type invariant).
            unsafe { f(core::ptr::with_exposed_provenance_mut(this.arg)) };
        }
        if !this.owner.is_null() {
            // SAFETY: The reference this item holds (type invariant), put back once.
            unsafe { rmad_capi_module_put(this.owner) };
        }
    }
}

/// `rmad_unregister_agent_async`.
///
/// # Safety
///
/// `release` must be NULL or a function that may be called once with `arg` from a workqueue
/// thread; `owner` NULL or the module that contains `release` (live for the call).
#[no_mangle]
pub(crate) unsafe extern "C" fn rmad_unregister_agent_async(
    agent: *mut c_void,
    release: ReleaseFn,
    arg: *mut c_void,
    owner: *mut c_void,
) -> c_int {
    code((|| {
        let t = tables()?;
        let handle = from_ptr(agent);
        let (a, detach) = t.agents.with(handle, |c| {
            if c.closing {
                Err(EINVAL)
            } else {
                Ok((c.agent.clone(), c.detach_buffers))
            }
        })??;
        // SAFETY: `owner` is null or a live module (the caller's promise).
        if !owner.is_null() && !unsafe { rmad_capi_module_get(owner) } {
            // The module is going away: its exit can unregister synchronously.
            return Err(EBUSY);
        }
        let pending = Arc::pin_init(
            pin_init!(Pending {
                handle,
                agent: a,
                wait_buffers: !detach,
                release,
                arg: arg.expose_provenance(),
                owner,
                work <- new_work!("Pending::work"),
            }),
            GFP_ATOMIC,
        );
        let claimed = pending.and_then(|p| {
            t.agents
                .with(handle, |c| {
                    if c.closing {
                        Err(EINVAL)
                    } else {
                        c.closing = true;
                        Ok(())
                    }
                })?
                .map(|()| p)
        });
        match claimed {
            Ok(p) => {
                // INVARIANT: The reference on `owner` goes with the item.
                let _ = t.unregistering.queue().enqueue(p);
                Ok(())
            }
            Err(e) => {
                if !owner.is_null() {
                    // SAFETY: The reference taken above, which no item took over.
                    unsafe { rmad_capi_module_put(owner) };
                }
                Err(e)
            }
        }
    })())
}
