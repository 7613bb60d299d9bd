// SPDX-License-Identifier: GPL-2.0

//! The retry rules a client can opt into beyond the C layer's (Documentation/behaviour.md §2.11),
//! as one pure function.
//!
//! Linux 7.3 waits the send's `timeout_ms` after every transmission, has no bound on a
//! transaction's total time, and keeps a modify's timeout for every later retry. The rework that
//! upstream proposed and never released ("Rework retry algorithm used when sending MADs",
//! rdma-next, December 2024) adds three rules, which rmad offers opt-in, per agent and per send:
//!
//! - a **deadline**: no retry starts after it, and every wait ends by it, so the send completes
//!   with `RESP_TIMEOUT_ERR` no later than the deadline whatever its retries say; a modify
//!   extends it by the modify's timeout; it is bounded by [`MAX_DEADLINE_MS`];
//! - **exponential backoff**: after [`LINEAR_WAITS`] waits of `timeout_ms`, each wait doubles,
//!   up to [`BACKOFF_CAP_MS`] (a wait never becomes shorter than `timeout_ms`); a modify starts
//!   the count again;
//! - **one-shot modify**: a modify sets the current wait only (or, before the send waits, the
//!   next one); the waits after it are the send's own again. A send that expects no response
//!   (`timeout_ms` 0) keeps its modify's timeout, as in the C layer: it has no wait of its own
//!   to go back to.
//!
//! Segmented (kernel-RMPP) sends keep their windows' rules and are never asked here. With
//! [`Rules::default`] (the C layer's rules) the engine does not ask either: the state table
//! (`state.rs`) is the C layer's, and [`plan`] gives the same waits for those rules (the host
//! tests check it).
//!
//! [`plan`] is the only place these rules live: the engine tells it what happened to a send
//! ([`Tick`]) with the send's [`Clock`] and the time, and applies the [`Plan`] it returns.

/// Waits of the send's own timeout before backoff doubles them (upstream's
/// `IB_MAD_LINEAR_TIMEOUTS_DEFAULT`).
pub(crate) const LINEAR_WAITS: u32 = 4;

/// The longest wait that backoff makes, in milliseconds (upstream's 60 s).
pub(crate) const BACKOFF_CAP_MS: u32 = 60_000;

/// The longest deadline, in milliseconds from the post (upstream clamps to 5 minutes).
pub(crate) const MAX_DEADLINE_MS: u32 = 300_000;

/// Nanoseconds per millisecond.
const NS_PER_MS: i64 = 1_000_000;

/// The retry rules of one send (or an agent's default for its new buffers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Rules {
    /// Exponential backoff after [`LINEAR_WAITS`] waits.
    pub(crate) backoff: bool,
    /// A modify sets the current wait only.
    pub(crate) one_shot_modify: bool,
    /// Total time the send may take, in milliseconds from its post; 0: no deadline. Larger
    /// values than [`MAX_DEADLINE_MS`] count as that.
    pub(crate) deadline_ms: u32,
}

impl Rules {
    /// Whether these are the C layer's rules (nothing opted into).
    pub(crate) fn is_c_layer(&self) -> bool {
        *self == Self::default()
    }
}

/// What the retry rules remember of one outstanding send.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Clock {
    /// Waits begun since the post or the last modify.
    pub(crate) waits: u32,
    /// A one-shot modify's timeout, for the next wait only.
    pub(crate) once_ms: Option<u32>,
    /// When the deadline passes, in nanoseconds of the engine's clock.
    pub(crate) deadline_ns: Option<i64>,
}

/// What happened to a send, for [`plan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tick {
    /// The send was posted: its clock starts.
    Posted,
    /// A transmission completed and the send now waits for its response; `timeout_ms` is the
    /// send's stored timeout (what the C layer would wait).
    Sent {
        /// The send's stored response timeout.
        timeout_ms: u32,
    },
    /// The send's wait expired with retries left: may a retry start?
    Expired,
    /// `modify(ms)` with `ms > 0`; `waiting`: the send waits for its response (its wait
    /// restarts now) rather than being in flight or held back.
    Modified {
        /// The modify's timeout.
        ms: u32,
        /// The send is waiting for its response.
        waiting: bool,
        /// The send's stored timeout before the modify (0: it expects no response).
        timeout_ms: u32,
    },
}

