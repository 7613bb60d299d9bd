// SPDX-License-Identifier: GPL-2.0

//! `lb0`: a loopback fabric that the test flavour offers to the C API as a device, so that C
//! clients, the C API's suites and the stress driver run without hardware. Port 1 is free for
//! clients; on port 2 a responder answers every GET and SET of class 0x04 (PerformanceMgmt).

use crate::{
    capi::devices::{
        self,
        Registration, //
    },
    engine::{
        agent::{
            Agent,
            RecvHandler,
            SendHandler, //
        },
        send::{
            SendBuf,
            SendCompletion,
            SendHandle, //
        },
        transport::RecvMad,
    },
    mad::wire::{
        self,
        MadHdr, //
    },
    testing::{
        reg,
        register_gsi,
        respond,
        Env, //
    },
};
use kernel::{
    prelude::*,
    sync::Arc, //
};

/// The device name C clients pass.
pub(crate) const NAME: &CStr = c"lb0";

/// The port on which [`Lb0`]'s responder answers.
const RESPONDER_PORT: u8 = 2;

/// The device, while it is offered; dropping it withdraws the device (so that no new agent
/// finds it), unregisters the responder and shuts the fabric down, in that order.
pub(crate) struct Lb0 {
    /// The device's entry in the C API's registry; `None` once withdrawn.
    registration: Option<Registration>,
    /// The responder on port 2.
    responder: Arc<Agent>,
    /// The engine and fabric; dropped last.
    _env: Env,
}

impl Lb0 {
    /// Makes the fabric, starts the responder and offers the device to the C API.
    pub(crate) fn new() -> Result<Self> {
        let env = Env::new()?;
        let responder = register_gsi(
            &env.engine,
            &env.transport,
            RESPONDER_PORT,
            &Arc::new(Responder, GFP_KERNEL)?,
            Some(reg(wire::IB_MGMT_CLASS_PERF_MGMT)),
        )?;
        let registration =
            match devices::register(NAME, 2, env.engine.clone(), env.transport.clone()) {
                Ok(r) => r,
                Err(e) => {
                    let _ = responder.unregister();
                    return Err(e);
                }
            };
        Ok(Self {
            registration: Some(registration),
            responder,
            _env: env,
        })
    }
}

impl Drop for Lb0 {
    fn drop(&mut self) {
        // Agents that C clients left registered keep the engine alive through their own
        // references.
        drop(self.registration.take());
        let _ = self.responder.unregister();
    }
}

/// Answers every GET of class 0x04 on `lb0` port 2, recording nothing.
struct Responder;

impl SendHandler for Responder {
    fn send_done(&self, _agent: &Arc<Agent>, buf: SendBuf, _wc: SendCompletion) {
        drop(buf);
    }
}

impl RecvHandler for Responder {
    fn recv(&self, agent: &Arc<Agent>, send: Option<&SendHandle>, mad: RecvMad) {
        if let (None, Ok(hdr)) = (send, MadHdr::parse(&mad.mad)) {
            if !hdr.is_response() {
                let _ = respond(agent, &hdr, &mad);
            }
        }
    }
}
