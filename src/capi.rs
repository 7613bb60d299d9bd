// SPDX-License-Identifier: GPL-2.0

//! The exported C API (`include/rmad.h`): what other kernel modules call.
//!
//! Rust symbols cannot be exported between out-of-tree modules, so the API is a set of
//! `extern "C"` functions (exported with `EXPORT_SYMBOL_GPL` by `capi_exports.c`), thin shells
//! around the Rust API. C hands out raw pointers; rmad never dereferences one. Every handle is
//! the address of a small allocation that rmad keeps in one table ([`HANDLES`]) together with
//! what the handle stands for, so a NULL, stale (freed) or foreign pointer is simply not found
//! and gets `-EINVAL`, and a send buffer's phase (owned by the client, outstanding) is known
//! without trusting the caller.

use crate::{
    agent::{
        Agent,
        AgentConfig,
        QpType,
        RecvHandler,
        SendHandler, //
    },
    engine::RegReq,
    send::{
        Address,
        GrhAttr,
        SendBuf,
        SendCompletion,
        SendHandle, //
    },
    transport::{
        RecvMad,
        Transport, //
    },
    verbs, wire,
};
use core::ffi::c_void;
use kernel::{
    alloc::Flags,
    ffi::{
        c_char,
        c_int, //
    },
    prelude::*,
    rbtree::{
        RBTree,
        RBTreeNodeReservation, //
    },
    sync::Arc,
};

/// `struct rmad_ah`.
#[repr(C)]
pub(crate) struct RmadAh {
    dlid: u16,
    src_path_bits: u8,
    has_grh: u8,
    sgid_index: u8,
    dgid: [u8; 16],
}

/// `struct rmad_send_wc`.
#[repr(C)]
pub(crate) struct RmadSendWc {
    send_buf: *mut c_void,
    status: c_int,
    vendor_err: u32,
}

/// `struct rmad_recv_wc`.
#[repr(C)]
pub(crate) struct RmadRecvWc {
    mad: *const c_void,
    mad_len: u32,
    src_qp: u32,
    slid: u16,
}

/// `struct rmad_reg_req`.
#[repr(C)]
pub(crate) struct RmadRegReq {
    mgmt_class: u8,
    mgmt_class_version: u8,
    oui: [u8; 3],
    method_mask: [u64; 2],
}

/// `rmad_send_handler`.
type SendFn = Option<unsafe extern "C" fn(agent: *mut c_void, wc: *mut RmadSendWc)>;
/// `rmad_recv_handler`.
type RecvFn =
    Option<unsafe extern "C" fn(agent: *mut c_void, buf: *mut c_void, wc: *const RmadRecvWc)>;

/// An agent handle.
struct AgentEntry {
    /// The allocation whose address is the handle.
    _token: KBox<u8>,
    agent: Arc<Agent>,
    context: usize,
}

/// A send-buffer handle.
struct BufEntry {
    /// The allocation whose address is the handle.
    _token: KBox<u8>,
    /// The buffer while the client owns it.
    buf: Option<SendBuf>,
    /// The send while it is outstanding.
    handle: Option<SendHandle>,
    context: usize,
}

/// What a handle stands for.
enum Entry {
    Agent(AgentEntry),
    Buf(BufEntry),
}

kernel::sync::global_lock! {
    // SAFETY: Initialized by `init` in the module initializer before any other use.
    unsafe(uninit) static HANDLES: SpinLock<Option<RBTree<usize, Entry>>> = None;
}

/// Prepares the handle table; called once by the module initializer.
pub(crate) fn init() {
    // SAFETY: Called exactly once, from the module initializer.
    unsafe { HANDLES.init() };
    *HANDLES.lock() = Some(RBTree::new());
}

/// Drops every handle left (clients are gone: they hold a reference on the module).
pub(crate) fn exit() {
    let left = HANDLES.lock().take();
    drop(left);
}

/// `ERR_PTR(e)`.
fn err_ptr(e: Error) -> *mut c_void {
    // An ERR_PTR is the negative errno reinterpreted as an address.
    core::ptr::without_provenance_mut(e.to_errno() as isize as usize)
}

