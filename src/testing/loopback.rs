// SPDX-License-Identifier: GPL-2.0

//! The loopback fabric: a software InfiniBand subnet inside the module, the transport that
//! needs no hardware.
//!
//! A fabric has two ports joined by a wire. A transmission from one port queues, on the
//! fabric's completion queue, the send completion of the sender and then the packet for the
//! port that owns the destination LID; the completion queue is processed one event at a time
//! on the engine's transport queue, like the CQ worker of a real port. Agents registered for a
//! class receive requests there and answer them by posting responses.
//!
//! The knobs ([`Knobs`]) make faults deterministic: hold events until a test releases them,
//! reorder the first two (a response before its send completion is an early response), lose
//! or duplicate packets, refuse transmissions, report an error status, delay processing, or
//! bound the send queue so that excess transmissions wait in an overflow list.

pub(crate) mod fifo;

use crate::{
    engine::{
        agent::Agent,
        agent::Engine, //
        rmpp_budget::PortBudget,
        send::SendRef,
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
    sys::workqueue,
    testing::loopback::fifo::Fifo, //
};
use kernel::{
    new_spinlock_irq,
    prelude::*,
    sync::{
        Arc,
        SpinLockIrq, //
    },
    time::msecs_to_jiffies,
    workqueue::{
        impl_has_delayed_work,
        new_delayed_work,
        DelayedWork,
        WorkItem, //
    },
};

/// Number of ports of a fabric.
pub(crate) const PORTS: usize = 2;

/// Fault-injection and timing knobs of a fabric. Counters count down one per use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Knobs {
    /// Events stay in the completion queue until released with [`Fabric::release`].
    pub(crate) hold: bool,
    /// Events are processed this many milliseconds after they are queued.
    pub(crate) delay_ms: u32,
    /// Lose the next this many request packets.
    pub(crate) drop_requests: u32,
    /// Lose the next this many response packets.
    pub(crate) drop_responses: u32,
    /// Deliver the next this many packets twice.
    pub(crate) duplicate: u32,
    /// Let this many transmissions pass before [`Knobs::fail_posts`] applies.
    pub(crate) pass_before_fail: u32,
    /// Refuse the next this many transmissions (the post or dispatch fails).
    pub(crate) fail_posts: u32,
    /// Refused transmissions fail with `ENODEV`, as a removed device's do (else `EIO`).
    pub(crate) fail_gone: bool,
    /// Complete the next this many transmissions with [`Knobs::error_status`].
    pub(crate) error_completions: u32,
    /// The status of an erroneous completion, with its vendor error.
    pub(crate) error_status: Option<(WcStatus, u32)>,
    /// At most this many transmissions wait for their completion; more wait in an overflow
    /// list (0: unbounded).
    pub(crate) sq_size: u32,
    /// Packets carry this source QP number instead of their sender's: a peer that changes
    /// its QP number at will.
    pub(crate) src_qp: Option<u32>,
}

/// An event of the fabric's completion queue.
enum CqEvent {
    /// A transmission completed.
    SendDone {
        rec: SendRef,
        gen: u64,
        status: WcStatus,
        vendor_err: u32,
    },
    /// A packet arrived at a port.
    Recv(RecvMad),
}

/// A transmission waiting for room in the send queue.
struct Overflow {
    done: CqEvent,
    packets: KVec<CqEvent>,
}

/// Counters of a fabric.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FabricStats {
    /// Transmissions accepted.
    pub(crate) transmitted: u64,
    /// Packets delivered to a port.
    pub(crate) delivered: u64,
    /// Packets lost on purpose.
    pub(crate) lost: u64,
    /// Packets dropped at their destination port, which is no member of their partition.
    pub(crate) pkey_dropped: u64,
}

/// Entries of each port's P_Key table.
pub(crate) const PKEYS: usize = 4;

/// The default P_Key table: the full-member default partition at index 0, nothing else.
const DEFAULT_PKEYS: [u16; PKEYS] = [0xffff, 0, 0, 0];

/// Whether a P_Key table entry is a partition key (some of its low 15 bits set).
fn pkey_valid(p: u16) -> bool {
    p & 0x7fff != 0
}

/// Whether a packet with P_Key `p` may be received by a port that has `q`: the same partition
/// (low 15 bits), and not two limited members (IBA 10.9.3).
fn pkey_matches(p: u16, q: u16) -> bool {
    pkey_valid(p) && p & 0x7fff == q & 0x7fff && (p | q) & 0x8000 != 0
}

