// SPDX-License-Identifier: GPL-2.0

//! The interface between the agent engine and the transports that carry MADs.
//!
//! A transport owns one or more ports. The engine hands it a [`SendWr`] to transmit, under the
//! agent lock (so a transport's own lock always nests inside agent locks, like the C layer's QP
//! send-queue lock), and the transport reports back asynchronously, from its own completion
//! context, with [`Agent::send_completed`](crate::engine::agent::Agent::send_completed) for each
//! transmission and [`Engine::receive`](crate::engine::agent::Engine::receive) for each received MAD.
//! The transports are the verbs transport ([`crate::verbs`]) and, in the test flavour, the
//! loopback fabric (`src/testing/loopback.rs`).

pub(crate) use super::received::{
    GrhFields,
    LinkHdr,
    RecvMad,
    RecvWc, //
};
use crate::{
    engine::{
        record::{
            BodyBox,
            RecordOwner, //
        },
        rmpp_budget::PortBudget,
    },
    mad::{
        Address,
        Gid,
        QpType,
        RegReq, //
    },
};
use kernel::{
    interrupt::LocalInterruptDisabled,
    prelude::*,
    sync::Arc, //
};

/// What the engine needs to know about a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PortAttr {
    /// The port has a subnet management QP (QP0).
    pub(crate) has_smi: bool,
    /// The port has a general services QP (QP1) with communication management.
    pub(crate) has_cm: bool,
    /// Base LID of the port.
    pub(crate) lid: u16,
    /// LID mask control: the port answers to `2^lmc` consecutive LIDs.
    pub(crate) lmc: u8,
}

/// One transmission handed to a transport, under the agent's lock. A transport that queues it
/// keeps what it needs with the transmission's hold
/// ([`TxRef::take`](crate::engine::record::TxRef::take) on `body`,
/// [`TxRef::set_dest`](crate::engine::record::TxRef::set_dest)), and reads the MAD through
/// that hold when it hands it to the device: nobody writes the MAD meanwhile, and the
/// transport needs neither the agent's lock nor its state.
pub(crate) struct SendWr<'a, A: RecordOwner> {
    /// The send's body: its MAD ([`BodyBox::mad`]) and record ([`BodyBox::rec`]), the one to
    /// name in the completion.
    pub(crate) body: &'a BodyBox<A>,
    /// Destination.
    pub(crate) ah: Address,
    /// Destination QP number.
    pub(crate) remote_qpn: u32,
    /// Source QP number (0 for SMI agents, 1 for GSI agents).
    #[cfg_attr(
        not(rmad_test),
        expect(dead_code, reason = "the loopback fabric (test flavour) reads it")
    )]
    pub(crate) src_qpn: u32,
    /// P_Key index: its entry of the port's P_Key table must be valid.
    pub(crate) pkey_index: u16,
    /// The post of the send, to name in the completion.
    pub(crate) gen: u64,
    /// [`Transport::check_send`] passed for this destination and P_Key index just before the
    /// agent's lock was taken (a post's own transmission): the transport need not check again.
    pub(crate) checked: bool,
    /// Local interrupts are off (the agent's lock is held): the transport's own interrupt-safe
    /// locks are taken without turning them off again, which costs a post as much as the rest
    /// of its locking on an emulated CPU.
    pub(crate) irqs_off: &'a LocalInterruptDisabled,
}

/// What [`Transport::post_send`] did with a transmission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Handed {
    /// The device has it.
    Device,
    /// It waits in the transport, which reports it when the device gets it.
    Queued,
}

/// A carrier of MADs, for agents of type `A`.
pub(crate) trait Transport<A: RecordOwner>: Send + Sync {
    /// The attributes of `port`, or `None` if the transport has no such port.
    fn port_attr(&self, port: u8) -> Option<PortAttr>;

    /// The device this transport is (part of), as the engine tells devices apart: agents
    /// are registered, and MADs routed, per port of each device. Its address: the same for
    /// every port of the device, and distinct from any other live device's.
    fn device(&self) -> *const ();

    /// Entry `index` of the GID table of `port`.
    fn gid(&self, port: u8, index: u8) -> Option<Gid>;

    /// Entry `index` of the P_Key table of `port`, if the table has it and it is valid (a
    /// partition key with some of its low 15 bits set).
    #[cfg_attr(
        not(rmad_test),
        expect(
            dead_code,
            reason = "the verbs port reads its table itself when it queues"
        )
    )]
    fn pkey(&self, port: u8, index: u16) -> Option<u16>;

    /// The index of `gid` in the GID table of `port`, searching the whole table (its first
    /// 256 entries: an address names its source GID with a `u8`). The default asks
    /// [`Transport::gid`] for each entry. Process context.
    fn find_gid(&self, port: u8, gid: &Gid) -> Option<u8> {
        (0..=u8::MAX).find(|&i| self.gid(port, i).as_ref() == Some(gid))
    }

    /// The hop limit of an answer sent from GID `sgid_index` of `port` to `dgid`, as
    /// `ib_init_ah_attr_from_wc` sets it: 0xFF, or on RoCE the route's. Process context.
    fn reply_hop_limit(&self, _port: u8, _sgid_index: u8, _dgid: &Gid) -> Result<u8> {
        Ok(0xff)
    }

    /// Transmits `wr` from `port`: hands it to the device now, or queues it for later (a
    /// transport that must wait for something first: an address handle to make, room in the
    /// send queue), and says which. Called with the sending agent's lock held: must not sleep
    /// or call back into the agent. An error means nothing was transmitted and no completion
    /// will be reported. A queued transmission is reported with
    /// [`Agent::handed_over`](crate::engine::agent::Agent::handed_over) when the device gets it.
    fn post_send(&self, port: u8, wr: SendWr<'_, A>) -> Result<Handed>;

    /// Whether `port` can carry a send to `ah` with `pkey_index` now: the error its device
    /// would give the work request otherwise. A post asks before it takes the agent's lock
    /// (the check may take the transport's own locks and read the device's tables), and
    /// passes [`SendWr::checked`]; any context. Nothing to check by default.
    fn check_send(&self, _port: u8, _ah: &Address, _pkey_index: u16) -> Result {
        Ok(())
    }

    /// The device's name, for diagnostics.
    fn name(&self) -> &CStr;

    /// The reassembly budget that the kernel-RMPP agents of `port` share
    /// (`engine/rmpp_budget.rs`), or `None` if the transport has no such port.
    fn rmpp_budget(&self, port: u8) -> Option<Arc<PortBudget>>;

    /// Makes the unsolicited MADs that `reg` selects, arriving at `port`'s QP `qp`, reach the
    /// engine, and returns a key for [`Transport::stop_forwarding`]. A transport that hands
    /// every MAD to rmad anyway needs nothing (the default). One whose device has a MAD layer
    /// of its own asks it for them, and that layer may refuse (a class and method it or one of
    /// its clients serves already): registration then fails with its error. Process context.
    fn forward(&self, _port: u8, _qp: QpType, _reg: &RegReq) -> Result<u64> {
        Ok(0)
    }

    /// Stops what [`Transport::forward`] returned `key` for: when this returns, no MAD of it
    /// reaches the engine any more. Process context.
    fn stop_forwarding(&self, _key: u64) {}

    /// Prepares what sending to `ah` from `port` needs that may sleep (on RoCE, the
    /// destination's MAC from the neighbour tables), so that transmissions find it ready.
    /// Process context. A transport that needs nothing succeeds (the default).
    fn resolve(&self, _port: u8, _ah: &Address) -> Result {
        Ok(())
    }
}
