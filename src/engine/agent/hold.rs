// SPDX-License-Identifier: GPL-2.0

//! The agent's lock, and (in the test flavour) how long each hold of it kept interrupts off.
//!
//! [`Agent::inner`] is a `SpinLockIrq`: while it is held, interrupts are off on that CPU. Work
//! that touches many sends therefore takes it for a bounded batch at a time (see
//! [`BATCH`]). Every hold goes through [`Agent::lock`], so that the test flavour can count the
//! sends processed per hold (suite `rmad_scale` asserts the bound) and, when asked to
//! ([`hold_timing`]), measure the longest hold. Timing reads the clock twice per hold, which
//! is not free (under emulation least of all), so it is off unless a driver turns it on:
//! `make bench` times the code users run, not the measurement.

use super::{
    Agent,
    AgentInner, //
};
use crate::engine::send::{
    BodyBox,
    SendCompletion, //
};
use kernel::sync::{
    lock::spinlock::SpinLockIrqGuard,
    CondVar, //
};
#[cfg(rmad_test)]
use kernel::{
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
    time::{
        Instant,
        Monotonic, //
    },
};

/// The most sends that one hold of an agent's lock processes in work that touches many sends
/// (timeouts, cancellations, handler delivery, cancel-all, unregistration), like the C layer's
/// per-item unlocking but without a lock round trip per send.
pub(crate) const BATCH: u32 = 32;

/// [`BATCH`] as an array length.
pub(super) const BATCH_USIZE: usize = 32;

/// A send taken out for its handler: its body (which holds its record), and what the handler
/// learns.
pub(super) type Due = Option<(BodyBox, SendCompletion)>;

/// Room for one hold's worth of sends to deliver.
pub(super) fn no_due() -> [Due; BATCH_USIZE] {
    core::array::from_fn(|_| None)
}

const _: () = assert!(BATCH as usize == BATCH_USIZE);

/// A hold of an agent's lock (interrupts off).
pub(crate) struct Held<'a> {
    guard: SpinLockIrqGuard<'a, AgentInner>,
    /// When the hold began, if holds are timed.
    #[cfg(rmad_test)]
    since: Option<Instant<Monotonic>>,
}

impl Agent {
    /// Takes the agent's lock.
    pub(crate) fn lock(&self) -> Held<'_> {
        let guard = self.inner.lock();
        Held {
            guard,
            #[cfg(rmad_test)]
            since: timing_start(),
        }
    }
}

impl Held<'_> {
    /// Waits on `cv`, releasing the lock meanwhile (the wait is not part of the hold).
    pub(super) fn wait(&mut self, cv: &CondVar) {
        self.record();
        cv.wait(&mut self.guard);
        #[cfg(rmad_test)]
        {
            self.since = timing_start();
        }
    }

    /// Records the hold so far (test flavour only, when holds are timed).
    fn record(&self) {
        #[cfg(rmad_test)]
        if let Some(since) = self.since {
            note_hold(since.elapsed().as_nanos());
        }
    }
}

/// Whether holds are timed (test flavour).
#[cfg(rmad_test)]
static TIMING: Atomic<i32> = Atomic::new(0);

/// Turns the timing of every agent's lock holds on or off (off at load).
#[cfg(rmad_test)]
pub(crate) fn hold_timing(on: bool) {
    TIMING.store(i32::from(on), Relaxed);
}

/// The start of a hold, if holds are timed.
#[cfg(rmad_test)]
fn timing_start() -> Option<Instant<Monotonic>> {
    (TIMING.load(Relaxed) != 0).then(Instant::now)
}

impl core::ops::Deref for Held<'_> {
    type Target = AgentInner;

    fn deref(&self) -> &AgentInner {
        &self.guard
    }
}

impl core::ops::DerefMut for Held<'_> {
    fn deref_mut(&mut self) -> &mut AgentInner {
        &mut self.guard
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.record();
    }
}

