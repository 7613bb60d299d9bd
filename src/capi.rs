// SPDX-License-Identifier: GPL-2.0

//! The exported C API (`include/rmad.h`): what other kernel modules call.
//!
//! Rust symbols cannot be exported between out-of-tree modules, so the API is a set of
//! `extern "C"` functions (exported with `EXPORT_SYMBOL_GPL` by `src/capi/exports.c`), thin shells
//! around the Rust API. C sees agents and send buffers as opaque pointers; they are handles
//! from [`crate::capi::handles`], never addresses, so rmad never dereferences what a caller passes:
//! a NULL, stale or foreign value is simply not found and gets `-EINVAL`, and a handle stays
//! invalid forever once its object is gone.
//!
//! Each handle has a slot of its own: looking one up takes that slot's lock only, so calls on
//! different agents and buffers never contend. A send buffer's slot holds the buffer while the
//! client owns it; posting moves it to the engine and the send handler moves it back, so a
//! buffer's phase (owned, outstanding) is known without trusting the caller. Post, modify and
//! cancel run under the buffer's slot lock: the post a cancel acts on cannot change under it.
//!
//! # Files
//!
//! This file owns the tables and the agent's small calls; `types.rs` has the structures of the
//! header, `register.rs` registration, `send.rs` the send buffers, `recv.rs` the received
//! MADs, `unregister.rs` both unregistrations, `unload.rs` the client modules that unload,
//! `handles.rs` the handle tables and `devices.rs` the software devices offered by name.
//!
//! # Lock order
//!
//! A buffer's slot lock, then its agent's lock (post, modify, cancel). No rmad lock is held
//! while a client's handler runs.

mod compat;
pub(crate) mod devices;
pub(crate) mod handles;
mod recv;
mod register;
mod send;
mod types;
mod unload;
mod unregister;

#[cfg(rmad_test)]
pub(crate) use {
    recv::{
        deliver,
        rmad_free_recv_mad,
        rmad_keep_recv_mad,
        rmad_recv_buf_ah,
        rmad_recv_buf_mad, //
    },
    register::{
        rmad_register_agent,
        REGISTERED_DELAY_MS, //
    },
    send::{
        hold_buf_slot,
        rmad_cancel_mad,
        rmad_cancel_post,
        rmad_create_send_mad,
        rmad_free_send_mad,
        rmad_get_rmpp_segment,
        rmad_modify_mad,
        rmad_modify_post,
        rmad_post_send,
        rmad_post_send_mad,
        rmad_send_buf_context,
        rmad_send_buf_mad,
        rmad_send_buf_retries,
        rmad_send_buf_seg_count,
        rmad_send_buf_set,
        rmad_send_buf_set_retry,
        CREATE_GFP_SEEN, //
    },
    types::{
        RmadAh,
        RmadRecvWc,
        RmadRegReq,
        RmadSendWc, //
    },
    unload::{
        closing,
        module_going,
        set_code, //
    },
    unregister::{
        rmad_unregister_agent,
        rmad_unregister_agent_async, //
    },
};

use crate::{
    capi::{
        handles::{
            HandleTable,
            KIND_AGENT,
            KIND_BUF,
            KIND_RECV, //
        },
        register::CHandlers,
        unregister::{
            Pending,
            ReleaseCall, //
        },
    },
    engine::{
        agent::Agent,
        send::{
            BodyBox,
            SendRef, //
        },
        transport::Transport, //
    },
    mad::{
        retry::Rules,
        wire, //
    },
    sys::workqueue::OwnedQueue,
    verbs, //
};
use core::ffi::c_void;
use kernel::{
    ffi::{
        c_char,
        c_int, //
    },
    prelude::*,
    static_lock_class,
    sync::{
        atomic::{
            Acquire,
            Atomic,
            Release, //
        },
        Arc, //
    },
};

