// SPDX-License-Identifier: GPL-2.0

//! A responder in ib_core's own MAD layer (`src/testing/ib_responder.c`): an agent on QP1 of a
//! verbs port that answers GET requests of one class with a GET_RESP of status 0, the way any
//! ib_core client would. Suites and the demonstration use it as the peer that rmad's requests
//! reach through the real QP1.

use crate::verbs::{
    IbDevice,
    VerbsPort, //
};
use core::ffi::c_void;

extern "C" {
    fn rmad_test_responder_start(
        dev: *mut IbDevice,
        port: u32,
        class: u8,
        hold_max: u32,
    ) -> *mut c_void;
    fn rmad_test_responder_stop(responder: *mut c_void);
    fn rmad_test_responder_segments(responder: *mut c_void, n: u32);
    fn rmad_test_responder_start_rmpp(
        dev: *mut IbDevice,
        port: u32,
        class: u8,
        len: u32,
    ) -> *mut c_void;
    fn rmad_test_responder_sent(responder: *mut c_void, ok: *mut u32, bad: *mut u32);
}

/// The ib_core agent, answering at once (the benchmark's holding mode is used from C only);
/// dropping it unregisters it.
///
/// # Invariants
///
/// The pointer is an agent returned by `rmad_test_responder_start`, not stopped yet.
pub(crate) struct IbResponder(*mut c_void);

// SAFETY: The responder is an ib_core agent owned through this pointer alone; stopping it
// (the only use) is allowed from any process context, on any thread.
unsafe impl Send for IbResponder {}

impl IbResponder {
    /// Registers the responder for GETs of `class` on `port`; `None` if ib_core refused it or
    /// the port is closed. The caller drops it before the device goes away.
    pub(crate) fn start(port: &VerbsPort, class: u8) -> Option<Self> {
        let num = u32::from(port.port);
        // SAFETY: `with_device` holds a registration reference on `dev` across the call.
        let r = port.with_device(|dev| unsafe { rmad_test_responder_start(dev, num, class, 0) })?;
        // INVARIANT: A non-null result is a registered agent.
        (!r.is_null()).then_some(Self(r))
    }

    /// Registers a kernel-RMPP responder (`rmpp_version` 1) for GETs of `class` on `port`
    /// that answers each with one RMPP transfer of `len` data bytes, every byte of segment `n`
    /// equal to `n` modulo 256, segmented and sent by ib_core's RMPP (`mad_rmpp.c`).
    pub(crate) fn start_rmpp(port: &VerbsPort, class: u8, len: u32) -> Option<Self> {
        let num = u32::from(port.port);
        // SAFETY: `with_device` holds a registration reference on `dev` across the call.
        let r = port
            .with_device(|dev| unsafe { rmad_test_responder_start_rmpp(dev, num, class, len) })?;
        // INVARIANT: A non-null result is a registered agent.
        (!r.is_null()).then_some(Self(r))
    }

    /// How many answers ib_core completed with `IB_WC_SUCCESS`, and otherwise.
    pub(crate) fn sent(&self) -> (u32, u32) {
        let (mut ok, mut bad) = (0, 0);
        // SAFETY: By the type invariant the agent is registered; both pointers are valid.
        unsafe { rmad_test_responder_sent(self.0, &mut ok, &mut bad) };
        (ok, bad)
    }

    /// Answers each GET with `n` GET_RESPs carrying RMPP DATA headers, segments 1..=`n` of
    /// one transfer (FIRST on 1, LAST on `n`), all sent at once as a user-RMPP responder that
    /// does not wait for ACKs would.
    pub(crate) fn segments(&self, n: u32) {
        // SAFETY: By the type invariant the agent is registered and not stopped.
        unsafe { rmad_test_responder_segments(self.0, n) };
    }
}

impl Drop for IbResponder {
    fn drop(&mut self) {
        // SAFETY: By the type invariant the agent is registered; it is stopped once, here.
        unsafe { rmad_test_responder_stop(self.0) };
    }
}
