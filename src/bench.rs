// SPDX-License-Identifier: GPL-2.0

//! The benchmark that `make bench` runs (module parameter `bench=1`): the cost of cancel,
//! modify and response matching as the number of outstanding sends grows, and, on `rxe0`,
//! rmad's cancel side by side with the C MAD layer's `ib_cancel_mad`.
//!
//! The C layer finds the send for cancel and modify, and the request of a response, by
//! walking its lists, so its cost grows with the number of outstanding sends; rmad's should
//! not. For each size n, n requests wait for responses (long timeout, nobody answers); then
//! the benchmark modifies them, answers a sample of them and cancels the rest, each in an
//! order unrelated to the order of the agent's lists (a fixed pseudo-random permutation), and
//! reports the mean wall time of each operation. Figures are reported, never asserted: the VM
//! runs under software emulation and its timing jitters.

use crate::{
    send::SendHandle,
    state::SendState,
    testing::{
        post,
        request,
        rxe_agent,
        rxe_request,
        wait_state,
        Behaviour,
        Env,
        Recorder, //
    },
    transport::RecvWc,
    wire::{
        self,
        MadHdr, //
    },
};
use kernel::{
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed,
            Release, //
        },
        Arc,
    },
    time::{
        Instant,
        Monotonic, //
    },
};

/// Numbers of outstanding sends measured (powers of two, see [`shuffled`]).
const SIZES: [usize; 4] = [64, 512, 2048, 8192];
/// Responses matched per size.
const MATCHED: usize = 64;

/// A fixed permutation of `0..n` (multiplicative, so no allocation beyond the result).
fn shuffled(n: usize) -> Result<KVec<usize>> {
    let mut v = KVec::with_capacity(n, GFP_KERNEL)?;
    // 40503 is odd and n is a power of two, so i -> i * 40503 mod n is a bijection.
    for i in 0..n {
        v.push(i.wrapping_mul(40503) % n, GFP_KERNEL)?;
    }
    Ok(v)
}

/// Mean nanoseconds per operation over `count` operations that took `start..now`.
fn mean_ns(start: Instant<Monotonic>, count: usize) -> i64 {
    let total = start.elapsed().as_nanos();
    total / i64::try_from(count.max(1)).unwrap_or(1)
}

/// Runs the benchmark and prints one line per size.
pub(crate) fn run() -> Result {
    pr_info!("bench: mean cost per operation with n sends outstanding (wall time, TCG)\n");
    for n in SIZES {
        let env = Env::new()?;
        let rec = Recorder::new(Behaviour::default())?;
        let a = env.agent(1, &rec, None)?;
        let mut handles: KVec<SendHandle> = KVec::with_capacity(n, GFP_KERNEL)?;
        for tag in 0..n {
            handles.push(
                post(request(
                    &a,
                    wire::IB_MGMT_CLASS_PERF_MGMT,
                    tag,
                    2,
                    600_000,
                    0,
                )?)?,
                GFP_KERNEL,
            )?;
        }
        // Let every send reach WAIT_RESP.
        let t0 = Instant::<Monotonic>::now();
        while !env.fabric().is_idle() && t0.elapsed().as_millis() < 60_000 {
            crate::testing::sleep_ms(10);
        }
        let order = shuffled(n)?;
        // Keep the completion queue busy while measuring, so that its worker, which delivers
        // what the operations cause, does not compete with them for the CPU.
        let gate = Arc::new(Atomic::<i32>::new(0), GFP_KERNEL)?;
        let g2 = gate.clone();
        env.engine
            .wq
            .queue()
            .try_spawn(GFP_KERNEL, move || {
                while g2.load(Relaxed) == 0 {
                    crate::testing::sleep_ms(1);
                }
            })
            .map_err(|_| ENOMEM)?;

        let start = Instant::<Monotonic>::now();
        for i in order.iter() {
            if let Some(h) = handles.get(*i) {
                let _ = h.modify(600_000);
            }
        }
        let modify_ns = mean_ns(start, n);

        // Responses delivered straight to the agent, as the transport would, to time matching.
        let matched = MATCHED.min(n);
        let start = Instant::<Monotonic>::now();
        for i in order.iter().take(matched) {
            let mut mad = KVec::with_capacity(wire::IB_MGMT_MAD_SIZE, GFP_KERNEL)?;
            mad.resize(wire::IB_MGMT_MAD_SIZE, 0, GFP_KERNEL)?;
            let hdr = MadHdr {
                base_version: 1,
                mgmt_class: wire::IB_MGMT_CLASS_PERF_MGMT,
                class_version: 1,
                method: wire::IB_MGMT_METHOD_GET_RESP,
                tid: wire::make_tid(a.hi_tid, u32::try_from(*i).unwrap_or(0)),
                ..MadHdr::default()
            };
            let _ = hdr.write(&mut mad);
            let recv = crate::transport::RecvMad {
                mad,
                wc: RecvWc {
                    port: 1,
                    slid: 2,
                    dlid_path_bits: 0,
                    src_qp: 1,
                    dst_qp: 1,
                    pkey_index: 0,
                    grh: None,
                },
            };
            env.engine.receive(recv);
        }
        let match_ns = mean_ns(start, matched);

        let start = Instant::<Monotonic>::now();
        let mut cancelled = 0usize;
        for i in order.iter() {
            if let Some(h) = handles.get(*i) {
                if h.cancel().is_ok() {
                    cancelled = cancelled.saturating_add(1);
                }
            }
        }
        let cancel_ns = mean_ns(start, cancelled);
        gate.store(1, Release);
        let t0 = Instant::<Monotonic>::now();
        let mut all = false;
        while !all && t0.elapsed().as_millis() < 300_000 {
            all = rec.wait_sends(n);
        }
        pr_info!(
            "bench: n={:>6}  modify {:>6} ns  match+deliver {:>7} ns  cancel {:>6} ns  (all completed: {})\n",
            n,
            modify_ns,
            match_ns,
            cancel_ns,
            all
        );
        drop(handles);
        a.unregister()?;
    }
    rxe()
}

