// SPDX-License-Identifier: GPL-2.0

//! The RMPP transfers a kernel-RMPP agent is reassembling ([`Recvs`]), their bounds and what
//! they count: the data that `rmpp_recv.rs` works on under the agent's RMPP mutex. A file of
//! its own, which imports nothing of the agent, so that the agent names its transfers
//! without a circle of imports.

use crate::{
    engine::{
        received::RecvWc,
        rmpp_budget::PortBudget, //
    },
    mad::{
        rmpp::recv::Transfer,
        wire::MadHdr,
        Address,
        Gid, //
    },
};
use kernel::{
    prelude::*,
    rbtree::RBTree,
    sync::Arc, //
};

/// Transfers one agent reassembles at a time; a FIRST segment beyond them draws STOP(RESX).
pub(crate) const MAX_TRANSFERS: usize = 32;
/// Bytes of messages one agent holds while reassembling them, all transfers together; a
/// transfer that would go beyond is ended with STOP(RESX). 16 MiB: sixteen 1 MiB tables.
pub(crate) const MAX_BYTES: usize = 16 << 20;
/// A transfer without a new segment for this long ends with ABORT(T2L) to its sender (C ends
/// every transfer 40 s after its first segment, however it progresses).
pub(crate) const INACTIVITY_MS: i64 = 10_000;
/// How long a completed transfer is remembered, to repeat its final ACK to a sender that
/// missed it (C's `cleanup_work`, 10 s).
pub(crate) const LINGER_MS: i64 = 10_000;
/// Completed transfers remembered at a time; beyond, the oldest is forgotten first (C keeps
/// every one for 10 s, so a flood of one-segment transfers holds memory without bound).
pub(crate) const MAX_LINGERING: usize = 128;
/// Transfers one sender (source LID and GID) may have open on an agent at a time: one sender
/// cannot take every slot. Not keyed on the source QP number, which a peer changes at will
/// (every UD QP it creates has another one).
pub(crate) const MAX_PER_SENDER: usize = 8;
/// The longest a transfer may take however it progresses: a sender trickling segments cannot
/// hold a slot for ever. Five minutes: a megabyte over a lossy link takes well under one.
pub(crate) const MAX_LIFETIME_MS: i64 = 300_000;

/// What tells two transfers apart (C's `find_rmpp_recv` key, and the sender's GID).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Key {
    pub(super) tid: u64,
    pub(super) class: u8,
    pub(super) class_version: u8,
    pub(super) method: u8,
    pub(super) src_qp: u32,
    pub(super) slid: u16,
    pub(super) sgid: Gid,
}

impl Key {
    /// The key of a segment with header `hdr` that arrived as `wc`.
    pub(super) fn of(hdr: &MadHdr, wc: &RecvWc) -> Self {
        Self {
            tid: hdr.tid,
            class: hdr.mgmt_class,
            class_version: hdr.class_version,
            method: hdr.method,
            src_qp: wc.src_qp,
            slid: wc.slid,
            sgid: wc.grh.map_or([0; 16], |(sgid, _)| sgid),
        }
    }
}

/// One transfer.
///
/// # Invariants
///
/// While `transfer` is active, `buf` holds the class header of segment 1 and room for the data
/// of every segment stored, and `charged` is `buf`'s capacity, counted in [`Recvs::bytes`];
/// once complete, `buf` is empty and `charged` 0.
pub(super) struct Rx {
    pub(super) transfer: Transfer,
    /// The message: segment 1's header, then the segments' data at their offsets (kvmalloc'ed:
    /// a message may be megabytes).
    pub(super) buf: KVVec<u8>,
    /// Bytes counted for `buf` in [`Recvs::bytes`].
    pub(super) charged: usize,
    /// How segment 1 arrived: the message's receive completion, and where answers go.
    pub(super) wc: RecvWc,
    /// The address of the sender, for ACKs.
    pub(super) reply: Address,
    /// When the transfer expires (nanoseconds since the agent's epoch).
    pub(super) deadline_ns: i64,
    /// Whether the transfer is counted in [`Recvs::active`].
    pub(super) counted: bool,
    /// Whether the transfer is counted in the port's budget (a message of one segment,
    /// whole at once, is not).
    pub(super) port_counted: bool,
    /// Whether the transfer is complete and kept for repeat ACKs, counted in
    /// [`Recvs::lingering`].
    pub(super) lingering: bool,
    /// When segment 1 came: the transfer ends [`MAX_LIFETIME_MS`] later whatever its progress.
    pub(super) started_ns: i64,
}

