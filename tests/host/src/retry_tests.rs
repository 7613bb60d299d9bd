// SPDX-License-Identifier: GPL-2.0

//! The retry rules of `src/mad/retry.rs` (Documentation/behaviour.md §2.11) on schedules written
//! by hand from the rules its doc comments state: the C layer's linear waits, exponential
//! backoff after four waits capped at 60 s but never below the send's timeout, the deadline
//! (clamped to 5 minutes, extended by a modify, bounding every wait and every retry), and a
//! modify under each mode (stored or one-shot, waiting or not, the backoff count restarted).
//!
//! The expected values are literals, never computed with the module's helpers; the fuzz target
//! `retry` (`fuzz/retry.rs`) checks the same rules against a model on random sequences.

use crate::fuzz::Rng;
use crate::mad::retry::{
    plan,
    Clock,
    Plan,
    Rules,
    Tick,
    BACKOFF_CAP_MS,
    LINEAR_WAITS,
    MAX_DEADLINE_MS, //
};
use std::vec::Vec;

/// Nanoseconds per millisecond.
const MS: i64 = 1_000_000;

/// The C layer's rules.
const C_LAYER: Rules = Rules {
    backoff: false,
    one_shot_modify: false,
    deadline_ms: 0,
};

/// Backoff alone.
const BACKOFF: Rules = Rules {
    backoff: true,
    one_shot_modify: false,
    deadline_ms: 0,
};

/// One-shot modify alone.
const ONE_SHOT: Rules = Rules {
    backoff: false,
    one_shot_modify: true,
    deadline_ms: 0,
};

/// Backoff and one-shot modify.
const BACKOFF_ONE_SHOT: Rules = Rules {
    backoff: true,
    one_shot_modify: true,
    deadline_ms: 0,
};

/// A deadline alone.
fn deadline(ms: u32) -> Rules {
    Rules {
        deadline_ms: ms,
        ..C_LAYER
    }
}

/// One send as the engine drives it: its rules, its clock and its stored timeout, which a modify
/// replaces when the plan says to store it.
struct Send {
    rules: Rules,
    clock: Clock,
    timeout_ms: u32,
}

impl Send {
    /// A send with `timeout_ms`, posted at `now_ns`.
    fn post(rules: Rules, timeout_ms: u32, now_ns: i64) -> Self {
        let p = plan(rules, Clock::default(), Tick::Posted, now_ns);
        assert_eq!(p.wait_ns, None, "Posted gives no wait");
        assert!(!p.retry && !p.store, "Posted: {p:?}");
        assert_eq!(p.clock.waits, 0);
        assert_eq!(p.clock.once_ms, None);
        Self {
            rules,
            clock: p.clock,
            timeout_ms,
        }
    }

    /// A transmission completed at `now_ns`: the wait, in nanoseconds.
    fn sent(&mut self, now_ns: i64) -> i64 {
        let p = plan(
            self.rules,
            self.clock,
            Tick::Sent {
                timeout_ms: self.timeout_ms,
            },
            now_ns,
        );
        assert!(!p.retry && !p.store, "Sent: {p:?}");
        assert_eq!(
            p.clock.deadline_ns, self.clock.deadline_ns,
            "Sent moved the deadline"
        );
        self.clock = p.clock;
        p.wait_ns.expect("Sent gives a wait")
    }

    /// `n` transmissions at `now_ns`: their waits in milliseconds.
    fn sent_ms(&mut self, n: usize, now_ns: i64) -> Vec<i64> {
        (0..n)
            .map(|_| {
                let w = self.sent(now_ns);
                assert_eq!(w % MS, 0, "a whole number of milliseconds");
                w / MS
            })
            .collect()
    }

    /// Whether a retry may start after a wait expired at `now_ns`.
    fn expired(&self, now_ns: i64) -> bool {
        let p = plan(self.rules, self.clock, Tick::Expired, now_ns);
        assert_eq!(p.clock, self.clock, "Expired changed the clock");
        assert_eq!(p.wait_ns, None);
        assert!(!p.store);
        p.retry
    }

    /// `modify(ms)` at `now_ns`, applied as the engine does (the timeout stored when the plan
    /// says so).
    fn modify(&mut self, ms: u32, waiting: bool, now_ns: i64) -> Plan {
        let p = plan(
            self.rules,
            self.clock,
            Tick::Modified {
                ms,
                waiting,
                timeout_ms: self.timeout_ms,
            },
            now_ns,
        );
        assert!(!p.retry, "Modified: {p:?}");
        assert_eq!(
            p.wait_ns.is_some(),
            waiting,
            "a wait only while waiting: {p:?}"
        );
        self.clock = p.clock;
        if p.store {
            self.timeout_ms = ms;
        }
        p
    }
}

