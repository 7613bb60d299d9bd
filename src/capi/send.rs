// SPDX-License-Identifier: GPL-2.0

//! Send buffers in the C API: `rmad_create_send_mad` and `rmad_free_send_mad`, the calls on a
//! buffer the client owns, and post, modify and cancel.
//!
//! A buffer's slot holds its body while the client owns it; posting moves the body to the
//! engine and the send handler moves it back ([`super::CBuf`]). Post, modify and cancel run
//! under the buffer's slot lock, so the post a cancel acts on cannot change under it.

use super::{
    agent_of,
    code,
    ctx_ptr,
    err_ptr,
    from_ptr,
    retry_rules,
    tables,
    to_ptr,
    types::RmadAh,
    CBuf, //
};
use crate::{
    engine::{
        agent::{
            Agent,
            SendSpec, //
        },
        send::{
            SendBuf,
            SendHandle, //
        },
    },
    sys::memalloc,
};
use core::ffi::c_void;
use kernel::{
    alloc::Flags,
    ffi::c_int,
    prelude::*, //
};

/// Test flavour: the mask a `GFP_KERNEL` allocation got in the last `rmad_create_send_mad`,
/// as its allocations ran: what the caller's `gfp_t` made of it.
#[cfg(rmad_test)]
pub(crate) static CREATE_GFP_SEEN: kernel::sync::atomic::Atomic<u32> =
    kernel::sync::atomic::Atomic::new(0);

/// The allocation flags that match a caller's `gfp_t`, as far as the kernel crate names
/// them: it may sleep exactly when it allows direct reclaim, and it is accounted to the
/// caller's memory cgroup when it asks to be. What the crate cannot name, a mask without IO
/// or filesystem reclaim, the caller gets through a [`memalloc::Scope`] around the
/// allocations.
fn flags_of(gfp_mask: kernel::bindings::gfp_t) -> Flags {
    let bit = |b: u32| gfp_mask & (1 << b) != 0;
    let base = match (
        bit(kernel::bindings::___GFP_DIRECT_RECLAIM_BIT),
        bit(kernel::bindings::___GFP_ACCOUNT_BIT),
    ) {
        (true, true) => kernel::alloc::flags::GFP_KERNEL_ACCOUNT,
        (true, false) => GFP_KERNEL,
        (false, _) => GFP_ATOMIC,
    };
    if bit(kernel::bindings::___GFP_NOWARN_BIT) {
        base | kernel::alloc::flags::__GFP_NOWARN
    } else {
        base
    }
}

/// `rmad_create_send_mad`.
#[no_mangle]
pub(crate) extern "C" fn rmad_create_send_mad(
    agent: *mut c_void,
    remote_qpn: u32,
    pkey_index: u16,
    rmpp_active: c_int,
    hdr_len: c_int,
    data_len: c_int,
    gfp_mask: kernel::bindings::gfp_t,
    base_version: u8,
) -> *mut c_void {
    let gfp = flags_of(gfp_mask);
    // `GFP_NOIO` and `GFP_NOFS` hold for every allocation below, until the scope is left.
    let _scope = memalloc::Scope::enter(gfp_mask);
    (|| {
        let t = tables()?;
        let a = agent_of(agent)?;
        let spec = SendSpec {
            remote_qpn,
            pkey_index,
            rmpp_active: rmpp_active != 0,
            hdr_len,
            data_len,
            base_version,
        };
        #[cfg(rmad_test)]
        CREATE_GFP_SEEN.store(
            crate::sys::memalloc::effective(kernel::bindings::GFP_KERNEL),
            kernel::sync::atomic::Relaxed,
        );
        let mut buf = a.create_send(spec, gfp)?;
        let rec = buf.rec().clone();
        // One hold of the slot's lock: the buffer names its handle (so that its send handler
        // can find its slot) before it goes in. A handle always fits a pointer.
        t.bufs.insert_with(gfp, |h| {
            buf.set_context([usize::try_from(h).unwrap_or(0), 0]);
            CBuf {
                rec,
                body: Some(buf.body),
                context: 0,
            }
        })
    })()
    .map_or_else(err_ptr, to_ptr)
}

