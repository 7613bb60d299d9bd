// SPDX-License-Identifier: GPL-2.0

//! The verbs transport: MADs through a real RDMA device.
//!
//! ib_core's own MAD layer owns QP0 and QP1 of every port, so rmad cannot take QP1 over.
//! Instead, for each port that has a general services QP, rmad opens a private UD QP (with its
//! PD, CQ and receive buffers, in `verbs_shim.c`) and sends its MADs from there to the remote
//! QP1 with the GSI Q_Key (`IB_QP1_QKEY`). A responder answers to the source QP of a request,
//! so responses come back to the private QP, where rmad matches them. Unsolicited requests to
//! this port arrive at QP1 and stay with ib_core: agents on a verbs port can send requests
//! and receive their responses, but do not receive requests.
//!
//! Devices are discovered as an `ib_client`; each [`VerbsPort`] is a [`Transport`] that
//! agents register on, all sharing one engine ([`verbs_engine`]).

use crate::{
    agent::Agent,
    engine::Engine,
    send::{
        Gid,
        SendRecord, //
    },
    state::WcStatus,
    transport::{
        PortAttr,
        RecvMad,
        RecvWc,
        SendWr,
        Transport, //
    },
};
use core::ffi::c_void;
use kernel::{
    ffi::{
        c_char,
        c_int, //
    },
    new_spinlock,
    prelude::*,
    str::CString,
    sync::{
        Arc,
        SpinLock, //
    },
};

/// `struct ib_device`, opaque.
#[repr(C)]
pub(crate) struct IbDevice {
    _p: [u8; 0],
}

/// `struct rmad_vport` of the shim, opaque.
#[repr(C)]
pub(crate) struct Vport {
    _p: [u8; 0],
}

/// How a MAD arrived (`struct rmad_recv_info` of the shim).
#[repr(C)]
pub(crate) struct VerbsRecvInfo {
    src_qp: u32,
    slid: u32,
    pkey_index: u16,
    dlid_path_bits: u8,
    has_grh: u8,
    sgid: Gid,
    dgid: Gid,
}

extern "C" {
    fn rmad_shim_register_client() -> c_int;
    fn rmad_shim_unregister_client();
    fn rmad_shim_dev_name(dev: *mut IbDevice) -> *const c_char;
    fn rmad_shim_port_count(dev: *mut IbDevice) -> u32;
    fn rmad_shim_port_has_gsi(dev: *mut IbDevice, port: u32) -> c_int;
    fn rmad_shim_query_port(
        dev: *mut IbDevice,
        port: u32,
        lid: *mut u32,
        lmc: *mut u8,
        has_smi: *mut u8,
    ) -> c_int;
    fn rmad_shim_query_gid(dev: *mut IbDevice, port: u32, index: c_int, gid: *mut u8) -> c_int;
    fn rmad_shim_port_mac(dev: *mut IbDevice, port: u32, mac: *mut u8) -> c_int;
    fn rmad_shim_vport_open(dev: *mut IbDevice, port: u32, ctx: *mut c_void) -> *mut Vport;
    fn rmad_shim_vport_close(vp: *mut Vport);
    fn rmad_shim_test_responder_start(dev: *mut IbDevice, port: u32, class: u8) -> *mut c_void;
    fn rmad_shim_test_responder_stop(responder: *mut c_void);
    fn rmad_shim_bench_ib_cancel(
        dev: *mut IbDevice,
        port: u32,
        n: u32,
        order: *const u32,
        dgid: *const u8,
        dmac: *const u8,
    ) -> u64;
    fn rmad_shim_vport_send(
        vp: *mut Vport,
        mad: *const u8,
        len: u32,
        wr_id: u64,
        remote_qpn: u32,
        pkey_index: u16,
        dlid: u32,
        src_path_bits: u8,
        has_grh: u8,
        dgid: *const u8,
        sgid_index: u8,
        dmac: *const u8,
    ) -> c_int;
}

/// One port of an RDMA device, with rmad's private QP on it.
///
/// # Invariants
///
/// `dev` is a registered `ib_device` for as long as the port is in [`VERBS`]; `vp` is the
/// shim's open port until [`VerbsPort::close`] sets it to null (under `vp`'s lock).
#[pin_data]
pub(crate) struct VerbsPort {
    dev: *mut IbDevice,
    /// Port number.
    pub(crate) port: u8,
    attr: PortAttr,
    mac: [u8; 6],
    name: CString,
    engine: Arc<Engine>,
    /// The shim's port; held while a transmission is handed to it, so that closing waits.
    #[pin]
    vp: SpinLock<*mut Vport>,
    /// Transmissions waiting for room in the send queue, oldest first (the C layer's QP
    /// overflow list, mad-spec.md §2.4.2). Lock order: `vp`, then `overflow`.
    #[pin]
    overflow: SpinLock<KVec<Pending>>,
}

