// SPDX-License-Identifier: GPL-2.0

//! A received MAD and how it arrived ([`RecvMad`], [`RecvWc`]): what a transport hands the
//! engine, the engine an agent, and an agent its receive handler. A file of its own, which
//! imports nothing of the engine, so that what keeps received MADs (an agent's RMPP
//! transfers) names them without a circle of imports; [`crate::engine::transport`] re-exports
//! them.

use crate::mad::Gid;
use kernel::prelude::*;

/// Where and how a MAD was received (the parts of `struct ib_wc` and the GRH that MAD
/// processing reads).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecvWc {
    /// Port the MAD arrived on.
    pub(crate) port: u8,
    /// Source LID.
    pub(crate) slid: u16,
    /// Destination LID path bits (which of the port's LIDs the MAD was sent to).
    pub(crate) dlid_path_bits: u8,
    /// Source QP number.
    pub(crate) src_qp: u32,
    /// Destination QP number (0 or 1).
    pub(crate) dst_qp: u32,
    /// P_Key index.
    pub(crate) pkey_index: u16,
    /// Service level the packet carried.
    pub(crate) sl: u8,
    /// Source and destination GIDs when the packet carried a GRH.
    pub(crate) grh: Option<(Gid, Gid)>,
    /// The GRH's other routing fields as they arrived (zero without a GRH).
    pub(crate) grh_fields: GrhFields,
    /// The rest of what `ib_init_ah_attr_from_wc` reads of the packet, as the device reported
    /// it: what a client of the `ib_mad` interface is given as the packet's `ib_wc` and GRH.
    pub(crate) link: LinkHdr,
    /// A request that bypassed QP1: an RMPP ACK, STOP or ABORT that a peer sent to the
    /// private QP a segmented response of rmad's came from. Only an RMPP agent takes it.
    pub(crate) private_request: bool,
}

/// What `ib_init_ah_attr_from_wc` reads of a received packet beyond [`RecvWc`]'s other fields,
/// as the device reported it (a verbs port; zero on the loopback fabric, which has no
/// `ib_device`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LinkHdr {
    /// The work completion's `IB_WC_GRH`, `IB_WC_WITH_NETWORK_HDR_TYPE` and `IB_WC_WITH_VLAN`
    /// flags.
    pub(crate) wc_flags: u32,
    /// The network header's type (`enum rdma_network_type`), with
    /// `IB_WC_WITH_NETWORK_HDR_TYPE`.
    pub(crate) network_hdr_type: u8,
    /// The VLAN, with `IB_WC_WITH_VLAN`.
    pub(crate) vlan_id: u16,
    /// With `IB_WC_GRH`, the 40 bytes before the MAD as received: the GRH, or on RoCEv2 over
    /// IPv4 the IP header in the last 20 (RoCEv2 decodes as the header's version says, which
    /// a decoded [`RecvWc::grh`] would no longer tell).
    pub(crate) grh: [u8; 40],
}

impl Default for LinkHdr {
    fn default() -> Self {
        Self {
            wc_flags: 0,
            network_hdr_type: 0,
            vlan_id: 0,
            grh: [0; 40],
        }
    }
}

/// Hop limit, traffic class and flow label of a received packet's GRH (on RoCEv2 over IPv4:
/// the IP TTL and TOS, and no flow label).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct GrhFields {
    /// Hop limit (IP TTL).
    pub(crate) hop_limit: u8,
    /// Traffic class (IP DSCP and ECN bits).
    pub(crate) traffic_class: u8,
    /// Flow label (20 bits).
    pub(crate) flow_label: u32,
}

/// A received MAD, owned by whoever holds it; dropping it is `ib_free_recv_mad`.
pub(crate) struct RecvMad {
    /// The MAD bytes.
    pub(crate) mad: KVVec<u8>,
    /// How it arrived.
    pub(crate) wc: RecvWc,
}

impl Drop for RecvMad {
    /// A reassembled RMPP message may be vmalloc'ed, and a client frees a MAD it kept in any
    /// context (`rmad_free_recv_mad` is atomic-safe), a spinlock held among them.
    fn drop(&mut self) {
        free_in_any_context(core::mem::replace(&mut self.mad, KVVec::new()));
    }
}

/// Frees kvmalloc'ed bytes in any context but NMI, with `kvfree_atomic`: they may be
/// vmalloc'ed, and `vfree` (which `KVVec`'s own drop calls) may sleep unless it runs in an
/// interrupt, so it must not be called with a spinlock held or interrupts disabled.
pub(crate) fn free_in_any_context(v: KVVec<u8>) {
    let (ptr, _len, cap) = v.into_raw_parts();
    if cap != 0 {
        // SAFETY: `ptr` is the allocation of a `KVVec` of `cap` bytes (kvmalloc'ed) that
        // `into_raw_parts` gave up; `u8` needs no drop, and nothing else frees it.
        unsafe { kernel::bindings::kvfree_atomic(ptr.cast()) };
    }
}
