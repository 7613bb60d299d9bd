// SPDX-License-Identifier: GPL-2.0

//! rmad: InfiniBand MAD agents for the Linux kernel, in Rust.
//!
//! rmad gives kernel code MAD agents with the send/cancel semantics of the C MAD layer's
//! `ib_post_send_mad`, `ib_modify_mad` and `ib_cancel_mad`, matching Linux 7.3's behaviour
//! while doing cancel, modify and response matching without scanning the outstanding sends,
//! and turning a stale handle into an error instead of a use-after-free.
//!
//! The layers, one module each (Documentation/architecture.md draws them):
//!
//! - [`mad`]: the pure parts (wire format, state machine, value types), shared with the host
//!   tests;
//! - [`engine`]: agents, send records, matching, timeouts, the transport interface;
//! - [`verbs`]: the transport over real RDMA devices, with its C shim;
//! - [`capi`]: the exported C API and its handles;
//! - [`sys`]: what the 7.3 kernel crate lacks (workqueues, tracepoints, scheduling);
//! - [`debugfs`]: per-agent counters.
//!
//! # Two flavours
//!
//! The production module (the default build) holds only the above. The test flavour (Kbuild
//! `RMAD_TEST=1`, which sets `--cfg rmad_test`) adds [`testing`]: the KUnit suites, the
//! loopback fabric, the demonstration, the benchmark, the removal probe and the stress
//! driver, and the module parameters that start them.

use kernel::prelude::*;

mod capi;
mod debugfs;
mod engine;
mod mad;
mod sys;
#[cfg(rmad_test)]
mod testing;
mod verbs;

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
        bench_scale: u32 {
            default: 0,
            description: "Benchmark: sends per scaling round (one and two CPUs posting), 0: none",
        },
    },
}

/// The loaded module: its parts, as guards.
///
/// Fields drop in declaration order, which is the unload order: the RDMA devices first (closing
/// a port flushes every send on it), then the test flavour's removal probe (which reports the
/// flushed sends), the C API's handle tables, the test flavour's control files and loopback
/// device, the debugfs directory they live in, and last the line that says so.
struct Rmad {
    /// The verbs transport, registered as an `ib_client`.
    _verbs: verbs::Client,
    /// The removal probe, when `rxe_probe` asked for one.
    #[cfg(rmad_test)]
    _removal: Option<testing::removal::RemovalProbe>,
    /// The C API.
    _capi: capi::Api,
    /// The test flavour's debugfs files and `lb0`.
    #[cfg(rmad_test)]
    _control: testing::control::Control,
    /// `/sys/kernel/debug/rmad`.
    _debugfs: debugfs::Debugfs,
    /// Logs the unload once everything else has gone.
    _farewell: Farewell,
}

/// Logs the one line an unload logs, when dropped.
struct Farewell;

impl Drop for Farewell {
    fn drop(&mut self) {
        pr_info!("unloaded\n");
    }
}

impl kernel::Module for Rmad {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        // Built in load order; should a step fail, the guards built so far drop in reverse.
        // SAFETY: Called once, here, before any other use of the C API.
        let capi = unsafe { capi::Api::new() }?;
        // SAFETY: Called once, here, before any other use of the verbs transport: debugfs's
        // `agents` file, which reads it, is made after.
        let verbs = unsafe { verbs::Client::register() }?;
        let debugfs = debugfs::create()?;
        #[cfg(rmad_test)]
        let (removal, control) = test_parameters(&debugfs)?;
        // The one line a load logs.
        pr_info!("InfiniBand MAD agents in Rust, loaded\n");
        Ok(Rmad {
            _verbs: verbs,
            #[cfg(rmad_test)]
            _removal: removal,
            _capi: capi,
            #[cfg(rmad_test)]
            _control: control,
            _debugfs: debugfs,
            _farewell: Farewell,
        })
    }
}

/// Runs what the test build's module parameters ask for at load time.
#[cfg(rmad_test)]
fn test_parameters(
    debugfs: &debugfs::Debugfs,
) -> Result<(
    Option<testing::removal::RemovalProbe>,
    testing::control::Control,
)> {
    if module_parameters::demo.value() {
        testing::demo::run()?;
    }
    if module_parameters::bench.value() {
        testing::bench::run(
            module_parameters::bench_n.value(),
            module_parameters::bench_reps.value(),
            module_parameters::bench_sample.value(),
            module_parameters::bench_scale.value(),
        )?;
    }
    let removal = match module_parameters::rxe_probe.value() {
        0 => None,
        n => Some(testing::removal::start(n)?),
    };
    Ok((removal, testing::control::Control::new(debugfs.dir())?))
}
