// SPDX-License-Identifier: GPL-2.0

//! KUnit suites `rmad_wire` and `rmad_state`: the table-driven cases of
//! [`crate::testing::cases`], which the host tests (`tests/host`) run too, run in the kernel.

/// KUnit suite `rmad_wire`: the shared table-driven checks, run in the kernel.
#[kernel::prelude::kunit_tests(rmad_wire)]
mod wire {
    use crate::testing::cases::{
        kunit_run as check,
        wire as checks, //
    };
    use kernel::prelude::*;

    #[test]
    fn constants() -> Result {
        check(checks::constants)
    }

    #[test]
    fn header_layout() -> Result {
        check(checks::header_layout)
    }

    #[test]
    fn short_buffers() -> Result {
        check(checks::short_buffers)
    }

    #[test]
    fn response_mad() -> Result {
        check(checks::response_mad)
    }

    #[test]
    fn cpi_fields() -> Result {
        check(checks::cpi_fields)
    }

    #[test]
    fn rmpp_fields() -> Result {
        check(checks::rmpp_fields)
    }

    #[test]
    fn class_tables() -> Result {
        check(checks::class_tables)
    }

    #[test]
    fn kernel_rmpp_agent() -> Result {
        check(checks::kernel_rmpp_agent)
    }

    #[test]
    fn self_description_values() -> Result {
        check(checks::self_description_values)
    }
}

/// KUnit suite `rmad_state`: the shared state-machine checks, run in the kernel.
#[kernel::prelude::kunit_tests(rmad_state)]
mod state {
    use crate::testing::cases::{
        kunit_run as check,
        state as checks, //
    };
    use kernel::prelude::*;

    #[test]
    fn transition_table() -> Result {
        check(checks::transition_table)
    }

    #[test]
    fn handler_statuses() -> Result {
        check(checks::handler_statuses)
    }

    #[test]
    fn flow_control_rules() -> Result {
        check(checks::flow_control_rules)
    }

    #[test]
    fn random_walks() -> Result {
        check(checks::random_walks)
    }
}
