// SPDX-License-Identifier: GPL-2.0

//! rmad_rust_drop_client: a Rust client of the production rmad.ko that drops its agents where
//! a careless driver would, through the safe binding (`include/rmad_binding.rs`).
//!
//! At load:
//! 1. A responder for GETs of vendor class 0x0a on rxe0 drops its own agent from its receive
//!    handler, at the first request. The agent must be unregistered once that handler returns
//!    and its client dropped (in rmad's thread): a second GET of that class is then answered
//!    by ib_core itself (status 0x000C, nobody serves the class), not by the responder's
//!    handler, which would be a call into this module after it is gone. With `failslab=1`
//!    the drop runs with every slab allocation of the handler's task failing (failslab's
//!    per-task flag; the caller arms failslab first), and the report requires that an
//!    allocation there did fail: the asynchronous unregistration must not need memory.
//! 2. An agent dropped while a send buffer of it is still held (`struct { agent, spare }`,
//!    dropped in field order) must not wait for that buffer: the drop returns, the buffer is
//!    inert (posting it fails with `ESHUTDOWN`) and frees safely afterwards.
//!
//! It reports one line, `PASS` or `FAIL`, which the test VM checks, and can be unloaded at
//! once: nothing of rmad holds it any more.
//!
//! With `leak=1` the responder forgets its agent instead of dropping it, and the client
//! reports `LEAK PASS` once its handler did: an agent left registered at the unload, as one
//! whose drop inside its handler could not unregister it. rmad must end it at the unload.
//!
//! With `probe=1` it only sends one GET of the class and reports `PROBE PASS` if ib_core
//! answered it (0x000C): loaded again after the client was unloaded, it shows that nothing
//! serves the class any more, where an agent left behind would call into the unloaded module.

use kernel::{
    prelude::*,
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
    time::{
        delay::fsleep,
        Delta, //
    },
};

#[path = "../../../include/rmad_binding.rs"]
#[allow(dead_code)]
mod rmad;

module! {
    type: DropClient,
    name: "rmad_rust_drop_client",
    authors: ["rmad developers"],
    description: "rmad test client: agents dropped from their own handler and before their buffers",
    license: "GPL",
    params: {
        failslab: bool {
            default: false,
            description: "drop the responder's agent with its task's slab allocations failing",
        },
        leak: bool {
            default: false,
            description: "the responder forgets its agent instead of dropping it",
        },
        probe: bool {
            default: false,
            description: "only send one GET of the class and report whether ib_core answers it",
        },
    },
}

// Written for rmad's API 4.2 (Documentation/changes.md).
const _: () = assert!(rmad::API_VERSION_MAJOR == 4 && rmad::API_VERSION_MINOR >= 2);

/// The served vendor class.
const CLASS: u8 = 0x0a;

/// Requests the responder's handler saw, and whether its client was dropped.
static SERVED: Atomic<i32> = Atomic::new(0);
static RELEASED: Atomic<bool> = Atomic::new(false);
/// With `failslab=1`: an allocation of the handler's task failed where it dropped its agent.
static FAULT_SEEN: Atomic<bool> = Atomic::new(false);

/// While it lives, failslab fails the current task's slab allocations (as failslab is
/// configured: the test VM has it fail all of them for tasks that ask).
struct FailSlab;

impl FailSlab {
    /// Sets the current task's `make_it_fail`.
    fn arm() -> Self {
        set_make_it_fail(1);
        FailSlab
    }
}

impl Drop for FailSlab {
    fn drop(&mut self) {
        set_make_it_fail(0);
    }
}

extern "C" {
    /// Sets failslab's per-task flag of the current task (`make_it_fail.c`): 0, or
    /// `-EOPNOTSUPP` on a kernel without fault injection (then nothing fails, and the report
    /// says so).
    fn rmad_rust_drop_make_it_fail(on: i32) -> i32;
}

/// Sets failslab's per-task flag of the current task.
fn set_make_it_fail(on: i32) {
    // SAFETY: Only the current task's own flag is written, by the current task.
    let _ = unsafe { rmad_rust_drop_make_it_fail(on) };
}

kernel::sync::global_lock! {
    // SAFETY: Initialized in the module initializer before any other use.
    unsafe(uninit) static RESPONDER: Mutex<Option<rmad::Agent<Responder>>> = None;
}

