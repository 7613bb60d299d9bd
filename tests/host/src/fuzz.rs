// SPDX-License-Identifier: GPL-2.0

//! Host-side fuzzing of the pure parts (issue 16 item 9): arbitrary inputs against small
//! reference models written from the C definitions and from Documentation/behaviour.md, with no
//! external crate.
//!
//! Each target is a plain function `fn(seed, inputs) -> Result<inputs run, Disagreement>`:
//!
//! - [`wire::run`]: the MAD wire helpers on arbitrary byte buffers of 0..=300 bytes;
//! - [`state::run_step_range`]: one `state::step` on arbitrary facts and an arbitrary event, against
//!   the transition table of behaviour §2.3 (one input is one step);
//! - [`state::run_agent_range`]: long random interleavings of posts, send completions, responses
//!   (matched as behaviour §4 says), expiries, modify/cancel, transport refusals, deliveries and
//!   unregistration on one simulated agent with flow control, checked against the same model and
//!   the end-to-end invariants of behaviour §1.7, §1.9, §2.2 and §3.3 (one input is one action of
//!   a walk);
//! - [`rmpp::run_range`]: the RMPP receiver and send window of `src/mad/rmpp/` against models of
//!   behaviour §2.8 and §2.10: random segments, random calls, and whole transfers over a lossy,
//!   duplicating, reordering channel (one input is one run);
//! - [`retry::run_range`]: `retry::plan` on random rules (backoff, one-shot modify, deadline)
//!   and random sequences of posts, transmissions, expiries and modifies at non-decreasing
//!   times, against a model of behaviour §2.11 and its invariants (no wait ends after the
//!   deadline, backoff never shrinks between modifies nor passes its cap; one input is one send).
//!
//! Input `i` of a run with seed `s` draws from its own generator, so one failing input can be
//! replayed alone (`RMAD_FUZZ_SEED=s RMAD_FUZZ_FIRST=i RMAD_FUZZ_INPUTS=1`). `cargo test` runs a
//! short seeded run of each target; `scripts/check/fuzz.sh` builds the long runs
//! (`--cfg rmad_fuzz_long`) and runs them in release mode (`RMAD_FUZZ_INPUTS`, default 10 million
//! per target).

#[path = "fuzz/retry.rs"]
pub(crate) mod retry;
#[path = "fuzz/rmpp.rs"]
pub(crate) mod rmpp;
#[path = "fuzz/state.rs"]
pub(crate) mod state;
#[path = "fuzz/wire.rs"]
pub(crate) mod wire;

use std::string::String;

/// What a fuzz target found: the input and what disagreed.
#[derive(Debug)]
pub(crate) struct Disagreement {
    /// The target's name.
    pub(crate) target: &'static str,
    /// The run's seed.
    pub(crate) seed: u64,
    /// The index of the input that disagreed.
    pub(crate) input: u64,
    /// What disagreed with what.
    pub(crate) what: String,
    /// The input, minimised where the target can.
    pub(crate) reproducer: String,
}

impl core::fmt::Display for Disagreement {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "fuzz target {}: disagreement at input {} of seed {:#x}\n  {}\n  input: {}\n  \
             replay: RMAD_FUZZ_TARGET={} RMAD_FUZZ_SEED={:#x} RMAD_FUZZ_FIRST={} \
             RMAD_FUZZ_INPUTS=1 scripts/check/fuzz.sh",
            self.target,
            self.input,
            self.seed,
            self.what,
            self.reproducer,
            self.target,
            self.seed,
            self.input
        )
    }
}

/// A fuzz target: runs `inputs` inputs from `first` on with `seed`.
pub(crate) type Target = fn(u64, u64, u64) -> Result<u64, Disagreement>;

/// The targets, by name (for the long runs).
#[cfg(rmad_fuzz_long)]
pub(crate) const TARGETS: [(&str, Target); 5] = [
    ("wire", wire::run_range),
    ("step", state::run_step_range),
    ("agent", state::run_agent_range),
    ("rmpp", rmpp::run_range),
    ("retry", retry::run_range),
];

