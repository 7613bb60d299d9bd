// SPDX-License-Identifier: GPL-2.0

//! Destination MACs on RoCE: ib_core's neighbour resolution, cached per port.
//!
//! On RoCE an address handle carries the MAC of the next hop, and rxe treats a packet whose
//! destination MAC is its own as loopback: a MAC has to be resolved from the destination GID
//! (`rdma_resolve_ip`, which asks the IP neighbour tables, in process context). rmad does it
//! when a client creates an address ([`Agent::resolve_address`]) or, failing that, in the
//! port's transmit work at the first transmission to the destination, never in a post. A
//! resolved MAC is kept for [`NEIGH_TTL_MS`] and then resolved again; a failed resolution is
//! not kept, so the next transmission tries again.
//!
//! [`Agent::resolve_address`]: crate::engine::agent::Agent::resolve_address

use super::*;
use crate::mad::GrhAttr;
use kernel::time::{
    Instant,
    Monotonic, //
};

/// Destinations a port remembers.
const NEIGH_MAX: usize = 32;
/// How long a resolved MAC is used before it is resolved again.
const NEIGH_TTL_MS: i64 = 60_000;
/// GID table entries of the port compared with a destination (loopback to the port itself).
const OWN_GIDS: u8 = 16;

/// A destination and its MAC.
struct Neigh {
    dgid: Gid,
    sgid_index: u8,
    mac: [u8; 6],
    at: Instant<Monotonic>,
}

/// The MACs a port resolved.
pub(crate) struct Neighbours {
    entries: KVec<Neigh>,
}

impl Neighbours {
    /// None yet.
    pub(super) const fn new() -> Self {
        Self {
            entries: KVec::new(),
        }
    }
}

impl VerbsPort {
    /// Whether the port's packets carry Ethernet headers (RoCE: it has a MAC).
    pub(super) fn is_roce(&self) -> bool {
        self.mac != [0; 6]
    }

    /// The destination MAC for `grh` from this port: this port's own for one of its GIDs,
    /// otherwise the cached or newly resolved MAC of the destination. Process context; may
    /// wait up to a second for the neighbour tables. `EHOSTUNREACH` when resolution fails.
    pub(super) fn dmac(&self, grh: &GrhAttr) -> Result<[u8; 6]> {
        let mut n = self.neigh.lock();
        let fresh = |e: &Neigh| e.at.elapsed().as_millis() < NEIGH_TTL_MS;
        if let Some(e) = n
            .entries
            .iter()
            .find(|e| e.dgid == grh.dgid && e.sgid_index == grh.sgid_index && fresh(e))
        {
            return Ok(e.mac);
        }
        let own = (0..OWN_GIDS).any(|i| self.gid(self.port, i) == Some(grh.dgid));
        let mac = if own { self.mac } else { self.resolve(grh)? };
        // Expired entries go first; then, if full, the oldest.
        n.entries
            .retain(|e| fresh(e) && !(e.dgid == grh.dgid && e.sgid_index == grh.sgid_index));
        if n.entries.len() >= NEIGH_MAX {
            let _ = n.entries.remove(0);
        }
        n.entries.push(
            Neigh {
                dgid: grh.dgid,
                sgid_index: grh.sgid_index,
                mac,
                at: Instant::now(),
            },
            GFP_KERNEL,
        )?;
        Ok(mac)
    }

    /// Asks ib_core's address resolution for the MAC of `grh`'s destination.
    fn resolve(&self, grh: &GrhAttr) -> Result<[u8; 6]> {
        let (mut mac, mut hop_limit) = ([0u8; 6], 0u8);
        let port = u32::from(self.port);
        let r = self
            .with_device(|dev| {
                // SAFETY: `with_device` holds a registration reference on `dev`; `dgid` has 16
                // bytes, `mac` room for 6 and `hop_limit` for one; process context (the
                // caller's promise).
                unsafe {
                    rmad_shim_resolve_dmac(
                        dev,
                        port,
                        grh.sgid_index,
                        grh.dgid.as_ptr(),
                        mac.as_mut_ptr(),
                        &mut hop_limit,
                    )
                }
            })
            .ok_or(ENODEV)?;
        if r != 0 {
            return Err(EHOSTUNREACH);
        }
        Ok(mac)
    }
}
