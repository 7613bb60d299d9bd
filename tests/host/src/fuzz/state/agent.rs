// SPDX-License-Identifier: GPL-2.0

//! The `agent` target: random walks of a simulated agent ([`sim`]), each compared step by step
//! with the model of [`super`], shrunk when one fails.

#[path = "agent/sim.rs"]
mod sim;

use super::{
    strict,
    ENGINE_UNREACHABLE,
    TRANSITIONS, //
};
use crate::fuzz::{
    Disagreement,
    Rng, //
};
use crate::mad::state::WcStatus;
use sim::Sim;
use std::format;
use std::string::String;
use std::vec::Vec;

/// The most sends one simulated agent has.
pub(crate) const MAX_SENDS: usize = 10;

/// Timeouts a client posts with (ms).
const POST_TIMEOUTS: [u32; 7] = [0, 0, 1, 5, 20, 100, 1000];
/// Values a client modifies to (ms; 0 cancels).
const MODIFY_TIMES: [u32; 6] = [0, 0, 0, 1, 30, 2000];
/// Classes a client posts: SMP, SA and CM are flow-controlled with a timeout.
const POST_CLASSES: [u8; 6] = [0x03, 0x07, 0x01, 0x81, 0x04, 0x06];
/// Time steps (ms).
const ADVANCES: [u64; 7] = [0, 1, 2, 5, 20, 100, 1000];
/// Completion statuses the transport reports.
const COMPLETION_STATUSES: [WcStatus; 8] = [
    WcStatus::Success,
    WcStatus::Success,
    WcStatus::Success,
    WcStatus::Success,
    WcStatus::Other(4),
    WcStatus::WrFlushErr,
    WcStatus::LocQpOpErr,
    WcStatus::Other(12),
];

/// What happens next in a walk. Indexes are taken modulo what exists, so any list of actions
/// is a valid walk (which is what makes shrinking possible).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    /// The client posts send `send` with this class, TID low word, timeout and retries (an
    /// outstanding buffer is refused with `EBUSY`, after unregistration everything with
    /// `ESHUTDOWN`).
    Post {
        send: u8,
        class: u8,
        lo: u8,
        timeout: u8,
        retries: u8,
        rmpp: bool,
    },
    /// The client modifies (0: cancels) its current post of `send`.
    Modify { send: u8, t: u8 },
    /// The transport reports the `k`-th pending send completion with a status.
    Complete { k: u8, status: u8 },
    /// The peer answers send `send` (again, maybe: duplicates and late answers).
    Respond { send: u8, method: u8 },
    /// A MAD with a TID of ours or not, a class, and a method.
    Stray {
        lo: u8,
        class: u8,
        method: u8,
        ours: bool,
    },
    /// Time passes.
    Advance { ms: u8 },
    /// The agent's work runs.
    Work,
    /// The transport refuses the next `n` transmissions.
    Refuse { n: u8 },
    /// The client unregisters the agent.
    Unregister,
}

#[derive(Clone, Copy, Debug)]
struct Config {
    sends: usize,
    limit: u32,
    hi_tid: u32,
}

/// A walk's configuration and actions.
fn random_walk(rng: &mut Rng) -> (Config, Vec<Action>) {
    let sends = if rng.chance(1, 2) {
        1 + rng.index(3)
    } else {
        1 + rng.index(MAX_SENDS)
    };
    let cfg = Config {
        sends,
        limit: rng.pick(&[0, 1, 1, 2, 2, 3, 4, 16]),
        hi_tid: rng.u32() & crate::mad::HI_TID_MAX & !1,
    };
    let len = match rng.below(4) {
        0 => 1 + rng.index(20),
        1 | 2 => 1 + rng.index(200),
        _ => 1 + rng.index(2000),
    };
    // A quarter of the walks unregister, in their second half (after it, posts are refused).
    let unregister_at = rng.chance(1, 4).then(|| len / 2 + rng.index(len - len / 2));
    let mut acts = Vec::with_capacity(len);
    for k in 0..len {
        if unregister_at == Some(k) {
            acts.push(Action::Unregister);
            continue;
        }
        let send = rng.byte();
        let a = match rng.below(100) {
            0..=19 => Action::Post {
                send,
                class: rng.byte(),
                lo: rng.byte(),
                timeout: rng.byte(),
                retries: rng.byte(),
                rmpp: rng.chance(1, 16),
            },
            20..=39 => Action::Complete {
                k: if rng.chance(3, 4) { 0 } else { rng.byte() },
                status: rng.byte(),
            },
            40..=51 => Action::Respond {
                send,
                method: rng.byte(),
            },
            52..=54 => Action::Stray {
                lo: rng.byte(),
                class: rng.byte(),
                method: rng.byte(),
                ours: rng.chance(3, 4),
            },
            55..=66 => Action::Modify {
                send,
                t: rng.byte(),
            },
            67..=78 => Action::Advance { ms: rng.byte() },
            79..=95 => Action::Work,
            _ => Action::Refuse { n: rng.byte() },
        };
        acts.push(a);
    }
    (cfg, acts)
}

/// Runs one walk; `Err` is (the action at which it failed, what failed).
fn run_walk(cfg: Config, acts: &[Action], strict: bool) -> Result<Sim, (usize, String)> {
    let mut sim = Sim::new(cfg, strict);
    for (k, a) in acts.iter().enumerate() {
        let r = std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| {
            sim.act(*a)?;
            sim.check()
        }))
        .unwrap_or_else(|_| Err(String::from("panicked")));
        r.map_err(|e| (k, e))?;
    }
    let r = std::panic::catch_unwind(core::panic::AssertUnwindSafe(|| sim.drain()))
        .unwrap_or_else(|_| Err(String::from("panicked while draining")));
    r.map_err(|e| (acts.len(), e))?;
    Ok(sim)
}

