// SPDX-License-Identifier: GPL-2.0

//! Devices the C API offers by name besides the RDMA devices of the verbs transport.
//!
//! `rmad_register_agent` names a device and a port. The names of RDMA devices are looked up in
//! [`crate::verbs`]; this registry holds the other transports a part of the module makes
//! available under a name of its own. The production module registers none; the test flavour
//! registers its loopback fabric as `lb0`, so that C clients (and the C API's own tests) can
//! run on it without hardware.

#![cfg_attr(
    not(rmad_test),
    allow(
        dead_code,
        reason = "the production module registers no software device; the test flavour does"
    )
)]

use crate::engine::{
    agent::{
        Agent,
        Engine, //
    },
    transport::Transport,
};
use kernel::{
    prelude::*,
    sync::Arc, //
};

/// A transport registered under a device name.
struct Named {
    /// The registration's identifier, so that [`Registration`] removes its own entry.
    id: u64,
    /// The device name C clients pass.
    name: &'static CStr,
    /// Ports 1..=`ports` of the device.
    ports: u8,
    /// The engine the device's agents share.
    engine: Arc<Engine>,
    /// The transport behind every port of the device.
    transport: Arc<dyn Transport<Agent>>,
}

/// What the registry holds, under its lock.
struct Registry {
    /// The registered devices, few: looked up by a scan.
    devices: KVec<Named>,
    /// The identifier of the next registration.
    next_id: u64,
}

kernel::sync::global_lock! {
    // SAFETY: Initialized by `init`, called once from the module initializer (through
    // `capi::Api::new`) before any other use.
    unsafe(uninit) static DEVICES: Mutex<Registry> = Registry {
        devices: KVec::new(),
        next_id: 0,
    };
}

/// Prepares the registry.
///
/// # Safety
///
/// Called exactly once, from the module initializer, before any other function of this module.
pub(super) unsafe fn init() {
    // SAFETY: The caller's promise: once, before any other use.
    unsafe { DEVICES.init() };
}

/// A device in the registry; dropping it removes the device (agents registered on it keep
/// their engine and transport alive through their own references).
pub(crate) struct Registration {
    id: u64,
}

/// Offers `transport` (with its `engine`) to the C API as ports 1..=`ports` of device `name`.
///
/// Fails with `EEXIST` when a device of that name is registered already.
pub(crate) fn register(
    name: &'static CStr,
    ports: u8,
    engine: Arc<Engine>,
    transport: Arc<dyn Transport<Agent>>,
) -> Result<Registration> {
    let mut g = DEVICES.lock();
    if g.devices
        .iter()
        .any(|d| d.name.to_bytes() == name.to_bytes())
    {
        return Err(EEXIST);
    }
    let id = g.next_id;
    g.next_id = id.checked_add(1).ok_or(ENOSPC)?;
    g.devices.push(
        Named {
            id,
            name,
            ports,
            engine,
            transport,
        },
        GFP_KERNEL,
    )?;
    Ok(Registration { id })
}

impl Drop for Registration {
    fn drop(&mut self) {
        let (removed, storage) = {
            let mut g = DEVICES.lock();
            let removed = match g.devices.iter().position(|d| d.id == self.id) {
                Some(i) => g.devices.remove(i).ok(),
                None => None,
            };
            // The last device takes the registry's storage with it, so that nothing is left
            // allocated when the module goes.
            let storage = g
                .devices
                .is_empty()
                .then(|| core::mem::replace(&mut g.devices, KVec::new()));
            (removed, storage)
        };
        // The engine and transport references go outside the lock: the last reference to an
        // engine drains its workqueues.
        drop(removed);
        drop(storage);
    }
}

/// The engine and transport of port `port` of the registered device `name`, if there is one.
pub(crate) fn find(name: &CStr, port: u8) -> Option<(Arc<Engine>, Arc<dyn Transport<Agent>>)> {
    let g = DEVICES.lock();
    g.devices
        .iter()
        .find(|d| d.name.to_bytes() == name.to_bytes() && (1..=d.ports).contains(&port))
        .map(|d| (d.engine.clone(), d.transport.clone()))
}
