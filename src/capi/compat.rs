// SPDX-License-Identifier: GPL-2.0

//! What the `ib_mad` interface (`include/rmad_ib_mad.h`, glued in `src/compat/ib_mad.c`) needs
//! of the C API beyond `rmad.h`: an agent registered on a device named by its `struct
//! ib_device` (a name can change under a caller), with its `hi_tid` written before the agent
//! is routable and its handlers attributed to the client's module; the port's private QP, for
//! `agent->qp`; and the whole of how a MAD arrived, for the `struct ib_wc` and GRH an `ib_mad`
//! client hands to `ib_init_ah_attr_from_wc`.

use super::{
    register::{
        register_c,
        CRegistration, //
    },
    tables,
    types::{
        RecvFn,
        RmadRegReq,
        SendFn, //
    },
};
use crate::{
    engine::transport::{
        LinkHdr,
        RecvWc, //
    },
    verbs::{
        self,
        IbDevice, //
    },
};
use core::ffi::c_void;
use kernel::{
    ffi::c_int,
    prelude::*, //
};

/// How a MAD arrived, as `struct rmad_compat_wc` of `src/compat/compat.h` lays it out: the
/// fields of a `struct ib_wc` that `ib_init_ah_attr_from_wc` and the connection manager read,
/// and the 40 bytes before the MAD.
#[repr(C)]
pub(crate) struct CompatWc {
    src_qp: u32,
    slid: u32,
    pkey_index: u16,
    dlid_path_bits: u8,
    sl: u8,
    port: u8,
    network_hdr_type: u8,
    vlan_id: u16,
    wc_flags: u32,
    grh: [u8; 40],
}

impl CompatWc {
    /// What `wc` says of how a MAD arrived.
    fn of(wc: &RecvWc) -> Self {
        let LinkHdr {
            wc_flags,
            network_hdr_type,
            vlan_id,
            grh,
        } = wc.link;
        CompatWc {
            src_qp: wc.src_qp,
            slid: u32::from(wc.slid),
            pkey_index: wc.pkey_index,
            dlid_path_bits: wc.dlid_path_bits,
            sl: wc.sl,
            port: wc.port,
            network_hdr_type,
            vlan_id,
            wc_flags,
            grh,
        }
    }
}

/// Test flavour: what the `ib_mad` interface hands a client of a MAD that arrived at port
/// `port` as `info` says (what the verbs transport made of its completion): the whole way from
/// the shim's record to `struct rmad_compat_wc`, for suite `rmad_rxe`
/// (`src/testing/suites/rxe/ibmad.c`).
///
/// # Safety
///
/// `info` and `out` must be valid, for a read and a write.
#[cfg(rmad_test)]
#[no_mangle]
pub(crate) unsafe extern "C" fn rmad_test_info_to_compat(
    info: *const verbs::VerbsRecvInfo,
    port: u8,
    out: *mut CompatWc,
) {
    // SAFETY: Caller's promise.
    let wc = unsafe { &*info }.wc(port, false);
    // SAFETY: Caller's promise.
    unsafe { out.write(CompatWc::of(&wc)) };
}

// The layout of `struct rmad_compat_wc`; `src/compat/ib_mad.c` checks the same numbers in C.
const _: () = {
    assert!(core::mem::size_of::<CompatWc>() == 60);
    assert!(core::mem::offset_of!(CompatWc, pkey_index) == 8);
    assert!(core::mem::offset_of!(CompatWc, port) == 12);
    assert!(core::mem::offset_of!(CompatWc, vlan_id) == 14);
    assert!(core::mem::offset_of!(CompatWc, wc_flags) == 16);
    assert!(core::mem::offset_of!(CompatWc, grh) == 20);
};

/// `rmad_compat_register`: `rmad_register_agent` on port `port` of `dev`, writing the agent's
/// `hi_tid` to `*hi_tid` before any MAD can reach it, with `owner_send` and `owner_recv` (the
/// client's own handlers, which `send_handler` and `recv_handler` call) as where its handlers
/// are.
///
/// # Safety
///
/// `reg_req` NULL or valid; the handlers valid functions for as long as the agent is
/// registered; `hi_tid` valid for a write until this returns.
#[no_mangle]
pub(crate) unsafe extern "C" fn rmad_compat_register(
    dev: *const IbDevice,
    port: u32,
    qp_type: c_int,
    reg_req: *const RmadRegReq,
    rmpp_version: u8,
    send_handler: SendFn,
    recv_handler: RecvFn,
    context: *mut c_void,
    flags: u32,
    owner_send: *const c_void,
    owner_recv: *const c_void,
    hi_tid: *mut u32,
) -> *mut c_void {
    register_c(
        |port| {
            let vp = verbs::find_port_of(dev, port).ok_or(ENODEV)?;
            let engine = verbs::verbs_engine().ok_or(ENODEV)?;
            Ok((engine, vp))
        },
        CRegistration {
            port,
            qp_type,
            // SAFETY: Caller's promise.
            reg_req: unsafe { reg_req.as_ref() },
            rmpp_version,
            send: send_handler,
            recv: recv_handler,
            context,
            flags,
            owner: Some([owner_send.addr(), owner_recv.addr()]),
            hi_tid,
        },
    )
}

/// `rmad_compat_port_qp`: the private QP of port `port` of `dev` (`struct ib_qp *`), which
/// stays until rmad closes the port (the device's removal, after every client that registered
/// later is removed); NULL if rmad has no such open port.
#[no_mangle]
pub(crate) extern "C" fn rmad_compat_port_qp(dev: *const IbDevice, port: u32) -> *mut c_void {
    u8::try_from(port)
        .ok()
        .and_then(|p| verbs::find_port_of(dev, p))
        .map_or(core::ptr::null_mut(), |vp| vp.qp())
}

/// `rmad_compat_recv_wc`: fills `*out` with how the MAD of `recv_buf` (a kept MAD, or one
/// whose handler runs) arrived. 0; `-EINVAL` for a bad handle or a NULL `out`.
///
/// # Safety
///
/// `out` must be NULL or valid for a write.
#[no_mangle]
pub(crate) unsafe extern "C" fn rmad_compat_recv_wc(
    recv_buf: *mut c_void,
    out: *mut CompatWc,
) -> c_int {
    if out.is_null() {
        return EINVAL.to_errno();
    }
    let found = tables().and_then(|t| {
        t.recvs
            .with(super::from_ptr(recv_buf), |r| CompatWc::of(&r.mad().wc))
    });
    match found {
        Ok(wc) => {
            // SAFETY: Caller's promise; `out` is not null.
            unsafe { out.write(wc) };
            0
        }
        Err(e) => e.to_errno(),
    }
}
