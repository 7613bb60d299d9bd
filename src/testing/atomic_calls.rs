// SPDX-License-Identifier: GPL-2.0

//! rmad's C API called from a timer and from an hrtimer (`src/testing/atomic_calls.c`): the
//! calls `include/rmad.h` promises in atomic context, under lockdep.

use core::ffi::c_void;
use kernel::ffi::c_int;

/// What each call returned, and the context it ran in (`struct rmad_atomic_result` of
/// `src/testing/atomic_calls.h`).
#[repr(C)]
#[derive(Default, Debug)]
pub(crate) struct AtomicResult {
    pub(crate) hardirq: c_int,
    pub(crate) softirq: c_int,
    pub(crate) irqs_off: c_int,
    pub(crate) post: c_int,
    pub(crate) modify: c_int,
    pub(crate) cancel: c_int,
    pub(crate) cancel_again: c_int,
    pub(crate) free_busy: c_int,
    pub(crate) create: c_int,
    pub(crate) mad_ok: c_int,
    pub(crate) free: c_int,
    pub(crate) stale_free: c_int,
    pub(crate) modify_mad: c_int,
    pub(crate) set: c_int,
    pub(crate) context_ok: c_int,
    pub(crate) retries: c_int,
    pub(crate) agent_context_ok: c_int,
    pub(crate) hi_tid: u32,
    pub(crate) send_len: u32,
    pub(crate) recv_mad_ok: c_int,
    pub(crate) recv_free: c_int,
    pub(crate) seg_count: c_int,
    pub(crate) seg_size: u32,
    pub(crate) seg_ok: c_int,
    pub(crate) seg_beyond_null: c_int,
}

// The layout `src/testing/atomic_calls.h` has; `src/testing/atomic_calls.c` checks the same
// numbers in C.
const _: () = {
    assert!(core::mem::size_of::<AtomicResult>() == 100);
    assert!(core::mem::offset_of!(AtomicResult, hi_tid) == 68);
    assert!(core::mem::offset_of!(AtomicResult, recv_free) == 80);
    assert!(core::mem::offset_of!(AtomicResult, seg_beyond_null) == 96);
};

/// From a timer (softirq context).
pub(crate) const FROM_TIMER: c_int = 0;
/// From an hrtimer in the default mode (hard interrupt context).
pub(crate) const FROM_HRTIMER: c_int = 1;

extern "C" {
    fn rmad_test_call_from(
        r#where: c_int,
        agent: *mut c_void,
        buf: *mut c_void,
        recv: *mut c_void,
        rmpp: *mut c_void,
        res: *mut AtomicResult,
    ) -> c_int;
}

/// Makes the calls from `from` ([`FROM_TIMER`] or [`FROM_HRTIMER`]) on `agent`, the posted
/// and then cancelled `buf`, the received MAD `recv` and the RMPP buffer `rmpp` (handles of
/// the C API, validated by rmad), and returns what each call returned; `Err` when the timer
/// could not run them.
pub(crate) fn call_from(
    from: c_int,
    agent: *mut c_void,
    buf: *mut c_void,
    recv: *mut c_void,
    rmpp: *mut c_void,
) -> Result<AtomicResult, c_int> {
    let mut res = AtomicResult::default();
    // SAFETY: `res` is valid for writes for the call; rmad validates the handles.
    match unsafe { rmad_test_call_from(from, agent, buf, recv, rmpp, &mut res) } {
        0 => Ok(res),
        e => Err(e),
    }
}