struct FabricInner {
    ports: [PortAttr; PORTS],
    /// Each port's P_Key table ([`DEFAULT_PKEYS`] unless a test sets one).
    pkeys: [[u16; PKEYS]; PORTS],
    knobs: Knobs,
    cq: Fifo<CqEvent>,
    /// Events that may be processed while `knobs.hold` is set.
    released: usize,
    /// Transmissions whose completion is in `cq` or being processed.
    in_sq: u32,
    overflow: Fifo<Overflow>,
    /// The processing work is queued.
    armed: bool,
    /// The processing work is running an event.
    busy: bool,
    stats: FabricStats,
}

/// A loopback fabric.
#[pin_data]
pub(crate) struct Fabric {
    engine: Arc<Engine>,
    #[pin]
    inner: SpinLockIrq<FabricInner>,
    #[pin]
    work: DelayedWork<Fabric>,
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self> for Fabric { self.work }
}

impl WorkItem for Fabric {
    type Pointer = Arc<Fabric>;

    fn run(this: Arc<Fabric>) {
        this.process();
    }
}

/// The index of a port's one GID beyond the first 16 entries, as a port with many addresses
/// has.
pub(crate) const FAR_GID_INDEX: u8 = 20;

/// GID `index` of a port with base LID `lid`: 0 is the link-local GID, 1 the IPv4-mapped one,
/// [`FAR_GID_INDEX`] a global one (2001:db8::LID); the entries between are empty.
fn port_gid(lid: u16, index: u8) -> Option<Gid> {
    let [hi, lo] = lid.to_be_bytes();
    match index {
        0 => Some([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, hi, lo]),
        1 => Some([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, hi, lo]),
        FAR_GID_INDEX => Some([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, hi, lo]),
        _ => None,
    }
}

impl Fabric {
    /// The default ports: port 1 is an InfiniBand port with QP0 and QP1 (LID 1), port 2 has
    /// only QP1 (LID 2), like a RoCE port.
    pub(crate) const DEFAULT_PORTS: [PortAttr; PORTS] = [
        PortAttr {
            has_smi: true,
            has_cm: true,
            lid: 1,
            lmc: 0,
        },
        PortAttr {
            has_smi: false,
            has_cm: true,
            lid: 2,
            lmc: 0,
        },
    ];

