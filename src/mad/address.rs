// SPDX-License-Identifier: GPL-2.0

//! Where a MAD goes or came from: the attributes of an address handle (`rdma_ah_attr`).

/// A global identifier in an address: a 128-bit GID.
pub(crate) type Gid = [u8; 16];

/// The global route of an address handle (`rdma_ah_attr` with a GRH).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct GrhAttr {
    /// Destination GID.
    pub(crate) dgid: Gid,
    /// Index of the local source GID in the port's GID table.
    pub(crate) sgid_index: u8,
    /// Hop limit (on RoCEv2 the IP TTL or hop limit).
    pub(crate) hop_limit: u8,
    /// Traffic class (on RoCEv2 the IP DSCP and ECN bits).
    pub(crate) traffic_class: u8,
    /// Flow label (20 bits; on RoCEv2 over IPv6 the IPv6 flow label).
    pub(crate) flow_label: u32,
}

/// Where a send goes: an address handle's attributes. Response matching reads the LIDs and
/// GIDs (Documentation/behaviour.md §4); the rest is carried into the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Address {
    /// Destination LID.
    pub(crate) dlid: u16,
    /// Source path bits: selects the local LID among the port's `2^LMC` LIDs.
    pub(crate) src_path_bits: u8,
    /// Global route, when the packet carries a GRH.
    pub(crate) grh: Option<GrhAttr>,
    /// Service level.
    pub(crate) sl: u8,
}
