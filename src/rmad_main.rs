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
mod verbs;

/// Declares the module to the kernel through `module!`, with the description and the
/// parameters of its flavour; both flavours go through here.
macro_rules! rmad_module {
    ($description:tt, { $($params:tt)* }) => {
        module! {
            type: Rmad,
            name: "rmad",
            authors: ["rmad developers"],
            description: $description,
            license: "GPL",
            params: { $($params)* },
        }
    };
}

/// Declares the production module: no parameters.
///
/// The test flavour has parameters that the production module must not have, and `module!`
/// reads its parameters as written (not from a constant or another macro) and must be invoked
/// here, where it puts the printing prefix and `module_parameters`. So `src/testing/flavour.rs`
/// defines this macro again, and the `#[macro_use]` below makes its definition the one that
/// `declare_module!()` expands in the test flavour: the module's gate stays the one on
/// `mod testing`.
#[allow(
    unused_macros,
    reason = "the test flavour declares the module with its own"
)]
macro_rules! declare_module {
    () => {
        rmad_module!(
            "InfiniBand MAD agents with ib_cancel_mad semantics, in Rust",
            {}
        );
    };
}

#[cfg(rmad_test)]
#[macro_use]
mod testing;

declare_module!();

/// The loaded module: its parts, as guards.
///
/// Fields drop in declaration order, which is the unload order: the RDMA devices first (closing
/// a port flushes every send on it), the C API's handle tables, what the test flavour started
/// (its removal probe reports the sends the ports flushed; then its control files and loopback
/// device), the debugfs directory they live in, and last the line that says so.
struct Rmad {
    /// The verbs transport, registered as an `ib_client`.
    _verbs: verbs::Client,
    /// The C API.
    _capi: capi::Api,
    /// What the test flavour's module parameters started, and its debugfs files.
    #[cfg(rmad_test)]
    _testing: testing::Flavour,
    /// `/sys/kernel/debug/rmad`.
    _debugfs: debugfs::Debugfs,
    /// The slab cache of send records, which everything above may have held.
    _records: sys::slab::Cache,
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
        // SAFETY: Called once, here, before any send is created; dropped last but one, once
        // every agent (whose unregistration waits for its buffers) and handle has gone.
        let records = unsafe { sys::slab::Cache::create(engine::send::SendRecord::layout()) }?;
        // SAFETY: Called once, here, before any other use of the C API.
        let capi = unsafe { capi::Api::new() }?;
        // SAFETY: Called once, here, before any other use of the verbs transport: debugfs's
        // `agents` file, which reads it, is made after.
        let verbs = unsafe { verbs::Client::register() }?;
        let debugfs = debugfs::create()?;
        #[cfg(rmad_test)]
        let flavour = testing::Flavour::start(&debugfs)?;
        // The one line a load logs.
        pr_info!("InfiniBand MAD agents in Rust, loaded\n");
        Ok(Rmad {
            _verbs: verbs,
            _capi: capi,
            #[cfg(rmad_test)]
            _testing: flavour,
            _debugfs: debugfs,
            _records: records,
            _farewell: Farewell,
        })
    }
}
