// SPDX-License-Identifier: GPL-2.0

//! What a send buffer is made for ([`SendSpec`]): the arguments of `ib_create_send_mad`,
//! which `create.rs` checks and builds a buffer from. A file of its own, which imports nothing
//! of the agent, so that the agent's types name it without a circle of imports.

use crate::mad::wire;

/// `IB_MGMT_MAD_HDR` and `IB_MGMT_MAD_DATA` in the type `ib_create_send_mad` takes them in.
const MAD_HDR: i32 = 24;
const MAD_DATA: i32 = 232;
// Both are small and positive: the casts below cannot truncate.
const _: () = assert!(
    MAD_HDR as usize == wire::IB_MGMT_MAD_HDR && MAD_DATA as usize == wire::IB_MGMT_MAD_DATA
);

/// What a send buffer is made for: the arguments of `ib_create_send_mad` besides the agent
/// and the allocation flags, with their C types (a negative length is a caller's error, and
/// `EINVAL`, as in the C API).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SendSpec {
    /// The QP the MAD goes to (1 for requests; a request's source QP for its response).
    pub(crate) remote_qpn: u32,
    /// The P_Key index the MAD is sent with.
    pub(crate) pkey_index: u16,
    /// An RMPP transfer: the data is split into segments.
    pub(crate) rmpp_active: bool,
    /// Length of the headers: the common header and the class's own.
    pub(crate) hdr_len: i32,
    /// Length of the data after the headers.
    pub(crate) data_len: i32,
    /// MAD base version (1 for InfiniBand).
    pub(crate) base_version: u8,
}

impl SendSpec {
    /// One MAD to QP `remote_qpn` with the common header and 232 bytes of data, P_Key index 0,
    /// base version 1: what a request or a response of most classes is. Other shapes start
    /// from here: `SendSpec { hdr_len: 56, ..SendSpec::mad(1) }`.
    #[cfg_attr(
        not(rmad_test),
        allow(
            dead_code,
            reason = "the Rust API's common case; the C API passes every argument"
        )
    )]
    pub(crate) const fn mad(remote_qpn: u32) -> Self {
        Self {
            remote_qpn,
            pkey_index: 0,
            rmpp_active: false,
            hdr_len: MAD_HDR,
            data_len: MAD_DATA,
            base_version: 1,
        }
    }
}
