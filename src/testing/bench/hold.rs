// SPDX-License-Identifier: GPL-2.0

//! `make bench`'s removal row (test flavour): an agent on `rxe0` with N sends outstanding while
//! `tests/vm/bench.sh` removes the device and reads the irqsoff tracer's maximum meanwhile.
//!
//! Commands written to `rmad/stress`, one at a time:
//!
//! - `hold c|rmad N`: an agent of the C MAD layer (`src/testing/bench/hold.c`) or of rmad
//!   registers on `rxe0` and posts N sends that nobody answers (timeout 10 minutes); the command
//!   returns once the device took them all (line: `held N`);
//! - `unhold`: waits until each send's handler ran (after the removal flushed them), unregisters
//!   the agent and reports how the sends ended (`posted N flushed F other O`).

use super::{
    KIND_SILENT,
    SILENT_GID,
    SILENT_GID_INDEX, //
};
use crate::{
    engine::{
        agent::{
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
        state::WcStatus,
        wire, //
    },
    testing::{
        control::Writer,
        fabric,
        register_gsi,
        requests, //
    },
    verbs, //
};
use core::fmt::Write;
use kernel::{
    ffi::c_int,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
    },
};

extern "C" {
    /// `hold c N` (`src/testing/bench/hold.c`): 0 once the device took the N sends.
    fn rmad_bench_c_hold(n: u32) -> c_int;
    /// `unhold` for the C layer's agent: how its sends ended.
    fn rmad_bench_c_unhold(posted: *mut u32, flushed: *mut u32, other: *mut u32);
}

/// Management class of the held sends (the bench's: vendor range 1, answered by nobody).
const CLASS: u8 = 0x0b;
/// Timeout of the held sends (10 minutes): only the removal ends them.
const LONG_MS: i32 = 600_000;
/// Longest wait for the device to take the sends, and for their handlers after the removal.
const WAIT_MS: i64 = 600_000;

/// The held agent's handlers: they count how its sends ended.
struct Counts {
    flushed: Atomic<u32>,
    other: Atomic<u32>,
}

impl SendHandler for Counts {
    fn send_done(&self, _agent: &Arc<Agent>, buf: SendBuf, wc: SendCompletion) {
        drop(buf);
        let c = if wc.status == WcStatus::WrFlushErr {
            &self.flushed
        } else {
            &self.other
        };
        c.fetch_add(1, Relaxed);
    }
}

impl RecvHandler for Counts {
    fn recv(&self, _agent: &Arc<Agent>, _send: Option<&SendHandle>, _mad: RecvMad) {}
}

/// What is held: whose agent, and for rmad the agent and its counts.
enum Held {
    None,
    C,
    Rmad(Arc<Agent>, Arc<Counts>, u32),
}

kernel::sync::global_lock! {
    // SAFETY: Initialized by `init` before any other use.
    unsafe(uninit) static HELD: Mutex<Held> = Held::None;
}

/// Sets up the state of `hold` (module load, test flavour).
pub(crate) fn init() {
    // SAFETY: Called once, from the module initializer, before any command.
    unsafe { HELD.init() };
}

/// rmad's side of `hold rmad N`.
fn hold_rmad(n: u32) -> Result<Held> {
    let port = verbs::find_port(c"rxe0", 1).ok_or(ENODEV)?;
    let engine = verbs::verbs_engine().ok_or(ENODEV)?;
    let transport: Arc<dyn Transport<Agent>> = port;
    let counts = Arc::new(
        Counts {
            flushed: Atomic::new(0),
            other: Atomic::new(0),
        },
        GFP_KERNEL,
    )?;
    let a = register_gsi(&engine, &transport, 1, &counts, None)?;
    let posted = (|| -> Result {
        for i in 0..n {
            let mut buf = requests::mad(&a, CLASS, wire::IB_MGMT_METHOD_SEND, i)?;
            buf.set_ah(Some(requests::gid_address(SILENT_GID, SILENT_GID_INDEX)));
            buf.set_timeout_ms(LONG_MS);
            buf.set_retries(0);
            buf.set_context([KIND_SILENT, 0]);
            Agent::post(buf).map_err(|e| e.err)?;
        }
        if fabric::wait(WAIT_MS, || a.stats().transmitted >= u64::from(n)) {
            Ok(())
        } else {
            Err(ETIMEDOUT)
        }
    })();
    if let Err(e) = posted {
        let _ = a.unregister();
        return Err(e);
    }
    Ok(Held::Rmad(a, counts, n))
}

/// `hold c|rmad N` (the words after `hold`).
pub(crate) fn hold(who: &str, n: &str, out: &mut KVec<u8>) -> Result {
    let n: u32 = n.parse().map_err(|_| EINVAL)?;
    let mut held = HELD.lock();
    if !matches!(*held, Held::None) {
        return Err(EBUSY);
    }
    *held = match who {
        "c" => {
            // SAFETY: No pointer is passed; the call returns once its sends are posted.
            kernel::error::to_result(unsafe { rmad_bench_c_hold(n) })?;
            Held::C
        }
        "rmad" => hold_rmad(n)?,
        _ => return Err(EINVAL),
    };
    writeln!(Writer(out), "held {n}").map_err(|_| ENOMEM)
}

/// `unhold`: how the held sends ended (`None` if nothing was held).
fn release(held: &mut Held) -> Option<(u32, u32, u32)> {
    match core::mem::replace(held, Held::None) {
        Held::None => None,
        Held::C => {
            let (mut posted, mut flushed, mut other) = (0u32, 0u32, 0u32);
            // SAFETY: The three pointers are valid for writes.
            unsafe { rmad_bench_c_unhold(&mut posted, &mut flushed, &mut other) };
            Some((posted, flushed, other))
        }
        Held::Rmad(a, counts, n) => {
            if !fabric::wait(WAIT_MS, || a.outstanding() == 0) {
                pr_warn!("bench: hold: sends still outstanding; unregistering\n");
            }
            let _ = a.unregister();
            Some((n, counts.flushed.load(Relaxed), counts.other.load(Relaxed)))
        }
    }
}

/// `unhold`: one line, `posted N flushed F other O`.
pub(crate) fn unhold(out: &mut KVec<u8>) -> Result {
    let (posted, flushed, other) = release(&mut HELD.lock()).ok_or(ENOENT)?;
    writeln!(
        Writer(out),
        "posted {posted} flushed {flushed} other {other}"
    )
    .map_err(|_| ENOMEM)
}

/// Lets go of what is still held (module unload).
pub(crate) fn exit() {
    let _ = release(&mut HELD.lock());
}
