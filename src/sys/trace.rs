// SPDX-License-Identifier: GPL-2.0

//! rmad's trace events (system `rmad` in tracefs), fired from the engine.
//!
//! The events are defined in C (`src/sys/rmad_trace.h`, `src/sys/trace.c`), where the kernel's
//! trace machinery expands them; Rust asks whether an event is enabled and only then fills in its
//! fields. While no event of rmad's has a probe (`rmad_trace_probes`, kept by the events' `reg`
//! and `unreg`), a trace site costs one load and no call.

use kernel::{
    ffi::{
        c_char,
        c_int, //
    },
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
};

/// The events, in the order of `enum rmad_trace_ev` in `src/sys/rmad_trace_info.h`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Ev {
    /// A post succeeded.
    Post = 0,
    /// A transmission was handed to the device.
    SendToDevice = 1,
    /// The transport reported a transmission's completion.
    SendCompletion = 2,
    /// A timeout expired and the send goes out again.
    Retry = 3,
    /// A timeout expired with no retry left.
    Timeout = 4,
    /// A send was cancelled.
    Cancel = 5,
    /// A send's timeout was changed.
    Modify = 6,
    /// A response was matched to a send.
    ResponseMatched = 7,
    /// A response matched nothing.
    ResponseDropped = 8,
    /// The send handler is called.
    SendHandler = 9,
    /// A request arrived at the private QP and was dropped.
    RequestDropped = 10,
}

/// The fields of an event (`struct rmad_trace_info`).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Info {
    /// Name of the device (NUL-terminated, lives as long as the agent).
    pub(crate) dev: *const c_char,
    /// Transaction ID.
    pub(crate) tid: u64,
    /// The agent's QP (0 or 1); for a dropped request, its source QP.
    pub(crate) qp_num: u32,
    /// Response timeout in milliseconds.
    pub(crate) timeout_ms: u32,
    /// Retransmissions performed.
    pub(crate) retries: u32,
    /// Attribute ID.
    pub(crate) attr_id: u16,
    /// Completion status, or the MAD status of a response.
    pub(crate) status: u16,
    /// Port number.
    pub(crate) port: u8,
    /// Management class.
    pub(crate) mgmt_class: u8,
    /// Method.
    pub(crate) method: u8,
}

// `src/sys/trace.c` asserts the same layout.
const _: () = {
    assert!(core::mem::size_of::<Info>() == 40);
    assert!(core::mem::offset_of!(Info, tid) == 8);
    assert!(core::mem::offset_of!(Info, retries) == 24);
    assert!(core::mem::offset_of!(Info, status) == 30);
    assert!(core::mem::offset_of!(Info, method) == 34);
};

extern "C" {
    static mut rmad_trace_probes: c_int;
    fn rmad_trace_enabled(ev: u32) -> bool;
    fn rmad_trace_event(ev: u32, info: *const Info);
}

/// Whether some event of rmad's has a probe. Inlined into every trace site: with no probe (the
/// common case) a site costs this one load, not a call.
#[inline(always)]
pub(crate) fn any_probe() -> bool {
    // SAFETY: `rmad_trace_probes` is a C `int` that lives as long as the module; the tracepoint
    // core writes it (under its mutex) with `WRITE_ONCE`, and it is only read atomically here.
    let probes = unsafe { Atomic::from_ptr(&raw mut rmad_trace_probes) };
    probes.load(Relaxed) != 0
}

/// Fires `ev` with the fields `info` computes, if the event is enabled. Any context.
pub(crate) fn fire(ev: Ev, info: impl FnOnce() -> Info) {
    // No event of rmad's has a probe: none is enabled, and the call below would say so. A
    // probe being attached meanwhile misses this event, as it would in the tracepoint itself.
    if !any_probe() {
        return;
    }
    // The discriminants are the C enum's values.
    let n = ev as u32;
    // SAFETY: Plain call; safe in any context.
    if unsafe { rmad_trace_enabled(n) } {
        let i = info();
        // SAFETY: `i` is a valid `struct rmad_trace_info` for the call; `dev` points to a
        // NUL-terminated name that outlives it.
        unsafe { rmad_trace_event(n, &i) };
    }
}
