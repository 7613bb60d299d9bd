// SPDX-License-Identifier: GPL-2.0

//! The demonstration that `make run` shows (module parameter `demo=1`): a requester and a
//! responder agent on the loopback fabric exchange a burst of requests, some answered at once,
//! some lost and retried, some never answered, some cancelled, and rmad reports what every
//! send ended with and that each one completed exactly once.

use crate::{
    state::WcStatus,
    testing::{
        post,
        request,
        rxe_agent,
        rxe_request,
        Behaviour,
        Env,
        Recorder, //
    },
    wire,
};
use kernel::prelude::*;

/// Requests answered by the responder.
const ANSWERED: usize = 24;
/// Requests for a class nobody serves: they time out after their retries.
const UNANSWERED: usize = 8;
/// Requests cancelled right after posting.
const CANCELLED: usize = 8;
/// Responses the fabric loses, so that their requests are retried.
const LOST: u32 = 6;

/// Runs the demonstration and prints its report.
pub(crate) fn run() -> Result {
    for d in wire::self_description() {
        pr_info!("demo: wire {}({}) = {:#x}\n", d.name, d.input, d.output);
    }
    pr_info!("demo: loopback fabric with 2 ports; requester on port 1, responder on port 2\n");
    let env = Env::new()?;
    let (responder, rrec) = env.responder(2, wire::IB_MGMT_CLASS_PERF_MGMT)?;
    let rec = Recorder::new(Behaviour::default())?;
    let requester = env.agent(1, &rec, None)?;
    pr_info!(
        "demo: requester hi_tid {:#x}, responder hi_tid {:#x}\n",
        requester.hi_tid,
        responder.hi_tid
    );
    env.fabric().set_knobs(|k| k.drop_responses = LOST);

    let total = ANSWERED + UNANSWERED + CANCELLED;
    pr_info!(
        "demo: posting {} requests (timeout 200 ms, 2 retries); the fabric loses {} responses\n",
        total,
        LOST
    );
    let mut cancel_ok = 0usize;
    for tag in 0..total {
        let class = if tag < ANSWERED {
            wire::IB_MGMT_CLASS_PERF_MGMT
        } else {
            // Nobody is registered for baseboard management: no answer ever comes.
            wire::IB_MGMT_CLASS_BM
        };
        let timeout = if tag >= ANSWERED + UNANSWERED {
            60_000
        } else {
            200
        };
        let h = post(request(&requester, class, tag, 2, timeout, 2)?)?;
        if tag >= ANSWERED + UNANSWERED && h.cancel().is_ok() {
            cancel_ok += 1;
        }
    }
    let all = rec.wait_sends(total);

    let sends = rec.sends()?;
    let mut per_tag = KVec::with_capacity(total, GFP_KERNEL)?;
    per_tag.resize(total, 0u32, GFP_KERNEL)?;
    let (mut first_try, mut retried, mut timed_out, mut flushed, mut other) = (0, 0, 0, 0, 0);
    for (tag, status, retries) in sends.iter() {
        if let Some(c) = per_tag.get_mut(*tag) {
            *c = c.saturating_add(1);
        }
        match (status, retries) {
            (WcStatus::Success, 0) => first_try += 1,
            (WcStatus::Success, _) => retried += 1,
            (WcStatus::RespTimeoutErr, _) => timed_out += 1,
            (WcStatus::WrFlushErr, _) => flushed += 1,
            _ => other += 1,
        }
    }
    let once = per_tag.iter().all(|c| *c == 1);
    pr_info!("demo: answered on the first try:   {}\n", first_try);
    pr_info!("demo: answered after a retry:      {}\n", retried);
    pr_info!("demo: timed out after 2 retries:   {}\n", timed_out);
    pr_info!(
        "demo: cancelled (WR_FLUSH_ERR):    {} ({} cancels returned 0)\n",
        flushed,
        cancel_ok
    );
    pr_info!("demo: other statuses:              {}\n", other);
    let st = requester.stats();
    pr_info!(
        "demo: requester counters: posted {} transmitted {} retried {} responses {} timed_out {} cancelled {}\n",
        st.posted,
        st.transmitted,
        st.retried,
        st.responses,
        st.timed_out,
        st.cancelled
    );
    let verdict = if all && once && sends.len() == total {
        "yes"
    } else {
        "NO"
    };
    pr_info!(
        "demo: {} sends, {} send-handler calls, every send completed exactly once: {}\n",
        total,
        sends.len(),
        verdict
    );

    drop(rrec.take_kept());
    requester.unregister()?;
    responder.unregister()?;
    pr_info!("demo: loopback agents unregistered\n");
    rxe()
}

/// The same engine on a real RDMA device: soft-RoCE `rxe0`, if it exists.
fn rxe() -> Result {
    let rec = Recorder::new(Behaviour::default())?;
    let Some((port, agent)) = rxe_agent(&rec)? else {
        pr_info!("demo: no rxe0; skipping the RDMA part\n");
        return Ok(());
    };
    pr_info!(
        "demo: rxe0/1: agent hi_tid {:#x} sends from its private UD QP to QP1 (Q_Key 0x80010000)\n",
        agent.hi_tid
    );
    for tag in 0..6usize {
        // Four GETs, which ib_core answers; two SENDs, which nobody answers: cancelled.
        let method = if tag < 4 {
            wire::IB_MGMT_METHOD_GET
        } else {
            wire::IB_MGMT_METHOD_SEND
        };
        let h = post(rxe_request(&port, &agent, tag, method, 5000, 1)?)?;
        if tag >= 4 {
            let _ = h.cancel();
        }
    }
    let all = rec.wait_sends(6);
    let sends = rec.sends()?;
    let ok = sends.iter().filter(|s| s.1 == WcStatus::Success).count();
    let flushed = sends.iter().filter(|s| s.1 == WcStatus::WrFlushErr).count();
    let verdict = if all && sends.len() == 6 { "yes" } else { "NO" };
    pr_info!(
        "demo: rxe0/1: {} answered by ib_core through QP1, {} cancelled, {} responses seen, all completed once: {}\n",
        ok,
        flushed,
        rec.recv_count(),
        verdict
    );
    agent.unregister()?;
    pr_info!("demo: done\n");
    Ok(())
}