/// splitmix64: a small, fast, seedable generator whose every state is valid.
#[derive(Clone)]
pub(crate) struct Rng(u64);

/// The splitmix64 output function.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// The generator of input `index` of the run with `seed`: independent of every other input.
    pub(crate) fn for_input(seed: u64, index: u64) -> Self {
        Self(mix(seed ^ mix(index.wrapping_add(0x632B_E59B_D9B4_E019))))
    }

    /// The next 64 random bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// A uniform value in `0..n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        let wide = u128::from(self.next()) * u128::from(n);
        u64::try_from(wide >> 64).unwrap_or(0)
    }

    /// A uniform `usize` in `0..n`.
    pub(crate) fn index(&mut self, n: usize) -> usize {
        usize::try_from(self.below(u64::try_from(n).unwrap_or(u64::MAX))).unwrap_or(0)
    }

    /// True with probability `num / den`.
    pub(crate) fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }

    /// A random byte.
    pub(crate) fn byte(&mut self) -> u8 {
        self.next().to_le_bytes()[0]
    }

    /// A random `u32`.
    pub(crate) fn u32(&mut self) -> u32 {
        u32::try_from(self.next() >> 32).unwrap_or(0)
    }

    /// One element of `items` (which must not be empty).
    pub(crate) fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.index(items.len())]
    }

    /// A `u32` that is often at an edge: 0, 1, powers of two and their neighbours, field
    /// widths, or `u32::MAX`.
    pub(crate) fn edgy_u32(&mut self) -> u32 {
        match self.below(4) {
            0 => self.u32(),
            1 => {
                let bit = 1u32 << self.below(32);
                match self.below(3) {
                    0 => bit,
                    1 => bit.wrapping_sub(1),
                    _ => bit.wrapping_add(1),
                }
            }
            2 => self.pick(&[
                0,
                1,
                2,
                0x1F,
                0x20,
                0x07FF_FFFF,
                0x0800_0000,
                0x8000_0000,
                0xFFFF_FFE0,
                u32::MAX - 1,
                u32::MAX,
            ]),
            _ => u32::try_from(self.below(8)).unwrap_or(0),
        }
    }
}

/// Reads a number from the environment: decimal, or hexadecimal with `0x`; `_` allowed.
#[cfg(all(test, rmad_fuzz_long))]
fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v: String = v.trim().chars().filter(|c| *c != '_').collect();
    let n = match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    match n {
        Ok(n) => Some(n),
        Err(_) => panic!("{name}={v} is not a number"),
    }
}

/// The seed of the short runs that `cargo test` (and so `make test`) does.
#[cfg(test)]
const SHORT_SEED: u64 = 0x0016_0009_5EED_0001;

/// Runs `target` and fails the test with the disagreement, if any; prints what ran.
#[cfg(test)]
fn run_target(name: &str, target: Target, seed: u64, first: u64, inputs: u64) {
    let start = std::time::Instant::now();
    let res = target(seed, first, inputs);
    let secs = start.elapsed().as_secs_f64();
    match res {
        Ok(n) => {
            let steps = if name == "agent" {
                let n = state::STEPS.load(core::sync::atomic::Ordering::Relaxed);
                std::format!(" ({n} calls of step in all)")
            } else {
                String::new()
            };
            std::println!(
                "fuzz {name}: {n} inputs{steps} (from {first}), seed {seed:#x}, {secs:.2} s, \
                 no disagreement"
            )
        }
        Err(d) => panic!("{d}\n  after {secs:.2} s"),
    }
}

/// Short seeded runs, part of `cargo test`: a few seconds in a debug build in all.
#[cfg(test)]
mod short {
    use super::*;

    #[test]
    fn wire() {
        run_target("wire", wire::run_range, SHORT_SEED, 0, 20_000);
    }

    #[test]
    fn step() {
        run_target("step", state::run_step_range, SHORT_SEED, 0, 200_000);
    }

    #[test]
    fn agent() {
        run_target("agent", state::run_agent_range, SHORT_SEED, 0, 60_000);
    }

