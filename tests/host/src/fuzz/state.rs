// SPDX-License-Identifier: GPL-2.0

//! Fuzz targets `step` and `agent`: the send state machine (`src/mad/state.rs`) against a
//! reference model written from Documentation/behaviour.md §2.3 (the transition table), §1.7
//! (modify and cancel), §1.4 (unregistration), §3.3 (flow control) and §4 (response matching).
//!
//! [`model`] is that reference: one function per event, each arm naming its transition. It
//! decides the whole [`Outcome`] (next state, place, counter changes, transmit, retry, stored
//! timeout, receive action, send-handler status, and whether the backlog must be tried), never
//! by calling rmad's code.
//!
//! - `step` ([`run_step_range`]): one input is one arbitrary [`SendFacts`] (any state, flow
//!   control on or off, any timeout and retry count) and one arbitrary [`Event`] (any admission
//!   figures, any completion status code, any modify value); `step` must not panic and must give
//!   exactly the model's result. The same inputs also check `is_solicited_fc` and `sol_fc_max`
//!   against C's `is_solicited_fc_mad` and `get_sol_fc_max_outstanding`.
//! - `agent` ([`run_agent_range`]): one input is one action of a walk on a simulated agent of up
//!   to [`agent::MAX_SENDS`] sends that applies every outcome as `Agent::apply` does and produces events
//!   only where the engine does: posts (with admission from the live counters), modify and cancel
//!   through the client's handle, send completions in any order with any status, transport
//!   refusals at post, backlog dispatch and retransmission, responses and duplicates and strays
//!   whose headers go through `MadHdr::parse` and `tid_hi` routing and are matched as §4 says,
//!   time passing and the agent's work (expiries, cancelled sends, backlog, deliveries), and
//!   unregistration. Every step is compared with the model; after every action the invariants
//!   hold (see `Sim::check` in [`agent`]); each walk ends by draining the agent (liveness). A failing walk is
//!   shrunk to a short list of actions.
//!
//! Known divergences between `step` and the behaviour reference are listed in [`KNOWN`]; the
//! model accepts rmad's behaviour there unless `RMAD_FUZZ_STRICT=1`, and a test pins each one so
//! that it is noticed when either side changes. There is none today: the one this fuzzer found
//! (D1: unregistration left an early-answered send EARLY_RESP, so its completion reported the
//! CQE's status instead of the flush) was fixed in `step`, and a test pins the fix.

use super::{
    Disagreement,
    Rng, //
};
use crate::mad::state::*;
use std::format;
use std::string::String;

#[path = "state/agent.rs"]
mod agent;
pub(crate) use agent::{
    coverage,
    run_agent_range,
    STEPS, //
};

const SC: SendState = SendState::Canceled(CancelWait::SendCompletion);
const TW: SendState = SendState::Canceled(CancelWait::TimeoutWork);

/// The transitions of behaviour §2.3 (and the few extra cells rmad defines), as the model tags
/// them; indexes of [`TRANSITIONS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tr {
    T1,
    T2,
    T3,
    /// T3 from EARLY_RESP or CANCELED: in the table, never produced by the engine (§8.8).
    T3Late,
    T4,
    /// T4's failure: DONE with `LOC_QP_OP_ERR`.
    T4Fail,
    /// T4's failure after a response or cancel slipped in: never produced by the engine.
    T4FailLate,
    T5,
    T6,
    T7,
    T8,
    T9,
    T10,
    T11,
    T12,
    T13,
    /// T13 for a retransmission that could not be dispatched.
    T13Retransmit,
    T14,
    T15,
    T16,
    T17,
    T18,
    T19,
    T20,
    T21,
    T22,
    T23,
    T24,
    /// T24 of an EARLY_RESP send (D1 of [`KNOWN`]'s history, fixed).
    T24Early,
    T25,
    /// A response for a send that takes none (no timeout, DONE, not outstanding, answered).
    NoMatch,
    /// Unregistration of a send whose flush is already decided or on its way.
    UnregNoop,
    /// `delivered`: DONE back to idle when the send handler is taken.
    Delivered,
    /// A post of an outstanding send (`-EBUSY`).
    Busy,
    /// A modify or cancel of a send that is not outstanding (`-EINVAL`).
    NotOutstanding,
    /// An event that cannot happen in the state.
    Impossible,
    /// RMPP (§2.8): a segment's completion, as the window decided.
    RmppSegment,
    /// RMPP: an ACK opened a window (T27) or acknowledged the last segment.
    RmppAck,
    /// RMPP: STOP, ABORT or a protocol error in an ACK.
    RmppAbort,
    /// RMPP: an expired wait, as the window decided.
    RmppExpiry,
    /// RMPP: an ACK, STOP or ABORT for a send already decided.
    RmppIgnored,
}