/// Runs `f` on the buffer behind `h`, under its slot's lock, once the slot has taken back a
/// body that a completion parked.
fn with_buf<R>(h: *mut c_void, f: impl FnOnce(&mut CBuf) -> Result<R>) -> Result<R> {
    tables()?.bufs.with(from_ptr(h), |b| {
        b.absorb();
        f(b)
    })?
}

/// Runs `f` while holding the slot lock of the buffer behind `h` (tests: calls on other
/// buffers must not wait for it).
#[cfg(rmad_test)]
pub(crate) fn hold_buf_slot(h: *mut c_void, f: impl FnOnce()) -> Result {
    with_buf(h, |_| {
        f();
        Ok(())
    })
}

/// `rmad_free_send_mad`.
#[no_mangle]
pub(crate) extern "C" fn rmad_free_send_mad(send_buf: *mut c_void) -> c_int {
    code((|| {
        let removed = tables()?.bufs.remove(from_ptr(send_buf), |b| {
            b.absorb();
            if b.body.is_some() {
                Ok(())
            } else {
                Err(EBUSY)
            }
        })?;
        // The buffer is freed outside its slot's lock.
        drop(removed);
        Ok(())
    })())
}

/// `rmad_send_buf_mad`.
#[no_mangle]
pub(crate) extern "C" fn rmad_send_buf_mad(send_buf: *mut c_void) -> *mut c_void {
    with_buf(send_buf, |b| {
        let body = b.body.as_mut().ok_or(EBUSY)?;
        // Empty only while a transport holds its transmission: never for a buffer it owns.
        let mad = body.mad_mut();
        if mad.is_empty() {
            return Err(EBUSY);
        }
        Ok(mad.as_mut_ptr().cast::<c_void>())
    })
    .unwrap_or(core::ptr::null_mut())
}

/// `rmad_send_buf_len`.
#[no_mangle]
pub(crate) extern "C" fn rmad_send_buf_len(send_buf: *mut c_void) -> u32 {
    with_buf(send_buf, |b| {
        let body = b.body.as_ref().ok_or(EBUSY)?;
        Ok(u32::try_from(body.mad().len()).unwrap_or(0))
    })
    .unwrap_or(0)
}

/// `rmad_get_rmpp_segment`.
#[no_mangle]
pub(crate) extern "C" fn rmad_get_rmpp_segment(
    send_buf: *mut c_void,
    seg_num: c_int,
) -> *mut c_void {
    with_buf(send_buf, |b| {
        let body = b.body.as_mut().ok_or(EBUSY)?;
        let n = usize::try_from(seg_num).map_err(|_| EINVAL)?;
        let seg = body.segment_mut(n).ok_or(EINVAL)?;
        Ok(seg.as_mut_ptr().cast::<c_void>())
    })
    .unwrap_or(core::ptr::null_mut())
}

/// `rmad_send_buf_seg_count`.
///
/// # Safety
///
/// `seg_size` must be NULL or valid for a write of a `u32`.
#[no_mangle]
pub(crate) unsafe extern "C" fn rmad_send_buf_seg_count(
    send_buf: *mut c_void,
    seg_size: *mut u32,
) -> c_int {
    with_buf(send_buf, |b| {
        let body = b.body.as_ref().ok_or(EBUSY)?;
        if !seg_size.is_null() {
            // SAFETY: Caller's promise.
            unsafe { seg_size.write(u32::try_from(body.seg_size).unwrap_or(0)) };
        }
        Ok(c_int::try_from(body.seg_count).unwrap_or(c_int::MAX))
    })
    .unwrap_or_else(|e| e.to_errno())
}

/// `rmad_send_buf_set`.
///
/// # Safety
///
/// `ah` must be NULL or valid.
#[no_mangle]
pub(crate) unsafe extern "C" fn rmad_send_buf_set(
    send_buf: *mut c_void,
    ah: *const RmadAh,
    timeout_ms: c_int,
    retries: c_int,
    context: *mut c_void,
) -> c_int {
    // SAFETY: Caller's promise.
    let ah = unsafe { ah.as_ref() }.map(RmadAh::address);
    let context = context.expose_provenance();
    code(with_buf(send_buf, |b| {
        let body = b.body.as_mut().ok_or(EBUSY)?;
        body.ah = ah;
        body.timeout_ms = timeout_ms;
        body.retries = retries;
        // Also in the body, where its send handler reads it without the slot.
        body.context[1] = context;
        b.context = context;
        Ok(())
    }))
}

