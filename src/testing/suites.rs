// SPDX-License-Identifier: GPL-2.0

//! The KUnit suites that run when the test flavour loads (besides `rmad_fifo`, at the end of
//! the file it tests, and the KTAP suites the drivers print: `rmad_scale`, `rmad_stress_*`).
//!
//! | suite | what it proves | where |
//! | --- | --- | --- |
//! | `rmad_wire`, `rmad_state` | the shared tables of [`crate::testing::cases`] | [`tables`] |
//! | `rmad_engine` | registration and routing | [`engine`] |
//! | `rmad_handles` | the C API's handle table alone | [`handles`] |
//! | `rmad_unregister` | unregistration from inside handlers | [`unregister`] |
//! | `rmad_conformance` | Documentation/behaviour.md §6, on the loopback fabric | [`conformance`] |
//! | `rmad_devices` | two devices on one engine: registrations and matching per device | [`devices`] |
//! | `rmad_partitions` | P_Keys: a send reaches members of its partition only | [`partitions`] |
//! | `rmad_order` | a matched send's receive handler returns before its send handler runs | [`order`] |
//! | `rmad_races` | cancel racing the events that decide a send | [`races`] |
//! | `rmad_peer` | what a hostile peer sends rmad's private QP is dropped and counted | [`peer`] |
//! | `rmad_recv_rules` | receive-path rules of the C layer no other suite pins | [`recv_rules`] |
//! | `rmad_reply` | the reply address is `ib_init_ah_attr_from_wc`'s | [`reply`] |
//! | `rmad_rmpp` | kernel RMPP's receive side: reassembly, ACKs, aborts, bounds | [`rmpp`] |
//! | `rmad_rmpp_bounds` | what kernel RMPP's receive side may hold and remembers: transfers, bytes | [`rmpp_bounds`] |
//! | `rmad_rmpp_send` | kernel RMPP's send side: segments, windows, retries, aborts, cancel | [`rmpp_send`] |
//! | `rmad_rxe` | rmad agents on soft-RoCE `rxe0` | [`rxe`] |
//! | `rmad_capi` | the exported C API as a hostile or careless client uses it | [`capi`] |
//! | `rmad_allocs` | what a send costs the slab allocator, counted exactly | [`allocs`] |
//! | `rmad_tree` | the intrusive trees and lists of the agents' indexes alone | [`tree`] |
//! | `rmad_records` | a send's record, its references and its transmit queue | [`records`] |
//! | `rmad_retry` | the opt-in retry rules: deadline, backoff, one-shot modify | [`retry`] |

pub(crate) mod allocs;
pub(crate) mod capi;
pub(crate) mod conformance;
pub(crate) mod devices;
pub(crate) mod engine;
pub(crate) mod handles;
pub(crate) mod order;
pub(crate) mod partitions;
pub(crate) mod peer;
pub(crate) mod races;
pub(crate) mod records;
pub(crate) mod recv_rules;
pub(crate) mod reply;
pub(crate) mod retry;
pub(crate) mod rmpp;
pub(crate) mod rmpp_bounds;
pub(crate) mod rmpp_send;
pub(crate) mod rxe;
pub(crate) mod tables;
pub(crate) mod tree;
pub(crate) mod unregister;