/// What the engine does about a [`Tick`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The send's clock from now on.
    pub(crate) clock: Clock,
    /// Wait this many nanoseconds from now (after `Sent`, and after `Modified` while waiting).
    pub(crate) wait_ns: Option<i64>,
    /// After `Expired`: a retry may start (the retries left decide the rest).
    pub(crate) retry: bool,
    /// After `Modified`: keep the modify's timeout for the later waits (the C layer's rule).
    pub(crate) store: bool,
}

/// The wait of `timeout_ms` after `waits` earlier waits since the post or the last modify.
fn own_wait_ms(rules: Rules, timeout_ms: u32, waits: u32) -> u32 {
    if !rules.backoff || waits < LINEAR_WAITS {
        return timeout_ms;
    }
    // The first wait past the linear ones is twice the timeout, the next four times, ...
    let doublings = waits.saturating_sub(LINEAR_WAITS).saturating_add(1);
    let factor = 1u32.checked_shl(doublings).unwrap_or(u32::MAX);
    timeout_ms
        .saturating_mul(factor)
        .min(BACKOFF_CAP_MS.max(timeout_ms))
}

/// `ms` from now, ending no later than the deadline (a deadline passed gives 0).
fn bounded_ns(ms: u32, deadline_ns: Option<i64>, now_ns: i64) -> i64 {
    let wait = i64::from(ms).saturating_mul(NS_PER_MS);
    match deadline_ns {
        Some(d) => wait.min(d.saturating_sub(now_ns).max(0)),
        None => wait,
    }
}

/// Decides what the retry rules `rules` make of `tick` for a send whose clock is `clock`, at
/// `now_ns` on the engine's clock.
pub(crate) fn plan(rules: Rules, clock: Clock, tick: Tick, now_ns: i64) -> Plan {
    let mut p = Plan {
        clock,
        wait_ns: None,
        retry: false,
        store: false,
    };
    match tick {
        Tick::Posted => {
            let deadline = (rules.deadline_ms != 0).then(|| {
                let ms = rules.deadline_ms.min(MAX_DEADLINE_MS);
                now_ns.saturating_add(i64::from(ms).saturating_mul(NS_PER_MS))
            });
            p.clock = Clock {
                waits: 0,
                once_ms: None,
                deadline_ns: deadline,
            };
        }
        Tick::Sent { timeout_ms } => {
            let ms = match p.clock.once_ms.take() {
                Some(once) => once,
                None => own_wait_ms(rules, timeout_ms, clock.waits),
            };
            p.clock.waits = clock.waits.saturating_add(1);
            p.wait_ns = Some(bounded_ns(ms, clock.deadline_ns, now_ns));
        }
        Tick::Expired => {
            p.retry = clock.deadline_ns.is_none_or(|d| now_ns < d);
        }
        Tick::Modified {
            ms,
            waiting,
            timeout_ms,
        } => {
            p.clock.waits = 0;
            p.clock.deadline_ns = clock
                .deadline_ns
                .map(|d| d.saturating_add(i64::from(ms).saturating_mul(NS_PER_MS)));
            // A send that expects no response has no wait of its own to go back to after one
            // wait: its modify is kept, as the C layer keeps it.
            let one_shot = rules.one_shot_modify && timeout_ms != 0;
            p.store = !one_shot;
            p.clock.once_ms = (one_shot && !waiting).then_some(ms);
            if waiting {
                // The modify's own wait counts as the first of the new count.
                p.clock.waits = 1;
                p.wait_ns = Some(bounded_ns(ms, p.clock.deadline_ns, now_ns));
            }
        }
    }
    p
}
