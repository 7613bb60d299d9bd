// SPDX-License-Identifier: GPL-2.0

//! Checks of the send state machine, shared by the host tests and the KUnit suite
//! `rmad_state`.
//!
//! [`transition_table`] compares [`step`] with a table written out from Documentation/behaviour.md
//! §2.3 for every state and every event. [`random_walks`] drives many sends of one simulated agent
//! through random event sequences and checks the invariants the spec demands: the flow-control
//! counters always equal the number of flow-controlled sends in SEND_START and WAIT_RESP (§2.2),
//! and every successful post ends in exactly one send-handler call (§1.9).

use crate::mad::state::*;
use crate::testing::cases::{
    ensure,
    CheckResult, //
};

const SC: SendState = SendState::Canceled(CancelWait::SendCompletion);
const TW: SendState = SendState::Canceled(CancelWait::TimeoutWork);

/// The states, in the order of the table's rows.
pub(crate) const STATES: [SendState; 8] = [
    SendState::Idle,
    SendState::Queued,
    SendState::SendStart,
    SendState::WaitResp,
    SendState::EarlyResp,
    SC,
    TW,
    SendState::Done,
];

/// The events, in the order of the table's columns.
const EVENTS: [Event; 15] = [
    // Admitted post.
    Event::Post(Admission {
        limit: 4,
        in_use: 0,
        backlog_empty: true,
    }),
    // Post that must queue (all slots in use).
    Event::Post(Admission {
        limit: 4,
        in_use: 4,
        backlog_empty: true,
    }),
    Event::DispatchFailed,
    Event::BacklogDispatch,
    Event::BacklogDispatchFailed,
    Event::SendCompleted(WcStatus::Success),
    Event::SendCompleted(WcStatus::Other(4)),
    Event::Response,
    Event::Expired {
        backlog_empty: true,
    },
    Event::Expired {
        backlog_empty: false,
    },
    Event::RetransmitFailed,
    Event::Modify(0),
    Event::Modify(50),
    Event::Unregister,
    Event::Delivered,
];

/// Expected result of one cell: the next state, or the rejection.
type Cell = Result<SendState, Reject>;

const O: Reject = Reject::Outstanding;
const N: Reject = Reject::NotCancellable;
const X: Reject = Reject::Impossible;

use SendState::{Done as D, EarlyResp as E, Idle as I, Queued as Q, SendStart as S, WaitResp as W};

/// Documentation/behaviour.md §2.3 for a flow-controlled send with `timeout_ms` 100 and one retry
/// left. Columns follow [`EVENTS`]: post(admit), post(queue), dispatch-failed, backlog-dispatch,
/// backlog-dispatch-failed, completed(ok), completed(err), response, expired(backlog empty),
/// expired(backlog busy), retransmit-failed, cancel, modify(50), unregister, delivered.
const TABLE: [[Cell; 15]; 8] = [
    // Idle
    [
        Ok(S),
        Ok(Q),
        Err(X),
        Err(X),
        Err(X),
        Err(X),
        Err(X),
        Ok(I),
        Err(X),
        Err(X),
        Err(X),
        Err(N),
        Err(N),
        Err(X),
        Err(X),
    ],
    // Queued
    [
        Err(O),
        Err(O),
        Err(X),
        Ok(S),
        Err(X),
        Err(X),
        Err(X),
        Ok(D),
        Err(X),
        Err(X),
        Err(X),
        Ok(TW),
        Ok(Q),
        Ok(D),
        Err(X),
    ],
    // SendStart
    [
        Err(O),
        Err(O),
        Ok(I),
        Err(X),
        Ok(D),
        Ok(W),
        Ok(W),
        Ok(E),
        Err(X),
        Err(X),
        Ok(D),
        Ok(SC),
        Ok(S),
        Ok(SC),
        Err(X),
    ],
    // WaitResp
    [
        Err(O),
        Err(O),
        Err(X),
        Err(X),
        Err(X),
        Err(X),
        Err(X),
        Ok(D),
        Ok(S),
        Ok(Q),
        Err(X),
        Ok(TW),
        Ok(W),
        Ok(D),
        Err(X),
    ],
    // EarlyResp
    [
        Err(O),
        Err(O),
        Ok(I),
        Err(X),
        Ok(D),
        Ok(D),
        Ok(D),
        Ok(E),
        Err(X),
        Err(X),
        Err(X),
        Ok(SC),
        Ok(E),
        Ok(SC),
        Err(X),
    ],
    // Canceled, waiting for the send completion
    [
        Err(O),
        Err(O),
        Ok(I),
        Err(X),
        Ok(D),
        Ok(D),
        Ok(D),
        Ok(SC),
        Err(X),
        Err(X),
        Err(X),
        Err(N),
        Err(N),
        Ok(SC),
        Err(X),
    ],
    // Canceled, waiting for the timeout work
    [
        Err(O),
        Err(O),
        Err(X),
        Err(X),
        Err(X),
        Err(X),
        Err(X),
        Ok(TW),
        Ok(D),
        Ok(D),
        Err(X),
        Err(N),
        Err(N),
        Ok(D),
        Err(X),
    ],
    // Done
    [
        Err(O),
        Err(O),
        Err(X),
        Err(X),
        Err(X),
        Err(X),
        Err(X),
        Ok(D),
        Err(X),
        Err(X),
        Err(X),
        Err(N),
        Err(N),
        Ok(D),
        Ok(I),
    ],
];

