// SPDX-License-Identifier: GPL-2.0

//! The simulated agent of the `agent` target: it applies every outcome as `Agent::apply` does,
//! produces events only where the engine does, and checks the invariants after every action
//! (the sections cited are those of Documentation/behaviour.md).

use super::super::{
    compare,
    SC,
    TRANSITIONS,
    TW, //
};
use super::{
    Action,
    Config,
    ADVANCES,
    COMPLETION_STATUSES,
    MODIFY_TIMES,
    POST_CLASSES,
    POST_TIMEOUTS, //
};
use crate::mad::state::{
    is_solicited_fc,
    Admission,
    Event,
    Outcome,
    Place,
    Recv,
    Reject,
    SendFacts,
    SendState,
    WcStatus, //
};
use crate::mad::wire::{
    make_tid,
    tid_hi,
    MadHdr,
    IB_MGMT_MAD_SIZE, //
};
use std::format;
use std::string::String;
use std::vec::Vec;

/// One send of the simulated agent: the engine's facts and queue position, and what the
/// checks count for its current post.
#[derive(Clone, Debug, Default)]
struct SimSend {
    facts: Option<SendFacts>,
    tid: u64,
    class: u8,
    /// Position in its queue (FIFO by this key; waiting sends by `due`, then newest first).
    key: u64,
    /// Expiry of a waiting send (ms).
    due: u64,
    /// A successful post whose send handler has not run.
    live: bool,
    gen: u64,
    /// Transmissions handed to the transport whose completion has not come.
    inflight: u32,
    /// The status decided for the current post.
    decided: Option<WcStatus>,
    /// Receive-handler deliveries for the current post.
    rh: u32,
    /// Hand-overs to the transport for the current post (the first and each retry).
    handovers: u32,
    retries_at_post: u32,
    retries_used: u32,
    /// A cancel of the current post returned 0.
    cancel_ok: bool,
    /// The state the send was in when unregistration reached it.
    unreg_from: Option<SendState>,
    /// A retransmission or backlog dispatch of this post was refused.
    refused_later: bool,
    in_done_q: bool,
    /// Successful posts and send-handler calls, over the whole walk.
    posts: u64,
    handlers: u64,
}

/// The simulated agent.
pub(super) struct Sim {
    cfg: Config,
    strict: bool,
    sends: Vec<SimSend>,
    /// Exact counters (may not go negative) and the engine's saturating ones.
    s: i64,
    w: i64,
    s_sat: u32,
    w_sat: u32,
    backlog: u32,
    dead: bool,
    now: u64,
    seq: u64,
    /// Pending send completions: (send, post generation).
    transport: Vec<(usize, u64)>,
    refuse: u32,
    done_q: Vec<usize>,
    /// Transitions taken.
    pub(super) cov: [u64; TRANSITIONS.len()],
    pub(super) steps: u64,
}

/// The engine's `add_delta`: saturating.
fn add_sat(v: u32, d: i8) -> u32 {
    if d >= 0 {
        v.saturating_add(u32::from(d.unsigned_abs()))
    } else {
        v.saturating_sub(u32::from(d.unsigned_abs()))
    }
}

/// Who produced an event: the engine's own events must be accepted, the client's may be refused.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    Engine,
    Client,
}

type Sr<T> = Result<T, String>;

impl Sim {
    pub(super) fn new(cfg: Config, strict: bool) -> Self {
        Self {
            cfg,
            strict,
            sends: std::vec![SimSend::default(); cfg.sends],
            s: 0,
            w: 0,
            s_sat: 0,
            w_sat: 0,
            backlog: 0,
            dead: false,
            now: 0,
            seq: 0,
            transport: Vec::new(),
            refuse: 0,
            done_q: Vec::new(),
            cov: [0; TRANSITIONS.len()],
            steps: 0,
        }
    }

    fn state(&self, i: usize) -> SendState {
        self.sends[i].facts.map_or(SendState::Idle, |f| f.state)
    }

