// SPDX-License-Identifier: GPL-2.0

//! The demonstration that `make run` shows (module parameter `demo=1`): a requester and a
//! responder agent on the loopback fabric exchange a burst of requests, some answered at once,
//! some lost and retried, some never answered, some cancelled, and rmad reports what every
//! send ended with and that each one completed exactly once.

use crate::{
    mad::{
        state::WcStatus,
        wire, //
    },
    testing::{
        post,
        request,
        rxe_agent,
        rxe_request,
        Behaviour,
        Call,
        Env,
        Recorder, //
    },
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

/// One row of the rxe0 table: what is sent, and what to do with it.
struct Row {
    class: u8,
    method: u8,
    attr: u16,
    timeout_ms: i32,
    retries: i32,
    cancel: bool,
}

/// The sends of the rxe0 part, in the order of the table.
const ROWS: [Row; 8] = {
    const fn row(class: u8, method: u8, timeout_ms: i32, retries: i32, cancel: bool) -> Row {
        Row {
            class,
            method,
            // The vendor class's agent serves 0x0010; attribute 0 is reserved in every class.
            attr: if class == DEMO_VENDOR_CLASS {
                0x0010
            } else {
                0
            },
            timeout_ms,
            retries,
            cancel,
        }
    }
    let (perf, vendor) = (wire::IB_MGMT_CLASS_PERF_MGMT, DEMO_VENDOR_CLASS);
    let (get, send) = (wire::IB_MGMT_METHOD_GET, wire::IB_MGMT_METHOD_SEND);
    [
        // ib_core answers a GET nobody serves itself (0x000C: unsupported method/attribute).
        row(perf, get, 5000, 1, false),
        row(perf, get, 5000, 1, false),
        row(perf, get, 5000, 1, false),
        // An agent registered in ib_core for the vendor class answers (status 0).
        row(vendor, get, 5000, 1, false),
        row(vendor, get, 5000, 1, false),
        // Nobody answers a SEND: it times out after its retries, or is cancelled.
        row(perf, send, 300, 2, false),
        row(perf, send, 60_000, 0, true),
        row(perf, send, 60_000, 0, true),
    ]
};

/// The vendor class an ib_core agent serves during the rxe0 part.
const DEMO_VENDOR_CLASS: u8 = 0x0b;

/// A method's name.
fn method_name(m: u8) -> &'static str {
    match m {
        wire::IB_MGMT_METHOD_GET => "GET",
        wire::IB_MGMT_METHOD_SEND => "SEND",
        wire::IB_MGMT_METHOD_GET_RESP => "GetResp",
        _ => "?",
    }
}

/// A send status's name.
fn status_name(s: WcStatus) -> &'static str {
    match s {
        WcStatus::Success => "SUCCESS",
        WcStatus::WrFlushErr => "WR_FLUSH_ERR",
        WcStatus::RespTimeoutErr => "RESP_TIMEOUT_ERR",
        WcStatus::LocQpOpErr => "LOC_QP_OP_ERR",
        _ => "other",
    }
}

/// The same engine on a real RDMA device: soft-RoCE `rxe0`, if it exists. Prints one line per
/// MAD: what was sent, how its send ended, and what answered it.
fn rxe() -> Result {
    let rec = Recorder::new(Behaviour::default())?;
    let Some((port, agent)) = rxe_agent(&rec)? else {
        pr_info!("demo: no rxe0; skipping the RDMA part\n");
        return Ok(());
    };
    pr_info!(
        "demo: rxe0/1: agent hi_tid {:#x} sends from its private UD QP to QP1 (Q_Key 0x80010000) of its own port\n",
        agent.hi_tid
    );
    // An ib_core agent for the vendor class, as another kernel module would register.
    let served = crate::testing::ib_responder::IbResponder::start(&port, DEMO_VENDOR_CLASS);
    let mut tids = [0u64; ROWS.len()];
    for (tag, (r, tid)) in ROWS.iter().zip(tids.iter_mut()).enumerate() {
        let mut buf = rxe_request(&port, &agent, tag, r.method, r.timeout_ms, r.retries)?;
        if let Some(c) = buf.mad_mut().get_mut(1) {
            *c = r.class;
        }
        if let Some(a) = buf.mad_mut().get_mut(16..18) {
            a.copy_from_slice(&r.attr.to_be_bytes());
        }
        *tid = wire::MadHdr::parse(buf.mad()).map_or(0, |h| h.tid);
        let h = post(buf)?;
        if r.cancel {
            let _ = h.cancel();
        }
    }
    let all = rec.wait_sends(ROWS.len());
    drop(served);
    let calls = rec.calls()?;
    pr_info!(
        "demo: rxe0 | # | class | method | attr   | TID                | send status      | retries | answer\n"
    );
    for (tag, (r, tid)) in ROWS.iter().zip(tids.iter()).enumerate() {
        let (mut status, mut retries) = (None, 0);
        let mut answer = None;
        for c in calls.iter() {
            match c {
                Call::Send {
                    tag: t,
                    wc,
                    retries: n,
                    ..
                } if *t == tag => {
                    status = Some(wc.status);
                    retries = *n;
                }
                Call::Recv {
                    tag: Some(t),
                    method,
                    status: s,
                    ..
                } if *t == tag => answer = Some((*method, *s)),
                _ => {}
            }
        }
        let who = match answer {
            None if r.cancel => "- (cancelled)",
            None if r.method == wire::IB_MGMT_METHOD_SEND => "- (nobody answers a SEND)",
            None => "- (no answer)",
            Some((_, 0x000c)) => "ib_core: no agent for the class",
            Some((_, 0)) => "an ib_core agent for the class",
            Some(_) => "?",
        };
        // The columns up to the answer, then the answer.
        let status = status.map_or("(none)", status_name);
        let method = method_name(r.method);
        match answer {
            Some((m, st)) => pr_info!(
                "demo: rxe0 | {} | {:#04x}  | {:6} | {:#06x} | {:#018x} | {:16} | {:7} | {} {:#06x} from {}\n",
                tag,
                r.class,
                method,
                r.attr,
                tid,
                status,
                retries,
                method_name(m),
                st,
                who
            ),
            None => pr_info!(
                "demo: rxe0 | {} | {:#04x}  | {:6} | {:#06x} | {:#018x} | {:16} | {:7} | {}\n",
                tag,
                r.class,
                method,
                r.attr,
                tid,
                status,
                retries,
                who
            ),
        }
    }
    let completed = calls
        .iter()
        .filter(|c| matches!(c, Call::Send { .. }))
        .count();
    let once = if all && completed == ROWS.len() {
        "yes"
    } else {
        "NO"
    };
    pr_info!(
        "demo: rxe0: {} sends, {} completed, each once: {}\n",
        ROWS.len(),
        completed,
        once
    );
    agent.unregister()?;
    pr_info!("demo: done\n");
    Ok(())
}