/// A transmission waiting in the overflow list.
struct Pending {
    mad: KVec<u8>,
    /// The completion's tag, as handed to the shim (see [`VerbsPort::post_send`]).
    wr_id: *mut (Arc<SendRecord>, u64),
    remote_qpn: u32,
    pkey_index: u16,
    ah: crate::send::Address,
}

/// The errno the shim returns when the send queue is full.
const SQ_FULL: c_int = -(kernel::bindings::EBUSY as c_int);

// SAFETY: The raw pointers are handles to kernel objects usable from any thread; the shim
// synchronises its own state.
unsafe impl Send for VerbsPort {}
// SAFETY: As above; `vp` is only read and written under its lock.
unsafe impl Sync for VerbsPort {}

kernel::sync::global_lock! {
    // SAFETY: Initialized by `init` in the module initializer before any other use.
    unsafe(uninit) static VERBS: Mutex<Option<VerbsState>> = None;
}

/// The verbs side of the module: one engine, and the open ports.
pub(crate) struct VerbsState {
    engine: Arc<Engine>,
    ports: KVec<Arc<VerbsPort>>,
}

/// Starts the verbs transport: creates its engine and registers the `ib_client`, which opens
/// a private QP on every port of every RDMA device, present and future.
pub(crate) fn init() -> Result {
    // SAFETY: Called exactly once, from the module initializer.
    unsafe { VERBS.init() };
    let engine = Engine::new(c"rmad_verbs", c"rmad_verbs_cq")?;
    *VERBS.lock() = Some(VerbsState {
        engine,
        ports: KVec::new(),
    });
    // SAFETY: Plain call; the callbacks it triggers are defined below.
    let r = kernel::error::to_result(unsafe { rmad_shim_register_client() });
    if r.is_err() {
        // Nothing was registered: drop the engine again.
        if let Some(s) = VERBS.lock().take() {
            s.engine.quiesce();
        }
    }
    r
}

/// Stops the verbs transport: every device is removed (closing its ports), then the engine
/// goes.
pub(crate) fn exit() {
    // SAFETY: Plain call; it returns once every `remove` callback has run.
    unsafe { rmad_shim_unregister_client() };
    let state = VERBS.lock().take();
    if let Some(s) = state {
        s.engine.quiesce();
    }
}

/// The engine that agents on verbs ports use.
pub(crate) fn verbs_engine() -> Option<Arc<Engine>> {
    VERBS.lock().as_ref().map(|s| s.engine.clone())
}

/// The open port `port` of the device named `name`.
pub(crate) fn find_port(name: &CStr, port: u8) -> Option<Arc<VerbsPort>> {
    let g = VERBS.lock();
    g.as_ref()?
        .ports
        .iter()
        .find(|p| p.port == port && p.name.to_bytes() == name.to_bytes())
        .cloned()
}

impl VerbsPort {
    /// Opens port `port` of `dev`.
    fn open(dev: *mut IbDevice, port: u32, engine: &Arc<Engine>) -> Result<Arc<Self>> {
        let (mut lid, mut lmc, mut has_smi) = (0u32, 0u8, 0u8);
        // SAFETY: `dev` is a registered device (we are in its `add` callback).
        kernel::error::to_result(unsafe {
            rmad_shim_query_port(dev, port, &mut lid, &mut lmc, &mut has_smi)
        })?;
        let mut mac = [0u8; 6];
        // SAFETY: As above; `mac` has room for a MAC address. A port without a netdev (plain
        // InfiniBand) keeps a zero MAC, which it never needs.
        let _ = unsafe { rmad_shim_port_mac(dev, port, mac.as_mut_ptr()) };
        // SAFETY: The device name is a NUL-terminated string that lives as long as `dev`.
        let name = CString::try_from(unsafe { CStr::from_char_ptr(rmad_shim_dev_name(dev)) })?;
        let port_num = u8::try_from(port).map_err(|_| EINVAL)?;
        let this = Arc::pin_init(
            pin_init!(VerbsPort {
                dev,
                port: port_num,
                attr: PortAttr {
                    has_smi: has_smi != 0,
                    has_cm: true,
                    lid: u16::try_from(lid).unwrap_or(0),
                    lmc,
                },
                mac,
                name,
                engine: engine.clone(),
                vp <- new_spinlock!(core::ptr::null_mut(), "VerbsPort::vp"),
                overflow <- new_spinlock!(KVec::new(), "VerbsPort::overflow"),
            }),
            GFP_KERNEL,
        )?;
        let ctx = Arc::as_ptr(&this).cast_mut().cast::<c_void>();
        // SAFETY: `dev` is registered; `ctx` stays valid until the port is closed, because the
        // port is kept in `VERBS` (a reference) until after `close`.
        let vp = unsafe { rmad_shim_vport_open(dev, port, ctx) };
        let vp = kernel::error::from_err_ptr(vp)?;
        *this.vp.lock() = vp;
        Ok(this)
    }

