// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_engine`: registration and routing shared by all agents.

#[kernel::prelude::kunit_tests(rmad_engine)]
mod tests {
    use crate::{
        engine::agent::Agent,
        mad::wire,
        testing::{
            reg,
            Behaviour,
            Env,
            Recorder, //
        },
    };
    use kernel::{
        new_spinlock,
        prelude::*,
        sync::{
            atomic::{
                Acquire,
                Atomic,
                Relaxed,
                Release, //
            },
            Arc, SpinLock,
        },
        time::{
            delay::udelay,
            Delta, //
        },
        workqueue,
    };

    /// What the other thread of a round saw.
    #[pin_data]
    struct Round {
        ready: Atomic<u32>,
        done: Atomic<bool>,
        #[pin]
        agent: SpinLock<Option<Arc<Agent>>>,
    }

    /// Spins until `n` parties are ready (bounded: a stuck party fails the round, not the
    /// kernel).
    fn meet(r: &Round, n: u32) {
        r.ready.add(1, Relaxed);
        for _ in 0..1_000_000 {
            if r.ready.load(Acquire) >= n {
                return;
            }
            core::hint::spin_loop();
        }
    }

    #[test]
    fn clashing_registrations_have_one_winner() -> Result {
        // Documentation/behaviour.md §1.3 step 9: of two registrations for the same class and
        // method on the same port, exactly one succeeds, however they interleave.
        const ROUNDS: usize = 400;
        let env = Env::new()?;
        let rec = Recorder::new(Behaviour::default())?;
        let (mut one, mut two, mut none) = (0usize, 0usize, 0usize);
        for _ in 0..ROUNDS {
            let round = Arc::pin_init(
                pin_init!(Round {
                    ready: Atomic::new(0),
                    done: Atomic::new(false),
                    agent <- new_spinlock!(None),
                }),
                GFP_KERNEL,
            )?;
            let (r2, rec2, engine, transport) = (
                round.clone(),
                rec.clone(),
                env.engine.clone(),
                env.transport.clone(),
            );
            workqueue::system_unbound().try_spawn(GFP_KERNEL, move || {
                meet(&r2, 2);
                let a = crate::testing::register_gsi(
                    &engine,
                    &transport,
                    1,
                    &rec2,
                    Some(reg(wire::IB_MGMT_CLASS_PERF_MGMT)),
                );
                *r2.agent.lock() = a.ok();
                r2.done.store(true, Release);
            })?;
            meet(&round, 2);
            let mine = env
                .agent(1, &rec, Some(reg(wire::IB_MGMT_CLASS_PERF_MGMT)))
                .ok();
            let mut waited = 0;
            while !round.done.load(Acquire) && waited < 2_000_000 {
                udelay(Delta::from_micros(10));
                waited += 10;
            }
            let theirs = round.agent.lock().take();
            match (mine.is_some(), theirs.is_some()) {
                (true, true) => two += 1,
                (false, false) => none += 1,
                _ => one += 1,
            }
            for a in [mine, theirs].iter().flatten() {
                a.unregister()?;
            }
        }
        pr_info!(
            "engine: {} rounds: one winner {}, two {}, none {}\n",
            ROUNDS,
            one,
            two,
            none
        );
        assert_eq!(two, 0);
        assert_eq!(none, 0);
        assert_eq!(one, ROUNDS);
        Ok(())
    }
}
