// SPDX-License-Identifier: GPL-2.0

//! Kernel RMPP, receive side (`mad_rmpp.c`, Documentation/behaviour.md §2.10): the transfers a
//! kernel-RMPP agent is reassembling, the ACKs, STOPs and ABORTs it answers with, the
//! inactivity timeout, and the bounds on what a sender can make it hold.
//!
//! The decisions are those of the pure machine [`Transfer`]; this file keeps the transfers
//! under the agent's RMPP mutex, copies the segments' data into one buffer per transfer, sends
//! the control messages and hands a completed message to the receive path as one MAD. It runs
//! in the transport's receive context and in the agent's work (process context, one at a time
//! per agent through the mutex); the mutex is taken before the agent's lock, never inside it.
//!
//! Where it differs from C (each a finding of §2.10.10): the key holds the sender's GID; only
//! RMPP classes take part (an ACTIVE MAD of another class is an ordinary MAD); a transfer ends
//! after [`INACTIVITY_MS`] without progress instead of 40 s after its start; lengths and
//! segment numbers are checked; and an agent holds at most [`MAX_TRANSFERS`] transfers and
//! [`MAX_BYTES`] bytes of them, and the agents of a port together at most the port's bound
//! ([`crate::engine::rmpp_budget::PortBudget`]), beyond which a new transfer is refused with
//! STOP(RESX). The transfers themselves, their bounds and counts are in `rmpp_transfers.rs`.

use super::{
    rmpp_transfers::{
        Key,
        Recvs,
        RmppStats,
        Rx,
        INACTIVITY_MS,
        LINGER_MS,
        MAX_BYTES,
        MAX_LIFETIME_MS,
        MAX_PER_SENDER,
        MAX_TRANSFERS, //
    },
    Agent,
    SendSpec,
    RECV_QUEUE_SIZE, //
};
use crate::{
    engine::transport::{
        RecvMad,
        RecvWc, //
    },
    mad::{
        rmpp::{
            capacity,
            recv::{
                precheck,
                window_for_queue,
                Config,
                Kind,
                Phase,
                Transfer,
                Verdict,
                MAX_SEGMENTS, //
            },
            Ack,
            RmppHdr,
            Status, //
        },
        state::SendState,
        wire::{
            self,
            MadHdr, //
        },
        Address, //
    },
};
use kernel::{
    page::PAGE_SIZE,
    prelude::*,
    rbtree::RBTreeNode,
    sync::Arc, //
};

/// The window W of every transfer: C's, an eighth of the receive queue (64).
fn window() -> u32 {
    window_for_queue(RECV_QUEUE_SIZE)
}
/// The bytes a kvmalloc of `n` bytes takes from the allocator: a kmalloc bucket, or a
/// power-of-two number of pages up to kmalloc's largest size, or whole pages beyond (vmalloc).
/// A transfer's buffer is allocated with exactly that capacity and charged for it, so that
/// the bounds count what the allocator really hands out.
fn alloc_size(n: usize) -> usize {
    // SAFETY: A pure function of its argument, callable in any context.
    let bucket = unsafe { kernel::bindings::kmalloc_size_roundup(n) };
    let pages = n.div_ceil(PAGE_SIZE).saturating_mul(PAGE_SIZE);
    bucket.max(pages)
}

/// The first `hdr_len` bytes of `mad` (the headers a control message copies), in a MAD-sized
/// buffer; zeroes where `mad` is shorter.
fn head(mad: &[u8], hdr_len: usize) -> [u8; wire::IB_MGMT_MAD_SIZE] {
    let mut from = [0u8; wire::IB_MGMT_MAD_SIZE];
    let n = hdr_len.min(mad.len()).min(from.len());
    if let (Some(d), Some(s)) = (from.get_mut(..n), mad.get(..n)) {
        d.copy_from_slice(s);
    }
    from
}

/// Adds one to a statistic.
fn bump(v: &mut u64) {
    *v = v.saturating_add(1);
}

/// What is left to do, without the RMPP mutex, after a segment was taken.
#[derive(Default)]
struct After {
    /// A control message to send.
    control: Option<Control>,
    /// A whole message for the receive path.
    done: Option<RecvMad>,
    /// A deadline for the agent's timer.
    deadline: Option<i64>,
}

