// SPDX-License-Identifier: GPL-2.0

//! The transmit path of a verbs port.
//!
//! A post hands its MAD to the device from the caller's context, as the C layer's
//! `ib_post_send_mad` does, whenever nothing has to wait ([`VerbsPort::queue_tx`]): the port's
//! address handle for the destination is made, the send queue has room, the QP is not being
//! recovered, and no earlier transmission of the port waits. Otherwise the transmission is
//! queued under the port's lock and handed to the device by the port's transmit work, in
//! process context with no rmad lock held ([`VerbsPort::transmit_pending`]): making an address
//! handle may take driver locks that are not interrupt-safe (rxe's object pools use plain
//! `xa_lock`) and may sleep, and a post is atomic-safe (from timers, hrtimers, with interrupts
//! off). The queue is also the C layer's overflow list: what the send queue cannot take waits
//! in it, in order, until a send completion makes room.
//!
//! Lock order (Documentation/architecture.md): the agent's lock, the port's `vp`, its `txq`,
//! then the shim's port lock and the driver's send-queue locks inside `ib_post_send`. No driver
//! calls into rmad with its locks held: completions reach rmad from ib_core's CQ polling work.

use super::{
    neigh::{
        Dest,
        OwnGids, //
    },
    rmad_shim_query_gid,
    rmad_shim_query_pkey,
    rmad_shim_vport_recover,
    rmad_shim_vport_send,
    rmad_shim_vport_send_now,
    rmad_shim_vport_sweep,
    VerbsPort, //
};
use crate::{
    engine::{
        agent::Agent,
        send::{
            SendRecord,
            SendTrace,
            TxDest,
            TxRef, //
        },
        transport::{
            Handed,
            SendWr, //
        },
    },
    mad::{
        state::WcStatus,
        wire::MadHdr,
        Address, //
    },
    sys::workqueue, //
};
use core::ptr;
use kernel::{
    ffi::c_int,
    impl_has_work,
    prelude::*,
    sync::{
        atomic::{
            Acquire,
            Relaxed,
            Release, //
        },
        Arc, //
    },
    workqueue::WorkItem,
};

/// The largest MAD a verbs port carries.
const MAD_MAX: usize = 256;

impl_has_work! {
    impl HasWork<Self> for VerbsPort { self.tx_work }
}

impl WorkItem for VerbsPort {
    type Pointer = Arc<VerbsPort>;

    fn run(this: Arc<VerbsPort>) {
        this.transmit_pending();
    }
}

// The queue of sends whose transmission waits for the device is a `TxQueue`, oldest first: the
// links are in the send's record, so queueing allocates nothing. While the device holds a
// transmission, the work-request id is the pointer of the record's `TxRef`, taken back exactly
// once by the send completion; the record's `tx_gen` names the post being transmitted.

/// Completes the transmission `tx` with `WR_FLUSH_ERR`: its port closed.
fn flushed(tx: TxRef) {
    let gen = tx.tx_gen.load(Relaxed);
    let rec = tx.into_ref();
    Agent::send_completed(&rec, gen, WcStatus::WrFlushErr, 0);
}

/// The errno the shim returns when the send queue is full.
const SQ_FULL: c_int = -(kernel::bindings::EBUSY as c_int);

/// One transmission as the shim takes it (`struct rmad_tx` of `src/verbs/shim.h`).
#[repr(C)]
pub(super) struct TxFrame {
    mad: *const u8,
    wr_id: u64,
    len: u32,
    remote_qpn: u32,
    dlid: u32,
    flow_label: u32,
    pkey_index: u16,
    src_path_bits: u8,
    sl: u8,
    has_grh: u8,
    sgid_index: u8,
    hop_limit: u8,
    traffic_class: u8,
    dgid: [u8; 16],
    dmac: [u8; 6],
}