/// `rmad_send_buf_set_retry`.
#[no_mangle]
pub(crate) extern "C" fn rmad_send_buf_set_retry(
    send_buf: *mut c_void,
    retry_flags: u32,
    deadline_ms: u32,
) -> c_int {
    code(with_buf(send_buf, |b| {
        let rules = retry_rules(retry_flags, deadline_ms)?;
        b.body.as_mut().ok_or(EBUSY)?.set_retry(rules);
        Ok(())
    }))
}

/// `rmad_send_buf_context`.
#[no_mangle]
pub(crate) extern "C" fn rmad_send_buf_context(send_buf: *mut c_void) -> *mut c_void {
    with_buf(send_buf, |b| Ok(b.context)).map_or(core::ptr::null_mut(), ctx_ptr)
}

/// `rmad_send_buf_retries`.
#[no_mangle]
pub(crate) extern "C" fn rmad_send_buf_retries(send_buf: *mut c_void) -> c_int {
    with_buf(send_buf, |b| {
        b.body.as_ref().map(|body| body.retries).ok_or(EBUSY)
    })
    .unwrap_or_else(|e| e.to_errno())
}

/// Posts the buffer behind `h`; returns the id of the post.
fn post_impl(h: *mut c_void) -> Result<u64> {
    with_buf(h, |b| {
        let body = b.body.take().ok_or(EBUSY)?;
        match Agent::post(SendBuf { body }) {
            Ok(posted) => Ok(posted.gen),
            Err(e) => {
                // INVARIANT: A failed post hands the body back: the client owns it again.
                b.body = Some(e.buf.body);
                Err(e.err)
            }
        }
    })
}

/// `rmad_post_send_mad`.
///
/// # Safety
///
/// `bad_send_buf` must be NULL or valid for a write.
#[no_mangle]
pub(crate) unsafe extern "C" fn rmad_post_send_mad(
    send_buf: *mut c_void,
    bad_send_buf: *mut *mut c_void,
) -> c_int {
    match post_impl(send_buf) {
        Ok(_) => 0,
        Err(e) => {
            if !bad_send_buf.is_null() {
                // SAFETY: Caller's promise.
                unsafe { *bad_send_buf = send_buf };
            }
            e.to_errno()
        }
    }
}

/// `rmad_post_send`.
///
/// # Safety
///
/// `post_id` must be NULL or valid for a write.
#[no_mangle]
pub(crate) unsafe extern "C" fn rmad_post_send(send_buf: *mut c_void, post_id: *mut u64) -> c_int {
    match post_impl(send_buf) {
        Ok(id) => {
            if !post_id.is_null() {
                // SAFETY: Caller's promise.
                unsafe { *post_id = id };
            }
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// `rmad_modify_mad`: modifies whatever post of the buffer is outstanding.
#[no_mangle]
pub(crate) extern "C" fn rmad_modify_mad(send_buf: *mut c_void, timeout_ms: c_int) -> c_int {
    code(with_buf(send_buf, |b| {
        if b.body.is_some() {
            // The client owns the buffer: nothing is outstanding.
            return Err(EINVAL);
        }
        b.rec.agent.modify_current(&b.rec, timeout_ms)
    }))
}

/// `rmad_cancel_mad`.
#[no_mangle]
pub(crate) extern "C" fn rmad_cancel_mad(send_buf: *mut c_void) -> c_int {
    rmad_modify_mad(send_buf, 0)
}

/// `rmad_modify_post`: modifies post `post_id` of the buffer, if it is still outstanding.
#[no_mangle]
pub(crate) extern "C" fn rmad_modify_post(
    send_buf: *mut c_void,
    post_id: u64,
    timeout_ms: c_int,
) -> c_int {
    code(with_buf(send_buf, |b| {
        let h = SendHandle {
            rec: b.rec.clone(),
            gen: post_id,
        };
        h.modify(timeout_ms)
    }))
}

/// `rmad_cancel_post`.
#[no_mangle]
pub(crate) extern "C" fn rmad_cancel_post(send_buf: *mut c_void, post_id: u64) -> c_int {
    rmad_modify_post(send_buf, post_id, 0)
}
