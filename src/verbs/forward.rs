// SPDX-License-Identifier: GPL-2.0

//! The responder role on a verbs port: unsolicited MADs for rmad's agents.
//!
//! Requests arrive at QP1 of the port, which ib_core's MAD layer owns. For each agent that
//! registers a class and methods, rmad registers an agent of its own in ib_core for exactly
//! that class, version, OUI and methods (`rmad_shim_forward_start`); what ib_core routes to it
//! is handed to the engine like a MAD of the private QP, and the engine routes it to the rmad
//! agent. ib_core's registration rules apply unchanged: a class and method that ib_core or one
//! of its clients already serves is refused, with ib_core's error, and so is the rmad agent's
//! registration. The agent answers from the private QP (see [`Agent::reply_address`]).
//!
//! [`Agent::reply_address`]: crate::engine::agent::Agent::reply_address

use super::{
    rmad_shim_forward_start,
    rmad_shim_forward_stop,
    VerbsPort, //
};
use crate::mad::{
    QpType,
    RegReq, //
};
use core::ffi::c_void;
use kernel::prelude::*;

/// The forwarding agents of a port.
///
/// # Invariants
///
/// Each pointer in `live` was returned by `rmad_shim_forward_start` for this port and is
/// stopped exactly once, after it leaves `live` (by whoever removed it). Once `closed` is set,
/// `live` stays empty.
pub(crate) struct Forwards {
    closed: bool,
    next_key: u64,
    live: KVec<(u64, *mut c_void)>,
}

impl Forwards {
    /// None yet.
    pub(super) const fn new() -> Self {
        // INVARIANT: Nothing is live.
        Self {
            closed: false,
            next_key: 1,
            live: KVec::new(),
        }
    }
}

impl VerbsPort {
    /// [`Transport::forward`] for a verbs port: an ib_core agent on QP1 for `reg`.
    pub(super) fn start_forward(&self, qp: QpType, reg: &RegReq) -> Result<u64> {
        // ib_core's QP0 is for the subnet manager's traffic only on InfiniBand; rmad's
        // private QP is a UD QP that cannot answer from QP0.
        if qp != QpType::Gsi {
            return Err(EPROTONOSUPPORT);
        }
        let mut f = self.forwards.lock();
        if f.closed {
            return Err(ENODEV);
        }
        f.live.reserve(1, GFP_KERNEL)?;
        let ctx = core::ptr::from_ref(self).cast_mut().cast::<c_void>();
        let port = u32::from(self.port);
        let mask = reg.methods.to_le_bytes();
        let (lo, hi) = mask.split_at(8);
        let lo = u64::from_le_bytes(lo.try_into().map_err(|_| EINVAL)?);
        let hi = u64::from_le_bytes(hi.try_into().map_err(|_| EINVAL)?);
        let fwd = self
            .with_device(|dev| {
                // SAFETY: `with_device` holds a registration reference on `dev`. `ctx` stays
                // valid while the forward lives: it is stopped (below, or in `close`) before
                // the port is dropped, and agents keep the port alive.
                unsafe {
                    rmad_shim_forward_start(
                        dev,
                        port,
                        ctx,
                        reg.mgmt_class,
                        reg.class_version,
                        reg.oui.as_ptr(),
                        lo,
                        hi,
                    )
                }
            })
            .ok_or(ENODEV)?;
        let fwd = kernel::error::from_err_ptr(fwd)?;
        let key = f.next_key;
        f.next_key = key.wrapping_add(1).max(1);
        // INVARIANT: Room was reserved; the port is open (checked under the same lock).
        f.live
            .push_within_capacity((key, fwd))
            .map_err(|_| ENOMEM)?;
        Ok(key)
    }

    /// [`Transport::stop_forwarding`] for a verbs port.
    ///
    /// The forward leaves the list under the lock and is stopped after it is released:
    /// stopping waits for a receive in progress, whose handler may itself start or stop a
    /// forward on this port (as in C, where `ib_unregister_mad_agent` waits with no
    /// registration lock held).
    pub(super) fn stop_forward(&self, key: u64) {
        let fwd = {
            let mut f = self.forwards.lock();
            let Some(i) = f.live.iter().position(|(k, _)| *k == key) else {
                return;
            };
            f.live.remove(i).ok()
        };
        if let Some((_, fwd)) = fwd {
            // SAFETY: `fwd` left `live` just now, so nothing else stops it: stopped once
            // (type invariant).
            unsafe { rmad_shim_forward_stop(fwd) };
        }
    }

    /// Stops every forward for good (the port is closing). As in [`VerbsPort::stop_forward`],
    /// the stops wait with the lock released.
    pub(super) fn stop_all_forwards(&self) {
        let live = {
            let mut f = self.forwards.lock();
            // INVARIANT: Closed, and `live` is empty from here on.
            f.closed = true;
            core::mem::replace(&mut f.live, KVec::new())
        };
        for (_, fwd) in live {
            // SAFETY: As in `stop_forward`: each left `live` once.
            unsafe { rmad_shim_forward_stop(fwd) };
        }
    }
}
