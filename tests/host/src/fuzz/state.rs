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
//!   to [`MAX_SENDS`] sends that applies every outcome as `Agent::apply` does and produces events
//!   only where the engine does: posts (with admission from the live counters), modify and cancel
//!   through the client's handle, send completions in any order with any status, transport
//!   refusals at post, backlog dispatch and retransmission, responses and duplicates and strays
//!   whose headers go through `MadHdr::parse` and `tid_hi` routing and are matched as §4 says,
//!   time passing and the agent's work (expiries, cancelled sends, backlog, deliveries), and
//!   unregistration. Every step is compared with the model; after every action the invariants
//!   hold (see [`Sim::check`]); each walk ends by draining the agent (liveness). A failing walk is
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
use crate::mad::wire::{
    make_tid,
    tid_hi,
    MadHdr,
    IB_MGMT_MAD_SIZE, //
};
use std::format;
use std::string::String;
use std::vec::Vec;

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
    /// disagreement to reduce ([`tests::shrinker_reduces_a_failing_walk`]).
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

// ---------------------------------------------------------------------------------------------
// The `agent` target.

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

/// One send of the simulated agent: the engine's facts and queue position, and what the
/// checks count for its current post.
#[derive(Clone, Debug, Default)]
struct SimSend {
    facts: Option<SendFacts>,
    tid: u64,
    class: u8,
    /// Position in its queue (FIFO by this key; waiting sends by `due`, then newest first).
    key: u64,
    /// Expiry of a waiting send (ms).
    due: u64,
    /// A successful post whose send handler has not run.
    live: bool,
    gen: u64,
    /// Transmissions handed to the transport whose completion has not come.
    inflight: u32,
    /// The status decided for the current post.
    decided: Option<WcStatus>,
    /// Receive-handler deliveries for the current post.
    rh: u32,
    /// Hand-overs to the transport for the current post (the first and each retry).
    handovers: u32,
    retries_at_post: u32,
    retries_used: u32,
    /// A cancel of the current post returned 0.
    cancel_ok: bool,
    /// The state the send was in when unregistration reached it.
    unreg_from: Option<SendState>,
    /// A retransmission or backlog dispatch of this post was refused.
    refused_later: bool,
    in_done_q: bool,
    /// Successful posts and send-handler calls, over the whole walk.
    posts: u64,
    handlers: u64,
}

/// A walk's fixed parameters.
#[derive(Clone, Copy, Debug)]
struct Config {
    sends: usize,
    limit: u32,
    hi_tid: u32,
}

/// The simulated agent.
struct Sim {
    cfg: Config,
    strict: bool,
    sends: Vec<SimSend>,
    /// Exact counters (may not go negative) and the engine's saturating ones.
    s: i64,
    w: i64,
    s_sat: u32,
    w_sat: u32,
    backlog: u32,
    dead: bool,
    now: u64,
    seq: u64,
    /// Pending send completions: (send, post generation).
    transport: Vec<(usize, u64)>,
    refuse: u32,
    done_q: Vec<usize>,
    /// Transitions taken.
    cov: [u64; TRANSITIONS.len()],
    steps: u64,
}

/// The engine's `add_delta`: saturating.
fn add_sat(v: u32, d: i8) -> u32 {
    if d >= 0 {
        v.saturating_add(u32::from(d.unsigned_abs()))
    } else {
        v.saturating_sub(u32::from(d.unsigned_abs()))
    }
}

/// Who produced an event: the engine's own events must be accepted, the client's may be refused.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    Engine,
    Client,
}

type Sr<T> = Result<T, String>;

impl Sim {
    fn new(cfg: Config, strict: bool) -> Self {
        Self {
            cfg,
            strict,
            sends: std::vec![SimSend::default(); cfg.sends],
            s: 0,
            w: 0,
            s_sat: 0,
            w_sat: 0,
            backlog: 0,
            dead: false,
            now: 0,
            seq: 0,
            transport: Vec::new(),
            refuse: 0,
            done_q: Vec::new(),
            cov: [0; TRANSITIONS.len()],
            steps: 0,
        }
    }

    fn state(&self, i: usize) -> SendState {
        self.sends[i].facts.map_or(SendState::Idle, |f| f.state)
    }