// The layout of `struct rmad_tx`; `src/verbs/shim.c` checks the same numbers in C.
const _: () = {
    assert!(core::mem::size_of::<TxFrame>() == 64);
    assert!(core::mem::offset_of!(TxFrame, wr_id) == 8);
    assert!(core::mem::offset_of!(TxFrame, len) == 16);
    assert!(core::mem::offset_of!(TxFrame, pkey_index) == 32);
    assert!(core::mem::offset_of!(TxFrame, has_grh) == 36);
    assert!(core::mem::offset_of!(TxFrame, traffic_class) == 39);
    assert!(core::mem::offset_of!(TxFrame, dgid) == 40);
    assert!(core::mem::offset_of!(TxFrame, dmac) == 56);
};

impl TxFrame {
    /// The frame of `mad` (at most [`MAD_MAX`] bytes, which the shim checks again) to
    /// `remote_qpn` at `ah`, with its work-request id `wr_id` and, on RoCE, the MAC `dmac`.
    /// The frame borrows `mad`'s bytes: it lives no longer than they do.
    fn new(
        mad: &[u8],
        remote_qpn: u32,
        pkey_index: u16,
        ah: &Address,
        dmac: [u8; 6],
        wr_id: *const SendRecord,
    ) -> Self {
        let grh = ah.grh.unwrap_or_default();
        Self {
            mad: mad.as_ptr(),
            // A pointer always fits the 64-bit work-request id.
            wr_id: u64::try_from(wr_id.expose_provenance()).unwrap_or(0),
            // Longer than a MAD (never: the engine checks) is refused by the shim.
            len: u32::try_from(mad.len()).unwrap_or(u32::MAX),
            remote_qpn,
            dlid: u32::from(ah.dlid),
            flow_label: grh.flow_label,
            pkey_index,
            src_path_bits: ah.src_path_bits,
            sl: ah.sl,
            has_grh: u8::from(ah.grh.is_some()),
            sgid_index: grh.sgid_index,
            hop_limit: grh.hop_limit,
            traffic_class: grh.traffic_class,
            dgid: grh.dgid,
            dmac,
        }
    }
}

/// What [`VerbsPort::check_send`] found valid last: the P_Key index, the source GID index
/// (if the address has a GRH) and the generation of the port's tables then, in one word, so
/// that a post reads it without a lock: bits 0–15 the P_Key index, 16–23 the source GID index,
/// 24 whether there is a GRH, 25 always set (the word is never 0, the value of `checked`
/// before any check passed), 32–63 the generation.
pub(super) struct CheckedKey(u64);

impl CheckedKey {
    fn new(ah: &Address, pkey_index: u16, gen: u32) -> Self {
        let grh = ah.grh.map_or(0, |g| 0x100 | u64::from(g.sgid_index));
        Self(u64::from(pkey_index) | grh << 16 | 1 << 25 | u64::from(gen) << 32)
    }
}

/// What the trace of the hand-over of the queued transmission `mad` to `dest` tells: the
/// MAD's header, and the send's timeout and retries when it was queued.
fn trace_of(mad: &[u8], dest: &TxDest) -> SendTrace {
    let h = MadHdr::parse(mad).unwrap_or_default();
    SendTrace {
        tid: h.tid,
        timeout_ms: dest.timeout_ms,
        retries: dest.retries,
        attr_id: h.attr_id,
        class: h.mgmt_class,
        method: h.method,
    }
}

