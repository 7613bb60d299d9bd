// SPDX-License-Identifier: GPL-2.0

//! Host build of rmad's kernel-independent source files, for `cargo test`.
//!
//! The modules below are the very files the kernel module compiles, included by path with the
//! same module paths as in the crate (`crate::mad`, `crate::testing::cases`): the pure layer
//! `src/mad.rs` with its files, and the table-driven cases `src/testing/cases.rs` with theirs,
//! which the tests run.

#![no_std]

#[cfg(test)]
extern crate std;

#[path = "../../../src/mad.rs"]
#[allow(dead_code, unused_imports)]
pub(crate) mod mad;

#[path = "../../../src/testing/cases.rs"]
#[allow(dead_code, unused_imports, unused_macros)]
mod testing_cases;

/// Fuzzing of the pure parts against reference models (issue 16 item 9): short seeded runs in
/// `cargo test`, long runs through `scripts/check/fuzz.sh`.
#[cfg(test)]
mod fuzz;

/// The part of the test flavour that is kernel-independent, at its path in the crate.
pub(crate) mod testing {
    pub(crate) use super::testing_cases as cases;
}

/// Runs one shared check and reports the failing row by name.
#[cfg(test)]
fn run(check: fn() -> testing::cases::CheckResult) {
    if let Err(f) = check() {
        panic!(
            "{} failed at case {} ({}:{})",
            f.check, f.case, f.file, f.line
        );
    }
}

#[cfg(test)]
mod wire_tests {
    use crate::run;
    use crate::testing::cases::wire as checks;

    #[test]
    fn constants() {
        run(checks::constants);
    }
    #[test]
    fn header_layout() {
        run(checks::header_layout);
    }
    #[test]
    fn short_buffers() {
        run(checks::short_buffers);
    }
    #[test]
    fn response_mad() {
        run(checks::response_mad);
    }
    #[test]
    fn cpi_fields() {
        run(checks::cpi_fields);
    }
    #[test]
    fn rmpp_fields() {
        run(checks::rmpp_fields);
    }
    #[test]
    fn class_tables() {
        run(checks::class_tables);
    }
    #[test]
    fn kernel_rmpp_agent() {
        run(checks::kernel_rmpp_agent);
    }
    #[test]
    fn self_description_values() {
        run(checks::self_description_values);
    }

    /// The list that iterating runners use names every check exactly once.
    #[test]
    fn all_lists_every_check() {
        assert_eq!(checks::ALL.len(), 9);
        for (name, check) in checks::ALL {
            if let Err(f) = check() {
                panic!("{name}: case {} line {}", f.case, f.line);
            }
        }
    }
}

#[cfg(test)]
mod state_tests {
    use crate::run;
    use crate::testing::cases::state as checks;

    #[test]
    fn transition_table() {
        run(checks::transition_table);
    }
    #[test]
    fn handler_statuses() {
        run(checks::handler_statuses);
    }
    #[test]
    fn flow_control_rules() {
        run(checks::flow_control_rules);
    }
    #[test]
    fn random_walks() {
        run(checks::random_walks);
    }

    use crate::mad::state::{
        CancelWait,
        SendState, //
    };

    /// Every state of a send.
    const ALL_STATES: [SendState; 8] = [
        SendState::Idle,
        SendState::Queued,
        SendState::SendStart,
        SendState::WaitResp,
        SendState::EarlyResp,
        SendState::Canceled(CancelWait::SendCompletion),
        SendState::Canceled(CancelWait::TimeoutWork),
        SendState::Done,
    ];

