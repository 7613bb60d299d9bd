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
//! - [`check`]: support for the table-driven checks that run on the host and under KUnit.

use kernel::prelude::*;

mod agent;
mod bench;
mod capi;
mod check;
mod conformance;
mod debugfs;
mod demo;
mod engine;
mod loopback;
mod probe;
mod races;
mod send;
mod state;
mod testing;
mod transport;
mod verbs;
// The wire module keeps the C header's whole constant set for API parity, used or not.
#[allow(dead_code)]
mod wire;
mod wq;

module! {
    type: Rmad,
    name: "rmad",
    authors: ["rmad developers"],
    description: "InfiniBand MAD agents with ib_cancel_mad semantics, in Rust",
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
            description: "Run the cancel/modify/matching benchmark at load time",
        },
    },
}

/// The loaded module.
struct Rmad {
    /// The removal probe, when `rxe_probe` asked for one.
    probe: Option<probe::Probe>,
    /// `/sys/kernel/debug/rmad`.
    _debugfs: debugfs::Debugfs,
}

impl kernel::Module for Rmad {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        pr_info!("InfiniBand MAD agents in Rust, loaded\n");
        for d in wire::self_description() {
            pr_info!("wire {}({}) = {:#x}\n", d.name, d.input, d.output);
        }
        capi::init();
        let debugfs = debugfs::create()?;
        verbs::init()?;
        // From here on a failure must stop the verbs side again before the module goes.
        let probe = run_parameters().inspect_err(|_| verbs::exit())?;
        Ok(Rmad {
            probe,
            _debugfs: debugfs,
        })
    }
}

/// Runs what the module parameters ask for at load time.
fn run_parameters() -> Result<Option<probe::Probe>> {
    if module_parameters::demo.value() {
        demo::run()?;
    }
    if module_parameters::bench.value() {
        bench::run()?;
    }
    match module_parameters::rxe_probe.value() {
        0 => Ok(None),
        n => Ok(Some(probe::start(n)?)),
    }
}

impl Drop for Rmad {
    fn drop(&mut self) {
        // Removing the devices flushes the probe's sends; then the probe reports and goes.
        verbs::exit();
        drop(self.probe.take());
        capi::exit();
        pr_info!("unloaded\n");
    }
}
