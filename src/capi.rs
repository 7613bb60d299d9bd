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
//! # Lock order
//!
//! A buffer's slot lock, then its agent's lock (post, modify, cancel). No rmad lock is held
//! while a client's handler runs.

pub(crate) mod devices;
pub(crate) mod handles;
mod recv;
mod unregister;

#[cfg(rmad_test)]
pub(crate) use unregister::rmad_unregister_agent_async;

#[cfg(rmad_test)]
pub(crate) use recv::{
    rmad_free_recv_mad,
    rmad_keep_recv_mad,
    rmad_recv_buf_ah,
    rmad_recv_buf_mad, //
};

use crate::{
    capi::handles::{
        HandleTable,
        KIND_AGENT,
        KIND_BUF,
        KIND_RECV, //
    },
    engine::{
        agent::{
            Agent,
            AgentConfig,
            RecvHandler,
            SendHandler,
            SendSpec, //
        },
        send::{
            SendBody,
            SendBuf,
            SendCompletion,
            SendHandle,
            SendRecord, //
        },
        transport::{
            RecvMad,
            Transport, //
        },
        Engine, //
    },
    mad::{
        wire,
        Address,
        GrhAttr,
        QpType,
        RegReq, //
    },
    sys::{
        memalloc,
        workqueue::OwnedQueue, //
    },
    verbs, //
};
use core::ffi::c_void;
use kernel::{
    alloc::Flags,
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
        Arc,
    },
};

/// `struct rmad_ah`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct RmadAh {
    pub(crate) dlid: u16,
    pub(crate) src_path_bits: u8,
    pub(crate) has_grh: u8,
    pub(crate) sgid_index: u8,
    pub(crate) dgid: [u8; 16],
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
    pub(crate) sl: u8,
    pub(crate) flow_label: u32,
}

impl RmadAh {
    /// The address these attributes describe.
    fn address(&self) -> Address {
        Address {
            sl: self.sl,
            dlid: self.dlid,
            src_path_bits: self.src_path_bits,
            grh: (self.has_grh != 0).then_some(GrhAttr {
                // 0 is the default, as in the structures before the field existed.
                hop_limit: if self.hop_limit == 0 {
                    64
                } else {
                    self.hop_limit
                },
                traffic_class: self.traffic_class,
                flow_label: self.flow_label & 0xf_ffff,
                dgid: self.dgid,
                sgid_index: self.sgid_index,
            }),
        }
    }

    /// The attributes of `a`.
    fn from_address(a: &Address) -> Self {
        let g = a.grh.unwrap_or(GrhAttr {
            dgid: [0; 16],
            sgid_index: 0,
            hop_limit: 0,
            traffic_class: 0,
            flow_label: 0,
        });
        Self {
            dlid: a.dlid,
            src_path_bits: a.src_path_bits,
            has_grh: u8::from(a.grh.is_some()),
            sgid_index: g.sgid_index,
            dgid: g.dgid,
            hop_limit: g.hop_limit,
            traffic_class: g.traffic_class,
            sl: a.sl,
            flow_label: g.flow_label,
        }
    }
}

/// `struct rmad_send_wc`.
#[repr(C)]
pub(crate) struct RmadSendWc {
    pub(crate) send_buf: *mut c_void,
    pub(crate) post_id: u64,
    pub(crate) context: *mut c_void,
    pub(crate) status: c_int,
    pub(crate) vendor_err: u32,
}

/// `struct rmad_recv_wc`.
#[repr(C)]
pub(crate) struct RmadRecvWc {
    pub(crate) mad: *const c_void,
    pub(crate) context: *mut c_void,
    pub(crate) mad_len: u32,
    pub(crate) src_qp: u32,
    pub(crate) slid: u16,
    pub(crate) pkey_index: u16,
    pub(crate) has_grh: u8,
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
    pub(crate) recv_buf: *mut c_void,
    pub(crate) sgid: [u8; 16],
    pub(crate) flow_label: u32,
}

/// `struct rmad_reg_req`.
#[repr(C)]
pub(crate) struct RmadRegReq {
    pub(crate) mgmt_class: u8,
    pub(crate) mgmt_class_version: u8,
    pub(crate) oui: [u8; 3],
    pub(crate) method_mask: [u64; 2],
}

