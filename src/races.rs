// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_races`: cancel racing the events that decide a send's fate, thousands of
//! times, with the test thread on one vCPU and the transport and completion workers on the
//! others (mad-spec.md §2.7 items 1, 2 and 4; scenarios 38 and 39).
//!
//! Each iteration posts a send and cancels it after a pseudo-random delay of a few
//! microseconds. Whatever wins, every post must get exactly one send-handler call, and its
//! status must agree with what cancel returned: `WR_FLUSH_ERR` when cancel returned 0, the
//! status of the event that won when it returned `EINVAL`.

#[kernel::prelude::kunit_tests(rmad_races)]
mod tests {
    use crate::{
        state::WcStatus,
        testing::{
            post,
            request,
            Behaviour,
            Env,
            Recorder, //
        },
        wire,
    };
    use kernel::{
        prelude::*,
        time::{
            delay::udelay,
            Delta, //
        },
    };

    /// Iterations per race.
    const N: usize = 2000;
    const CLASS: u8 = wire::IB_MGMT_CLASS_PERF_MGMT;

    #[test]
    fn race_cancel_vs_send_completion() -> Result {
        assert!(race(0, false, WcStatus::Success)?);
        Ok(())
    }

    /// Runs one race of [`N`] iterations: requests with `timeout_ms` and no retries, answered
    /// when `answered`, each cancelled after a short pseudo-random delay. Returns whether every
    /// send got exactly one handler call with the status its cancel result implies (`won`
    /// when cancel lost).
    fn race(timeout_ms: i32, answered: bool, won: WcStatus) -> Result<bool> {
        let env = Env::new()?;
        let responder = if answered {
            Some(env.responder(2, CLASS)?)
        } else {
            None
        };
        let rec = Recorder::new(Behaviour::default())?;
        let a = env.agent(1, &rec, None)?;
        let mut cancelled = KVec::with_capacity(N, GFP_KERNEL)?;
        let mut seed: u32 = 0x1234_5678;
        for tag in 0..N {
            let h = post(request(&a, CLASS, tag, 2, timeout_ms, 0)?)?;
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let us = i64::from((seed >> 16) % 40);
            udelay(Delta::from_micros(us));
            cancelled.push(h.cancel().is_ok(), GFP_KERNEL)?;
        }
        let all = rec.wait_sends(N);
        let sends = rec.sends()?;
        if let Some((b, brec)) = responder.as_ref() {
            drop(brec.take_kept());
            b.unregister()?;
        }
        a.unregister()?;

        let mut count = KVec::with_capacity(N, GFP_KERNEL)?;
        count.resize(N, 0u32, GFP_KERNEL)?;
        let mut agree = true;
        for (tag, status, _) in sends.iter() {
            let (Some(c), Some(was_cancelled)) = (count.get_mut(*tag), cancelled.get(*tag)) else {
                agree = false;
                continue;
            };
            *c = c.saturating_add(1);
            let want = if *was_cancelled {
                WcStatus::WrFlushErr
            } else {
                won
            };
            agree &= *status == want;
        }
        let once = count.iter().all(|c| *c == 1);
        Ok(all && agree && once && sends.len() == N)
    }

    #[test]
    fn race_cancel_vs_response() -> Result {
        assert!(race(5000, true, WcStatus::Success)?);
        Ok(())
    }

    #[test]
    fn race_cancel_vs_last_timeout() -> Result {
        assert!(race(1, false, WcStatus::RespTimeoutErr)?);
        Ok(())
    }
}
