// SPDX-License-Identifier: GPL-2.0

//! `rmad_register_agent`: a C agent, its handlers, and what its handle stands for.
//!
//! Registration makes everything the agent's end needs: the handle, reserved before the agent
//! is routable so that a handler that runs at once knows it; the work item of its
//! asynchronous unregistration ([`Pending`]), so that asking for that later allocates nothing
//! and cannot fail; and where its handlers are, so that rmad can end the agent when the module
//! they are in unloads ([`super::unload`]).

use super::{
    ctx_ptr,
    devices,
    err_ptr,
    recv,
    retry_rules,
    tables,
    to_ptr,
    types::{
        RecvFn,
        RmadRecvWc,
        RmadRegReq,
        RmadSendWc,
        SendFn, //
    },
    unregister::Pending,
    CAgent,
    RMAD_DETACH_BUFFERS,
    RMAD_RETRY_BACKOFF,
    RMAD_RETRY_ONE_SHOT, //
};
use crate::{
    engine::{
        agent::Engine, //
        agent::{
            Agent,
            AgentConfig,
            RecvHandler,
            SendHandler, //
        },
        send::{
            SendBuf,
            SendCompletion,
            SendHandle, //
        },
        transport::{
            RecvMad,
            Transport, //
        },
    },
    mad::{
        retry::Rules,
        QpType,
        RegReq, //
    },
    verbs, //
};
use core::ffi::c_void;
use kernel::{
    ffi::{
        c_char,
        c_int, //
    },
    prelude::*,
    sync::{
        atomic::{
            Acquire,
            Atomic,
            Release, //
        },
        Arc,
    },
};

/// The handlers of a C agent.
pub(super) struct CHandlers {
    send: SendFn,
    recv: RecvFn,
    /// The agent's handle (known before registration starts).
    handle: u64,
    /// The agent's context, handed to every handler call.
    context: usize,
    /// The module of the handlers is gone or going: they are not called any more
    /// ([`super::unload`]).
    muted: Atomic<bool>,
}

impl CHandlers {
    /// Calls neither handler from now on; a call in progress finishes (the unregistration that
    /// follows waits for it).
    pub(super) fn mute(&self) {
        self.muted.store(true, Release);
    }

    /// Whether the handlers may be called.
    fn live(&self) -> bool {
        !self.muted.load(Acquire)
    }
}

impl SendHandler for CHandlers {
    fn send_done(&self, _agent: &Arc<Agent>, buf: SendBuf, wc: SendCompletion) {
        let post_id = wc.post;
        // The words the C API keeps in the body: the handle, and the client's context.
        let [bh, buf_context] = buf.context();
        let bh = u64::try_from(bh).unwrap_or(0);
        if tables().is_err() {
            // Not reachable: the tables go only once every agent is unregistered.
            drop(buf);
            return;
        }
        // INVARIANT: The client owns the buffer again: its slot takes the body back at the next
        // call on the handle (`CBuf::absorb`), without a hold of the slot's lock here.
        buf.body.park();
        let mut cwc = RmadSendWc {
            send_buf: to_ptr(bh),
            post_id,
            context: ctx_ptr(self.context),
            status: c_int::try_from(wc.status.code()).unwrap_or(c_int::MAX),
            vendor_err: wc.vendor_err,
            buf_context: ctx_ptr(buf_context),
        };
        if !self.live() {
            // The buffer stays in its slot: rmad frees it at its own unload.
            return;
        }
        if let Some(f) = self.send {
            // SAFETY: The client registered `f` as its send handler; `cwc` lives until the call
            // returns, and the buffer it names is the client's again. Its module is not gone:
            // `muted` is set before that module's memory goes, and its unregistration waits
            // for this call.
            unsafe { f(to_ptr(self.handle), &mut cwc) };
        }
    }
}