// The layouts `include/rmad.h` promises; `src/capi/exports.c` checks the same numbers in C.
const _: () = {
    use core::mem::{
        offset_of,
        size_of, //
    };
    assert!(size_of::<RmadAh>() == 28 && offset_of!(RmadAh, dgid) == 5);
    assert!(offset_of!(RmadAh, hop_limit) == 21 && offset_of!(RmadAh, sl) == 23);
    assert!(offset_of!(RmadAh, flow_label) == 24);
    assert!(size_of::<RmadSendWc>() == 32);
    assert!(offset_of!(RmadSendWc, post_id) == 8 && offset_of!(RmadSendWc, context) == 16);
    assert!(offset_of!(RmadSendWc, status) == 24 && offset_of!(RmadSendWc, vendor_err) == 28);
    assert!(size_of::<RmadRecvWc>() == 64);
    assert!(offset_of!(RmadRecvWc, hop_limit) == 29 && offset_of!(RmadRecvWc, traffic_class) == 30);
    assert!(offset_of!(RmadRecvWc, flow_label) == 56);
    assert!(offset_of!(RmadRecvWc, context) == 8 && offset_of!(RmadRecvWc, mad_len) == 16);
    assert!(offset_of!(RmadRecvWc, src_qp) == 20 && offset_of!(RmadRecvWc, slid) == 24);
    assert!(offset_of!(RmadRecvWc, pkey_index) == 26 && offset_of!(RmadRecvWc, has_grh) == 28);
    assert!(offset_of!(RmadRecvWc, recv_buf) == 32 && offset_of!(RmadRecvWc, sgid) == 40);
    assert!(size_of::<RmadRegReq>() == 24 && offset_of!(RmadRegReq, method_mask) == 8);
};

/// `rmad_send_handler`.
pub(crate) type SendFn = Option<unsafe extern "C" fn(agent: *mut c_void, wc: *mut RmadSendWc)>;
/// `rmad_recv_handler`.
pub(crate) type RecvFn =
    Option<unsafe extern "C" fn(agent: *mut c_void, buf: *mut c_void, wc: *const RmadRecvWc)>;

/// What an agent handle stands for.
pub(crate) struct CAgent {
    agent: Arc<Agent>,
    context: usize,
    /// Registered with `RMAD_DETACH_BUFFERS`: unregistration does not wait for the client's
    /// buffers.
    detach_buffers: bool,
    /// An unregistration has started (`rmad_unregister_agent`, for the length of the call,
    /// or `rmad_unregister_agent_async`): a second one is refused (`EINVAL`).
    closing: bool,
}