/// The key of a handle.
fn key(p: *mut c_void) -> usize {
    p.addr()
}

/// Inserts `entry` under the address of `token`; returns the handle.
fn publish(entry: impl FnOnce(KBox<u8>) -> Entry, gfp: Flags) -> Result<*mut c_void> {
    let token = KBox::new(0u8, gfp)?;
    let k = core::ptr::from_ref::<u8>(&token).addr();
    let node = RBTreeNodeReservation::new(gfp)?;
    let mut g = HANDLES.lock();
    let map = g.as_mut().ok_or(ENODEV)?;
    map.insert(node.into_node(k, entry(token)));
    Ok(core::ptr::with_exposed_provenance_mut(k))
}

/// The handlers of a C agent.
struct CHandlers {
    send: SendFn,
    recv: RecvFn,
    /// The agent's handle, set once registration has published it.
    agent_key: kernel::sync::SetOnce<usize>,
}

impl SendHandler for CHandlers {
    fn send_done(&self, _agent: &Arc<Agent>, buf: SendBuf, wc: SendCompletion) {
        let bkey = buf.context()[0];
        {
            let mut g = HANDLES.lock();
            match g.as_mut().and_then(|m| m.get_mut(&bkey)) {
                Some(Entry::Buf(b)) => {
                    b.buf = Some(buf);
                    b.handle = None;
                }
                _ => {
                    drop(g);
                    drop(buf);
                    return;
                }
            }
        }
        let mut cwc = RmadSendWc {
            send_buf: core::ptr::with_exposed_provenance_mut(bkey),
            status: c_int::try_from(wc.status.code()).unwrap_or(c_int::MAX),
            vendor_err: wc.vendor_err,
        };
        let agent = self.agent_key.as_ref().copied().unwrap_or(0);
        if let Some(f) = self.send {
            // SAFETY: The client registered `f` as its send handler; both handles are valid
            // for the duration of the call (the buffer is the client's again).
            unsafe { f(core::ptr::with_exposed_provenance_mut(agent), &mut cwc) };
        }
    }
}