/// What an agent handle stands for.
pub(crate) struct CAgent {
    agent: Arc<Agent>,
    context: usize,
    /// Registered with `RMAD_DETACH_BUFFERS`: unregistration does not wait for the client's
    /// buffers.
    detach_buffers: bool,
    /// An unregistration has started (`rmad_unregister_agent`, for the length of the call,
    /// `rmad_unregister_agent_async`, or rmad's at the unload of the handlers' module): a
    /// second one is refused (`EINVAL`).
    closing: bool,
    /// The addresses of the send and receive handlers (0 for none), to find the agents whose
    /// handlers are in a module that unloads: rmad ends them if their client did not
    /// ([`unload`]).
    code: [usize; 2],
    /// The handlers, which that end silences.
    handlers: Arc<CHandlers>,
    /// The work item of the asynchronous unregistration, made at registration so that asking
    /// for it allocates nothing.
    pending: Arc<Pending>,
    /// What the asynchronous unregistration does once the agent is gone; set when it is asked
    /// for.
    release: Option<ReleaseCall>,
    /// The address of that release function (0 for none), kept until the slot is emptied:
    /// the slot stays until the release has returned, so that the unload of the module it is
    /// in waits for it ([`unload`]).
    release_at: usize,
}

impl CAgent {
    /// Whether code of this agent's client is at an address where `going` holds (a module
    /// that unloads): one of its handlers, or the release function of its asynchronous
    /// unregistration.
    fn has_code_where(&self, going: &impl Fn(usize) -> bool) -> bool {
        let [send, recv] = self.code;
        [send, recv, self.release_at]
            .into_iter()
            .any(|a| a != 0 && going(a))
    }
}

/// What a send-buffer handle stands for.
///
/// # Invariants
///
/// `body` is `Some` exactly while the client owns the buffer and the slot has taken the body
/// back ([`CBuf::absorb`]); while it is `None` the send is outstanding (or being posted, or its
/// completion is on its way back) and the engine owns the body, or the send handler has parked
/// it in the record for the slot to take (the client owns it again then). `rec` is the
/// buffer's record for its whole life.
pub(crate) struct CBuf {
    rec: SendRef,
    body: Option<BodyBox>,
    context: usize,
}

impl CBuf {
    /// Takes back the body that a completion parked in the record (`CHandlers::send_done`):
    /// every call on the buffer does this first, under the slot's lock, so a completion gives
    /// the buffer back with one store instead of a hold of that lock.
    fn absorb(&mut self) {
        if self.body.is_none() {
            self.body = BodyBox::unpark(&self.rec);
        }
    }
}

impl Drop for CBuf {
    /// A parked body is freed with its slot, like one the slot held.
    fn drop(&mut self) {
        self.absorb();
    }
}

/// The handle tables, made at load and dropped at unload.
#[pin_data]
pub(crate) struct Tables {
    /// Runs the unregistrations of `rmad_unregister_agent_async`; drained at [`exit`].
    unregistering: OwnedQueue,
    #[pin]
    agents: HandleTable<CAgent>,
    #[pin]
    bufs: HandleTable<CBuf>,
    #[pin]
    recvs: HandleTable<recv::CRecv>,
}

/// `RMAD_DETACH_BUFFERS` of `include/rmad.h` (`src/capi/exports.c` asserts the value): the
/// agent's unregistration does not wait for the send buffers its client still owns.
const RMAD_DETACH_BUFFERS: u32 = 1 << 31;

/// `RMAD_RETRY_BACKOFF` of `include/rmad.h` (asserted likewise): exponential backoff.
pub(crate) const RMAD_RETRY_BACKOFF: u32 = 1 << 30;

/// `RMAD_RETRY_ONE_SHOT` of `include/rmad.h` (asserted likewise): a modify sets one wait.
pub(crate) const RMAD_RETRY_ONE_SHOT: u32 = 1 << 29;

/// The retry rules that `flags` (`RMAD_RETRY_*`) and `deadline_ms` name; `EINVAL` for any
/// other bit of `flags`.
fn retry_rules(flags: u32, deadline_ms: u32) -> Result<Rules> {
    if flags & !(RMAD_RETRY_BACKOFF | RMAD_RETRY_ONE_SHOT) != 0 {
        return Err(EINVAL);
    }
    Ok(Rules {
        backoff: flags & RMAD_RETRY_BACKOFF != 0,
        one_shot_modify: flags & RMAD_RETRY_ONE_SHOT != 0,
        deadline_ms,
    })
}

