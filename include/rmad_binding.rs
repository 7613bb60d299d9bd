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

use core::ffi::c_void;
use kernel::{
    error::from_err_ptr,
    ffi::{
        c_char,
        c_int, //
    },
    prelude::*,
};

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

/// `struct rmad_send_wc`.
#[repr(C)]
struct SendWc {
    send_buf: *mut c_void,
    post_id: u64,
    context: *mut c_void,
    status: c_int,
    vendor_err: u32,
}

/// `struct rmad_recv_wc`.
#[repr(C)]
struct RecvWc {
    mad: *const c_void,
    context: *mut c_void,
    mad_len: u32,
    src_qp: u32,
    slid: u16,
}

// The layouts of `include/rmad.h` (rmad checks the same numbers on its side).
const _: () = {
    use core::mem::{
        offset_of,
        size_of, //
    };
    assert!(size_of::<Ah>() == 28 && offset_of!(Ah, dgid) == 5);
    assert!(offset_of!(Ah, hop_limit) == 21 && offset_of!(Ah, sl) == 23);
    assert!(offset_of!(Ah, flow_label) == 24);
    assert!(size_of::<SendWc>() == 32 && offset_of!(SendWc, context) == 16);
    assert!(offset_of!(SendWc, status) == 24 && offset_of!(SendWc, vendor_err) == 28);
    assert!(size_of::<RecvWc>() == 32 && offset_of!(RecvWc, context) == 8);
    assert!(offset_of!(RecvWc, mad_len) == 16 && offset_of!(RecvWc, slid) == 24);
};

type SendFn = Option<unsafe extern "C" fn(*mut c_void, *mut SendWc)>;
type RecvFn = Option<unsafe extern "C" fn(*mut c_void, *mut c_void, *const RecvWc)>;

extern "C" {
    fn rmad_register_agent(
        device: *const c_char,
        port: u32,
        qp_type: c_int,
        reg_req: *const c_void,
        rmpp_version: u8,
        send_handler: SendFn,
        recv_handler: RecvFn,
        context: *mut c_void,
        flags: u32,
    ) -> *mut c_void;
    fn rmad_unregister_agent(agent: *mut c_void) -> c_int;
    fn rmad_agent_context(agent: *mut c_void) -> *mut c_void;
    fn rmad_agent_hi_tid(agent: *mut c_void) -> u32;
    fn rmad_port_gid(device: *const c_char, port: u32, index: c_int, gid: *mut u8) -> c_int;
    fn rmad_create_send_mad(
        agent: *mut c_void,
        remote_qpn: u32,
        pkey_index: u16,
        rmpp_active: c_int,
        hdr_len: c_int,
        data_len: c_int,
        gfp_mask: kernel::bindings::gfp_t,
        base_version: u8,
    ) -> *mut c_void;
    fn rmad_free_send_mad(buf: *mut c_void) -> c_int;
    fn rmad_send_buf_mad(buf: *mut c_void) -> *mut c_void;
    fn rmad_send_buf_set(
        buf: *mut c_void,
        ah: *const Ah,
        timeout_ms: c_int,
        retries: c_int,
        context: *mut c_void,
    ) -> c_int;
    fn rmad_post_send(buf: *mut c_void, post_id: *mut u64) -> c_int;
    fn rmad_modify_post(buf: *mut c_void, post_id: u64, timeout_ms: c_int) -> c_int;
}

/// Turns an errno return into a `Result`.
fn check(r: c_int) -> Result {
    kernel::error::to_result(r)
}

/// What a client does with its agent's completions. Called without rmad locks, in process
/// context; may sleep.
pub(crate) trait Client: Sync + 'static {
    /// A send completed (`status` is an `enum ib_wc_status`); the buffer is the client's again.
    fn send_done(&self, buf: SendBuf, status: i32);
    /// A MAD arrived: a response to one of the client's sends (`matched`), or a request.
    fn recv(&self, _matched: bool, _mad: &[u8]) {}
}

