// SPDX-License-Identifier: GPL-2.0

//! Received MADs in the C API: the handle a receive handler gets, keeping a MAD past its
//! handler (`ib_free_recv_mad`'s ownership), and the address that answers it
//! (`ib_create_ah_from_wc`).
//!
//! Every MAD handed to a C receive handler gets a handle in the receive table for the length
//! of the call. If the handler keeps it (`rmad_keep_recv_mad`), the handle and the MAD stay
//! until the client frees them; otherwise rmad ends the handle when the handler returns. A
//! kept MAD owns its bytes and its arrival record and holds nothing of its agent, so it can
//! outlive the agent and is freed safely after unregistration; whatever is still kept at
//! unload is freed with the tables.

use super::{
    agent_of, code, from_ptr, tables, to_ptr,
    types::{
        RmadAh,
        RmadRecvWc, //
    },
};
use crate::engine::transport::{
    RecvMad,
    RecvWc, //
};
use core::ffi::c_void;
use kernel::{
    ffi::c_int,
    prelude::*, //
};

/// What a receive-buffer handle stands for.
pub(crate) struct CRecv {
    /// The MAD and how it arrived.
    mad: RecvMad,
    /// The device it arrived on ([`Agent::device`](crate::engine::Agent)), by address: a
    /// kept MAD can outlive its device, so this is compared, never dereferenced.
    device: usize,
    /// The client keeps it past its handler.
    kept: bool,
}

impl CRecv {
    /// The MAD and how it arrived.
    pub(super) fn mad(&self) -> &RecvMad {
        &self.mad
    }
}

/// Hands `mad` to the C receive handler `f` of the agent `agent` (a handle), with `wc` filled
/// in except for the MAD and its handle; ends the handle afterwards unless the handler kept
/// it. Without a free handle (memory, or handles used up), the handler still gets the MAD,
/// with a NULL `recv_buf` that it cannot keep. `device` is the agent's, where it arrived.
pub(crate) fn deliver(
    f: unsafe extern "C" fn(*mut c_void, *mut c_void, *const RmadRecvWc),
    agent: u64,
    bh: u64,
    mut wc: RmadRecvWc,
    mad: RecvMad,
    device: *const (),
) {
    // The bytes stay where they are when `mad` moves into the table: they are on the heap.
    wc.mad = mad.mad.as_ptr().cast();
    wc.mad_len = u32::try_from(mad.mad.len()).unwrap_or(0);
    #[expect(
        clippy::result_large_err,
        reason = "the received MAD comes back by value when no handle is free: a move on that \
                  path only, where the handler then gets it without a handle"
    )]
    let inserted = tables().map_err(|e| (e, None)).and_then(|t| {
        t.recvs
            .insert(
                CRecv {
                    mad,
                    device: device.addr(),
                    kept: false,
                },
                GFP_KERNEL,
            )
            .map(|h| (t, h))
            .map_err(|(e, v)| (e, Some(v)))
    });
    match inserted {
        Ok((t, h)) => {
            wc.recv_buf = to_ptr(h);
            // SAFETY: The client registered `f` as its receive handler; `wc` lives until the
            // call returns, and the MAD it points to until the handle ends, after the call.
            unsafe { f(to_ptr(agent), to_ptr(bh), &wc) };
            // Not kept: the handle ends (dropped outside the slot's lock). Kept: `EBUSY`, and
            // the MAD stays for the client.
            drop(
                t.recvs
                    .remove(h, |r| if r.kept { Err(EBUSY) } else { Ok(()) }),
            );
        }
        Err((_, kept_back)) => {
            // SAFETY: As above; the MAD (in `kept_back`) lives until the end of this block.
            unsafe { f(to_ptr(agent), to_ptr(bh), &wc) };
            drop(kept_back);
        }
    }
}

/// `rmad_keep_recv_mad`.
#[no_mangle]
pub(crate) extern "C" fn rmad_keep_recv_mad(recv_buf: *mut c_void) -> c_int {
    code((|| {
        tables()?.recvs.with(from_ptr(recv_buf), |r| {
            if r.kept {
                return Err(EINVAL);
            }
            r.kept = true;
            Ok(())
        })?
    })())
}

/// `rmad_free_recv_mad`.
#[no_mangle]
pub(crate) extern "C" fn rmad_free_recv_mad(recv_buf: *mut c_void) -> c_int {
    code((|| {
        // A MAD that was not kept is its handler's, and rmad ends it after the call.
        let r = tables()?.recvs.remove(from_ptr(recv_buf), |r| {
            if r.kept {
                Ok(())
            } else {
                Err(EINVAL)
            }
        })?;
        drop(r);
        Ok(())
    })())
}

/// `rmad_recv_buf_mad`.
///
/// # Safety
///
/// `len` must be NULL or valid for a write.
#[no_mangle]
pub(crate) unsafe extern "C" fn rmad_recv_buf_mad(
    recv_buf: *mut c_void,
    len: *mut u32,
) -> *const c_void {
    let Ok((p, n)) = tables().and_then(|t| {
        t.recvs.with(from_ptr(recv_buf), |r| {
            (
                r.mad.mad.as_ptr(),
                u32::try_from(r.mad.mad.len()).unwrap_or(0),
            )
        })
    }) else {
        return core::ptr::null();
    };
    // SAFETY: Caller's promise.
    if let Some(len) = unsafe { len.as_mut() } {
        *len = n;
    }
    p.cast()
}

/// `rmad_recv_buf_ah`.
///
/// # Safety
///
/// `ah` must be NULL or valid for a write.
#[no_mangle]
pub(crate) unsafe extern "C" fn rmad_recv_buf_ah(
    agent: *mut c_void,
    recv_buf: *mut c_void,
    ah: *mut RmadAh,
) -> c_int {
    // SAFETY: Caller's promise.
    let Some(out) = (unsafe { ah.as_mut() }) else {
        return EINVAL.to_errno();
    };
    code((|| {
        let a = agent_of(agent)?;
        let (wc, device): (RecvWc, usize) = tables()?
            .recvs
            .with(from_ptr(recv_buf), |r| (r.mad.wc, r.device))?;
        // Only the device and port it arrived on can answer it.
        if wc.port != a.port() || a.device().addr() != device {
            return Err(EINVAL);
        }
        // The GID table is read outside every lock.
        *out = RmadAh::from_address(&a.reply_address(&wc)?);
        Ok(())
    })())
}