/// Facts of the table's send in `state`.
fn facts(state: SendState) -> SendFacts {
    SendFacts {
        state,
        fc: true,
        timeout_ms: 100,
        retries_left: 1,
    }
}

/// [`step`] agrees with [`TABLE`] on every state/event pair.
pub(crate) fn transition_table() -> CheckResult {
    const C: &str = "transition_table";
    for (si, (state, row)) in STATES.iter().zip(TABLE.iter()).enumerate() {
        for (ei, (ev, want)) in EVENTS.iter().zip(row.iter()).enumerate() {
            let got = step(facts(*state), *ev).map(|o| o.next);
            ensure!(C, si * 100 + ei, got == *want);
        }
    }
    Ok(())
}

/// The statuses handed to the send handler, and the receive actions (Documentation/behaviour.md
/// §2.5).
pub(crate) fn handler_statuses() -> CheckResult {
    const C: &str = "handler_statuses";
    let err4 = WcStatus::Other(4);
    // (facts, event, expected send-handler status, expected receive action)
    let rows: [(SendFacts, Event, Option<WcStatus>, Recv); 16] = [
        // T6: no timeout, the transport's status is reported, even an error (scenario 60).
        (
            SendFacts {
                timeout_ms: 0,
                fc: false,
                ..facts(S)
            },
            Event::SendCompleted(err4),
            Some(err4),
            Recv::None,
        ),
        // T5: with a timeout the error is swallowed: the send waits (7.3, scenario 60).
        (facts(S), Event::SendCompleted(err4), None, Recv::None),
        // T8: after an early response the completion's own status.
        (facts(E), Event::SendCompleted(err4), Some(err4), Recv::None),
        // T20: a cancelled send reports the flush even when the transport succeeded.
        (
            facts(SC),
            Event::SendCompleted(WcStatus::Success),
            Some(WcStatus::WrFlushErr),
            Recv::None,
        ),
        // T7, T9, T10.
        (facts(S), Event::Response, None, Recv::Deliver),
        (
            facts(W),
            Event::Response,
            Some(WcStatus::Success),
            Recv::Deliver,
        ),
        (
            facts(Q),
            Event::Response,
            Some(WcStatus::Success),
            Recv::Deliver,
        ),
        // No response expected: no match.
        (
            SendFacts {
                timeout_ms: 0,
                ..facts(S)
            },
            Event::Response,
            None,
            Recv::Drop,
        ),
        // T22 and duplicates.
        (facts(SC), Event::Response, None, Recv::Drop),
        (facts(TW), Event::Response, None, Recv::Drop),
        (facts(E), Event::Response, None, Recv::Drop),
        // T13: no retries left.
        (
            SendFacts {
                retries_left: 0,
                ..facts(W)
            },
            Event::Expired {
                backlog_empty: true,
            },
            Some(WcStatus::RespTimeoutErr),
            Recv::None,
        ),
        // T21, T25, backlog failure, retransmission failure.
        (
            facts(TW),
            Event::Expired {
                backlog_empty: false,
            },
            Some(WcStatus::WrFlushErr),
            Recv::None,
        ),
        (
            facts(W),
            Event::Unregister,
            Some(WcStatus::WrFlushErr),
            Recv::None,
        ),
        (
            facts(SC),
            Event::BacklogDispatchFailed,
            Some(WcStatus::LocQpOpErr),
            Recv::None,
        ),
        (
            facts(S),
            Event::RetransmitFailed,
            Some(WcStatus::RespTimeoutErr),
            Recv::None,
        ),
    ];
    for (i, (f, ev, status, recv)) in rows.iter().enumerate() {
        let o = step(*f, *ev);
        ensure!(C, i, o.map(|o| o.complete) == Ok(*status));
        ensure!(C, i, o.map(|o| o.recv) == Ok(*recv));
    }
    // A retry with the backlog in use goes to the backlog only for flow-controlled sends.
    let not_fc = SendFacts {
        fc: false,
        ..facts(W)
    };
    let o = step(
        not_fc,
        Event::Expired {
            backlog_empty: false,
        },
    );
    ensure!(
        C,
        100,
        o.map(|o| (o.next, o.transmit, o.retry)) == Ok((S, true, true))
    );
    // Cancel and modify store the new timeout; modify of a waiting send re-sorts it.
    ensure!(
        C,
        101,
        step(facts(W), Event::Modify(0)).map(|o| o.store_timeout) == Ok(Some(0))
    );
    ensure!(
        C,
        102,
        step(facts(W), Event::Modify(70)).map(|o| (o.store_timeout, o.place))
            == Ok((Some(70), Place::Waiting { ms: 70 }))
    );
    ensure!(
        C,
        103,
        step(facts(Q), Event::Modify(0)).map(|o| o.place) == Ok(Place::CancelQueue)
    );
    Ok(())
}