    fn next_key(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// One event through `step`, compared with the model, then applied as `Agent::apply` does.
    fn apply(&mut self, i: usize, ev: Event, origin: Origin) -> Sr<Option<Outcome>> {
        let Some(f) = self.sends[i].facts else {
            return Err(format!("send {i} has no facts for {ev:?}"));
        };
        let (got, t) = compare(f, ev, self.strict)?;
        self.steps += 1;
        self.cov[t as usize] += 1;
        let o = match got {
            Ok(o) => o,
            Err(r) if origin == Origin::Engine => {
                return Err(format!(
                    "the engine's event {ev:?} was refused ({r:?}) for send {i} with {f:?}"
                ))
            }
            Err(_) => return Ok(None),
        };
        self.s += i64::from(o.fc_send);
        self.w += i64::from(o.fc_wait);
        self.s_sat = add_sat(self.s_sat, o.fc_send);
        self.w_sat = add_sat(self.w_sat, o.fc_wait);
        let was = f.state;
        if was == SendState::Queued && o.next != SendState::Queued {
            self.backlog = self.backlog.saturating_sub(1);
        }
        if o.next == SendState::Queued && was != SendState::Queued {
            self.backlog += 1;
        }
        let key = match o.place {
            Place::Unchanged | Place::Nowhere => None,
            _ => Some(self.next_key()),
        };
        let now = self.now;
        let sd = &mut self.sends[i];
        let mut nf = f;
        if o.retry {
            nf.retries_left = nf.retries_left.saturating_sub(1);
            sd.retries_used += 1;
        }
        if let Some(t) = o.store_timeout {
            nf.timeout_ms = t;
        }
        nf.state = o.next;
        sd.facts = Some(nf);
        if let Some(k) = key {
            sd.key = k;
        }
        if let Place::Waiting { ms } = o.place {
            sd.due = now + u64::from(ms);
        }
        if ev == Event::Unregister {
            sd.unreg_from = Some(was);
        }
        if o.recv == Recv::Deliver {
            sd.rh += 1;
        }
        if let Some(st) = o.complete {
            if let Some(before) = sd.decided {
                return Err(format!(
                    "send {i} got a second status {st:?} after {before:?} ({ev:?} on {f:?})"
                ));
            }
            sd.decided = Some(st);
            if o.recv != Recv::Deliver {
                sd.in_done_q = true;
                self.done_q.push(i);
            }
        }
        Ok(Some(o))
    }

    /// Hands send `i` to the transport; false if the transport refuses.
    fn transmit(&mut self, i: usize) -> bool {
        self.sends[i].handovers += 1;
        if self.refuse > 0 {
            self.refuse -= 1;
            return false;
        }
        let gen = self.sends[i].gen;
        self.sends[i].inflight += 1;
        self.transport.push((i, gen));
        true
    }

    /// The backlog heads go to the transport while the limit allows (`dispatch_backlog`).
    fn dispatch_backlog(&mut self) -> Sr<()> {
        while !self.dead
            && self.backlog > 0
            && self.s_sat.saturating_add(self.w_sat) < self.cfg.limit
        {
            let head = (0..self.sends.len())
                .filter(|&j| self.state(j) == SendState::Queued)
                .min_by_key(|&j| self.sends[j].key);
            let Some(j) = head else {
                return Err(String::from(
                    "the backlog count is not 0 but no send is queued",
                ));
            };
            let o = self.apply(j, Event::BacklogDispatch, Origin::Engine)?;
            if o.is_some_and(|o| o.transmit) && !self.transmit(j) {
                self.sends[j].refused_later = true;
                self.apply(j, Event::BacklogDispatchFailed, Origin::Engine)?;
            }
        }
        Ok(())
    }

    /// Calls the send handler of `i` (its status is decided): `delivered`, then the checks of
    /// what one post may end with.
    fn deliver(&mut self, i: usize) -> Sr<()> {
        self.sends[i].in_done_q = false;
        self.apply(i, Event::Delivered, Origin::Engine)?;
        let sd = &mut self.sends[i];
        let Some(status) = sd.decided.take() else {
            return Err(format!("send {i} was delivered without a status"));
        };
        if !sd.live {
            return Err(format!(
                "send {i} got a send handler without a successful post"
            ));
        }
        sd.live = false;
        sd.handlers += 1;
        // §1.7: "0 from cancel: one SH call follows, with IB_WC_WR_FLUSH_ERR" (the exceptions are
        // dispatch failures racing the cancel, which rmad rules out by dispatching under the lock).
        if sd.cancel_ok && status != WcStatus::WrFlushErr {
            return Err(format!(
                "send {i} was cancelled (0) but its send handler got {status:?}"
            ));
        }
        // §1.4 step 1 and T24/T25: every outstanding send is flushed by unregistration.
        if let Some(from) = sd.unreg_from {
            let flushed = match from {
                SendState::Done | SendState::Idle => true,
                _ => status == WcStatus::WrFlushErr,
            };
            if !flushed {
                return Err(format!(
                    "send {i}, {from:?} at unregistration, got {status:?} instead of the flush"
                ));
            }
        }
        // §3.1: RESP_TIMEOUT_ERR only after every retry, or for a refused retransmission.
        if status == WcStatus::RespTimeoutErr
            && sd.retries_used != sd.retries_at_post
            && !sd.refused_later
        {
            return Err(format!(
                "send {i} timed out after {} of {} retries",
                sd.retries_used, sd.retries_at_post
            ));
        }
        // §1.9 "Response before request": a matched response of a waiting or queued send reaches
        // RH before SH(SUCCESS); a response is never delivered twice (§8.6).
        if sd.rh > 1 {
            return Err(format!("send {i}'s response reached RH {} times", sd.rh));
        }
        sd.rh = 0;
        sd.cancel_ok = false;
        sd.unreg_from = None;
        sd.refused_later = false;
        Ok(())
    }

    /// Calls every due send handler, in the order their statuses were decided.
    fn deliver_due(&mut self) -> Sr<()> {
        while !self.done_q.is_empty() {
            let i = self.done_q.remove(0);
            self.deliver(i)?;
        }
        Ok(())
    }

    /// The agent's work (`run_work`): expiries in expiry order, cancelled sends, the backlog,
    /// then the due handlers.
    fn work(&mut self) -> Sr<()> {
        if !self.dead {
            loop {
                let head = (0..self.sends.len())
                    .filter(|&j| self.state(j) == SendState::WaitResp)
                    .min_by_key(|&j| (self.sends[j].due, u64::MAX - self.sends[j].key));
                let Some(j) = head.filter(|&j| self.sends[j].due <= self.now) else {
                    break;
                };
                let ev = Event::Expired {
                    backlog_empty: self.backlog == 0,
                };
                let o = self.apply(j, ev, Origin::Engine)?;
                if o.is_some_and(|o| o.transmit) && !self.transmit(j) {
                    self.sends[j].refused_later = true;
                    self.apply(j, Event::RetransmitFailed, Origin::Engine)?;
                }
            }
            let mut cancelled: Vec<usize> = (0..self.sends.len())
                .filter(|&j| self.state(j) == TW)
                .collect();
            cancelled.sort_by_key(|&j| self.sends[j].key);
            for j in cancelled {
                let ev = Event::Expired {
                    backlog_empty: true,
                };
                self.apply(j, ev, Origin::Engine)?;
            }
            self.dispatch_backlog()?;
        }
        self.deliver_due()
    }

    /// §4: the send a response with `tid` and `class` matches, and whether it is a cancelled one.
    /// Candidates in C's list order: the wait list (cancelled sends at its head, then by expiry,
    /// equal expiries newest first), the backlog, then the send list, where a send counts only
    /// while its timeout is non-zero (after an early response or a cancel it is 0 in C).
    fn find_send(&self, tid: u64, class: u8) -> Option<(usize, bool)> {
        let same = |j: &usize| self.sends[*j].tid == tid && self.sends[*j].class == class;
        let n = self.sends.len();
        let in_state = |st: SendState| (0..n).filter(move |&j| self.state(j) == st).filter(same);
        if let Some(j) = in_state(TW).min_by_key(|&j| self.sends[j].key) {
            return Some((j, true));
        }
        if let Some(j) = in_state(SendState::WaitResp)
            .min_by_key(|&j| (self.sends[j].due, u64::MAX - self.sends[j].key))
        {
            return Some((j, false));
        }
        if let Some(j) = in_state(SendState::Queued).min_by_key(|&j| self.sends[j].key) {
            return Some((j, false));
        }
        in_state(SendState::SendStart)
            .filter(|&j| self.sends[j].facts.is_some_and(|f| f.timeout_ms != 0))
            .min_by_key(|&j| self.sends[j].key)
            .map(|j| (j, false))
    }

    /// A MAD arrives for the agent's port: it goes through the wire parser and `hi_tid`
    /// routing, and a response is matched and applied (`Agent::receive`).
    fn receive(&mut self, hdr: MadHdr) -> Sr<()> {
        let mut buf = [0u8; IB_MGMT_MAD_SIZE];
        hdr.write(&mut buf)
            .map_err(|e| format!("writing a header into a MAD failed: {e:?}"))?;
        let h = MadHdr::parse(&buf).map_err(|e| format!("a whole MAD did not parse: {e:?}"))?;
        if h != hdr {
            return Err(format!("{hdr:?} came back from the wire as {h:?}"));
        }
        if self.dead || tid_hi(h.tid) != self.cfg.hi_tid || !h.is_response() {
            // Unregistered, routed to another agent, or a request (RH without a send).
            return Ok(());
        }
        let Some((j, cancelled)) = self.find_send(h.tid, h.mgmt_class) else {
            return Ok(());
        };
        let was = self.state(j);
        let Some(o) = self.apply(j, Event::Response, Origin::Engine)? else {
            return Ok(());
        };
        let want = if cancelled { Recv::Drop } else { Recv::Deliver };
        if o.recv != want {
            return Err(format!(
                "§4 matched send {j} ({was:?}) but step's receive action is {:?}, not {want:?}",
                o.recv
            ));
        }
        if o.frees_fc_slot {
            // The backlog moves before RH (§8.22).
            self.dispatch_backlog()?;
        }
        if o.recv == Recv::Deliver && o.complete.is_some() {
            // "Response before request": SH follows RH in this thread.
            self.deliver(j)?;
        }
        Ok(())
    }

    /// The header of a response to send `i`.
    fn answer(&self, i: usize, method: u8) -> MadHdr {
        MadHdr {
            base_version: 1,
            mgmt_class: self.sends[i].class,
            class_version: 2,
            method,
            status: 0,
            class_specific: 0,
            tid: self.sends[i].tid,
            attr_id: 0x0010,
            resv: 0,
            attr_mod: 0,
        }
    }

    /// Runs one action.
    pub(super) fn act(&mut self, a: Action) -> Sr<()> {
        let n = self.sends.len();
        let idx = |x: u8| usize::from(x) % n;
        match a {
            Action::Post {
                send,
                class,
                lo,
                timeout,
                retries,
                rmpp,
            } => {
                let i = idx(send);
                if self.dead {
                    // ESHUTDOWN before the state machine (§8.3).
                    return Ok(());
                }
                let adm = Admission {
                    limit: self.cfg.limit,
                    in_use: self.s_sat.saturating_add(self.w_sat),
                    backlog_empty: self.backlog == 0,
                };
                if self.state(i) != SendState::Idle {
                    // The C API's double post: EBUSY (and step agrees).
                    let f = self.sends[i].facts.unwrap_or(SendFacts {
                        state: SendState::Idle,
                        fc: false,
                        timeout_ms: 0,
                        retries_left: 0,
                    });
                    let (r, t) = compare(f, Event::Post(adm), self.strict)?;
                    self.cov[t as usize] += 1;
                    if r != Err(Reject::Outstanding) {
                        return Err(format!("a post of outstanding send {i} gave {r:?}"));
                    }
                    return Ok(());
                }
                let class = POST_CLASSES[usize::from(class) % POST_CLASSES.len()];
                let timeout_ms = POST_TIMEOUTS[usize::from(timeout) % POST_TIMEOUTS.len()];
                let retries = u32::from(retries % 4);
                let fc = is_solicited_fc(class, timeout_ms, rmpp);
                let tid = make_tid(self.cfg.hi_tid, u32::from(lo % 3) + 1);
                let sd = &mut self.sends[i];
                sd.gen += 1;
                sd.tid = tid;
                sd.class = class;
                sd.facts = Some(SendFacts {
                    state: SendState::Idle,
                    fc,
                    timeout_ms,
                    retries_left: retries,
                });
                sd.retries_at_post = retries;
                sd.retries_used = 0;
                sd.handovers = 0;
                sd.rh = 0;
                sd.cancel_ok = false;
                sd.unreg_from = None;
                sd.refused_later = false;
                let o = self.apply(i, Event::Post(adm), Origin::Engine)?;
                if o.is_some_and(|o| o.transmit) && !self.transmit(i) {
                    // T3: the post fails; no handler will run.
                    self.apply(i, Event::DispatchFailed, Origin::Engine)?;
                    if self.state(i) != SendState::Idle {
                        return Err(format!("a failed post left send {i} {:?}", self.state(i)));
                    }
                    return Ok(());
                }
                self.sends[i].live = true;
                self.sends[i].posts += 1;
            }
            Action::Modify { send, t } => {
                let i = idx(send);
                if !self.sends[i].live {
                    // A stale handle: EINVAL before the state machine.
                    return Ok(());
                }
                let t = MODIFY_TIMES[usize::from(t) % MODIFY_TIMES.len()];
                if self.apply(i, Event::Modify(t), Origin::Client)?.is_some() && t == 0 {
                    self.sends[i].cancel_ok = true;
                }
            }
            Action::Complete { k, status } => {
                if self.transport.is_empty() {
                    return Ok(());
                }
                let (i, gen) = self.transport.remove(usize::from(k) % self.transport.len());
                self.sends[i].inflight -= 1;
                if gen != self.sends[i].gen {
                    return Err(format!("a send completion of an earlier post of send {i}"));
                }
                let st = COMPLETION_STATUSES[usize::from(status) % COMPLETION_STATUSES.len()];
                let o = self.apply(i, Event::SendCompleted(st), Origin::Engine)?;
                if o.is_some_and(|o| o.frees_fc_slot) {
                    self.dispatch_backlog()?;
                }
            }
            Action::Respond { send, method } => {
                let i = idx(send);
                if self.sends[i].facts.is_none() {
                    return Ok(());
                }
                let m = [0x81, 0x86, 0x07, 0x95][usize::from(method) % 4];
                self.receive(self.answer(i, m))?;
            }
            Action::Stray {
                lo,
                class,
                method,
                ours,
            } => {
                let hi = if ours {
                    self.cfg.hi_tid
                } else {
                    self.cfg.hi_tid ^ 1
                };
                let hdr = MadHdr {
                    base_version: 1,
                    mgmt_class: POST_CLASSES[usize::from(class) % POST_CLASSES.len()],
                    method: [0x81, 0x01, 0x03, 0x07, 0x86][usize::from(method) % 5],
                    tid: make_tid(hi, u32::from(lo % 4) + 1),
                    ..MadHdr::default()
                };
                self.receive(hdr)?;
            }
            Action::Advance { ms } => {
                self.now += ADVANCES[usize::from(ms) % ADVANCES.len()];
            }
            Action::Work => self.work()?,
            Action::Refuse { n } => self.refuse = u32::from(n % 3) + 1,
            Action::Unregister => {
                if self.dead {
                    return Ok(());
                }
                self.dead = true;
                self.unregister_pass()?;
            }
        }
        if self.dead {
            // The unregistering thread: flushes whatever reached the wait or cancel queues since,
            // and calls every due handler.
            self.unregister_pass()?;
        }
        Ok(())
    }

    /// Unregistration's walk: in flight, cancelled, waiting (by expiry), backlog; then the due
    /// handlers.
    fn unregister_pass(&mut self) -> Sr<()> {
        let order = |sim: &Self, st: SendState| {
            let mut v: Vec<usize> = (0..sim.sends.len())
                .filter(|&j| sim.state(j) == st)
                .collect();
            if st == SendState::WaitResp {
                v.sort_by_key(|&j| (sim.sends[j].due, u64::MAX - sim.sends[j].key));
            } else {
                v.sort_by_key(|&j| sim.sends[j].key);
            }
            v
        };
        let first = self.sends.iter().any(|s| s.live && s.unreg_from.is_none());
        if first {
            let mut flight: Vec<usize> = (0..self.sends.len())
                .filter(|&j| {
                    matches!(
                        self.state(j),
                        SendState::SendStart | SendState::EarlyResp | SC
                    ) && self.sends[j].unreg_from.is_none()
                })
                .collect();
            flight.sort_by_key(|&j| self.sends[j].key);
            for j in flight {
                self.apply(j, Event::Unregister, Origin::Engine)?;
            }
        }
        for st in [TW, SendState::WaitResp, SendState::Queued] {
            for j in order(self, st) {
                self.apply(j, Event::Unregister, Origin::Engine)?;
            }
        }
        self.deliver_due()
    }

    /// The invariants that hold between any two actions.
    pub(super) fn check(&self) -> Sr<()> {
        let count = |st: SendState, fc: bool| {
            self.sends
                .iter()
                .filter(|s| s.facts.is_some_and(|f| f.state == st && (f.fc || !fc)))
                .count()
        };
        // §2.2: the counters are the FC sends in SEND_START and WAIT_RESP; they never go negative,
        // so the engine's saturating counters never saturate.
        let want_s = i64::try_from(count(SendState::SendStart, true)).unwrap_or(-1);
        let want_w = i64::try_from(count(SendState::WaitResp, true)).unwrap_or(-1);
        if self.s != want_s || self.w != want_w {
            return Err(format!(
                "flow-control counters s={} w={}, but {want_s} FC sends are SEND_START and \
                 {want_w} WAIT_RESP",
                self.s, self.w
            ));
        }
        if i64::from(self.s_sat) != self.s || i64::from(self.w_sat) != self.w {
            return Err(String::from("a saturating counter saturated"));
        }
        // §3.3: the limit holds, and only FC sends are ever queued.
        if self.cfg.limit != 0 && self.s + self.w > i64::from(self.cfg.limit) {
            return Err(format!(
                "{} FC sends in flight or waiting, over the limit {}",
                self.s + self.w,
                self.cfg.limit
            ));
        }
        let queued = count(SendState::Queued, false);
        if usize::try_from(self.backlog).ok() != Some(queued) {
            return Err(format!(
                "backlog count {} for {queued} queued sends",
                self.backlog
            ));
        }
        if count(SendState::Queued, true) != queued {
            return Err(String::from(
                "a send without flow control is in the backlog",
            ));
        }
        if self.cfg.limit == 0 && queued != 0 {
            return Err(String::from(
                "a send is queued although flow control is off",
            ));
        }
        for (i, sd) in self.sends.iter().enumerate() {
            let st = self.state(i);
            // A send awaiting its send completion has exactly one transmission at the
            // transport; any other has none.
            let awaits = matches!(st, SendState::SendStart | SendState::EarlyResp | SC);
            if sd.inflight != u32::from(awaits) {
                return Err(format!(
                    "send {i} is {st:?} with {} transmissions at the transport",
                    sd.inflight
                ));
            }
            // §1.9: one SH per successful post: outstanding exactly until it has run.
            if sd.live == (st == SendState::Idle) {
                return Err(format!("send {i} is {st:?} but live is {}", sd.live));
            }
            if sd.posts != sd.handlers + u64::from(sd.live) {
                return Err(format!(
                    "send {i}: {} posts, {} send handlers",
                    sd.posts, sd.handlers
                ));
            }
            // §2.2: a DONE send is in no list but the delivery queue, with its status decided.
            if (st == SendState::Done) != sd.in_done_q || sd.in_done_q != sd.decided.is_some() {
                return Err(format!(
                    "send {i} is {st:?}, in the delivery queue {}, status {:?}",
                    sd.in_done_q, sd.decided
                ));
            }
            if sd.rh > 1 {
                return Err(format!("send {i}'s response reached RH twice"));
            }
            // §3.1: 1 + retries hand-overs at most; the retries left are what was not used.
            if sd.handovers > sd.retries_at_post + 1 {
                return Err(format!(
                    "send {i} was handed over {} times with {} retries",
                    sd.handovers, sd.retries_at_post
                ));
            }
            if let Some(f) = sd.facts {
                if sd.live && f.retries_left + sd.retries_used != sd.retries_at_post {
                    return Err(format!("send {i}'s retries left do not add up"));
                }
            }
        }
        // After unregistration nothing waits or is queued (§1.4).
        if self.dead && (count(SendState::WaitResp, false) + queued + count(TW, false)) != 0 {
            return Err(String::from(
                "a send waits or is queued after unregistration",
            ));
        }
        Ok(())
    }

    /// Ends the walk: the transport completes everything, time runs until every send is done,
    /// and every send is then idle with every post answered by one send handler.
    pub(super) fn drain(&mut self) -> Sr<()> {
        for _ in 0..100_000 {
            if self.sends.iter().all(|s| !s.live) && self.transport.is_empty() {
                break;
            }
            while !self.transport.is_empty() {
                self.act(Action::Complete { k: 0, status: 0 })?;
                self.check()?;
            }
            let next_due = (0..self.sends.len())
                .filter(|&j| self.state(j) == SendState::WaitResp)
                .map(|j| self.sends[j].due)
                .min();
            if let Some(d) = next_due {
                self.now = self.now.max(d);
            }
            self.act(Action::Work)?;
            self.check()?;
        }
        if self.backlog != 0 || self.s != 0 || self.w != 0 {
            return Err(format!(
                "the agent does not drain: backlog {}, s {}, w {}",
                self.backlog, self.s, self.w
            ));
        }
        for (i, sd) in self.sends.iter().enumerate() {
            if sd.live || self.state(i) != SendState::Idle || sd.posts != sd.handlers {
                return Err(format!(
                    "send {i} does not drain: {:?}, {} posts, {} send handlers",
                    self.state(i),
                    sd.posts,
                    sd.handlers
                ));
            }
        }
        Ok(())
    }
}
