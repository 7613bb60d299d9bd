// SPDX-License-Identifier: GPL-2.0

//! A requester in ib_core's own MAD layer (`src/testing/ib_requester.c`): an agent on QP1 of a
//! verbs port that posts SENDs nobody answers and counts what its handlers see, by kind (bits
//! 8..13 of the TID's low half). Suite `rmad_peer` sends it the hostile datagrams it sends
//! rmad, to compare the receive rules of the two layers side by side.

use crate::{
    mad::Gid,
    verbs::{
        IbDevice,
        VerbsPort, //
    },
};
use core::ffi::c_void;
use kernel::{
    ffi::c_int,
    prelude::*, //
};

/// Kinds a requester counts by.
pub(crate) const KINDS: u32 = 64;
/// A response whose byte at this offset (the attribute modifier's last, which matching
/// ignores) is [`HOSTILE`] counts as a hostile one.
pub(crate) const HOSTILE_AT: usize = 23;
/// The mark of a hostile response.
pub(crate) const HOSTILE: u8 = 0xee;

/// What the handlers of a requester saw for one kind (`struct rmad_test_kind_counts`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct KindCounts {
    /// Receive-handler calls with the send, for a hostile datagram.
    pub(crate) hostile: u32,
    /// Receive-handler calls with the send, for a real answer.
    pub(crate) real: u32,
    /// Receive-handler calls without a send.
    pub(crate) unsolicited: u32,
    /// Send-handler calls with `IB_WC_SUCCESS`.
    pub(crate) success: u32,
    /// Send-handler calls with `IB_WC_WR_FLUSH_ERR`.
    pub(crate) flushed: u32,
    /// Send-handler calls with another status.
    pub(crate) other: u32,
}

extern "C" {
    fn rmad_test_requester_start(dev: *mut IbDevice, port: u32) -> *mut c_void;
    fn rmad_test_requester_hi_tid(r: *mut c_void) -> u32;
    fn rmad_test_requester_post(
        r: *mut c_void,
        kind: u32,
        dgid: *const u8,
        sgid_index: u8,
        timeout_ms: c_int,
    ) -> c_int;
    fn rmad_test_requester_cancel(r: *mut c_void, kind: u32);
    fn rmad_test_requester_counts(r: *mut c_void, kind: u32, out: *mut KindCounts);
    fn rmad_test_requester_stop(r: *mut c_void);
}

/// The ib_core agent; dropping it unregisters it (flushing what is outstanding).
///
/// # Invariants
///
/// The pointer is an agent returned by `rmad_test_requester_start`, not stopped yet.
pub(crate) struct IbRequester(*mut c_void);

impl IbRequester {
    /// Registers the requester on `port`; `None` if ib_core refused it or the port is closed.
    /// The caller drops it before the device goes away.
    pub(crate) fn start(port: &VerbsPort) -> Option<Self> {
        let num = u32::from(port.port);
        // SAFETY: `with_device` holds a registration reference on `dev` across the call.
        let r = port.with_device(|dev| unsafe { rmad_test_requester_start(dev, num) })?;
        // INVARIANT: A non-null result is a registered agent.
        (!r.is_null()).then_some(Self(r))
    }

    /// The agent's `hi_tid`.
    pub(crate) fn hi_tid(&self) -> u32 {
        // SAFETY: The agent is registered (type invariant).
        unsafe { rmad_test_requester_hi_tid(self.0) }
    }

    /// Posts `kind`'s SEND (TID low half `kind << 8`) to QP1 of `dgid` from GID `sgid_index`.
    pub(crate) fn post(&self, kind: u32, dgid: &Gid, sgid_index: u8, timeout_ms: i32) -> Result {
        // SAFETY: The agent is registered (type invariant); `dgid` has 16 bytes.
        kernel::error::to_result(unsafe {
            rmad_test_requester_post(self.0, kind, dgid.as_ptr(), sgid_index, timeout_ms)
        })
    }

    /// Cancels `kind`'s outstanding send.
    ///
    /// # Safety
    ///
    /// Nothing else completes that send until this returns (no response, no timeout): the C
    /// side cancels through a pointer that the send handler frees.
    pub(crate) unsafe fn cancel(&self, kind: u32) {
        // SAFETY: The agent is registered (type invariant); the caller's promise covers the
        // send.
        unsafe { rmad_test_requester_cancel(self.0, kind) }
    }

    /// What the handlers saw for `kind`.
    pub(crate) fn counts(&self, kind: u32) -> KindCounts {
        let mut c = KindCounts::default();
        // SAFETY: The agent is registered (type invariant); `c` is writable.
        unsafe { rmad_test_requester_counts(self.0, kind, &mut c) };
        c
    }
}

impl Drop for IbRequester {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the agent is registered; it is stopped once, here.
        unsafe { rmad_test_requester_stop(self.0) };
    }
}