impl VerbsPort {
    /// Transmits `wr`: hands it to the device now when nothing has to wait (see the module's
    /// documentation), otherwise queues it for the transmit work. Any context; allocates
    /// nothing. `ENODEV` once the port is closed; `EBUSY` if the send already has a
    /// transmission queued or on the device (not reachable: the engine never retransmits
    /// before the send completion).
    pub(super) fn queue_tx(&self, wr: &SendWr<'_, Agent>) -> Result<Handed> {
        let mad = wr.body.mad();
        if mad.len() > MAD_MAX {
            return Err(EINVAL);
        }
        let tx = TxRef::take(wr.body).ok_or(EBUSY)?;
        // The `TxRef` is unique: nobody else reads or writes `tx_gen` now.
        tx.tx_gen.store(wr.gen, Relaxed);
        let kick = {
            // One hold of the port's lock for the check and the transmission: a closing port
            // either sees the transmission queued (and flushes it), on the device (and waits
            // for its completion), or refused it, and while the port is open the device's
            // tables can be read without a reference of their own (the type invariant),
            // which saves a reference and two more holds per post.
            let vp = self.vp.lock_with(wr.irqs_off);
            if vp.is_null() {
                return Err(ENODEV);
            }
            if !wr.checked {
                // SAFETY: The port's lock is held and the port is open.
                unsafe { self.check_tx_address(&wr.ah, wr.pkey_index) }?;
            }
            let mut q = self.txq.lock_with(wr.irqs_off);
            // A non-empty queue has the transmit work on its way already: it is queued or
            // running, or the send queue is full and each send completion runs it.
            let mut kick = q.is_empty();
            // Nothing of the port waits: neither queued, nor in the transmit work's hands, nor
            // parked for a resolution, so this transmission overtakes none.
            let idle = kick && !self.tx_in_hand.load(Relaxed) && self.tx_parked.load(Relaxed) == 0;
            // Counted before the try, which takes the shim's port lock, as a send completion
            // does to free a slot before it reads the count: a slot freed after the try saw
            // none is seen for this transmission, which is queued below.
            self.tx_waiting.add(1, Relaxed);
            let mut tx = if idle {
                let wr_id = tx.into_raw();
                let frame = TxFrame::new(mad, wr.remote_qpn, wr.pkey_index, &wr.ah, [0; 6], wr_id);
                // SAFETY: The port is open and its lock held, so the shim's port is; `frame`'s
                // MAD is the send's, which `wr_id` holds alive and unwritten until the send
                // completion: the device reads it until then. On success the shim hands
                // `wr_id` back exactly once, to `rmad_rust_send_done`.
                let r = unsafe { rmad_shim_vport_send_now(*vp, &frame) };
                if r == 0 {
                    self.tx_waiting.fetch_sub(1, Relaxed);
                    self.sent_now.add(1, Relaxed);
                    return Ok(Handed::Device);
                }
                // Every slot in use: the send completion that frees one runs the work (as the
                // C layer's overflow list waits for one), so this post wakes nothing.
                if r == SQ_FULL {
                    kick = false;
                }
                // SAFETY: The shim did not take `wr_id`; it came from `into_raw` above.
                unsafe { TxRef::from_raw(wr_id) }
            } else {
                tx
            };
            // The transmit work hands it over later from what the hold keeps: the MAD (which
            // nobody writes meanwhile) and this copy of where it goes.
            tx.set_dest(TxDest {
                ah: wr.ah,
                remote_qpn: wr.remote_qpn,
                pkey_index: wr.pkey_index,
                timeout_ms: u32::try_from(wr.body.timeout_ms).unwrap_or(0),
                retries: u32::try_from(wr.body.retries).unwrap_or(0),
            });
            q.push_back(tx);
            kick
        };
        if kick {
            self.kick();
        }
        Ok(Handed::Queued)
    }

    /// [`Transport::check_send`](crate::engine::transport::Transport::check_send): whether
    /// the port is open and its device can carry a send to `ah` with `pkey_index`. The last
    /// P_Key index and source GID index that passed are remembered until the port's tables
    /// change (a port event), so that a run of posts alike reads the device's tables once, as
    /// the C layer's posts read none (its client made the address handle); a closed port
    /// refuses the transmission itself (`queue_tx`).
    pub(super) fn check_send(&self, ah: &Address, pkey_index: u16) -> Result {
        let gen = self.tables_gen.load(Acquire);
        let key = CheckedKey::new(ah, pkey_index, gen);
        if self.checked.load(Relaxed) == key.0 {
            return Ok(());
        }
        let vp = self.vp.lock();
        if vp.is_null() {
            return Err(ENODEV);
        }
        // SAFETY: The port's lock is held and the port is open.
        unsafe { self.check_tx_address(ah, pkey_index) }?;
        // Read before the check: tables that changed since miss the next time.
        self.checked.store(key.0, Relaxed);
        Ok(())
    }