/// The constants are upstream's.
#[test]
fn constants() {
    assert_eq!(LINEAR_WAITS, 4);
    assert_eq!(BACKOFF_CAP_MS, 60_000);
    assert_eq!(MAX_DEADLINE_MS, 300_000);
}

/// Only the default rules are the C layer's.
#[test]
fn is_c_layer() {
    assert!(Rules::default().is_c_layer());
    assert!(C_LAYER.is_c_layer());
    assert!(!BACKOFF.is_c_layer());
    assert!(!ONE_SHOT.is_c_layer());
    assert!(!deadline(1).is_c_layer());
    assert!(!deadline(u32::MAX).is_c_layer());
}

/// The C layer's rules: every wait is the stored timeout, a retry is always allowed, there is
/// no deadline.
#[test]
fn linear_default_rules() {
    for timeout in [0u32, 1, 10, 100, 20_000, 60_000, 70_000, u32::MAX] {
        let mut s = Send::post(Rules::default(), timeout, 7);
        assert_eq!(s.clock.deadline_ns, None);
        for i in 0..40i64 {
            let now = 7 + i * 1000 * MS;
            assert_eq!(
                s.sent(now),
                i64::from(timeout) * MS,
                "timeout {timeout}, wait {i}"
            );
            assert!(s.expired(now + i64::from(timeout) * MS));
        }
        assert_eq!(s.clock.waits, 40);
        assert!(s.expired(i64::MAX));
        assert!(s.expired(0));
    }
}

/// One-shot modify alone changes nothing about the waits without a modify.
#[test]
fn linear_one_shot_without_modify() {
    let mut s = Send::post(ONE_SHOT, 250, 0);
    assert_eq!(s.sent_ms(12, 0), [250; 12]);
}

/// Backoff from timeout 10: four waits of 10, then doubling.
#[test]
fn backoff_doubles_after_four() {
    let mut s = Send::post(BACKOFF, 10, 0);
    assert_eq!(s.sent_ms(8, 0), [10, 10, 10, 10, 20, 40, 80, 160]);
    assert_eq!(
        s.sent_ms(6, 0),
        [320, 640, 1280, 2560, 5120, 10240],
        "waits 9 to 14"
    );
    assert_eq!(
        s.sent_ms(4, 0),
        [20480, 40960, 60000, 60000],
        "capped at 60 s"
    );
    assert_eq!(s.clock.waits, 18);
}

/// The time at which a wait happens does not matter without a deadline.
#[test]
fn backoff_ignores_the_time() {
    let mut s = Send::post(BACKOFF, 10, 5 * MS);
    let mut now = 5 * MS;
    let mut got = Vec::new();
    for _ in 0..8 {
        let w = s.sent(now);
        got.push(w / MS);
        now += w + 3 * MS;
        assert!(s.expired(now));
    }
    assert_eq!(got, [10, 10, 10, 10, 20, 40, 80, 160]);
}

/// The cap: 60 s.
#[test]
fn backoff_cap() {
    let mut s = Send::post(BACKOFF, 20_000, 0);
    assert_eq!(
        s.sent_ms(8, 0),
        [20_000, 20_000, 20_000, 20_000, 40_000, 60_000, 60_000, 60_000]
    );
    let mut s = Send::post(BACKOFF, 15_000, 0);
    assert_eq!(
        s.sent_ms(8, 0),
        [15_000, 15_000, 15_000, 15_000, 30_000, 60_000, 60_000, 60_000]
    );
    let mut s = Send::post(BACKOFF, 30_001, 0);
    assert_eq!(
        s.sent_ms(7, 0),
        [30_001, 30_001, 30_001, 30_001, 60_000, 60_000, 60_000]
    );
    let mut s = Send::post(BACKOFF, 30_000, 0);
    assert_eq!(
        s.sent_ms(7, 0),
        [30_000, 30_000, 30_000, 30_000, 60_000, 60_000, 60_000]
    );
    let mut s = Send::post(BACKOFF, 60_000, 0);
    assert_eq!(s.sent_ms(10, 0), [60_000; 10]);
}

