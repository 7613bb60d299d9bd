// SPDX-License-Identifier: GPL-2.0

//! The test flavour: everything `make test`, `make run` and `make bench` load that users do
//! not (Kbuild `RMAD_TEST=1`, which sets `--cfg rmad_test`; the crate root declares this
//! module behind that one gate).
//!
//! - [`flavour`]: the module parameters and what they start, held by the crate root's one
//!   gated field.
//! - Worlds and tools of the suites: [`allocs`] (the slab allocations of a piece of code,
//!   counted), [`env`] (an engine and loopback fabric per test, waits),
//!   [`recorder`] (handlers that record every call), [`requests`] (the MADs tests send),
//!   [`race`] (cancel against the event that decides a send), [`capi_client`] (a C client of
//!   the exported API), [`atomic_calls`] (that API from a timer and an hrtimer),
//!   [`ib_responder`] (a responder in ib_core's own MAD layer), [`ib_requester`] (a requester
//!   there, counting what it receives), [`peer`] (a UD QP that sends rmad's private QP
//!   anything).
//! - [`loopback`]: the software fabric, a transport that needs no hardware; [`lb0`] offers
//!   one to the C API.
//! - [`cases`]: the table-driven cases shared with the host tests; [`suites`]: the KUnit
//!   suites run at load.
//! - Drivers started from module parameters or debugfs ([`control`]): [`demo`] (`make run`),
//!   [`bench`] (`make bench`), [`stress`], [`scale`], [`traced_sends`], [`fabric`] (the
//!   two-node checks) and [`removal`] (sends outstanding while a device goes away).

pub(crate) mod allocs;
pub(crate) mod atomic_calls;
pub(crate) mod bench;
pub(crate) mod capi_client;
pub(crate) mod cases;
pub(crate) mod control;
pub(crate) mod demo;
pub(crate) mod env;
pub(crate) mod fabric;
// The test flavour's `declare_module!`, which replaces the production one at the crate root.
#[macro_use]
pub(crate) mod flavour;
pub(crate) mod ib_requester;
pub(crate) mod ib_responder;
pub(crate) mod lb0;
pub(crate) mod loopback;
pub(crate) mod peer;
pub(crate) mod race;
pub(crate) mod recorder;
pub(crate) mod removal;
pub(crate) mod requests;
pub(crate) mod scale;
pub(crate) mod stress;
pub(crate) mod suites;
pub(crate) mod traced_sends;

pub(crate) use env::{
    block_queue,
    post,
    reg,
    register_gsi,
    rxe_agent,
    sleep_ms,
    wait_for,
    wait_state,
    Env, //
};
pub(crate) use flavour::Flavour;
pub(crate) use race::{
    race_cancel,
    RaceOutcome, //
};
pub(crate) use recorder::{
    wait_locked,
    Behaviour,
    Call,
    Recorder,
    WAIT_MS, //
};
pub(crate) use requests::{
    request,
    respond,
    rxe_request, //
};
