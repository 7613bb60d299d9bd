// SPDX-License-Identifier: GPL-2.0

//! Fuzz target `retry`: `retry::plan` (`src/mad/retry.rs`) on random rules and random sequences
//! of ticks, against a reference model written from the rules its doc comments state
//! (Documentation/behaviour.md §2.11), never by calling the module's helpers:
//!
//! - the **deadline** is `min(deadline_ms, 300000)` ms from the post (none for 0), a modify
//!   extends it by its `ms`; a wait ends no later than the deadline (0 once it passed) and a
//!   retry may start only before it;
//! - **backoff**: the wait after `n` waits since the post or the last modify is the timeout for
//!   `n < 4`, else the timeout doubled `n - 3` times, capped at `max(60000, timeout)` ms;
//! - **modify**: stored unless one-shot; the count restarts, and a waiting send's wait is the
//!   modify's `ms` (counted as the first wait); a one-shot modify of a send that is not waiting
//!   sets the next wait only.
//!
//! The model keeps its own state (a `u64` count, times as `i128`; the only concession to the
//! implementation's types is that a time past `i64::MAX` reads as `i64::MAX` and the count
//! stops at `u32::MAX`). Each plan is compared field by field with the model's, and the
//! invariants are checked on their own: a wait is never negative and never ends after the
//! deadline (it is 0 once the deadline passed), a send's own waits never exceed
//! `max(60000, timeout)` ms, never fall below the timeout unless the deadline cuts them, and
//! never shrink between two modifies unless the deadline cuts them; `Expired` allows a retry iff
//! there is no deadline or it has not passed; the C layer's rules wait the stored timeout.
//!
//! One input is one send: random rules, a random stored timeout, a post (or, for one input in
//! ten, an arbitrary clock to start from), then up to 200 ticks at non-decreasing times that
//! often land on the deadline or on the end of the current wait.

use super::{
    Disagreement,
    Rng, //
};
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
use std::format;
use std::string::String;
use std::vec::Vec;

/// The name of this target.
const NAME: &str = "retry";

/// Waits of the timeout before backoff doubles (upstream's `IB_MAD_LINEAR_TIMEOUTS_DEFAULT`).
const REF_LINEAR: u64 = 4;
/// The backoff cap, in milliseconds.
const REF_CAP_MS: u64 = 60_000;
/// The longest deadline from the post, in milliseconds.
const REF_MAX_DEADLINE_MS: u64 = 300_000;
/// Nanoseconds per millisecond.
const NS: i128 = 1_000_000;

/// A time of the model as the engine's `i64` clock holds it.
fn sat(t: i128) -> i64 {
    i64::try_from(t).unwrap_or(if t < 0 { i64::MIN } else { i64::MAX })
}

/// The reference model of one send's retry rules.
#[derive(Clone, Copy, Debug)]
struct Model {
    /// Waits begun since the post or the last modify.
    count: u64,
    /// A one-shot modify's timeout, for the next wait.
    once: Option<u32>,
    /// The deadline in nanoseconds, if any.
    deadline: Option<i128>,
}

/// What the model expects of one tick.
#[derive(Debug, PartialEq, Eq)]
struct Expect {
    /// The wait in nanoseconds, if the tick waits.
    wait: Option<i128>,
    /// Whether a retry may start.
    retry: bool,
    /// Whether the modify's timeout is stored.
    store: bool,
}

/// The unbounded wait in milliseconds of the send's own timeout `t` after `n` waits.
fn ref_own_ms(rules: Rules, t: u32, n: u64) -> u64 {
    let t = u64::from(t);
    if !rules.backoff || n < REF_LINEAR {
        return t;
    }
    let limit = t.max(REF_CAP_MS);
    let mut w = t;
    // Doubling `n - 3` times; past 40 doublings every non-zero timeout is at the limit.
    for _ in 0..(n - (REF_LINEAR - 1)).min(40) {
        w = (w * 2).min(limit);
    }
    w
}

impl Model {
    /// A model starting from `clock`, read as the rules define its fields.
    fn from_clock(clock: Clock) -> Self {
        Self {
            count: u64::from(clock.waits),
            once: clock.once_ms,
            deadline: clock.deadline_ns.map(i128::from),
        }
    }

    /// The clock the model's state reads as.
    fn clock(&self) -> Clock {
        Clock {
            waits: u32::try_from(self.count).unwrap_or(u32::MAX),
            once_ms: self.once,
            deadline_ns: self.deadline.map(sat),
        }
    }

