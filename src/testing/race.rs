// SPDX-License-Identifier: GPL-2.0

//! Races of cancel against the event that decides a send's fate, with both outcomes counted.

use crate::{
    engine::send::SendHandle,
    mad::state::WcStatus,
    testing::{
        env::sleep_ms,
        recorder::Recorder, //
    },
};
use kernel::{
    prelude::*,
    sync::Arc, //
};

/// How a race test of cancel against another event ended.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RaceOutcome {
    /// Sends posted and cancelled.
    pub(crate) iterations: usize,
    /// Cancels that returned 0: the send was flushed.
    pub(crate) cancel_won: usize,
    /// Cancels that returned `EINVAL`: the other event had decided the send's fate.
    pub(crate) cancel_lost: usize,
    /// Every send got exactly one handler call, with the status its cancel result implies.
    pub(crate) exactly_once: bool,
}

/// Runs a race of cancel against the event that decides a send's fate, until each outcome
/// happened at least `min` times (or `max` sends were used).
///
/// `post_one(tag)` posts send `tag`; after a pseudo-random delay the test thread cancels it.
/// The delay window adapts to the machine: it widens while cancel always wins (the event had
/// no time to happen) and narrows while cancel always loses, so that both interleavings keep
/// happening even under software emulation, whose timing jitters. `won` is the status a send
/// ends with when its cancel lost.
pub(crate) fn race_cancel(
    rec: &Arc<Recorder>,
    min: usize,
    max: usize,
    mut post_one: impl FnMut(usize) -> Result<SendHandle>,
    won: WcStatus,
) -> Result<RaceOutcome> {
    const BATCH: usize = 50;
    let mut cancelled = KVec::with_capacity(max, GFP_KERNEL)?;
    let mut window_us: i64 = 20;
    let mut seed: u32 = 0x1234_5678;
    let (mut won_n, mut lost_n, mut batch_won, mut batch_lost) = (0usize, 0usize, 0usize, 0usize);
    for tag in 0..max {
        let h = post_one(tag)?;
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let us = i64::from(seed >> 8) % window_us.saturating_add(1);
        if us >= 1000 {
            sleep_ms(us / 1000);
        } else {
            kernel::time::delay::udelay(kernel::time::Delta::from_micros(us));
        }
        let ok = h.cancel().is_ok();
        cancelled.push(ok, GFP_KERNEL)?;
        if ok {
            won_n += 1;
            batch_won += 1;
        } else {
            lost_n += 1;
            batch_lost += 1;
        }
        if (tag + 1) % BATCH == 0 {
            if batch_lost == 0 {
                window_us = window_us.saturating_mul(2).min(50_000);
            } else if batch_won == 0 {
                window_us = (window_us / 2).max(1);
            }
            batch_won = 0;
            batch_lost = 0;
            if won_n >= min && lost_n >= min && tag + 1 >= 4 * BATCH {
                break;
            }
        }
    }
    let n = cancelled.len();
    let all = rec.wait_sends(n);
    let sends = rec.sends()?;
    let mut count = KVec::with_capacity(n, GFP_KERNEL)?;
    count.resize(n, 0u32, GFP_KERNEL)?;
    let mut agree = all && sends.len() == n;
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
    Ok(RaceOutcome {
        iterations: n,
        cancel_won: won_n,
        cancel_lost: lost_n,
        exactly_once: agree && count.iter().all(|c| *c == 1),
    })
}