/// What a storing verdict asks ([`Verdict::Store`], [`Verdict::StoreAndAck`],
/// [`Verdict::Complete`]).
struct Stored {
    /// The segment number.
    n: u32,
    /// The ACK to send back, if any.
    ack: Option<Ack>,
    /// The message length, once the transfer is complete.
    len: Option<usize>,
}

/// A control message to send back: its RMPP header, built from which segment's header.
pub(super) struct Control {
    hdr: RmppHdr,
    /// Bytes 0 to the class's data offset of the segment it answers.
    from: [u8; wire::IB_MGMT_MAD_SIZE],
    hdr_len: usize,
    wc: RecvWc,
    reply: Option<Address>,
}

impl Agent {
    /// What the RMPP receive side did so far.
    pub(crate) fn rmpp_stats(&self) -> RmppStats {
        let r = self.rmpp.lock();
        let (port_active, port_bytes) = r.port.figures();
        RmppStats {
            active: u64::try_from(r.active).unwrap_or(u64::MAX),
            bytes: u64::try_from(r.bytes).unwrap_or(u64::MAX),
            port_active,
            port_bytes,
            port_peak_bytes: r.port.peak_bytes(),
            lingering: u64::try_from(r.lingering).unwrap_or(u64::MAX),
            ..r.stats
        }
    }

    /// RMPP processing of a MAD that reached this kernel-RMPP agent (`ib_process_rmpp_recv_wc`
    /// and the response precheck, §2.10.1): the MAD to go on with, a whole message once its
    /// last segment came, or `None` when RMPP consumed it.
    pub(super) fn rmpp_receive(self: &Arc<Self>, hdr: &MadHdr, recv: RecvMad) -> Option<RecvMad> {
        if !wire::ib_is_mad_class_rmpp(hdr.mgmt_class) {
            return Some(recv);
        }
        let Ok(h) = RmppHdr::parse(&recv.mad) else {
            return Some(recv);
        };
        if h.flags & wire::IB_MGMT_RMPP_FLAG_ACTIVE == 0 {
            return Some(recv);
        }
        if hdr.is_response() && h.rmpp_type == wire::IB_MGMT_RMPP_TYPE_DATA {
            // Every segment of a response needs its request outstanding.
            let inner = self.lock();
            let matched = !inner.dead
                && self.find_send(&inner, hdr, &recv).is_some_and(|rec| {
                    !matches!(rec.state.access(&inner).facts.state, SendState::Canceled(_))
                });
            drop(inner);
            if !matched {
                // Unless it is a retransmission of a response reassembled already, whose
                // sender missed the final ACK.
                let mut r = self.rmpp.lock();
                let done = r
                    .map
                    .get(&Key::of(hdr, &recv.wc))
                    .is_some_and(|rx| rx.lingering);
                if !done {
                    bump(&mut r.stats.dropped);
                    return None;
                }
            }
        }
        // An unknown version or type ends the segmented send it matches, as the peer's ABORT
        // would (C's `abort_send`), and draws C's ABORT back (`nack_recv`).
        if h.version != wire::IB_MGMT_RMPP_VERSION {
            self.rmpp_stopped(hdr, &recv, Status::Unv.code());
            self.send_control(Self::reject(Status::Unv, &recv, None));
            return None;
        }
        let bad = match h.rmpp_type {
            wire::IB_MGMT_RMPP_TYPE_DATA => return self.rmpp_data(hdr, &h, recv),
            // An ACK moves the window of the segmented send it matches, and a malformed one
            // draws C's ABORT (rmpp_send.rs).
            wire::IB_MGMT_RMPP_TYPE_ACK => {
                self.rmpp_ack(hdr, &h, &recv);
                return None;
            }
            wire::IB_MGMT_RMPP_TYPE_STOP if h.status != Status::Resx.code() => {
                Some(Status::BadStatus)
            }
            wire::IB_MGMT_RMPP_TYPE_ABORT
                if !(Status::T2l.code()..=Status::Unspec.code()).contains(&h.status) =>
            {
                Some(Status::BadStatus)
            }
            wire::IB_MGMT_RMPP_TYPE_STOP | wire::IB_MGMT_RMPP_TYPE_ABORT => None,
            _ => {
                self.rmpp_stopped(hdr, &recv, Status::Badt.code());
                self.send_control(Self::reject(Status::Badt, &recv, None));
                return None;
            }
        };
        // A STOP or ABORT ends the segmented send it matches: with its status, or BAD_STATUS
        // (and C's ABORT back) for a status its type does not allow.
        self.rmpp_stopped(hdr, &recv, bad.map_or(h.status, Status::code));
        if let Some(s) = bad {
            self.send_control(Self::reject(s, &recv, None));
        }
        None
    }

