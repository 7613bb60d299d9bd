// SPDX-License-Identifier: GPL-2.0

//! Suite `rmad_rxe`: code written for ib_core's MAD layer runs on rmad through
//! `include/rmad_ib_mad.h` (issue 43), on port 1 of `rxe0` next to an ib_core agent; `ibmad.c`
//! says what it checks. From GID index 0 (IPv6 link-local: RoCE v2 over IPv6) and index 1
//! (IPv4-mapped: RoCE v2 over IPv4), `ib_init_ah_attr_from_wc` gives the same address for the
//! header's receive completion as for ib_core's of the same packet.

use crate::verbs;
use kernel::{
    error::to_result,
    ffi::c_int,
    prelude::*, //
};

extern "C" {
    fn rmad_test_ib_mad(dev: *mut verbs::IbDevice, port: u32, gid_index: c_int) -> c_int;
}

/// The header's checks from GID index `gid_index` of `rxe0` port 1: `ENODEV` without it.
pub(super) fn header_on_rxe(gid_index: c_int) -> Result {
    let port = verbs::find_port(c"rxe0", 1).ok_or(ENODEV)?;
    let num = u32::from(port.port);
    // SAFETY: `with_device` holds a registration reference on `dev` across the call, which
    // runs in process context as `ibmad.h` asks.
    let ret = port
        .with_device(|dev| unsafe { rmad_test_ib_mad(dev, num, gid_index) })
        .ok_or(ENODEV)?;
    to_result(ret)
}
