// SPDX-License-Identifier: GPL-2.0

//! A peer of rmad's private QP (`src/testing/peer.c`): a UD QP of its own on a verbs port
//! that sends datagrams of any length and content, as a peer on the fabric that learnt rmad's
//! QP number could. Suite `rmad_peer` uses it to send rmad what no MAD layer should take.

use crate::{
    mad::Gid,
    verbs::{
        IbDevice,
        VerbsPort, //
    },
};
use core::ffi::c_void;
use kernel::{
    ffi::c_int,
    prelude::*, //
};

extern "C" {
    fn rmad_test_peer_open(dev: *mut IbDevice, port: u32, sgid_index: u8) -> *mut c_void;
    fn rmad_test_peer_send(
        peer: *mut c_void,
        dqpn: u32,
        dgid: *const u8,
        data: *const c_void,
        len: u32,
    ) -> c_int;
    fn rmad_test_peer_close(peer: *mut c_void);
}

/// The peer's QP; dropping it destroys it. The test drops it before its device goes away.
///
/// # Invariants
///
/// The pointer is a peer returned by `rmad_test_peer_open`, not closed yet.
pub(crate) struct Peer(*mut c_void);

impl Peer {
    /// A peer on `port`, sending from its GID `sgid_index`; `None` if the device refused.
    pub(crate) fn open(port: &VerbsPort, sgid_index: u8) -> Option<Self> {
        let num = u32::from(port.port);
        // SAFETY: `with_device` holds a registration reference on `dev` across the call.
        let p = port.with_device(|dev| unsafe { rmad_test_peer_open(dev, num, sgid_index) })?;
        // INVARIANT: A non-null result is an open peer.
        (!p.is_null()).then_some(Self(p))
    }

    /// Sends `data` (at most 512 bytes) to QP `dqpn` at GID `dgid` and waits for its send
    /// completion.
    pub(crate) fn send(&self, dqpn: u32, dgid: &Gid, data: &[u8]) -> Result {
        let len = u32::try_from(data.len()).map_err(|_| EINVAL)?;
        // SAFETY: The peer is open (type invariant); `dgid` has 16 bytes and `data` `len`.
        kernel::error::to_result(unsafe {
            rmad_test_peer_send(self.0, dqpn, dgid.as_ptr(), data.as_ptr().cast(), len)
        })
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        // SAFETY: The peer is open (type invariant); it is closed once, here.
        unsafe { rmad_test_peer_close(self.0) };
    }
}