    /// Creates a fabric with `ports`, processing its events on `engine`'s transport queue.
    pub(crate) fn new(engine: &Arc<Engine>, ports: [PortAttr; PORTS]) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                engine: engine.clone(),
                inner <- new_spinlock_irq!(
                    FabricInner {
                        ports,
                        pkeys: [DEFAULT_PKEYS; PORTS],
                        knobs: Knobs::default(),
                        cq: Fifo::new(),
                        released: 0,
                        in_sq: 0,
                        overflow: Fifo::new(),
                        armed: false,
                        busy: false,
                        stats: FabricStats::default(),
                    },
                    "Fabric::inner"
                ),
                work <- new_delayed_work!("Fabric::work"),
            }),
            GFP_KERNEL,
        )
    }

    /// Changes the knobs; releasing a hold lets every queued event be processed.
    pub(crate) fn set_knobs(self: &Arc<Self>, f: impl FnOnce(&mut Knobs)) {
        let mut g = self.inner.lock();
        f(&mut g.knobs);
        self.kick(&mut g);
    }

    /// Counters.
    pub(crate) fn stats(&self) -> FabricStats {
        self.inner.lock().stats
    }

    /// Number of events waiting in the completion queue.
    pub(crate) fn pending(&self) -> usize {
        self.inner.lock().cq.len()
    }

    /// Whether nothing is queued, overflowing or being processed.
    pub(crate) fn is_idle(&self) -> bool {
        let g = self.inner.lock();
        g.cq.is_empty() && g.overflow.is_empty() && !g.busy
    }

    /// Lets the next `n` held events be processed.
    pub(crate) fn release(self: &Arc<Self>, n: usize) {
        let mut g = self.inner.lock();
        g.released = g.released.saturating_add(n);
        self.kick(&mut g);
    }

    /// Moves the oldest queued packet to the front of the completion queue, ahead of send
    /// completions queued before it; returns whether there was one.
    pub(crate) fn promote_recv(&self) -> bool {
        self.inner
            .lock()
            .cq
            .promote(|e| matches!(e, CqEvent::Recv(_)))
            .unwrap_or(false)
    }

    /// Takes the oldest send completion out of the completion queue, ahead of everything
    /// queued before it, and processes it now in the calling thread; returns whether there
    /// was one. A test's receive handler calls it to have its send's completion processed
    /// while it runs, as a port whose sends and receives complete on two CQs polled by two
    /// works may do (`verbs/shim.c`).
    pub(crate) fn complete_send_now(self: &Arc<Self>) -> bool {
        let ev = {
            let mut g = self.inner.lock();
            match g.cq.promote(|e| matches!(e, CqEvent::SendDone { .. })) {
                Ok(true) => g.cq.pop(),
                _ => None,
            }
        };
        let Some(CqEvent::SendDone {
            rec,
            gen,
            status,
            vendor_err,
        }) = ev
        else {
            return false;
        };
        Agent::send_completed(&rec, gen, status, vendor_err);
        self.slot_freed();
        true
    }

    /// Queues the processing work if there is something it may process.
    fn kick(self: &Arc<Self>, g: &mut FabricInner) {
        let runnable = !g.cq.is_empty() && (!g.knobs.hold || g.released > 0);
        if runnable && !g.armed {
            g.armed = true;
            let delay = msecs_to_jiffies(g.knobs.delay_ms);
            workqueue::rearm::<Fabric, 0>(&self.engine.cq_wq, self, delay);
        }
    }

    /// Processes queued events one at a time, without holding the fabric's lock while an
    /// event is handled (it calls into agents and handlers).
    fn process(self: &Arc<Self>) {
        loop {
            let ev = {
                let mut g = self.inner.lock();
                g.armed = false;
                if g.cq.is_empty() || (g.knobs.hold && g.released == 0) {
                    g.busy = false;
                    return;
                }
                if g.knobs.hold {
                    g.released = g.released.saturating_sub(1);
                }
                g.busy = true;
                g.cq.pop()
            };
            match ev {
                Some(CqEvent::SendDone {
                    rec,
                    gen,
                    status,
                    vendor_err,
                }) => {
                    Agent::send_completed(&rec, gen, status, vendor_err);
                    self.slot_freed();
                }
                Some(CqEvent::Recv(mad)) => self.engine.receive(self.device(), mad),
                None => {}
            }
        }
    }

    /// The identity of the fabric as a device ([`Transport::device`]): its address.
    fn device(&self) -> *const () {
        core::ptr::from_ref(self).cast::<()>()
    }

    /// A send-queue slot was freed: the oldest overflow transmission goes out.
    fn slot_freed(self: &Arc<Self>) {
        let mut g = self.inner.lock();
        g.in_sq = g.in_sq.saturating_sub(1);
        // Room in the completion queue first, so that the completion cannot be lost; without
        // it the transmission stays in the overflow until the next slot is freed.
        let Some(need) = g
            .overflow
            .front()
            .map(|o| o.packets.len().saturating_add(1))
        else {
            return;
        };
        if g.cq.reserve(need, GFP_ATOMIC).is_err() {
            return;
        }
        if let Some(o) = g.overflow.pop() {
            g.in_sq = g.in_sq.saturating_add(1);
            Self::queue_tx(&mut g, o.done, o.packets);
        }
    }

    /// Appends a transmission's events to the completion queue. Allocation failures lose the
    /// packet (as a wire would), never the completion, whose room was reserved.
    fn queue_tx(g: &mut FabricInner, done: CqEvent, packets: KVec<CqEvent>) {
        let _ = g.cq.push(done, GFP_ATOMIC);
        for p in packets {
            if g.cq.push(p, GFP_ATOMIC).is_ok() {
                g.stats.delivered = g.stats.delivered.saturating_add(1);
            }
        }
    }

    /// The port index and base LID that own `dlid`.
    fn port_of_lid(ports: &[PortAttr; PORTS], dlid: u16) -> Option<(usize, u16)> {
        ports.iter().enumerate().find_map(|(i, p)| {
            let span = 1u32 << p.lmc.min(15);
            let d = u32::from(dlid);
            let base = u32::from(p.lid);
            (d >= base && d < base.saturating_add(span)).then_some((i, p.lid))
        })
    }
}

impl Fabric {
    /// Replaces the attributes of `port` (numbered from 1), as a subnet manager that assigns
    /// it another LID or LMC does.
    pub(crate) fn set_port_attr(&self, port: u8, attr: PortAttr) {
        let mut g = self.inner.lock();
        if let Some(p) = usize::from(port)
            .checked_sub(1)
            .and_then(|i| g.ports.get_mut(i))
        {
            *p = attr;
        }
    }

