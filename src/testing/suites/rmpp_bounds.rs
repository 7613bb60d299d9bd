// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_rmpp_bounds`: what kernel RMPP's receive side may hold, and what it
//! remembers (Documentation/behaviour.md §2.10, §8.14): the transfers one sender, one agent
//! and one port may have open; the bytes an agent and a port hold while reassembling, which a
//! transfer growing past them never exceeds; and a completed transfer, which unregistration
//! forgets. On the loopback fabric, with the harness of `rmad_rmpp` (R reassembles, P sends
//! segments by hand).

use super::rmpp::{
    len_of,
    Log,
    Pair,
    SA, //
};
use crate::{
    engine::{
        agent::{
            Agent,
            AgentConfig,
            RMPP_MAX_BYTES,
            RMPP_MAX_PER_SENDER,
            RMPP_MAX_TRANSFERS, //
        },
        rmpp_budget::{
            PORT_MAX_BYTES,
            PORT_MAX_TRANSFERS, //
        },
        transport::RecvMad,
    },
    mad::{
        rmpp::{
            RmppHdr,
            Status, //
        },
        wire,
        GrhAttr,
        QpType, //
    },
    testing::{
        post, reg, register_gsi, request,
        requests::gid_address,
        suites::conformance::{
            mad_hdr,
            mad_to, //
        },
        wait_for,
    },
};
use kernel::{
    prelude::*,
    sync::Arc, //
};

/// Segment 1 (FIRST) of a SET of 100 segments of `class` from `from` to LID 1, with TID
/// `tid`, through `grh`: a transfer it starts stays open.
fn first_of_100(class: u8, from: &Arc<Agent>, tid: u64, grh: Option<GrhAttr>) -> Result {
    let mut buf = mad_to(
        from,
        1,
        mad_hdr(class, wire::IB_MGMT_METHOD_SET, tid),
        1,
        grh,
    )?;
    RmppHdr {
        version: wire::IB_MGMT_RMPP_VERSION,
        rmpp_type: wire::IB_MGMT_RMPP_TYPE_DATA,
        resp_time: 0,
        flags: wire::IB_MGMT_RMPP_FLAG_ACTIVE | wire::IB_MGMT_RMPP_FLAG_FIRST,
        status: 0,
        seg_num: 1,
        paylen_newwin: 100 * 220,
    }
    .write(buf.mad_mut())
    .map_err(|_| EINVAL)?;
    post(buf).map(|_| ())
}

/// P's segment `n` of `count` of its SET `lo` arrives at R's port: handed to the engine as
/// the fabric hands it a packet of P's (from LID 2, QP 1), without P transmitting it, so
/// that tens of thousands of segments take seconds under emulation. R's answers travel the
/// fabric to P as usual.
fn arrive(t: &Pair, lo: u32, n: u32, count: u32) -> Result {
    let mut mad = KVVec::with_capacity(wire::IB_MGMT_MAD_SIZE, GFP_KERNEL)?;
    mad.resize(wire::IB_MGMT_MAD_SIZE, 0, GFP_KERNEL)?;
    let tid = wire::make_tid(t.p.hi_tid, lo);
    mad_hdr(SA, wire::IB_MGMT_METHOD_SET, tid)
        .write(&mut mad)
        .map_err(|_| EINVAL)?;
    Pair::write_segment(&mut mad, n, count, 0, 0)?;
    let wc = crate::testing::requests::plain_arrival(1, 2);
    t.env
        .engine
        .receive(t.env.transport.device(), RecvMad { mad, wc });
    Ok(())
}

/// The `count` segments of P's SET `lo` arrive at R in order, a window at a time, the fabric
/// carrying R's answers to P after each window; stops early once P received a STOP or an
/// ABORT (R ended the transfer). Returns whether the fabric settled every time. What R and its
/// port held at most is in their high-water marks (`RmppStats::peak_bytes`,
/// `port_peak_bytes`), which count a growing buffer's old and new allocation together.
fn stream(t: &Pair, lo: u32, count: u32) -> Result<bool> {
    let mut settled = true;
    let mut n = 1u32;
    while n <= count {
        let end = n.saturating_add(63).min(count);
        for k in n..=end {
            arrive(t, lo, k, count)?;
        }
        n = end.saturating_add(1);
        settled &= wait_for(|| t.env.fabric().is_idle());
        if !t.plog.stops()?.is_empty() {
            break;
        }
    }
    Ok(settled)
}

/// Segments of a SET whose message takes `bytes` bytes or more with its SA header.
fn segments_for(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(len_of(1).saturating_sub(len_of(0)))).unwrap_or(u32::MAX)
}

#[kernel::prelude::kunit_tests(rmad_rmpp_bounds)]
mod tests {
    use super::*;