/// Names of [`Tr`], in order.
pub(crate) const TRANSITIONS: [&str; 41] = [
    "T1",
    "T2",
    "T3",
    "T3 (late)",
    "T4",
    "T4 (failed)",
    "T4 (failed, late)",
    "T5",
    "T6",
    "T7",
    "T8",
    "T9",
    "T10",
    "T11",
    "T12",
    "T13",
    "T13 (retransmission failed)",
    "T14",
    "T15",
    "T16",
    "T17",
    "T18",
    "T19",
    "T20",
    "T21",
    "T22",
    "T23",
    "T24",
    "T24 (EARLY_RESP)",
    "T25",
    "response without match",
    "unregister (no-op)",
    "delivered",
    "post of an outstanding send",
    "modify of a send not outstanding",
    "impossible",
    "RMPP segment completion",
    "RMPP ACK",
    "RMPP abort",
    "RMPP expiry",
    "RMPP ignored",
];

/// The cells the engine never produces (so the `agent` walks cannot reach them; `step` covers
/// them): dispatch failures after a response or cancel slipped in (§8.8), a response for a send
/// that §4 does not make a candidate (the engine drops it without a step), and events on a send
/// that is not outstanding. The RMPP cells too: the walks post no segmented send (the
/// `rmpp` target drives the window, and `rmad_rmpp_send` the engine).
const ENGINE_UNREACHABLE: [Tr; 11] = [
    Tr::T3Late,
    Tr::T4FailLate,
    Tr::NoMatch,
    Tr::NotOutstanding,
    Tr::Impossible,
    Tr::UnregNoop,
    Tr::RmppSegment,
    Tr::RmppAck,
    Tr::RmppAbort,
    Tr::RmppExpiry,
    Tr::RmppIgnored,
];

/// Known divergences between `step` and the behaviour reference, which the model accepts unless
/// `RMAD_FUZZ_STRICT=1`. None today. The first run of this fuzzer found D1 (T24 of an EARLY_RESP
/// send: behaviour §2.3 and §1.4, after C's `cancel_mads`, mark it CANCELED so that its send
/// completion reports `WR_FLUSH_ERR`; `step` left it EARLY_RESP, so the completion reported the
/// CQE's status), and `step` was fixed.
#[cfg(rmad_fuzz_long)]
pub(crate) const KNOWN: [&str; 0] = [];