/// A registered agent; dropping it unregisters it (after every buffer is freed).
///
/// # Invariants
///
/// `client` is the context rmad hands to this agent's handlers: it stays allocated until
/// rmad's unregistration has returned successfully, and is leaked if it never does.
pub(crate) struct Agent<C: Client> {
    raw: *mut c_void,
    client: *mut C,
}

/// The send handler rmad calls for agents of client type `C`.
unsafe extern "C" fn send_tramp<C: Client>(_agent: *mut c_void, wc: *mut SendWc) {
    // SAFETY: rmad passes a valid completion for the duration of the call.
    let wc = unsafe { &*wc };
    // SAFETY: The context is the `C` that the `Agent` keeps alive until unregistration has
    // returned, after which no handler runs (invariant of `Agent`).
    let client = unsafe { &*wc.context.cast::<C>() };
    client.send_done(SendBuf { raw: wc.send_buf }, wc.status);
}

/// The receive handler rmad calls for agents of client type `C`.
unsafe extern "C" fn recv_tramp<C: Client>(
    _agent: *mut c_void,
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
    client.recv(!buf.is_null(), mad);
}

impl<C: Client> Agent<C> {
    /// Registers a GSI agent on `port` of `device` (no class registration).
    pub(crate) fn register(device: &CStr, port: u32, client: C) -> Result<Self> {
        let client = KBox::into_raw(KBox::new(client, GFP_KERNEL)?);
        let ctx = client.cast::<c_void>();
        // SAFETY: The name is NUL-terminated; the handlers match the C prototypes; `ctx` stays
        // valid until `rmad_unregister_agent` returns (in `drop`).
        let raw = unsafe {
            rmad_register_agent(
                device.as_char_ptr(),
                port,
                1,
                core::ptr::null(),
                0,
                Some(send_tramp::<C>),
                Some(recv_tramp::<C>),
                ctx,
                0,
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

    /// A zeroed 256-byte send buffer for QP `remote_qpn`.
    pub(crate) fn create_send(&self, remote_qpn: u32) -> Result<SendBuf> {
        // SAFETY: rmad validates the handle.
        let raw = unsafe {
            rmad_create_send_mad(
                self.raw,
                remote_qpn,
                0,
                0,
                24,
                232,
                kernel::bindings::GFP_KERNEL,
                1,
            )
        };
        Ok(SendBuf {
            raw: from_err_ptr(raw)?,
        })
    }
}

impl<C: Client> Drop for Agent<C> {
    fn drop(&mut self) {
        // SAFETY: rmad validates the handle; on success it returns once no handler can run
        // any more.
        let r = unsafe { rmad_unregister_agent(self.raw) };
        if r == 0 {
            // SAFETY: No handler runs any more (see above): the client is ours alone again.
            drop(unsafe { KBox::from_raw(self.client) });
        } else {
            // Dropped inside one of its own handlers (-EDEADLK): the handlers may still run, so
            // the client must stay; it is leaked, never freed under them.
            pr_warn!(
                "rmad: agent dropped from its own handler ({}); client leaked\n",
                r
            );
        }
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
        // SAFETY: The client owns the buffer, whose MAD is 256 bytes long.
        unsafe {
            let p = rmad_send_buf_mad(self.raw).cast::<u8>();
            if p.is_null() {
                &mut []
            } else {
                core::slice::from_raw_parts_mut(p, 256)
            }
        }
    }

    /// Sets destination, timeout and retries.
    pub(crate) fn set(&mut self, ah: &Ah, timeout_ms: i32, retries: i32) -> Result {
        // SAFETY: rmad validates the handle; `ah` is valid.
        check(unsafe {
            rmad_send_buf_set(self.raw, ah, timeout_ms, retries, core::ptr::null_mut())
        })
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

impl Posted {
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