    #[test]
    fn rmpp() {
        run_target("rmpp", rmpp::run_range, SHORT_SEED, 0, 2_000);
    }

    #[test]
    fn retry() {
        run_target("retry", retry::run_range, SHORT_SEED, 0, 20_000);
    }

    /// The short run of `rmpp` reaches every verdict of the receiver and every answer of the
    /// send window, and channel runs that complete and runs that do not.
    #[test]
    fn rmpp_covers_every_verdict() {
        let cov = rmpp::coverage(SHORT_SEED, 1_000).unwrap_or_else(|d| panic!("{d}"));
        std::println!("rmpp coverage: {cov:?}");
        let missing: std::vec::Vec<&str> = rmpp::VERDICTS
            .iter()
            .zip(cov.verdicts)
            .chain(rmpp::SENDER.iter().zip(cov.sender))
            .chain(
                ["channel completed", "channel not completed"]
                    .iter()
                    .zip(cov.channel),
            )
            .filter(|(_, n)| *n == 0)
            .map(|(name, _)| *name)
            .collect();
        assert!(missing.is_empty(), "never reached: {missing:?}");
    }

    /// The short runs reach every transition of behaviour §2.3 that rmad implements.
    #[test]
    fn agent_covers_every_transition() {
        let seen = state::coverage(SHORT_SEED, 60_000);
        let missing: std::vec::Vec<&str> = state::TRANSITIONS
            .iter()
            .zip(seen.iter())
            .filter(|(_, n)| **n == 0)
            .map(|(t, _)| *t)
            .collect();
        assert!(missing.is_empty(), "never reached: {missing:?}");
    }

    /// The generator is the same on every machine (replays depend on it).
    #[test]
    fn generator_is_stable() {
        let mut r = Rng::for_input(0, 0);
        let first = r.next();
        let mut again = Rng::for_input(0, 0);
        assert_eq!(again.next(), first);
        assert_ne!(Rng::for_input(0, 1).next(), first);
        assert_ne!(Rng::for_input(1, 0).next(), first);
        for n in [1u64, 2, 3, 7, 300, u64::MAX] {
            for _ in 0..1000 {
                assert!(r.below(n) < n);
            }
        }
        assert_eq!(r.below(0), 0);
    }
}

/// The long runs (`scripts/check/fuzz.sh`): `RMAD_FUZZ_INPUTS` inputs (default 10 million) per
/// target from `RMAD_FUZZ_FIRST` (default 0) with `RMAD_FUZZ_SEED`; `RMAD_FUZZ_TARGET` picks one.
#[cfg(all(test, rmad_fuzz_long))]
mod long {
    use super::*;

    fn long(name: &str) {
        if let Ok(only) = std::env::var("RMAD_FUZZ_TARGET") {
            if !only.is_empty() && only != name {
                return;
            }
        }
        let Some((_, target)) = TARGETS.iter().find(|(n, _)| *n == name) else {
            panic!("no fuzz target {name}");
        };
        let seed = env_u64("RMAD_FUZZ_SEED").unwrap_or(SHORT_SEED);
        let first = env_u64("RMAD_FUZZ_FIRST").unwrap_or(0);
        let inputs = env_u64("RMAD_FUZZ_INPUTS").unwrap_or(10_000_000);
        // Only the state machine's models know divergences.
        if name == "step" || name == "agent" {
            if state::strict() {
                std::println!(
                    "fuzz {name}: strict (RMAD_FUZZ_STRICT=1): no known divergence accepted"
                );
            } else {
                std::println!(
                    "fuzz {name}: known divergences accepted: {:?}",
                    state::KNOWN
                );
            }
        }
        run_target(name, *target, seed, first, inputs);
    }

    #[test]
    fn wire() {
        long("wire");
    }

    #[test]
    fn step() {
        long("step");
    }

    #[test]
    fn agent() {
        long("agent");
    }

    #[test]
    fn rmpp() {
        long("rmpp");
    }

    #[test]
    fn retry() {
        long("retry");
    }
}