    #[test]
    fn transfer_past_half_the_bound_completes_within_it() -> Result {
        // A message of 9 MiB, more than half of an agent's 16 MiB: reassembled and delivered
        // once, every byte where it belongs, and neither R nor its port ever holds more than
        // its bound, counting a reallocation's old and new buffer together (growth by
        // doubling would take it to 13 MiB, and 20 MiB while it copies).
        let t = Pair::with_logs(Log::new()?, Log::recording(false)?)?;
        let count = segments_for(9 << 20);
        let settled = stream(&t, 0x100, count)?;
        let msgs = t.rlog.messages()?;
        let after = t.r.rmpp_stats();
        let stops = t.plog.stops()?;
        t.finish()?;
        let len = len_of(usize::try_from(count).unwrap_or(0));
        assert!(settled);
        assert!(after.peak_bytes <= u64::try_from(RMPP_MAX_BYTES).unwrap_or(0));
        assert!(after.port_peak_bytes <= PORT_MAX_BYTES);
        assert!(stops.is_empty());
        assert_eq!(&msgs[..], &[(false, len, true)][..]);
        assert_eq!((after.active, after.bytes, after.refused), (0, 0, 0));
        assert_eq!(after.port_bytes, 0);
        Ok(())
    }

    #[test]
    fn transfer_past_the_bound_ends_with_stop_resx() -> Result {
        // A message of 13.4 MB (67 000 SA segments, the size that grew its buffer to 26.7 MB,
        // 1.6 times the bound, before the growth was checked against what it allocates): R
        // ends it with one STOP(RESX) before holding more than its bound, delivers nothing,
        // and holds nothing afterwards; neither does its port.
        let t = Pair::with_logs(Log::new()?, Log::recording(false)?)?;
        let settled = stream(&t, 0x200, 67_000)?;
        let msgs = t.rlog.messages()?.len();
        let after = t.r.rmpp_stats();
        let stops = t.plog.stops()?;
        t.finish()?;
        assert!(settled);
        assert!(after.peak_bytes <= u64::try_from(RMPP_MAX_BYTES).unwrap_or(0));
        assert!(after.port_peak_bytes <= PORT_MAX_BYTES);
        assert!(after.peak_bytes > u64::try_from(RMPP_MAX_BYTES / 2).unwrap_or(u64::MAX));
        assert_eq!(
            &stops[..],
            &[(wire::IB_MGMT_RMPP_TYPE_STOP, Status::Resx.code())][..]
        );
        assert_eq!(msgs, 0);
        assert_eq!((after.active, after.bytes, after.refused), (0, 0, 1));
        assert_eq!(after.port_bytes, 0);
        Ok(())
    }

    #[test]
    fn one_sender_cycling_qp_numbers_meets_its_bound() -> Result {
        // A peer that sends each FIRST from another QP number is still one sender (its LID
        // and GID): MAX_PER_SENDER transfers open, the next is refused with STOP(RESX). Before,
        // the bound was keyed on the QP number too, and every FIRST opened a transfer.
        let t = Pair::new()?;
        let max = u32::try_from(RMPP_MAX_PER_SENDER).unwrap_or(0);
        for i in 0..=max {
            t.env
                .fabric()
                .set_knobs(|k| k.src_qp = Some(0x100u32.saturating_add(i)));
            t.segment(0x1100 + i, 1, 100)?;
        }
        let idle = wait_for(|| t.env.fabric().is_idle());
        t.env.fabric().set_knobs(|k| k.src_qp = None);
        let stats = t.r.rmpp_stats();
        let acks = t.plog.acks()?;
        let stops = t.plog.stops()?;
        t.finish()?;
        assert!(idle);
        assert_eq!(stats.active, u64::from(max));
        assert_eq!(stats.refused, 1);
        assert_eq!(acks.len(), usize::try_from(max).unwrap_or(0));
        assert_eq!(
            &stops[..],
            &[(wire::IB_MGMT_RMPP_TYPE_STOP, Status::Resx.code())][..]
        );
        Ok(())
    }

