// SPDX-License-Identifier: GPL-2.0

//! Destination MACs on RoCE: ib_core's neighbour resolution, cached per port, and never
//! waited for on the transmit path.
//!
//! On RoCE an address handle carries the MAC of the next hop, and rxe treats a packet whose
//! destination MAC is its own as loopback: a MAC has to be resolved from the destination GID
//! (`rdma_resolve_ip`, which asks the IP neighbour tables, in process context, and may wait
//! about a second for a neighbour that does not answer). A client that creates an address
//! ([`Agent::resolve_address`]) resolves it in its own thread. Otherwise the port's transmit
//! work finds the destination without a MAC, parks the transmission and starts a
//! [`Resolution`] on the port's resolution queue (several at once); the transmit work goes on
//! with the next transmission, so one destination never delays another. When the resolution
//! ends, the parked transmissions go back to the head of the transmit queue.
//!
//! A resolved MAC is kept for [`NEIGH_TTL_MS`]; a failed resolution for [`FAILED_TTL_MS`],
//! during which transmissions to that destination are refused at once (`LOC_QP_OP_ERR`)
//! instead of waiting again: a peer with a spoofed source costs one resolution, not one per
//! answer. A client's own resolution always asks again.
//!
//! [`Agent::resolve_address`]: crate::engine::agent::Agent::resolve_address

use super::{
    rmad_shim_resolve_dmac,
    VerbsPort, //
};
use crate::{
    engine::transport::Transport,
    mad::{
        Gid,
        GrhAttr, //
    },
};
use kernel::{
    impl_has_work, new_work,
    prelude::*,
    sync::Arc,
    time::{
        Instant,
        Monotonic, //
    },
    workqueue::{
        Work,
        WorkItem, //
    },
};

/// Destinations a port remembers.
const NEIGH_MAX: usize = 32;
/// How long a resolved MAC is used before it is resolved again.
const NEIGH_TTL_MS: i64 = 60_000;
/// How long a failed resolution refuses transmissions to its destination.
const FAILED_TTL_MS: i64 = 10_000;
/// GID table entries of the port compared with a destination (loopback to the port itself).
const OWN_GIDS: u8 = 16;
/// [`OWN_GIDS`] as an array length.
const OWN_GIDS_USIZE: usize = OWN_GIDS as usize;

/// A snapshot of the first [`OWN_GIDS`] entries of a port's GID table (`None`: no entry).
pub(super) struct OwnGids([Option<Gid>; OWN_GIDS_USIZE]);

/// What a port knows of a destination's MAC.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mac {
    /// Resolved.
    Known([u8; 6]),
    /// The last resolution failed.
    Unreachable,
    /// A [`Resolution`] is under way.
    Resolving,
}

/// A destination and its MAC.
struct Neigh {
    dgid: Gid,
    sgid_index: u8,
    mac: Mac,
    at: Instant<Monotonic>,
}

impl Neigh {
    /// Whether the entry still holds: a resolution under way always does (it ends, and
    /// replaces the entry).
    fn fresh(&self) -> bool {
        let age = self.at.elapsed().as_millis();
        match self.mac {
            Mac::Known(_) => age < NEIGH_TTL_MS,
            Mac::Unreachable => age < FAILED_TTL_MS,
            Mac::Resolving => true,
        }
    }

    fn is(&self, grh: &GrhAttr) -> bool {
        self.dgid == grh.dgid && self.sgid_index == grh.sgid_index
    }
}

/// The MACs a port resolved, and how many resolutions it made.
pub(crate) struct Neighbours {
    entries: KVec<Neigh>,
    /// Resolutions that found a MAC, and that failed.
    resolved: u64,
    failed: u64,
}

impl Neighbours {
    /// None yet.
    pub(super) const fn new() -> Self {
        Self {
            entries: KVec::new(),
            resolved: 0,
            failed: 0,
        }
    }

    /// Records what is known of `grh`'s destination: expired entries go first; then, if
    /// full, the oldest.
    fn record(&mut self, grh: &GrhAttr, mac: Mac) -> Result {
        self.entries.retain(|e| e.fresh() && !e.is(grh));
        if self.entries.len() >= NEIGH_MAX {
            let _ = self.entries.remove(0);
        }
        self.entries.push(
            Neigh {
                dgid: grh.dgid,
                sgid_index: grh.sgid_index,
                mac,
                at: Instant::now(),
            },
            GFP_KERNEL,
        )?;
        Ok(())
    }
}

/// What the transmit work does with a transmission to a destination.
pub(super) enum Dest {
    /// Send it with this destination MAC.
    Mac([u8; 6]),
    /// Refuse it: the destination's last resolution failed.
    Unreachable,
    /// Park it until the destination's resolution ends.
    Wait,
}

/// One destination being resolved, on the port's resolution queue.
#[pin_data]
pub(super) struct Resolution {
    port: Arc<VerbsPort>,
    grh: GrhAttr,
    #[pin]
    work: Work<Resolution>,
}