    /// `ms` from `now`, cut at the deadline (0 once it passed).
    fn bounded(&self, ms: u64, now: i128) -> i128 {
        let w = i128::from(ms) * NS;
        match self.deadline {
            Some(d) if d - now < w => (d - now).max(0),
            _ => w,
        }
    }

    /// The model's answer to `tick` at `now`.
    fn tick(&mut self, rules: Rules, tick: Tick, now: i128) -> Expect {
        let mut e = Expect {
            wait: None,
            retry: false,
            store: false,
        };
        match tick {
            Tick::Posted => {
                self.count = 0;
                self.once = None;
                self.deadline = if rules.deadline_ms == 0 {
                    None
                } else {
                    let ms = u64::from(rules.deadline_ms).min(REF_MAX_DEADLINE_MS);
                    Some(i128::from(sat(now + i128::from(ms) * NS)))
                };
            }
            Tick::Sent { timeout_ms } => {
                let ms = match self.once.take() {
                    Some(once) => u64::from(once),
                    None => ref_own_ms(rules, timeout_ms, self.count),
                };
                e.wait = Some(self.bounded(ms, now));
                self.count = (self.count + 1).min(u64::from(u32::MAX));
            }
            Tick::Expired => {
                e.retry = match self.deadline {
                    None => true,
                    Some(d) => now < d,
                };
            }
            Tick::Modified {
                ms,
                waiting,
                timeout_ms,
            } => {
                if let Some(d) = self.deadline {
                    self.deadline = Some(i128::from(sat(d + i128::from(ms) * NS)));
                }
                // One-shot only where the send has a timeout of its own to go back to.
                let one_shot = rules.one_shot_modify && timeout_ms != 0;
                e.store = !one_shot;
                self.once = None;
                if waiting {
                    e.wait = Some(self.bounded(u64::from(ms), now));
                    self.count = 1;
                } else {
                    self.count = 0;
                    if one_shot {
                        self.once = Some(ms);
                    }
                }
            }
        }
        e
    }
}

/// Random rules: each opt-in at random, deadlines often at an edge.
fn random_rules(rng: &mut Rng) -> Rules {
    let deadline_ms = match rng.below(4) {
        0 => 0,
        1 => rng.edgy_u32(),
        2 => rng.pick(&[
            1,
            50,
            100,
            400,
            1_000,
            5_000,
            60_000,
            299_999,
            300_000,
            300_001,
            u32::MAX,
        ]),
        _ => u32::try_from(rng.below(600_000)).unwrap_or(0),
    };
    Rules {
        backoff: rng.chance(1, 2),
        one_shot_modify: rng.chance(1, 2),
        deadline_ms,
    }
}

/// A random timeout in milliseconds, often at an edge of the backoff.
fn random_ms(rng: &mut Rng) -> u32 {
    match rng.below(4) {
        0 => rng.edgy_u32(),
        1 => rng.pick(&[
            0,
            1,
            2,
            10,
            50,
            100,
            1_000,
            3_750,
            15_000,
            20_000,
            29_999,
            30_000,
            30_001,
            59_999,
            60_000,
            60_001,
            70_000,
            300_000,
            u32::MAX,
        ]),
        2 => u32::try_from(rng.below(2_000)).unwrap_or(0),
        _ => u32::try_from(rng.below(100_000)).unwrap_or(0),
    }
}

/// A random clock to start from (as if some earlier history had left it).
fn random_clock(rng: &mut Rng) -> Clock {
    Clock {
        waits: if rng.chance(1, 2) {
            rng.edgy_u32()
        } else {
            u32::try_from(rng.below(40)).unwrap_or(0)
        },
        once_ms: rng.chance(1, 3).then(|| random_ms(rng)),
        deadline_ns: match rng.below(4) {
            0 => None,
            1 => Some(rng.pick(&[i64::MIN, -1, 0, 1, i64::MAX - 1, i64::MAX])),
            2 => Some(i64::try_from(rng.below(1 << 42)).unwrap_or(0)),
            _ => Some(i64::from_ne_bytes(rng.next().to_ne_bytes())),
        },
    }
}

/// What the engine would see of the send: whether it waits, and when its wait ends.
struct Sim {
    /// The send waits for its response.
    waiting: bool,
    /// When the current wait ends.
    wait_end: Option<i128>,
    /// The last own wait (nanoseconds) since the post or the last modify, for monotonicity.
    last_own: Option<i128>,
}