std::thread_local! {
    /// Test-only: the model takes D1's old, wrong variant, so that the shrinker has a
    /// disagreement to reduce ([`agent::tests::shrinker_reduces_a_failing_walk`]).
    static MUTANT_D1: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Whether the model ignores [`KNOWN`] (`RMAD_FUZZ_STRICT=1`).
pub(crate) fn strict() -> bool {
    std::env::var("RMAD_FUZZ_STRICT").is_ok_and(|v| v == "1")
}

/// An outcome that leaves the send in `state` and does nothing.
fn stay(state: SendState) -> Outcome {
    Outcome {
        next: state,
        place: Place::Unchanged,
        fc_send: 0,
        fc_wait: 0,
        transmit: false,
        retry: false,
        store_timeout: None,
        recv: Recv::None,
        complete: None,
        frees_fc_slot: false,
    }
}

/// An outcome that ends the send: DONE, in no queue, with this send-handler status.
fn done(status: WcStatus) -> Outcome {
    Outcome {
        place: Place::Nowhere,
        complete: Some(status),
        ..stay(SendState::Done)
    }
}

/// The reference model of one transition (behaviour §2.3), with the transition it took.
///
/// `strict` drops the known divergences ([`KNOWN`]).
pub(crate) fn model(f: SendFacts, ev: Event, _strict: bool) -> (Result<Outcome, Reject>, Tr) {
    use SendState::*;
    let s = f.state;
    // "FC: s −1" and the like: only flow-controlled sends move the counters.
    let counted = |mut o: Outcome, ds: i8, dw: i8| {
        if f.fc {
            o.fc_send = ds;
            o.fc_wait = dw;
        }
        o
    };
    let (o, t) = match ev {
        // §1.6: a post of an outstanding buffer is refused; T1/T2 (§3.3 admission).
        Event::Post(a) => {
            if s != Idle {
                return (Err(Reject::Outstanding), Tr::Busy);
            }
            let must_queue = f.fc && a.limit != 0 && (!a.backlog_empty || a.in_use >= a.limit);
            if must_queue {
                (
                    Outcome {
                        place: Place::Backlog,
                        ..stay(Queued)
                    },
                    Tr::T1,
                )
            } else {
                let o = Outcome {
                    place: Place::InFlight,
                    transmit: true,
                    ..stay(SendStart)
                };
                (counted(o, 1, 0), Tr::T2)
            }
        }
        // T3: the post's own dispatch failed; no handler, the send is the client's again.
        Event::DispatchFailed => {
            let gone = Outcome {
                place: Place::Nowhere,
                ..stay(Idle)
            };
            match s {
                SendStart => (counted(gone, -1, 0), Tr::T3),
                EarlyResp | SC => (gone, Tr::T3Late),
                _ => return (Err(Reject::Impossible), Tr::Impossible),
            }
        }
        // T4 and its failure (LOC_QP_OP_ERR, also after a cancel: §1.7's guarantee).
        Event::BacklogDispatch => match s {
            Queued => {
                let o = Outcome {
                    place: Place::InFlight,
                    transmit: true,
                    ..stay(SendStart)
                };
                (counted(o, 1, 0), Tr::T4)
            }
            _ => return (Err(Reject::Impossible), Tr::Impossible),
        },
        Event::BacklogDispatchFailed => match s {
            SendStart => (counted(done(WcStatus::LocQpOpErr), -1, 0), Tr::T4Fail),
            EarlyResp | SC => (done(WcStatus::LocQpOpErr), Tr::T4FailLate),
            _ => return (Err(Reject::Impossible), Tr::Impossible),
        },
        // T5/T6 (with a timeout the status is swallowed), T8 (the CQE's status), T20 (flush).
        Event::SendCompleted(st) => match s {
            SendStart if f.timeout_ms != 0 => {
                let o = Outcome {
                    place: Place::Waiting { ms: f.timeout_ms },
                    ..stay(WaitResp)
                };
                (counted(o, -1, 1), Tr::T5)
            }
            SendStart => (counted(done(st), -1, 0), Tr::T6),
            EarlyResp => (done(st), Tr::T8),
            SC => (done(WcStatus::WrFlushErr), Tr::T20),
            _ => return (Err(Reject::Impossible), Tr::Impossible),
        },
        // T7, T9, T10, T22; §4: a send that expects no response, or that already had one,
        // matches nothing.
        Event::Response => match s {
            SendStart if f.timeout_ms != 0 => {
                let o = Outcome {
                    recv: Recv::Deliver,
                    ..stay(EarlyResp)
                };
                (counted(o, -1, 0), Tr::T7)
            }
            WaitResp => {
                let o = Outcome {
                    recv: Recv::Deliver,
                    ..done(WcStatus::Success)
                };
                (counted(o, 0, -1), Tr::T9)
            }
            Queued => (
                Outcome {
                    recv: Recv::Deliver,
                    ..done(WcStatus::Success)
                },
                Tr::T10,
            ),
            SC | TW => (
                Outcome {
                    recv: Recv::Drop,
                    ..stay(s)
                },
                Tr::T22,
            ),
            SendStart | EarlyResp | Done | Idle => (
                Outcome {
                    recv: Recv::Drop,
                    ..stay(s)
                },
                Tr::NoMatch,
            ),
        },
        // T11, T12, T13 (§3.1), T21.
        Event::Expired { backlog_empty } => match s {
            WaitResp if f.retries_left == 0 => {
                (counted(done(WcStatus::RespTimeoutErr), 0, -1), Tr::T13)
            }
            WaitResp if f.fc && !backlog_empty => {
                let o = Outcome {
                    place: Place::Backlog,
                    retry: true,
                    ..stay(Queued)
                };
                (counted(o, 0, -1), Tr::T11)
            }
            WaitResp => {
                let o = Outcome {
                    place: Place::InFlight,
                    retry: true,
                    transmit: true,
                    ..stay(SendStart)
                };
                (counted(o, 1, -1), Tr::T12)
            }
            TW => (done(WcStatus::WrFlushErr), Tr::T21),
            _ => return (Err(Reject::Impossible), Tr::Impossible),
        },
        // §3.1: a retransmission that fails to dispatch ends with RESP_TIMEOUT_ERR.
        Event::RetransmitFailed => match s {
            SendStart => (
                counted(done(WcStatus::RespTimeoutErr), -1, 0),
                Tr::T13Retransmit,
            ),
            _ => return (Err(Reject::Impossible), Tr::Impossible),
        },
        // §1.7 steps 5-7: cancel (T16-T19), modify (T14, T15; §8.6 for EARLY_RESP); T23.
        Event::Modify(t) => {
            let stored = |o: Outcome| Outcome {
                store_timeout: Some(t),
                ..o
            };
            match (s, t) {
                (SendStart, 0) => (stored(counted(stay(SC), -1, 0)), Tr::T16),
                (EarlyResp, 0) => (stored(stay(SC)), Tr::T17),
                (WaitResp, 0) => {
                    let o = Outcome {
                        place: Place::CancelQueue,
                        ..stay(TW)
                    };
                    (stored(counted(o, 0, -1)), Tr::T18)
                }
                (Queued, 0) => (
                    stored(Outcome {
                        place: Place::CancelQueue,
                        ..stay(TW)
                    }),
                    Tr::T19,
                ),
                (WaitResp, _) => (
                    stored(Outcome {
                        place: Place::Waiting { ms: t },
                        ..stay(WaitResp)
                    }),
                    Tr::T14,
                ),
                (SendStart | EarlyResp | Queued, _) => (stored(stay(s)), Tr::T15),
                (SC | TW, _) => return (Err(Reject::NotCancellable), Tr::T23),
                (Done | Idle, _) => return (Err(Reject::NotCancellable), Tr::NotOutstanding),
            }
        }
        // §1.4 step 1: in flight → CANCELED (T24), the rest flushed now (T25).
        Event::Unregister => match s {
            SendStart => (counted(stay(SC), -1, 0), Tr::T24),
            EarlyResp if MUTANT_D1.get() => (stay(EarlyResp), Tr::T24Early),
            EarlyResp => (stay(SC), Tr::T24Early),
            SC | Done => (stay(s), Tr::UnregNoop),
            WaitResp => (counted(done(WcStatus::WrFlushErr), 0, -1), Tr::T25),
            Queued | TW => (done(WcStatus::WrFlushErr), Tr::T25),
            Idle => return (Err(Reject::Impossible), Tr::Impossible),
        },
        Event::Delivered => match s {
            Done => (stay(Idle), Tr::Delivered),
            _ => return (Err(Reject::Impossible), Tr::Impossible),
        },
        // §2.8 "On each segment completion", in SEND_START: the next segment with no handler;
        // WAIT_RESP for an ACK; or, all ACKed, WAIT_RESP for the response (timeout_ms) or DONE
        // with the completion's status. A send decided before its completion ends as T8/T20.
        Event::SegmentCompleted(st, seg) => match (s, seg) {
            (SendStart, Segment::Next) => (
                Outcome {
                    transmit: true,
                    ..stay(SendStart)
                },
                Tr::RmppSegment,
            ),
            (SendStart, Segment::AwaitAck(ms)) => (
                Outcome {
                    place: Place::Waiting { ms },
                    ..stay(WaitResp)
                },
                Tr::RmppSegment,
            ),
            (SendStart, Segment::Finished) if f.timeout_ms == 0 => (done(st), Tr::RmppSegment),
            (SendStart, Segment::Finished) => (
                Outcome {
                    place: Place::Waiting { ms: f.timeout_ms },
                    ..stay(WaitResp)
                },
                Tr::RmppSegment,
            ),
            (EarlyResp, _) => (done(st), Tr::T8),
            (SC, _) => (done(WcStatus::WrFlushErr), Tr::T20),
            _ => return (Err(Reject::Impossible), Tr::Impossible),
        },
        // "If that dispatch fails ... recovers through the ACK timeout and a retry".
        Event::SegmentDispatchFailed(ms) => match s {
            SendStart => (
                Outcome {
                    place: Place::Waiting { ms },
                    ..stay(WaitResp)
                },
                Tr::RmppSegment,
            ),
            _ => return (Err(Reject::Impossible), Tr::Impossible),
        },
        // T27: a send waiting for an ACK sends the next segment of the opened window.
        Event::WindowOpened => match s {
            WaitResp => (
                Outcome {
                    place: Place::InFlight,
                    transmit: true,
                    ..stay(SendStart)
                },
                Tr::RmppAck,
            ),
            _ => return (Err(Reject::Impossible), Tr::Impossible),
        },
        // "All ACKed": with timeout_ms 0 the send is done (at once if waiting, at the
        // completion if in flight); otherwise the wait restarts for the response.
        Event::AllAcked => match s {
            SendStart if f.timeout_ms == 0 => (stay(EarlyResp), Tr::RmppAck),
            SendStart => (stay(SendStart), Tr::RmppAck),
            WaitResp if f.timeout_ms == 0 => (done(WcStatus::Success), Tr::RmppAck),
            WaitResp => (
                Outcome {
                    place: Place::Waiting { ms: f.timeout_ms },
                    ..stay(WaitResp)
                },
                Tr::RmppAck,
            ),
            EarlyResp | SC | TW | Done => (stay(s), Tr::RmppIgnored),
            _ => return (Err(Reject::Impossible), Tr::Impossible),
        },
        // "Peer STOP or ABORT": WAIT_RESP is done with REM_ABORT_ERR; in flight the abort is
        // kept for the completion (rmad's deviation from §7.2 item 5); decided sends ignore it.
        Event::RmppAborted => match s {
            WaitResp => (done(WcStatus::RemAbortErr), Tr::RmppAbort),
            SendStart => (stay(EarlyResp), Tr::RmppAbort),
            EarlyResp | SC | TW | Done => (stay(s), Tr::RmppIgnored),
            _ => return (Err(Reject::Impossible), Tr::Impossible),
        },
        // "Retry on ACK or response timeout": go back N with a retry counted (none after a
        // shortened wait, a probe), or
        // RESP_TIMEOUT_ERR (a retry counted when everything was ACKed); a cancelled send is
        // reported as T21.
        Event::SegmentExpired(e) => match (s, e) {
            (WaitResp, SegTimeout::Resend) => (
                Outcome {
                    place: Place::InFlight,
                    transmit: true,
                    retry: true,
                    ..stay(SendStart)
                },
                Tr::RmppExpiry,
            ),
            (WaitResp, SegTimeout::Probe) => (
                Outcome {
                    place: Place::InFlight,
                    transmit: true,
                    ..stay(SendStart)
                },
                Tr::RmppExpiry,
            ),
            (WaitResp, SegTimeout::NoResponse) => (
                Outcome {
                    retry: true,
                    ..done(WcStatus::RespTimeoutErr)
                },
                Tr::RmppExpiry,
            ),
            (WaitResp, SegTimeout::Fail) => (done(WcStatus::RespTimeoutErr), Tr::RmppExpiry),
            (TW, _) => (done(WcStatus::WrFlushErr), Tr::T21),
            _ => return (Err(Reject::Impossible), Tr::Impossible),
        },
    };
    // The engine must try the backlog before this send's handler whenever a flow-controlled send
    // gives up its slot (§3.3 "Slots come free"), and after a matched response of a queued send
    // (§2.5 T10, "RH, and backlog dispatch (FC)"; §8.22).
    let frees = f.fc && (i32::from(o.fc_send) + i32::from(o.fc_wait) < 0 || t == Tr::T10);
    (
        Ok(Outcome {
            frees_fc_slot: frees,
            ..o
        }),
        t,
    )
}

/// C's `is_solicited_fc_mad` (without RMPP: the flag stands for "active kernel-RMPP transfer").
fn ref_solicited_fc(class: u8, timeout_ms: u32, rmpp_active: bool) -> bool {
    if timeout_ms == 0 || rmpp_active {
        return false;
    }
    class == 0x07 || class == 0x03 || class == 0x01 || class == 0x81
}

/// C's `recv_handler ? get_sol_fc_max_outstanding(mad_reg_req) : 0` (`IB_MAD_QP_RECV_SIZE` 512).
fn ref_sol_fc_max(has_rh: bool, reg_class: Option<u8>, q: u32) -> u32 {
    if !has_rh {
        return 0;
    }
    match reg_class {
        None => q / 4,
        Some(0x07) => q / 4,
        Some(0x03) => q / 32,
        Some(0x01) | Some(0x81) => core::cmp::min(q, 512) / 4,
        Some(_) => 0,
    }
}

/// Every state: the rows of the shared transition table.
use crate::testing::cases::state::STATES;

/// A random completion status: the named ones, their codes, or any code.
fn random_status(rng: &mut Rng) -> WcStatus {
    match rng.below(4) {
        0 => rng.pick(&[
            WcStatus::Success,
            WcStatus::LocQpOpErr,
            WcStatus::WrFlushErr,
            WcStatus::RemAbortErr,
            WcStatus::RespTimeoutErr,
            WcStatus::GeneralErr,
            WcStatus::Other(4),
        ]),
        1 => WcStatus::from_code(u32::try_from(rng.below(24)).unwrap_or(0)),
        2 => WcStatus::Other(rng.edgy_u32()),
        _ => WcStatus::from_code(rng.u32()),
    }
}

/// Random facts: any state, any timeout and retry count.
fn random_facts(rng: &mut Rng) -> SendFacts {
    SendFacts {
        state: rng.pick(&STATES),
        fc: rng.chance(1, 2),
        timeout_ms: rng.edgy_u32(),
        retries_left: rng.edgy_u32(),
    }
}

/// A random event with random parameters.
fn random_event(rng: &mut Rng) -> Event {
    match rng.below(17) {
        0 => {
            let limit = rng.edgy_u32();
            let in_use = match rng.below(3) {
                0 => limit,
                1 => limit.wrapping_sub(1),
                _ => rng.edgy_u32(),
            };
            Event::Post(Admission {
                limit,
                in_use,
                backlog_empty: rng.chance(1, 2),
            })
        }
        1 => Event::DispatchFailed,
        2 => Event::BacklogDispatch,
        3 => Event::BacklogDispatchFailed,
        4 => Event::SendCompleted(random_status(rng)),
        5 => Event::Response,
        6 => Event::Expired {
            backlog_empty: rng.chance(1, 2),
        },
        7 => Event::RetransmitFailed,
        8 => Event::Modify(if rng.chance(1, 2) { 0 } else { rng.edgy_u32() }),
        9 => Event::Unregister,
        10 => Event::Delivered,
        11 => Event::SegmentCompleted(
            random_status(rng),
            match rng.below(3) {
                0 => Segment::Next,
                1 => Segment::AwaitAck(rng.edgy_u32()),
                _ => Segment::Finished,
            },
        ),
        12 => Event::SegmentDispatchFailed(rng.edgy_u32()),
        13 => Event::WindowOpened,
        14 => Event::AllAcked,
        15 => Event::RmppAborted,
        _ => Event::SegmentExpired(rng.pick(&[
            SegTimeout::Resend,
            SegTimeout::Probe,
            SegTimeout::NoResponse,
            SegTimeout::Fail,
        ])),
    }
}

/// `step` and the model on one pair; `Err` describes the difference.
fn compare(f: SendFacts, ev: Event, strict: bool) -> Result<(Result<Outcome, Reject>, Tr), String> {
    let got = step(f, ev);
    let (want, t) = model(f, ev, strict);
    if got == want {
        return Ok((got, t));
    }
    let name = TRANSITIONS.get(t as usize).copied().unwrap_or("?");
    Err(format!(
        "step({f:?}, {ev:?}) = {got:?}, but behaviour §2.3 ({name}) gives {want:?}"
    ))
}

/// `direct_end(f, ev)` against `step`: where it gives a status, `step` gives exactly that end
/// (DONE, in no queue, no retry, no transmission, no response, that status, that change of the
/// wait count) and delivery then leaves the send IDLE; and it gives one wherever `step` ends a
/// waiting or cancelled send so at an expiry or an unregistration (the direct paths of
/// `src/engine/agent/direct.rs` cover every such end).
pub(crate) fn check_direct(f: SendFacts, ev: Event) -> Result<(), String> {
    let got = step(f, ev);
    let ends_directly = |o: &Outcome| {
        o.next == SendState::Done
            && o.place == Place::Nowhere
            && o.fc_send == 0
            && !o.transmit
            && !o.retry
            && o.store_timeout.is_none()
            && o.recv == Recv::None
            && o.complete.is_some()
    };
    match direct_end(f, ev) {
        Some((status, wait)) => {
            let want = Outcome {
                next: SendState::Done,
                place: Place::Nowhere,
                fc_send: 0,
                fc_wait: wait,
                transmit: false,
                retry: false,
                store_timeout: None,
                recv: Recv::None,
                complete: Some(status),
                frees_fc_slot: wait < 0,
            };
            if got != Ok(want) {
                return Err(format!(
                    "direct_end({f:?}, {ev:?}) = {:?}, but step gives {got:?}",
                    (status, wait)
                ));
            }
            let done = SendFacts {
                state: SendState::Done,
                ..f
            };
            match step(done, Event::Delivered) {
                Ok(o) if o.next == SendState::Idle && o.place == Place::Unchanged => Ok(()),
                other => Err(format!("delivery after a direct end gives {other:?}")),
            }
        }
        None => {
            let covered = matches!(f.state, SendState::WaitResp | TW)
                && matches!(ev, Event::Expired { .. } | Event::Unregister);
            match got {
                Ok(o) if covered && ends_directly(&o) => Err(format!(
                    "step({f:?}, {ev:?}) ends the send directly ({o:?}), but direct_end does not"
                )),
                _ => Ok(()),
            }
        }
    }
}

/// `direct_post(f, a)` against `step`: where it gives a change of the send count, `step` gives
/// exactly the transmitting post (SEND_START, in flight, that change, nothing else); and it
/// gives one wherever `step` transmits a post.
pub(crate) fn check_direct_post(f: SendFacts, ev: Event) -> Result<(), String> {
    let Event::Post(a) = ev else {
        return Ok(());
    };
    let got = step(f, ev);
    match direct_post(f, a) {
        Some(send) => {
            let want = Outcome {
                next: SendState::SendStart,
                place: Place::InFlight,
                fc_send: send,
                fc_wait: 0,
                transmit: true,
                retry: false,
                store_timeout: None,
                recv: Recv::None,
                complete: None,
                frees_fc_slot: false,
            };
            if got == Ok(want) {
                Ok(())
            } else {
                Err(format!("direct_post({f:?}, {a:?}) = {send}, but step gives {got:?}"))
            }
        }
        None => match got {
            Ok(o) if o.transmit => Err(format!(
                "step({f:?}, {ev:?}) transmits ({o:?}), but direct_post does not"
            )),
            _ => Ok(()),
        },
    }
}

/// `direct_completion(f, st)` against `step`: where it gives a completion, `step` gives exactly
/// that (a wait in the wait queue with the counters' changes, or DONE out of every queue with
/// the status, nothing else); and it gives one wherever `step` moves SEND_START to the wait
/// queue without freeing a slot, or decides the completion's own status with no counter moving.
pub(crate) fn check_direct_completion(f: SendFacts, ev: Event) -> Result<(), String> {
    let Event::SendCompleted(st) = ev else {
        return Ok(());
    };
    let got = step(f, ev);
    let base = stay(SendState::Idle);
    let direct = direct_completion(f, st);
    let want = match direct {
        Some(Completed::Wait {
            ms,
            fc_send,
            fc_wait,
        }) => Outcome {
            next: SendState::WaitResp,
            place: Place::Waiting { ms },
            fc_send,
            fc_wait,
            ..base
        },
        Some(Completed::Done(status)) => Outcome {
            next: SendState::Done,
            place: Place::Nowhere,
            complete: Some(status),
            ..base
        },
        None => {
            return match got {
                Ok(o) if o.next == SendState::WaitResp && !o.frees_fc_slot => Err(format!(
                    "step({f:?}, {ev:?}) waits ({o:?}), but direct_completion does not"
                )),
                Ok(o) if o.complete == Some(st) && o.fc_send == 0 && o.fc_wait == 0 => {
                    Err(format!(
                        "step({f:?}, {ev:?}) decides {st:?} ({o:?}), but direct_completion does not"
                    ))
                }
                _ => Ok(()),
            };
        }
    };
    if got == Ok(want) {
        Ok(())
    } else {
        Err(format!("direct_completion({f:?}, {st:?}) = {direct:?}, but step gives {got:?}"))
    }
}

/// Runs inputs `first..first + inputs` of the `step` target.
pub(crate) fn run_step_range(seed: u64, first: u64, inputs: u64) -> Result<u64, Disagreement> {
    let strict = strict();
    for i in first..first.saturating_add(inputs) {
        let mut rng = Rng::for_input(seed, i);
        let f = random_facts(&mut rng);
        let ev = random_event(&mut rng);
        let class = if rng.chance(1, 2) {
            rng.pick(&[0x01, 0x03, 0x04, 0x05, 0x06, 0x07, 0x81, 0x80, 0x00])
        } else {
            rng.byte()
        };
        let rmpp = rng.chance(1, 4);
        let has_rh = rng.chance(3, 4);
        let reg = if rng.chance(1, 4) { None } else { Some(class) };
        let q = if rng.chance(1, 2) {
            rng.pick(&[0, 3, 4, 31, 32, 64, 512, 513, 8192])
        } else {
            rng.edgy_u32()
        };
        let res = std::panic::catch_unwind(|| -> Result<(), String> {
            let _ = compare(f, ev, strict)?;
            check_direct(f, ev)?;
            check_direct_post(f, ev)?;
            check_direct_completion(f, ev)?;
            let fc = is_solicited_fc(class, f.timeout_ms, rmpp);
            if fc != ref_solicited_fc(class, f.timeout_ms, rmpp) {
                return Err(format!(
                    "is_solicited_fc({class:#04x}, {}, {rmpp}) is {fc}, C says {}",
                    f.timeout_ms, !fc
                ));
            }
            let max = sol_fc_max(has_rh, reg, q);
            if max != ref_sol_fc_max(has_rh, reg, q) {
                return Err(format!(
                    "sol_fc_max({has_rh}, {reg:?}, {q}) is {max}, C gives {}",
                    ref_sol_fc_max(has_rh, reg, q)
                ));
            }
            if WcStatus::from_code(ev_code(ev)).code() != ev_code(ev) {
                return Err(format!("WcStatus code {} does not round-trip", ev_code(ev)));
            }
            Ok(())
        })
        .unwrap_or_else(|_| Err(String::from("panicked")));
        if let Err(what) = res {
            return Err(Disagreement {
                target: "step",
                seed,
                input: i,
                what,
                reproducer: format!(
                    "facts {f:?}, event {ev:?}; class {class:#04x}, rmpp {rmpp}, recv handler \
                     {has_rh}, registration {reg:?}, queue {q}"
                ),
            });
        }
    }
    Ok(inputs)
}

/// The status code an event carries, or 0.
fn ev_code(ev: Event) -> u32 {
    match ev {
        Event::SendCompleted(s) | Event::SegmentCompleted(s, _) => s.code(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model agrees with the written-out table of `src/testing/cases/state.rs` on every cell
    /// (two independent readings of §2.3), apart from the known divergences.
    #[test]
    fn model_covers_every_cell() {
        for st in STATES {
            for fc in [false, true] {
                for timeout_ms in [0, 100] {
                    for retries_left in [0, 1] {
                        let f = SendFacts {
                            state: st,
                            fc,
                            timeout_ms,
                            retries_left,
                        };
                        for ev in [
                            Event::DispatchFailed,
                            Event::BacklogDispatch,
                            Event::BacklogDispatchFailed,
                            Event::SendCompleted(WcStatus::Other(4)),
                            Event::Response,
                            Event::Expired {
                                backlog_empty: false,
                            },
                            Event::RetransmitFailed,
                            Event::Modify(0),
                            Event::Modify(7),
                            Event::Unregister,
                            Event::Delivered,
                        ] {
                            if let Err(e) = compare(f, ev, false) {
                                panic!("{e}");
                            }
                        }
                    }
                }
            }
        }
    }

    /// D1 stays fixed: unregistration cancels an early-answered send, whose completion then
    /// reports the flush (behaviour §2.3 T24, §1.4; C's `cancel_mads`).
    #[test]
    fn d1_unregistration_flushes_an_early_answered_send() {
        let f = SendFacts {
            state: SendState::EarlyResp,
            fc: true,
            timeout_ms: 100,
            retries_left: 1,
        };
        let got = step(f, Event::Unregister).map(|o| o.next);
        let (want, _) = model(f, Event::Unregister, true);
        assert_eq!(got, Ok(SC));
        assert_eq!(want.map(|o| o.next), Ok(SC));
        let flushed = step(
            SendFacts { state: SC, ..f },
            Event::SendCompleted(WcStatus::Success),
        )
        .map(|o| o.complete);
        assert_eq!(flushed, Ok(Some(WcStatus::WrFlushErr)));
    }
}