impl_has_work! {
    impl HasWork<Self> for Resolution { self.work }
}

impl WorkItem for Resolution {
    type Pointer = Arc<Resolution>;

    fn run(this: Arc<Resolution>) {
        let port = &this.port;
        let r = port.resolve(&this.grh);
        {
            let mut n = port.neigh.lock();
            match r {
                Ok(_) => n.resolved = n.resolved.saturating_add(1),
                Err(_) => n.failed = n.failed.saturating_add(1),
            }
            // Without memory for the entry the destination is simply resolved again next
            // time.
            let _ = n.record(&this.grh, r.map_or(Mac::Unreachable, Mac::Known));
        }
        port.requeue_parked();
    }
}

impl VerbsPort {
    /// Whether the port's packets carry Ethernet headers (RoCE: it has a MAC).
    pub(super) fn is_roce(&self) -> bool {
        self.attrs.mac() != [0; 6]
    }

    /// Whether `dgid` is one of the port's own GIDs (rxe loops such packets back).
    fn is_own(&self, dgid: &Gid) -> bool {
        (0..OWN_GIDS).any(|i| self.gid(self.port, i).as_ref() == Some(dgid))
    }

    /// The port's own GIDs as they are now, for one run of the transmit work.
    pub(super) fn own_gids(&self) -> OwnGids {
        let mut own = OwnGids([None; OWN_GIDS_USIZE]);
        for (i, slot) in (0..OWN_GIDS).zip(own.0.iter_mut()) {
            *slot = self.gid(self.port, i);
        }
        own
    }

    /// The resolutions this port made: `(found a MAC, failed)`.
    pub(crate) fn resolutions(&self) -> (u64, u64) {
        let n = self.neigh.lock();
        (n.resolved, n.failed)
    }

    /// What the transmit work does with a transmission to `grh`'s destination, without
    /// waiting: the MAC if known, a refusal while a failure is remembered, otherwise a wait
    /// for the destination's resolution, which this starts if none is under way.
    /// `own` holds the port's GIDs once read: the transmit work reads them once per run rather
    /// than once per transmission (each read takes the GID table's lock, for each of 16 entries);
    /// a GID that changes during a run is seen by the next one.
    pub(super) fn dest_for_tx(self: &Arc<Self>, grh: &GrhAttr, own: &mut Option<OwnGids>) -> Dest {
        let own = own.get_or_insert_with(|| self.own_gids());
        if own.0.iter().any(|g| g.as_ref() == Some(&grh.dgid)) {
            return Dest::Mac(self.attrs.mac());
        }
        {
            let mut n = self.neigh.lock();
            if let Some(e) = n.entries.iter().find(|e| e.is(grh) && e.fresh()) {
                return match e.mac {
                    Mac::Known(mac) => Dest::Mac(mac),
                    Mac::Unreachable => Dest::Unreachable,
                    Mac::Resolving => Dest::Wait,
                };
            }
            if n.record(grh, Mac::Resolving).is_err() {
                return Dest::Unreachable;
            }
        }
        let started = Arc::pin_init(
            pin_init!(Resolution {
                port: self.clone(),
                grh: *grh,
                work <- new_work!("Resolution::work"),
            }),
            GFP_KERNEL,
        )
        .map(|r| self.queue_resolution(r));
        if started != Ok(true) {
            // Nothing will end the wait: forget it, and refuse this one.
            self.neigh.lock().entries.retain(|e| !e.is(grh));
            return Dest::Unreachable;
        }
        Dest::Wait
    }

    /// Whether a resolution of `grh`'s destination is under way.
    pub(super) fn is_resolving(&self, grh: &GrhAttr) -> bool {
        self.neigh
            .lock()
            .entries
            .iter()
            .any(|e| e.is(grh) && e.mac == Mac::Resolving)
    }

    /// The destination MAC for `grh` from this port, for a client that creates an address:
    /// this port's own for one of its GIDs, a cached MAC, or a new resolution, waited for
    /// here (a failure remembered by the transmit path is tried again). Process context; may
    /// wait about a second. `EHOSTUNREACH` when resolution fails.
    pub(super) fn dmac(&self, grh: &GrhAttr) -> Result<[u8; 6]> {
        if self.is_own(&grh.dgid) {
            return Ok(self.attrs.mac());
        }
        {
            let n = self.neigh.lock();
            if let Some(Mac::Known(mac)) = n
                .entries
                .iter()
                .find(|e| e.is(grh) && e.fresh())
                .map(|e| e.mac)
            {
                return Ok(mac);
            }
        }
        // No lock is held while the neighbour tables are asked.
        let r = self.resolve(grh);
        let mut n = self.neigh.lock();
        match r {
            Ok(mac) => {
                n.resolved = n.resolved.saturating_add(1);
                n.record(grh, Mac::Known(mac))?;
                Ok(mac)
            }
            Err(e) => {
                n.failed = n.failed.saturating_add(1);
                Err(e)
            }
        }
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
