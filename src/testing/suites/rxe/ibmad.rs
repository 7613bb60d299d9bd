// SPDX-License-Identifier: GPL-2.0

//! Suite `rmad_rxe`: code written for ib_core's MAD layer runs on rmad through
//! `include/rmad_ib_mad.h` (issue 43), on port 1 of `rxe0` next to an ib_core agent; `ibmad.c`
//! says what it checks. From GID index 0 (IPv6 link-local: RoCE v2 over IPv6) and index 1
//! (IPv4-mapped: RoCE v2 over IPv4), `ib_init_ah_attr_from_wc` gives the same address for the
//! header's receive completion as for ib_core's of the same packet. And for every kind of
//! packet (InfiniBand, RoCE v1, v2 over IPv4 and IPv6, which rxe cannot all send), what the
//! header hands a client equals the packet's own completion and GRH.

use crate::verbs;
use kernel::{
    error::to_result,
    ffi::c_int,
    prelude::*, //
};

extern "C" {
    fn rmad_test_ib_mad(dev: *mut verbs::IbDevice, port: u32, gid_index: c_int) -> c_int;
    fn rmad_test_wc_round_trip(kind: c_int) -> c_int;
}

/// The kinds of packet of `ibmad.h`: InfiniBand without and with a GRH, RoCE v1 (with a VLAN),
/// RoCE v2 over IPv4 and over IPv6 (with a VLAN).
pub(super) const WC_KINDS: c_int = 5;

/// What the header hands a client of a packet of `kind` equals the packet's own completion and
/// GRH in every field ib_core's clients read (`rmad_test_wc_round_trip`).
pub(super) fn wc_round_trip(kind: c_int) -> Result {
    // SAFETY: Any kind; the function allocates nothing and touches no device.
    to_result(unsafe { rmad_test_wc_round_trip(kind) })
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
