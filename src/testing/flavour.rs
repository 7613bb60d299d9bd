// SPDX-License-Identifier: GPL-2.0

//! What the test flavour adds to the loaded module: its module parameters (through
//! [`declare_module!`]) and what they start ([`Flavour`]), held by the one gated field of the
//! crate root's module type.

use crate::{
    debugfs::Debugfs,
    testing::{
        bench,
        control::Control,
        demo,
        removal::{
            self,
            RemovalProbe, //
        },
    },
};
use kernel::prelude::*;

/// Declares the test flavour of the module: the production declaration (the crate root's
/// `rmad_module!`) with a description of its own and the parameters that start the drivers.
///
/// This definition comes after the crate root's default one (no parameters) and replaces it
/// there, through `#[macro_use]` on `mod testing` and `mod flavour`: `module!` takes its
/// parameters as literal tokens and must be invoked at the crate root, and the production
/// module must not have these parameters.
macro_rules! declare_module {
    () => {
        rmad_module!("InfiniBand MAD agents with ib_cancel_mad semantics, in Rust (test build)", {
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
                description: "Benchmark: timed modifies, cancels and matched responses per pass",
            },
            bench_min_ops: u32 {
                default: 10000,
                description: "Benchmark: operations each figure times at least, at N <= 100",
            },
            bench_scale: u32 {
                default: 0,
                description: "Benchmark: sends per scaling round (one and two CPUs posting), 0: none",
            },
            bench_insn: bool {
                default: false,
                description: "Benchmark: mark the timed windows for an instruction count (make bench BENCH_INSN=1)",
            },
        });
    };
}

/// What the test flavour's parameters started, for as long as the module is loaded.
///
/// Fields drop in declaration order: the removal probe first (it reports how the sends the
/// closed ports flushed ended), then the control files and `lb0`.
pub(crate) struct Flavour {
    /// The removal probe, when `rxe_probe` asked for one.
    _removal: Option<RemovalProbe>,
    /// The test flavour's debugfs files and `lb0`.
    _control: Control,
}

impl Flavour {
    /// Runs what the module parameters ask for at load time (the demonstration, the
    /// benchmark, the removal probe) and makes the control files in `debugfs`'s directory.
    pub(crate) fn start(debugfs: &Debugfs) -> Result<Self> {
        if crate::module_parameters::demo.value() {
            demo::run()?;
        }
        if crate::module_parameters::bench.value() {
            bench::run(
                crate::module_parameters::bench_n.value(),
                crate::module_parameters::bench_reps.value(),
                crate::module_parameters::bench_sample.value(),
                crate::module_parameters::bench_min_ops.value(),
                crate::module_parameters::bench_scale.value(),
                crate::module_parameters::bench_insn.value(),
            )?;
        }
        let removal = match crate::module_parameters::rxe_probe.value() {
            0 => None,
            n => Some(removal::start(n)?),
        };
        Ok(Self {
            _removal: removal,
            _control: Control::new(debugfs.dir())?,
        })
    }
}