    /// A DATA segment (`process_rmpp_data`, `start_rmpp`, `continue_rmpp`): stored, answered,
    /// or the last one of a message, which is returned whole.
    fn rmpp_data(self: &Arc<Self>, hdr: &MadHdr, h: &RmppHdr, recv: RecvMad) -> Option<RecvMad> {
        let kind = match precheck(h) {
            Ok(k) => k,
            Err(s) => {
                self.send_control(Self::reject(s, &recv, None));
                return None;
            }
        };
        let key = Key::of(hdr, &recv.wc);
        let hdr_len = wire::ib_get_mad_data_offset(hdr.mgmt_class).max(wire::IB_MGMT_RMPP_HDR);
        let now = self.now_ns();
        let mut r = self.rmpp.lock();
        let after = match r.map.get_mut(&key) {
            Some(rx) => {
                let v = rx.transfer.on_segment(h);
                Self::carry_out(&mut r, key, hdr_len, v, recv, now)
            }
            None if kind != Kind::First => {
                bump(&mut r.stats.dropped);
                After::default()
            }
            None => self.start(&mut r, key, hdr_len, h, recv, now),
        };
        drop(r);
        if let Some(d) = after.deadline {
            let mut inner = self.lock();
            if !inner.dead {
                self.arm(&mut inner, d);
            }
        }
        if let Some(c) = after.control {
            self.send_control(c);
        }
        after.done
    }

    /// A FIRST segment with no transfer under its key: a new transfer if the bounds allow.
    fn start(
        &self,
        r: &mut Recvs,
        key: Key,
        hdr_len: usize,
        h: &RmppHdr,
        recv: RecvMad,
        now: i64,
    ) -> After {
        let refuse = |r: &mut Recvs, s: Status, recv: &RecvMad, reply: Option<Address>| {
            if s == Status::Resx {
                bump(&mut r.stats.refused);
            }
            After {
                control: Some(Self::reject(s, recv, reply)),
                ..After::default()
            }
        };
        let Ok(reply) = self.reply_address(&recv.wc) else {
            bump(&mut r.stats.dropped);
            return After::default();
        };
        // The most segments the bytes left to this agent can hold (at least one: a transfer
        // that finds no room is then ended by `store`).
        let data = wire::IB_MGMT_MAD_SIZE.saturating_sub(hdr_len).max(1);
        let left = MAX_BYTES.saturating_sub(r.bytes).saturating_sub(hdr_len) / data;
        let max = u32::try_from(left)
            .unwrap_or(u32::MAX)
            .clamp(1, MAX_SEGMENTS);
        let Some(cfg) = Config::new(window(), hdr_len, max) else {
            bump(&mut r.stats.dropped);
            return After::default();
        };
        let (transfer, v) = match Transfer::start(cfg, h) {
            Ok(x) => x,
            Err(Verdict::Reject(s)) => return refuse(r, s, &recv, Some(reply)),
            Err(_) => {
                bump(&mut r.stats.dropped);
                return After::default();
            }
        };
        // A message of one segment is whole at once and takes no slot, here or in the port.
        let whole = matches!(v, Verdict::Complete { .. });
        if !whole
            && (r.active >= MAX_TRANSFERS
                || r.of_sender(&key) >= MAX_PER_SENDER
                || !r.port.take_transfer())
        {
            return refuse(r, Status::Resx, &recv, Some(reply));
        }
        let rx = Rx {
            transfer,
            buf: KVVec::new(),
            charged: 0,
            wc: recv.wc,
            reply,
            deadline_ns: now,
            counted: true,
            port_counted: !whole,
            lingering: false,
            started_ns: now,
        };
        let node = KBox::new(rx, GFP_KERNEL)
            .map_err(Error::from)
            .and_then(|b| RBTreeNode::new(key, b, GFP_KERNEL));
        let Ok(node) = node else {
            if !whole {
                r.port.put_transfer();
            }
            bump(&mut r.stats.dropped);
            return After::default();
        };
        r.map.insert(node);
        // INVARIANT: a new counted transfer, within MAX_TRANSFERS (checked above).
        r.active = r.active.saturating_add(1);
        Self::carry_out(r, key, hdr_len, v, recv, now)
    }