/// Admission (T1/T2) and the flow-control classification and limits (Documentation/behaviour.md
/// §1.3, §3.3).
pub(crate) fn flow_control_rules() -> CheckResult {
    const C: &str = "flow_control_rules";
    let adm = |limit, in_use, backlog_empty| {
        Event::Post(Admission {
            limit,
            in_use,
            backlog_empty,
        })
    };
    // (fc, limit, in_use, backlog_empty, expected state)
    let rows: [(bool, u32, u32, bool, SendState); 8] = [
        (true, 16, 15, true, S),
        (true, 16, 16, true, Q),
        (true, 16, 0, false, Q),
        (true, 0, 100, false, S),
        (false, 16, 16, false, S),
        (false, 1, 5, true, S),
        (true, 1, 0, true, S),
        (true, 1, 1, true, Q),
    ];
    for (i, (fc, limit, in_use, empty, want)) in rows.iter().enumerate() {
        let f = SendFacts {
            fc: *fc,
            ..facts(I)
        };
        ensure!(
            C,
            i,
            step(f, adm(*limit, *in_use, *empty)).map(|o| o.next) == Ok(*want)
        );
    }
    // (class, timeout, kernel-RMPP active, FC?)
    let classes: [(u8, u32, bool, bool); 8] = [
        (0x07, 100, false, true),
        (0x03, 1, false, true),
        (0x01, 5, false, true),
        (0x81, 5, false, true),
        (0x04, 100, false, false),
        (0x07, 0, false, false),
        (0x03, 100, true, false),
        (0x06, 100, false, false),
    ];
    for (i, (class, t, rmpp, want)) in classes.iter().enumerate() {
        ensure!(C, 10 + i, is_solicited_fc(*class, *t, *rmpp) == *want);
    }
    // (has recv handler, registered class, recv queue size, limit)
    let limits: [(bool, Option<u8>, u32, u32); 8] = [
        (false, None, 512, 0),
        (true, None, 512, 128),
        (true, Some(0x07), 512, 128),
        (true, Some(0x03), 512, 16),
        (true, Some(0x01), 512, 128),
        (true, Some(0x81), 8192, 128),
        (true, Some(0x04), 512, 0),
        (true, Some(0x03), 64, 2),
    ];
    for (i, (rh, class, q, want)) in limits.iter().enumerate() {
        ensure!(C, 20 + i, sol_fc_max(*rh, *class, *q) == *want);
    }
    ensure!(
        C,
        30,
        WcStatus::from_code(WcStatus::RespTimeoutErr.code()) == WcStatus::RespTimeoutErr
    );
    ensure!(
        C,
        31,
        WcStatus::from_code(12) == WcStatus::Other(12) && WcStatus::Other(12).code() == 12
    );
    Ok(())
}

/// A small deterministic pseudo-random generator (xorshift64*), so walks repeat exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// Number of sends in one simulated agent.
const SENDS: usize = 6;
/// [`SENDS`] as the generator's type.
const SENDS_U64: u64 = 6;

