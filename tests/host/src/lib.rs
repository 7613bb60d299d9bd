// SPDX-License-Identifier: GPL-2.0

//! Host build of rmad's kernel-independent source files, for `cargo test`.
//!
//! The modules below are the very files the kernel module compiles (see `src/`), included by
//! path; the tests run their shared table-driven checks.

#![no_std]

#[cfg(test)]
extern crate std;

#[path = "../../../src/wire.rs"]
#[allow(dead_code)]
pub(crate) mod wire;

#[cfg(test)]
mod wire_tests {
    use crate::wire::checks;

    /// Runs one shared check and reports the failing row by name.
    fn run(check: fn() -> checks::CheckResult) {
        if let Err(f) = check() {
            panic!("{} failed at case {} (src/wire_checks.rs:{})", f.check, f.case, f.line);
        }
    }

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