    /// `state::direct_end` equals `step` then delivery, for every state, flow control on and
    /// off, edge timeouts and retry counts, and every event that can end a send directly (the
    /// fuzz target `step` checks the same on arbitrary facts and events).
    #[test]
    fn direct_ends_equal_the_table() {
        use crate::fuzz::state::check_direct;
        use crate::mad::state::*;
        let events = [
            Event::Expired {
                backlog_empty: true,
            },
            Event::Expired {
                backlog_empty: false,
            },
            Event::Unregister,
            Event::Delivered,
            Event::Modify(0),
            Event::Response,
            Event::SendCompleted(WcStatus::Success),
        ];
        let mut direct = 0;
        for state in ALL_STATES {
            for fc in [false, true] {
                for timeout_ms in [0, 1, 100, u32::MAX] {
                    for retries_left in [0, 1, 2, u32::MAX] {
                        let f = SendFacts {
                            state,
                            fc,
                            timeout_ms,
                            retries_left,
                        };
                        for ev in events {
                            if let Err(e) = check_direct(f, ev) {
                                panic!("{e}");
                            }
                            direct += usize::from(direct_end(f, ev).is_some());
                        }
                    }
                }
            }
        }
        // WAIT_RESP with no retry left (2 expiries), every WAIT_RESP unregistered, every
        // cancelled send expired (2) or unregistered: 2 × 4 timeouts × (2 + 4 + 12).
        assert_eq!(direct, 2 * 4 * (2 + 4 + 12));
    }

    /// `state::direct_post` equals `step`'s transmitting post, for every state, flow control on
    /// and off, and admissions at and around the limit, with the backlog empty or not.
    #[test]
    fn direct_posts_equal_the_table() {
        use crate::fuzz::state::check_direct_post;
        use crate::mad::state::*;
        let mut direct = 0;
        for state in ALL_STATES {
            for fc in [false, true] {
                for limit in [0, 1, 4] {
                    for in_use in [0, 3, 4, 5] {
                        for backlog_empty in [true, false] {
                            let f = SendFacts {
                                state,
                                fc,
                                timeout_ms: 100,
                                retries_left: 1,
                            };
                            let a = Admission {
                                limit,
                                in_use,
                                backlog_empty,
                            };
                            if let Err(e) = check_direct_post(f, Event::Post(a)) {
                                panic!("{e}");
                            }
                            direct += usize::from(direct_post(f, a).is_some());
                        }
                    }
                }
            }
        }
        // From IDLE only: every post without flow control (24), and with it those the limit
        // lets through: no limit (8), or room with an empty backlog (in use 0 of 1: 1; in use
        // 0 or 3 of 4: 2).
        assert_eq!(direct, 24 + 8 + 1 + 2);
    }

    /// `state::direct_completion` equals `step`'s send completion, for every state, flow
    /// control on and off, edge timeouts and retry counts, and every status.
    #[test]
    fn direct_completions_equal_the_table() {
        use crate::fuzz::state::check_direct_completion;
        use crate::mad::state::*;
        let mut direct = 0;
        for state in ALL_STATES {
            for fc in [false, true] {
                for timeout_ms in [0, 1, 100, u32::MAX] {
                    for retries_left in [0, 1, u32::MAX] {
                        for code in 0..32 {
                            let f = SendFacts {
                                state,
                                fc,
                                timeout_ms,
                                retries_left,
                            };
                            let st = WcStatus::from_code(code);
                            if let Err(e) = check_direct_completion(f, Event::SendCompleted(st)) {
                                panic!("{e}");
                            }
                            direct += usize::from(direct_completion(f, st).is_some());
                        }
                    }
                }
            }
        }
        // SEND_START with a timeout (2 × 3 timeouts), without one and without flow control
        // (1), EARLY_RESP and CANCELED waiting for the completion (2 × 2 × 4 timeouts): 23
        // facts, × 3 retry counts × 32 statuses.
        assert_eq!(direct, (6 + 1 + 16) * 3 * 32);
    }
}

/// The RMPP machines of `src/mad/rmpp/` on the worked cases of Documentation/behaviour.md
/// §1.5, §2.8 and §2.10.
#[cfg(test)]
mod rmpp_tests;

/// The retry rules of `src/mad/retry.rs` on schedules written by hand from behaviour §2.11.
#[cfg(test)]
#[path = "retry_tests.rs"]
mod retry_tests;
