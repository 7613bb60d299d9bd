// SPDX-License-Identifier: GPL-2.0

//! Safe Rust binding over rmad's exported C API (`include/rmad.h`), for other Rust kernel
//! modules (Rust symbols cannot be shared between out-of-tree modules; C symbols can).
//!
//! Include it with `#[path = "<rmad>/include/rmad_binding.rs"] mod rmad;` and build against
//! rmad's `Module.symvers`. The ownership model is the in-module one: a [`SendBuf`] is owned
//! by the client until it is posted; posting consumes it and returns a [`Posted`] handle that
//! can only modify or cancel; the [`Client`]'s `send_done` gets the buffer back by value.
//! Handles are checked by rmad on every call and never reused, and a [`Posted`] names one post
//! of its buffer (not the buffer), so a stale [`Posted`] gets `EINVAL`, even after its buffer
//! was posted again.
//!
//! A received MAD is the handler's ([`Received`]) unless the client keeps it
//! ([`Received::keep`]): a [`RecvBuf`] is freed when dropped, also after its agent is gone. A
//! responder registers for a class ([`Agent::register_class`]) and answers with
//! [`Received::reply`] or, later, [`RecvBuf::reply`].
//!
//! The binding is written for version [`API_VERSION_MAJOR`].[`API_VERSION_MINOR`] of rmad's API
//! and checks at compile time that `rmad.h`, which it reads from its own directory, says the
//! same; a client checks the version it was written for against these constants
//! (`Documentation/changes.md` says what each version changed).

use core::ffi::c_void;
use kernel::{
    alloc::{
        flags::{
            GFP_ATOMIC,
            GFP_KERNEL,
            GFP_NOWAIT, //
        },
        Flags,
    },
    error::from_err_ptr,
    ffi::{
        c_char,
        c_int, //
    },
    prelude::*,
};

/// The major version of rmad's API this binding is written for (`RMAD_API_VERSION_MAJOR` of
/// `include/rmad.h`): it grows with every change that can break a client. A client checks it
/// at compile time, e.g. `const _: () = assert!(rmad::API_VERSION_MAJOR == 4);`.
pub(crate) const API_VERSION_MAJOR: u32 = 4;

/// The minor version (`RMAD_API_VERSION_MINOR`): it grows with what keeps the clients of the
/// same major version working; a client needs at least the minor version it was written for.
pub(crate) const API_VERSION_MINOR: u32 = 5;

// The header beside this file must describe the API this binding is written for: a binding
// and a header of different versions do not build together.
const _: () = {
    let header = include_str!("rmad.h").as_bytes();
    let major = version(header, b"MAJOR ");
    let minor = version(header, b"MINOR ");
    assert!(
        matches!(major, Some(API_VERSION_MAJOR)),
        "rmad.h: another RMAD_API_VERSION_MAJOR"
    );
    assert!(
        matches!(minor, Some(API_VERSION_MINOR)),
        "rmad.h: another RMAD_API_VERSION_MINOR"
    );
};

/// The decimal value of the line `#define RMAD_API_VERSION_{part}value` of the C header
/// `text`, at compile time.
const fn version(text: &[u8], part: &[u8]) -> Option<u32> {
    let mut rest = text;
    while let [_, tail @ ..] = rest {
        if let Some(mut t) = strip(strip(Some(rest), b"\n#define RMAD_API_VERSION_"), part) {
            let (mut value, mut any) = (0u32, false);
            while let [d @ b'0'..=b'9', t_rest @ ..] = t {
                let Some(v) = value.checked_mul(10) else {
                    return None;
                };
                let Some(v) = v.checked_add((*d - b'0') as u32) else {
                    return None;
                };
                (value, any, t) = (v, true, t_rest);
            }
            return if any { Some(value) } else { None };
        }
        rest = tail;
    }
    None
}

/// `text` without `prefix`, if it starts with it.
const fn strip<'a>(text: Option<&'a [u8]>, prefix: &[u8]) -> Option<&'a [u8]> {
    let (Some(mut t), mut p) = (text, prefix) else {
        return None;
    };
    while let ([a, t_rest @ ..], [b, p_rest @ ..]) = (t, p) {
        if *a != *b {
            return None;
        }
        (t, p) = (t_rest, p_rest);
    }
    if p.is_empty() {
        Some(t)
    } else {
        None
    }
}

/// `RMAD_DETACH_BUFFERS` of `include/rmad.h`: the agent's unregistration does not wait for its
/// send buffers.
const RMAD_DETACH_BUFFERS: u32 = 1 << 31;

/// `RMAD_RETRY_BACKOFF` of `include/rmad.h`.
const RMAD_RETRY_BACKOFF: u32 = 1 << 30;

/// `RMAD_RETRY_ONE_SHOT` of `include/rmad.h`.
const RMAD_RETRY_ONE_SHOT: u32 = 1 << 29;

/// The longest deadline, in milliseconds (`RMAD_MAX_DEADLINE_MS`): a longer one counts as it.
pub(crate) const MAX_DEADLINE_MS: u32 = 300_000;