/// A timeout above the cap: backoff never makes a wait shorter than the timeout.
#[test]
fn backoff_never_below_timeout() {
    let mut s = Send::post(BACKOFF, 70_000, 0);
    assert_eq!(s.sent_ms(12, 0), [70_000; 12]);
    let mut s = Send::post(BACKOFF, 60_001, 0);
    assert_eq!(s.sent_ms(12, 0), [60_001; 12]);
}

/// A timeout of 0 stays 0.
#[test]
fn backoff_timeout_zero() {
    let mut s = Send::post(BACKOFF, 0, 0);
    assert_eq!(s.sent_ms(40, 0), [0; 40]);
}

/// Nothing overflows: the largest timeout, the largest counts.
#[test]
fn backoff_overflow() {
    let mut s = Send::post(BACKOFF, u32::MAX, 0);
    for _ in 0..100 {
        assert_eq!(s.sent(0), i64::from(u32::MAX) * MS);
    }
    assert_eq!(s.clock.waits, 100);

    // The count at and near its top: the cap (or the timeout above it), and the count saturates.
    for waits in [
        31u32,
        32,
        33,
        34,
        35,
        36,
        63,
        64,
        1000,
        u32::MAX - 1,
        u32::MAX,
    ] {
        for (timeout, want) in [
            (1u32, 60_000i64),
            (7, 60_000),
            (59_999, 60_000),
            (60_000, 60_000),
            (70_000, 70_000),
            (u32::MAX, i64::from(u32::MAX)),
            (0, 0),
        ] {
            let clock = Clock {
                waits,
                ..Clock::default()
            };
            let p = plan(
                BACKOFF,
                clock,
                Tick::Sent {
                    timeout_ms: timeout,
                },
                0,
            );
            assert_eq!(
                p.wait_ns,
                Some(want * MS),
                "waits {waits}, timeout {timeout}"
            );
            assert_eq!(p.clock.waits, waits.saturating_add(1));
        }
    }

    // Just below the cap at each doubling: timeout 1 gives 2, 4, ... 32768, then 60000.
    let mut s = Send::post(BACKOFF, 1, 0);
    assert_eq!(s.sent_ms(4, 0), [1, 1, 1, 1]);
    let want: Vec<i64> = (1..=15).map(|k| 1i64 << k).collect();
    assert_eq!(s.sent_ms(15, 0), want);
    assert_eq!(s.sent_ms(3, 0), [60_000; 3]);

    // The largest times: the deadline saturates rather than wrapping.
    let s = Send::post(deadline(1000), 10, i64::MAX - 5);
    assert_eq!(s.clock.deadline_ns, Some(i64::MAX));
}

/// The deadline of the brief: 400 ms from a post at 0, a wait of 50 from 380 ms ends by it.
#[test]
fn deadline_bounds_waits() {
    let mut s = Send::post(deadline(400), 50, 0);
    assert_eq!(s.clock.deadline_ns, Some(400 * MS));
    assert_eq!(s.sent(0), 50 * MS);
    assert_eq!(s.sent(100 * MS), 50 * MS);
    assert_eq!(s.sent(350 * MS), 50 * MS, "ends exactly at the deadline");
    assert_eq!(s.sent(380 * MS), 20 * MS);
    assert_eq!(s.sent(400 * MS - 1), 1);
    assert_eq!(s.sent(400 * MS), 0, "at the deadline");
    assert_eq!(s.sent(401 * MS), 0, "after the deadline");
    assert_eq!(s.sent(i64::MAX), 0);
    assert_eq!(s.clock.waits, 8);
}

/// No retry starts at or after the deadline.
#[test]
fn deadline_stops_retries() {
    let s = Send::post(deadline(400), 50, 0);
    assert!(s.expired(0));
    assert!(s.expired(380 * MS));
    assert!(s.expired(400 * MS - 1));
    assert!(!s.expired(400 * MS));
    assert!(!s.expired(400 * MS + 1));
    assert!(!s.expired(i64::MAX));

    // Posted later: the deadline counts from the post.
    let mut s = Send::post(deadline(400), 50, 5_000 * MS);
    assert_eq!(s.clock.deadline_ns, Some(5_400 * MS));
    assert!(s.expired(5_399 * MS));
    assert!(!s.expired(5_400 * MS));
    assert_eq!(s.sent(5_380 * MS), 20 * MS);
}

