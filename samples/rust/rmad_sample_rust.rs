// SPDX-License-Identifier: GPL-2.0

//! rmad_sample_rust: a Rust driver that uses rmad through its exported API and the Rust
//! binding in `include/rmad_binding.rs`.
//!
//! At load it registers an agent on rxe0 port 1, sends four GET requests to QP1 of the same
//! port (ib_core answers them), sends two SEND requests that nobody answers and cancels them,
//! waits for its send handler and reports what it saw. The test VM checks the report.

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

#[path = "../../include/rmad_binding.rs"]
#[allow(dead_code)]
mod rmad;

module! {
    type: Sample,
    name: "rmad_sample_rust",
    authors: ["rmad developers"],
    description: "rmad sample: a Rust driver using rmad's exported API",
    license: "GPL",
}

const N_GET: i32 = 4;
const N_CANCEL: i32 = 2;
/// `IB_WC_SUCCESS` and `IB_WC_WR_FLUSH_ERR`.
const SUCCESS: i32 = 0;
const FLUSH: i32 = 5;

/// What the handlers saw.
struct Counts {
    done: Atomic<i32>,
    succeeded: Atomic<i32>,
    flushed: Atomic<i32>,
    other: Atomic<i32>,
    responses: Atomic<i32>,
}

impl rmad::Client for Counts {
    fn send_done(&self, buf: rmad::SendBuf, status: i32) {
        let c = match status {
            SUCCESS => &self.succeeded,
            FLUSH => &self.flushed,
            _ => &self.other,
        };
        c.add(1, Relaxed);
        // Freed here, like a C client frees in its handler.
        drop(buf);
        self.done.add(1, Relaxed);
    }

    fn recv(&self, matched: bool, mad: &[u8]) {
        if matched && mad.get(3).is_some_and(|m| m & 0x80 != 0) {
            self.responses.add(1, Relaxed);
        }
    }
}

/// A class 0x04 request with `method` to QP1 of rxe0 port 1.
fn request(
    agent: &rmad::Agent<Counts>,
    ah: &rmad::Ah,
    lo: u32,
    method: u8,
    timeout_ms: i32,
) -> Result<rmad::SendBuf> {
    let mut buf = agent.create_send(1)?;
    let tid = (u64::from(agent.hi_tid()) << 32) | u64::from(lo);
    let mad = buf.mad_mut();
    if let Some(h) = mad.get_mut(0..16) {
        h[..4].copy_from_slice(&[1, 0x04, 1, method]);
        h[8..16].copy_from_slice(&tid.to_be_bytes());
    }
    buf.set(ah, timeout_ms, 0)?;
    Ok(buf)
}

/// Runs the sample; returns the number of failed checks.
fn run() -> Result<(i32, i32, i32, i32, i32)> {
    let gid = rmad::port_gid(c"rxe0", 1, 1)?;
    let ah = rmad::Ah {
        has_grh: 1,
        sgid_index: 1,
        dgid: gid,
        ..rmad::Ah::default()
    };
    let agent = rmad::Agent::register(
        c"rxe0",
        1,
        Counts {
            done: Atomic::new(0),
            succeeded: Atomic::new(0),
            flushed: Atomic::new(0),
            other: Atomic::new(0),
            responses: Atomic::new(0),
        },
    )?;
    let mut bad = 0;
    for i in 0..4u32 {
        if request(&agent, &ah, i, 0x01, 5000)?.post().is_err() {
            bad += 1;
        }
    }
    let mut posted = KVec::new();
    for i in 0..2u32 {
        match request(&agent, &ah, 100 + i, 0x03, 60_000)?.post() {
            Ok(p) => posted.push(p, GFP_KERNEL)?,
            Err(_) => bad += 1,
        }
    }
    for p in posted.iter() {
        if p.cancel().is_err() {
            bad += 1;
        }
    }
    let counts: &Counts = agent_counts(&agent);
    let mut waited = 0;
    while counts.done.load(Relaxed) < N_GET + N_CANCEL && waited < 3000 {
        fsleep(Delta::from_millis(10));
        waited += 1;
    }
    // The handler has freed them: the handles are stale now.
    for p in posted.iter() {
        if p.cancel() != Err(EINVAL) {
            bad += 1;
        }
    }
    let r = (
        counts.succeeded.load(Relaxed),
        counts.responses.load(Relaxed),
        counts.flushed.load(Relaxed),
        counts.other.load(Relaxed),
        bad,
    );
    drop(agent);
    Ok(r)
}

/// The client of an agent (the binding keeps it; the sample peeks at its counters).
fn agent_counts(agent: &rmad::Agent<Counts>) -> &Counts {
    agent.client()
}

struct Sample;

impl kernel::Module for Sample {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        match run() {
            Ok((ok, resp, flushed, other, bad)) => {
                let pass =
                    ok == N_GET && resp == N_GET && flushed == N_CANCEL && other == 0 && bad == 0;
                pr_info!(
                    "{}: {} answered ({} responses), {} cancelled, {} other, {} bad checks\n",
                    if pass { "PASS" } else { "FAIL" },
                    ok,
                    resp,
                    flushed,
                    other,
                    bad
                );
            }
            Err(e) => pr_info!("FAIL: {:?}\n", e),
        }
        Ok(Sample)
    }
}