/// The tables, between [`init`] and [`exit`].
///
/// # Invariants
///
/// Null, or a pointer from `KBox::into_raw` of pinned tables that live until [`exit`].
static TABLES: Atomic<*mut Tables> = Atomic::new(core::ptr::null_mut());

/// The C API while the module is loaded: dropping it stops watching client modules and drops
/// the handle tables.
pub(crate) struct Api(());

impl Api {
    /// Makes the handle tables and the device registry, and starts watching the unloads of
    /// client modules ([`unload`]).
    ///
    /// # Safety
    ///
    /// Called once, by the module initializer, before any other use of the C API or of the
    /// device registry ([`devices`]).
    pub(crate) unsafe fn new() -> Result<Self> {
        // SAFETY: The caller's promise: once, from the module initializer, first.
        unsafe { devices::init() };
        init()?;
        if let Err(e) = unload::watch() {
            exit();
            return Err(e);
        }
        Ok(Self(()))
    }
}

impl Drop for Api {
    fn drop(&mut self) {
        // No unload of a client module is being handled once this returns.
        unload::unwatch();
        exit();
    }
}

/// Makes the handle tables; called once, through [`Api::new`].
fn init() -> Result {
    let t = KBox::pin_init(
        try_pin_init!(Tables {
            unregistering: OwnedQueue::new_concurrent(c"rmad_unregister")?,
            agents <- HandleTable::new(KIND_AGENT, static_lock_class!()),
            bufs <- HandleTable::new(KIND_BUF, static_lock_class!()),
            recvs <- HandleTable::new(KIND_RECV, static_lock_class!()),
        }),
        GFP_KERNEL,
    )?;
    // SAFETY: The tables are never moved out of their allocation; `exit` frees them in place.
    let raw = KBox::into_raw(unsafe { Pin::into_inner_unchecked(t) });
    // INVARIANT: Published once, freed by `exit`.
    TABLES.store(raw, Release);
    Ok(())
}

/// Drops the tables and whatever handles are left. Called at unload (when [`Api`] drops), when
/// no client module is loaded (each holds a reference on rmad) and rmad's own completion work
/// has stopped.
fn exit() {
    // An unregistration that released its client may still be returning: its code is ours.
    if let Ok(t) = tables() {
        t.unregistering.flush();
    }
    let raw = TABLES.xchg(core::ptr::null_mut(), Acquire);
    if !raw.is_null() {
        // SAFETY: `raw` came from `KBox::into_raw` in `init` and is unpublished now; nothing can
        // use it any more (see above).
        drop(unsafe { KBox::from_raw(raw) });
    }
}

/// The tables, while the module is loaded.
fn tables() -> Result<&'static Tables> {
    let raw = TABLES.load(Acquire);
    if raw.is_null() {
        return Err(ENODEV);
    }
    // SAFETY: By the invariant of `TABLES` the tables live until `exit`, which runs only when
    // no caller of this API is left (see `exit`).
    Ok(unsafe { &*raw })
}

/// `ERR_PTR(e)`.
fn err_ptr(e: Error) -> *mut c_void {
    // An ERR_PTR is the negative errno reinterpreted as an address.
    core::ptr::without_provenance_mut(e.to_errno() as isize as usize)
}

/// A handle as the pointer C sees.
fn to_ptr(h: u64) -> *mut c_void {
    // Handles are below 2^63 and pointers are 64 bits wide on every architecture rmad builds for.
    core::ptr::without_provenance_mut(usize::try_from(h).unwrap_or(0))
}

/// The handle a C pointer carries.
fn from_ptr(p: *const c_void) -> u64 {
    // A pointer is at most 64 bits wide.
    u64::try_from(p.addr()).unwrap_or(0)
}