    #[test]
    fn completed_response_forgotten_at_unregistration() -> Result {
        // Behaviour §2.10.5: R's GET is answered with 3 segments and completes; R unregisters
        // (as a client does in its send handler). P, which missed the final ACK, sends
        // segments 2 and 3 again: nothing answers them, as in C, so a sender that needs the
        // final ACK gives up (`RESP_TIMEOUT_ERR` on a Linux sender). While R is registered,
        // the same retransmissions draw the final ACK again (`rmad_rmpp`).
        let t = Pair::new()?;
        let _h = post(request(&t.r, SA, 3, 2, 60_000, 0)?)?;
        let tid = wire::make_tid(t.r.hi_tid, 3);
        let resp = wire::IB_MGMT_METHOD_GET_RESP;
        for n in 1..=3 {
            t.segment_with(resp, tid, n, 3, 0, 0)?;
        }
        let idle = t.settle();
        let msgs = t.rlog.messages()?;
        let lingering = t.r.rmpp_stats().lingering;
        t.r.unregister()?;
        let unrouted_before = t.env.engine.unrouted();
        t.segment_with(resp, tid, 2, 3, 0, 0)?;
        t.segment_with(resp, tid, 3, 3, 0, 0)?;
        let idle2 = t.settle();
        let acks = t.plog.acks()?;
        let unrouted = t.env.engine.unrouted().saturating_sub(unrouted_before);
        // R is gone already; P is left.
        t.p.unregister()?;
        assert!(idle && idle2);
        assert_eq!(&msgs[..], &[(true, len_of(3), true)][..]);
        assert_eq!(lingering, 1);
        assert_eq!(&acks[..], &[(1, 65), (3, 65)][..]);
        // Both retransmissions reached no agent.
        assert_eq!(unrouted, 2);
        Ok(())
    }

    #[test]
    fn one_sender_beyond_its_bound_refused_with_stop_resx() -> Result {
        // A sender opening more transfers than one sender may: the first MAX_PER_SENDER get
        // ACK(1, 65) each, the next a STOP(RESX). A message of one segment needs no slot and
        // is delivered; a transfer finishing frees its slot for a new one. What is held is
        // visible: the open transfers and the bytes of their buffers (a window each, or the
        // whole message when it takes less than two, in what the allocator takes for it:
        // power-of-two pages).
        let t = Pair::new()?;
        let max = u32::try_from(RMPP_MAX_PER_SENDER).unwrap_or(0);
        for lo in 0..=max {
            t.segment(0x1000 + lo, 1, 100)?;
        }
        let idle = t.settle();
        let full = t.r.rmpp_stats();
        let acks = t.plog.acks()?.len();
        let stops = t.plog.stops()?;
        t.segment(0x3000, 1, 1)?;
        // One finishes (segments 2 to 100, in order); then a new one fits.
        for n in 2..=100 {
            t.segment(0x1000, n, 100)?;
        }
        t.segment(0x2000, 1, 2)?;
        let idle2 = t.settle();
        let after = t.r.rmpp_stats();
        let msgs = t.rlog.messages()?;
        let acks2 = t.plog.acks()?;
        t.finish()?;
        let window = u64::try_from(len_of(65)).unwrap_or(0);
        assert!(idle);
        assert!(idle2);
        assert_eq!(full.active, u64::from(max));
        assert_eq!(full.refused, 1);
        assert!(full.bytes >= u64::from(max) * window);
        assert!(full.bytes <= 3 * u64::from(max) * window);
        assert_eq!(acks, usize::try_from(max).unwrap_or(0));
        assert_eq!(
            &stops[..],
            &[(wire::IB_MGMT_RMPP_TYPE_STOP, Status::Resx.code())][..]
        );
        assert_eq!(after.active, u64::from(max));
        assert_eq!(after.refused, 1);
        assert_eq!(
            &msgs[..],
            &[(false, len_of(1), true), (false, len_of(100), true)][..]
        );
        // The last two ACKs: transfer 0x1000's final one, then 0x2000's first.
        assert_eq!(
            acks2.get(acks2.len().saturating_sub(2)..),
            Some(&[(100, 129), (1, 65)][..])
        );
        Ok(())
    }

    #[test]
    fn agent_beyond_its_bound_refused_with_stop_resx() -> Result {
        // Four senders on port 2 (no GRH, and GIDs 0, 1 and 20 as source) open 8 transfers
        // each: the agent's 32. A fifth sender (an agent on port 1 itself) is then refused:
        // STOP(RESX), counted, nothing more held.
        let t = Pair::new()?;
        let first = |from: &Arc<Agent>, tid: u64, grh| first_of_100(SA, from, tid, grh);
        let to_r = |k: u8| -> Result<Option<GrhAttr>> {
            let dgid = t.env.transport.gid(1, 0).ok_or(EINVAL)?;
            Ok(gid_address(dgid, k).grh)
        };
        let senders = [None, to_r(0)?, to_r(1)?, to_r(20)?];
        let per = u32::try_from(RMPP_MAX_PER_SENDER).unwrap_or(0);
        let mut lo = 0x6000u32;
        for grh in senders {
            for _ in 0..per {
                first(&t.p, wire::make_tid(t.p.hi_tid, lo), grh)?;
                lo = lo.saturating_add(1);
            }
        }
        let idle = t.settle();
        let full = t.r.rmpp_stats();
        // The fifth sender: a plain agent on port 1, to LID 1.
        let qlog = Log::new()?;
        let q = register_gsi(&t.env.engine, &t.env.transport, 1, &qlog, None)?;
        first(&q, wire::make_tid(q.hi_tid, 1), None)?;
        let idle2 = t.settle();
        let after = t.r.rmpp_stats();
        let acks = t.plog.acks()?.len();
        q.unregister()?;
        t.finish()?;
        let max = u64::try_from(RMPP_MAX_TRANSFERS).unwrap_or(0);
        assert!(idle);
        assert!(idle2);
        assert_eq!(full.active, max);
        assert_eq!(full.refused, 0);
        assert_eq!(u64::try_from(acks).unwrap_or(0), max);
        assert_eq!(after.active, max);
        assert_eq!(after.refused, 1);
        assert_eq!(after.aborts, 1);
        Ok(())
    }