/// Retry rules beyond the C MAD layer's, opt-in per send ([`SendBuf::set_retry`]); the
/// default is the C layer's (`rmad_send_buf_set_retry` in `include/rmad.h` says each rule).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Retry {
    /// After 4 waits of the timeout, each wait doubles, up to 60 s.
    pub(crate) backoff: bool,
    /// A modify sets the current wait only.
    pub(crate) one_shot_modify: bool,
    /// The longest time a post may take, in milliseconds from the post; 0 for none. The send
    /// ends with `RESP_TIMEOUT_ERR` by then whatever its retries left.
    pub(crate) deadline_ms: u32,
}

impl Retry {
    /// The `RMAD_RETRY_*` flags of these rules.
    fn flags(&self) -> u32 {
        let backoff = if self.backoff { RMAD_RETRY_BACKOFF } else { 0 };
        backoff
            | if self.one_shot_modify {
                RMAD_RETRY_ONE_SHOT
            } else {
                0
            }
    }
}

/// Send completion statuses (`SendDone::status`): the `enum ib_wc_status` values rmad reports
/// (`RMAD_WC_*` of `include/rmad.h`).
pub(crate) mod wc_status {
    /// Sent; answered if a response was expected.
    pub(crate) const SUCCESS: i32 = 0;
    /// The device refused the send.
    pub(crate) const LOC_QP_OP_ERR: i32 = 2;
    /// Cancelled, unregistered, or the device went away.
    pub(crate) const WR_FLUSH_ERR: i32 = 5;
    /// The peer aborted the transfer.
    pub(crate) const REM_ABORT_ERR: i32 = 16;
    /// No response, retries spent.
    pub(crate) const RESP_TIMEOUT_ERR: i32 = 20;
    /// Anything else.
    pub(crate) const GENERAL_ERR: i32 = 21;
}

/// Management classes and methods of the MAD header (`RMAD_MGMT_*` of `include/rmad.h`).
pub(crate) mod mgmt {
    /// Class: LID-routed subnet management.
    pub(crate) const CLASS_SUBN_LID_ROUTED: u8 = 0x01;
    /// Class: subnet administration.
    pub(crate) const CLASS_SUBN_ADM: u8 = 0x03;
    /// Class: performance management.
    pub(crate) const CLASS_PERF_MGMT: u8 = 0x04;
    /// Class: communication management.
    pub(crate) const CLASS_CM: u8 = 0x07;
    /// The first class of vendor range 2 (with an OUI).
    pub(crate) const CLASS_VENDOR_RANGE2_START: u8 = 0x30;
    /// Method GET.
    pub(crate) const METHOD_GET: u8 = 0x01;
    /// Method SET.
    pub(crate) const METHOD_SET: u8 = 0x02;
    /// Method SEND.
    pub(crate) const METHOD_SEND: u8 = 0x03;
    /// Method GetResp.
    pub(crate) const METHOD_GET_RESP: u8 = 0x81;
    /// The response bit of a method.
    pub(crate) const METHOD_RESP: u8 = 0x80;
    /// The MAD status ib_core answers a GET of a class nobody serves with.
    pub(crate) const MAD_STATUS_UNSUPPORTED_METHOD_ATTRIB: u16 = 0x000c;
    /// Length of the common MAD header (`IB_MGMT_MAD_HDR`).
    pub(crate) const MAD_HDR: u16 = 24;
    /// Length of the data after the common header in one MAD (`IB_MGMT_MAD_DATA`).
    pub(crate) const MAD_DATA: u16 = 232;
}

/// Where a send goes (`struct rmad_ah`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Ah {
    /// Destination LID.
    pub(crate) dlid: u16,
    /// Source path bits.
    pub(crate) src_path_bits: u8,
    /// The packet carries a GRH (always on RoCE).
    pub(crate) has_grh: u8,
    /// Index of the local source GID.
    pub(crate) sgid_index: u8,
    /// Destination GID.
    pub(crate) dgid: [u8; 16],
    /// Hop limit of the GRH (on RoCEv2 the IP TTL); 0 means 64.
    pub(crate) hop_limit: u8,
    /// Traffic class of the GRH (on RoCEv2 the IP DSCP and ECN bits).
    pub(crate) traffic_class: u8,
    /// Service level.
    pub(crate) sl: u8,
    /// Flow label of the GRH (20 bits).
    pub(crate) flow_label: u32,
}

/// A class registration (`struct rmad_reg_req`): which unsolicited requests the agent gets.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct RegReq {
    /// Management class.
    pub(crate) mgmt_class: u8,
    /// Class version.
    pub(crate) mgmt_class_version: u8,
    /// OUI, for vendor-range-2 classes.
    pub(crate) oui: [u8; 3],
    /// Bit `m` set: requests with method `m` (0..127).
    pub(crate) method_mask: [u64; 2],
}

// The structures rmad hands the handlers, the header's layouts and the exported functions.
include!("rmad_binding_ffi.rs");