/// The first word of a failure, to keep shrinking on the same kind of failure.
fn kind(what: &str) -> &str {
    what.split([' ', '(']).next().unwrap_or("")
}

/// Shrinks a failing walk: drops chunks of actions, then single actions, while it still fails
/// the same way; then lowers the number of sends.
fn shrink(mut cfg: Config, acts: &[Action], strict: bool, what: &str) -> (Config, Vec<Action>) {
    let want = String::from(kind(what));
    let fails = |cfg: Config, a: &[Action]| {
        run_walk(cfg, a, strict)
            .err()
            .is_some_and(|(_, w)| kind(&w) == want)
    };
    let mut cur: Vec<Action> = acts.to_vec();
    if let Some((k, _)) = run_walk(cfg, &cur, strict).err() {
        cur.truncate(k + 1);
    }
    let mut chunk = cur.len().div_ceil(2).max(1);
    loop {
        let mut i = 0;
        let mut changed = false;
        while i < cur.len() {
            let mut cand = cur.clone();
            let end = (i + chunk).min(cand.len());
            cand.drain(i..end);
            if fails(cfg, &cand) {
                cur = cand;
                changed = true;
            } else {
                i += chunk;
            }
        }
        if chunk == 1 && !changed {
            break;
        }
        chunk = (chunk / 2).max(1);
    }
    while cfg.sends > 1
        && fails(
            Config {
                sends: cfg.sends - 1,
                ..cfg
            },
            &cur,
        )
    {
        cfg.sends -= 1;
    }
    (cfg, cur)
}

/// Runs walks `first..` of the `agent` target until `inputs` actions have run (the last walk
/// is finished); returns the number of actions.
pub(crate) fn run_agent_range(seed: u64, first: u64, inputs: u64) -> Result<u64, Disagreement> {
    let strict = strict();
    let mut done = 0u64;
    let mut steps = 0u64;
    let mut walk = first;
    while done < inputs {
        let mut rng = Rng::for_input(seed, walk);
        let (cfg, acts) = random_walk(&mut rng);
        let sim = run_walk(cfg, &acts, strict);
        if let Ok(sim) = &sim {
            steps += sim.steps;
        }
        if let Err((k, what)) = sim {
            let (scfg, sacts) = shrink(cfg, &acts, strict, &what);
            let swhat = run_walk(scfg, &sacts, strict)
                .err()
                .map_or_else(String::new, |(_, w)| w);
            return Err(Disagreement {
                target: "agent",
                seed,
                input: walk,
                what: format!("walk {walk}, action {k} of {}: {what}", acts.len()),
                reproducer: format!(
                    "{scfg:?}, actions {sacts:?}\n  (shrunk from {} actions; fails with: {swhat})",
                    acts.len()
                ),
            });
        }
        done += u64::try_from(acts.len()).unwrap_or(0);
        walk += 1;
    }
    STEPS.fetch_add(steps, core::sync::atomic::Ordering::Relaxed);
    Ok(done)
}

/// The `step` calls the `agent` walks made, over every run of this process.
pub(crate) static STEPS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// How often the walks of `seed` took each transition, over about `inputs` actions.
pub(crate) fn coverage(seed: u64, inputs: u64) -> [u64; TRANSITIONS.len()] {
    let mut cov = [0u64; TRANSITIONS.len()];
    let mut done = 0u64;
    let mut walk = 0u64;
    while done < inputs {
        let mut rng = Rng::for_input(seed, walk);
        let (cfg, acts) = random_walk(&mut rng);
        if let Ok(sim) = run_walk(cfg, &acts, false) {
            for (c, n) in cov.iter_mut().zip(sim.cov.iter()) {
                *c += n;
            }
        }
        done += u64::try_from(acts.len()).unwrap_or(0);
        walk += 1;
    }
    // The cells the engine never produces count as seen: `step` covers them.
    for t in ENGINE_UNREACHABLE {
        cov[t as usize] = cov[t as usize].max(1);
    }
    cov
}

#[cfg(test)]
mod tests {
    use super::super::MUTANT_D1;
    use super::*;

    /// The shrinker reduces a failing walk: one that reaches D1 against a model that takes D1's
    /// old, wrong variant.
    #[test]
    fn shrinker_reduces_a_failing_walk() {
        let cfg = Config {
            sends: 3,
            limit: 2,
            hi_tid: 8,
        };
        let post = Action::Post {
            send: 0,
            class: 1,
            lo: 0,
            timeout: 5,
            retries: 1,
            rmpp: false,
        };
        let acts = [
            Action::Work,
            post,
            Action::Advance { ms: 3 },
            Action::Respond { send: 0, method: 0 },
            Action::Work,
            Action::Unregister,
            Action::Complete { k: 0, status: 0 },
        ];
        assert!(run_walk(cfg, &acts, true).is_ok());
        MUTANT_D1.set(true);
        let failed = run_walk(cfg, &acts, true).err();
        let shrunk = failed
            .as_ref()
            .map(|(_, what)| shrink(cfg, &acts, true, what));
        MUTANT_D1.set(false);
        let Some((k, what)) = failed else {
            panic!("the mutant model accepts the fixed T24 of an EARLY_RESP send");
        };
        assert_eq!(k, 5, "{what}");
        let Some((scfg, sacts)) = shrunk else {
            panic!("no shrink");
        };
        assert_eq!(scfg.sends, 1);
        assert_eq!(
            sacts,
            [
                post,
                Action::Respond { send: 0, method: 0 },
                Action::Unregister
            ]
        );
    }
}