/// The longest timed hold of any agent's lock since [`irqoff_max_ns_take`] last ran, in ns.
#[cfg(rmad_test)]
static MAX_HOLD_NS: Atomic<i64> = Atomic::new(0);

/// The most sends processed in one hold since [`batch_max_take`] last ran.
#[cfg(rmad_test)]
static MAX_BATCH: Atomic<i64> = Atomic::new(0);

/// Raises `max` to `v`.
#[cfg(rmad_test)]
fn raise(max: &Atomic<i64>, v: i64) {
    let mut cur = max.load(Relaxed);
    while v > cur {
        match max.cmpxchg(cur, v, Relaxed) {
            Ok(_) => return,
            Err(seen) => cur = seen,
        }
    }
}

/// Buckets of the histogram of timed holds: bucket 0 counts the holds under 1 µs, bucket
/// `k` ≥ 1 those of 2^(k-1) µs up to 2^k µs, the last one also every longer hold.
#[cfg(rmad_test)]
pub(crate) const HOLD_BUCKETS: usize = 20;

/// The histogram of timed holds since [`hold_histogram_take`] last ran.
#[cfg(rmad_test)]
static HOLD_HISTOGRAM: [Atomic<i64>; HOLD_BUCKETS] = [const { Atomic::new(0) }; HOLD_BUCKETS];

/// The timed holds of more than 100 µs since [`hold_histogram_take`] last ran (the bucket
/// bounds do not fall at 100 µs).
#[cfg(rmad_test)]
static HOLDS_OVER_100US: Atomic<i64> = Atomic::new(0);

/// The bucket of [`HOLD_HISTOGRAM`] that counts a hold of `ns` nanoseconds.
#[cfg(rmad_test)]
fn hold_bucket(ns: i64) -> usize {
    let us = u64::try_from(ns / 1000).unwrap_or(0);
    // The number of bits of `us`: 0 under 1 µs, k for 2^(k-1) ..= 2^k - 1 µs.
    let bits = usize::try_from(u64::BITS - us.leading_zeros()).unwrap_or(HOLD_BUCKETS);
    bits.min(HOLD_BUCKETS - 1)
}

/// Records one hold of `ns` nanoseconds.
#[cfg(rmad_test)]
fn note_hold(ns: i64) {
    raise(&MAX_HOLD_NS, ns);
    HOLD_HISTOGRAM[hold_bucket(ns)].fetch_add(1, Relaxed);
    if ns > 100_000 {
        HOLDS_OVER_100US.fetch_add(1, Relaxed);
    }
}

/// The histogram of the timed holds since the previous call (see [`HOLD_BUCKETS`]) and how
/// many of them lasted more than 100 µs; resets both.
#[cfg(rmad_test)]
pub(crate) fn hold_histogram_take() -> ([i64; HOLD_BUCKETS], i64) {
    let mut h = [0; HOLD_BUCKETS];
    for (v, a) in h.iter_mut().zip(HOLD_HISTOGRAM.iter()) {
        *v = a.xchg(0, Relaxed);
    }
    (h, HOLDS_OVER_100US.xchg(0, Relaxed))
}

/// Records that one hold processed `n` sends (test flavour; nothing in production).
pub(super) fn note_batch(n: u32) {
    #[cfg(rmad_test)]
    raise(&MAX_BATCH, i64::from(n));
    #[cfg(not(rmad_test))]
    let _ = n;
}

/// The longest interrupts-off hold of any agent's lock since the previous call, in
/// nanoseconds; resets the measurement.
#[cfg(rmad_test)]
pub(crate) fn irqoff_max_ns_take() -> i64 {
    MAX_HOLD_NS.xchg(0, Relaxed)
}

/// The most sends that one hold processed since the previous call; resets the count.
#[cfg(rmad_test)]
pub(crate) fn batch_max_take() -> i64 {
    MAX_BATCH.xchg(0, Relaxed)
}
