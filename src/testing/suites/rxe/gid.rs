// SPDX-License-Identifier: GPL-2.0

//! Suite `rmad_rxe`, the private QP's address handles across a change of the port's GID table:
//! a handle that a send uses when its source GID goes is retired once that send is done, and
//! the destination goes on being served from the new address.
//!
//! The case adds IPv4 addresses of its own to `rxe0`'s netdev (`rmad0`, 10.0.0.1/24) and takes
//! them away at the end: a source A, a destination D, and A2, which replaces A.

use super::hooks::{
    cached_ahs,
    ip_addr,
    HeldAh, //
};
use crate::{
    engine::{
        agent::Agent,
        transport::Transport, //
    },
    mad::{
        state::WcStatus,
        wire,
        Gid, //
    },
    testing::{
        post,
        requests::{
            gid_address,
            mad_in, //
        },
        rxe_agent,
        sleep_ms,
        wait_for,
        Behaviour,
        Recorder, //
    },
    verbs::VerbsPort,
};
use kernel::{
    prelude::*,
    sync::Arc, //
};

// `assert!` and `assert_eq!` that fail the running KUnit case instead of panicking, like those
// the suite module defines for its own cases.
#[allow(unused_macros)]
macro_rules! assert {
    ($c:expr $(,)?) => {{
        kernel::kunit_assert!("rmad_rxe", c"src/testing/suites/rxe/gid.rs", 0, $c);
    }};
}
#[allow(unused_macros)]
macro_rules! assert_eq {
    ($l:expr, $r:expr $(,)?) => {{
        kernel::kunit_assert_eq!("rmad_rxe", c"src/testing/suites/rxe/gid.rs", 0, $l, $r);
    }};
}

/// The netdev under `rxe0`.
const NETDEV: &CStr = c"rmad0";

/// The addresses the case adds, as `ip` takes them, and their last byte (10.0.0.x).
const A: (&CStr, u8) = (c"10.0.0.61/24", 61);
const D: (&CStr, u8) = (c"10.0.0.62/24", 62);
const A2: (&CStr, u8) = (c"10.0.0.63/24", 63);

/// The GIDs of `rxe0` that the case looks at: the first entries of its table.
const GIDS_LOOKED_AT: u8 = 64;

/// The IPv4-mapped GID of 10.0.0.`last`.
fn gid_of(last: u8) -> Gid {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12] = 10;
    g[15] = last;
    g
}

/// The index of `gid` in port 1's GID table, once it is there (at most [`crate::testing::WAIT_MS`]).
fn index_of(port: &VerbsPort, gid: &Gid) -> Option<u8> {
    let mut found = None;
    wait_for(|| {
        found = (0..GIDS_LOOKED_AT).find(|&i| port.gid(1, i).as_ref() == Some(gid));
        found.is_some()
    });
    found
}

/// A GET of class 0x04 (answered on rxe0 by ib_core) from GID index `from` to `to`.
fn get(a: &Arc<Agent>, lo: u32, from: u8, to: Gid) -> Result {
    let mut buf = mad_in(
        a,
        wire::IB_MGMT_CLASS_PERF_MGMT,
        wire::IB_MGMT_METHOD_GET,
        lo,
        0,
    )?;
    buf.set_ah(Some(gid_address(to, from)));
    buf.set_timeout_ms(1000);
    buf.set_retries(1);
    buf.set_context([usize::try_from(lo)?, 0]);
    post(buf).map(drop)
}

/// Adds A back and looks where its GID goes; gives it up and tries again while it lands
/// elsewhere than `old` (ib_core frees a deleted GID entry, and its index, only once nothing
/// holds it, and a little after that). Returns the index it last got (`None` if `ip` failed).
fn readd_a(port: &VerbsPort, old: u8) -> Option<u8> {
    let mut got = None;
    for _ in 0..20 {
        ip_addr(c"add", A.0, NETDEV).ok()?;
        got = index_of(port, &gid_of(A.1));
        if got == Some(old) {
            break;
        }
        ip_addr(c"del", A.0, NETDEV).ok()?;
        sleep_ms(500);
    }
    got
}

pub(super) fn handle_in_use_at_a_gid_change_is_retired() -> Result {
    // GETs from A to D make the cached handle A -> D; one use of it is held, as a send on the
    // device holds it, while A is replaced with A2. ib_core keeps the deleted GID entry of A
    // (and its index) while the handle references it. The handle must take no new send from
    // then on, the GETs from A2 to D must be answered, and once the held use is given back the
    // handle must go, letting ib_core free A's entry: A added again gets its index back.
    // Before, the sweep after the change skipped a handle in use and never looked again: the
    // handle stayed cached and kept A's deleted entry allocated until an unrelated change.
    let port = crate::verbs::find_port(c"rxe0", 1).ok_or(ENODEV)?;
    let rec = Recorder::new(Behaviour::default())?;
    let (_, a) = rxe_agent(&rec)?.ok_or(ENODEV)?;
    let added = ip_addr(c"add", A.0, NETDEV).and(ip_addr(c"add", D.0, NETDEV));
    let (gid_a, gid_d) = (gid_of(A.1), gid_of(D.1));
    let (ka, kd) = (index_of(&port, &gid_a), index_of(&port, &gid_d));
    let ka_ = ka.unwrap_or(0);
    let first = kd.is_some() && get(&a, 1, ka_, gid_d).is_ok() && rec.wait_sends(1);
    let held = HeldAh::take(&port, ka_, &gid_d);
    let replaced = ip_addr(c"del", A.0, NETDEV).and(ip_addr(c"add", A2.0, NETDEV));
    let ka2 = index_of(&port, &gid_of(A2.1));
    let a_gone = wait_for(|| port.gid(1, ka_).as_ref() != Some(&gid_a));
    // The GID change's sweep has run by the time the new address serves.
    let mut served = 0usize;
    for lo in 2..6u32 {
        served += usize::from(get(&a, lo, ka2.unwrap_or(0), gid_d).is_ok());
    }
    let answered = rec.wait_sends(5);
    let kept_while_held = cached_ahs(&port, ka_, &gid_d);
    // A's index names no GID now: a post from it is refused, and uses no handle.
    let from_gone = get(&a, 9, ka_, gid_d);
    drop(held);
    let retired = wait_for(|| cached_ahs(&port, ka_, &gid_d) == Some(0));
    let back = readd_a(&port, ka_);
    let sends = rec.sends()?;
    let all_answered = sends.len() == 5 && sends.iter().all(|s| s.1 == WcStatus::Success);
    let _ = ip_addr(c"del", A.0, NETDEV);
    let _ = ip_addr(c"del", A2.0, NETDEV);
    let _ = ip_addr(c"del", D.0, NETDEV);
    a.unregister()?;
    // A failed assertion ends the case without its destructors: nothing is left to them.
    drop((a, rec, port, sends));
    assert!(added.is_ok() && replaced.is_ok());
    assert!(ka.is_some() && kd.is_some() && ka2.is_some() && a_gone);
    assert!(first);
    assert!(kept_while_held == Some(1));
    assert_eq!(served, 4);
    assert!(answered);
    assert!(all_answered);
    assert_eq!(from_gone, Err(EINVAL));
    assert!(retired);
    assert_eq!(back, ka);
    Ok(())
}