/// Checks one plan against the model's answer and the invariants; `before` is the clock the
/// tick was given, `model` the model after the tick.
#[allow(clippy::too_many_arguments)]
fn check(
    rules: Rules,
    before: Clock,
    tick: Tick,
    now: i64,
    p: &Plan,
    want: &Expect,
    model: &Model,
    once_used: bool,
    sim: &mut Sim,
) -> Result<(), String> {
    let got_wait = p.wait_ns.map(i128::from);
    if got_wait != want.wait || p.retry != want.retry || p.store != want.store {
        return Err(format!(
            "{tick:?} at {now} from {before:?}: got wait {:?}, retry {}, store {}; model wait \
             {:?}, retry {}, store {}",
            p.wait_ns, p.retry, p.store, want.wait, want.retry, want.store
        ));
    }
    if p.clock != model.clock() {
        return Err(format!(
            "{tick:?} at {now} from {before:?}: clock {:?}, model {:?}",
            p.clock,
            model.clock()
        ));
    }

    // The invariants, each from the rules alone.
    let now_w = i128::from(now);
    let waits = matches!(
        tick,
        Tick::Sent { .. } | Tick::Modified { waiting: true, .. }
    );
    if p.wait_ns.is_some() != waits {
        return Err(format!("{tick:?}: wait {:?}", p.wait_ns));
    }
    if !matches!(tick, Tick::Expired) && p.retry {
        return Err(format!("{tick:?}: retry allowed outside Expired"));
    }
    if !matches!(tick, Tick::Modified { .. }) && p.store {
        return Err(format!("{tick:?}: store outside Modified"));
    }
    if let Tick::Modified { timeout_ms, .. } = tick {
        if p.store == (rules.one_shot_modify && timeout_ms != 0) {
            return Err(format!("{tick:?}: store {} under {rules:?}", p.store));
        }
    }
    if let Some(w) = got_wait {
        if w < 0 {
            return Err(format!("{tick:?} at {now}: negative wait {w}"));
        }
        if let Some(d) = p.clock.deadline_ns.map(i128::from) {
            if now_w >= d && w != 0 {
                return Err(format!(
                    "{tick:?} at {now}: wait {w} after the deadline {d} passed"
                ));
            }
            if now_w < d && now_w + w > d {
                return Err(format!(
                    "{tick:?} at {now}: wait {w} ends after the deadline {d}"
                ));
            }
        }
    }
    // The C layer's rules on a clock they can reach (an arbitrary starting clock may hold a
    // deadline or a one-shot timeout that they never set).
    let c_layer = rules.is_c_layer() && before.deadline_ns.is_none();
    let cut = |w: i128| {
        p.clock
            .deadline_ns
            .is_some_and(|d| now_w + w >= i128::from(d))
    };
    match tick {
        Tick::Expired => {
            let open = before.deadline_ns.is_none_or(|d| now < d);
            if p.retry != open {
                return Err(format!(
                    "Expired at {now} with deadline {:?}: retry {}",
                    before.deadline_ns, p.retry
                ));
            }
        }
        Tick::Sent { timeout_ms } if !once_used => {
            let w = got_wait.unwrap_or(0);
            let t = i128::from(timeout_ms) * NS;
            let top = i128::from(timeout_ms.max(BACKOFF_CAP_MS)) * NS;
            if w > top {
                return Err(format!(
                    "{tick:?} after {} waits: {w} ns is above max(cap, timeout)",
                    before.waits
                ));
            }
            if w < t && !cut(w) {
                return Err(format!(
                    "{tick:?} after {} waits: {w} ns is below the timeout",
                    before.waits
                ));
            }
            if !rules.backoff && w != t && !cut(w) {
                return Err(format!("{tick:?} without backoff: {w} ns"));
            }
            if c_layer && w != t {
                return Err(format!("{tick:?} under the C layer's rules: {w} ns"));
            }
            if let Some(last) = sim.last_own {
                if w < last && !cut(w) {
                    return Err(format!(
                        "{tick:?} after {} waits: {w} ns, shorter than the previous {last} ns \
                         with no modify between",
                        before.waits
                    ));
                }
            }
            if !cut(w) {
                sim.last_own = Some(w);
            }
        }
        Tick::Sent { .. } => {}
        Tick::Modified { ms, waiting, .. } => {
            sim.last_own = None;
            let ext = before
                .deadline_ns
                .map(|d| sat(i128::from(d) + i128::from(ms) * NS));
            if p.clock.deadline_ns != ext {
                return Err(format!(
                    "{tick:?}: deadline {:?} → {:?}, not extended by {ms} ms",
                    before.deadline_ns, p.clock.deadline_ns
                ));
            }
            if waiting && !cut(got_wait.unwrap_or(0)) && got_wait != Some(i128::from(ms) * NS) {
                return Err(format!("{tick:?}: wait {:?}, not the modify's", p.wait_ns));
            }
            if c_layer && waiting && got_wait != Some(i128::from(ms) * NS) {
                return Err(format!(
                    "{tick:?} under the C layer's rules: {:?}",
                    p.wait_ns
                ));
            }
        }
        Tick::Posted => {
            sim.last_own = None;
            let want = (rules.deadline_ms != 0)
                .then(|| sat(now_w + i128::from(rules.deadline_ms.min(MAX_DEADLINE_MS)) * NS));
            if p.clock
                != (Clock {
                    waits: 0,
                    once_ms: None,
                    deadline_ns: want,
                })
            {
                return Err(format!("Posted at {now}: clock {:?}", p.clock));
            }
        }
    }
    if let Some(w) = got_wait {
        sim.wait_end = Some(now_w + w);
    }
    Ok(())
}