impl RecvHandler for CHandlers {
    fn recv(&self, _agent: &Arc<Agent>, send: Option<&SendHandle>, mad: RecvMad) {
        let Some(f) = self.recv else {
            return;
        };
        let bkey = send.and_then(|h| h.tag()).unwrap_or(0);
        let wc = RmadRecvWc {
            mad: mad.mad.as_ptr().cast(),
            mad_len: u32::try_from(mad.mad.len()).unwrap_or(0),
            src_qp: mad.wc.src_qp,
            slid: mad.wc.slid,
        };
        let agent = self.agent_key.as_ref().copied().unwrap_or(0);
        // SAFETY: The client registered `f` as its receive handler; `wc` and the MAD it points
        // to live until the call returns.
        unsafe {
            f(
                core::ptr::with_exposed_provenance_mut(agent),
                core::ptr::with_exposed_provenance_mut(bkey),
                &wc,
            )
        };
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
    register_impl(
        name,
        port,
        qp_type,
        reg,
        rmpp_version,
        send_handler,
        recv_handler,
        context,
        flags,
    )
    .unwrap_or_else(err_ptr)
}

#[allow(clippy::too_many_arguments)]
fn register_impl(
    name: &CStr,
    port: u32,
    qp_type: c_int,
    reg: Option<RegReq>,
    rmpp_version: u8,
    send: SendFn,
    recv: RecvFn,
    context: *mut c_void,
    flags: u32,
) -> Result<*mut c_void> {
    let qp_type = match qp_type {
        0 => QpType::Smi,
        1 => QpType::Gsi,
        _ => return Err(EINVAL),
    };
    let port = u8::try_from(port).map_err(|_| ENODEV)?;
    let vp = verbs::find_port(name, port).ok_or(ENODEV)?;
    let engine = verbs::verbs_engine().ok_or(ENODEV)?;
    let transport: Arc<dyn Transport> = vp;
    let handlers = Arc::new(
        CHandlers {
            send,
            recv,
            agent_key: kernel::sync::SetOnce::new(),
        },
        GFP_KERNEL,
    )?;
    let agent = Agent::register(
        &engine,
        &transport,
        AgentConfig {
            port,
            qp_type,
            reg,
            rmpp_version,
            flags,
            send_handler: send.map(|_| -> Arc<dyn SendHandler> { handlers.clone() }),
            recv_handler: recv.map(|_| -> Arc<dyn RecvHandler> { handlers.clone() }),
        },
    )?;
    let context = context.expose_provenance();
    let a2 = agent.clone();
    match publish(
        move |token| {
            Entry::Agent(AgentEntry {
                _token: token,
                agent: a2,
                context,
            })
        },
        GFP_KERNEL,
    ) {
        Ok(h) => {
            handlers.agent_key.populate(h.addr());
            Ok(h)
        }
        Err(e) => {
            let _ = agent.unregister();
            Err(e)
        }
    }
}

/// The agent behind a handle.
fn agent_of(h: *mut c_void) -> Option<(Arc<Agent>, usize)> {
    let g = HANDLES.lock();
    match g.as_ref()?.get(&key(h))? {
        Entry::Agent(a) => Some((a.agent.clone(), a.context)),
        Entry::Buf(_) => None,
    }
}

/// `rmad_unregister_agent`.
#[no_mangle]
pub(crate) extern "C" fn rmad_unregister_agent(agent: *mut c_void) -> c_int {
    let Some((a, _)) = agent_of(agent) else {
        return EINVAL.to_errno();
    };
    if let Err(e) = a.unregister() {
        return e.to_errno();
    }
    let entry = HANDLES.lock().as_mut().and_then(|m| m.remove(&key(agent)));
    drop(entry);
    0
}

/// `rmad_agent_context`.
#[no_mangle]
pub(crate) extern "C" fn rmad_agent_context(agent: *mut c_void) -> *mut c_void {
    agent_of(agent).map_or(core::ptr::null_mut(), |(_, c)| {
        core::ptr::with_exposed_provenance_mut(c)
    })
}

/// `rmad_agent_hi_tid`.
#[no_mangle]
pub(crate) extern "C" fn rmad_agent_hi_tid(agent: *mut c_void) -> u32 {
    agent_of(agent).map_or(0, |(a, _)| a.hi_tid)
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
    let Some((a, _)) = agent_of(agent) else {
        return err_ptr(EINVAL);
    };
    // The caller may sleep exactly when it allows direct reclaim.
    let gfp = if gfp_mask & (1 << kernel::bindings::___GFP_DIRECT_RECLAIM_BIT) != 0 {
        GFP_KERNEL
    } else {
        GFP_ATOMIC
    };
    let created = a.create_send(
        remote_qpn,
        pkey_index,
        rmpp_active != 0,
        hdr_len,
        data_len,
        gfp,
        base_version,
    );
    let buf = match created {
        Ok(b) => b,
        Err(e) => return err_ptr(e),
    };
    let mut slot = Some(buf);
    let h = publish(
        |token| {
            Entry::Buf(BufEntry {
                _token: token,
                buf: slot.take(),
                handle: None,
                context: 0,
            })
        },
        gfp,
    );
    match h {
        Ok(h) => {
            // The buffer names its handle, so that its send handler can find it.
            with_buf(h, |b| {
                if let Some(sb) = b.buf.as_mut() {
                    sb.set_context([h.addr(), 0]);
                }
                Ok(())
            })
            .map_or_else(err_ptr, |()| h)
        }
        Err(e) => err_ptr(e),
    }
}

/// Runs `f` on the buffer entry behind `h`, under the handle table's lock.
fn with_buf<R>(h: *mut c_void, f: impl FnOnce(&mut BufEntry) -> Result<R>) -> Result<R> {
    let mut g = HANDLES.lock();
    match g.as_mut().and_then(|m| m.get_mut(&key(h))) {
        Some(Entry::Buf(b)) => f(b),
        _ => Err(EINVAL),
    }
}

/// `rmad_free_send_mad`.
#[no_mangle]
pub(crate) extern "C" fn rmad_free_send_mad(send_buf: *mut c_void) -> c_int {
    let removed = {
        let mut g = HANDLES.lock();
        let Some(map) = g.as_mut() else {
            return EINVAL.to_errno();
        };
        match map.get(&key(send_buf)) {
            Some(Entry::Buf(b)) if b.buf.is_some() => map.remove(&key(send_buf)),
            Some(Entry::Buf(_)) => return EBUSY.to_errno(),
            _ => return EINVAL.to_errno(),
        }
    };
    // The buffer is freed outside the table's lock.
    drop(removed);
    0
}

/// `rmad_send_buf_mad`.
#[no_mangle]
pub(crate) extern "C" fn rmad_send_buf_mad(send_buf: *mut c_void) -> *mut c_void {
    with_buf(send_buf, |b| {
        b.buf
            .as_mut()
            .map(|sb| sb.mad_mut().as_mut_ptr().cast::<c_void>())
            .ok_or(EBUSY)
    })
    .unwrap_or(core::ptr::null_mut())
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
    let ah = unsafe { ah.as_ref() }.map(|a| Address {
        dlid: a.dlid,
        src_path_bits: a.src_path_bits,
        grh: (a.has_grh != 0).then_some(GrhAttr {
            dgid: a.dgid,
            sgid_index: a.sgid_index,
        }),
    });
    let context = context.expose_provenance();
    match with_buf(send_buf, |b| {
        let sb = b.buf.as_mut().ok_or(EBUSY)?;
        sb.set_ah(ah);
        sb.set_timeout_ms(timeout_ms);
        sb.set_retries(retries);
        b.context = context;
        Ok(())
    }) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// `rmad_send_buf_context`.
#[no_mangle]
pub(crate) extern "C" fn rmad_send_buf_context(send_buf: *mut c_void) -> *mut c_void {
    with_buf(send_buf, |b| Ok(b.context)).map_or(
        core::ptr::null_mut(),
        core::ptr::with_exposed_provenance_mut,
    )
}

/// `rmad_send_buf_retries`.
#[no_mangle]
pub(crate) extern "C" fn rmad_send_buf_retries(send_buf: *mut c_void) -> c_int {
    with_buf(send_buf, |b| {
        b.buf.as_ref().map(|sb| sb.retries()).ok_or(EBUSY)
    })
    .unwrap_or_else(|e| e.to_errno())
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
    // The table's lock is held only to move the buffer out and its handle back, not while
    // the send is posted: a concurrent free sees an outstanding buffer (EBUSY).
    let r =
        with_buf(send_buf, |b| b.buf.take().ok_or(EBUSY)).and_then(|sb| match Agent::post(sb) {
            Ok(h) => {
                let _ = with_buf(send_buf, |b| {
                    // If the send handler already gave the buffer back, the handle is stale.
                    if b.buf.is_none() {
                        b.handle = Some(h);
                    }
                    Ok(())
                });
                Ok(())
            }
            Err(e) => {
                let mut back = Some(e.buf);
                let _ = with_buf(send_buf, |b| {
                    b.buf = back.take();
                    Ok(())
                });
                Err(e.err)
            }
        });
    match r {
        Ok(()) => 0,
        Err(e) => {
            if !bad_send_buf.is_null() {
                // SAFETY: Caller's promise.
                unsafe { *bad_send_buf = send_buf };
            }
            e.to_errno()
        }
    }
}

/// `rmad_modify_mad`.
#[no_mangle]
pub(crate) extern "C" fn rmad_modify_mad(send_buf: *mut c_void, timeout_ms: c_int) -> c_int {
    match with_buf(send_buf, |b| {
        b.handle.as_ref().ok_or(EINVAL)?.modify(timeout_ms)
    }) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// `rmad_cancel_mad`.
#[no_mangle]
pub(crate) extern "C" fn rmad_cancel_mad(send_buf: *mut c_void) -> c_int {
    rmad_modify_mad(send_buf, 0)
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