    /// Closes the private QP. New transmissions fail with `ENODEV` from here on; every send of
    /// the agents on this port is cancelled, so that each one's handler reports `WR_FLUSH_ERR`
    /// exactly once; transmissions still on the QP complete (flushed) before this returns.
    fn close(&self) {
        let vp = core::mem::replace(&mut *self.vp.lock(), core::ptr::null_mut());
        let me = core::ptr::from_ref(self).cast::<()>();
        if let Ok(agents) = self.engine.agents() {
            for a in agents.iter().filter(|a| a.uses_transport(me)) {
                a.cancel_all();
            }
        }
        // SAFETY: `vp` was returned by `rmad_shim_vport_open` and is closed exactly once (it is
        // replaced by null under the lock).
        unsafe { rmad_shim_vport_close(vp) };
        self.flush_overflow();
    }

    /// Registers, for tests, an agent in ib_core's own MAD layer on this port that answers GET
    /// requests of `class` with a GET_RESP of status 0; `None` if ib_core refused it.
    pub(crate) fn start_test_responder(&self, class: u8) -> Option<TestResponder> {
        // SAFETY: `dev` is registered (type invariant).
        let r = unsafe { rmad_shim_test_responder_start(self.dev, u32::from(self.port), class) };
        (!r.is_null()).then_some(TestResponder(r))
    }

    /// Benchmark: the C MAD layer's `ib_cancel_mad` on `order.len()` sends outstanding on
    /// this port's QP1, cancelled in `order`; total nanoseconds, `None` on failure.
    pub(crate) fn bench_ib_cancel(&self, order: &[u32]) -> Option<u64> {
        let n = u32::try_from(order.len()).ok()?;
        let gid = self.gid(self.port, 1)?;
        // SAFETY: `dev` is registered (type invariant); `order` holds `n` indices below `n`;
        // `gid` and `mac` are 16 and 6 bytes.
        let t = unsafe {
            rmad_shim_bench_ib_cancel(
                self.dev,
                u32::from(self.port),
                n,
                order.as_ptr(),
                gid.as_ptr(),
                self.mac.as_ptr(),
            )
        };
        (t != 0).then_some(t)
    }

    /// The device's name.
    pub(crate) fn name(&self) -> &CStr {
        &self.name
    }
}

impl Transport for VerbsPort {
    fn port_attr(&self, port: u8) -> Option<PortAttr> {
        (port == self.port).then_some(self.attr)
    }

    fn gid(&self, port: u8, index: u8) -> Option<Gid> {
        if port != self.port {
            return None;
        }
        let mut gid = [0u8; 16];
        // SAFETY: `dev` is registered (type invariant); `gid` has 16 bytes.
        let r = unsafe {
            rmad_shim_query_gid(
                self.dev,
                u32::from(port),
                c_int::from(index),
                gid.as_mut_ptr(),
            )
        };
        (r == 0).then_some(gid)
    }

