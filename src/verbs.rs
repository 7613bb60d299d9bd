// SPDX-License-Identifier: GPL-2.0

//! The verbs transport: MADs through a real RDMA device.
//!
//! ib_core's own MAD layer owns QP0 and QP1 of every port, so rmad cannot take QP1 over.
//! Instead, for each port that has a general services QP, rmad opens a private UD QP (with its
//! PD, CQ and receive buffers, in `src/verbs/shim.c`) and sends its MADs from there to the remote
//! QP1 with the GSI Q_Key (`IB_QP1_QKEY`). A responder answers to the source QP of a request,
//! so responses come back to the private QP, where rmad matches them. Unsolicited requests to
//! this port arrive at QP1 and stay with ib_core: agents on a verbs port can send requests
//! and receive their responses, but do not receive requests.
//!
//! Devices are discovered as an `ib_client`; each [`VerbsPort`] is a [`Transport`] that
//! agents register on, all sharing one engine ([`verbs_engine`]).

mod attrs;
mod forward;
mod name;
mod neigh;
mod tx;

use crate::{
    engine::{
        agent::{
            Agent,
            Engine, //
        },
        rmpp_budget::PortBudget,
        send::TxQueue,
        transport::{
            GrhFields,
            Handed,
            LinkHdr,
            PortAttr,
            RecvMad,
            RecvWc,
            SendWr,
            Transport, //
        },
    },
    mad::{
        state::WcStatus,
        wire,
        Gid, //
    },
    sys::{
        trace,
        workqueue::OwnedQueue, //
    },
};
use core::{
    ffi::c_void,
    ptr, //
};
use kernel::{
    ffi::{
        c_char,
        c_int, //
    },
    new_mutex, new_spinlock_irq, new_work,
    prelude::*,
    str::CString,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
        ArcBorrow,
        Mutex,
        SpinLockIrq, //
    },
    workqueue::{
        HasWork,
        Work,
        WorkItem, //
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

/// How a MAD arrived (`struct rmad_recv_info` of `src/verbs/shim.h`).
#[repr(C)]
pub(crate) struct VerbsRecvInfo {
    src_qp: u32,
    slid: u32,
    pkey_index: u16,
    dlid_path_bits: u8,
    has_grh: u8,
    sgid: Gid,
    dgid: Gid,
    flow_label: u32,
    hop_limit: u8,
    traffic_class: u8,
    sl: u8,
    via_qp1: u8,
    network_hdr_type: u8,
    vlan_id: u16,
    wc_flags: u32,
    grh: [u8; 40],
}

// The layout of `struct rmad_recv_info` in `src/verbs/shim.h`; `src/verbs/shim.c` checks the
// same numbers in C.
const _: () = {
    assert!(core::mem::size_of::<VerbsRecvInfo>() == 100);
    assert!(core::mem::offset_of!(VerbsRecvInfo, pkey_index) == 8);
    assert!(core::mem::offset_of!(VerbsRecvInfo, has_grh) == 11);
    assert!(core::mem::offset_of!(VerbsRecvInfo, sgid) == 12);
    assert!(core::mem::offset_of!(VerbsRecvInfo, dgid) == 28);
    assert!(core::mem::offset_of!(VerbsRecvInfo, flow_label) == 44);
    assert!(core::mem::offset_of!(VerbsRecvInfo, traffic_class) == 49);
    assert!(core::mem::offset_of!(VerbsRecvInfo, sl) == 50);
    assert!(core::mem::offset_of!(VerbsRecvInfo, via_qp1) == 51);
    assert!(core::mem::offset_of!(VerbsRecvInfo, network_hdr_type) == 52);
    assert!(core::mem::offset_of!(VerbsRecvInfo, vlan_id) == 54);
    assert!(core::mem::offset_of!(VerbsRecvInfo, wc_flags) == 56);
    assert!(core::mem::offset_of!(VerbsRecvInfo, grh) == 60);
};

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
    fn rmad_shim_query_pkey(dev: *mut IbDevice, port: u32, index: u16, pkey: *mut u16) -> c_int;
    fn rmad_shim_find_gid(dev: *mut IbDevice, port: u32, gid: *const u8) -> c_int;
    fn rmad_shim_reply_hop_limit(
        dev: *mut IbDevice,
        port: u32,
        sgid_index: u8,
        dgid: *const u8,
    ) -> c_int;
    fn rmad_shim_port_mac(dev: *mut IbDevice, port: u32, mac: *mut u8) -> c_int;
    fn rmad_shim_dev_try_get(dev: *mut IbDevice) -> c_int;
    fn rmad_shim_dev_put(dev: *mut IbDevice);
    fn rmad_shim_vport_qp(vp: *mut Vport) -> *mut c_void;
    fn rmad_shim_vport_open(dev: *mut IbDevice, port: u32, ctx: *mut c_void) -> *mut Vport;
    fn rmad_shim_vport_close(vp: *mut Vport);
    fn rmad_shim_vport_sweep(vp: *mut Vport);
    fn rmad_shim_vport_recover(vp: *mut Vport) -> bool;
    fn rmad_shim_vport_resets(vp: *mut Vport) -> u32;
    fn rmad_shim_vport_qp_num(vp: *mut Vport) -> u32;
    fn rmad_shim_forward_start(
        dev: *mut IbDevice,
        port: u32,
        ctx: *mut c_void,
        mgmt_class: u8,
        class_version: u8,
        oui: *const u8,
        method_mask_lo: u64,
        method_mask_hi: u64,
    ) -> *mut c_void;
    fn rmad_shim_forward_stop(fwd: *mut c_void);
    fn rmad_shim_resolve_dmac(
        dev: *mut IbDevice,
        port: u32,
        sgid_index: u8,
        dgid: *const u8,
        dmac: *mut u8,
        hop_limit: *mut u8,
    ) -> c_int;
    fn rmad_shim_vport_send(vp: *mut Vport, tx: *const tx::TxFrame) -> c_int;
    fn rmad_shim_vport_send_now(vp: *mut Vport, tx: *const tx::TxFrame) -> c_int;
}