    /// Replaces the P_Key table of `port` (numbered from 1).
    pub(crate) fn set_pkeys(&self, port: u8, table: [u16; PKEYS]) {
        let mut g = self.inner.lock();
        if let Some(t) = usize::from(port)
            .checked_sub(1)
            .and_then(|i| g.pkeys.get_mut(i))
        {
            *t = table;
        }
    }

    /// Entry `index` of the P_Key table of `port`, if valid.
    pub(crate) fn pkey(&self, port: u8, index: u16) -> Option<u16> {
        let g = self.inner.lock();
        let t = g.pkeys.get(usize::from(port).checked_sub(1)?)?;
        t.get(usize::from(index))
            .copied()
            .filter(|p| pkey_valid(*p))
    }

    /// The attributes of `port` (numbered from 1).
    pub(crate) fn port_attr(&self, port: u8) -> Option<PortAttr> {
        let i = usize::from(port).checked_sub(1)?;
        self.inner.lock().ports.get(i).copied()
    }

    /// Transmits `wr` from `port`: queues its send completion and, unless a knob loses it, the
    /// packet for the destination port.
    fn transmit(self: &Arc<Self>, port: u8, wr: SendWr<'_, Agent>) -> Result {
        let src = usize::from(port).checked_sub(1).ok_or(EINVAL)?;
        // Copy the MAD before taking the fabric's lock, unless no port has the destination LID
        // (a packet to nowhere needs no copy: allocations dominate under the test kernel's
        // sanitizers, and `rmad_scale` sends 100 000 of them).
        let routable = Self::port_of_lid(&self.inner.lock().ports, wr.ah.dlid).is_some();
        let sent = wr.body.mad();
        let mut mad = KVVec::new();
        if routable {
            mad.reserve(sent.len(), GFP_ATOMIC)?;
            mad.extend_from_slice(sent, GFP_ATOMIC)?;
        }
        let is_response = wire::ib_response_mad(sent).unwrap_or(false);
        let mut dup: Option<KVVec<u8>> = None;

        let mut g = self.inner.lock();
        if g.knobs.fail_posts > 0 {
            if g.knobs.pass_before_fail > 0 {
                g.knobs.pass_before_fail -= 1;
            } else {
                g.knobs.fail_posts -= 1;
                return Err(if g.knobs.fail_gone { ENODEV } else { EIO });
            }
        }
        let src_attr = *g.ports.get(src).ok_or(EINVAL)?;
        // The packet's P_Key: the sender's table must have the index (as a device refuses a
        // work request with a bad P_Key index).
        let pkey = g
            .pkeys
            .get(src)
            .and_then(|t| t.get(usize::from(wr.pkey_index)))
            .copied()
            .filter(|p| pkey_valid(*p))
            .ok_or(EINVAL)?;
        let (status, vendor_err) = match (g.knobs.error_completions, g.knobs.error_status) {
            (n, Some(s)) if n > 0 => {
                g.knobs.error_completions = n - 1;
                s
            }
            _ => (WcStatus::Success, 0),
        };
        g.stats.transmitted = g.stats.transmitted.saturating_add(1);
        // Where the packet goes, and whether that port is a member of its partition (then
        // with the index of the P_Key in the receiver's table).
        let dest = Self::port_of_lid(&g.ports, wr.ah.dlid).filter(|_| mad.len() == sent.len());
        let member = dest.and_then(|(dst, _)| {
            g.pkeys
                .get(dst)
                .and_then(|t| t.iter().position(|q| pkey_matches(pkey, *q)))
                .and_then(|i| u16::try_from(i).ok())
        });
        let mut packets = KVec::new();
        let lost = if is_response {
            g.knobs.drop_responses > 0
        } else {
            g.knobs.drop_requests > 0
        };
        if lost {
            if is_response {
                g.knobs.drop_responses -= 1;
            } else {
                g.knobs.drop_requests -= 1;
            }
            g.stats.lost = g.stats.lost.saturating_add(1);
        } else if dest.is_some() && member.is_none() {
            g.stats.pkey_dropped = g.stats.pkey_dropped.saturating_add(1);
        } else if let (Some((dst, base)), Some(rx_pkey_index)) = (dest, member) {
            let grh = wr.ah.grh.map(|h| {
                (
                    port_gid(src_attr.lid, h.sgid_index).unwrap_or([0; 16]),
                    h.dgid,
                )
            });
            let wc = RecvWc {
                // `dst` < PORTS, so it fits.
                port: u8::try_from(dst + 1).unwrap_or(0),
                slid: src_attr.lid.saturating_add(u16::from(wr.ah.src_path_bits)),
                dlid_path_bits: u8::try_from(wr.ah.dlid - base).unwrap_or(0),
                src_qp: g.knobs.src_qp.unwrap_or(wr.src_qpn),
                dst_qp: wr.remote_qpn,
                pkey_index: rx_pkey_index,
                sl: wr.ah.sl,
                grh,
                // What the packet carries: the sender's address, untouched by a router.
                grh_fields: wr.ah.grh.map_or(GrhFields::default(), |h| GrhFields {
                    hop_limit: h.hop_limit,
                    traffic_class: h.traffic_class,
                    flow_label: h.flow_label,
                }),
                // No `ib_device` to read a work completion of.
                link: LinkHdr::default(),
                private_request: false,
            };
            if g.knobs.duplicate > 0 {
                g.knobs.duplicate -= 1;
                let mut copy = KVVec::with_capacity(mad.len(), GFP_ATOMIC)?;
                copy.extend_from_slice(&mad, GFP_ATOMIC)?;
                dup = Some(copy);
            }
            packets.push(CqEvent::Recv(RecvMad { mad, wc }), GFP_ATOMIC)?;
            if let Some(copy) = dup.take() {
                packets.push(CqEvent::Recv(RecvMad { mad: copy, wc }), GFP_ATOMIC)?;
            }
        }
        let done = CqEvent::SendDone {
            rec: wr.body.rec().clone(),
            gen: wr.gen,
            status,
            vendor_err,
        };
        let room = g.knobs.sq_size == 0 || g.in_sq < g.knobs.sq_size;
        if room {
            g.cq.reserve(packets.len().saturating_add(1), GFP_ATOMIC)?;
            g.in_sq = g.in_sq.saturating_add(1);
            Self::queue_tx(&mut g, done, packets);
        } else {
            g.overflow.push(Overflow { done, packets }, GFP_ATOMIC)?;
        }
        self.kick(&mut g);
        Ok(())
    }

