// SPDX-License-Identifier: GPL-2.0

//! The transmit path of a verbs port.
//!
//! Handing a MAD to a device creates an address handle, and a driver may take locks there that
//! are not interrupt-safe (rxe's object pools use plain `xa_lock`). A post is atomic-safe (from
//! timers, hrtimers, with interrupts off), and rmad's own locks are taken in those contexts,
//! so no driver lock may ever be taken under them. A transmission is therefore queued under the
//! port's lock ([`VerbsPort::queue_tx`], which the engine calls under the agent's lock) and
//! handed to the device by the port's transmit work, in process context with no rmad lock held
//! ([`VerbsPort::transmit_pending`]). The queue is also the C layer's overflow list: what the
//! send queue cannot take waits in it, in order, until a send completion makes room.

use super::{
    neigh::{
        Dest,
        OwnGids, //
    },
    *, //
};
use crate::{
    engine::send::{
        SendRecord,
        SendTrace, //
    },
    mad::{
        Address,
        GrhAttr, //
    },
};
use kernel::{
    impl_has_work,
    list::{
        List,
        ListArc, //
    },
    sync::atomic::Relaxed,
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

/// The queue of sends whose transmission waits for the device, oldest first. The links are in
/// the send's record, so queueing allocates nothing. While the device holds a transmission,
/// the work-request id is the pointer of the record's `ListArc`, taken back exactly once by
/// the send completion; the record's `tx_gen` names the post being transmitted.
pub(super) type TxQueue = List<SendRecord>;

/// Completes the transmission `tx` with `WR_FLUSH_ERR`: its port closed.
fn flushed(tx: ListArc<SendRecord>) {
    let gen = tx.tx_gen.load(Relaxed);
    let rec = tx.into_arc();
    Agent::send_completed(&rec, gen, WcStatus::WrFlushErr, 0);
}

/// The errno the shim returns when the send queue is full.
const SQ_FULL: c_int = -(kernel::bindings::EBUSY as c_int);

/// One transmission as the shim takes it, copied out of the send under its agent's lock.
struct Frame {
    mad: [u8; MAD_MAX],
    len: usize,
    remote_qpn: u32,
    pkey_index: u16,
    ah: Address,
    /// What the trace of the hand-over tells.
    trace: SendTrace,
}

impl VerbsPort {
    /// Queues `wr` for the transmit work. Any context; allocates nothing. `ENODEV` once the
    /// port is closed; `EBUSY` if the send already has a transmission queued or on the device
    /// (not reachable: the engine never retransmits before the send completion).
    pub(super) fn queue_tx(&self, wr: &SendWr<'_>) -> Result {
        if wr.mad.len() > MAD_MAX {
            return Err(EINVAL);
        }
        let tx = ListArc::try_from_arc(wr.rec.clone()).map_err(|_| EBUSY)?;
        // The `ListArc` is unique: nobody else reads or writes `tx_gen` now.
        tx.tx_gen.store(wr.gen, Relaxed);
        {
            // One hold of the port's lock for the check and the queueing: a closing port
            // either sees the transmission queued (and flushes it) or refused it, and while the
            // port is open the device's tables can be read without a reference of their own
            // (the type invariant), which saves a reference and two more holds per post.
            let vp = self.vp.lock();
            if vp.is_null() {
                return Err(ENODEV);
            }
            if !wr.checked {
                // SAFETY: The port's lock is held and the port is open.
                unsafe { self.check_tx_address(&wr.ah, wr.pkey_index) }?;
            }
            self.txq.lock().push_back(tx);
        }
        self.kick();
        Ok(())
    }

    /// [`Transport::check_send`](crate::engine::transport::Transport::check_send): whether
    /// the port is open and its device can carry a send to `ah` with `pkey_index`.
    pub(super) fn check_send(&self, ah: &Address, pkey_index: u16) -> Result {
        let vp = self.vp.lock();
        if vp.is_null() {
            return Err(ENODEV);
        }
        // SAFETY: The port's lock is held and the port is open.
        unsafe { self.check_tx_address(ah, pkey_index) }
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

    /// Makes sure the transmit work runs.
    pub(super) fn kick(&self) {
        let this = self.arc();
        // Already queued is fine: that run will see what was just queued.
        let _ = self.engine.cq_wq.queue().enqueue(this);
    }

    /// Copies the transmission of `rec` (post `gen`) out of the send, under its agent's lock;
    /// `None` if the send no longer holds that post's MAD (not reachable: the send handler
    /// cannot run before the send completion).
    fn frame(rec: &SendRecord, gen: u64) -> Option<Frame> {
        let g = rec.agent.lock();
        let st = rec.state.access(&g);
        let body = st.body.as_ref().filter(|_| st.gen == gen)?;
        let mut mad = [0u8; MAD_MAX];
        let len = body.mad.len();
        mad.get_mut(..len)?.copy_from_slice(&body.mad);
        Some(Frame {
            mad,
            len,
            remote_qpn: body.remote_qpn,
            pkey_index: body.pkey_index,
            ah: st.ah()?,
            trace: st.trace_fields(),
        })
    }

    /// The transmit work: hands queued transmissions to the device, oldest first, until the
    /// queue is empty or the send queue is full. Process context, no rmad lock held.
    fn transmit_pending(self: &Arc<Self>) {
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
            let Some(tx) = self.txq.lock().pop_front() else {
                return;
            };
            let vp = *self.vp.lock();
            if vp.is_null() {
                // Closing: `close` flushes what is queued.
                self.txq.lock().push_front(tx);
                return;
            }
            let gen = tx.tx_gen.load(Relaxed);
            let Some(frame) = Self::frame(&tx, gen) else {
                pr_warn!("verbs: {}: a queued send lost its MAD\n", self.port);
                let rec = tx.into_arc();
                Agent::send_completed(&rec, gen, WcStatus::LocQpOpErr, 0);
                continue;
            };
            // RoCE: the destination's MAC (this port's own for its own GIDs, where rxe loops
            // the packet back). One that is not known yet waits aside, so that the next
            // transmission, to another destination, goes out now.
            let dmac = match frame.ah.grh {
                Some(g) if self.is_roce() => match self.dest_for_tx(&g, &mut own) {
                    Dest::Mac(mac) => mac,
                    Dest::Wait => {
                        self.parked.lock().push_back(tx);
                        // The resolution may have ended between `dest_for_tx` and the push,
                        // and found nothing parked: then this one goes back now. (One that
                        // ends after this check requeues what is parked, this one included.)
                        if !self.is_resolving(&g) {
                            self.requeue_parked();
                        }
                        continue;
                    }
                    Dest::Unreachable => {
                        let rec = tx.into_arc();
                        Agent::send_completed(&rec, gen, WcStatus::LocQpOpErr, 0);
                        continue;
                    }
                },
                _ => [0; 6],
            };
            // Once the device has the transmission, its send completion may end the send (and
            // free the record) at any time: the hand-over is reported through the agent.
            let agent = tx.agent.clone();
            let wr_id = ListArc::into_raw(tx);
            // SAFETY: `vp` stays open while this work runs: `close` nulls it, then waits for
            // this work before it closes the shim's port. `wr_id` comes from `into_raw`.
            let r = unsafe { self.send_raw(vp, &frame, &dmac, wr_id) };
            if r == 0 {
                agent.handed_over(&frame.trace);
                continue;
            }
            // SAFETY: The shim did not take `wr_id`; it came from `into_raw` above.
            let tx = unsafe { ListArc::from_raw(wr_id) };
            if r == SQ_FULL {
                // It waits at the head; every send completion kicks the work again (see
                // `tx_done`), including one that freed a slot since this attempt.
                self.txq.lock().push_front(tx);
                return;
            }
            // A transmission the device refuses completes with `LOC_QP_OP_ERR`
            // (Documentation/behaviour.md §2.4.3 step 5).
            pr_warn!("verbs: {}: transmission refused ({})\n", self.port, r);
            let rec = tx.into_arc();
            Agent::send_completed(&rec, gen, WcStatus::LocQpOpErr, 0);
        }
    }

    /// Hands one transmission to the shim; returns its errno.
    ///
    /// # Safety
    ///
    /// `vp` must be this port's open shim port, kept open for the duration of the call;
    /// `wr_id` must come from `ListArc::into_raw`.
    unsafe fn send_raw(
        &self,
        vp: *mut Vport,
        f: &Frame,
        dmac: &[u8; 6],
        wr_id: *const SendRecord,
    ) -> c_int {
        let (has_grh, g) = match f.ah.grh {
            Some(g) => (1u8, g),
            None => (
                0u8,
                GrhAttr {
                    dgid: [0; 16],
                    sgid_index: 0,
                    hop_limit: 0,
                    traffic_class: 0,
                    flow_label: 0,
                },
            ),
        };
        // `len <= MAD_MAX` (it was copied into the frame), which fits.
        let len = u32::try_from(f.len).unwrap_or(0);
        // SAFETY: `vp` is open (caller's promise); the buffers are valid for their lengths; on
        // success the shim hands `wr_id` back exactly once, to `rmad_rust_send_done`.
        unsafe {
            rmad_shim_vport_send(
                vp,
                f.mad.as_ptr(),
                len,
                // A pointer always fits the 64-bit work-request id.
                u64::try_from(wr_id.expose_provenance()).unwrap_or(0),
                f.remote_qpn,
                f.pkey_index,
                u32::from(f.ah.dlid),
                f.ah.src_path_bits,
                has_grh,
                g.dgid.as_ptr(),
                g.sgid_index,
                g.hop_limit,
                g.traffic_class,
                g.flow_label,
                f.ah.sl,
                dmac.as_ptr(),
            )
        }
    }

    /// Completes every queued transmission with `WR_FLUSH_ERR` (the port is closing and its
    /// transmit work is disabled).
    pub(super) fn flush_tx(&self) {
        loop {
            let Some(tx) = self.txq.lock().pop_front() else {
                return;
            };
            flushed(tx);
        }
    }

    /// Completes every parked transmission with `WR_FLUSH_ERR` (the port is closing, and
    /// neither its transmit work nor a resolution runs any more).
    pub(super) fn flush_parked(&self) {
        let mut parked = core::mem::replace(&mut *self.parked.lock(), List::new());
        while let Some(tx) = parked.pop_front() {
            flushed(tx);
        }
    }

    /// A resolution ended: every parked transmission goes back to the head of the transmit
    /// queue, in order (those whose destination is still being resolved are parked again),
    /// or is flushed if the port has closed meanwhile.
    pub(super) fn requeue_parked(&self) {
        let mut parked = core::mem::replace(&mut *self.parked.lock(), List::new());
        {
            // Under the port's lock, as in `queue_tx`: a closing port flushes the transmit
            // queue only after it nulled `vp`.
            let vp = self.vp.lock();
            if !vp.is_null() {
                let mut q = self.txq.lock();
                while let Some(tx) = parked.pop_back() {
                    q.push_front(tx);
                }
            }
        }
        if parked.is_empty() {
            self.kick();
        }
        while let Some(tx) = parked.pop_front() {
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
        // SAFETY: Caller's promise; the pointer came from `ListArc::into_raw`, and the tracker
        // still counts that `ListArc`.
        let tx = unsafe { ListArc::from_raw(ptr) };
        let gen = tx.tx_gen.load(Relaxed);
        // The record may be queued again (a retry) once this completion is reported.
        let rec = tx.into_arc();
        Agent::send_completed(&rec, gen, status, vendor_err);
        drop(rec);
        // Always, even with the queue seen empty: the transmit work may have taken the last
        // queued send and be about to put it back because the send queue was full when it
        // tried. A work item queued while it runs runs again after it, so the slot this
        // completion freed is always used; checking the queue here instead would strand that
        // send until some unrelated post.
        self.kick();
    }
}