    #[test]
    fn port_beyond_its_bound_refused_with_stop_resx() -> Result {
        // The port's bound (64 transfers, two agents' worth) holds over every kernel-RMPP
        // agent of port 1: R (SA) and R2 (DeviceMgmt) take 32 each from four senders; a
        // FIRST to a third agent R3 (DeviceAdm), which holds nothing, is then refused with
        // STOP(RESX) for the port. Once R2 is unregistered, its transfers are given back and
        // the next FIRST to R3 starts a transfer.
        let t = Pair::new()?;
        let first = first_of_100;
        let kernel_rmpp = |class: u8, log: &Arc<Log>| {
            Agent::register(
                &t.env.engine,
                &t.env.transport,
                AgentConfig {
                    port: 1,
                    qp_type: QpType::Gsi,
                    reg: Some(reg(class)),
                    rmpp_version: 1,
                    flags: 0,
                    retry: Default::default(),
                    send_handler: Some(log.clone()),
                    recv_handler: Some(log.clone()),
                },
            )
        };
        let (log2, log3) = (Log::new()?, Log::new()?);
        let r2 = kernel_rmpp(wire::IB_MGMT_CLASS_DEVICE_MGMT, &log2)?;
        let r3 = kernel_rmpp(wire::IB_MGMT_CLASS_DEVICE_ADM, &log3)?;
        let to_r = |k: u8| -> Result<Option<GrhAttr>> {
            let dgid = t.env.transport.gid(1, 0).ok_or(EINVAL)?;
            Ok(gid_address(dgid, k).grh)
        };
        let senders = [None, to_r(0)?, to_r(1)?, to_r(20)?];
        let per = u32::try_from(RMPP_MAX_PER_SENDER).unwrap_or(0);
        let mut lo = 0x7000u32;
        for class in [SA, wire::IB_MGMT_CLASS_DEVICE_MGMT] {
            for grh in senders {
                for _ in 0..per {
                    first(class, &t.p, wire::make_tid(t.p.hi_tid, lo), grh)?;
                    lo = lo.saturating_add(1);
                }
            }
        }
        let idle = t.settle();
        let full = (t.r.rmpp_stats(), r2.rmpp_stats());
        first(
            wire::IB_MGMT_CLASS_DEVICE_ADM,
            &t.p,
            wire::make_tid(t.p.hi_tid, lo),
            None,
        )?;
        let idle2 = t.settle();
        let refused = r3.rmpp_stats();
        let stops = t.plog.stops()?;
        r2.unregister()?;
        let freed = r3.rmpp_stats();
        first(
            wire::IB_MGMT_CLASS_DEVICE_ADM,
            &t.p,
            wire::make_tid(t.p.hi_tid, lo.saturating_add(1)),
            None,
        )?;
        let idle3 = t.settle();
        let started = r3.rmpp_stats();
        r3.unregister()?;
        t.finish()?;
        let agent_max = u64::try_from(RMPP_MAX_TRANSFERS).unwrap_or(0);
        let port_max = PORT_MAX_TRANSFERS;
        assert!(idle && idle2 && idle3);
        assert_eq!((full.0.active, full.1.active), (agent_max, agent_max));
        assert_eq!(full.0.port_active, port_max);
        assert_eq!(
            (refused.active, refused.refused, refused.port_active),
            (0, 1, port_max)
        );
        assert_eq!(
            &stops[..],
            &[(wire::IB_MGMT_RMPP_TYPE_STOP, Status::Resx.code())][..]
        );
        assert_eq!(freed.port_active, port_max.saturating_sub(agent_max));
        assert_eq!((started.active, started.refused), (1, 1));
        assert_eq!(
            started.port_active,
            port_max.saturating_sub(agent_max).saturating_add(1)
        );
        Ok(())
    }
}