/// A deadline above 5 minutes counts as 5 minutes; 0 is none.
#[test]
fn deadline_clamped() {
    for (ms, want) in [
        (1u32, Some(1i64)),
        (299_999, Some(299_999)),
        (300_000, Some(300_000)),
        (300_001, Some(300_000)),
        (1_000_000, Some(300_000)),
        (u32::MAX, Some(300_000)),
        (0, None),
    ] {
        let s = Send::post(deadline(ms), 10, 3 * MS);
        assert_eq!(
            s.clock.deadline_ns,
            want.map(|w| 3 * MS + w * MS),
            "deadline_ms {ms}"
        );
    }
    // A long timeout cannot outlive the clamped deadline.
    let mut s = Send::post(deadline(u32::MAX), u32::MAX, 0);
    assert_eq!(s.sent(0), 300_000 * MS);
    assert_eq!(s.sent(299_000 * MS), 1_000 * MS);
}

/// Backoff within a deadline: the doubling wait is cut at the deadline.
#[test]
fn deadline_with_backoff() {
    let rules = Rules {
        backoff: true,
        one_shot_modify: false,
        deadline_ms: 1000,
    };
    let mut s = Send::post(rules, 100, 0);
    let mut now = 0;
    let mut got = Vec::new();
    while s.expired(now) {
        let w = s.sent(now);
        got.push(w / MS);
        now += w;
    }
    // 0, 100, 200, 300 → 400 (+200) → 600 (+400) → 1000: no retry at the deadline.
    assert_eq!(got, [100, 100, 100, 100, 200, 400]);
    assert_eq!(now, 1000 * MS);

    // Retries that start late get what is left.
    let mut s = Send::post(rules, 100, 0);
    assert_eq!(s.sent_ms(4, 0), [100, 100, 100, 100]);
    assert_eq!(s.sent(500 * MS), 200 * MS);
    assert_eq!(s.sent(700 * MS), 300 * MS, "400 cut to the 300 left");
    assert_eq!(s.sent(999 * MS), MS);
}

/// The C layer's modify: the timeout is stored, a waiting send waits it from now, the count
/// restarts.
#[test]
fn modify_default_rules() {
    let mut s = Send::post(C_LAYER, 100, 0);
    assert_eq!(s.sent_ms(3, 0), [100, 100, 100]);
    let p = s.modify(30, true, 10 * MS);
    assert!(p.store);
    assert_eq!(p.wait_ns, Some(30 * MS));
    assert_eq!(
        p.clock.waits, 1,
        "the modify's wait is the first of the new count"
    );
    assert_eq!(p.clock.once_ms, None);
    assert_eq!(p.clock.deadline_ns, None);
    assert_eq!(s.timeout_ms, 30);
    assert_eq!(s.sent_ms(3, 0), [30, 30, 30]);

    let p = s.modify(77, false, 20 * MS);
    assert!(p.store);
    assert_eq!(p.wait_ns, None);
    assert_eq!(p.clock.waits, 0);
    assert_eq!(p.clock.once_ms, None);
    assert_eq!(s.sent_ms(5, 0), [77; 5]);
}

/// One-shot modify: nothing stored; waiting, it sets the current wait; not waiting, the next.
#[test]
fn modify_one_shot() {
    // Waiting: the current wait only.
    let mut s = Send::post(ONE_SHOT, 100, 0);
    assert_eq!(s.sent_ms(2, 0), [100, 100]);
    let p = s.modify(5_000, true, 0);
    assert!(!p.store);
    assert_eq!(p.wait_ns, Some(5_000 * MS));
    assert_eq!(
        p.clock.once_ms, None,
        "a waiting modify leaves nothing for later"
    );
    assert_eq!(p.clock.waits, 1);
    assert_eq!(s.timeout_ms, 100);
    assert_eq!(s.sent_ms(3, 0), [100, 100, 100]);

    // Not waiting (in flight or held back): the next wait only.
    let p = s.modify(5_000, false, 0);
    assert!(!p.store);
    assert_eq!(p.wait_ns, None);
    assert_eq!(p.clock.once_ms, Some(5_000));
    assert_eq!(p.clock.waits, 0);
    assert!(s.expired(0), "Expired keeps the one-shot timeout");
    assert_eq!(s.clock.once_ms, Some(5_000));
    assert_eq!(s.sent_ms(3, 0), [5_000, 100, 100]);
    assert_eq!(s.clock.once_ms, None);

    // The last of two modifies before the wait counts.
    s.modify(7, false, 0);
    s.modify(9, false, 0);
    assert_eq!(s.sent_ms(2, 0), [9, 100]);

    // A waiting modify after a modify that was not: its wait, and nothing left over.
    s.modify(7, false, 0);
    let p = s.modify(11, true, 0);
    assert_eq!(p.wait_ns, Some(11 * MS));
    assert_eq!(p.clock.once_ms, None);
    assert_eq!(s.sent_ms(2, 0), [100, 100]);
}