/// Turns an errno return into a `Result`.
fn check(r: c_int) -> Result {
    kernel::error::to_result(r)
}

/// What a client does with its agent's completions. Called without rmad locks, in process
/// context; may sleep. Shared by the handlers (`Sync`), and dropped in rmad's thread when its
/// agent is dropped inside one of its own handlers (`Send`).
pub(crate) trait Client: Send + Sync + 'static {
    /// A send completed; its buffer is the client's again.
    fn send_done(&self, done: SendDone);
    /// A MAD arrived: a response to one of the client's sends ([`Received::matched`]), or a
    /// request. It is freed when the call returns unless the client keeps it.
    fn recv(&self, _mad: Received<'_>) {}
}

/// A registered agent; dropping it unregisters it: at once, waiting for its handlers; or,
/// dropped inside one of its own handlers, in rmad's thread once that handler has returned,
/// which then drops the client (this module stays loaded until then; if it is being unloaded
/// already, its unload waits for that). Dropped inside a handler, the unregistration cannot
/// fail: rmad made what it needs at registration. Never waits for the agent's send buffers:
/// those that outlive it are inert (posting fails with `ESHUTDOWN`) and free safely when
/// dropped.
///
/// # Invariants
///
/// `client` is the context rmad hands to this agent's handlers: it stays allocated until
/// rmad's unregistration has returned successfully, or until rmad's asynchronous
/// unregistration releases it, and is leaked if neither happens.
pub(crate) struct Agent<C: Client> {
    raw: *mut c_void,
    client: *mut C,
}

/// The send handler rmad calls for agents of client type `C`.
///
/// # Safety
///
/// `wc` must point to a completion valid for the call whose context is the `C` of a live
/// [`Agent`] (rmad calls it so for agents that [`Agent::register`] made).
unsafe extern "C" fn send_tramp<C: Client>(_agent: *mut c_void, wc: *mut SendWc) {
    // SAFETY: rmad passes a valid completion for the duration of the call.
    let wc = unsafe { &*wc };
    // SAFETY: The context is the `C` that the `Agent` keeps alive until unregistration has
    // returned, after which no handler runs (invariant of `Agent`).
    let client = unsafe { &*wc.context.cast::<C>() };
    client.send_done(SendDone {
        buf: SendBuf { raw: wc.send_buf },
        status: wc.status,
        vendor_err: wc.vendor_err,
        post_id: wc.post_id,
        context: wc.buf_context.addr(),
    });
}

/// A send's completion (`struct rmad_send_wc`).
pub(crate) struct SendDone {
    /// The buffer, the client's again (dropping it frees it).
    pub(crate) buf: SendBuf,
    /// How it ended: one of [`wc_status`].
    pub(crate) status: i32,
    /// The transport's vendor error (0 if none).
    pub(crate) vendor_err: u32,
    /// The post that completed (as [`Posted::id`] names it).
    pub(crate) post_id: u64,
    /// The buffer's context, as [`SendBuf::context`] returns it, without a lookup.
    pub(crate) context: usize,
}

/// The receive handler rmad calls for agents of client type `C`.
///
/// # Safety
///
/// As for `send_tramp`, with a receive completion whose MAD is valid for `mad_len` bytes.
unsafe extern "C" fn recv_tramp<C: Client>(
    agent: *mut c_void,
    buf: *mut c_void,
    wc: *const RecvWc,
) {
    // SAFETY: rmad passes a valid receive completion for the duration of the call.
    let wc = unsafe { &*wc };
    let len = usize::try_from(wc.mad_len).unwrap_or(0);
    // SAFETY: As above; the MAD is valid for `mad_len` bytes during the call.
    let mad = unsafe { core::slice::from_raw_parts(wc.mad.cast::<u8>(), len) };
    // SAFETY: As in `send_tramp`.
    let client = unsafe { &*wc.context.cast::<C>() };
    client.recv(Received {
        agent,
        send: buf,
        matched: !buf.is_null(),
        wc,
        mad,
    });
}

impl<C: Client> Agent<C> {
    /// Registers a GSI agent on `port` of `device` (no class registration).
    pub(crate) fn register(device: &CStr, port: u32, client: C) -> Result<Self> {
        Self::register_inner(device, port, None, 0, 0, client)
    }

    /// Registers a GSI agent on `port` of `device` whose send buffers start with the retry
    /// rules `retry` (backoff, one-shot modify), as `RMAD_RETRY_*` registration flags do; a
    /// deadline is set per buffer ([`SendBuf::set_retry`]), so a `retry` with one is `EINVAL`.
    pub(crate) fn register_with_retry(
        device: &CStr,
        port: u32,
        retry: &Retry,
        client: C,
    ) -> Result<Self> {
        if retry.deadline_ms != 0 {
            return Err(EINVAL);
        }
        Self::register_inner(device, port, None, 0, retry.flags(), client)
    }

