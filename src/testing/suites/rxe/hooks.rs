// SPDX-License-Identifier: GPL-2.0

//! Hooks of suite `rmad_rxe` into `rxe0` and rmad's private QP on it (`hooks.c`): every call
//! of the device's `query_port` counted ([`PortQueries`]), posts of receives to the private QP
//! failed ([`FailedRecvPosts`]), the private QP moved to the error state ([`qp_error`]), and
//! the private port's counters ([`counts`]), a cached address handle held in use as a send on
//! the device holds it ([`HeldAh`]), and the netdev's addresses changed ([`ip_addr`]). The
//! interpositions replace one operation of the device while their guard lives, and are given
//! back when it drops.

use crate::verbs::{
    IbDevice,
    VerbsPort,
    Vport, //
};
use core::ffi::c_void;
use kernel::{
    ffi::{
        c_char,
        c_int, //
    },
    prelude::*, //
};

/// The private port's counters (`struct rmad_test_vport_counts`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct VportCounts {
    /// Receives posted and not completed yet.
    pub(crate) rq_posted: u32,
    /// Times the QP was reset to RTS after it failed.
    pub(crate) resets: u32,
    /// Times a recovery found the device not drained and left it for later.
    pub(crate) deferred: u32,
}

// The layout of `struct rmad_test_vport_counts`.
const _: () = assert!(core::mem::size_of::<VportCounts>() == 12);

/// The receives the private QP keeps posted (`RMAD_RQ` of `src/verbs/vport.h`).
pub(crate) const RQ: u32 = 512;

extern "C" {
    fn rmad_test_port_queries_start(dev: *mut IbDevice);
    fn rmad_test_port_queries() -> u32;
    fn rmad_test_port_queries_stop(dev: *mut IbDevice);
    fn rmad_test_fail_recv_posts(vp: *mut Vport, n: u32);
    fn rmad_test_recv_posts_to_fail() -> u32;
    fn rmad_test_fail_recv_posts_stop(vp: *mut Vport);
    fn rmad_test_vport_qp_error(vp: *mut Vport) -> c_int;
    fn rmad_test_vport_counts(vp: *mut Vport, out: *mut VportCounts);
    fn rmad_test_ah_hold(vp: *mut Vport, sgid_index: u8, dgid: *const u8) -> *mut c_void;
    fn rmad_test_ah_unhold(vp: *mut Vport, held: *mut c_void);
    fn rmad_test_ah_cached(vp: *mut Vport, sgid_index: u8, dgid: *const u8) -> u32;
    fn rmad_test_ip_addr(op: *const c_char, addr: *const c_char, netdev: *const c_char) -> c_int;
}

/// Every call of the port's device's `query_port` counted, whoever makes it, while this
/// lives.
pub(crate) struct PortQueries<'a>(&'a VerbsPort);

impl<'a> PortQueries<'a> {
    /// Starts counting from 0; `None` if the port is closed.
    pub(crate) fn start(port: &'a VerbsPort) -> Option<Self> {
        // SAFETY: `with_device` holds a registration reference on `dev` across the call.
        port.with_device(|dev| unsafe { rmad_test_port_queries_start(dev) })?;
        Some(Self(port))
    }

    /// The calls counted so far.
    pub(crate) fn count(&self) -> u32 {
        // SAFETY: Reads an atomic counter.
        unsafe { rmad_test_port_queries() }
    }
}

impl Drop for PortQueries<'_> {
    fn drop(&mut self) {
        // SAFETY: As in `start`; the device gets back the operation `start` saved. A device
        // that went away meanwhile took its operations with it.
        let _ = self
            .0
            .with_device(|dev| unsafe { rmad_test_port_queries_stop(dev) });
    }
}

/// The next posts of receives to the private QP fail (`ENOMEM`) while this lives.
pub(crate) struct FailedRecvPosts<'a>(&'a VerbsPort);

