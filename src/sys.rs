// SPDX-License-Identifier: GPL-2.0

//! What rmad needs of the kernel that the 7.3 kernel crate does not offer, wrapped once each,
//! with its safety argument:
//!
//! - [`workqueue`] has owned workqueues, re-armable and cancellable delayed work;
//! - [`trace`] fires rmad's tracepoints (defined in C, where the trace macros expand);
//! - [`sched`] has `cond_resched`;
//! - [`memalloc`] has allocation scopes, for a C caller's `GFP_NOIO` and `GFP_NOFS`;
//! - [`slab`] has the slab cache that send records come from;
//! - [`rbtree`] has intrusive red-black trees, whose nodes live in their items (the kernel
//!   crate's allocate one per entry), [`fifo`] lists and [`buckets`] indexes through the same
//!   links.

pub(crate) mod buckets;
pub(crate) mod fifo;
pub(crate) mod memalloc;
pub(crate) mod rbtree;
pub(crate) mod sched;
pub(crate) mod slab;
pub(crate) mod trace;
pub(crate) mod workqueue;
