// SPDX-License-Identifier: GPL-2.0

//! Unregistration in the C API: `rmad_unregister_agent`, and `rmad_unregister_agent_async`
//! from where `rmad_unregister_agent` cannot wait, above all one of the agent's own handlers
//! (where it is `EDEADLK`).
//!
//! The asynchronous call claims the agent (a second unregistration is refused), pins the
//! module of the client's release function and queues the agent's work item on rmad's own
//! queue. The work item unregisters the agent as `rmad_unregister_agent` does, in rmad's
//! thread, once the handler that asked has returned; then it calls the release function,
//! unpins its module, and only then empties the agent's slot (the handle goes stale). So the client's code and memory stay until no handler of the agent can
//! run, and a client module can be unloaded only after that: nothing of rmad ever calls into
//! freed module text.
//!
//! The call cannot fail for a valid agent that nobody unregisters yet. The work item was made
//! at registration ([`Pending`]), so the call allocates nothing. A module that cannot be pinned
//! any more is being unloaded (its exit runs or has run): the unregistration is queued all the
//! same, and rmad's watch of module unloads ([`super::unload`]) waits for it, release included,
//! before that module's memory goes. The queue is drained before rmad's tables go (`exit`), so
//! the work item's own code (rmad's) outlives it too.

use super::{
    code,
    from_ptr,
    tables, //
};
use core::ffi::c_void;
use kernel::{
    ffi::c_int,
    impl_has_work, new_work,
    prelude::*,
    sync::Arc,
    workqueue::{
        Work,
        WorkItem, //
    },
};

/// `rmad_unregister_agent`.
#[no_mangle]
pub(crate) extern "C" fn rmad_unregister_agent(agent: *mut c_void) -> c_int {
    code((|| {
        let t = tables()?;
        let h = from_ptr(agent);
        // Claimed for the length of the call, so that an asynchronous unregistration asked
        // meanwhile (by a handler this call waits for) is refused instead of releasing the
        // client while that handler still runs.
        let (a, detach) = t.agents.with(h, |c| {
            if c.closing {
                Err(EINVAL)
            } else {
                c.closing = true;
                Ok((c.agent.clone(), c.detach_buffers))
            }
        })??;
        if let Err(e) = a.unregister_with(!detach) {
            // Nothing was done (from one of its own handlers, `EDEADLK`): the claim goes.
            let _ = t.agents.with(h, |c| c.closing = false);
            return Err(e);
        }
        // The handle goes stale now; the agent is dropped outside the table's lock.
        let left = t.agents.remove(h, |_| Ok(()))?;
        drop(left);
        Ok(())
    })())
}

extern "C" {
    /// `try_module_get(owner)`, for Rust (`src/capi/exports.c`).
    fn rmad_capi_module_get(owner: *mut c_void) -> bool;
    /// `module_put(owner)`.
    fn rmad_capi_module_put(owner: *mut c_void);
}

/// A client's release function: `void (*)(void *arg)`.
type ReleaseFn = Option<unsafe extern "C" fn(*mut c_void)>;

/// What an asynchronous unregistration does once its agent is gone: the client's release
/// call (which the client promised may run in rmad's thread), and the reference on its module
/// that it gives back (from any thread).
///
/// # Invariants
///
/// `pinned` is null or a module that this value holds a reference on (taken by
/// `rmad_capi_module_get`), put back once, by [`ReleaseCall::run`], after `release` returned.
pub(crate) struct ReleaseCall {
    release: ReleaseFn,
    arg: usize,
    pinned: usize,
}

impl ReleaseCall {
    /// Calls the release function, then unpins its module. Only once no handler of the agent
    /// runs or can run.
    fn run(self) {
        if let Some(f) = self.release {
            // SAFETY: The client's release function with its argument, once, with no handler
            // of the agent running or to come; its module is pinned (type invariant), or is
            // being unloaded and waits for this ([`super::unload`]).
            unsafe { f(core::ptr::with_exposed_provenance_mut(self.arg)) };
        }
        if self.pinned != 0 {
            // SAFETY: The reference this value holds (type invariant), put back once.
            unsafe { rmad_capi_module_put(core::ptr::with_exposed_provenance_mut(self.pinned)) };
        }
    }
}

/// The work item of one agent's asynchronous unregistration, made with the agent.
#[pin_data]
pub(crate) struct Pending {
    /// The agent's handle.
    handle: u64,
    #[pin]
    work: Work<Pending>,
}

impl Pending {
    /// The work item for the agent with handle `handle` (process context).
    pub(crate) fn new(handle: u64) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Pending {
                handle,
                work <- new_work!("Pending::work"),
            }),
            GFP_KERNEL,
        )
    }
}

impl_has_work! {
    impl HasWork<Self> for Pending { self.work }
}

impl WorkItem for Pending {
    type Pointer = Arc<Pending>;

    fn run(this: Arc<Pending>) {
        let Ok(t) = tables() else {
            return;
        };
        // The agent's slot stays until the release below has returned: it was claimed
        // (`closing`), so nothing else removes it, and the unload of a module with code in it
        // waits for as long as it is there ([`super::unload`]).
        let Ok((agent, detach, release)) = t.agents.with(this.handle, |c| {
            (c.agent.clone(), c.detach_buffers, c.release.take())
        }) else {
            return;
        };
        // Not inside any handler of the agent: this waits for the one that asked, if it still
        // runs, and for every other. An agent unregistered already (`EINVAL`) is done with
        // too: its slot must go, or the unload of the release's module would wait for it.
        let _ = agent.unregister_with(!detach);
        drop(agent);
        if let Some(r) = release {
            r.run();
        }
        drop(t.agents.remove(this.handle, |_| Ok(())));
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
        // Claimed, with what to do afterwards, under the slot's lock: nothing here allocates
        // or fails once the handle is found.
        let pending = t.agents.with(from_ptr(agent), |c| {
            if c.closing {
                return Err(EINVAL);
            }
            // SAFETY: `owner` is null or a live module (the caller's promise). A module that
            // cannot be pinned is being unloaded: its unload waits for this unregistration.
            let pinned = !owner.is_null() && unsafe { rmad_capi_module_get(owner) };
            c.closing = true;
            c.release_at = release.map_or(0, |f| (f as *const c_void).addr());
            // INVARIANT: The reference taken above goes with the release call.
            c.release = Some(ReleaseCall {
                release,
                arg: arg.expose_provenance(),
                pinned: if pinned { owner.expose_provenance() } else { 0 },
            });
            Ok(c.pending.clone())
        })??;
        // Never queued before: only the claim above queues it, once.
        let _ = t.unregistering.queue().enqueue(pending);
        Ok(())
    })())
}
