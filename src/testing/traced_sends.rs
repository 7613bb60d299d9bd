// SPDX-License-Identifier: GPL-2.0

//! The sends whose trace events `make test` checks (test flavour): `trace` written to debugfs
//! `rmad/stress` runs them on `lb0` and reports their TIDs; the VM scenario enables the `rmad`
//! events in tracefs around the write and compares each TID's event sequence with the
//! expected one.

use crate::{
    capi::devices,
    mad::{
        state::SendState,
        wire, //
    },
    testing::{
        control::Writer,
        lb0,
        post,
        register_gsi,
        request,
        wait_state,
        Behaviour,
        Recorder, //
    },
};
use core::fmt::Write;
use kernel::prelude::*;

/// A LID that no port of the loopback fabric has: nobody answers.
const NOWHERE: u16 = 0x55;

/// Runs a GET that `lb0`'s responder answers, then one that nobody answers, cancelled once it
/// waits for its response; writes `tids TID1 TID2 ok|failed` to `out`.
pub(crate) fn run(out: &mut KVec<u8>) -> Result {
    let (engine, transport) = devices::find(lb0::NAME, 1).ok_or(ENODEV)?;
    let rec = Recorder::new(Behaviour::default())?;
    let a = register_gsi(&engine, &transport, 1, &rec, None)?;
    let class = wire::IB_MGMT_CLASS_PERF_MGMT;
    // Port 2 (LID 2) of lb0 answers GETs of this class.
    let answered = post(request(&a, class, 1, 2, 10_000, 0)?).is_ok() && rec.wait_sends(1);
    let h = post(request(&a, class, 2, NOWHERE, 60_000, 0)?)?;
    let cancelled =
        wait_state(&a, &h, SendState::WaitResp) && h.cancel().is_ok() && rec.wait_sends(2);
    a.unregister()?;
    let ok = answered && cancelled;
    let _ = writeln!(
        Writer(out),
        "tids {:#018x} {:#018x} {}",
        wire::make_tid(a.hi_tid, 1),
        wire::make_tid(a.hi_tid, 2),
        if ok { "ok" } else { "failed" }
    );
    Ok(())
}