    /// Registers a kernel-RMPP GSI agent (`rmpp_version` 1) on `port` of `device`, with `reg`
    /// if given: rmad reassembles the segmented MADs it receives (the client sees each as one
    /// MAD, its whole payload), and sends the buffers of [`Agent::create_rmpp_send`] and
    /// [`Received::reply_rmpp`] one window at a time. Refused with `EINVAL` for a class that
    /// does not use RMPP.
    pub(crate) fn register_rmpp(
        device: &CStr,
        port: u32,
        reg: Option<&RegReq>,
        client: C,
    ) -> Result<Self> {
        Self::register_inner(device, port, reg, 1, 0, client)
    }

    /// Registers a GSI agent on `port` of `device` that receives the requests `reg` selects
    /// (the responder role). Refused with the C MAD layer's error when the class and methods
    /// are served already, by ib_core or another agent.
    ///
    /// # Examples
    ///
    /// ```ignore
    /// // GETs of vendor class 0x0a, answered in `Client::recv` with `Received::reply`.
    /// let reg = rmad::RegReq { mgmt_class: 0x0a, mgmt_class_version: 1,
    ///                          method_mask: [1 << 1, 0], ..Default::default() };
    /// let agent = rmad::Agent::register_class(c"rxe0", 1, &reg, MyServer::new())?;
    /// ```
    pub(crate) fn register_class(
        device: &CStr,
        port: u32,
        reg: &RegReq,
        client: C,
    ) -> Result<Self> {
        Self::register_inner(device, port, Some(reg), 0, 0, client)
    }

    /// Registers a GSI agent, with `reg` if given, kernel RMPP if `rmpp_version` is 1, and
    /// the `RMAD_RETRY_*` flags `retry_flags`.
    fn register_inner(
        device: &CStr,
        port: u32,
        reg: Option<&RegReq>,
        rmpp_version: u8,
        retry_flags: u32,
        client: C,
    ) -> Result<Self> {
        let client = KBox::into_raw(KBox::new(client, GFP_KERNEL)?);
        let ctx = client.cast::<c_void>();
        // SAFETY: The name is NUL-terminated; the handlers match the C prototypes; `ctx` stays
        // valid until `rmad_unregister_agent` returns (in `drop`).
        let raw = unsafe {
            rmad_register_agent(
                device.as_char_ptr(),
                port,
                1,
                reg.map_or(core::ptr::null(), |r| core::ptr::from_ref(r).cast()),
                rmpp_version,
                Some(send_tramp::<C>),
                Some(recv_tramp::<C>),
                ctx,
                // Dropping the agent must not wait for buffers the client drops later.
                RMAD_DETACH_BUFFERS | retry_flags,
            )
        };
        match from_err_ptr(raw) {
            // INVARIANT: rmad hands `client` to the handlers until unregistration.
            Ok(raw) => Ok(Self { raw, client }),
            Err(e) => {
                // SAFETY: Registration failed, so no handler of this agent runs: the client
                // allocated above is ours alone.
                drop(unsafe { KBox::from_raw(client) });
                Err(e)
            }
        }
    }

    /// The client given at registration.
    pub(crate) fn client(&self) -> &C {
        // SAFETY: The client lives at least as long as the agent (type invariant).
        unsafe { &*self.client }
    }

    /// The agent's `hi_tid`.
    pub(crate) fn hi_tid(&self) -> u32 {
        // SAFETY: rmad validates the handle.
        unsafe { rmad_agent_hi_tid(self.raw) }
    }

    /// Prepares `ah` for sends from this agent (`rmad_resolve_ah`): on RoCE, resolves the
    /// destination's MAC. Optional; process context. `EHOSTUNREACH` when nobody answers for it.
    pub(crate) fn resolve(&self, ah: &Ah) -> Result {
        // SAFETY: rmad validates the handle; `ah` is valid for reads.
        check(unsafe { rmad_resolve_ah(self.raw, ah) })
    }

    /// A zeroed 256-byte send buffer ([`mgmt::MAD_HDR`] header bytes, [`mgmt::MAD_DATA`] data
    /// bytes) for QP `remote_qpn`,
    /// P_Key index 0. Process context.
    pub(crate) fn create_send(&self, remote_qpn: u32) -> Result<SendBuf> {
        create_send(
            self.raw,
            remote_qpn,
            0,
            Shape::Mad(mgmt::MAD_HDR, mgmt::MAD_DATA),
            GFP_KERNEL,
        )
    }

    /// A zeroed RMPP send buffer of a kernel-RMPP agent ([`Agent::register_rmpp`]) for QP
    /// `remote_qpn` with P_Key index `pkey_index`: `hdr_len` header bytes (at least 36, the
    /// RMPP header: for a class, [`data_offset`]) and `data_len` payload bytes cut into
    /// segments ([`SendBuf::rmpp_segment`]); its RMPP header already says DATA, ACTIVE.
    /// Process context.
    pub(crate) fn create_rmpp_send(
        &self,
        remote_qpn: u32,
        pkey_index: u16,
        hdr_len: i32,
        data_len: i32,
    ) -> Result<SendBuf> {
        create_send(
            self.raw,
            remote_qpn,
            pkey_index,
            Shape::Rmpp(hdr_len, data_len),
            GFP_KERNEL,
        )
    }

