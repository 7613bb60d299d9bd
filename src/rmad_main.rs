// SPDX-License-Identifier: GPL-2.0

//! rmad: InfiniBand MAD agents for the Linux kernel, in Rust.
//!
//! rmad gives kernel code MAD agents with the send/cancel semantics of the C MAD layer's
//! `ib_post_send_mad`, `ib_modify_mad` and `ib_cancel_mad`, matching Linux 7.3's behaviour
//! while doing cancel, modify and response matching without scanning the outstanding sends,
//! and turning a stale handle into an error instead of a use-after-free.
//!
//! This crate root declares the module's parts:
//!
//! - [`wire`]: the MAD wire format and the C layer's helper functions, as pure functions over
//!   byte buffers (shared with the host tests).
//! - [`state`]: the 7.3 send state machine as one pure transition function (also shared).
//! - [`agent`], [`send`], [`engine`]: the agent engine.
//! - [`verbs`]: the transport over real RDMA devices; [`capi`] and [`handles`]: the exported C
//!   API and its handles; [`debugfs`]: per-agent counters.
//!
//! # Two flavours
//!
//! The production module (the default build) holds only the above. The test flavour (Kbuild
//! `RMAD_TEST=1`, which sets `--cfg rmad_test`) adds the KUnit suites, the loopback fabric, the
//! demonstration, the benchmark, the removal probe and the stress driver, and the module
//! parameters that start them.

use kernel::prelude::*;

mod agent;
mod capi;
mod debugfs;
mod engine;
mod handles;
mod send;
mod state;
mod trace;
mod transport;
mod verbs;
// The wire module keeps the C header's whole constant set for API parity, used or not.
#[allow(dead_code)]
mod wire;
mod wq;

#[cfg(rmad_test)]
mod bench;
#[cfg(rmad_test)]
mod capi_tests;
#[cfg(rmad_test)]
mod check;
#[cfg(rmad_test)]
mod conformance;
#[cfg(rmad_test)]
mod demo;
#[cfg(rmad_test)]
mod fabric_check;
#[cfg(rmad_test)]
mod fifo;
#[cfg(rmad_test)]
mod loopback;
#[cfg(rmad_test)]
mod probe;
#[cfg(rmad_test)]
mod races;
#[cfg(rmad_test)]
mod scale;
#[cfg(rmad_test)]
mod stress;
#[cfg(rmad_test)]
mod testing;
#[cfg(rmad_test)]
mod trace_check;

#[cfg(not(rmad_test))]
module! {
    type: Rmad,
    name: "rmad",
    authors: ["rmad developers"],
    description: "InfiniBand MAD agents with ib_cancel_mad semantics, in Rust",
    license: "GPL",
}

#[cfg(rmad_test)]
module! {
    type: Rmad,
    name: "rmad",
    authors: ["rmad developers"],
    description: "InfiniBand MAD agents with ib_cancel_mad semantics, in Rust (test build)",
    license: "GPL",
    params: {
        demo: bool {
            default: false,
            description: "Run the loopback demonstration at load time",
        },
        rxe_probe: u32 {
            default: 0,
            description: "Keep this many sends outstanding on rxe0 (device-removal tests)",
        },
        bench: bool {
            default: false,
            description: "Run the benchmark (rmad and the C MAD layer on rxe0) at load time",
        },
        bench_n: u32 {
            default: 1000,
            description: "Benchmark: number of outstanding sends",
        },
        bench_reps: u32 {
            default: 5,
            description: "Benchmark: repetitions of each figure",
        },
        bench_sample: u32 {
            default: 1000,
            description: "Benchmark: timed modifies, cancels and matched responses per round",
        },
    },
}

/// The loaded module.
struct Rmad {
    /// The removal probe, when `rxe_probe` asked for one.
    #[cfg(rmad_test)]
    probe: Option<probe::Probe>,
    /// The stress driver's debugfs files.
    #[cfg(rmad_test)]
    _stress: stress::Control,
    /// `/sys/kernel/debug/rmad`.
    _debugfs: debugfs::Debugfs,
}

impl kernel::Module for Rmad {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        capi::init()?;
        let debugfs = debugfs::create().inspect_err(|_| capi::exit())?;
        verbs::init().inspect_err(|_| capi::exit())?;
        // From here on a failure must stop the verbs side again before the module goes.
        #[cfg(rmad_test)]
        let (probe, stress) = match test_parameters(&debugfs) {
            Ok(p) => p,
            Err(e) => {
                verbs::exit();
                capi::exit();
                return Err(e);
            }
        };
        // The one line a load logs.
        pr_info!("InfiniBand MAD agents in Rust, loaded\n");
        Ok(Rmad {
            #[cfg(rmad_test)]
            probe,
            #[cfg(rmad_test)]
            _stress: stress,
            _debugfs: debugfs,
        })
    }
}

/// Runs what the test build's module parameters ask for at load time.
#[cfg(rmad_test)]
fn test_parameters(debugfs: &debugfs::Debugfs) -> Result<(Option<probe::Probe>, stress::Control)> {
    if module_parameters::demo.value() {
        demo::run()?;
    }
    if module_parameters::bench.value() {
        bench::run(
            module_parameters::bench_n.value(),
            module_parameters::bench_reps.value(),
            module_parameters::bench_sample.value(),
        )?;
    }
    let probe = match module_parameters::rxe_probe.value() {
        0 => None,
        n => Some(probe::start(n)?),
    };
    Ok((probe, stress::Control::new(debugfs.dir())?))
}

impl Drop for Rmad {
    fn drop(&mut self) {
        // Removing the devices flushes the probe's sends; then the probe reports and goes.
        verbs::exit();
        #[cfg(rmad_test)]
        drop(self.probe.take());
        capi::exit();
        pr_info!("unloaded\n");
    }
}