    /// Carries out the verdict `v` on the segment `recv` of the transfer under `key`.
    fn carry_out(
        r: &mut Recvs,
        key: Key,
        hdr_len: usize,
        v: Verdict,
        recv: RecvMad,
        now: i64,
    ) -> After {
        let stored = match v {
            Verdict::Store { n } => Stored {
                n,
                ack: None,
                len: None,
            },
            Verdict::StoreAndAck { n, ack } => Stored {
                n,
                ack: Some(ack),
                len: None,
            },
            Verdict::Complete { n, ack, len } => Stored {
                n,
                ack: Some(ack),
                len: Some(len),
            },
            Verdict::Ack(ack) => {
                bump(&mut r.stats.acks);
                return After {
                    control: r.map.get(&key).map(|rx| Self::ack(ack, &recv, hdr_len, rx)),
                    ..After::default()
                };
            }
            Verdict::Drop => {
                bump(&mut r.stats.dropped);
                return After::default();
            }
            Verdict::Reject(s) => return Self::rejected(r, &key, s, &recv),
        };
        Self::carry_store(r, key, hdr_len, stored, &recv, now)
    }

    /// The verdict [`Verdict::Reject`] with status `s` on the segment `recv` of the transfer
    /// under `key`: STOP or ABORT to the address of the MAD it answers, as C's `nack_recv`; an
    /// ended transfer goes.
    fn rejected(r: &mut Recvs, key: &Key, s: Status, recv: &RecvMad) -> After {
        if r.map
            .get(key)
            .is_some_and(|rx| rx.transfer.phase() == Phase::Ended)
        {
            r.remove(key);
        }
        if s == Status::Resx {
            bump(&mut r.stats.refused);
        }
        After {
            control: Some(Self::reject(s, recv, None)),
            ..After::default()
        }
    }

    /// A verdict that stores segment `stored.n` of `recv` in the transfer under `key`: the
    /// segment copied in (or the transfer ended with STOP(RESX) when its bounds leave no room),
    /// the transfer's deadline moved, the ACK it calls for, and a completed message handed on.
    fn carry_store(
        r: &mut Recvs,
        key: Key,
        hdr_len: usize,
        stored: Stored,
        recv: &RecvMad,
        now: i64,
    ) -> After {
        if Self::store(r, &key, hdr_len, stored.n, &recv.mad).is_err() {
            // No room within the bounds (or no memory): the transfer ends with STOP(RESX).
            let reply = r.map.get(&key).map(|rx| rx.reply);
            r.remove(&key);
            bump(&mut r.stats.refused);
            return After {
                control: Some(Self::reject(Status::Resx, recv, reply)),
                ..After::default()
            };
        }
        let started = r.map.get(&key).map_or(now, |rx| rx.started_ns);
        let deadline = now
            .saturating_add(INACTIVITY_MS.saturating_mul(1_000_000))
            .min(started.saturating_add(MAX_LIFETIME_MS.saturating_mul(1_000_000)));
        let mut after = After {
            deadline: Some(deadline),
            ..After::default()
        };
        let Some(rx) = r.map.get_mut(&key) else {
            return after;
        };
        rx.deadline_ns = deadline;
        if let Some(a) = stored.ack {
            // The final ACK is built from segment 1, as C's `complete_rmpp` does.
            after.control = Some(if stored.len.is_some() {
                Self::ack_from_first(a, hdr_len, rx)
            } else {
                Self::ack(a, recv, hdr_len, rx)
            });
            bump(&mut r.stats.acks);
        }
        if let Some(len) = stored.len {
            Self::complete(r, &key, len, now, &mut after);
        }
        after
    }