    /// A zeroed send buffer of `hdr_len` + `data_len` bytes (padded to the MAD size) for QP
    /// `remote_qpn` with P_Key index `pkey_index`, allocated with `flags`: `GFP_KERNEL`, or
    /// `GFP_ATOMIC` or `GFP_NOWAIT` where the caller cannot sleep (then the call is
    /// atomic-safe); other flags are `EINVAL`.
    ///
    /// # Examples
    ///
    /// ```ignore
    /// // From a timer callback: no sleeping allocation.
    /// let mut buf = agent.create_send_with(1, 0, mgmt::MAD_HDR, mgmt::MAD_DATA, GFP_ATOMIC)?;
    /// buf.mad_mut()[1] = rmad::mgmt::CLASS_PERF_MGMT;
    /// ```
    pub(crate) fn create_send_with(
        &self,
        remote_qpn: u32,
        pkey_index: u16,
        hdr_len: u16,
        data_len: u16,
        flags: Flags,
    ) -> Result<SendBuf> {
        create_send(
            self.raw,
            remote_qpn,
            pkey_index,
            Shape::Mad(hdr_len, data_len),
            flags,
        )
    }
}

// SAFETY: An `Agent` is a handle that rmad checks on every call, from any thread, and a
// pointer to its client, which handlers read as `&C` (`C: Sync`) on rmad's threads and which is
// dropped either by the thread that drops the agent or by rmad's (`C: Send`, a bound of
// `Client`): sending the agent moves nothing that is tied to a thread.
unsafe impl<C: Client> Send for Agent<C> {}

// SAFETY: Every method taking `&self` is a call into rmad, which is safe from several threads at
// once, or hands out `&C`, which is `Sync`.
unsafe impl<C: Client> Sync for Agent<C> {}

/// Drops the client of an agent that rmad unregistered asynchronously.
///
/// # Safety
///
/// `client` must be the `C` of an [`Agent`] whose handlers can no longer run, given up by it.
unsafe extern "C" fn release_client<C: Client>(client: *mut c_void) {
    // SAFETY: The caller's promise: the client is ours alone, from `KBox::into_raw`.
    drop(unsafe { KBox::from_raw(client.cast::<C>()) });
}

impl<C: Client> Drop for Agent<C> {
    fn drop(&mut self) {
        // SAFETY: rmad validates the handle; on success it returns once no handler can run
        // any more (it does not wait for buffers: `RMAD_DETACH_BUFFERS`).
        let r = unsafe { rmad_unregister_agent(self.raw) };
        if r == 0 {
            // SAFETY: No handler runs any more (see above): the client is ours alone again.
            drop(unsafe { KBox::from_raw(self.client) });
            return;
        }
        if r == EDEADLK.to_errno() {
            // Inside one of its own handlers: rmad unregisters it in its own thread once this
            // handler returns, then drops the client there, with this module pinned until
            // then (or, if it is going already, with its unload waiting for that), so that no
            // handler ever calls into this module once it is gone. It allocates nothing and
            // fails only for an agent that rmad unregisters already.
            // SAFETY: rmad validates the handle; `release_client::<C>` gets the client once
            // no handler can run (the client is `Send`); `__this_module` is this module,
            // which contains `release_client`.
            let r = unsafe {
                rmad_unregister_agent_async(
                    self.raw,
                    Some(release_client::<C>),
                    self.client.cast(),
                    core::ptr::addr_of!(__this_module).cast_mut().cast(),
                )
            };
            if r == 0 {
                return;
            }
        }
        // Someone else unregisters the agent: rmad itself, at the unload of this module, when
        // the agent outlived its exit (this drop runs in a handler that took it away from
        // there). Its handlers may still run, so the client must stay: leaked, never freed
        // under them.
        pr_warn!("rmad: agent not unregistered ({}); client leaked\n", r);
    }
}

/// GID `index` of `port` of `device`.
pub(crate) fn port_gid(device: &CStr, port: u32, index: i32) -> Result<[u8; 16]> {
    let mut gid = [0u8; 16];
    // SAFETY: The name is NUL-terminated; `gid` has 16 bytes.
    check(unsafe { rmad_port_gid(device.as_char_ptr(), port, index, gid.as_mut_ptr()) })?;
    Ok(gid)
}

/// A send buffer owned by the client; dropping it frees it.
pub(crate) struct SendBuf {
    raw: *mut c_void,
}

impl SendBuf {
    /// The MAD bytes.
    pub(crate) fn mad_mut(&mut self) -> &mut [u8] {
        // SAFETY: rmad validates the handle.
        let (p, len) = unsafe {
            (
                rmad_send_buf_mad(self.raw).cast::<u8>(),
                rmad_send_buf_len(self.raw),
            )
        };
        if p.is_null() {
            return &mut [];
        }
        // SAFETY: The client owns the buffer (`&mut self`), whose MAD is `len` bytes long and
        // stays where it is until the buffer is freed.
        unsafe { core::slice::from_raw_parts_mut(p, usize::try_from(len).unwrap_or(0)) }
    }