/// The transfers of one agent, under its RMPP mutex.
///
/// # Invariants
///
/// `bytes` is the sum of the `charged` bytes of the transfers in `map`, at most [`MAX_BYTES`];
/// `active` counts the transfers in `map` whose `counted` is set (those not complete), at most
/// [`MAX_TRANSFERS`]. `port` holds, for this agent, every `charged` byte and one transfer for
/// each `port_counted` transfer in `map`.
pub(crate) struct Recvs {
    pub(super) map: RBTree<Key, KBox<Rx>>,
    /// What the agents of the port may hold together.
    pub(super) port: Arc<PortBudget>,
    pub(super) bytes: usize,
    pub(super) active: usize,
    /// The transfers in `map` whose `lingering` is set, at most [`MAX_LINGERING`].
    pub(super) lingering: usize,
    pub(super) stats: RmppStats,
}

/// What an agent's RMPP receive side did, for debugfs and the tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RmppStats {
    /// Messages reassembled and handed on.
    pub(crate) completed: u64,
    /// ACKs sent.
    pub(crate) acks: u64,
    /// STOPs and ABORTs sent.
    pub(crate) aborts: u64,
    /// Transfers refused or ended for the bounds (STOP(RESX)).
    pub(crate) refused: u64,
    /// Transfers ended by the inactivity timeout.
    pub(crate) expired: u64,
    /// Segments dropped without an answer.
    pub(crate) dropped: u64,
    /// Transfers being reassembled now, and the bytes they hold.
    pub(crate) active: u64,
    /// Bytes held now.
    pub(crate) bytes: u64,
    /// Transfers being reassembled now by every agent of the port.
    pub(crate) port_active: u64,
    /// Bytes held now by every agent of the port.
    pub(crate) port_bytes: u64,
    /// The most bytes this agent ever held at once.
    pub(crate) peak_bytes: u64,
    /// The most bytes the agents of the port ever held at once.
    pub(crate) port_peak_bytes: u64,
    /// Completed transfers remembered now.
    pub(crate) lingering: u64,
}

impl Recvs {
    /// No transfer, on a port whose budget is `port`.
    pub(crate) fn new(port: Arc<PortBudget>) -> Self {
        // INVARIANT: empty map, nothing counted, nothing charged to the port.
        Self {
            map: RBTree::new(),
            port,
            bytes: 0,
            active: 0,
            lingering: 0,
            stats: RmppStats::default(),
        }
    }

    /// Removes the transfer under `key`, uncounting what it held.
    pub(super) fn remove(&mut self, key: &Key) {
        if let Some(rx) = self.map.remove(key) {
            // INVARIANT: the transfer's charge and count leave with it, here and in the port.
            self.bytes = self.bytes.saturating_sub(rx.charged);
            self.port.put_bytes(rx.charged);
            if rx.port_counted {
                self.port.put_transfer();
            }
            if rx.counted {
                self.active = self.active.saturating_sub(1);
            }
            if rx.lingering {
                self.lingering = self.lingering.saturating_sub(1);
            }
        }
    }

    /// Open transfers of the sender of `key`: from its source LID and GID, whatever QP.
    pub(super) fn of_sender(&self, key: &Key) -> usize {
        self.map
            .iter()
            .filter(|(k, rx)| rx.counted && k.slid == key.slid && k.sgid == key.sgid)
            .count()
    }

    /// Forgets every transfer, giving the port back what they held.
    pub(super) fn release_all(&mut self) {
        for (_, rx) in self.map.iter() {
            self.port.put_bytes(rx.charged);
            if rx.port_counted {
                self.port.put_transfer();
            }
        }
        self.map = RBTree::new();
        // INVARIANT: nothing held, here or in the port.
        self.bytes = 0;
        self.active = 0;
        self.lingering = 0;
    }

    /// Makes room for one more completed transfer: forgets the one that would expire first.
    pub(super) fn evict_lingering(&mut self) {
        if self.lingering < MAX_LINGERING {
            return;
        }
        let oldest = self
            .map
            .iter()
            .filter(|(_, rx)| rx.lingering)
            .min_by_key(|(_, rx)| rx.deadline_ns)
            .map(|(k, _)| *k);
        if let Some(k) = oldest {
            self.remove(&k);
        }
    }
}

impl Drop for Recvs {
    /// An agent that goes away (a registration that failed, or the last reference dropped)
    /// gives the port back what its transfers held.
    fn drop(&mut self) {
        self.release_all();
    }
}