    /// The transfer under `key` completed with a message of `len` bytes: the message goes to
    /// `after.done`, the transfer holds nothing and is no longer counted, and it lingers (its
    /// deadline in `after`) to answer a sender that missed the final ACK.
    fn complete(r: &mut Recvs, key: &Key, len: usize, now: i64, after: &mut After) {
        let Some(rx) = r.map.get_mut(key) else {
            return;
        };
        let mut mad = core::mem::replace(&mut rx.buf, KVVec::new());
        // A message of one segment stays a whole 256-byte MAD, as every MAD handed to a
        // receive handler is (`mad_len` 256); C reports its shorter length.
        mad.truncate(len.max(wire::IB_MGMT_MAD_SIZE));
        let uncharge = core::mem::replace(&mut rx.charged, 0);
        rx.counted = false;
        let port_counted = core::mem::replace(&mut rx.port_counted, false);
        let linger = now.saturating_add(LINGER_MS.saturating_mul(1_000_000));
        rx.deadline_ns = linger;
        after.deadline = Some(linger);
        after.done = Some(RecvMad { mad, wc: rx.wc });
        if port_counted {
            r.port.put_transfer();
        }
        // INVARIANT: the completed transfer holds nothing and is no longer counted.
        r.bytes = r.bytes.saturating_sub(uncharge);
        r.port.put_bytes(uncharge);
        r.active = r.active.saturating_sub(1);
        bump(&mut r.stats.completed);
        // A response lingers too, although its request completes with it: if the final ACK is
        // lost, the sender's retransmissions draw it again (C drops them without a word, and
        // its sender retries until it gives up).
        r.evict_lingering();
        if let Some(rx) = r.map.get_mut(key) {
            rx.lingering = true;
            // INVARIANT: counted, within MAX_LINGERING after the eviction.
            r.lingering = r.lingering.saturating_add(1);
        }
    }

    /// Copies segment `n` of `mad` into its transfer's buffer, growing the buffer within the
    /// agent's and the port's bounds first if it is too short; segment 1 brings the class
    /// header too.
    fn store(r: &mut Recvs, key: &Key, hdr_len: usize, n: u32, mad: &[u8]) -> Result {
        let data = mad.get(hdr_len..).ok_or(EINVAL)?;
        let rx = r.map.get(key).ok_or(EINVAL)?;
        let off = rx.transfer.config().offset(n).ok_or(EINVAL)?;
        let start = hdr_len.checked_add(off).ok_or(EINVAL)?;
        let end = start.checked_add(data.len()).ok_or(EINVAL)?;
        if rx.buf.len() < end {
            // Room for one more window beyond this segment, never beyond the count when it is
            // known: a FIRST announcing a large message costs one window until the sender
            // delivers more.
            let segs_to = |segs: u32| {
                usize::try_from(segs)
                    .ok()
                    .and_then(|c| c.checked_mul(data.len()))
                    .and_then(|d| d.checked_add(hdr_len))
            };
            let count = rx.transfer.count();
            let mut segs = n.saturating_add(window());
            if let Some(c) = count {
                segs = segs.min(c);
            }
            let want = segs_to(segs).ok_or(EINVAL)?.max(end);
            let total = count.and_then(segs_to);
            Self::grow(r, key, want, total)?;
        }
        let rx = r.map.get_mut(key).ok_or(EINVAL)?;
        if n == 1 {
            let head = mad.get(..hdr_len).ok_or(EINVAL)?;
            rx.buf
                .get_mut(..hdr_len)
                .ok_or(EINVAL)?
                .copy_from_slice(head);
        }
        rx.buf
            .get_mut(start..end)
            .ok_or(EINVAL)?
            .copy_from_slice(data);
        Ok(())
    }