    /// The number of RMPP segments of a buffer made by [`Agent::create_rmpp_send`] or
    /// [`Received::reply_rmpp`] and the payload bytes of each: (0, 0) for any other buffer.
    pub(crate) fn seg_count(&self) -> Result<(u32, u32)> {
        let mut size = 0u32;
        // SAFETY: rmad validates the handle; `size` is valid for a write.
        let n = unsafe { rmad_send_buf_seg_count(self.raw, &mut size) };
        let n = u32::try_from(n).map_err(|_| Error::from_errno(n))?;
        Ok((n, if n == 0 { 0 } else { size }))
    }

    /// The payload of RMPP segment `seg_num` (from 1 to the count of
    /// [`SendBuf::seg_count`]), to fill before posting; `None` out of range.
    pub(crate) fn rmpp_segment(&mut self, seg_num: u32) -> Option<&mut [u8]> {
        let (_, size) = self.seg_count().ok()?;
        let n = c_int::try_from(seg_num).ok()?;
        // SAFETY: rmad validates the handle and the number.
        let p = unsafe { rmad_get_rmpp_segment(self.raw, n) };
        if p.is_null() {
            return None;
        }
        let len = usize::try_from(size).ok()?;
        // SAFETY: The client owns the buffer (`&mut self`); the segment is `size` bytes long
        // and stays where it is until the buffer is freed.
        Some(unsafe { core::slice::from_raw_parts_mut(p.cast::<u8>(), len) })
    }

    /// Copies `data` into the segments in order, from the first; `EINVAL` if it does not fit.
    pub(crate) fn fill_segments(&mut self, data: &[u8]) -> Result {
        let (count, size) = self.seg_count()?;
        let size = usize::try_from(size)?;
        if size == 0 || data.len() > size.checked_mul(usize::try_from(count)?).ok_or(EINVAL)? {
            return Err(EINVAL);
        }
        for (n, chunk) in (1u32..).zip(data.chunks(size)) {
            let seg = self.rmpp_segment(n).ok_or(EINVAL)?;
            seg.get_mut(..chunk.len())
                .ok_or(EINVAL)?
                .copy_from_slice(chunk);
        }
        Ok(())
    }

    /// Sets destination, timeout and retries (the context stays 0).
    pub(crate) fn set(&mut self, ah: &Ah, timeout_ms: i32, retries: i32) -> Result {
        self.set_with_context(ah, timeout_ms, retries, 0)
    }

    /// Sets destination, timeout, retries and the buffer's own context, a number the client
    /// reads back with [`SendBuf::context`] or [`Received::matched_context`].
    pub(crate) fn set_with_context(
        &mut self,
        ah: &Ah,
        timeout_ms: i32,
        retries: i32,
        context: usize,
    ) -> Result {
        let ctx = core::ptr::without_provenance_mut::<c_void>(context);
        // SAFETY: rmad validates the handle; `ah` is valid; rmad never dereferences the context.
        check(unsafe { rmad_send_buf_set(self.raw, ah, timeout_ms, retries, ctx) })
    }

    /// Sets the retry rules of the buffer's next posts (a deadline, backoff, one-shot modify).
    ///
    /// # Examples
    ///
    /// ```ignore
    /// // A GET that gives up after 2 s, however many of its 3 retries are left by then.
    /// buf.set(&ah, 500, 3)?;
    /// buf.set_retry(&rmad::Retry { deadline_ms: 2000, ..Default::default() })?;
    /// ```
    pub(crate) fn set_retry(&mut self, retry: &Retry) -> Result {
        // SAFETY: rmad validates the handle.
        check(unsafe { rmad_send_buf_set_retry(self.raw, retry.flags(), retry.deadline_ms) })
    }

    /// The context set with [`SendBuf::set_with_context`].
    pub(crate) fn context(&self) -> usize {
        // SAFETY: rmad validates the handle.
        unsafe { rmad_send_buf_context(self.raw) }.addr()
    }

    /// Before a post, the retries set; in and after its completion, the retransmissions the
    /// last post performed.
    pub(crate) fn retries(&self) -> Result<u32> {
        // SAFETY: rmad validates the handle.
        let r = unsafe { rmad_send_buf_retries(self.raw) };
        u32::try_from(r).map_err(|_| Error::from_errno(r))
    }

    /// Posts the buffer; on failure it comes back with the error.
    pub(crate) fn post(self) -> core::result::Result<Posted, (Error, SendBuf)> {
        let mut post = 0u64;
        // SAFETY: rmad validates the handle; `post` is valid for a write.
        let r = unsafe { rmad_post_send(self.raw, &mut post) };
        if r != 0 {
            return Err((Error::from_errno(r), self));
        }
        let buf = self.raw;
        // The engine owns the buffer now: do not free it.
        core::mem::forget(self);
        Ok(Posted { buf, post })
    }
}