    fn next_key(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// One event through `step`, compared with the model, then applied as `Agent::apply` does.
    fn apply(&mut self, i: usize, ev: Event, origin: Origin) -> Sr<Option<Outcome>> {
        let Some(f) = self.sends[i].facts else {
            return Err(format!("send {i} has no facts for {ev:?}"));
        };
        let (got, t) = compare(f, ev, self.strict)?;
        self.steps += 1;
        self.cov[t as usize] += 1;
        let o = match got {
            Ok(o) => o,
            Err(r) if origin == Origin::Engine => {
                return Err(format!(
                    "the engine's event {ev:?} was refused ({r:?}) for send {i} with {f:?}"
                ))
            }
            Err(_) => return Ok(None),
        };
        self.s += i64::from(o.fc_send);
        self.w += i64::from(o.fc_wait);
        self.s_sat = add_sat(self.s_sat, o.fc_send);
        self.w_sat = add_sat(self.w_sat, o.fc_wait);
        let was = f.state;
        if was == SendState::Queued && o.next != SendState::Queued {
            self.backlog = self.backlog.saturating_sub(1);
        }
        if o.next == SendState::Queued && was != SendState::Queued {
            self.backlog += 1;
        }
        let key = match o.place {
            Place::Unchanged | Place::Nowhere => None,
            _ => Some(self.next_key()),
        };
        let now = self.now;
        let sd = &mut self.sends[i];
        let mut nf = f;
        if o.retry {
            nf.retries_left = nf.retries_left.saturating_sub(1);
            sd.retries_used += 1;
        }
        if let Some(t) = o.store_timeout {
            nf.timeout_ms = t;
        }
        nf.state = o.next;
        sd.facts = Some(nf);
        if let Some(k) = key {
            sd.key = k;
        }
        if let Place::Waiting { ms } = o.place {
            sd.due = now + u64::from(ms);
        }
        if ev == Event::Unregister {
            sd.unreg_from = Some(was);
        }
        if o.recv == Recv::Deliver {
            sd.rh += 1;
        }
        if let Some(st) = o.complete {
            if let Some(before) = sd.decided {
                return Err(format!(
                    "send {i} got a second status {st:?} after {before:?} ({ev:?} on {f:?})"
                ));
            }
            sd.decided = Some(st);
            if o.recv != Recv::Deliver {
                sd.in_done_q = true;
                self.done_q.push(i);
            }
        }
        Ok(Some(o))
    }

    /// Hands send `i` to the transport; false if the transport refuses.
    fn transmit(&mut self, i: usize) -> bool {
        self.sends[i].handovers += 1;
        if self.refuse > 0 {
            self.refuse -= 1;
            return false;
        }
        let gen = self.sends[i].gen;
        self.sends[i].inflight += 1;
        self.transport.push((i, gen));
        true
    }

    /// The backlog heads go to the transport while the limit allows (`dispatch_backlog`).
    fn dispatch_backlog(&mut self) -> Sr<()> {
        while !self.dead
            && self.backlog > 0
            && self.s_sat.saturating_add(self.w_sat) < self.cfg.limit
        {
            let head = (0..self.sends.len())
                .filter(|&j| self.state(j) == SendState::Queued)
                .min_by_key(|&j| self.sends[j].key);
            let Some(j) = head else {
                return Err(String::from(
                    "the backlog count is not 0 but no send is queued",
                ));
            };
            let o = self.apply(j, Event::BacklogDispatch, Origin::Engine)?;
            if o.is_some_and(|o| o.transmit) && !self.transmit(j) {
                self.sends[j].refused_later = true;
                self.apply(j, Event::BacklogDispatchFailed, Origin::Engine)?;
            }
        }
        Ok(())
    }

    /// Calls the send handler of `i` (its status is decided): `delivered`, then the checks of
    /// what one post may end with.
    fn deliver(&mut self, i: usize) -> Sr<()> {
        self.sends[i].in_done_q = false;
        self.apply(i, Event::Delivered, Origin::Engine)?;
        let sd = &mut self.sends[i];
        let Some(status) = sd.decided.take() else {
            return Err(format!("send {i} was delivered without a status"));
        };
        if !sd.live {
            return Err(format!(
                "send {i} got a send handler without a successful post"
            ));
        }
        sd.live = false;
        sd.handlers += 1;
        // §1.7: "0 from cancel: one SH call follows, with IB_WC_WR_FLUSH_ERR" (the exceptions are
        // dispatch failures racing the cancel, which rmad rules out by dispatching under the lock).
        if sd.cancel_ok && status != WcStatus::WrFlushErr {
            return Err(format!(
                "send {i} was cancelled (0) but its send handler got {status:?}"
            ));
        }
        // §1.4 step 1 and T24/T25: every outstanding send is flushed by unregistration.
        if let Some(from) = sd.unreg_from {
            let flushed = match from {
                SendState::Done | SendState::Idle => true,
                _ => status == WcStatus::WrFlushErr,
            };
            if !flushed {
                return Err(format!(
                    "send {i}, {from:?} at unregistration, got {status:?} instead of the flush"
                ));
            }
        }
        // §3.1: RESP_TIMEOUT_ERR only after every retry, or for a refused retransmission.
        if status == WcStatus::RespTimeoutErr
            && sd.retries_used != sd.retries_at_post
            && !sd.refused_later
        {
            return Err(format!(
                "send {i} timed out after {} of {} retries",
                sd.retries_used, sd.retries_at_post
            ));
        }
        // §1.9 "Response before request": a matched response of a waiting or queued send reaches
        // RH before SH(SUCCESS); a response is never delivered twice (§8.6).
        if sd.rh > 1 {
            return Err(format!("send {i}'s response reached RH {} times", sd.rh));
        }
        sd.rh = 0;
        sd.cancel_ok = false;
        sd.unreg_from = None;
        sd.refused_later = false;
        Ok(())
    }

    /// Calls every due send handler, in the order their statuses were decided.
    fn deliver_due(&mut self) -> Sr<()> {
        while !self.done_q.is_empty() {
            let i = self.done_q.remove(0);
            self.deliver(i)?;
        }
        Ok(())
    }

    /// The agent's work (`run_work`): expiries in expiry order, cancelled sends, the backlog,
    /// then the due handlers.
    fn work(&mut self) -> Sr<()> {
        if !self.dead {
            loop {
                let head = (0..self.sends.len())
                    .filter(|&j| self.state(j) == SendState::WaitResp)
                    .min_by_key(|&j| (self.sends[j].due, u64::MAX - self.sends[j].key));
                let Some(j) = head.filter(|&j| self.sends[j].due <= self.now) else {
                    break;
                };
                let ev = Event::Expired {
                    backlog_empty: self.backlog == 0,
                };
                let o = self.apply(j, ev, Origin::Engine)?;
                if o.is_some_and(|o| o.transmit) && !self.transmit(j) {
                    self.sends[j].refused_later = true;
                    self.apply(j, Event::RetransmitFailed, Origin::Engine)?;
                }
            }
            let mut cancelled: Vec<usize> = (0..self.sends.len())
                .filter(|&j| self.state(j) == TW)
                .collect();
            cancelled.sort_by_key(|&j| self.sends[j].key);
            for j in cancelled {
                let ev = Event::Expired {
                    backlog_empty: true,
                };
                self.apply(j, ev, Origin::Engine)?;
            }
            self.dispatch_backlog()?;
        }
        self.deliver_due()
    }

    /// §4: the send a response with `tid` and `class` matches, and whether it is a cancelled one.
    /// Candidates in C's list order: the wait list (cancelled sends at its head, then by expiry,
    /// equal expiries newest first), the backlog, then the send list, where a send counts only
    /// while its timeout is non-zero (after an early response or a cancel it is 0 in C).
    fn find_send(&self, tid: u64, class: u8) -> Option<(usize, bool)> {
        let same = |j: &usize| self.sends[*j].tid == tid && self.sends[*j].class == class;
        let n = self.sends.len();
        let in_state = |st: SendState| (0..n).filter(move |&j| self.state(j) == st).filter(same);
        if let Some(j) = in_state(TW).min_by_key(|&j| self.sends[j].key) {
            return Some((j, true));
        }
        if let Some(j) = in_state(SendState::WaitResp)
            .min_by_key(|&j| (self.sends[j].due, u64::MAX - self.sends[j].key))
        {
            return Some((j, false));
        }
        if let Some(j) = in_state(SendState::Queued).min_by_key(|&j| self.sends[j].key) {
            return Some((j, false));
        }
        in_state(SendState::SendStart)
            .filter(|&j| self.sends[j].facts.is_some_and(|f| f.timeout_ms != 0))
            .min_by_key(|&j| self.sends[j].key)
            .map(|j| (j, false))
    }

    /// A MAD arrives for the agent's port: it goes through the wire parser and `hi_tid`
    /// routing, and a response is matched and applied (`Agent::receive`).
    fn receive(&mut self, hdr: MadHdr) -> Sr<()> {
        let mut buf = [0u8; IB_MGMT_MAD_SIZE];
        hdr.write(&mut buf)
            .map_err(|e| format!("writing a header into a MAD failed: {e:?}"))?;
        let h = MadHdr::parse(&buf).map_err(|e| format!("a whole MAD did not parse: {e:?}"))?;
        if h != hdr {
            return Err(format!("{hdr:?} came back from the wire as {h:?}"));
        }
        if self.dead || tid_hi(h.tid) != self.cfg.hi_tid || !h.is_response() {
            // Unregistered, routed to another agent, or a request (RH without a send).
            return Ok(());
        }
        let Some((j, cancelled)) = self.find_send(h.tid, h.mgmt_class) else {
            return Ok(());
        };
        let was = self.state(j);
        let Some(o) = self.apply(j, Event::Response, Origin::Engine)? else {
            return Ok(());
        };
        let want = if cancelled { Recv::Drop } else { Recv::Deliver };
        if o.recv != want {
            return Err(format!(
                "§4 matched send {j} ({was:?}) but step's receive action is {:?}, not {want:?}",
                o.recv
            ));
        }
        if o.frees_fc_slot {
            // The backlog moves before RH (§8.22).
            self.dispatch_backlog()?;
        }
        if o.recv == Recv::Deliver && o.complete.is_some() {
            // "Response before request": SH follows RH in this thread.
            self.deliver(j)?;
        }
        Ok(())
    }

    /// The header of a response to send `i`.
    fn answer(&self, i: usize, method: u8) -> MadHdr {
        MadHdr {
            base_version: 1,
            mgmt_class: self.sends[i].class,
            class_version: 2,
            method,
            status: 0,
            class_specific: 0,
            tid: self.sends[i].tid,
            attr_id: 0x0010,
            resv: 0,
            attr_mod: 0,
        }
    }

    /// Runs one action.
    fn act(&mut self, a: Action) -> Sr<()> {
        let n = self.sends.len();
        let idx = |x: u8| usize::from(x) % n;
        match a {
            Action::Post {
                send,
                class,
                lo,
                timeout,
                retries,
                rmpp,
            } => {
                let i = idx(send);
                if self.dead {
                    // ESHUTDOWN before the state machine (§8.3).
                    return Ok(());
                }
                let adm = Admission {
                    limit: self.cfg.limit,
                    in_use: self.s_sat.saturating_add(self.w_sat),
                    backlog_empty: self.backlog == 0,
                };
                if self.state(i) != SendState::Idle {
                    // The C API's double post: EBUSY (and step agrees).
                    let f = self.sends[i].facts.unwrap_or(SendFacts {
                        state: SendState::Idle,
                        fc: false,
                        timeout_ms: 0,
                        retries_left: 0,
                    });
                    let (r, t) = compare(f, Event::Post(adm), self.strict)?;
                    self.cov[t as usize] += 1;
                    if r != Err(Reject::Outstanding) {
                        return Err(format!("a post of outstanding send {i} gave {r:?}"));
                    }
                    return Ok(());
                }
                let class = POST_CLASSES[usize::from(class) % POST_CLASSES.len()];
                let timeout_ms = POST_TIMEOUTS[usize::from(timeout) % POST_TIMEOUTS.len()];
                let retries = u32::from(retries % 4);
                let fc = is_solicited_fc(class, timeout_ms, rmpp);
                let tid = make_tid(self.cfg.hi_tid, u32::from(lo % 3) + 1);
                let sd = &mut self.sends[i];
                sd.gen += 1;
                sd.tid = tid;
                sd.class = class;
                sd.facts = Some(SendFacts {
                    state: SendState::Idle,
                    fc,
                    timeout_ms,
                    retries_left: retries,
                });
                sd.retries_at_post = retries;
                sd.retries_used = 0;
                sd.handovers = 0;
                sd.rh = 0;
                sd.cancel_ok = false;
                sd.unreg_from = None;
                sd.refused_later = false;
                let o = self.apply(i, Event::Post(adm), Origin::Engine)?;
                if o.is_some_and(|o| o.transmit) && !self.transmit(i) {
                    // T3: the post fails; no handler will run.
                    self.apply(i, Event::DispatchFailed, Origin::Engine)?;
                    if self.state(i) != SendState::Idle {
                        return Err(format!("a failed post left send {i} {:?}", self.state(i)));
                    }
                    return Ok(());
                }
                self.sends[i].live = true;
                self.sends[i].posts += 1;
            }
            Action::Modify { send, t } => {
                let i = idx(send);
                if !self.sends[i].live {
                    // A stale handle: EINVAL before the state machine.
                    return Ok(());
                }
                let t = MODIFY_TIMES[usize::from(t) % MODIFY_TIMES.len()];
                if self.apply(i, Event::Modify(t), Origin::Client)?.is_some() && t == 0 {
                    self.sends[i].cancel_ok = true;
                }
            }
            Action::Complete { k, status } => {
                if self.transport.is_empty() {
                    return Ok(());
                }
                let (i, gen) = self.transport.remove(usize::from(k) % self.transport.len());
                self.sends[i].inflight -= 1;
                if gen != self.sends[i].gen {
                    return Err(format!("a send completion of an earlier post of send {i}"));
                }
                let st = COMPLETION_STATUSES[usize::from(status) % COMPLETION_STATUSES.len()];
                let o = self.apply(i, Event::SendCompleted(st), Origin::Engine)?;
                if o.is_some_and(|o| o.frees_fc_slot) {
                    self.dispatch_backlog()?;
                }
            }
            Action::Respond { send, method } => {
                let i = idx(send);
                if self.sends[i].facts.is_none() {
                    return Ok(());
                }
                let m = [0x81, 0x86, 0x07, 0x95][usize::from(method) % 4];
                self.receive(self.answer(i, m))?;
            }
            Action::Stray {
                lo,
                class,
                method,
                ours,
            } => {
                let hi = if ours {
                    self.cfg.hi_tid
                } else {
                    self.cfg.hi_tid ^ 1
                };
                let hdr = MadHdr {
                    base_version: 1,
                    mgmt_class: POST_CLASSES[usize::from(class) % POST_CLASSES.len()],
                    method: [0x81, 0x01, 0x03, 0x07, 0x86][usize::from(method) % 5],
                    tid: make_tid(hi, u32::from(lo % 4) + 1),
                    ..MadHdr::default()
                };
                self.receive(hdr)?;
            }
            Action::Advance { ms } => {
                self.now += ADVANCES[usize::from(ms) % ADVANCES.len()];
            }
            Action::Work => self.work()?,
            Action::Refuse { n } => self.refuse = u32::from(n % 3) + 1,
            Action::Unregister => {
                if self.dead {
                    return Ok(());
                }
                self.dead = true;
                self.unregister_pass()?;
            }
        }
        if self.dead {
            // The unregistering thread: flushes whatever reached the wait or cancel queues since,
            // and calls every due handler.
            self.unregister_pass()?;
        }
        Ok(())
    }

    /// Unregistration's walk: in flight, cancelled, waiting (by expiry), backlog; then the due
    /// handlers.
    fn unregister_pass(&mut self) -> Sr<()> {
        let order = |sim: &Self, st: SendState| {
            let mut v: Vec<usize> = (0..sim.sends.len())
                .filter(|&j| sim.state(j) == st)
                .collect();
            if st == SendState::WaitResp {
                v.sort_by_key(|&j| (sim.sends[j].due, u64::MAX - sim.sends[j].key));
            } else {
                v.sort_by_key(|&j| sim.sends[j].key);
            }
            v
        };
        let first = self.sends.iter().any(|s| s.live && s.unreg_from.is_none());
        if first {
            let mut flight: Vec<usize> = (0..self.sends.len())
                .filter(|&j| {
                    matches!(
                        self.state(j),
                        SendState::SendStart | SendState::EarlyResp | SC
                    ) && self.sends[j].unreg_from.is_none()
                })
                .collect();
            flight.sort_by_key(|&j| self.sends[j].key);
            for j in flight {
                self.apply(j, Event::Unregister, Origin::Engine)?;
            }
        }
        for st in [TW, SendState::WaitResp, SendState::Queued] {
            for j in order(self, st) {
                self.apply(j, Event::Unregister, Origin::Engine)?;
            }
        }
        self.deliver_due()
    }

    /// The invariants that hold between any two actions.
    fn check(&self) -> Sr<()> {
        let count = |st: SendState, fc: bool| {
            self.sends
                .iter()
                .filter(|s| s.facts.is_some_and(|f| f.state == st && (f.fc || !fc)))
                .count()
        };
        // §2.2: the counters are the FC sends in SEND_START and WAIT_RESP; they never go negative,
        // so the engine's saturating counters never saturate.
        let want_s = i64::try_from(count(SendState::SendStart, true)).unwrap_or(-1);
        let want_w = i64::try_from(count(SendState::WaitResp, true)).unwrap_or(-1);
        if self.s != want_s || self.w != want_w {
            return Err(format!(
                "flow-control counters s={} w={}, but {want_s} FC sends are SEND_START and \
                 {want_w} WAIT_RESP",
                self.s, self.w
            ));
        }
        if i64::from(self.s_sat) != self.s || i64::from(self.w_sat) != self.w {
            return Err(String::from("a saturating counter saturated"));
        }
        // §3.3: the limit holds, and only FC sends are ever queued.
        if self.cfg.limit != 0 && self.s + self.w > i64::from(self.cfg.limit) {
            return Err(format!(
                "{} FC sends in flight or waiting, over the limit {}",
                self.s + self.w,
                self.cfg.limit
            ));
        }
        let queued = count(SendState::Queued, false);
        if usize::try_from(self.backlog).ok() != Some(queued) {
            return Err(format!(
                "backlog count {} for {queued} queued sends",
                self.backlog
            ));
        }
        if count(SendState::Queued, true) != queued {
            return Err(String::from(
                "a send without flow control is in the backlog",
            ));
        }
        if self.cfg.limit == 0 && queued != 0 {
            return Err(String::from(
                "a send is queued although flow control is off",
            ));
        }
        for (i, sd) in self.sends.iter().enumerate() {
            let st = self.state(i);
            // A send awaiting its send completion has exactly one transmission at the
            // transport; any other has none.
            let awaits = matches!(st, SendState::SendStart | SendState::EarlyResp | SC);
            if sd.inflight != u32::from(awaits) {
                return Err(format!(
                    "send {i} is {st:?} with {} transmissions at the transport",
                    sd.inflight
                ));
            }
            // §1.9: one SH per successful post: outstanding exactly until it has run.
            if sd.live == (st == SendState::Idle) {
                return Err(format!("send {i} is {st:?} but live is {}", sd.live));
            }
            if sd.posts != sd.handlers + u64::from(sd.live) {
                return Err(format!(
                    "send {i}: {} posts, {} send handlers",
                    sd.posts, sd.handlers
                ));
            }
            // §2.2: a DONE send is in no list but the delivery queue, with its status decided.
            if (st == SendState::Done) != sd.in_done_q || sd.in_done_q != sd.decided.is_some() {
                return Err(format!(
                    "send {i} is {st:?}, in the delivery queue {}, status {:?}",
                    sd.in_done_q, sd.decided
                ));
            }
            if sd.rh > 1 {
                return Err(format!("send {i}'s response reached RH twice"));
            }
            // §3.1: 1 + retries hand-overs at most; the retries left are what was not used.
            if sd.handovers > sd.retries_at_post + 1 {
                return Err(format!(
                    "send {i} was handed over {} times with {} retries",
                    sd.handovers, sd.retries_at_post
                ));
            }
            if let Some(f) = sd.facts {
                if sd.live && f.retries_left + sd.retries_used != sd.retries_at_post {
                    return Err(format!("send {i}'s retries left do not add up"));
                }
            }
        }
        // After unregistration nothing waits or is queued (§1.4).
        if self.dead && (count(SendState::WaitResp, false) + queued + count(TW, false)) != 0 {
            return Err(String::from(
                "a send waits or is queued after unregistration",
            ));
        }
        Ok(())
    }

    /// Ends the walk: the transport completes everything, time runs until every send is done,
    /// and every send is then idle with every post answered by one send handler.
    fn drain(&mut self) -> Sr<()> {
        for _ in 0..100_000 {
            if self.sends.iter().all(|s| !s.live) && self.transport.is_empty() {
                break;
            }
            while !self.transport.is_empty() {
                self.act(Action::Complete { k: 0, status: 0 })?;
                self.check()?;
            }
            let next_due = (0..self.sends.len())
                .filter(|&j| self.state(j) == SendState::WaitResp)
                .map(|j| self.sends[j].due)
                .min();
            if let Some(d) = next_due {
                self.now = self.now.max(d);
            }
            self.act(Action::Work)?;
            self.check()?;
        }
        if self.backlog != 0 || self.s != 0 || self.w != 0 {
            return Err(format!(
                "the agent does not drain: backlog {}, s {}, w {}",
                self.backlog, self.s, self.w
            ));
        }
        for (i, sd) in self.sends.iter().enumerate() {
            if sd.live || self.state(i) != SendState::Idle || sd.posts != sd.handlers {
                return Err(format!(
                    "send {i} does not drain: {:?}, {} posts, {} send handlers",
                    self.state(i),
                    sd.posts,
                    sd.handlers
                ));
            }
        }
        Ok(())
    }
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