impl RecvHandler for CHandlers {
    fn recv(&self, agent: &Arc<Agent>, send: Option<&SendHandle>, mad: RecvMad) {
        let Some(f) = self.recv else {
            return;
        };
        if !self.live() {
            return;
        }
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
    register_c(
        |port| find_transport(name, port),
        CRegistration {
            port,
            qp_type,
            // SAFETY: Caller's promise.
            reg_req: unsafe { reg_req.as_ref() },
            rmpp_version,
            send: send_handler,
            recv: recv_handler,
            context,
            flags,
            owner: None,
            hi_tid: core::ptr::null_mut(),
        },
    )
}

/// A C registration's arguments, as the exported entry points take them.
pub(super) struct CRegistration<'a> {
    /// The port number.
    pub(super) port: u32,
    /// `RMAD_QPT_SMI` or `RMAD_QPT_GSI`.
    pub(super) qp_type: c_int,
    /// The class registration, if any.
    pub(super) reg_req: Option<&'a RmadRegReq>,
    /// 0 or 1.
    pub(super) rmpp_version: u8,
    /// The send handler rmad calls.
    pub(super) send: SendFn,
    /// The receive handler rmad calls.
    pub(super) recv: RecvFn,
    /// The agent's context.
    pub(super) context: *mut c_void,
    /// The registration flags.
    pub(super) flags: u32,
    /// The addresses of the client's own handlers when `send` and `recv` are rmad's
    /// trampolines that call them (the `ib_mad` interface); `None`: `send` and `recv` are the
    /// client's.
    pub(super) owner: Option<[usize; 2]>,
    /// Null, or a `u32` the caller keeps valid until registration returns, which gets the
    /// agent's `hi_tid` before the agent is routable.
    pub(super) hi_tid: *mut u32,
}

/// Registers the C agent `c` on the port that `find` gives for its port number: the handle,
/// or an `ERR_PTR`.
pub(super) fn register_c(
    find: impl FnOnce(u8) -> Result<(Arc<Engine>, Arc<dyn Transport<Agent>>)>,
    c: CRegistration<'_>,
) -> *mut c_void {
    let reg = c.reg_req.map(|r| RegReq {
        mgmt_class: r.mgmt_class,
        class_version: r.mgmt_class_version,
        oui: r.oui,
        methods: u128::from(r.method_mask[0]) | (u128::from(r.method_mask[1]) << 64),
    });
    let handlers = CHandlers {
        send: c.send,
        recv: c.recv,
        handle: 0,
        context: c.context.expose_provenance(),
        muted: Atomic::new(false),
    };
    let code = c.owner.unwrap_or_else(|| code_of(&handlers));
    let args = match RegArgs::new(c.port, c.qp_type, c.flags) {
        Ok(a) => a,
        Err(e) => return err_ptr(e),
    };
    register_impl(
        find,
        args,
        reg,
        c.rmpp_version,
        handlers,
        Registered {
            code,
            hi_tid: c.hi_tid,
        },
    )
    .map_or_else(err_ptr, to_ptr)
}

impl Registered {
    /// Writes `hi_tid` where the caller asked for it.
    fn tell_hi_tid(&self, hi_tid: u32) {
        if !self.hi_tid.is_null() {
            // SAFETY: The caller keeps `hi_tid` valid until registration returns
            // (`Registered`); nothing else writes it meanwhile.
            unsafe { self.hi_tid.write(hi_tid) };
        }
    }
}

/// What a registration tells besides its handle: where the client's handlers are (the module
/// they are in is the agent's owner, [`super::unload`]), and where to write the agent's
/// `hi_tid` before the agent is routable (null: nowhere).
struct Registered {
    /// The addresses of the client's send and receive handlers (0 for none).
    code: [usize; 2],
    /// Null, or a `u32` the caller keeps valid until registration returns.
    hi_tid: *mut u32,
}

/// The addresses of `h`'s send and receive handlers (0 for none): where rmad looks for the
/// module of the handlers when a module unloads.
fn code_of(h: &CHandlers) -> [usize; 2] {
    [
        h.send.map_or(0, |f| (f as *const c_void).addr()),
        h.recv.map_or(0, |f| (f as *const c_void).addr()),
    ]
}