// SAFETY: A `SendBuf` is a handle that rmad checks on every call, from any thread; its bytes are
// only reached through `&mut self`.
unsafe impl Send for SendBuf {}

impl Drop for SendBuf {
    fn drop(&mut self) {
        // SAFETY: rmad validates the handle.
        let _ = unsafe { rmad_free_send_mad(self.raw) };
    }
}

/// The handle of one post of a send buffer: modify or cancel that post. Stale once its
/// handler has run (`EINVAL`), even if the buffer is posted again.
pub(crate) struct Posted {
    buf: *mut c_void,
    post: u64,
}

// SAFETY: A `Posted` is a pair of numbers that rmad checks on every call, from any thread.
unsafe impl Send for Posted {}

// SAFETY: As above: modify and cancel are safe from several threads at once.
unsafe impl Sync for Posted {}

impl Posted {
    /// The id of this post, as the completion's [`SendDone::post_id`] names it.
    pub(crate) fn id(&self) -> u64 {
        self.post
    }

    /// `ib_modify_mad`, for this post only.
    pub(crate) fn modify(&self, timeout_ms: i32) -> Result {
        // SAFETY: rmad validates the handle and the post, stale or not.
        check(unsafe { rmad_modify_post(self.buf, self.post, timeout_ms) })
    }

    /// `ib_cancel_mad`.
    pub(crate) fn cancel(&self) -> Result {
        self.modify(0)
    }
}

/// A MAD as its receive handler sees it: valid during the call, unless kept.
pub(crate) struct Received<'a> {
    agent: *mut c_void,
    send: *mut c_void,
    matched: bool,
    wc: &'a RecvWc,
    mad: &'a [u8],
}

impl Received<'_> {
    /// Whether it is a response matched to one of the agent's sends (else a request).
    pub(crate) fn matched(&self) -> bool {
        self.matched
    }

    /// The MAD bytes.
    pub(crate) fn mad(&self) -> &[u8] {
        self.mad
    }

    /// The context ([`SendBuf::set_with_context`]) of the send this response matched; `None`
    /// for a request.
    pub(crate) fn matched_context(&self) -> Option<usize> {
        // SAFETY: rmad validates the handle (the matched send is outstanding during the call).
        self.matched
            .then(|| unsafe { rmad_send_buf_context(self.send) }.addr())
    }

    /// The QP it came from.
    pub(crate) fn src_qp(&self) -> u32 {
        self.wc.src_qp
    }

    /// The hop limit, traffic class and flow label of its GRH as it arrived (on RoCEv2 over
    /// IPv4 the TTL and TOS, flow label 0), if it had one.
    pub(crate) fn grh(&self) -> Option<(u8, u8, u32)> {
        (self.wc.has_grh != 0).then_some((
            self.wc.hop_limit,
            self.wc.traffic_class,
            self.wc.flow_label,
        ))
    }

    /// Keeps the MAD past the handler (`rmad_keep_recv_mad`): it is the client's until the
    /// returned buffer is dropped, which frees it. `keep` consumes the `Received`, so no view
    /// of the MAD taken from it ([`Received::mad`]) can be used once the buffer may be freed:
    /// read the kept MAD through [`RecvBuf::mad`].
    pub(crate) fn keep(self) -> Result<RecvBuf> {
        // SAFETY: rmad validates the handle.
        check(unsafe { rmad_keep_recv_mad(self.wc.recv_buf) })?;
        Ok(RecvBuf {
            raw: self.wc.recv_buf,
            src_qp: self.wc.src_qp,
            pkey_index: self.wc.pkey_index,
        })
    }

    /// A send buffer that answers this request from the agent that received it: addressed
    /// back to its sender (`ib_create_ah_from_wc`), with the request's header and the response
    /// method (GET and SET: GetResp), no timeout. Process context.
    pub(crate) fn reply(&self) -> Result<SendBuf> {
        reply_buf(
            self.agent,
            self.wc.recv_buf,
            self.wc.src_qp,
            self.wc.pkey_index,
            self.mad,
            None,
        )
    }

    /// As [`Received::reply`], for a kernel-RMPP agent: an RMPP answer carrying `data_len`
    /// payload bytes in segments after the class's headers ([`data_offset`]), to fill with
    /// [`SendBuf::fill_segments`]; each window of it is sent again at most `retries` times
    /// while its ACK does not come. Process context.
    pub(crate) fn reply_rmpp(&self, data_len: i32, retries: i32) -> Result<SendBuf> {
        reply_buf(
            self.agent,
            self.wc.recv_buf,
            self.wc.src_qp,
            self.wc.pkey_index,
            self.mad,
            Some((data_len, retries)),
        )
    }
}

/// A received MAD the client keeps; dropping it frees it (`rmad_free_recv_mad`), also after
/// its agent is gone.
pub(crate) struct RecvBuf {
    raw: *mut c_void,
    src_qp: u32,
    pkey_index: u16,
}