impl<'a> FailedRecvPosts<'a> {
    /// Fails the next `n` posts; `None` if the port is closed.
    pub(crate) fn start(port: &'a VerbsPort, n: u32) -> Option<Self> {
        // SAFETY: `with_vport` keeps the shim's port open across the call.
        port.with_vport(|vp| unsafe { rmad_test_fail_recv_posts(vp, n) })?;
        Some(Self(port))
    }

    /// The posts still to fail.
    pub(crate) fn left(&self) -> u32 {
        // SAFETY: Reads an atomic counter.
        unsafe { rmad_test_recv_posts_to_fail() }
    }
}

impl Drop for FailedRecvPosts<'_> {
    fn drop(&mut self) {
        // SAFETY: As in `start`; the device gets back the operation `start` saved.
        let _ = self
            .0
            .with_vport(|vp| unsafe { rmad_test_fail_recv_posts_stop(vp) });
    }
}

/// Moves the private QP of `port` to the error state, as rxe moves it when its netdev refuses
/// a packet.
pub(crate) fn qp_error(port: &VerbsPort) -> Result {
    // SAFETY: `with_vport` keeps the shim's port open across the call.
    let r = port
        .with_vport(|vp| unsafe { rmad_test_vport_qp_error(vp) })
        .ok_or(ENODEV)?;
    kernel::error::to_result(r)
}

/// The counters of the private port of `port`; `None` if the port is closed.
pub(crate) fn counts(port: &VerbsPort) -> Option<VportCounts> {
    let mut c = VportCounts::default();
    // SAFETY: `with_vport` keeps the shim's port open across the call; `c` is writable.
    port.with_vport(|vp| unsafe { rmad_test_vport_counts(vp, &mut c) })?;
    Some(c)
}

/// One use of a cached address handle of the private QP, taken as a send on the device takes
/// one, and given back (as its completion gives it back) when this drops.
pub(crate) struct HeldAh<'a> {
    port: &'a VerbsPort,
    held: *mut c_void,
}

impl<'a> HeldAh<'a> {
    /// Holds the ready cached handle from source GID index `sgid_index` to `dgid`; `None` if
    /// the port is closed or has no such handle.
    pub(crate) fn take(port: &'a VerbsPort, sgid_index: u8, dgid: &[u8; 16]) -> Option<Self> {
        // SAFETY: `with_vport` keeps the shim's port open across the call; `dgid` has 16 bytes.
        let held =
            port.with_vport(|vp| unsafe { rmad_test_ah_hold(vp, sgid_index, dgid.as_ptr()) })?;
        (!held.is_null()).then_some(Self { port, held })
    }
}

impl Drop for HeldAh<'_> {
    fn drop(&mut self) {
        // SAFETY: `held` is the entry `take` took a use of, in the cache of the port's shim
        // port, which lives while the port is open (a closed port's cache went with it).
        let _ = self
            .port
            .with_vport(|vp| unsafe { rmad_test_ah_unhold(vp, self.held) });
    }
}

/// How many cached address handles of `port` go from source GID index `sgid_index` to
/// `dgid`; `None` if the port is closed.
pub(crate) fn cached_ahs(port: &VerbsPort, sgid_index: u8, dgid: &[u8; 16]) -> Option<u32> {
    // SAFETY: `with_vport` keeps the shim's port open across the call; `dgid` has 16 bytes.
    port.with_vport(|vp| unsafe { rmad_test_ah_cached(vp, sgid_index, dgid.as_ptr()) })
}

/// Runs `ip addr OP ADDR dev NETDEV` in user space; its exit status must be 0.
pub(crate) fn ip_addr(op: &CStr, addr: &CStr, netdev: &CStr) -> Result {
    // SAFETY: The three strings are NUL-terminated and live across the call.
    let r =
        unsafe { rmad_test_ip_addr(op.as_char_ptr(), addr.as_char_ptr(), netdev.as_char_ptr()) };
    match r {
        0 => Ok(()),
        e if e < 0 => Err(Error::from_errno(e)),
        _ => Err(EIO),
    }
}