/// Numbers of outstanding sends measured on rxe0.
const RXE_SIZES: [usize; 3] = [256, 1024, 4096];

/// The same cancel measured on soft-RoCE `rxe0`, side by side with the C MAD layer's
/// `ib_cancel_mad` on the same port, in the same boot and the same cancel order.
fn rxe() -> Result {
    let rec = Recorder::new(Behaviour::default())?;
    let Some((port, a)) = rxe_agent(&rec)? else {
        pr_info!("bench: no rxe0; skipping the comparison with the C MAD layer\n");
        return Ok(());
    };
    pr_info!("bench: rxe0: mean cancel cost, C MAD layer (ib_cancel_mad) vs rmad, same order\n");
    let mut total = 0usize;
    for n in RXE_SIZES {
        let order = shuffled(n)?;
        let mut order32 = KVec::with_capacity(n, GFP_KERNEL)?;
        for i in order.iter() {
            order32.push(u32::try_from(*i).unwrap_or(0), GFP_KERNEL)?;
        }
        let c_ns = port.bench_ib_cancel(&order32);

        let mut handles: KVec<SendHandle> = KVec::with_capacity(n, GFP_KERNEL)?;
        for tag in 0..n {
            let buf = rxe_request(&port, &a, tag, wire::IB_MGMT_METHOD_SEND, 600_000, 0)?;
            handles.push(post(buf)?, GFP_KERNEL)?;
        }
        for h in handles.iter() {
            let _ = wait_state(&a, h, SendState::WaitResp);
        }
        let start = Instant::<Monotonic>::now();
        for i in order.iter() {
            if let Some(h) = handles.get(*i) {
                let _ = h.cancel();
            }
        }
        let rmad_ns = mean_ns(start, n);
        total = total.saturating_add(n);
        let t0 = Instant::<Monotonic>::now();
        while !rec.wait_sends(total) && t0.elapsed().as_millis() < 300_000 {}
        match c_ns {
            Some(c) => {
                let c_mean = i64::try_from(c).unwrap_or(i64::MAX) / i64::try_from(n).unwrap_or(1);
                pr_info!(
                    "bench: rxe0 n={:>5}  ib_cancel_mad {:>8} ns  rmad cancel {:>6} ns  ratio {}.{:02}\n",
                    n,
                    c_mean,
                    rmad_ns,
                    c_mean / rmad_ns.max(1),
                    (c_mean % rmad_ns.max(1)) * 100 / rmad_ns.max(1)
                );
            }
            None => pr_info!(
                "bench: rxe0 n={:>5}  ib_cancel_mad failed  rmad cancel {:>6} ns\n",
                n,
                rmad_ns
            ),
        }
    }
    a.unregister()?;
    Ok(())
}