    /// The port's P_Key or GID table may have changed: what [`VerbsPort::check_send`]
    /// remembers holds no more.
    pub(super) fn tables_changed(&self) {
        self.tables_gen.fetch_add(1, Release);
    }

    /// Whether the device can carry a send to `ah` with `pkey_index`: the errno a device
    /// gives a work request it cannot make a handle for, otherwise.
    ///
    /// # Safety
    ///
    /// The caller holds the port's lock (`vp`), and the port is open (`vp` is not null).
    unsafe fn check_tx_address(&self, ah: &Address, pkey_index: u16) -> Result {
        let port = u32::from(self.port);
        let pkey = |index: u16| -> Option<u16> {
            let mut pkey = 0u16;
            // SAFETY: The port is open and its lock held (the caller's promise), so `dev` is a
            // device whose tables exist (type invariant); `pkey` is valid for a write. ib_core
            // reads its cache under an interrupt-safe lock.
            let r = unsafe { rmad_shim_query_pkey(self.dev, port, index, &mut pkey) };
            (r == 0 && pkey & 0x7fff != 0).then_some(pkey)
        };
        // A P_Key index the port's table lacks fails the post, as the device fails a work
        // request with it in the C layer. The private QP sends in the partition of index 0:
        // another partition is not carried yet (one QP per partition in use would be).
        match pkey(pkey_index) {
            None => return Err(EINVAL),
            Some(p) if pkey_index != 0 && pkey(0) != Some(p) => return Err(EOPNOTSUPP),
            Some(_) => {}
        }
        // An address the device cannot make a handle for fails the post now, as it does in
        // the C layer (whose client creates the handle first): its source GID must exist.
        if let Some(g) = ah.grh {
            let mut gid = [0u8; 16];
            // SAFETY: As above; `gid` has 16 bytes. ib_core reads its GID table under an
            // interrupt-safe lock.
            let r = unsafe {
                rmad_shim_query_gid(self.dev, port, c_int::from(g.sgid_index), gid.as_mut_ptr())
            };
            if r != 0 {
                return Err(EINVAL);
            }
        }
        Ok(())
    }

    /// Makes sure the transmit work runs: the port's own work item, on the per-CPU system
    /// workqueue (`system_percpu_wq`, as 7.3 calls `system_wq`) of the CPU that kicks it (the
    /// CPU whose post, or send completion, has something for it), so that no port's
    /// transmissions wait behind another's.
    pub(super) fn kick(&self) {
        let this = self.arc();
        // Already queued is fine: that run will see what was just queued. A disabled work (the
        // port is closing) refuses it: `close` flushes what is queued.
        let _ = workqueue::system_percpu().enqueue(this);
    }