/// The next time: often the same, the end of the current wait, or at the deadline's edge.
fn next_now(rng: &mut Rng, now: i64, sim: &Sim, clock: &Clock) -> i64 {
    let edge = |rng: &mut Rng, t: i128| {
        let t = t + i128::from(rng.pick(&[-1i64, 0, 0, 1]));
        sat(t.max(i128::from(now)))
    };
    match rng.below(10) {
        0 | 1 => now,
        2 | 3 => match sim.wait_end {
            Some(t) => edge(rng, t),
            None => now,
        },
        4 => match clock.deadline_ns {
            Some(d) => edge(rng, i128::from(d)),
            None => now,
        },
        5 => now.saturating_add(i64::try_from(rng.below(1_000)).unwrap_or(0)),
        6 | 7 => now.saturating_add(i64::try_from(rng.below(2_000)).unwrap_or(0) * 1_000_000),
        8 => now.saturating_add(i64::try_from(rng.below(200_000)).unwrap_or(0) * 1_000_000),
        _ => now.saturating_add(i64::try_from(rng.below(1 << 40)).unwrap_or(0)),
    }
}

/// One send: `Err` with what disagreed and the ticks that led to it.
fn run_one(rng: &mut Rng) -> Result<(), (String, String)> {
    let rules = random_rules(rng);
    let mut stored = random_ms(rng);
    let mut now: i64 = match rng.below(8) {
        0 => 0,
        1 => i64::MAX - i64::try_from(rng.below(1 << 40)).unwrap_or(0),
        _ => i64::try_from(rng.below(1 << 50)).unwrap_or(0),
    };
    let arbitrary = rng.chance(1, 10);
    let mut clock = if arbitrary {
        random_clock(rng)
    } else {
        Clock::default()
    };
    let mut model = Model::from_clock(clock);
    let mut sim = Sim {
        waiting: false,
        wait_end: None,
        last_own: None,
    };
    let steps = if rng.chance(1, 4) {
        rng.below(200)
    } else {
        rng.below(40)
    };
    let mut log: Vec<String> = Vec::new();
    let start = clock;
    let start_timeout = stored;
    let describe = |log: &[String]| {
        format!(
            "rules {rules:?}, timeout {start_timeout} ms, from {start:?}: {}",
            log.join(", ")
        )
    };
    for step in 0..=steps {
        let tick = if step == 0 && !arbitrary {
            Tick::Posted
        } else {
            now = next_now(rng, now, &sim, &clock);
            if rng.chance(1, 50) {
                stored = random_ms(rng);
                sim.last_own = None;
                log.push(format!("timeout := {stored}"));
            }
            match rng.below(20) {
                0 => Tick::Posted,
                1..=8 => Tick::Sent { timeout_ms: stored },
                9..=14 => Tick::Expired,
                _ => Tick::Modified {
                    ms: random_ms(rng).max(1),
                    waiting: if rng.chance(7, 8) {
                        sim.waiting
                    } else {
                        !sim.waiting
                    },
                    timeout_ms: stored,
                },
            }
        };
        log.push(format!("{tick:?} at {now}"));
        let once_used = matches!(tick, Tick::Sent { .. }) && model.once.is_some();
        let want = model.tick(rules, tick, i128::from(now));
        let before = clock;
        let p = std::panic::catch_unwind(|| plan(rules, before, tick, now))
            .map_err(|_| (String::from("plan panicked"), describe(&log)))?;
        check(
            rules, before, tick, now, &p, &want, &model, once_used, &mut sim,
        )
        .map_err(|what| (what, describe(&log)))?;
        if let Tick::Modified { ms, .. } = tick {
            if p.store {
                stored = ms;
            }
        }
        sim.waiting = match tick {
            Tick::Sent { .. } | Tick::Modified { waiting: true, .. } => true,
            Tick::Modified { waiting: false, .. } => sim.waiting,
            Tick::Expired | Tick::Posted => false,
        };
        if !sim.waiting {
            sim.wait_end = None;
        }
        // The engine keeps the clock the plan returns.
        clock = p.clock;
    }
    Ok(())
}