/// A modify extends the deadline by its timeout, and a waiting modify's wait ends by the
/// extended deadline.
#[test]
fn modify_extends_deadline() {
    for rules in [
        deadline(400),
        Rules {
            one_shot_modify: true,
            ..deadline(400)
        },
        Rules {
            backoff: true,
            one_shot_modify: true,
            deadline_ms: 400,
        },
    ] {
        let mut s = Send::post(rules, 50, 0);
        assert_eq!(s.sent(380 * MS), 20 * MS);
        let p = s.modify(50, true, 380 * MS);
        assert_eq!(p.clock.deadline_ns, Some(450 * MS), "{rules:?}");
        assert_eq!(p.wait_ns, Some(50 * MS), "380 + 50 ends before 450");
        assert!(s.expired(449 * MS));
        assert!(!s.expired(450 * MS));

        // Cut at the extended deadline.
        let mut s = Send::post(rules, 50, 0);
        let p = s.modify(50, true, 420 * MS);
        assert_eq!(p.clock.deadline_ns, Some(450 * MS));
        assert_eq!(p.wait_ns, Some(30 * MS));

        // Past even the extended deadline: no wait.
        let mut s = Send::post(rules, 50, 0);
        let p = s.modify(50, true, 500 * MS);
        assert_eq!(p.clock.deadline_ns, Some(450 * MS));
        assert_eq!(p.wait_ns, Some(0));
        assert!(!s.expired(500 * MS));

        // Not waiting: the deadline moves, the next wait ends by it.
        let mut s = Send::post(rules, 50, 0);
        let p = s.modify(100, false, 390 * MS);
        assert_eq!(p.clock.deadline_ns, Some(500 * MS));
        assert_eq!(s.sent(450 * MS), 50 * MS);
        assert!(s.expired(499 * MS));
        assert!(!s.expired(500 * MS));
    }

    // Modifies add up, and the extension is not clamped to 5 minutes (only the deadline of the
    // post is).
    let mut s = Send::post(deadline(300_000), 10, 0);
    s.modify(100_000, false, 0);
    s.modify(200_000, true, 0);
    assert_eq!(s.clock.deadline_ns, Some(600_000 * MS));

    // Without a deadline a modify makes none.
    let mut s = Send::post(BACKOFF_ONE_SHOT, 10, 0);
    let p = s.modify(u32::MAX, true, 0);
    assert_eq!(p.clock.deadline_ns, None);
    assert_eq!(p.wait_ns, Some(i64::from(u32::MAX) * MS));

    // The extension saturates.
    let mut s = Send::post(deadline(1000), 10, i64::MAX - 2_000 * MS);
    let p = s.modify(u32::MAX, true, i64::MAX - 10);
    assert_eq!(p.clock.deadline_ns, Some(i64::MAX));
    assert_eq!(p.wait_ns, Some(10));
}

/// With backoff, a modify restarts the count: waiting, its own wait is the first of the four;
/// not waiting, the next wait is.
#[test]
fn modify_restarts_backoff() {
    // Stored (the C layer's modify): the new timeout backs off from scratch.
    let mut s = Send::post(BACKOFF, 10, 0);
    assert_eq!(s.sent_ms(6, 0), [10, 10, 10, 10, 20, 40]);
    let p = s.modify(30, true, 0);
    assert_eq!(p.wait_ns, Some(30 * MS));
    assert_eq!(s.sent_ms(5, 0), [30, 30, 30, 60, 120]);

    let mut s = Send::post(BACKOFF, 10, 0);
    assert_eq!(s.sent_ms(6, 0), [10, 10, 10, 10, 20, 40]);
    let p = s.modify(30, false, 0);
    assert_eq!(p.wait_ns, None);
    assert_eq!(s.sent_ms(6, 0), [30, 30, 30, 30, 60, 120]);

    // One-shot: the modify's wait, then the send's own timeout from the restarted count.
    let mut s = Send::post(BACKOFF_ONE_SHOT, 10, 0);
    assert_eq!(s.sent_ms(6, 0), [10, 10, 10, 10, 20, 40]);
    let p = s.modify(500, true, 0);
    assert_eq!(p.wait_ns, Some(500 * MS));
    assert_eq!(s.sent_ms(5, 0), [10, 10, 10, 20, 40]);

    let mut s = Send::post(BACKOFF_ONE_SHOT, 10, 0);
    assert_eq!(s.sent_ms(6, 0), [10, 10, 10, 10, 20, 40]);
    let p = s.modify(500, false, 0);
    assert_eq!(p.wait_ns, None);
    assert_eq!(s.sent_ms(6, 0), [500, 10, 10, 10, 20, 40]);

    // Even from the cap.
    let mut s = Send::post(BACKOFF_ONE_SHOT, 20_000, 0);
    assert_eq!(
        s.sent_ms(7, 0),
        [20_000, 20_000, 20_000, 20_000, 40_000, 60_000, 60_000]
    );
    s.modify(1, true, 0);
    assert_eq!(s.sent_ms(5, 0), [20_000, 20_000, 20_000, 40_000, 60_000]);
}