/// The responder: drops its own agent at the first request.
struct Responder;

impl Drop for Responder {
    fn drop(&mut self) {
        RELEASED.store(true, Relaxed);
    }
}

impl rmad::Client for Responder {
    fn send_done(&self, done: rmad::SendDone) {
        drop(done.buf);
    }

    fn recv(&self, r: rmad::Received<'_>) {
        if r.matched() {
            return;
        }
        SERVED.add(1, Relaxed);
        // Inside this agent's own handler.
        let agent = RESPONDER.lock().take();
        if module_parameters::leak.value() {
            // Left registered, with its handlers in this module, past this module's exit.
            core::mem::forget(agent);
        } else if module_parameters::failslab.value() {
            let _fail = FailSlab::arm();
            // That the fault is armed here: else the drop below would prove nothing.
            FAULT_SEEN.store(KBox::new(0u64, GFP_ATOMIC).is_err(), Relaxed);
            drop(agent);
        } else {
            drop(agent);
        }
    }
}

/// The requester: what its sends ended with, and the MAD status of the answers it got.
struct Requester {
    done: Atomic<i32>,
    status: Atomic<i32>,
    answer_status: Atomic<i32>,
}

impl rmad::Client for Requester {
    fn send_done(&self, done: rmad::SendDone) {
        self.status.store(done.status, Relaxed);
        drop(done.buf);
        self.done.add(1, Relaxed);
    }

    fn recv(&self, r: rmad::Received<'_>) {
        if let Some(s) = r.mad().get(4..6) {
            self.answer_status
                .store(i32::from(u16::from_be_bytes([s[0], s[1]])), Relaxed);
        }
    }
}

/// Waits (at most 30 s) until `f` holds.
fn wait_for(f: impl Fn() -> bool) -> bool {
    for _ in 0..3000 {
        if f() {
            return true;
        }
        fsleep(Delta::from_millis(10));
    }
    f()
}

/// Sends one GET of `CLASS` from `q` to QP1 of rxe0's own GID and waits for its completion;
/// returns (send status, MAD status of the answer or -1).
fn get(q: &rmad::Agent<Requester>, lo: u32) -> Result<(i32, i32)> {
    let gid = rmad::port_gid(c"rxe0", 1, 1)?;
    let ah = rmad::Ah {
        has_grh: 1,
        sgid_index: 1,
        dgid: gid,
        ..rmad::Ah::default()
    };
    let c = q.client();
    let before = c.done.load(Relaxed);
    c.answer_status.store(-1, Relaxed);
    let mut buf = q.create_send(1)?;
    let tid = (u64::from(q.hi_tid()) << 32) | u64::from(lo);
    if let Some(h) = buf.mad_mut().get_mut(0..16) {
        h[..4].copy_from_slice(&[1, CLASS, 1, rmad::mgmt::METHOD_GET]);
        h[8..16].copy_from_slice(&tid.to_be_bytes());
    }
    buf.set(&ah, 1000, 0)?;
    buf.post().map_err(|(e, _)| e)?;
    wait_for(|| c.done.load(Relaxed) > before);
    Ok((c.status.load(Relaxed), c.answer_status.load(Relaxed)))
}

/// An agent with a buffer it does not own any more when it goes.
struct WithSpare {
    agent: rmad::Agent<Requester>,
    spare: Option<rmad::SendBuf>,
}

fn requester() -> Requester {
    Requester {
        done: Atomic::new(0),
        status: Atomic::new(-1),
        answer_status: Atomic::new(-1),
    }
}