    /// The transmit work: hands queued transmissions to the device, oldest first, until the
    /// queue is empty or the send queue is full. Process context, no rmad lock held.
    fn transmit_pending(self: &Arc<Self>) {
        self.tx_runs.add(1, Relaxed);
        {
            let vp = *self.vp.lock();
            if !vp.is_null() {
                // SAFETY: As below: `vp` stays open while this work runs; the recovery and
                // the sweep are the transmit work's to call, before it posts anything.
                unsafe {
                    // A QP that a failed send left in the error state is reset first, or
                    // every later send and receive of the port would be flushed.
                    rmad_shim_vport_recover(vp);
                    rmad_shim_vport_sweep(vp);
                }
            }
        }
        // Read when the first transmission to a GID needs them, then kept for this run.
        let mut own: Option<OwnGids> = None;
        loop {
            let Some(tx) = self.take_next() else {
                return;
            };
            let vp = *self.vp.lock();
            if vp.is_null() {
                // Closing: `close` flushes what is queued.
                self.put_back(tx);
                return;
            }
            let gen = tx.tx_gen.load(Relaxed);
            let Some(dest) = tx.dest() else {
                // Not reachable: `queue_tx` stores it before it queues the transmission.
                pr_warn!("verbs: {}: a queued send has no destination\n", self.port);
                let rec = tx.into_ref();
                Agent::send_completed(&rec, gen, WcStatus::LocQpOpErr, 0);
                continue;
            };
            let Some((tx, dmac)) = self.dmac_or_park(tx, &dest.ah, &mut own) else {
                continue;
            };
            // Once the device has the transmission, its send completion may end the send (and
            // free the record) at any time: the hand-over is reported through the agent, with
            // what is traced read before.
            let agent = tx.agent.clone();
            let trace = trace_of(tx.mad(), &dest);
            let mad = ptr::from_ref(tx.mad());
            let wr_id = tx.into_raw();
            // SAFETY: `mad` is the MAD of the record that `wr_id` holds, alive and written by
            // nobody while the hold is taken (until the send completion takes it back).
            let frame = TxFrame::new(
                unsafe { &*mad },
                dest.remote_qpn,
                dest.pkey_index,
                &dest.ah,
                dmac,
                wr_id,
            );
            // SAFETY: `vp` stays open while this work runs: `close` nulls it, then waits for
            // this work before it closes the shim's port. `frame`'s MAD is alive and unwritten
            // until the send completion, and the device reads it until then; on success the
            // shim hands `wr_id` back exactly once, to `rmad_rust_send_done`.
            let r = unsafe { rmad_shim_vport_send(vp, &frame) };
            if r == 0 {
                self.sent_queued.add(1, Relaxed);
                agent.handed_over(&trace);
                continue;
            }
            // SAFETY: The shim did not take `wr_id`; it came from `into_raw` above.
            let tx = unsafe { TxRef::from_raw(wr_id) };
            if r == SQ_FULL {
                // It waits at the head; every send completion kicks the work again while it
                // waits (see `tx_done`), including one that freed a slot since this attempt.
                self.put_back(tx);
                return;
            }
            // A transmission the device refuses completes with `LOC_QP_OP_ERR`
            // (Documentation/behaviour.md §2.4.3 step 5).
            pr_warn!("verbs: {}: transmission refused ({})\n", self.port, r);
            let rec = tx.into_ref();
            Agent::send_completed(&rec, gen, WcStatus::LocQpOpErr, 0);
        }
    }

    /// On RoCE, the MAC of the destination `ah` of `tx`: this port's own
    /// for its own GIDs, where rxe loops the packet back, or a resolved one; no MAC elsewhere.
    /// A destination not known yet parks `tx` aside, so that the next transmission, to another
    /// destination, goes out now; an unreachable one completes it with `LOC_QP_OP_ERR`. Either
    /// way `None`: the transmit work goes on with the next.
    fn dmac_or_park(
        self: &Arc<Self>,
        tx: TxRef,
        ah: &Address,
        own: &mut Option<OwnGids>,
    ) -> Option<(TxRef, [u8; 6])> {
        let g = match ah.grh {
            Some(g) if self.is_roce() => g,
            _ => return Some((tx, [0; 6])),
        };
        match self.dest_for_tx(&g, own) {
            Dest::Mac(mac) => Some((tx, mac)),
            Dest::Wait => {
                {
                    let mut parked = self.parked.lock();
                    parked.push_back(tx);
                    self.tx_parked.add(1, Relaxed);
                }
                // The resolution may have ended between `dest_for_tx` and the push, and found
                // nothing parked: then this one goes back now. (One that ends after this check
                // requeues what is parked, this one included.)
                if !self.is_resolving(&g) {
                    self.requeue_parked();
                }
                None
            }
            Dest::Unreachable => {
                let gen = tx.tx_gen.load(Relaxed);
                let rec = tx.into_ref();
                Agent::send_completed(&rec, gen, WcStatus::LocQpOpErr, 0);
                None
            }
        }
    }

    /// The transmit work takes the oldest queued transmission, and holds it (`tx_in_hand`)
    /// until it takes the next or puts it back: a post meanwhile queues behind it.
    fn take_next(&self) -> Option<TxRef> {
        let mut q = self.txq.lock();
        let tx = q.pop_front();
        // In hand before it is counted out of the queue: a send completion reads them in the
        // other order (`tx_done`).
        self.tx_in_hand.store(tx.is_some(), Release);
        if tx.is_some() {
            self.tx_waiting.fetch_sub(1, Release);
        }
        tx
    }