/// A post starts a fresh clock whatever the old one held.
#[test]
fn posted_resets_the_clock() {
    let old = Clock {
        waits: 17,
        once_ms: Some(3),
        deadline_ns: Some(5),
    };
    let p = plan(BACKOFF_ONE_SHOT, old, Tick::Posted, 1_000);
    assert_eq!(p.clock, Clock::default());
    let p = plan(deadline(2), old, Tick::Posted, 1_000);
    assert_eq!(
        p.clock,
        Clock {
            waits: 0,
            once_ms: None,
            deadline_ns: Some(1_000 + 2 * MS),
        }
    );
}

/// The default rules give the C layer's waits on random sequences: every wait is the stored
/// timeout (which every modify replaces), a modify is stored, and a retry is always allowed.
#[test]
fn default_rules_are_the_c_layer() {
    let pick_ms = |rng: &mut Rng| -> u32 {
        if rng.chance(1, 2) {
            rng.pick(&[0, 1, 10, 50, 1000, 20_000, 60_000, 70_000, u32::MAX])
        } else {
            rng.edgy_u32()
        }
    };
    let mut steps = 0u64;
    for input in 0..2_000u64 {
        let mut rng = Rng::for_input(0x0034_C1A7, input);
        let rules = Rules::default();
        let mut stored = pick_ms(&mut rng);
        let mut now: i64 = i64::try_from(rng.below(1 << 40)).unwrap_or(0);
        let mut clock = plan(rules, Clock::default(), Tick::Posted, now).clock;
        assert_eq!(clock.deadline_ns, None);
        for _ in 0..rng.below(80) {
            now = now.saturating_add(i64::try_from(rng.below(1 << 36)).unwrap_or(0));
            let tick = match rng.below(4) {
                0 | 1 => Tick::Sent { timeout_ms: stored },
                2 => Tick::Expired,
                _ => Tick::Modified {
                    ms: pick_ms(&mut rng).max(1),
                    waiting: rng.chance(1, 2),
                    timeout_ms: stored,
                },
            };
            let p = plan(rules, clock, tick, now);
            match tick {
                Tick::Sent { timeout_ms } => {
                    assert_eq!(
                        p.wait_ns,
                        Some(i64::from(timeout_ms) * MS),
                        "{input}: {tick:?}"
                    );
                }
                Tick::Expired => assert!(p.retry, "{input}: Expired at {now}"),
                Tick::Modified { ms, waiting, .. } => {
                    assert!(p.store, "{input}: {tick:?}");
                    stored = ms;
                    let want = waiting.then_some(i64::from(ms) * MS);
                    assert_eq!(p.wait_ns, want, "{input}: {tick:?}");
                }
                Tick::Posted => unreachable!(),
            }
            assert_eq!(p.clock.deadline_ns, None);
            assert_eq!(p.clock.once_ms, None);
            if !matches!(tick, Tick::Expired) {
                assert!(!p.retry);
            }
            clock = p.clock;
            steps += 1;
        }
    }
    assert!(steps > 50_000, "{steps} steps");
}

/// A one-shot modify of a send that expects no response (timeout 0) keeps its timeout, as the
/// C layer does: the send has no wait of its own to go back to.
#[test]
fn one_shot_modify_of_a_send_without_a_response_is_kept() {
    let rules = Rules {
        one_shot_modify: true,
        ..C_LAYER
    };
    let modify = |timeout_ms| Tick::Modified {
        ms: 300,
        waiting: false,
        timeout_ms,
    };
    let p = plan(rules, Clock::default(), modify(0), 0);
    assert!(p.store);
    assert_eq!(p.clock.once_ms, None);
    let p = plan(rules, Clock::default(), modify(100), 0);
    assert!(!p.store);
    assert_eq!(p.clock.once_ms, Some(300));
}