    /// Makes the buffer of the transfer under `key` `want` bytes long (the new bytes zero).
    ///
    /// Beyond its capacity the buffer moves to a new allocation of exactly the capacity that
    /// is charged, the one [`capacity::next_capacity`] gives for what the allocator takes
    /// ([`alloc_size`]) and what the agent can hold beside the old buffer while both exist;
    /// the port is charged the same, or the least that holds `want`. (A `KVVec::reserve` would
    /// allocate `max(2 × capacity, len + additional)` whatever was checked.) `ENOSPC` when not
    /// even that fits: the caller ends the transfer.
    fn grow(r: &mut Recvs, key: &Key, want: usize, total: Option<usize>) -> Result {
        let rx = r.map.get_mut(key).ok_or(EINVAL)?;
        if want <= rx.charged {
            // Within the capacity charged: no allocation.
            return Ok(rx.buf.resize(want, 0, GFP_KERNEL)?);
        }
        // `r.bytes` holds the old buffer already: what is left must hold the new one beside it.
        let room = MAX_BYTES.saturating_sub(r.bytes);
        let Some(mut cap) =
            capacity::next_capacity(rx.charged, want, total, room, alloc_size, PAGE_SIZE)
        else {
            return Err(ENOSPC);
        };
        if !r.port.take_bytes(cap) {
            // The port may still hold the least this segment needs.
            cap = alloc_size(want);
            if cap > room || !r.port.take_bytes(cap) {
                return Err(ENOSPC);
            }
        }
        // INVARIANT: for as long as both buffers exist, both are counted, here and in the port
        // (both within their bounds, checked above).
        r.bytes = r.bytes.saturating_add(cap);
        r.stats.peak_bytes = r
            .stats
            .peak_bytes
            .max(u64::try_from(r.bytes).unwrap_or(u64::MAX));
        let rx = r.map.get_mut(key).ok_or(EINVAL)?;
        let moved = KVVec::with_capacity(cap, GFP_KERNEL | __GFP_NOWARN)
            .map_err(Error::from)
            .and_then(|mut fresh| {
                // Within the capacity just allocated: neither call allocates.
                fresh.extend_from_slice(&rx.buf, GFP_KERNEL)?;
                fresh.resize(want, 0, GFP_KERNEL)?;
                Ok(fresh)
            });
        let (freed, result) = match moved {
            Ok(fresh) => {
                drop(core::mem::replace(&mut rx.buf, fresh));
                // INVARIANT: the transfer's charge is its new buffer's capacity.
                (core::mem::replace(&mut rx.charged, cap), Ok(()))
            }
            // No memory: the transfer keeps its buffer, and the new one's charge goes.
            Err(e) => (cap, Err(e)),
        };
        // INVARIANT: what was freed is uncounted, here and in the port.
        r.bytes = r.bytes.saturating_sub(freed);
        r.port.put_bytes(freed);
        result
    }

    /// The ACK `a` of a transfer, built from the segment `recv` that drew it (`ack_recv`).
    fn ack(a: Ack, recv: &RecvMad, hdr_len: usize, rx: &Rx) -> Control {
        let from = head(&recv.mad, hdr_len);
        Control {
            hdr: Self::ack_hdr(a, &from),
            from,
            hdr_len,
            wc: recv.wc,
            reply: Some(rx.reply),
        }
    }

    /// The final ACK `a` of a transfer, built from its segment 1 (`complete_rmpp`).
    fn ack_from_first(a: Ack, hdr_len: usize, rx: &Rx) -> Control {
        let from = head(&rx.buf, hdr_len);
        Control {
            hdr: Self::ack_hdr(a, &from),
            from,
            hdr_len,
            wc: rx.wc,
            reply: Some(rx.reply),
        }
    }

    /// The ACK `a` answering the MAD `recv` itself, sent where it came from (`ack_ds_ack`).
    pub(super) fn answer(a: Ack, recv: &RecvMad) -> Control {
        let hdr_len = MadHdr::parse(&recv.mad)
            .map_or(wire::IB_MGMT_RMPP_HDR, |h| {
                wire::ib_get_mad_data_offset(h.mgmt_class)
            })
            .max(wire::IB_MGMT_RMPP_HDR);
        let from = head(&recv.mad, hdr_len);
        Control {
            hdr: Self::ack_hdr(a, &from),
            from,
            hdr_len,
            wc: recv.wc,
            reply: None,
        }
    }

    /// An ACK's RMPP header (`format_ack`): type ACK, flags ACTIVE only, the response time of
    /// the segment it answers kept.
    fn ack_hdr(a: Ack, from: &[u8]) -> RmppHdr {
        let resp_time = RmppHdr::parse(from).map_or(0, |h| h.resp_time);
        RmppHdr {
            version: wire::IB_MGMT_RMPP_VERSION,
            resp_time,
            ..a.hdr()
        }
    }

