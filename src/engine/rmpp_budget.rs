// SPDX-License-Identifier: GPL-2.0

//! What the kernel-RMPP agents of one port may hold together while they reassemble
//! (Documentation/behaviour.md §8.14): each agent is bounded on its own
//! (`agent/rmpp_recv.rs`), and a sender that spreads its transfers over several agents of a
//! port meets this bound too. The transport owns one [`PortBudget`] per port; the agents of
//! the port charge it.

use kernel::{
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
    },
};

/// Transfers the agents of one port reassemble at a time, all together: two agents' worth.
pub(crate) const PORT_MAX_TRANSFERS: u64 = 64;
/// Bytes the agents of one port hold while reassembling, all together: 32 MiB, two agents'
/// worth.
pub(crate) const PORT_MAX_BYTES: u64 = 32 << 20;

/// The reassembly budget of one port, shared by its kernel-RMPP agents.
///
/// # Invariants
///
/// `transfers` is at most [`PORT_MAX_TRANSFERS`]; `bytes` is at most [`PORT_MAX_BYTES`]: every
/// charge is checked ([`PortBudget::take_bytes`]), and the agents charge what they allocate.
pub(crate) struct PortBudget {
    transfers: Atomic<u64>,
    bytes: Atomic<u64>,
    /// The most `bytes` ever held at once.
    peak: Atomic<u64>,
}

impl PortBudget {
    /// A budget with nothing charged.
    pub(crate) fn new() -> Result<Arc<Self>> {
        // INVARIANT: nothing charged.
        Ok(Arc::new(
            PortBudget {
                transfers: Atomic::new(0),
                bytes: Atomic::new(0),
                peak: Atomic::new(0),
            },
            GFP_KERNEL,
        )?)
    }

    /// Adds `n` to `a` if the sum stays at most `max`; whether it did. A compare-and-exchange
    /// loop, so that the counter never exceeds `max`, even for a moment, when agents charge at
    /// once.
    fn charge(a: &Atomic<u64>, n: u64, max: u64) -> bool {
        let mut cur = a.load(Relaxed);
        loop {
            let Some(next) = cur.checked_add(n).filter(|v| *v <= max) else {
                return false;
            };
            match a.cmpxchg(cur, next, Relaxed) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// Takes `n` back from `a`, never below 0.
    fn uncharge(a: &Atomic<u64>, n: u64) {
        let mut cur = a.load(Relaxed);
        loop {
            match a.cmpxchg(cur, cur.saturating_sub(n), Relaxed) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }

    /// One more transfer, if the port has room for it.
    pub(crate) fn take_transfer(&self) -> bool {
        // INVARIANT: `charge` keeps `transfers` at most the bound.
        Self::charge(&self.transfers, 1, PORT_MAX_TRANSFERS)
    }

    /// A transfer ended.
    pub(crate) fn put_transfer(&self) {
        Self::uncharge(&self.transfers, 1);
    }

    /// `n` more bytes, if the port has room for them.
    pub(crate) fn take_bytes(&self, n: usize) -> bool {
        let n = u64::try_from(n).unwrap_or(u64::MAX);
        // INVARIANT: `charge` keeps `bytes` at most the bound.
        let taken = Self::charge(&self.bytes, n, PORT_MAX_BYTES);
        if taken {
            self.note_peak();
        }
        taken
    }

    /// Raises the high-water mark to what is held now.
    fn note_peak(&self) {
        let now = self.bytes.load(Relaxed);
        let mut peak = self.peak.load(Relaxed);
        while now > peak {
            match self.peak.cmpxchg(peak, now, Relaxed) {
                Ok(_) => return,
                Err(p) => peak = p,
            }
        }
    }

    /// `n` bytes given back.
    pub(crate) fn put_bytes(&self, n: usize) {
        Self::uncharge(&self.bytes, u64::try_from(n).unwrap_or(u64::MAX));
    }

    /// (transfers, bytes) charged now.
    pub(crate) fn figures(&self) -> (u64, u64) {
        (self.transfers.load(Relaxed), self.bytes.load(Relaxed))
    }

    /// The most bytes ever charged at once.
    pub(crate) fn peak_bytes(&self) -> u64 {
        self.peak.load(Relaxed)
    }
}