/// One port of an RDMA device, with rmad's private QP on it.
///
/// # Invariants
///
/// `vp` is the shim's open port until [`VerbsPort::close`] sets it to null (under `vp`'s
/// lock), which happens in the device's `remove` callback, before ib_core lets go of `dev`.
/// So while `vp` is non-null `dev` points to a device that is registered or being
/// unregistered, and a registration reference taken then ([`VerbsPort::with_device`]) keeps
/// it usable until it is put back; with `vp`'s lock held and `vp` non-null, its P_Key and GID
/// tables (which ib_core frees only after every client's `remove`) can also be read without
/// one (`verbs/tx.rs`). `dev` is never used otherwise.
///
/// The shim holds one reference on the port (its callback context) from
/// `rmad_shim_vport_open` until `rmad_shim_vport_close` returns. A `VerbsPort` only ever lives
/// inside an `Arc` (see [`VerbsPort::open`]).
///
/// Dropping a port that was opened and closed never sleeps: its last reference may be an
/// agent's, dropped with a detached buffer that a client frees from an hrtimer
/// (`rmad_free_send_mad` is atomic-safe). What must sleep to go, its resolution queue, goes at
/// [`VerbsPort::close`].
#[pin_data]
pub(crate) struct VerbsPort {
    dev: *mut IbDevice,
    /// Port number.
    pub(crate) port: u8,
    /// LID, LMC and MAC, refreshed on port events.
    attrs: attrs::Attrs,
    /// The device's name, which a rename changes.
    #[pin]
    name: name::DevName,
    engine: Arc<Engine>,
    /// The shim's port, or null once the port is closed. Its lock disables interrupts:
    /// transmissions are queued from any context a post may be called in.
    #[pin]
    vp: SpinLockIrq<*mut Vport>,
    /// Transmissions waiting for the transmit work (and for room in the send queue), oldest first:
    /// the C layer's QP overflow list, Documentation/behaviour.md §2.4.2. Lock order: `vp`, then
    /// `txq`.
    #[pin]
    txq: SpinLockIrq<TxQueue>,
    /// The transmit work holds a transmission it took from `txq` and has not handed to the
    /// device or put back yet: a post does not overtake it. Written under `txq`'s lock; a send
    /// completion reads it without (`tx_done`).
    tx_in_hand: Atomic<bool>,
    /// Transmissions in `txq`, and a post's own while it tries the device from its caller:
    /// what a send completion's freed slot may be for. Written under `txq`'s lock; a send
    /// completion reads it without (`tx_done`).
    tx_waiting: Atomic<u32>,
    /// Transmissions in `parked`, counted out of it only once they are back in `txq` (under its
    /// lock) or completed: a post does not overtake them.
    tx_parked: Atomic<u32>,
    /// What the last destination check that passed found valid ([`tx::CheckedKey`]; 0: none).
    checked: Atomic<u64>,
    /// Bumped when the port's P_Key or GID table may have changed (a port event).
    tables_gen: Atomic<u32>,
    /// Transmissions handed to the device from the poster's context, and by the transmit work.
    sent_now: Atomic<u64>,
    sent_queued: Atomic<u64>,
    /// Runs of the transmit work.
    tx_runs: Atomic<u64>,
    /// Hands queued transmissions to the device (see `verbs/tx.rs`).
    #[pin]
    tx_work: Work<VerbsPort>,
    /// Transmissions whose destination is being resolved, oldest first (see `verbs/neigh.rs`).
    #[pin]
    parked: Mutex<TxQueue>,
    /// Runs the port's resolutions, several at once; destroyed (after it drained) when the
    /// port closes, where destroying a workqueue may sleep, and not when the port is dropped,
    /// which may be in any context. `None` from then on: nothing is queued any more.
    #[pin]
    resolve_wq: SpinLockIrq<Option<OwnedQueue>>,
    /// The ib_core agents that forward requests to rmad's agents (see `verbs/forward.rs`).
    #[pin]
    forwards: Mutex<forward::Forwards>,
    /// Resolved destination MACs (see `verbs/neigh.rs`).
    #[pin]
    neigh: Mutex<neigh::Neighbours>,
    /// Datagrams that arrived at the private QP shorter than a MAD, dropped.
    short_dropped: Atomic<u64>,
    /// Requests that arrived at the private QP (requests belong on QP0 and QP1), dropped.
    requests_dropped: Atomic<u64>,
    /// What the port's kernel-RMPP agents may hold together while reassembling.
    rmpp_budget: Arc<PortBudget>,
}

