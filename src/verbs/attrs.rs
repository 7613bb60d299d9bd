// SPDX-License-Identifier: GPL-2.0

//! What a verbs port reads of its device and must read again when it changes: the LID and
//! LMC (an IB port's subnet manager assigns them, and may again), and on RoCE the netdev's
//! MAC (`ip link set … address …`). ib_core reports such changes as port events; the shim
//! passes them on ([`VerbsPort::attrs_changed`], also called once the port is open, for an
//! event that came during the open), and a work item on the port's resolution queue (not
//! the transmit work: a query can wait for `rtnl_lock` or for firmware) queries the device
//! again, then kicks the transmit work. Readers (posts, in any context) load
//! atomics and take no lock.

use super::{
    rmad_shim_port_mac,
    rmad_shim_query_port,
    IbDevice,
    VerbsPort, //
};
use crate::engine::transport::PortAttr;
use kernel::{
    impl_has_work, new_work,
    prelude::*,
    sync::{
        atomic::{
            Acquire,
            Atomic,
            Release, //
        },
        Arc,
    },
    workqueue::{
        Work,
        WorkItem, //
    },
};

/// The attributes of a port that can change, packed for lock-free reads.
pub(crate) struct Attrs {
    /// The LID in bits 8..24, the LMC in bits 0..8.
    lid_lmc: Atomic<u32>,
    /// The MAC in the low 48 bits (0 without a netdev: plain InfiniBand).
    mac: Atomic<u64>,
    /// Whether the port has an SMI (QP0); fixed.
    has_smi: bool,
    /// A port event came since the last query.
    stale: Atomic<bool>,
    /// A [`Refresh`] is queued or running.
    refreshing: Atomic<bool>,
}

/// What a query of the device found: LID, LMC, whether the port has an SMI, and the MAC if
/// the port's netdev could be read (a driver can be between two netdevs).
struct Queried(u32, u8, bool, Option<[u8; 6]>);

/// Queries port `port` of `dev`.
///
/// # Safety
///
/// `dev` is a registered device.
unsafe fn query(dev: *mut IbDevice, port: u32) -> Result<Queried> {
    let (mut lid, mut lmc, mut has_smi) = (0u32, 0u8, 0u8);
    // SAFETY: `dev` is registered (caller's promise).
    kernel::error::to_result(unsafe {
        rmad_shim_query_port(dev, port, &mut lid, &mut lmc, &mut has_smi)
    })?;
    let mut mac = [0u8; 6];
    // SAFETY: As above; `mac` has room for a MAC address.
    let read = unsafe { rmad_shim_port_mac(dev, port, mac.as_mut_ptr()) } == 0;
    Ok(Queried(lid, lmc, has_smi != 0, read.then_some(mac)))
}

/// `mac` in the low 48 bits of a `u64`.
fn pack_mac(mac: [u8; 6]) -> u64 {
    mac.iter().fold(0u64, |v, b| (v << 8) | u64::from(*b))
}

impl Attrs {
    /// The attributes of port `port` of `dev` now.
    ///
    /// # Safety
    ///
    /// `dev` is a registered device.
    pub(crate) unsafe fn new(dev: *mut IbDevice, port: u32) -> Result<Self> {
        // SAFETY: Caller's promise.
        let q = unsafe { query(dev, port) }?;
        let this = Self {
            lid_lmc: Atomic::new(0),
            // A port without a netdev (plain InfiniBand) keeps a zero MAC, which it never
            // needs.
            mac: Atomic::new(0),
            has_smi: q.2,
            // An event between this query and the event handler's registration would be
            // lost: the port calls `attrs_changed` once it is open.
            stale: Atomic::new(false),
            refreshing: Atomic::new(false),
        };
        this.store(&q);
        Ok(this)
    }

    /// Stores what a query found.
    fn store(&self, q: &Queried) {
        let lid = q.0 & 0xffff;
        self.lid_lmc.store((lid << 8) | u32::from(q.1), Release);
        // A MAC that could not be read keeps the last one (a zero MAC would make a RoCE port
        // look like an InfiniBand one).
        if let Some(mac) = q.3 {
            self.mac.store(pack_mac(mac), Release);
        }
    }

    /// The port's attributes as the engine sees them.
    pub(crate) fn port_attr(&self) -> PortAttr {
        let v = self.lid_lmc.load(Acquire);
        PortAttr {
            has_smi: self.has_smi,
            has_cm: true,
            lid: u16::try_from(v >> 8).unwrap_or(0),
            lmc: u8::try_from(v & 0xff).unwrap_or(0),
        }
    }

    /// The port's MAC (zeros without a netdev).
    pub(crate) fn mac(&self) -> [u8; 6] {
        let v = self.mac.load(Acquire).to_be_bytes();
        let mut mac = [0u8; 6];
        mac.copy_from_slice(v.get(2..).unwrap_or(&[0; 6]));
        mac
    }
}

impl VerbsPort {
    /// The port's LID, LMC and MAC now, for debugfs.
    pub(crate) fn lid_lmc_mac(&self) -> (u16, u8, [u8; 6]) {
        let a = self.attrs.port_attr();
        (a.lid, a.lmc, self.attrs.mac())
    }

    /// A port event came: a [`Refresh`] queries the device again, unless one is queued or
    /// running already (it sees this event too). Process context (ib_core's event work).
    pub(crate) fn attrs_changed(&self) {
        self.attrs.stale.store(true, Release);
        if self.attrs.refreshing.xchg(true, Acquire) {
            return;
        }
        let queued = Arc::pin_init(
            pin_init!(Refresh {
                port: self.arc(),
                work <- new_work!("Refresh::work"),
            }),
            GFP_KERNEL,
        )
        .map(|r| self.queue_resolution(r));
        if queued != Ok(true) {
            // Out of memory: the next port event tries again.
            self.attrs.refreshing.store(false, Release);
        }
    }

    /// Queries the device again if a port event came since the last query. Process context,
    /// no rmad lock held.
    pub(crate) fn refresh_attrs(&self) {
        while self.attrs.stale.xchg(false, Acquire) {
            let port = u32::from(self.port);
            // SAFETY: `with_device` holds a registration reference on `dev` across the call.
            match self.with_device(|dev| unsafe { query(dev, port) }) {
                Some(Ok(q)) => self.attrs.store(&q),
                // Closed meanwhile: nothing needs the attributes any more.
                None => return,
                // Tried again at the next event.
                Some(Err(_)) => {
                    self.attrs.stale.store(true, Release);
                    return;
                }
            }
        }
    }
}

/// A query of a port's attributes after a port event, on the port's resolution queue.
#[pin_data]
pub(crate) struct Refresh {
    port: Arc<VerbsPort>,
    #[pin]
    work: Work<Refresh>,
}

impl_has_work! {
    impl HasWork<Self> for Refresh { self.work }
}

impl WorkItem for Refresh {
    type Pointer = Arc<Refresh>;

    fn run(this: Arc<Refresh>) {
        let port = &this.port;
        loop {
            port.refresh_attrs();
            port.attrs.refreshing.store(false, Release);
            // An event after the last query but before the store above queued no Refresh:
            // take it on, unless another Refresh did.
            if !port.attrs.stale.load(Acquire) || port.attrs.refreshing.xchg(true, Acquire) {
                break;
            }
        }
        // Transmissions waiting for the new attributes go now.
        port.kick();
    }
}
