// SPDX-License-Identifier: GPL-2.0

//! A send's record and the values that point at it, generic over the agent the send belongs
//! to ([`RecordOwner`]); `src/engine/send.rs` names them for the engine's agent.
//!
//! - `body.rs`: the MAD's bytes, the RMPP payload and the body the client fills in;
//! - `rec.rs`: the record, one object of rmad's slab cache per send;
//! - `state.rs`: what the agent keeps of the send under its lock;
//! - `refs.rs`: the counted references of the record, the owner of its body, a transport's
//!   hold of its transmission and the trees' view of it;
//! - `buf.rs`: the client's buffer and the handle of an outstanding send.
//!
//! The files import each other in this order only (`make lint`, `check-imports.py`).

mod body;
mod buf;
mod owner;
mod rec;
mod refs;
mod state;

pub(crate) use body::{
    MadInit,
    SegSend,
    Segments,
    SendBody,
    TxDest, //
};
pub(crate) use buf::{
    SendBuf,
    SendCompletion,
    SendHandle, //
};
pub(crate) use owner::RecordOwner;
pub(crate) use rec::SendRecord;
pub(crate) use refs::{
    BodyBox,
    SendRef,
    TxQueue,
    TxRef, //
};
pub(crate) use state::{
    RecordState,
    SendTrace, //
};
