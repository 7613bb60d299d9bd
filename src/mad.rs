// SPDX-License-Identifier: GPL-2.0

//! The MAD layer's pure parts: no kernel types, no allocation, no locks.
//!
//! Everything below uses only `core`, so the same files are compiled into the kernel module
//! and into the host tests (`tests/host`), which check them exhaustively:
//!
//! - [`wire`]: the MAD wire format and the C layer's helper functions over byte buffers;
//! - [`state`]: the 7.3 send state machine, as one transition function;
//! - [`retry`]: the retry rules a client can opt into beyond 7.3's (deadline, backoff, one-shot
//!   modify), as one function;
//! - [`rmpp`]: RMPP reassembly and the send window, as sans-IO state machines;
//! - [`address`] and [`registration`]: the value types every layer passes around (where a MAD
//!   goes, what an agent registers).

// Explicit paths: the host tests load this file through `#[path]`, where a plain `mod` would
// be looked up elsewhere.
#[path = "mad/address.rs"]
pub(crate) mod address;
#[path = "mad/registration.rs"]
pub(crate) mod registration;
#[path = "mad/retry.rs"]
pub(crate) mod retry;
// The send window (rmpp/send.rs) waits for segmented sends; only the host tests use it yet.
#[allow(dead_code)]
#[path = "mad/rmpp.rs"]
pub(crate) mod rmpp;
#[path = "mad/state.rs"]
pub(crate) mod state;
// The wire module keeps the C header's whole constant set for API parity, used or not.
#[allow(dead_code)]
#[path = "mad/wire.rs"]
pub(crate) mod wire;

pub(crate) use address::{
    Address,
    Gid,
    GrhAttr, //
};
pub(crate) use registration::{
    QpType,
    RegReq,
    HI_TID_MAX, //
};