/// A context word as the pointer C gave.
fn ctx_ptr(c: usize) -> *mut c_void {
    core::ptr::with_exposed_provenance_mut(c)
}

/// An errno result as C's `int`.
fn code(r: Result) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// The agent behind a handle.
fn agent_of(h: *mut c_void) -> Result<Arc<Agent>> {
    tables()?.agents.with(from_ptr(h), |a| a.agent.clone())
}

/// The engine's agent behind the C handle `h` (test flavour: the suites read its counters).
#[cfg(rmad_test)]
pub(crate) fn engine_agent_of(h: *mut c_void) -> Result<Arc<Agent>> {
    agent_of(h)
}

/// `rmad_agent_context`.
#[no_mangle]
pub(crate) extern "C" fn rmad_agent_context(agent: *mut c_void) -> *mut c_void {
    tables()
        .and_then(|t| t.agents.with(from_ptr(agent), |a| a.context))
        .map_or(core::ptr::null_mut(), ctx_ptr)
}

/// `rmad_agent_hi_tid`.
#[no_mangle]
pub(crate) extern "C" fn rmad_agent_hi_tid(agent: *mut c_void) -> u32 {
    agent_of(agent).map_or(0, |a| a.hi_tid)
}

/// `rmad_resolve_ah`.
///
/// # Safety
///
/// `ah` must be NULL or valid for reads.
#[no_mangle]
pub(crate) unsafe extern "C" fn rmad_resolve_ah(
    agent: *mut c_void,
    ah: *const types::RmadAh,
) -> c_int {
    // SAFETY: Caller's promise.
    let Some(ah) = (unsafe { ah.as_ref() }) else {
        return EINVAL.to_errno();
    };
    code(agent_of(agent).and_then(|a| a.resolve_address(&ah.address())))
}

/// `rmad_port_gid`: GID `index` of `port` of `device`.
///
/// # Safety
///
/// `device` must be NULL or NUL-terminated; `gid` NULL or valid for 16 bytes.
#[no_mangle]
pub(crate) unsafe extern "C" fn rmad_port_gid(
    device: *const c_char,
    port: u32,
    index: c_int,
    gid: *mut u8,
) -> c_int {
    if device.is_null() || gid.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: Caller's promise.
    let name = unsafe { CStr::from_char_ptr(device) };
    let (Ok(port), Ok(index)) = (u8::try_from(port), u8::try_from(index)) else {
        return EINVAL.to_errno();
    };
    let Some(p) = verbs::find_port(name, port) else {
        return ENODEV.to_errno();
    };
    match p.gid(port, index) {
        Some(g) => {
            // SAFETY: Caller's promise.
            unsafe { core::ptr::copy_nonoverlapping(g.as_ptr(), gid, 16) };
            0
        }
        None => EINVAL.to_errno(),
    }
}

/// `rmad_response_mad`: 1 for a response, 0 otherwise, `-EINVAL` for a short buffer.
///
/// # Safety
///
/// `mad` must be valid for `len` bytes.
#[no_mangle]
pub(crate) unsafe extern "C" fn rmad_response_mad(mad: *const c_void, len: usize) -> c_int {
    if mad.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: Caller's promise.
    let bytes = unsafe { core::slice::from_raw_parts(mad.cast::<u8>(), len) };
    match wire::ib_response_mad(bytes) {
        Ok(r) => c_int::from(r),
        Err(_) => EINVAL.to_errno(),
    }
}

/// `rmad_get_mad_data_offset`.
#[no_mangle]
pub(crate) extern "C" fn rmad_get_mad_data_offset(mgmt_class: u8) -> c_int {
    c_int::try_from(wire::ib_get_mad_data_offset(mgmt_class)).unwrap_or(0)
}

/// `rmad_is_mad_class_rmpp`.
#[no_mangle]
pub(crate) extern "C" fn rmad_is_mad_class_rmpp(mgmt_class: u8) -> c_int {
    c_int::from(wire::ib_is_mad_class_rmpp(mgmt_class))
}
