// SPDX-License-Identifier: GPL-2.0

//! What an agent registers: its special QP and the classes and methods whose requests it
//! receives (`ib_register_mad_agent`'s `qp_type` and `ib_mad_reg_req`).

/// Which special QP an agent uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QpType {
    /// QP0, subnet management.
    Smi,
    /// QP1, general services.
    Gsi,
}

/// The largest `hi_tid`: the top byte of the 32-bit value stays zero (Documentation/behaviour.md
/// §1.3).
pub(crate) const HI_TID_MAX: u32 = (1 << 24) - 1;

/// One class registration (`ib_mad_reg_req` of an agent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RegReq {
    /// Management class.
    pub(crate) mgmt_class: u8,
    /// Class version.
    pub(crate) class_version: u8,
    /// OUI, for vendor-range-2 classes.
    pub(crate) oui: [u8; 3],
    /// Bit `m` set: the agent receives requests with method `m` (0..128).
    pub(crate) methods: u128,
}