    fn post_send(&self, _port: u8, wr: SendWr<'_>) -> Result {
        let vp = self.vp.lock();
        if vp.is_null() {
            return Err(ENODEV);
        }
        // The completion names the send through a small allocation that the completion frees.
        let wr_id = KBox::into_raw(KBox::new((wr.rec.clone(), wr.gen), GFP_ATOMIC)?);
        // FIFO: once something waits for room, everything queues behind it.
        let r = if self.overflow.lock().is_empty() {
            // SAFETY: `*vp` is open (non-null under its lock, which is held).
            unsafe { self.send_raw(*vp, wr.mad, wr_id, wr.remote_qpn, wr.pkey_index, wr.ah) }
        } else {
            SQ_FULL
        };
        if r == SQ_FULL {
            let mut mad = KVec::new();
            let queued = mad
                .extend_from_slice(wr.mad, GFP_ATOMIC)
                .map_err(|_| ENOMEM)
                .and_then(|()| {
                    self.overflow
                        .lock()
                        .push(
                            Pending {
                                mad,
                                wr_id,
                                remote_qpn: wr.remote_qpn,
                                pkey_index: wr.pkey_index,
                                ah: wr.ah,
                            },
                            GFP_ATOMIC,
                        )
                        .map_err(|_| ENOMEM)
                });
            if let Err(e) = queued {
                // SAFETY: The shim did not take `wr_id`; reclaim it.
                drop(unsafe { KBox::from_raw(wr_id) });
                return Err(e);
            }
            return Ok(());
        }
        if r != 0 {
            // SAFETY: The shim did not take `wr_id`; reclaim it.
            drop(unsafe { KBox::from_raw(wr_id) });
            return Err(Error::from_errno(r));
        }
        Ok(())
    }
}

impl VerbsPort {
    /// Hands one transmission to the shim; returns its errno.
    ///
    /// # Safety
    ///
    /// `vp` must be this port's open shim port, with `self.vp` locked by the caller.
    unsafe fn send_raw(
        &self,
        vp: *mut Vport,
        mad: &[u8],
        wr_id: *mut (Arc<SendRecord>, u64),
        remote_qpn: u32,
        pkey_index: u16,
        ah: crate::send::Address,
    ) -> c_int {
        let (has_grh, dgid, sgid_index) = match ah.grh {
            Some(g) => (1u8, g.dgid, g.sgid_index),
            None => (0u8, [0u8; 16], 0u8),
        };
        let Ok(len) = u32::try_from(mad.len()) else {
            return EINVAL.to_errno();
        };
        // SAFETY: `vp` is open (caller's promise); the buffers are valid for their lengths; on
        // success the shim hands `wr_id` back exactly once, to `rmad_rust_send_done`.
        unsafe {
            rmad_shim_vport_send(
                vp,
                mad.as_ptr(),
                len,
                // A pointer always fits the 64-bit work-request id.
                wr_id.expose_provenance() as u64,
                remote_qpn,
                pkey_index,
                u32::from(ah.dlid),
                ah.src_path_bits,
                has_grh,
                dgid.as_ptr(),
                sgid_index,
                // RoCE: rmad reaches its own port only (the destination MAC is this port's).
                self.mac.as_ptr(),
            )
        }
    }

    /// A send-queue slot was freed: the oldest waiting transmissions go out. A transmission
    /// the shim refuses completes with `LOC_QP_OP_ERR` (mad-spec.md §2.4.3 step 5).
    fn drain_overflow(&self) {
        let mut failed: KVec<*mut (Arc<SendRecord>, u64)> = KVec::new();
        {
            let vp = self.vp.lock();
            loop {
                let Some(p) = ({
                    let mut o = self.overflow.lock();
                    if o.is_empty() {
                        None
                    } else {
                        o.remove(0).ok()
                    }
                }) else {
                    break;
                };
                let r = if vp.is_null() {
                    ENODEV.to_errno()
                } else {
                    // SAFETY: `*vp` is open and locked.
                    unsafe { self.send_raw(*vp, &p.mad, p.wr_id, p.remote_qpn, p.pkey_index, p.ah) }
                };
                if r == SQ_FULL {
                    let mut o = self.overflow.lock();
                    if o.insert_within_capacity(0, p).is_err() {
                        pr_warn!("verbs: lost an overflow transmission\n");
                    }
                    break;
                }
                if r != 0 && failed.push(p.wr_id, GFP_ATOMIC).is_err() {
                    pr_warn!("verbs: lost a failed transmission\n");
                }
            }
        }
        // Completed outside the port's locks: agent locks come first.
        for wr_id in failed {
            // SAFETY: The shim did not take `wr_id`; reclaim it.
            let (rec, gen) = KBox::into_inner(unsafe { KBox::from_raw(wr_id) });
            Agent::send_completed(&rec, gen, WcStatus::LocQpOpErr, 0);
        }
    }

