// SPDX-License-Identifier: GPL-2.0

//! Answering a request: the address back to its sender (`ib_create_ah_from_wc`).

use super::Agent;
use crate::{
    engine::transport::RecvWc,
    mad::{
        Address,
        GrhAttr, //
    },
};
use kernel::prelude::*;

impl Agent {
    /// Prepares `ah` for sends from this agent's port (`rdma_create_ah`'s resolution): on
    /// RoCE, resolves and caches the destination's MAC. Optional: the first transmission to
    /// the destination resolves it otherwise, in the port's transmit work. Process context
    /// (it may wait about a second for the neighbour tables). `EHOSTUNREACH` when the
    /// destination cannot be resolved.
    pub(crate) fn resolve_address(&self, ah: &Address) -> Result {
        self.transport.resolve(self.port, ah)
    }

    /// The address that answers a MAD that arrived as `wc` (`ib_create_ah_from_wc`), as
    /// `ib_init_ah_attr_from_wc` builds it: to its source LID with its SL, from the LID it was
    /// sent to; with a GRH, to its source GID from this port's GID it was sent to, wherever it
    /// is in the GID table (on RoCEv2 over IPv4, the IPv4-mapped GIDs of the two addresses),
    /// with the request's traffic class and flow label, and hop limit 0xFF (on RoCE the
    /// route's). `ENOENT` when the port has no longer that GID. Process context (on RoCE the
    /// route is resolved). Like the C layer's, it reads cached tables only and never queries
    /// the port: it runs once per answered request.
    pub(crate) fn reply_address(&self, wc: &RecvWc) -> Result<Address> {
        let grh = match wc.grh {
            None => None,
            Some((sgid, dgid)) => {
                let sgid_index = self.transport.find_gid(self.port, &dgid).ok_or(ENOENT)?;
                Some(GrhAttr {
                    hop_limit: self
                        .transport
                        .reply_hop_limit(self.port, sgid_index, &sgid)?,
                    traffic_class: wc.grh_fields.traffic_class,
                    flow_label: wc.grh_fields.flow_label,
                    dgid: sgid,
                    sgid_index,
                })
            }
        };
        Ok(Address {
            sl: wc.sl,
            dlid: wc.slid,
            src_path_bits: wc.dlid_path_bits,
            grh,
        })
    }
}