/// Runs both checks; returns the report.
fn run() -> Result<(bool, i32, i32, bool, i32)> {
    let reg = rmad::RegReq {
        mgmt_class: CLASS,
        mgmt_class_version: 1,
        method_mask: [1 << rmad::mgmt::METHOD_GET, 0],
        ..rmad::RegReq::default()
    };
    *RESPONDER.lock() = Some(rmad::Agent::register_class(c"rxe0", 1, &reg, Responder)?);
    let q = rmad::Agent::register(c"rxe0", 1, requester())?;
    // 1. The first GET reaches the responder, which drops its agent and answers nothing.
    let _ = get(&q, 1)?;
    let released = wait_for(|| RELEASED.load(Relaxed));
    // Nobody serves the class any more: ib_core answers.
    let (st, answer) = get(&q, 2)?;
    // 2. Dropped in field order: the agent first, its buffer after.
    let a = rmad::Agent::register(c"rxe0", 1, requester())?;
    let mut spare = a.create_send(1)?;
    let ah = rmad::Ah {
        has_grh: 1,
        sgid_index: 1,
        dgid: rmad::port_gid(c"rxe0", 1, 1)?,
        ..rmad::Ah::default()
    };
    // Ready to post (a GET, as the other ones), so that only its agent's absence refuses it.
    if let Some(h) = spare.mad_mut().get_mut(0..4) {
        h.copy_from_slice(&[1, CLASS, 1, rmad::mgmt::METHOD_GET]);
    }
    spare.set(&ah, 1000, 0)?;
    let s = WithSpare {
        agent: a,
        spare: Some(spare),
    };
    let WithSpare { agent, spare } = s;
    drop(agent);
    let inert = match spare.map(|b| b.post()) {
        Some(Err((e, b))) => {
            pr_info!("posting the buffer past its agent: {:?}\n", e);
            drop(b);
            e == ESHUTDOWN
        }
        _ => false,
    };
    Ok((released, st, answer, inert, SERVED.load(Relaxed)))
}

/// `leak=1`: one GET of the class reaches the responder, which forgets its agent; returns
/// whether its handler ran.
fn leak() -> Result<bool> {
    let reg = rmad::RegReq {
        mgmt_class: CLASS,
        mgmt_class_version: 1,
        method_mask: [1 << rmad::mgmt::METHOD_GET, 0],
        ..rmad::RegReq::default()
    };
    *RESPONDER.lock() = Some(rmad::Agent::register_class(c"rxe0", 1, &reg, Responder)?);
    let q = rmad::Agent::register(c"rxe0", 1, requester())?;
    let _ = get(&q, 4)?;
    Ok(wait_for(|| SERVED.load(Relaxed) == 1) && RESPONDER.lock().is_none())
}

/// `probe=1`: one GET of the class; returns (send status, MAD status of the answer or -1).
fn probe() -> Result<(i32, i32)> {
    let q = rmad::Agent::register(c"rxe0", 1, requester())?;
    get(&q, 3)
}

struct DropClient;

impl kernel::Module for DropClient {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // SAFETY: Once, here, before any use.
        unsafe { RESPONDER.init() };
        if module_parameters::probe.value() {
            match probe() {
                Ok((st, answer)) => {
                    let pass = st == rmad::wc_status::SUCCESS && answer == 0x000c;
                    pr_info!(
                        "PROBE {}: GET of class {:#04x}: status {}, answered with MAD status {:#06x}\n",
                        if pass { "PASS" } else { "FAIL" },
                        CLASS,
                        st,
                        answer
                    );
                }
                Err(e) => pr_info!("PROBE FAIL: {:?}\n", e),
            }
            return Ok(DropClient);
        }
        if module_parameters::leak.value() {
            match leak() {
                Ok(true) => pr_info!("LEAK PASS: the responder forgot its agent in its handler\n"),
                Ok(false) => pr_info!("LEAK FAIL: the responder's handler did not run\n"),
                Err(e) => pr_info!("LEAK FAIL: {:?}\n", e),
            }
            return Ok(DropClient);
        }
        let failslab = module_parameters::failslab.value();
        match run() {
            Ok((released, st, answer, inert, served)) => {
                let fault = FAULT_SEEN.load(Relaxed);
                let pass = released
                    && st == rmad::wc_status::SUCCESS
                    && answer == 0x000c
                    && inert
                    && served == 1
                    && fault == failslab;
                pr_info!(
                    "{}: responder released {}, served {}, then GET status {} answered with MAD status {:#06x}, buffer past its agent inert {}, dropped with allocations failing {}\n",
                    if pass { "PASS" } else { "FAIL" },
                    released,
                    served,
                    st,
                    answer,
                    inert,
                    fault
                );
            }
            Err(e) => pr_info!("FAIL: {:?}\n", e),
        }
        Ok(DropClient)
    }
}

impl Drop for DropClient {
    fn drop(&mut self) {
        // Whatever the responder left (nothing, if it dropped its agent); dropped with the
        // lock released, as a handler may be waiting for it.
        let left = RESPONDER.lock().take();
        drop(left);
    }
}