    /// Flushes every waiting transmission (the port is closing).
    fn flush_overflow(&self) {
        let waiting = core::mem::take(&mut *self.overflow.lock());
        for p in waiting {
            // SAFETY: The shim never took `wr_id`; reclaim it.
            let (rec, gen) = KBox::into_inner(unsafe { KBox::from_raw(p.wr_id) });
            Agent::send_completed(&rec, gen, WcStatus::WrFlushErr, 0);
        }
    }
}

/// An ib_core agent that answers GETs (see [`VerbsPort::start_test_responder`]); dropping it
/// unregisters it.
pub(crate) struct TestResponder(*mut c_void);

impl Drop for TestResponder {
    fn drop(&mut self) {
        // SAFETY: The pointer came from `rmad_shim_test_responder_start` and is released once.
        unsafe { rmad_shim_test_responder_stop(self.0) };
    }
}

/// The shim's report that a device appeared.
///
/// # Safety
///
/// Only called by the shim's `ib_client` `add` callback, with a registered device.
#[no_mangle]
unsafe extern "C" fn rmad_rust_device_add(dev: *mut IbDevice) {
    let Some(engine) = verbs_engine() else {
        return;
    };
    // SAFETY: `dev` is registered (caller's promise).
    let count = unsafe { rmad_shim_port_count(dev) };
    for port in 1..=count {
        // SAFETY: As above.
        if unsafe { rmad_shim_port_has_gsi(dev, port) } == 0 {
            continue;
        }
        match VerbsPort::open(dev, port, &engine) {
            Ok(p) => {
                pr_info!(
                    "verbs: {}/{} open\n",
                    p.name().to_str().unwrap_or("?"),
                    port
                );
                let mut g = VERBS.lock();
                if let Some(s) = g.as_mut() {
                    if let Err(e) = s.ports.push(p.clone(), GFP_KERNEL) {
                        drop(g);
                        let _ = e;
                        p.close();
                    }
                }
            }
            Err(e) => pr_warn!("verbs: cannot open port {}: {:?}\n", port, e),
        }
    }
}

/// The shim's report that a device is going away: its ports are closed.
///
/// # Safety
///
/// Only called by the shim's `ib_client` `remove` callback.
#[no_mangle]
unsafe extern "C" fn rmad_rust_device_remove(dev: *mut IbDevice) {
    loop {
        let p = {
            let mut g = VERBS.lock();
            let Some(s) = g.as_mut() else {
                return;
            };
            let Some(i) = s.ports.iter().position(|p| p.dev == dev) else {
                return;
            };
            s.ports.remove(i).ok()
        };
        if let Some(p) = p {
            p.close();
        }
    }
}

/// The shim's report that transmission `wr_id` completed.
///
/// # Safety
///
/// Only called by the shim, once per successful `rmad_shim_vport_send`, with its `wr_id`,
/// and with `ctx` the port given to `rmad_shim_vport_open`.
#[no_mangle]
unsafe extern "C" fn rmad_rust_send_done(
    ctx: *mut c_void,
    wr_id: u64,
    status: c_int,
    vendor_err: u32,
) {
    // `wr_id` is the pointer `post_send` leaked for this transmission.
    // The id holds a pointer that `post_send` exposed, so it fits a `usize`.
    let ptr = core::ptr::with_exposed_provenance_mut::<(Arc<SendRecord>, u64)>(wr_id as usize);
    // SAFETY: see above.
    let tag = unsafe { KBox::from_raw(ptr) };
    let (rec, gen) = KBox::into_inner(tag);
    let status = WcStatus::from_code(u32::try_from(status).unwrap_or(u32::MAX));
    Agent::send_completed(&rec, gen, status, vendor_err);
    // SAFETY: The port outlives its QP, whose completions these are (caller's promise).
    let port = unsafe { &*ctx.cast::<VerbsPort>() };
    port.drain_overflow();
}

