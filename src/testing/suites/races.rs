// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_races`: cancel racing the events that decide a send's fate, with the
//! test thread on one vCPU and the transport and completion workers on the others
//! (Documentation/behaviour.md §2.7 items 1, 2 and 4; scenarios 38 and 39).
//!
//! Each iteration posts a send and cancels it after a pseudo-random delay whose window adapts
//! until both interleavings keep happening ([`race_cancel`]). Each test asserts that cancel both
//! won and lost at least [`MIN`] times, and that every post got exactly one send-handler call
//! with the status its cancel result implies: `WR_FLUSH_ERR` when cancel returned 0, the status
//! of the event that won when it returned `EINVAL`. The counts are printed.

#[kernel::prelude::kunit_tests(rmad_races)]
mod tests {
    use crate::{
        mad::{
            state::WcStatus,
            wire, //
        },
        testing::{
            post,
            race_cancel,
            request,
            Behaviour,
            Env,
            RaceOutcome,
            Recorder, //
        },
    };
    use kernel::prelude::*;

    /// Each outcome must happen at least this often.
    const MIN: usize = 25;
    /// Sends at most per race.
    const MAX: usize = 4000;
    const CLASS: u8 = wire::IB_MGMT_CLASS_PERF_MGMT;

    /// Runs one race: requests with `timeout_ms` and no retries, answered when `answered`.
    fn race(name: &str, timeout_ms: i32, answered: bool, won: WcStatus) -> Result<RaceOutcome> {
        let env = Env::new()?;
        let responder = if answered {
            Some(env.responder(2, CLASS)?)
        } else {
            None
        };
        let rec = Recorder::new(Behaviour::default())?;
        let a = env.agent(1, &rec, None)?;
        let out = race_cancel(
            &rec,
            MIN,
            MAX,
            |tag| post(request(&a, CLASS, tag, 2, timeout_ms, 0)?),
            won,
        )?;
        if let Some((b, brec)) = responder.as_ref() {
            drop(brec.take_kept());
            b.unregister()?;
        }
        a.unregister()?;
        pr_info!(
            "races: {}: {} sends, cancel won {}, lost {}, each completed once: {}\n",
            name,
            out.iterations,
            out.cancel_won,
            out.cancel_lost,
            out.exactly_once
        );
        Ok(out)
    }

    #[test]
    fn s39_cancel_vs_send_completion() -> Result {
        let out = race("cancel vs send completion", 0, false, WcStatus::Success)?;
        assert!(out.exactly_once);
        assert!(out.cancel_won >= MIN);
        assert!(out.cancel_lost >= MIN);
        Ok(())
    }

    #[test]
    fn race_cancel_vs_response() -> Result {
        let out = race("cancel vs response", 5000, true, WcStatus::Success)?;
        assert!(out.exactly_once);
        assert!(out.cancel_won >= MIN);
        assert!(out.cancel_lost >= MIN);
        Ok(())
    }

    #[test]
    fn s38_cancel_vs_last_timeout() -> Result {
        let out = race("cancel vs timeout", 1, false, WcStatus::RespTimeoutErr)?;
        assert!(out.exactly_once);
        assert!(out.cancel_won >= MIN);
        assert!(out.cancel_lost >= MIN);
        Ok(())
    }
}
