// SPDX-License-Identifier: GPL-2.0

//! rmad_rust_drop_client: a Rust client of the production rmad.ko that drops its agents where
//! a careless driver would, through the safe binding (`include/rmad_binding.rs`).
//!
//! At load:
//! 1. A responder for GETs of vendor class 0x0a on rxe0 drops its own agent from its receive
//!    handler, at the first request. The agent must be unregistered once that handler returns
//!    and its client dropped (in rmad's thread): a second GET of that class is then answered
//!    by ib_core itself (status 0x000C, nobody serves the class), not by the responder's
//!    handler, which would be a call into this module after it is gone.
//! 2. An agent dropped while a send buffer of it is still held (`struct { agent, spare }`,
//!    dropped in field order) must not wait for that buffer: the drop returns, the buffer is
//!    inert (posting it fails with `ESHUTDOWN`) and frees safely afterwards.
//!
//! It reports one line, `PASS` or `FAIL`, which the test VM checks, and can be unloaded at
//! once: nothing of rmad holds it any more.

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
}

/// The served vendor class.
const CLASS: u8 = 0x0a;

/// Requests the responder's handler saw, and whether its client was dropped.
static SERVED: Atomic<i32> = Atomic::new(0);
static RELEASED: Atomic<bool> = Atomic::new(false);

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
        drop(agent);
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

struct DropClient;

impl kernel::Module for DropClient {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // SAFETY: Once, here, before any use.
        unsafe { RESPONDER.init() };
        match run() {
            Ok((released, st, answer, inert, served)) => {
                let pass = released
                    && st == rmad::wc_status::SUCCESS
                    && answer == 0x000c
                    && inert
                    && served == 1;
                pr_info!(
                    "{}: responder released {}, served {}, then GET status {} answered with MAD status {:#06x}, buffer past its agent inert {}\n",
                    if pass { "PASS" } else { "FAIL" },
                    released,
                    served,
                    st,
                    answer,
                    inert
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