/// The shim's report that a MAD arrived at a private QP.
///
/// # Safety
///
/// Only called by the shim, with `ctx` the port given to `rmad_shim_vport_open`, `mad` valid
/// for `len` bytes and `info` valid.
#[no_mangle]
unsafe extern "C" fn rmad_rust_recv(
    ctx: *mut c_void,
    mad: *const u8,
    len: u32,
    info: *const VerbsRecvInfo,
) {
    // SAFETY: The port outlives its QP, whose completions these are (caller's promise).
    let port = unsafe { &*ctx.cast::<VerbsPort>() };
    // SAFETY: Caller's promise.
    let (bytes, info) = unsafe {
        (
            core::slice::from_raw_parts(mad, usize::try_from(len).unwrap_or(0)),
            &*info,
        )
    };
    let mut v = KVec::new();
    if v.extend_from_slice(bytes, GFP_KERNEL).is_err() {
        return;
    }
    let wc = RecvWc {
        port: port.port,
        slid: u16::try_from(info.slid).unwrap_or(0),
        dlid_path_bits: info.dlid_path_bits,
        src_qp: info.src_qp,
        dst_qp: 1,
        pkey_index: info.pkey_index,
        grh: (info.has_grh != 0).then_some((info.sgid, info.dgid)),
    };
    port.engine.receive(RecvMad { mad: v, wc });
}

/// KUnit suite `rmad_rxe`: rmad agents on soft-RoCE (`rxe0`, which the test VM creates on a
/// dummy netdev before loading rmad).
#[kernel::prelude::kunit_tests(rmad_rxe)]
mod tests {
    use super::*;
    use crate::{
        state::SendState,
        testing::{
            post,
            rxe_agent,
            rxe_request,
            sleep_ms,
            wait_state,
            Behaviour,
            Call,
            Recorder, //
        },
        wire,
    };
    use kernel::time::{
        delay::udelay,
        Delta,
        Instant,
        Monotonic, //
    };

    #[test]
    fn rxe_get_answered_through_qp1() -> Result {
        // One MAD from rmad's private QP to QP1 of the same port. No agent is registered for
        // the class, so ib_core's MAD layer answers it (GET_RESP, status "unsupported").
        let s = setup()?;
        // The test VM always creates rxe0; without it the suite fails.
        assert!(s.is_some());
        let Some((port, a, rec)) = s else {
            return Ok(());
        };
        let h = post(rxe_request(
            &port,
            &a,
            1,
            wire::IB_MGMT_METHOD_GET,
            5000,
            2,
        )?);
        let posted = h.is_ok();
        let done = rec.wait_sends(1);
        let calls = rec.calls()?;
        a.unregister()?;
        assert!(posted);
        assert!(done);
        // Status 0x000C: method/attribute unsupported, ib_core's answer for unserved classes.
        let recv = matches!(calls.first(), Some(Call::Recv { tag: Some(1), method, status, .. })
            if *method == wire::IB_MGMT_METHOD_GET_RESP && *status == 0x000c);
        let send = matches!(calls.get(1), Some(Call::Send { tag: 1, wc, .. })
            if wc.status == WcStatus::Success);
        assert!(recv);
        assert!(send);
        Ok(())
    }

    #[test]
    fn rxe_get_answered_by_ib_core_agent() -> Result {
        // The smallest experiment of the verbs path: a test agent registered in ib_core for
        // congestion management (0x21) answers rmad's GET with status 0.
        let s = setup()?;
        assert!(s.is_some());
        let Some((port, a, rec)) = s else {
            return Ok(());
        };
        let responder = port.start_test_responder(wire::IB_MGMT_CLASS_CONG_MGMT);
        let registered = responder.is_some();
        let mut buf = rxe_request(&port, &a, 7, wire::IB_MGMT_METHOD_GET, 5000, 1)?;
        if let Some(c) = buf.mad_mut().get_mut(1) {
            *c = wire::IB_MGMT_CLASS_CONG_MGMT;
        }
        let posted = post(buf).is_ok();
        let done = rec.wait_sends(1);
        let calls = rec.calls()?;
        drop(responder);
        a.unregister()?;
        assert!(registered);
        assert!(posted);
        assert!(done);
        let answered = matches!(calls.first(), Some(Call::Recv { tag: Some(7), method, status, .. })
            if *method == wire::IB_MGMT_METHOD_GET_RESP && *status == 0);
        let send = matches!(calls.get(1), Some(Call::Send { tag: 7, wc, retries: 0, .. })
            if wc.status == WcStatus::Success);
        assert!(answered);
        assert!(send);
        Ok(())
    }

    /// The rxe0 port, and an agent on it whose handlers record.
    fn setup() -> Result<Option<(Arc<VerbsPort>, Arc<Agent>, Arc<Recorder>)>> {
        let rec = Recorder::new(Behaviour::default())?;
        Ok(rxe_agent(&rec)?.map(|(p, a)| (p, a, rec)))
    }