    /// Stops the fabric: releases every hold and waits until the completion queue is empty.
    pub(crate) fn shutdown(self: &Arc<Self>) {
        self.set_knobs(|k| {
            k.hold = false;
            k.delay_ms = 0;
        });
        self.engine.cq_wq.flush();
        workqueue::disable_sync::<Fabric, 0>(self);
    }
}

/// The loopback transport: a [`Fabric`] as seen by agents.
pub(crate) struct Loopback {
    /// The fabric, for tests and the demonstration to turn its knobs.
    pub(crate) fabric: Arc<Fabric>,
    /// The reassembly budget of each port, shared by its kernel-RMPP agents.
    budgets: [Arc<PortBudget>; PORTS],
}

impl Loopback {
    /// A loopback transport over a new fabric with `ports`.
    pub(crate) fn new(engine: &Arc<Engine>, ports: [PortAttr; PORTS]) -> Result<Arc<Self>> {
        Ok(Arc::new(
            Loopback {
                fabric: Fabric::new(engine, ports)?,
                budgets: [PortBudget::new()?, PortBudget::new()?],
            },
            GFP_KERNEL,
        )?)
    }
}

impl Transport<Agent> for Loopback {
    fn device(&self) -> *const () {
        self.fabric.device()
    }

    fn port_attr(&self, port: u8) -> Option<PortAttr> {
        self.fabric.port_attr(port)
    }

    fn gid(&self, port: u8, index: u8) -> Option<Gid> {
        port_gid(self.fabric.port_attr(port)?.lid, index)
    }

    fn pkey(&self, port: u8, index: u16) -> Option<u16> {
        self.fabric.pkey(port, index)
    }

    fn post_send(&self, port: u8, wr: SendWr<'_, Agent>) -> Result<Handed> {
        self.fabric.transmit(port, wr)?;
        Ok(Handed::Device)
    }

    fn name(&self) -> &CStr {
        c"loopback"
    }

    fn rmpp_budget(&self, port: u8) -> Option<Arc<PortBudget>> {
        let i = usize::from(port).checked_sub(1)?;
        self.budgets.get(i).cloned()
    }
}