/// What a verbs port dropped, for debugfs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PortDrops {
    /// Datagrams shorter than a MAD (256 bytes).
    pub(crate) short: u64,
    /// Requests (a MAD that is no response) that arrived at the private QP.
    pub(crate) requests: u64,
}

// SAFETY: The raw pointers are handles to kernel objects usable from any thread (under the
// rules of the type invariant); the shim synchronises its own state.
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

/// The verbs transport while the module is loaded: rmad's `ib_client` registration. Dropping
/// it removes every device from rmad (closing its ports), then the engine goes.
pub(crate) struct Client(());

impl Client {
    /// Starts the verbs transport: the engine, and the `ib_client` whose `add` callback opens
    /// the ports of every RDMA device, present and future.
    ///
    /// # Safety
    ///
    /// Called once, by the module initializer.
    pub(crate) unsafe fn register() -> Result<Self> {
        // SAFETY: The caller's promise.
        unsafe { init() }?;
        Ok(Self(()))
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        exit();
    }
}

/// Starts the verbs transport: creates its engine and registers the `ib_client`, which opens
/// a private QP on every port of every RDMA device, present and future.
///
/// # Safety
///
/// Called once, by the module initializer (through [`Client::register`]).
unsafe fn init() -> Result {
    // SAFETY: Called exactly once, from the module initializer (the caller's promise).
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
fn exit() {
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

/// The open ports, for debugfs.
pub(crate) fn ports() -> Result<KVec<Arc<VerbsPort>>> {
    let g = VERBS.lock();
    let mut v = KVec::new();
    if let Some(s) = g.as_ref() {
        for p in s.ports.iter() {
            v.push(p.clone(), GFP_KERNEL)?;
        }
    }
    Ok(v)
}

/// The open port `port` of the device named `name`.
pub(crate) fn find_port(name: &CStr, port: u8) -> Option<Arc<VerbsPort>> {
    let g = VERBS.lock();
    g.as_ref()?
        .ports
        .iter()
        .find(|p| p.port == port && p.name.get().to_bytes() == name.to_bytes())
        .cloned()
}

/// The open port `port` of the device `dev`, if rmad has it: what the `ib_mad` interface
/// (`include/rmad_ib_mad.h`) names a port by.
pub(crate) fn find_port_of(dev: *const IbDevice, port: u8) -> Option<Arc<VerbsPort>> {
    let g = VERBS.lock();
    g.as_ref()?
        .ports
        .iter()
        .find(|p| p.port == port && ptr::eq(p.dev, dev))
        .cloned()
}

impl VerbsPort {
    /// Opens port `port` of `dev`.
    fn open(dev: *mut IbDevice, port: u32, engine: &Arc<Engine>) -> Result<Arc<Self>> {
        // SAFETY: `dev` is a registered device (we are in its `add` callback).
        let attrs = unsafe { attrs::Attrs::new(dev, port) }?;
        // SAFETY: We are in `dev`'s `add` callback.
        let name = name::DevName::new(unsafe { dev_name(dev) }?)?;
        let port_num = u8::try_from(port).map_err(|_| EINVAL)?;
        let this = Arc::pin_init(
            try_pin_init!(VerbsPort {
                dev,
                port: port_num,
                attrs,
                name <- name,
                engine: engine.clone(),
                vp <- new_spinlock_irq!(core::ptr::null_mut(), "VerbsPort::vp"),
                txq <- new_spinlock_irq!(TxQueue::new(), "VerbsPort::txq"),
                tx_work <- new_work!("VerbsPort::tx_work"),
                tx_in_hand: Atomic::new(false),
                tx_waiting: Atomic::new(0),
                tx_parked: Atomic::new(0),
                checked: Atomic::new(0),
                tables_gen: Atomic::new(0),
                sent_now: Atomic::new(0),
                sent_queued: Atomic::new(0),
                tx_runs: Atomic::new(0),
                parked <- new_mutex!(TxQueue::new(), "VerbsPort::parked"),
                resolve_wq <- new_spinlock_irq!(
                    Some(OwnedQueue::new_concurrent(c"rmad_resolve")?),
                    "VerbsPort::resolve_wq"
                ),
                forwards <- new_mutex!(forward::Forwards::new(), "VerbsPort::forwards"),
                neigh <- new_mutex!(neigh::Neighbours::new(), "VerbsPort::neigh"),
                short_dropped: Atomic::new(0),
                requests_dropped: Atomic::new(0),
                rmpp_budget: PortBudget::new()?,
            }),
            GFP_KERNEL,
        )?;
        // INVARIANT: The shim's reference, given back by `close` (or below on failure).
        let ctx = Arc::into_raw(this.clone()).cast_mut().cast::<c_void>();
        // SAFETY: `dev` is registered; `ctx` is a counted reference that stays valid until the
        // shim is done with it.
        let vp = unsafe { rmad_shim_vport_open(dev, port, ctx) };
        match kernel::error::from_err_ptr(vp) {
            Ok(vp) => {
                *this.vp.lock() = vp;
                // A port event between the query above and the event handler's registration
                // in the shim is not lost.
                this.attrs_changed();
                Ok(this)
            }
            Err(e) => {
                // SAFETY: The shim failed to open and keeps no reference to `ctx`, which came
                // from `Arc::into_raw` above.
                drop(unsafe { Arc::from_raw(ctx.cast::<VerbsPort>()) });
                Err(e)
            }
        }
    }

    /// The `Arc` this port lives in.
    fn arc(&self) -> Arc<Self> {
        // SAFETY: A `VerbsPort` only ever lives inside an `Arc` (type invariant), which `&self`
        // keeps alive for the borrow.
        let b = unsafe { ArcBorrow::from_raw(core::ptr::from_ref(self)) };
        Arc::from(b)
    }

    /// The number of the private QP, while the port is open.
    pub(crate) fn qp_num(&self) -> Option<u32> {
        let vp = self.vp.lock();
        // SAFETY: A non-null `vp` is the shim's open port (type invariant), valid while its
        // lock is held: closing it nulls the pointer under the lock first.
        (!vp.is_null()).then(|| unsafe { rmad_shim_vport_qp_num(*vp) })
    }

    /// How many times the private QP failed a send and was reset to RTS, while the port is
    /// open.
    pub(crate) fn qp_resets(&self) -> Option<u32> {
        let vp = self.vp.lock();
        // SAFETY: As in `qp_num`.
        (!vp.is_null()).then(|| unsafe { rmad_shim_vport_resets(*vp) })
    }

    /// What the port dropped.
    pub(crate) fn drops(&self) -> PortDrops {
        PortDrops {
            short: self.short_dropped.load(Relaxed),
            requests: self.requests_dropped.load(Relaxed),
        }
    }

    /// Transmissions handed to the device: `(from the poster's context, by the transmit work)`.
    pub(crate) fn transmissions(&self) -> (u64, u64) {
        (self.sent_now.load(Relaxed), self.sent_queued.load(Relaxed))
    }

    /// Runs of the port's transmit work so far.
    #[cfg_attr(not(rmad_test), allow(dead_code, reason = "the tests read it"))]
    pub(crate) fn transmit_runs(&self) -> u64 {
        self.tx_runs.load(Relaxed)
    }

    /// The device's name and the port's number.
    pub(crate) fn id(&self) -> (&CStr, u8) {
        (self.name.get(), self.port)
    }

    /// Runs `f` with the port's device while the port is open, holding a registration
    /// reference on the device across `f` (so the device's unregistration waits for `f`);
    /// `None` once the port is closed. Any context: taking and putting the reference are
    /// atomic operations.
    pub(crate) fn with_device<R>(&self, f: impl FnOnce(*mut IbDevice) -> R) -> Option<R> {
        {
            let vp = self.vp.lock();
            if vp.is_null() {
                return None;
            }
            // SAFETY: The port is open, so `dev` is a device that has not finished its
            // unregistration (type invariant).
            if unsafe { rmad_shim_dev_try_get(self.dev) } == 0 {
                return None;
            }
        }
        let r = f(self.dev);
        // SAFETY: The reference taken above.
        unsafe { rmad_shim_dev_put(self.dev) };
        Some(r)
    }

    /// The port's private QP (`struct ib_qp`), which stays until the port closes: the QP that
    /// a client of the `ib_mad` interface finds in `agent->qp`, whose PD its address handles
    /// are made on. Null once the port is closed.
    pub(crate) fn qp(&self) -> *mut c_void {
        let vp = self.vp.lock();
        if vp.is_null() {
            return ptr::null_mut();
        }
        // SAFETY: The port is open and its lock held, so the shim's port is.
        unsafe { rmad_shim_vport_qp(*vp) }
    }

    /// Runs `f` with the shim's port while it is open, holding a registration reference on
    /// the device across `f`. Test flavour: the hooks of suite `rmad_rxe`
    /// (`src/testing/suites/rxe/hooks.rs`) reach the private QP through it, and only this
    /// module can name the shim's port. The port stays open across `f`: while rmad is
    /// loaded, only the device's `remove` callback closes it, which ib_core calls once every
    /// registration reference is put back; and the suites run while rmad loads, when it
    /// cannot be unloaded.
    #[cfg(rmad_test)]
    pub(crate) fn with_vport<R>(&self, f: impl FnOnce(*mut Vport) -> R) -> Option<R> {
        self.with_device(|_| {
            let vp = *self.vp.lock();
            (!vp.is_null()).then(|| f(vp))
        })
        .flatten()
    }

    /// Closes the private QP. New transmissions fail with `ENODEV` from here on; every send of
    /// the agents on this port is cancelled, so that each one's handler reports `WR_FLUSH_ERR`
    /// exactly once; transmissions still queued or on the QP complete (flushed) before this
    /// returns.
    fn close(self: &Arc<Self>) {
        // No request is forwarded any more; ib_core's agents go before the device does.
        self.stop_all_forwards();
        let vp = core::mem::replace(&mut *self.vp.lock(), core::ptr::null_mut());
        if vp.is_null() {
            return;
        }
        // A post checks the destination under the port's lock again, and is refused there.
        self.tables_changed();
        let me = Arc::as_ptr(self).cast::<()>();
        if let Ok(agents) = self.engine.agents() {
            for a in agents.iter().filter(|a| a.uses_transport(me)) {
                a.cancel_all();
            }
        }
        // The transmit work stops using `vp` before the shim's port closes.
        crate::sys::workqueue::disable_work_sync::<VerbsPort, 0>(self);
        // Only the transmit work starts resolutions. Those under way end now (with `vp` null
        // they flush what they parked); nothing of them holds the port afterwards. Their queue
        // goes with them, drained, here where destroying it may sleep, so that the port's drop
        // never does; a port event from now on queues no refresh (a closed port needs none).
        let queue = self.resolve_wq.lock().take();
        drop(queue);
        self.flush_parked();
        // SAFETY: `vp` was returned by `rmad_shim_vport_open` and is closed exactly once (it is
        // replaced by null under the lock); nothing uses it any more.
        unsafe { rmad_shim_vport_close(vp) };
        self.flush_tx();
        // SAFETY: The shim has returned the reference it held since `open` (no callback with
        // this context can run any more); `self` is another reference, so this is not the last.
        drop(unsafe { Arc::from_raw(Arc::as_ptr(self)) });
    }

    /// The device's name.
    pub(crate) fn name(&self) -> &CStr {
        self.name.get()
    }

    /// Queues `w` on the port's resolution queue (any context); `false` once the port closed.
    fn queue_resolution<T>(&self, w: Arc<T>) -> bool
    where
        T: WorkItem<Pointer = Arc<T>> + HasWork<T> + Send + Sync + 'static,
    {
        let q = self.resolve_wq.lock();
        q.as_ref().is_some_and(|q| q.queue().enqueue(w).is_ok())
    }
}

impl Transport<Agent> for VerbsPort {
    fn port_attr(&self, port: u8) -> Option<PortAttr> {
        (port == self.port).then(|| self.attrs.port_attr())
    }

    fn gid(&self, port: u8, index: u8) -> Option<Gid> {
        if port != self.port {
            return None;
        }
        let mut gid = [0u8; 16];
        let r = self.with_device(|dev| {
            // SAFETY: `with_device` holds a registration reference on `dev`; `gid` has 16
            // bytes.
            unsafe {
                rmad_shim_query_gid(dev, u32::from(port), c_int::from(index), gid.as_mut_ptr())
            }
        })?;
        (r == 0).then_some(gid)
    }

    fn pkey(&self, port: u8, index: u16) -> Option<u16> {
        if port != self.port {
            return None;
        }
        let mut pkey = 0u16;
        // SAFETY: `with_device` holds a registration reference on `dev`; `pkey` is valid for a
        // write.
        let r = self.with_device(|dev| unsafe {
            rmad_shim_query_pkey(dev, u32::from(port), index, &mut pkey)
        })?;
        (r == 0 && pkey & 0x7fff != 0).then_some(pkey)
    }

    fn device(&self) -> *const () {
        // One `VerbsPort` per port of a device: each is a device of its own to the engine,
        // which tells ports of one device apart by number too.
        core::ptr::from_ref(self).cast::<()>()
    }

    /// From ib_core's GID cache and the port's immutable table length (`rmad_shim_find_gid`):
    /// it runs once per answered request, so it queries no port.
    fn find_gid(&self, port: u8, gid: &Gid) -> Option<u8> {
        if port != self.port {
            return None;
        }
        // SAFETY: `with_device` holds a registration reference on `dev`; `gid` has 16 bytes.
        let r = self
            .with_device(|dev| unsafe { rmad_shim_find_gid(dev, u32::from(port), gid.as_ptr()) })?;
        u8::try_from(r).ok()
    }

    fn reply_hop_limit(&self, port: u8, sgid_index: u8, dgid: &Gid) -> Result<u8> {
        // SAFETY: `with_device` holds a registration reference on `dev`; `dgid` has 16 bytes.
        let r = self
            .with_device(|dev| unsafe {
                rmad_shim_reply_hop_limit(dev, u32::from(port), sgid_index, dgid.as_ptr())
            })
            .ok_or(ENODEV)?;
        kernel::error::to_result(r.min(0))?;
        u8::try_from(r).map_err(|_| EINVAL)
    }

    fn name(&self) -> &CStr {
        self.name.get()
    }

    fn rmpp_budget(&self, port: u8) -> Option<Arc<PortBudget>> {
        (port == self.port).then(|| self.rmpp_budget.clone())
    }

    fn post_send(&self, _port: u8, wr: SendWr<'_, Agent>) -> Result<Handed> {
        self.queue_tx(&wr)
    }

    fn check_send(&self, port: u8, ah: &crate::mad::Address, pkey_index: u16) -> Result {
        if port != self.port {
            return Err(ENODEV);
        }
        VerbsPort::check_send(self, ah, pkey_index)
    }

    fn forward(&self, port: u8, qp: crate::mad::QpType, reg: &crate::mad::RegReq) -> Result<u64> {
        if port != self.port {
            return Err(ENODEV);
        }
        self.start_forward(qp, reg)
    }

    fn stop_forwarding(&self, key: u64) {
        self.stop_forward(key);
    }

    fn resolve(&self, port: u8, ah: &crate::mad::Address) -> Result {
        match ah.grh {
            Some(g) if port == self.port && self.is_roce() => self.dmac(&g).map(|_| ()),
            _ => Ok(()),
        }
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
                pr_debug!(
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

/// A copy of `dev`'s name.
///
/// # Safety
///
/// Only from the `ib_client` `add` or `rename` callback for `dev`: ib_core holds its
/// `devices_rwsem` there, which a rename (that frees the old name) takes to write.
unsafe fn dev_name(dev: *mut IbDevice) -> Result<CString> {
    // SAFETY: The name is a NUL-terminated string that no rename frees during the call
    // (caller's promise).
    Ok(CString::try_from(unsafe {
        CStr::from_char_ptr(rmad_shim_dev_name(dev))
    })?)
}

/// The shim's report that a device was renamed: its ports take the new name, under which
/// `find_port` (registration by name, `rmad_port_gid`) finds them from now on. Agents are
/// not affected: they hold their port.
///
/// # Safety
///
/// Only called by the shim's `ib_client` `rename` callback, with a registered device.
#[no_mangle]
unsafe extern "C" fn rmad_rust_device_renamed(dev: *mut IbDevice) {
    let g = VERBS.lock();
    for p in g
        .iter()
        .flat_map(|s| s.ports.iter())
        .filter(|p| p.dev == dev)
    {
        // SAFETY: We are in `dev`'s `rename` callback (caller's promise).
        let copied = unsafe { dev_name(dev) }.and_then(|n| p.name.set(n));
        if copied.is_err() {
            pr_warn!("verbs: port {} keeps its old name: out of memory\n", p.port);
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
    let status = WcStatus::from_code(u32::try_from(status).unwrap_or(u32::MAX));
    // SAFETY: `ctx` is the shim's counted reference to the port (type invariant of
    // `VerbsPort`), held until `rmad_shim_vport_close` returns, after every callback.
    let port = unsafe { &*ctx.cast::<VerbsPort>() };
    // SAFETY: The shim reports each transmission it took once, with its id (caller's promise).
    unsafe { port.tx_done(wr_id, status, vendor_err) };
}

/// The shim's report of a port event (GID table, LID or an active port): the transmit work
/// queries the port's LID, LMC and MAC again (`verbs/attrs.rs`) and sweeps the address
/// handles that reference deleted GID entries (`rmad_shim_vport_sweep`).
///
/// # Safety
///
/// Only called by the shim, with `ctx` the port given to `rmad_shim_vport_open`.
#[no_mangle]
unsafe extern "C" fn rmad_rust_port_changed(ctx: *mut c_void) {
    // SAFETY: `ctx` is the shim's counted reference to the port (type invariant of
    // `VerbsPort`), held until `rmad_shim_vport_close` returns, which first unregisters the
    // event handler that calls this.
    let port = unsafe { &*ctx.cast::<VerbsPort>() };
    port.tables_changed();
    port.attrs_changed();
    port.kick();
}

/// The shim's request that the port's transmit work run again: a recovery of the private QP
/// that the device has drained for now (the last receive flush was handled), or a failed
/// receive post or reset to try again (`rmad_shim_vport_recover`). Any context.
///
/// # Safety
///
/// Only called by the shim, with `ctx` the port given to `rmad_shim_vport_open`.
#[no_mangle]
unsafe extern "C" fn rmad_rust_kick(ctx: *mut c_void) {
    // SAFETY: `ctx` is the shim's counted reference to the port (type invariant of
    // `VerbsPort`), held until `rmad_shim_vport_close` returns, which first waits for the
    // receive completions and the retry work that call this.
    let port = unsafe { &*ctx.cast::<VerbsPort>() };
    port.kick();
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
    // SAFETY: `ctx` is the shim's counted reference to the port (type invariant of
    // `VerbsPort`), held until `rmad_shim_vport_close` returns, after every callback.
    let port = unsafe { &*ctx.cast::<VerbsPort>() };
    // SAFETY: Caller's promise.
    let (bytes, info) = unsafe {
        (
            core::slice::from_raw_parts(mad, usize::try_from(len).unwrap_or(0)),
            &*info,
        )
    };
    // A MAD is 256 bytes on IB and RoCE: a shorter datagram is no MAD (a client reading the
    // 256 bytes it expects would read past the end). Dropped and counted, as the C layer's
    // receive path should (rmad.h).
    if bytes.len() < wire::IB_MGMT_MAD_SIZE {
        port.short_dropped.add(1, Relaxed);
        return;
    }
    // Only responses belong at the private QP: requests come through QP0/QP1, where ib_core
    // checks them (P_Keys, security, `process_mad`) before forwarding them. A peer that
    // learnt the private QP's number must not reach responders around those checks.
    // (What is no MAD at all, a base version other than 1, goes on and is dropped with the
    // engine's other validation, uncounted, as before.)
    // The one exception: the RMPP ACKs, STOPs and ABORTs of a peer that receives a segmented
    // response rmad sent from here (they are requests, and go where the segments came from);
    // the engine gives them to RMPP agents only, never to a plain agent's receive handler.
    let request = wire::MadHdr::parse(bytes)
        .ok()
        .filter(|h| h.base_version == wire::IB_MGMT_BASE_VERSION && !h.is_response());
    let private_request = request.is_some() && info.via_qp1 == 0;
    let control = request.is_some_and(|h| is_rmpp_control(bytes, &h));
    if let Some(h) = request.filter(|_| private_request && !control) {
        port.request_dropped(&h, info.src_qp);
        return;
    }
    let mut v = KVVec::new();
    if v.extend_from_slice(bytes, GFP_KERNEL).is_err() {
        return;
    }
    port.engine.receive(
        core::ptr::from_ref(port).cast::<()>(),
        RecvMad {
            mad: v,
            wc: info.wc(port.port, private_request),
        },
    );
}

/// Whether `bytes`, a request with header `h`, is an RMPP ACK, STOP or ABORT (active, of an
/// RMPP class).
fn is_rmpp_control(bytes: &[u8], h: &wire::MadHdr) -> bool {
    wire::ib_is_mad_class_rmpp(h.mgmt_class)
        && wire::rmpp_hdr(bytes).is_ok_and(|r| {
            wire::ib_get_rmpp_flags(r).is_ok_and(|f| f & wire::IB_MGMT_RMPP_FLAG_ACTIVE != 0)
                && matches!(
                    r.get(1).copied(),
                    Some(
                        wire::IB_MGMT_RMPP_TYPE_ACK
                            | wire::IB_MGMT_RMPP_TYPE_STOP
                            | wire::IB_MGMT_RMPP_TYPE_ABORT
                    )
                )
        })
}

impl VerbsRecvInfo {
    /// How the MAD arrived, as the engine reads it: at `port`, from the private QP (the
    /// engine's QP1), `private_request` if it is a request that bypassed QP1.
    pub(crate) fn wc(&self, port: u8, private_request: bool) -> RecvWc {
        RecvWc {
            port,
            slid: u16::try_from(self.slid).unwrap_or(0),
            dlid_path_bits: self.dlid_path_bits,
            src_qp: self.src_qp,
            dst_qp: 1,
            pkey_index: self.pkey_index,
            sl: self.sl,
            grh: (self.has_grh != 0).then_some((self.sgid, self.dgid)),
            grh_fields: GrhFields {
                hop_limit: self.hop_limit,
                traffic_class: self.traffic_class,
                flow_label: self.flow_label,
            },
            link: LinkHdr {
                wc_flags: self.wc_flags,
                network_hdr_type: self.network_hdr_type,
                vlan_id: self.vlan_id,
                grh: self.grh,
            },
            private_request,
        }
    }
}

impl VerbsPort {
    /// A request with header `h` from QP `src_qp` arrived at the private QP: dropped, counted
    /// and traced.
    fn request_dropped(&self, h: &wire::MadHdr, src_qp: u32) {
        self.requests_dropped.add(1, Relaxed);
        trace::fire(trace::Ev::RequestDropped, || trace::Info {
            dev: self.name.get().as_char_ptr(),
            tid: h.tid,
            qp_num: src_qp,
            timeout_ms: 0,
            retries: 0,
            attr_id: h.attr_id,
            status: h.status,
            port: self.port,
            mgmt_class: h.mgmt_class,
            method: h.method,
        });
    }
}