impl RecvBuf {
    /// The MAD bytes.
    pub(crate) fn mad(&self) -> &[u8] {
        let mut len = 0u32;
        // SAFETY: rmad validates the handle; `len` is valid for a write.
        let p = unsafe { rmad_recv_buf_mad(self.raw, &mut len) };
        if p.is_null() {
            return &[];
        }
        // SAFETY: The MAD stays valid for `len` bytes until the buffer is freed, which only
        // `drop` does (the buffer is the client's alone).
        unsafe { core::slice::from_raw_parts(p.cast::<u8>(), usize::try_from(len).unwrap_or(0)) }
    }

    /// As [`Received::reply`], from `agent` (which must be on the port the MAD arrived at).
    pub(crate) fn reply<C: Client>(&self, agent: &Agent<C>) -> Result<SendBuf> {
        reply_buf(
            agent.raw,
            self.raw,
            self.src_qp,
            self.pkey_index,
            self.mad(),
            None,
        )
    }
}

// SAFETY: A `RecvBuf` is a handle that rmad checks on every call, from any thread; the bytes it
// lends out are the buffer's until `drop` frees them, whichever thread drops it.
unsafe impl Send for RecvBuf {}

// SAFETY: Its `&self` methods only read the MAD, which nobody writes, or call into rmad.
unsafe impl Sync for RecvBuf {}

impl Drop for RecvBuf {
    fn drop(&mut self) {
        // SAFETY: rmad validates the handle.
        let _ = unsafe { rmad_free_recv_mad(self.raw) };
    }
}

/// Where the data of a MAD of `mgmt_class` starts (`ib_get_mad_data_offset`): 24, 40 for
/// vendor classes with an OUI, 56 for subnet administration.
pub(crate) fn data_offset(mgmt_class: u8) -> i32 {
    // SAFETY: A pure function of its argument.
    unsafe { rmad_get_mad_data_offset(mgmt_class) }
}

/// A response to the request `mad` (handle `recv`) from `agent`: see [`Received::reply`]; an
/// RMPP answer if `rmpp` gives its (payload bytes, retries).
fn reply_buf(
    agent: *mut c_void,
    recv: *mut c_void,
    src_qp: u32,
    pkey_index: u16,
    mad: &[u8],
    rmpp: Option<(i32, i32)>,
) -> Result<SendBuf> {
    let mut ah = Ah::default();
    // SAFETY: rmad validates the handles; `ah` is valid for a write.
    check(unsafe { rmad_recv_buf_ah(agent, recv, &mut ah) })?;
    let shape = match rmpp {
        Some((data_len, _)) => Shape::Rmpp(data_offset(*mad.get(1).ok_or(EINVAL)?), data_len),
        None => Shape::Mad(mgmt::MAD_HDR, mgmt::MAD_DATA),
    };
    let mut buf = create_send(agent, src_qp, pkey_index, shape, GFP_KERNEL)?;
    let hdr = mad.get(..24).ok_or(EINVAL)?;
    let out = buf.mad_mut();
    out.get_mut(..24).ok_or(EINVAL)?.copy_from_slice(hdr);
    // Only the common header: the RMPP header of an RMPP answer stays as rmad made it.
    if let Some(m) = out.get_mut(3) {
        // GET and SET are answered by GetResp; every other request by its response method.
        *m = if *m == 0x01 || *m == 0x02 {
            0x81
        } else {
            *m | 0x80
        };
    }
    buf.set(&ah, 0, rmpp.map_or(0, |(_, retries)| retries))?;
    Ok(buf)
}

/// The lengths of a send buffer: (header, data) bytes of one MAD, or of an RMPP transfer.
enum Shape {
    Mad(u16, u16),
    Rmpp(i32, i32),
}

/// A zeroed send buffer of `agent` for QP `remote_qpn`, of the lengths `shape` gives.
fn create_send(
    agent: *mut c_void,
    remote_qpn: u32,
    pkey_index: u16,
    shape: Shape,
    flags: Flags,
) -> Result<SendBuf> {
    let (rmpp, hdr, data) = match shape {
        Shape::Mad(h, d) => (0, c_int::from(h), c_int::from(d)),
        Shape::Rmpp(h, d) => (1, h, d),
    };
    // The kernel crate keeps a `Flags`'s bits to itself: name the ones rmad's callers use.
    let gfp = if flags == GFP_KERNEL {
        kernel::bindings::GFP_KERNEL
    } else if flags == GFP_ATOMIC {
        kernel::bindings::GFP_ATOMIC
    } else if flags == GFP_NOWAIT {
        kernel::bindings::GFP_NOWAIT
    } else {
        return Err(EINVAL);
    };
    // SAFETY: rmad validates the handle and the lengths.
    let raw =
        unsafe { rmad_create_send_mad(agent, remote_qpn, pkey_index, rmpp, hdr, data, gfp, 1) };
    Ok(SendBuf {
        raw: from_err_ptr(raw)?,
    })
}
