// SPDX-License-Identifier: GPL-2.0

//! The structures and callback types of `include/rmad.h` as Rust sees them, with the layouts
//! the header promises checked at compile time (`src/capi/exports.c` checks the same numbers in
//! C, and `scripts/check/check-api.py` that the fields agree).

use crate::mad::{
    Address,
    GrhAttr, //
};
use core::ffi::c_void;
use kernel::ffi::c_int;

/// `struct rmad_ah`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct RmadAh {
    pub(crate) dlid: u16,
    pub(crate) src_path_bits: u8,
    pub(crate) has_grh: u8,
    pub(crate) sgid_index: u8,
    pub(crate) dgid: [u8; 16],
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
    pub(crate) sl: u8,
    pub(crate) flow_label: u32,
}

impl RmadAh {
    /// The address these attributes describe.
    pub(crate) fn address(&self) -> Address {
        Address {
            sl: self.sl,
            dlid: self.dlid,
            src_path_bits: self.src_path_bits,
            grh: (self.has_grh != 0).then_some(GrhAttr {
                // 0 is the default, as in the structures before the field existed.
                hop_limit: if self.hop_limit == 0 {
                    64
                } else {
                    self.hop_limit
                },
                traffic_class: self.traffic_class,
                flow_label: self.flow_label & 0xf_ffff,
                dgid: self.dgid,
                sgid_index: self.sgid_index,
            }),
        }
    }

    /// The attributes of `a`.
    pub(crate) fn from_address(a: &Address) -> Self {
        let g = a.grh.unwrap_or_default();
        Self {
            dlid: a.dlid,
            src_path_bits: a.src_path_bits,
            has_grh: u8::from(a.grh.is_some()),
            sgid_index: g.sgid_index,
            dgid: g.dgid,
            hop_limit: g.hop_limit,
            traffic_class: g.traffic_class,
            sl: a.sl,
            flow_label: g.flow_label,
        }
    }
}

/// `struct rmad_send_wc`.
#[repr(C)]
pub(crate) struct RmadSendWc {
    pub(crate) send_buf: *mut c_void,
    pub(crate) post_id: u64,
    pub(crate) context: *mut c_void,
    pub(crate) status: c_int,
    pub(crate) vendor_err: u32,
    pub(crate) buf_context: *mut c_void,
}

/// `struct rmad_recv_wc`.
#[repr(C)]
pub(crate) struct RmadRecvWc {
    pub(crate) mad: *const c_void,
    pub(crate) context: *mut c_void,
    pub(crate) mad_len: u32,
    pub(crate) src_qp: u32,
    pub(crate) slid: u16,
    pub(crate) pkey_index: u16,
    pub(crate) has_grh: u8,
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
    pub(crate) recv_buf: *mut c_void,
    pub(crate) sgid: [u8; 16],
    pub(crate) flow_label: u32,
}

/// `struct rmad_reg_req`.
#[repr(C)]
pub(crate) struct RmadRegReq {
    pub(crate) mgmt_class: u8,
    pub(crate) mgmt_class_version: u8,
    pub(crate) oui: [u8; 3],
    pub(crate) method_mask: [u64; 2],
}

// The layouts `include/rmad.h` promises; `src/capi/exports.c` checks the same numbers in C.
const _: () = {
    use core::mem::{
        offset_of,
        size_of, //
    };
    assert!(size_of::<RmadAh>() == 28 && offset_of!(RmadAh, dgid) == 5);
    assert!(offset_of!(RmadAh, hop_limit) == 21 && offset_of!(RmadAh, sl) == 23);
    assert!(offset_of!(RmadAh, flow_label) == 24);
    assert!(size_of::<RmadSendWc>() == 40);
    assert!(offset_of!(RmadSendWc, post_id) == 8 && offset_of!(RmadSendWc, context) == 16);
    assert!(offset_of!(RmadSendWc, status) == 24 && offset_of!(RmadSendWc, vendor_err) == 28);
    assert!(offset_of!(RmadSendWc, buf_context) == 32);
    assert!(size_of::<RmadRecvWc>() == 64);
    assert!(offset_of!(RmadRecvWc, hop_limit) == 29 && offset_of!(RmadRecvWc, traffic_class) == 30);
    assert!(offset_of!(RmadRecvWc, flow_label) == 56);
    assert!(offset_of!(RmadRecvWc, context) == 8 && offset_of!(RmadRecvWc, mad_len) == 16);
    assert!(offset_of!(RmadRecvWc, src_qp) == 20 && offset_of!(RmadRecvWc, slid) == 24);
    assert!(offset_of!(RmadRecvWc, pkey_index) == 26 && offset_of!(RmadRecvWc, has_grh) == 28);
    assert!(offset_of!(RmadRecvWc, recv_buf) == 32 && offset_of!(RmadRecvWc, sgid) == 40);
    assert!(size_of::<RmadRegReq>() == 24 && offset_of!(RmadRegReq, method_mask) == 8);
};

/// `rmad_send_handler`.
pub(crate) type SendFn = Option<unsafe extern "C" fn(agent: *mut c_void, wc: *mut RmadSendWc)>;
/// `rmad_recv_handler`.
pub(crate) type RecvFn =
    Option<unsafe extern "C" fn(agent: *mut c_void, buf: *mut c_void, wc: *const RmadRecvWc)>;