    /// The transmit work puts `tx` back at the head of the queue, and holds nothing.
    fn put_back(&self, tx: TxRef) {
        let mut q = self.txq.lock();
        q.push_front(tx);
        // Counted in the queue before it is out of hand (see `take_next`).
        self.tx_waiting.fetch_add(1, Release);
        self.tx_in_hand.store(false, Release);
    }

    /// Completes every queued transmission with `WR_FLUSH_ERR` (the port is closing and its
    /// transmit work is disabled).
    pub(super) fn flush_tx(&self) {
        loop {
            let Some(tx) = self.txq.lock().pop_front() else {
                return;
            };
            self.tx_waiting.fetch_sub(1, Relaxed);
            flushed(tx);
        }
    }

    /// Completes every parked transmission with `WR_FLUSH_ERR` (the port is closing, and
    /// neither its transmit work nor a resolution runs any more).
    pub(super) fn flush_parked(&self) {
        let mut parked = core::mem::take(&mut *self.parked.lock());
        while let Some(tx) = parked.pop_front() {
            self.tx_parked.fetch_sub(1, Relaxed);
            flushed(tx);
        }
    }

    /// A resolution ended: every parked transmission goes back to the head of the transmit
    /// queue, in order (those whose destination is still being resolved are parked again),
    /// or is flushed if the port has closed meanwhile.
    pub(super) fn requeue_parked(&self) {
        let mut parked = core::mem::take(&mut *self.parked.lock());
        {
            // Under the port's lock, as in `queue_tx`: a closing port flushes the transmit
            // queue only after it nulled `vp`.
            let vp = self.vp.lock();
            if !vp.is_null() {
                let mut q = self.txq.lock();
                while let Some(tx) = parked.pop_back() {
                    q.push_front(tx);
                    self.tx_waiting.add(1, Relaxed);
                    // Counted out only once queued: a post never sees it in neither place.
                    self.tx_parked.fetch_sub(1, Relaxed);
                }
            }
        }
        if parked.is_empty() {
            self.kick();
        }
        while let Some(tx) = parked.pop_front() {
            self.tx_parked.fetch_sub(1, Relaxed);
            flushed(tx);
        }
    }

    /// A transmission the shim took completed: `wr_id` is its id.
    ///
    /// # Safety
    ///
    /// `wr_id` must be the id of a transmission that `transmit_pending` handed to the shim,
    /// reported once.
    pub(super) unsafe fn tx_done(&self, wr_id: u64, status: WcStatus, vendor_err: u32) {
        // The id holds a pointer that `transmit_pending` exposed, so it fits a `usize`.
        let ptr =
            core::ptr::with_exposed_provenance::<SendRecord>(usize::try_from(wr_id).unwrap_or(0));
        // SAFETY: Caller's promise; the pointer came from `TxRef::into_raw`, and its hold is
        // still taken.
        let tx = unsafe { TxRef::from_raw(ptr) };
        let gen = tx.tx_gen.load(Relaxed);
        // The record may be queued again (a retry) once this completion is reported.
        let rec = tx.into_ref();
        Agent::send_completed(&rec, gen, status, vendor_err);
        drop(rec);
        // The slot this completion freed (under the shim's port lock, before this call) is for
        // a transmission that waits, if any: queued, or in the transmit work's hands (it may be
        // about to put it back because the send queue was full when it tried; a work item
        // queued while it runs runs again after it). Whoever tried the device and found no
        // slot counted its transmission before it took that port lock, so it is seen here:
        // the work's hold first, then the queue, the reverse of the order they are written in
        // (`take_next`, `put_back`). A failed transmission may have left the QP in the error
        // state, which the work recovers from at once (its receives are flushed meanwhile).
        // Otherwise, as when every post went to the device from its caller, nothing is woken.
        let waiting = self.tx_in_hand.load(Acquire) || self.tx_waiting.load(Acquire) != 0;
        if waiting || status != WcStatus::Success {
            self.kick();
        }
    }
}
