// SPDX-License-Identifier: GPL-2.0

//! What a send's record needs of the agent it belongs to.
//!
//! A record names its agent, and the agent holds its records in its queues: the two types
//! refer to each other. The record's types are generic over the agent's ([`RecordOwner`]), so
//! that the files of one do not import the files of the other; `src/engine/send.rs` names them
//! for the engine's agent.

use kernel::sync::LockedBy;

/// The agent a send buffer is created on, as its record sees it.
pub(crate) trait RecordOwner: Send + Sync + Sized + 'static {
    /// What the agent's lock protects.
    type Locked;

    /// What the agent keeps of each of its sends, under its lock: its post, its state, its
    /// queue and the body while the engine owns it.
    type State: Default;

    /// A new record's state, locked by this agent's lock.
    fn new_state(&self) -> LockedBy<Self::State, Self::Locked>;

    /// A buffer counted against this agent at its creation is gone (`ib_free_send_mad`).
    fn buffer_freed(&self);
}
