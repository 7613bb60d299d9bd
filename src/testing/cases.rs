// SPDX-License-Identifier: GPL-2.0

//! Table-driven cases that run both on the host (`cargo test` in `tests/host`) and in the
//! kernel (KUnit suites `rmad_wire` and `rmad_state`, in [`crate::testing::suites`]): the
//! framework here, the tables in [`wire`] (the wire helpers) and [`state`] (the state machine).
//!
//! A check is a function returning [`CheckResult`]: instead of panicking, which would kill the
//! test VM, it returns the [`Failure`] that names the row that disagreed. The host tests turn a
//! failure into a panic message; the KUnit suites log it and fail the test case.

// Explicit paths: the host tests load this file through `#[path]`, where a plain `mod`
// would be looked up elsewhere.
#[path = "cases/state.rs"]
pub(crate) mod state;
#[path = "cases/wire.rs"]
pub(crate) mod wire;

/// A check that disagreed with its table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Failure {
    /// The check's name.
    pub(crate) check: &'static str,
    /// The row (or input value) that failed.
    pub(crate) case: usize,
    /// Source file of the comparison.
    pub(crate) file: &'static str,
    /// Source line of the comparison.
    pub(crate) line: u32,
}

/// The result type of every check.
pub(crate) type CheckResult = Result<(), Failure>;

/// Fails the enclosing check, named `$check`, with row `$case` unless `$cond` holds.
macro_rules! ensure {
    ($check:expr, $case:expr, $cond:expr) => {
        if !$cond {
            return Err($crate::testing::cases::Failure {
                check: $check,
                case: $case,
                file: file!(),
                line: line!(),
            });
        }
    };
}
pub(crate) use ensure;

/// Runs one check inside a KUnit test case: logs the failing row and fails the case.
#[cfg(rmad_test)]
pub(crate) fn kunit_run(c: fn() -> CheckResult) -> kernel::error::Result {
    c().map_err(|f| {
        kernel::pr_err!(
            "{} failed at case {} ({}:{})\n",
            f.check,
            f.case,
            f.file,
            f.line
        );
        kernel::error::code::EINVAL
    })
}