/// Drives the sends of one simulated agent through random events, applying each outcome the
/// way the engine does, and checks the invariants after every step.
pub(crate) fn random_walks() -> CheckResult {
    const C: &str = "random_walks";
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for walk in 0..200usize {
        let limit = u32::try_from(rng.below(4)).unwrap_or(0);
        let mut sends = [facts(I); SENDS];
        for s in sends.iter_mut() {
            s.fc = rng.below(2) == 0;
            s.timeout_ms = if s.fc {
                100
            } else {
                u32::try_from(rng.below(2)).unwrap_or(0) * 100
            };
        }
        // Per send: posts that succeeded, and send-handler calls.
        let mut posts = [0u32; SENDS];
        let mut handlers = [0u32; SENDS];
        let (mut fc_send, mut fc_wait) = (0i32, 0i32);
        let mut backlog = 0u32;
        for _ in 0..300 {
            let i = usize::try_from(rng.below(SENDS_U64)).unwrap_or(0);
            let f = sends[i];
            let in_use = u32::try_from(fc_send.saturating_add(fc_wait)).unwrap_or(u32::MAX);
            let ev = match rng.below(10) {
                0 => Event::Post(Admission {
                    limit,
                    in_use,
                    backlog_empty: backlog == 0,
                }),
                1 if f.state == Q && (limit == 0 || in_use < limit) => Event::BacklogDispatch,
                2 => Event::SendCompleted(WcStatus::Success),
                3 => Event::Response,
                4 => Event::Expired {
                    backlog_empty: backlog == 0,
                },
                5 => Event::Modify(0),
                6 => Event::Modify(30),
                7 => Event::Delivered,
                8 if rng.below(4) == 0 => Event::DispatchFailed,
                _ => Event::Unregister,
            };
            let Ok(o) = step(f, ev) else { continue };
            // Apply the outcome as the engine does.
            if matches!(ev, Event::Post(_)) {
                posts[i] = posts[i].saturating_add(1);
            }
            if f.state == Q && o.next != Q {
                backlog = backlog.saturating_sub(1);
            }
            if o.next == Q && f.state != Q {
                backlog = backlog.saturating_add(1);
            }
            if o.complete.is_some() {
                handlers[i] = handlers[i].saturating_add(1);
            }
            if matches!(ev, Event::DispatchFailed) {
                // A failed post does not count as a post: it gets no handler.
                posts[i] = posts[i].saturating_sub(1);
            }
            fc_send = fc_send.saturating_add(i32::from(o.fc_send));
            fc_wait = fc_wait.saturating_add(i32::from(o.fc_wait));
            if let Some(t) = o.store_timeout {
                sends[i].timeout_ms = t;
            }
            if o.retry {
                sends[i].retries_left = sends[i].retries_left.saturating_sub(1);
            }
            if ev == Event::Delivered {
                sends[i].retries_left = 1;
                sends[i].timeout_ms = if sends[i].fc { 100 } else { 0 };
            }
            sends[i].state = o.next;

            // §2.2: the counters equal the flow-controlled sends in SEND_START and WAIT_RESP.
            let want_send = sends.iter().filter(|s| s.fc && s.state == S).count();
            let want_wait = sends.iter().filter(|s| s.fc && s.state == W).count();
            ensure!(C, walk, usize::try_from(fc_send).ok() == Some(want_send));
            ensure!(C, walk, usize::try_from(fc_wait).ok() == Some(want_wait));
            let want_backlog = sends.iter().filter(|s| s.state == Q).count();
            ensure!(C, walk, usize::try_from(backlog).ok() == Some(want_backlog));
            // §1.9: a send handler call per successful post, never more; an idle send has had
            // exactly as many as it had posts.
            for k in 0..SENDS {
                ensure!(C, walk, handlers[k] <= posts[k]);
                if sends[k].state == I {
                    ensure!(C, walk, handlers[k] == posts[k]);
                }
            }
        }
    }
    Ok(())
}

/// Every check with its name, for runners that iterate (the host tests).
#[cfg(test)]
///.
pub(crate) const ALL: [(&str, fn() -> CheckResult); 4] = [
    ("transition_table", transition_table),
    ("handler_statuses", handler_statuses),
    ("flow_control_rules", flow_control_rules),
    ("random_walks", random_walks),
];