/// Runs inputs `first..first + inputs` of seed `seed`.
pub(crate) fn run_range(seed: u64, first: u64, inputs: u64) -> Result<u64, Disagreement> {
    for i in first..first.saturating_add(inputs) {
        let mut rng = Rng::for_input(seed, i);
        if let Err((what, reproducer)) = run_one(&mut rng) {
            return Err(Disagreement {
                target: NAME,
                seed,
                input: i,
                what,
                reproducer,
            });
        }
    }
    Ok(inputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model's constants are the module's, and the model gives the hand-written schedules,
    /// so that a wrong model cannot hide a wrong plan.
    #[test]
    fn model_matches_worked_cases() {
        assert_eq!(u64::from(LINEAR_WAITS), REF_LINEAR);
        assert_eq!(u64::from(BACKOFF_CAP_MS), REF_CAP_MS);
        assert_eq!(u64::from(MAX_DEADLINE_MS), REF_MAX_DEADLINE_MS);
        let backoff = Rules {
            backoff: true,
            ..Rules::default()
        };
        let own: Vec<u64> = (0..8).map(|n| ref_own_ms(backoff, 10, n)).collect();
        assert_eq!(own, [10, 10, 10, 10, 20, 40, 80, 160]);
        let own: Vec<u64> = (3..7).map(|n| ref_own_ms(backoff, 20_000, n)).collect();
        assert_eq!(own, [20_000, 40_000, 60_000, 60_000]);
        assert_eq!(ref_own_ms(backoff, 70_000, 10), 70_000);
        assert_eq!(
            ref_own_ms(backoff, u32::MAX, u64::from(u32::MAX)),
            u64::from(u32::MAX)
        );
        assert_eq!(ref_own_ms(Rules::default(), 10, 100), 10);

        let rules = Rules {
            deadline_ms: 400,
            ..Rules::default()
        };
        let mut m = Model::from_clock(Clock::default());
        m.tick(rules, Tick::Posted, 0);
        assert_eq!(m.deadline, Some(400 * NS));
        let e = m.tick(rules, Tick::Sent { timeout_ms: 50 }, 380 * NS);
        assert_eq!(e.wait, Some(20 * NS));
        assert!(m.tick(rules, Tick::Expired, 399 * NS).retry);
        assert!(!m.tick(rules, Tick::Expired, 400 * NS).retry);
        let e = m.tick(
            rules,
            Tick::Modified {
                ms: 50,
                waiting: true,
                timeout_ms: 20,
            },
            420 * NS,
        );
        assert_eq!(e.wait, Some(30 * NS));
        assert!(e.store);
        assert_eq!(m.count, 1);
    }

    /// The short run reaches the interesting places: waits cut by the deadline, retries refused,
    /// capped backoff, one-shot waits.
    #[test]
    fn reaches_the_edges() {
        let (mut cut, mut refused, mut capped, mut once) = (0u32, 0u32, 0u32, 0u32);
        for i in 0..3_000 {
            let mut rng = Rng::for_input(0x0034_0001, i);
            let rules = random_rules(&mut rng);
            let timeout = random_ms(&mut rng);
            let mut clock = plan(rules, Clock::default(), Tick::Posted, 0).clock;
            let mut now = 0i64;
            for _ in 0..30 {
                if clock.once_ms.is_some() {
                    once += 1;
                }
                let p = plan(
                    rules,
                    clock,
                    Tick::Sent {
                        timeout_ms: timeout,
                    },
                    now,
                );
                let w = p.wait_ns.unwrap_or(0);
                let ends = i128::from(now) + i128::from(w);
                if clock.deadline_ns.is_some_and(|d| ends >= i128::from(d)) {
                    cut += 1;
                }
                if rules.backoff && w == i64::from(BACKOFF_CAP_MS) * 1_000_000 {
                    capped += 1;
                }
                clock = p.clock;
                now = now.saturating_add(w);
                if !plan(rules, clock, Tick::Expired, now).retry {
                    refused += 1;
                    break;
                }
                if rng.chance(1, 10) && rules.one_shot_modify {
                    clock = plan(
                        rules,
                        clock,
                        Tick::Modified {
                            ms: 5,
                            waiting: false,
                            timeout_ms: timeout,
                        },
                        now,
                    )
                    .clock;
                }
            }
        }
        assert!(
            cut > 100 && refused > 100 && capped > 100 && once > 100,
            "cut {cut}, refused {refused}, capped {capped}, one-shot {once}"
        );
    }
}