    /// A STOP or ABORT with status `s`, answering the segment `recv` (`nack_recv`). `reply` is
    /// the sender's address if known already.
    pub(super) fn reject(s: Status, recv: &RecvMad, reply: Option<Address>) -> Control {
        let hdr_len = MadHdr::parse(&recv.mad)
            .map_or(wire::IB_MGMT_RMPP_HDR, |h| {
                wire::ib_get_mad_data_offset(h.mgmt_class)
            })
            .max(wire::IB_MGMT_RMPP_HDR);
        let from = head(&recv.mad, hdr_len);
        // `nack_recv` sets the flags with `ib_set_rmpp_flags`, which keeps the response time.
        let resp_time = RmppHdr::parse(&recv.mad).map_or(0, |h| h.resp_time);
        Control {
            hdr: RmppHdr {
                resp_time,
                ..s.hdr()
            },
            from,
            hdr_len,
            wc: recv.wc,
            reply,
        }
    }

    /// Sends `c` to the sender of the segment it answers: an internal send, through post like
    /// any other, with no response expected and no send handler call (§2.10.8). Any failure
    /// drops it, as in C. Process context.
    pub(super) fn send_control(self: &Arc<Self>, c: Control) {
        let reply = match c.reply {
            Some(a) => a,
            None => match self.reply_address(&c.wc) {
                Ok(a) => a,
                Err(_) => return,
            },
        };
        let spec = SendSpec {
            pkey_index: c.wc.pkey_index,
            ..SendSpec::mad(c.wc.src_qp)
        };
        let Ok(mut buf) = self.create_send(spec, GFP_KERNEL) else {
            return;
        };
        let mad = buf.mad_mut();
        let n = c.hdr_len.min(mad.len());
        if let (Some(d), Some(s)) = (mad.get_mut(..n), c.from.get(..n)) {
            d.copy_from_slice(s);
        }
        if let Some(m) = mad.get_mut(3) {
            *m ^= wire::IB_MGMT_METHOD_RESP;
        }
        if c.hdr.write(mad).is_err() {
            return;
        }
        if c.hdr.rmpp_type != wire::IB_MGMT_RMPP_TYPE_ACK {
            bump(&mut self.rmpp.lock().stats.aborts);
        }
        buf.set_ah(Some(reply));
        buf.body.internal = true;
        let _ = Agent::post(buf);
    }

    /// The RMPP part of the agent's work: ends the transfers without progress for
    /// [`INACTIVITY_MS`] (ABORT(T2L) to their senders), forgets completed ones after
    /// [`LINGER_MS`], and keeps the timer for the next deadline. Process context.
    pub(super) fn rmpp_expire(self: &Arc<Self>, now: i64) {
        let mut aborts = KVec::new();
        let next = {
            let mut r = self.rmpp.lock();
            let mut next: Option<i64> = None;
            let mut gone = KVec::new();
            for (k, rx) in r.map.iter_mut() {
                if rx.deadline_ns > now {
                    next = Some(next.map_or(rx.deadline_ns, |d| d.min(rx.deadline_ns)));
                    continue;
                }
                let active = rx.counted;
                if let Verdict::Reject(s) = rx.transfer.expire() {
                    let _ = aborts.push(Self::abort_from_first(s, rx), GFP_KERNEL);
                }
                // Without memory for the list the transfer is looked at again next time.
                if gone.push((*k, active), GFP_KERNEL).is_err() {
                    next = Some(now.saturating_add(1_000_000_000));
                }
            }
            for (k, active) in gone.iter() {
                if *active {
                    bump(&mut r.stats.expired);
                }
                r.remove(k);
            }
            next
        };
        for c in aborts {
            self.send_control(c);
        }
        if let Some(d) = next {
            let mut inner = self.lock();
            if !inner.dead {
                self.arm(&mut inner, d);
            }
        }
    }

    /// The ABORT with status `s` that ends the transfer `rx`, built from its segment 1.
    fn abort_from_first(s: Status, rx: &Rx) -> Control {
        let hdr_len = rx.transfer.config().hdr_size();
        let from = head(&rx.buf, hdr_len);
        Control {
            hdr: s.hdr(),
            from,
            hdr_len,
            wc: rx.wc,
            reply: Some(rx.reply),
        }
    }

    /// Forgets every transfer (unregistration, once no MAD reaches the agent any more):
    /// partial ones end without a word to their senders, as in C.
    pub(super) fn rmpp_clear(&self) {
        self.rmpp.lock().release_all();
    }
}