/// What a send-buffer handle stands for.
///
/// # Invariants
///
/// `body` is `Some` exactly while the client owns the buffer; while it is `None` the send is
/// outstanding (or being posted, or its completion is on its way back) and the engine owns the
/// body. `rec` is the buffer's record for its whole life.
pub(crate) struct CBuf {
    rec: Arc<SendRecord>,
    body: Option<KBox<SendBody>>,
    context: usize,
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

/// The tables, between [`init`] and [`exit`].
///
/// # Invariants
///
/// Null, or a pointer from `KBox::into_raw` of pinned tables that live until [`exit`].
static TABLES: Atomic<*mut Tables> = Atomic::new(core::ptr::null_mut());

/// The C API while the module is loaded: dropping it drops the handle tables.
pub(crate) struct Api(());

impl Api {
    /// Makes the handle tables and the device registry.
    ///
    /// # Safety
    ///
    /// Called once, by the module initializer, before any other use of the C API or of the
    /// device registry ([`devices`]).
    pub(crate) unsafe fn new() -> Result<Self> {
        // SAFETY: The caller's promise: once, from the module initializer, first.
        unsafe { devices::init() };
        init()?;
        Ok(Self(()))
    }
}

impl Drop for Api {
    fn drop(&mut self) {
        exit();
    }
}

/// Makes the handle tables; called once, through [`Api::new`].
fn init() -> Result {
    let t = KBox::pin_init(
        try_pin_init!(Tables {
            unregistering: OwnedQueue::new_concurrent(c"rmad_unregister")?,
            agents <- HandleTable::new(KIND_AGENT, static_lock_class!(), static_lock_class!()),
            bufs <- HandleTable::new(KIND_BUF, static_lock_class!(), static_lock_class!()),
            recvs <- HandleTable::new(KIND_RECV, static_lock_class!(), static_lock_class!()),
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

/// The handlers of a C agent.
struct CHandlers {
    send: SendFn,
    recv: RecvFn,
    /// The agent's handle (known before registration starts).
    handle: u64,
    /// The agent's context, handed to every handler call.
    context: usize,
}

impl SendHandler for CHandlers {
    fn send_done(&self, _agent: &Arc<Agent>, buf: SendBuf, wc: SendCompletion) {
        let post_id = wc.post;
        let bh = u64::try_from(buf.context()[0]).unwrap_or(0);
        let SendBuf { rec, body } = buf;
        let mut body = Some(body);
        let back = tables().and_then(|t| {
            t.bufs.with(bh, |b| {
                // INVARIANT: The client owns the buffer again.
                if b.body.is_none() {
                    b.body = body.take();
                }
            })
        });
        drop(rec);
        if back.is_err() || body.is_some() {
            // Only reachable if the slot invariant were broken: drop the buffer, call nobody.
            pr_err!("capi: a completed send has no buffer slot\n");
            drop(body);
            return;
        }
        let mut cwc = RmadSendWc {
            send_buf: to_ptr(bh),
            post_id,
            context: ctx_ptr(self.context),
            status: c_int::try_from(wc.status.code()).unwrap_or(c_int::MAX),
            vendor_err: wc.vendor_err,
        };
        if let Some(f) = self.send {
            // SAFETY: The client registered `f` as its send handler; `cwc` lives until the call
            // returns, and the buffer it names is the client's again.
            unsafe { f(to_ptr(self.handle), &mut cwc) };
        }
    }
}

impl RecvHandler for CHandlers {
    fn recv(&self, agent: &Arc<Agent>, send: Option<&SendHandle>, mad: RecvMad) {
        let Some(f) = self.recv else {
            return;
        };
        let bh = send
            .and_then(|h| h.tag())
            .and_then(|t| u64::try_from(t).ok())
            .unwrap_or(0);
        let wc = RmadRecvWc {
            mad: core::ptr::null(),
            context: ctx_ptr(self.context),
            mad_len: 0,
            src_qp: mad.wc.src_qp,
            slid: mad.wc.slid,
            pkey_index: mad.wc.pkey_index,
            has_grh: u8::from(mad.wc.grh.is_some()),
            hop_limit: mad.wc.grh_fields.hop_limit,
            traffic_class: mad.wc.grh_fields.traffic_class,
            recv_buf: core::ptr::null_mut(),
            sgid: mad.wc.grh.map_or([0; 16], |(sgid, _)| sgid),
            flow_label: mad.wc.grh_fields.flow_label,
        };
        recv::deliver(f, self.handle, bh, wc, mad, agent.device());
    }
}

/// `rmad_register_agent`.
///
/// # Safety
///
/// `device` must be NULL or a NUL-terminated string; `reg_req` NULL or valid; the handlers
/// valid functions for as long as the agent is registered.
#[no_mangle]
pub(crate) unsafe extern "C" fn rmad_register_agent(
    device: *const c_char,
    port: u32,
    qp_type: c_int,
    reg_req: *const RmadRegReq,
    rmpp_version: u8,
    send_handler: SendFn,
    recv_handler: RecvFn,
    context: *mut c_void,
    flags: u32,
) -> *mut c_void {
    if device.is_null() {
        return err_ptr(EINVAL);
    }
    // SAFETY: Caller's promise.
    let name = unsafe { CStr::from_char_ptr(device) };
    // SAFETY: Caller's promise.
    let reg = unsafe { reg_req.as_ref() }.map(|r| RegReq {
        mgmt_class: r.mgmt_class,
        class_version: r.mgmt_class_version,
        oui: r.oui,
        methods: u128::from(r.method_mask[0]) | (u128::from(r.method_mask[1]) << 64),
    });
    let handlers = CHandlers {
        send: send_handler,
        recv: recv_handler,
        handle: 0,
        context: context.expose_provenance(),
    };
    register_impl(name, port, qp_type, reg, rmpp_version, handlers, flags)
        .map_or_else(err_ptr, to_ptr)
}

/// Registers a C agent: its handle is reserved first, so that handlers that run before
/// registration returns already know it.
fn register_impl(
    name: &CStr,
    port: u32,
    qp_type: c_int,
    reg: Option<RegReq>,
    rmpp_version: u8,
    mut handlers: CHandlers,
    flags: u32,
) -> Result<u64> {
    let qp_type = match qp_type {
        0 => QpType::Smi,
        1 => QpType::Gsi,
        _ => return Err(EINVAL),
    };
    let port = u8::try_from(port).map_err(|_| ENODEV)?;
    let detach_buffers = flags & RMAD_DETACH_BUFFERS != 0;
    // The engine sees the C MAD layer's flags only.
    let flags = flags & !RMAD_DETACH_BUFFERS;
    let t = tables()?;
    let (engine, transport) = find_transport(name, port)?;
    let h = t.agents.reserve(GFP_KERNEL)?;
    handlers.handle = h;
    let context = handlers.context;
    let (send, recv) = (handlers.send.is_some(), handlers.recv.is_some());
    let registered = Arc::new(handlers, GFP_KERNEL)
        .map_err(Error::from)
        .and_then(|handlers| {
            Agent::register_with(
                &engine,
                &transport,
                AgentConfig {
                    port,
                    qp_type,
                    reg,
                    rmpp_version,
                    flags,
                    send_handler: send.then(|| -> Arc<dyn SendHandler> { handlers.clone() }),
                    recv_handler: recv.then(|| -> Arc<dyn RecvHandler> { handlers.clone() }),
                },
                // The handle is complete before the first MAD can reach a handler, which gets
                // it (rmad.h: handlers that run before registration returns receive the
                // agent's handle already).
                |agent| {
                    let agent = agent.clone();
                    // A vanished reservation is a defect; the registration then fails.
                    t.agents
                        .fill(
                            h,
                            CAgent {
                                agent,
                                context,
                                detach_buffers,
                                closing: false,
                            },
                        )
                        .map_err(|_| EINVAL)
                },
            )
        });
    match registered {
        Ok(_) => {
            #[cfg(rmad_test)]
            registered_delay();
            Ok(h)
        }
        Err(e) => {
            // A filled slot holds the agent, which never became routable: unregister it.
            if let Ok(c) = t.agents.remove(h, |_| Ok(())) {
                let _ = c.agent.unregister();
            } else {
                let _ = t.agents.release(h);
            }
            Err(e)
        }
    }
}

/// Test flavour: the mask a `GFP_KERNEL` allocation got in the last `rmad_create_send_mad`,
/// as its allocations ran: what the caller's `gfp_t` made of it.
#[cfg(rmad_test)]
pub(crate) static CREATE_GFP_SEEN: Atomic<u32> = Atomic::new(0);

/// Test flavour: how long `rmad_register_agent` waits, in milliseconds, once its agent is
/// routable and before it returns, so that a suite can make requests reach the agent then.
#[cfg(rmad_test)]
pub(crate) static REGISTERED_DELAY_MS: Atomic<u32> = Atomic::new(0);

/// Test flavour: waits [`REGISTERED_DELAY_MS`].
#[cfg(rmad_test)]
fn registered_delay() {
    let ms = REGISTERED_DELAY_MS.load(kernel::sync::atomic::Relaxed);
    if ms != 0 {
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(i64::from(ms)));
    }
}

/// The engine and transport of port `port` of the device named `name`.
fn find_transport(name: &CStr, port: u8) -> Result<(Arc<Engine>, Arc<dyn Transport>)> {
    if let Some(t) = devices::find(name, port) {
        return Ok(t);
    }
    let vp = verbs::find_port(name, port).ok_or(ENODEV)?;
    let engine = verbs::verbs_engine().ok_or(ENODEV)?;
    Ok((engine, vp))
}

/// The agent behind a handle.
fn agent_of(h: *mut c_void) -> Result<Arc<Agent>> {
    tables()?.agents.with(from_ptr(h), |a| a.agent.clone())
}

/// `rmad_unregister_agent`.
#[no_mangle]
pub(crate) extern "C" fn rmad_unregister_agent(agent: *mut c_void) -> c_int {
    code((|| {
        let t = tables()?;
        let h = from_ptr(agent);
        // Claimed for the length of the call, so that an asynchronous unregistration asked
        // meanwhile (by a handler this call waits for) is refused instead of releasing the
        // client while that handler still runs.
        let (a, detach) = t.agents.with(h, |c| {
            if c.closing {
                Err(EINVAL)
            } else {
                c.closing = true;
                Ok((c.agent.clone(), c.detach_buffers))
            }
        })??;
        if let Err(e) = a.unregister_with(!detach) {
            // Nothing was done (from one of its own handlers, `EDEADLK`): the claim goes.
            let _ = t.agents.with(h, |c| c.closing = false);
            return Err(e);
        }
        // The handle goes stale now; the agent is dropped outside the table's lock.
        let left = tables()?.agents.remove(from_ptr(agent), |_| Ok(()))?;
        drop(left);
        Ok(())
    })())
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
pub(crate) unsafe extern "C" fn rmad_resolve_ah(agent: *mut c_void, ah: *const RmadAh) -> c_int {
    // SAFETY: Caller's promise.
    let Some(ah) = (unsafe { ah.as_ref() }) else {
        return EINVAL.to_errno();
    };
    code(agent_of(agent).and_then(|a| a.resolve_address(&ah.address())))
}

/// The allocation flags that match a caller's `gfp_t`, as far as the kernel crate names
/// them: it may sleep exactly when it allows direct reclaim, and it is accounted to the
/// caller's memory cgroup when it asks to be. What the crate cannot name, a mask without IO
/// or filesystem reclaim, the caller gets through a [`memalloc::Scope`] around the
/// allocations.
fn flags_of(gfp_mask: kernel::bindings::gfp_t) -> Flags {
    let bit = |b: u32| gfp_mask & (1 << b) != 0;
    let base = match (
        bit(kernel::bindings::___GFP_DIRECT_RECLAIM_BIT),
        bit(kernel::bindings::___GFP_ACCOUNT_BIT),
    ) {
        (true, true) => kernel::alloc::flags::GFP_KERNEL_ACCOUNT,
        (true, false) => GFP_KERNEL,
        (false, _) => GFP_ATOMIC,
    };
    if bit(kernel::bindings::___GFP_NOWARN_BIT) {
        base | kernel::alloc::flags::__GFP_NOWARN
    } else {
        base
    }
}

/// `rmad_create_send_mad`.
#[no_mangle]
pub(crate) extern "C" fn rmad_create_send_mad(
    agent: *mut c_void,
    remote_qpn: u32,
    pkey_index: u16,
    rmpp_active: c_int,
    hdr_len: c_int,
    data_len: c_int,
    gfp_mask: kernel::bindings::gfp_t,
    base_version: u8,
) -> *mut c_void {
    let gfp = flags_of(gfp_mask);
    // `GFP_NOIO` and `GFP_NOFS` hold for every allocation below, until the scope is left.
    let _scope = memalloc::Scope::enter(gfp_mask);
    (|| {
        let t = tables()?;
        let a = agent_of(agent)?;
        let spec = SendSpec {
            remote_qpn,
            pkey_index,
            rmpp_active: rmpp_active != 0,
            hdr_len,
            data_len,
            base_version,
        };
        #[cfg(rmad_test)]
        CREATE_GFP_SEEN.store(
            crate::sys::memalloc::effective(kernel::bindings::GFP_KERNEL),
            kernel::sync::atomic::Relaxed,
        );
        let mut buf = a.create_send(spec, gfp)?;
        let h = t.bufs.reserve(gfp)?;
        // The buffer names its handle, so that its send handler can find its slot.
        let Ok(word) = usize::try_from(h) else {
            let _ = t.bufs.release(h);
            return Err(EINVAL);
        };
        buf.set_context([word, 0]);
        let SendBuf { rec, body } = buf;
        let cbuf = CBuf {
            rec,
            body: Some(body),
            context: 0,
        };
        match t.bufs.fill(h, cbuf) {
            Ok(()) => Ok(h),
            Err(c) => {
                drop(c);
                Err(EINVAL)
            }
        }
    })()
    .map_or_else(err_ptr, to_ptr)
}

/// Runs `f` on the buffer behind `h`, under its slot's lock.
fn with_buf<R>(h: *mut c_void, f: impl FnOnce(&mut CBuf) -> Result<R>) -> Result<R> {
    tables()?.bufs.with(from_ptr(h), f)?
}

/// Runs `f` while holding the slot lock of the buffer behind `h` (tests: calls on other
/// buffers must not wait for it).
#[cfg(rmad_test)]
pub(crate) fn hold_buf_slot(h: *mut c_void, f: impl FnOnce()) -> Result {
    with_buf(h, |_| {
        f();
        Ok(())
    })
}

/// `rmad_free_send_mad`.
#[no_mangle]
pub(crate) extern "C" fn rmad_free_send_mad(send_buf: *mut c_void) -> c_int {
    code((|| {
        let removed = tables()?.bufs.remove(from_ptr(send_buf), |b| {
            if b.body.is_some() {
                Ok(())
            } else {
                Err(EBUSY)
            }
        })?;
        // The buffer is freed outside its slot's lock.
        drop(removed);
        Ok(())
    })())
}

/// `rmad_send_buf_mad`.
#[no_mangle]
pub(crate) extern "C" fn rmad_send_buf_mad(send_buf: *mut c_void) -> *mut c_void {
    with_buf(send_buf, |b| {
        let body = b.body.as_mut().ok_or(EBUSY)?;
        Ok(body.mad.as_mut_ptr().cast::<c_void>())
    })
    .unwrap_or(core::ptr::null_mut())
}

/// `rmad_send_buf_len`.
#[no_mangle]
pub(crate) extern "C" fn rmad_send_buf_len(send_buf: *mut c_void) -> u32 {
    with_buf(send_buf, |b| {
        let body = b.body.as_ref().ok_or(EBUSY)?;
        Ok(u32::try_from(body.mad.len()).unwrap_or(0))
    })
    .unwrap_or(0)
}

/// `rmad_get_rmpp_segment`.
#[no_mangle]
pub(crate) extern "C" fn rmad_get_rmpp_segment(
    send_buf: *mut c_void,
    seg_num: c_int,
) -> *mut c_void {
    with_buf(send_buf, |b| {
        let body = b.body.as_mut().ok_or(EBUSY)?;
        let n = usize::try_from(seg_num).map_err(|_| EINVAL)?;
        let seg = body.segment_mut(n).ok_or(EINVAL)?;
        Ok(seg.as_mut_ptr().cast::<c_void>())
    })
    .unwrap_or(core::ptr::null_mut())
}

/// `rmad_send_buf_seg_count`.
///
/// # Safety
///
/// `seg_size` must be NULL or valid for a write of a `u32`.
#[no_mangle]
pub(crate) unsafe extern "C" fn rmad_send_buf_seg_count(
    send_buf: *mut c_void,
    seg_size: *mut u32,
) -> c_int {
    with_buf(send_buf, |b| {
        let body = b.body.as_ref().ok_or(EBUSY)?;
        if !seg_size.is_null() {
            // SAFETY: Caller's promise.
            unsafe { seg_size.write(u32::try_from(body.seg_size).unwrap_or(0)) };
        }
        Ok(c_int::try_from(body.seg_count).unwrap_or(c_int::MAX))
    })
    .unwrap_or_else(|e| e.to_errno())
}

/// `rmad_send_buf_set`.
///
/// # Safety
///
/// `ah` must be NULL or valid.
#[no_mangle]
pub(crate) unsafe extern "C" fn rmad_send_buf_set(
    send_buf: *mut c_void,
    ah: *const RmadAh,
    timeout_ms: c_int,
    retries: c_int,
    context: *mut c_void,
) -> c_int {
    // SAFETY: Caller's promise.
    let ah = unsafe { ah.as_ref() }.map(RmadAh::address);
    let context = context.expose_provenance();
    code(with_buf(send_buf, |b| {
        let body = b.body.as_mut().ok_or(EBUSY)?;
        body.ah = ah;
        body.timeout_ms = timeout_ms;
        body.retries = retries;
        b.context = context;
        Ok(())
    }))
}

/// `rmad_send_buf_context`.
#[no_mangle]
pub(crate) extern "C" fn rmad_send_buf_context(send_buf: *mut c_void) -> *mut c_void {
    with_buf(send_buf, |b| Ok(b.context)).map_or(core::ptr::null_mut(), ctx_ptr)
}

/// `rmad_send_buf_retries`.
#[no_mangle]
pub(crate) extern "C" fn rmad_send_buf_retries(send_buf: *mut c_void) -> c_int {
    with_buf(send_buf, |b| {
        b.body.as_ref().map(|body| body.retries).ok_or(EBUSY)
    })
    .unwrap_or_else(|e| e.to_errno())
}

/// Posts the buffer behind `h`; returns the id of the post.
fn post_impl(h: *mut c_void) -> Result<u64> {
    with_buf(h, |b| {
        let body = b.body.take().ok_or(EBUSY)?;
        match Agent::post(SendBuf {
            rec: b.rec.clone(),
            body,
        }) {
            Ok(posted) => Ok(posted.gen),
            Err(e) => {
                // INVARIANT: A failed post hands the body back: the client owns it again.
                let SendBuf { rec: _, body } = e.buf;
                b.body = Some(body);
                Err(e.err)
            }
        }
    })
}

/// `rmad_post_send_mad`.
///
/// # Safety
///
/// `bad_send_buf` must be NULL or valid for a write.
#[no_mangle]
pub(crate) unsafe extern "C" fn rmad_post_send_mad(
    send_buf: *mut c_void,
    bad_send_buf: *mut *mut c_void,
) -> c_int {
    match post_impl(send_buf) {
        Ok(_) => 0,
        Err(e) => {
            if !bad_send_buf.is_null() {
                // SAFETY: Caller's promise.
                unsafe { *bad_send_buf = send_buf };
            }
            e.to_errno()
        }
    }
}

/// `rmad_post_send`.
///
/// # Safety
///
/// `post_id` must be NULL or valid for a write.
#[no_mangle]
pub(crate) unsafe extern "C" fn rmad_post_send(send_buf: *mut c_void, post_id: *mut u64) -> c_int {
    match post_impl(send_buf) {
        Ok(id) => {
            if !post_id.is_null() {
                // SAFETY: Caller's promise.
                unsafe { *post_id = id };
            }
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// `rmad_modify_mad`: modifies whatever post of the buffer is outstanding.
#[no_mangle]
pub(crate) extern "C" fn rmad_modify_mad(send_buf: *mut c_void, timeout_ms: c_int) -> c_int {
    code(with_buf(send_buf, |b| {
        if b.body.is_some() {
            // The client owns the buffer: nothing is outstanding.
            return Err(EINVAL);
        }
        b.rec.agent.modify_current(&b.rec, timeout_ms)
    }))
}

/// `rmad_cancel_mad`.
#[no_mangle]
pub(crate) extern "C" fn rmad_cancel_mad(send_buf: *mut c_void) -> c_int {
    rmad_modify_mad(send_buf, 0)
}

/// `rmad_modify_post`: modifies post `post_id` of the buffer, if it is still outstanding.
#[no_mangle]
pub(crate) extern "C" fn rmad_modify_post(
    send_buf: *mut c_void,
    post_id: u64,
    timeout_ms: c_int,
) -> c_int {
    code(with_buf(send_buf, |b| {
        let h = SendHandle {
            rec: b.rec.clone(),
            gen: post_id,
        };
        h.modify(timeout_ms)
    }))
}

/// `rmad_cancel_post`.
#[no_mangle]
pub(crate) extern "C" fn rmad_cancel_post(send_buf: *mut c_void, post_id: u64) -> c_int {
    rmad_modify_post(send_buf, post_id, 0)
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