    #[test]
    fn rxe_timeout_with_retries() -> Result {
        let s = setup()?;
        // The test VM always creates rxe0; without it the suite fails.
        assert!(s.is_some());
        let Some((port, a, rec)) = s else {
            return Ok(());
        };
        let start = Instant::<Monotonic>::now();
        let _h = post(rxe_request(
            &port,
            &a,
            2,
            wire::IB_MGMT_METHOD_SEND,
            200,
            2,
        )?)?;
        let done = rec.wait_sends(1);
        let elapsed = start.elapsed().as_millis();
        let sends = rec.sends()?;
        let stats = a.stats();
        a.unregister()?;
        assert!(done);
        assert_eq!(&sends[..], &[(2, WcStatus::RespTimeoutErr, 2)][..]);
        assert_eq!(stats.transmitted, 3);
        assert!(elapsed >= 600);
        Ok(())
    }

    #[test]
    fn rxe_cancel_while_waiting() -> Result {
        let s = setup()?;
        // The test VM always creates rxe0; without it the suite fails.
        assert!(s.is_some());
        let Some((port, a, rec)) = s else {
            return Ok(());
        };
        let h = post(rxe_request(
            &port,
            &a,
            3,
            wire::IB_MGMT_METHOD_SEND,
            60_000,
            0,
        )?)?;
        let _ = wait_state(&a, &h, SendState::WaitResp);
        let waiting = a.send_state(&h);
        let cancel = h.cancel();
        let done = rec.wait_sends(1);
        let sends = rec.sends()?;
        a.unregister()?;
        assert_eq!(waiting, Some(SendState::WaitResp));
        assert!(cancel.is_ok());
        assert!(done);
        assert_eq!(&sends[..], &[(3, WcStatus::WrFlushErr, 0)][..]);
        Ok(())
    }

    #[test]
    fn rxe_modify_extends_wait() -> Result {
        let s = setup()?;
        // The test VM always creates rxe0; without it the suite fails.
        assert!(s.is_some());
        let Some((port, a, rec)) = s else {
            return Ok(());
        };
        let h = post(rxe_request(
            &port,
            &a,
            4,
            wire::IB_MGMT_METHOD_SEND,
            300,
            0,
        )?)?;
        let _ = wait_state(&a, &h, SendState::WaitResp);
        let from = Instant::<Monotonic>::now();
        let m = h.modify(1500);
        sleep_ms(800);
        let early = rec.send_count();
        let done = rec.wait_sends(1);
        let elapsed = from.elapsed().as_millis();
        let sends = rec.sends()?;
        a.unregister()?;
        assert!(m.is_ok());
        assert_eq!(early, 0);
        assert!(done);
        assert_eq!(&sends[..], &[(4, WcStatus::RespTimeoutErr, 0)][..]);
        assert!(elapsed >= 1500);
        Ok(())
    }

    #[test]
    fn rxe_cancel_races_response() -> Result {
        let s = setup()?;
        // The test VM always creates rxe0; without it the suite fails.
        assert!(s.is_some());
        let Some((port, a, rec)) = s else {
            return Ok(());
        };
        const N: usize = 300;
        let mut cancelled = KVec::with_capacity(N, GFP_KERNEL)?;
        let mut seed: u32 = 0x2545_f491;
        for tag in 0..N {
            let h = post(rxe_request(
                &port,
                &a,
                tag,
                wire::IB_MGMT_METHOD_GET,
                5000,
                0,
            )?)?;
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            udelay(Delta::from_micros(i64::from((seed >> 16) % 400)));
            cancelled.push(h.cancel().is_ok(), GFP_KERNEL)?;
        }
        let all = rec.wait_sends(N);
        let sends = rec.sends()?;
        a.unregister()?;
        let mut count = KVec::with_capacity(N, GFP_KERNEL)?;
        count.resize(N, 0u32, GFP_KERNEL)?;
        let mut agree = true;
        for (tag, status, _) in sends.iter() {
            if let (Some(c), Some(k)) = (count.get_mut(*tag), cancelled.get(*tag)) {
                *c = c.saturating_add(1);
                let want = if *k {
                    WcStatus::WrFlushErr
                } else {
                    WcStatus::Success
                };
                agree &= *status == want;
            } else {
                agree = false;
            }
        }
        assert!(all);
        assert!(agree);
        assert!(count.iter().all(|c| *c == 1));
        Ok(())
    }
}
