// SPDX-License-Identifier: GPL-2.0

//! Client modules that unload: no agent outlives the module its handlers are in.
//!
//! A client module unregisters its agents in its exit, or has them unregistered
//! asynchronously with its module pinned. Two cases escape both: an asynchronous
//! unregistration asked for while the module is already going (it cannot be pinned any more,
//! so its exit may return first), and an agent the module's exit did not unregister (a
//! handler that took the agent away from where the exit looks for it, or a plain leak). Left
//! alone, the next MAD or completion of such an agent calls freed module text.
//!
//! So rmad watches module unloads (a module notifier, `src/capi/exports.c`): once a module's
//! exit has returned, and before its memory is freed, rmad unregisters every agent whose
//! handlers are in that module and that nobody is unregistering, without calling those
//! handlers again, and waits for the unregistrations of such agents that other threads are
//! making (an asynchronous one until its release call, which may be in that module, has
//! returned). It waits for nothing else: every module that goes passes here, a failed
//! `insmod` too, and one must not wait for another's handlers.

use super::tables;
use core::ffi::c_void;
use kernel::{
    ffi::c_int,
    prelude::*,
    time::{
        delay::fsleep,
        Delta, //
    },
};

/// How long [`module_going`] sleeps before it looks again at an agent that another thread is
/// unregistering.
const CLOSING_POLL_MS: i64 = 2;

/// Polls in about 10 s: a wait that long is logged (a handler that never returns holds up the
/// unload for good, and the polling task is never reported as hung).
const LONG_WAIT_POLLS: u32 = 5000;

extern "C" {
    /// Starts rmad's module notifier (`src/capi/exports.c`).
    fn rmad_capi_watch_modules() -> c_int;
    /// Stops it; returns once no notification is being handled.
    fn rmad_capi_unwatch_modules();
    /// Whether `addr` is in the memory of module `module` (`within_module`).
    fn rmad_capi_within_module(addr: usize, module: *const c_void) -> bool;
}

/// Starts watching module unloads (once, at load, after the tables are made).
pub(super) fn watch() -> Result {
    // SAFETY: Called once, paired with `unwatch` at unload.
    kernel::error::to_result(unsafe { rmad_capi_watch_modules() })
}

/// Stops watching module unloads (at unload, before the tables go).
pub(super) fn unwatch() {
    // SAFETY: `watch` succeeded at load (else the module did not load).
    unsafe { rmad_capi_unwatch_modules() };
}

/// Module `module` is going: its exit has returned (or its init failed) and its memory is not
/// freed yet. Called by the module notifier; returns how many agents it had left registered.
///
/// # Safety
///
/// `module` must be a module whose memory stays for the call (the notifier's).
#[no_mangle]
pub(crate) unsafe extern "C" fn rmad_capi_module_going(module: *const c_void) -> c_int {
    let ended = module_going(|addr| {
        // SAFETY: The caller's promise; `addr` is only compared with the module's bounds.
        unsafe { rmad_capi_within_module(addr, module) }
    });
    c_int::try_from(ended).unwrap_or(c_int::MAX)
}

/// Ends every agent with code at an address where `going` holds (the memory of a module that
/// unloads: a handler, or the release function of an asynchronous unregistration) and that
/// nobody unregisters, without calling its handlers again; returns how many it ended.
///
/// It returns only once no such agent is left: an agent that another thread is unregistering
/// (`rmad_unregister_agent`, whose handler calls it waits for; an asynchronous unregistration
/// queued, or still about to be; a claim about to be given back after `EDEADLK`) is waited
/// for, release call included, since its handlers and its release may still run that code.
/// Agents of other modules are neither ended nor waited for: the unload of an unrelated module
/// never waits for a handler that blocks. Process context.
pub(crate) fn module_going(going: impl Fn(usize) -> bool) -> usize {
    let Ok(t) = tables() else {
        return 0;
    };
    let mut ended = 0usize;
    let mut polls = 0u32;
    loop {
        // One pass: claims the first agent of the module that nobody unregisters, and notes
        // whether another thread is unregistering one.
        let mut others_closing = false;
        let claimed = t.agents.find_map(|h, c| {
            if !c.has_code_where(&going) {
                return None;
            }
            if c.closing {
                others_closing = true;
                return None;
            }
            c.closing = true;
            Some((h, c.agent.clone(), c.handlers.clone()))
        });
        match claimed {
            Some((h, agent, handlers)) => {
                handlers.mute();
                // A handler call in progress returns first (its code is still there); the
                // buffers the module still owns are inert from now on and freed at rmad's
                // unload. An agent unregistered already (`EINVAL`) goes too: it must not hold
                // up every later unload. Only a call from one of the agent's own handlers
                // (`EDEADLK`), which an unloading thread never runs, gives the claim back and
                // waits for nothing more: it would wait for itself.
                if agent.unregister_with(false) == Err(EDEADLK) {
                    let _ = t.agents.with(h, |c| c.closing = false);
                    return ended;
                }
                drop(t.agents.remove(h, |_| Ok(())));
                ended = ended.saturating_add(1);
            }
            // Another thread's unregistration empties the slot when it is done (or gives the
            // claim back, and the next pass takes it): a rare wait, at a module's unload, so
            // the slots are looked at again after a short sleep rather than signalled.
            None if others_closing => {
                polls = polls.saturating_add(1);
                if polls % LONG_WAIT_POLLS == 0 {
                    pr_warn!(
                        "unload of a module waits for an unregistration of one of its agents ({} s)\n",
                        polls / LONG_WAIT_POLLS * 10
                    );
                }
                fsleep(Delta::from_millis(CLOSING_POLL_MS));
            }
            None => return ended,
        }
    }
}

/// Test flavour: whether the agent with handle `agent` is being unregistered (claimed).
#[cfg(rmad_test)]
pub(crate) fn closing(agent: *mut c_void) -> Result<bool> {
    tables()?.agents.with(super::from_ptr(agent), |c| c.closing)
}

/// Test flavour: makes the agent with handle `agent` look as if its handlers were at `addr`,
/// so that a suite can end it through [`module_going`] without unloading a module.
#[cfg(rmad_test)]
pub(crate) fn set_code(agent: *mut c_void, addr: usize) -> Result {
    tables()?
        .agents
        .with(super::from_ptr(agent), |c| c.code = [addr, addr])
}