/// The plain arguments of `rmad_register_agent`, checked and split.
struct RegArgs {
    /// The port.
    port: u8,
    /// SMI or GSI.
    qp_type: QpType,
    /// `RMAD_DETACH_BUFFERS`.
    detach_buffers: bool,
    /// The retry rules of the agent's new buffers (`RMAD_RETRY_*`).
    retry: Rules,
    /// The C MAD layer's flags, which the engine sees alone.
    flags: u32,
}

impl RegArgs {
    /// `EINVAL` for a QP type other than SMI and GSI, `ENODEV` for a port no device has.
    fn new(port: u32, qp_type: c_int, flags: u32) -> Result<Self> {
        let retry_flags = RMAD_RETRY_BACKOFF | RMAD_RETRY_ONE_SHOT;
        // In the order the checks were always made: the QP type first.
        Ok(Self {
            qp_type: match qp_type {
                0 => QpType::Smi,
                1 => QpType::Gsi,
                _ => return Err(EINVAL),
            },
            port: u8::try_from(port).map_err(|_| ENODEV)?,
            detach_buffers: flags & RMAD_DETACH_BUFFERS != 0,
            retry: retry_rules(flags & retry_flags, 0)?,
            flags: flags & !(RMAD_DETACH_BUFFERS | retry_flags),
        })
    }
}

/// Registers a C agent on the port that `find` gives for `args`' port number: its handle is
/// reserved first, so that handlers that run before registration returns already know it.
fn register_impl(
    find: impl FnOnce(u8) -> Result<(Arc<Engine>, Arc<dyn Transport<Agent>>)>,
    args: RegArgs,
    reg: Option<RegReq>,
    rmpp_version: u8,
    mut handlers: CHandlers,
    out: Registered,
) -> Result<u64> {
    let RegArgs {
        port,
        qp_type,
        detach_buffers,
        retry,
        flags,
    } = args;
    let t = tables()?;
    let (engine, transport) = find(port)?;
    let code = out.code;
    let h = t.agents.reserve(GFP_KERNEL)?;
    handlers.handle = h;
    let context = handlers.context;
    let (send, recv) = (handlers.send.is_some(), handlers.recv.is_some());
    let registered = Pending::new(h).and_then(|pending| {
        let handlers = Arc::new(handlers, GFP_KERNEL)?;
        Agent::register_with(
            &engine,
            &transport,
            AgentConfig {
                port,
                qp_type,
                reg,
                rmpp_version,
                flags,
                retry,
                send_handler: send.then(|| -> Arc<dyn SendHandler> { handlers.clone() }),
                recv_handler: recv.then(|| -> Arc<dyn RecvHandler> { handlers.clone() }),
            },
            // The handle is complete before the first MAD can reach a handler, which gets
            // it (rmad.h: handlers that run before registration returns receive the
            // agent's handle already).
            |agent| {
                out.tell_hi_tid(agent.hi_tid);
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
                            code,
                            handlers: handlers.clone(),
                            pending,
                            release: None,
                            release_at: 0,
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
            undo(t, h);
            Err(e)
        }
    }
}

/// Ends the failed registration of handle `h`: a filled slot holds the agent, which never
/// became routable, so it is unregistered; an unfilled one is released.
fn undo(t: &super::Tables, h: u64) {
    if let Ok(c) = t.agents.remove(h, |_| Ok(())) {
        let _ = c.agent.unregister();
    } else {
        let _ = t.agents.release(h);
    }
}

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
fn find_transport(name: &CStr, port: u8) -> Result<(Arc<Engine>, Arc<dyn Transport<Agent>>)> {
    if let Some(t) = devices::find(name, port) {
        return Ok(t);
    }
    let vp = verbs::find_port(name, port).ok_or(ENODEV)?;
    let engine = verbs::verbs_engine().ok_or(ENODEV)?;
    Ok((engine, vp))
}
