// SPDX-License-Identifier: GPL-2.0

//! Support for the KUnit suites that drive agents over a loopback fabric: a fresh engine and
//! fabric per test ([`Env`]), handlers that record every call ([`Recorder`]), request
//! builders, and bounded waits.
//!
//! Handlers run on workqueues, where a failed assertion would not reach KUnit (and a panic
//! would kill the VM), so they only record; tests wait for the records with a generous bound
//! and assert in the test thread.

use crate::{
    agent::{
        Agent,
        AgentConfig,
        QpType,
        RecvHandler,
        SendHandler, //
    },
    engine::{
        Engine,
        RegReq, //
    },
    loopback::{
        Fabric,
        Loopback, //
    },
    send::{
        Address,
        GrhAttr,
        SendBuf,
        SendCompletion,
        SendHandle, //
    },
    state::{
        SendState,
        WcStatus, //
    },
    transport::{
        PortAttr,
        RecvMad,
        Transport, //
    },
    verbs::{
        self,
        VerbsPort, //
    },
    wire::{
        self,
        MadHdr, //
    },
};
use kernel::{
    new_condvar, new_spinlock,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
        CondVar,
        SpinLock, //
    },
    task::Task,
    time::{
        msecs_to_jiffies,
        Instant,
        Monotonic, //
    },
};

/// How long a test waits for an expected handler call before it fails (software emulation is
/// slow; nothing asserts a duration).
pub(crate) const WAIT_MS: i64 = 20_000;

/// One recorded handler call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    /// A send handler call.
    Send {
        /// `context[0]` of the buffer: the test's tag for the send.
        tag: usize,
        /// Status and vendor error.
        wc: SendCompletion,
        /// `retries` of the buffer: retransmissions performed.
        retries: i32,
        /// The task that ran the handler.
        task: usize,
    },
    /// A marker a test recorded.
    Mark(u32),
    /// A receive handler call.
    Recv {
        /// Tag of the matched send, if any (`None`: a request).
        tag: Option<usize>,
        /// TID of the received MAD.
        tid: u64,
        /// Method of the received MAD.
        method: u8,
        /// Status of the received MAD.
        status: u16,
        /// The task that ran the handler.
        task: usize,
    },
}

/// What a [`Recorder`] does besides recording.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Behaviour {
    /// Answer every request with a GET_RESP to its sender.
    pub(crate) respond: bool,
    /// Keep completed send buffers instead of freeing them.
    pub(crate) keep: bool,
    /// Cancel the matched send from inside the receive handler (scenario 29).
    pub(crate) cancel_in_recv: bool,
    /// Unregister the agent from inside the send handler (scenario 52).
    pub(crate) unregister_in_send: bool,
    /// Unregister the agent from inside the receive handler.
    pub(crate) unregister_in_recv: bool,
    /// Sleep this long in the send handler (handlers may sleep, scenario 62).
    pub(crate) sleep_in_send_ms: i64,
    /// Take the agent's lock from inside the handlers (it must not be held, scenario 62).
    pub(crate) touch_agent: bool,
}

/// Records every call of the handlers it implements.
#[pin_data]
pub(crate) struct Recorder {
    #[pin]
    calls: SpinLock<RecorderInner>,
    #[pin]
    changed: CondVar,
    behaviour: Behaviour,
}

/// The records, under the recorder's lock.
pub(crate) struct RecorderInner {
    /// Calls in order.
    pub(crate) calls: KVec<Call>,
    /// Buffers kept by [`Behaviour::keep`].
    pub(crate) kept: KVec<SendBuf>,
    /// Results of actions taken inside handlers (cancel or unregister return codes).
    pub(crate) inner_results: KVec<i32>,
    /// Buffers are no longer kept (teardown has started).
    keep_off: bool,
    /// See [`Recorder::set_probe`].
    probe: Option<Arc<Fabric>>,
    probed: KVec<(usize, u64)>,
}

impl Recorder {
    /// A recorder that behaves as `behaviour` says.
    pub(crate) fn new(behaviour: Behaviour) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                calls <- new_spinlock!(RecorderInner {
                    calls: KVec::new(),
                    kept: KVec::new(),
                    inner_results: KVec::new(),
                    keep_off: false,
                    probe: None,
                    probed: KVec::new(),
                }),
                changed <- new_condvar!("Recorder::changed"),
                behaviour,
            }),
            GFP_KERNEL,
        )
    }

    fn push(&self, c: Call) {
        let mut g = self.calls.lock();
        // A record lost to memory pressure makes the test fail, not the kernel.
        let _ = g.calls.push(c, GFP_ATOMIC);
        self.changed.notify_all();
    }

    fn push_result(&self, r: Result) {
        let code = match r {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        };
        let mut g = self.calls.lock();
        let _ = g.inner_results.push(code, GFP_ATOMIC);
    }

    /// Records a marker.
    pub(crate) fn mark(&self, m: u32) {
        self.push(Call::Mark(m));
    }

    /// Whether marker `m` was recorded.
    pub(crate) fn has_mark(&self, m: u32) -> bool {
        self.calls.lock().calls.contains(&Call::Mark(m))
    }

    /// Sets the probe: a fabric whose transmission count each send-handler call records.
    pub(crate) fn set_probe(&self, f: &Arc<Fabric>) {
        self.calls.lock().probe = Some(f.clone());
    }

    /// The fabric's transmission count at each send-handler call, by tag.
    pub(crate) fn probes(&self) -> Result<KVec<(usize, u64)>> {
        let g = self.calls.lock();
        let mut v = KVec::with_capacity(g.probed.len(), GFP_ATOMIC)?;
        v.extend_from_slice(&g.probed, GFP_ATOMIC)?;
        Ok(v)
    }

    /// A copy of the calls so far.
    pub(crate) fn calls(&self) -> Result<KVec<Call>> {
        let g = self.calls.lock();
        let mut v = KVec::with_capacity(g.calls.len(), GFP_ATOMIC)?;
        v.extend_from_slice(&g.calls, GFP_ATOMIC)?;
        Ok(v)
    }

    /// Return codes of actions taken inside handlers.
    pub(crate) fn inner_results(&self) -> Result<KVec<i32>> {
        let g = self.calls.lock();
        let mut v = KVec::with_capacity(g.inner_results.len(), GFP_ATOMIC)?;
        v.extend_from_slice(&g.inner_results, GFP_ATOMIC)?;
        Ok(v)
    }

    /// The send-handler calls so far, as (tag, status, retries).
    pub(crate) fn sends(&self) -> Result<KVec<(usize, WcStatus, i32)>> {
        let g = self.calls.lock();
        let mut v = KVec::new();
        for c in g.calls.iter() {
            if let Call::Send {
                tag, wc, retries, ..
            } = c
            {
                v.push((*tag, wc.status, *retries), GFP_ATOMIC)?;
            }
        }
        Ok(v)
    }

    /// Number of send-handler calls.
    pub(crate) fn send_count(&self) -> usize {
        let g = self.calls.lock();
        g.calls
            .iter()
            .filter(|c| matches!(c, Call::Send { .. }))
            .count()
    }

    /// Number of receive-handler calls.
    pub(crate) fn recv_count(&self) -> usize {
        let g = self.calls.lock();
        g.calls
            .iter()
            .filter(|c| matches!(c, Call::Recv { .. }))
            .count()
    }

    /// Takes the kept buffers.
    pub(crate) fn take_kept(&self) -> KVec<SendBuf> {
        core::mem::take(&mut self.calls.lock().kept)
    }

    /// Stops keeping buffers and gives back those kept: an agent's unregistration waits for
    /// every buffer, so a recorder that kept them through it would wait forever.
    pub(crate) fn release_all(&self) -> KVec<SendBuf> {
        let mut g = self.calls.lock();
        g.keep_off = true;
        core::mem::take(&mut g.kept)
    }

    /// Waits until `cond` holds for the calls, at most [`WAIT_MS`]; returns whether it holds.
    pub(crate) fn wait_until(&self, cond: impl Fn(&[Call]) -> bool) -> bool {
        wait_locked(&self.calls, &self.changed, |g| cond(&g.calls))
    }

    /// Waits until there are at least `n` send-handler calls.
    pub(crate) fn wait_sends(&self, n: usize) -> bool {
        self.wait_until(|c| c.iter().filter(|x| matches!(x, Call::Send { .. })).count() >= n)
    }

    /// Waits until there are at least `n` receive-handler calls.
    pub(crate) fn wait_recvs(&self, n: usize) -> bool {
        self.wait_until(|c| c.iter().filter(|x| matches!(x, Call::Recv { .. })).count() >= n)
    }
}

/// Waits until `cond` holds for what `lock` protects, at most [`WAIT_MS`]; `changed` is
/// notified whenever it may have become true. Returns whether it holds.
pub(crate) fn wait_locked<T>(
    lock: &SpinLock<T>,
    changed: &CondVar,
    cond: impl Fn(&T) -> bool,
) -> bool {
    let start = Instant::<Monotonic>::now();
    let mut g = lock.lock();
    loop {
        if cond(&g) {
            return true;
        }
        let left = WAIT_MS.saturating_sub(start.elapsed().as_millis());
        if left <= 0 {
            return false;
        }
        let j = msecs_to_jiffies(u32::try_from(left.min(100)).unwrap_or(100));
        let _ = changed.wait_interruptible_timeout(&mut g, j);
    }
}

/// The current task, as a number to compare.
fn task_id() -> usize {
    Task::current_raw().addr()
}

impl SendHandler for Recorder {
    fn send_done(&self, agent: &Arc<Agent>, buf: SendBuf, wc: SendCompletion) {
        let probe = self.calls.lock().probe.clone();
        if let Some(f) = probe {
            let n = f.stats().transmitted;
            let _ = self
                .calls
                .lock()
                .probed
                .push((buf.context()[0], n), GFP_ATOMIC);
        }
        if self.behaviour.touch_agent {
            // Deadlocks if the engine called us with the agent's lock held.
            let _ = agent.outstanding();
        }
        if self.behaviour.sleep_in_send_ms > 0 {
            sleep_ms(self.behaviour.sleep_in_send_ms);
        }
        let call = Call::Send {
            tag: buf.context()[0],
            wc,
            retries: buf.retries(),
            task: task_id(),
        };
        if self.behaviour.unregister_in_send {
            self.push_result(agent.unregister());
        }
        let mut g = self.calls.lock();
        // A kept buffer is in place before the call is visible, so that a test that saw the
        // call finds the buffer.
        if self.behaviour.keep && !g.keep_off {
            // Under memory pressure the buffer is freed instead, and the test sees it missing.
            let _ = g.kept.push(buf, GFP_ATOMIC);
        } else {
            drop(g);
            drop(buf);
            g = self.calls.lock();
        }
        let _ = g.calls.push(call, GFP_ATOMIC);
        self.changed.notify_all();
    }
}

impl RecvHandler for Recorder {
    fn recv(&self, agent: &Arc<Agent>, send: Option<&SendHandle>, mad: RecvMad) {
        let hdr = MadHdr::parse(&mad.mad).unwrap_or_default();
        let tag = send.and_then(|h| h.tag());
        if self.behaviour.touch_agent {
            let _ = agent.outstanding();
        }
        self.push(Call::Recv {
            tag,
            tid: hdr.tid,
            method: hdr.method,
            status: hdr.status,
            task: task_id(),
        });
        if self.behaviour.cancel_in_recv {
            if let Some(h) = send {
                self.push_result(h.cancel());
            }
        }
        if self.behaviour.unregister_in_recv {
            self.push_result(agent.unregister());
        }
        if self.behaviour.respond && send.is_none() && !hdr.is_response() {
            let _ = respond(agent, &hdr, &mad);
        }
    }
}

/// Posts a GET_RESP to `req`, back to where it came from.
pub(crate) fn respond(agent: &Arc<Agent>, req: &MadHdr, mad: &RecvMad) -> Result {
    let mut buf = agent.create_send(mad.wc.src_qp, 0, false, 24, 232, GFP_KERNEL, 1)?;
    let hdr = MadHdr {
        method: wire::IB_MGMT_METHOD_GET_RESP,
        ..*req
    };
    hdr.write(buf.mad_mut()).map_err(|_| EINVAL)?;
    buf.set_ah(Some(Address {
        sl: 0,
        dlid: mad.wc.slid,
        src_path_bits: mad.wc.dlid_path_bits,
        grh: None,
    }));
    buf.set_context([usize::MAX, 0]);
    Agent::post(buf).map(|_| ()).map_err(|e| e.err)
}

/// A test's world: an engine and a loopback fabric of its own.
pub(crate) struct Env {
    /// The engine.
    pub(crate) engine: Arc<Engine>,
    /// The transport.
    pub(crate) lb: Arc<Loopback>,
    /// The transport, as agents see it.
    pub(crate) transport: Arc<dyn Transport>,
}

impl Env {
    /// A fresh engine and fabric with the default ports.
    pub(crate) fn new() -> Result<Self> {
        Self::with_ports(Fabric::DEFAULT_PORTS)
    }

    /// A fresh engine and fabric with `ports`.
    pub(crate) fn with_ports(ports: [PortAttr; 2]) -> Result<Self> {
        let engine = Engine::new(c"rmad_test", c"rmad_test_cq")?;
        let lb = Loopback::new(&engine, ports)?;
        let transport: Arc<dyn Transport> = lb.clone();
        Ok(Self {
            engine,
            lb,
            transport,
        })
    }

    /// The fabric.
    pub(crate) fn fabric(&self) -> &Arc<Fabric> {
        &self.lb.fabric
    }

    /// Registers an agent on GSI `port` with `rec` as both handlers and an optional class
    /// registration.
    pub(crate) fn agent(
        &self,
        port: u8,
        rec: &Arc<Recorder>,
        reg: Option<RegReq>,
    ) -> Result<Arc<Agent>> {
        register_gsi(&self.engine, &self.transport, port, rec, reg)
    }

    /// Registers a responder for `class` (methods GET and SET) on `port` that answers every
    /// request.
    pub(crate) fn responder(&self, port: u8, class: u8) -> Result<(Arc<Agent>, Arc<Recorder>)> {
        let rec = Recorder::new(Behaviour {
            respond: true,
            ..Behaviour::default()
        })?;
        let a = self.agent(port, &rec, Some(reg(class)))?;
        Ok((a, rec))
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.lb.fabric.shutdown();
        self.engine.quiesce();
    }
}

/// Registers a GSI agent on `port` of `transport` with `rec` as both handlers.
pub(crate) fn register_gsi<H: SendHandler + RecvHandler + 'static>(
    engine: &Arc<Engine>,
    transport: &Arc<dyn Transport>,
    port: u8,
    rec: &Arc<H>,
    reg: Option<RegReq>,
) -> Result<Arc<Agent>> {
    Agent::register(
        engine,
        transport,
        AgentConfig {
            port,
            qp_type: QpType::Gsi,
            reg,
            rmpp_version: 0,
            flags: 0,
            send_handler: Some(rec.clone()),
            recv_handler: Some(rec.clone()),
        },
    )
}

/// Port 1 of `rxe0` and an agent on it whose handlers are `rec`; `None` without `rxe0`.
pub(crate) fn rxe_agent(rec: &Arc<Recorder>) -> Result<Option<(Arc<VerbsPort>, Arc<Agent>)>> {
    let Some(port) = verbs::find_port(c"rxe0", 1) else {
        return Ok(None);
    };
    let engine = verbs::verbs_engine().ok_or(ENODEV)?;
    let transport: Arc<dyn Transport> = port.clone();
    let a = register_gsi(&engine, &transport, 1, rec, None)?;
    Ok(Some((port, a)))
}

/// A class-0x04 request with `method` from `a` to QP1 of its own rxe port, through the
/// port's IPv4-mapped GID (index 1). ib_core answers GET itself; it never answers SEND.
pub(crate) fn rxe_request(
    port: &Arc<VerbsPort>,
    a: &Arc<Agent>,
    tag: usize,
    method: u8,
    timeout_ms: i32,
    retries: i32,
) -> Result<SendBuf> {
    let gid = port.gid(1, 1).ok_or(ENODEV)?;
    let mut buf = request(
        a,
        wire::IB_MGMT_CLASS_PERF_MGMT,
        tag,
        0,
        timeout_ms,
        retries,
    )?;
    if let Some(m) = buf.mad_mut().get_mut(3) {
        *m = method;
    }
    buf.set_ah(Some(Address {
        sl: 0,
        dlid: 0,
        src_path_bits: 0,
        grh: Some(GrhAttr {
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
            dgid: gid,
            sgid_index: 1,
        }),
    }));
    Ok(buf)
}

/// Waits (at most [`WAIT_MS`]) until the send `h` is in `state`.
pub(crate) fn wait_state(a: &Arc<Agent>, h: &SendHandle, state: SendState) -> bool {
    let start = Instant::<Monotonic>::now();
    while start.elapsed().as_millis() < WAIT_MS {
        if a.send_state(h) == Some(state) {
            return true;
        }
        sleep_ms(1);
    }
    false
}

/// A registration for GET and SET requests of `class`, version 1.
pub(crate) fn reg(class: u8) -> RegReq {
    RegReq {
        mgmt_class: class,
        class_version: 1,
        oui: [0; 3],
        methods: (1 << wire::IB_MGMT_METHOD_GET) | (1 << wire::IB_MGMT_METHOD_SET),
    }
}

/// A GET request of `class` from `agent` to LID `dlid`, tagged `tag`, with TID low word
/// `lo`, `timeout_ms` and `retries`.
pub(crate) fn request(
    agent: &Arc<Agent>,
    class: u8,
    tag: usize,
    dlid: u16,
    timeout_ms: i32,
    retries: i32,
) -> Result<SendBuf> {
    let mut buf = agent.create_send(1, 0, false, 24, 232, GFP_KERNEL, 1)?;
    let lo = u32::try_from(tag).unwrap_or(0);
    let hdr = MadHdr {
        base_version: 1,
        mgmt_class: class,
        class_version: 1,
        method: wire::IB_MGMT_METHOD_GET,
        tid: wire::make_tid(agent.hi_tid, lo),
        ..MadHdr::default()
    };
    hdr.write(buf.mad_mut()).map_err(|_| EINVAL)?;
    buf.set_ah(Some(Address {
        sl: 0,
        dlid,
        src_path_bits: 0,
        grh: None,
    }));
    buf.set_timeout_ms(timeout_ms);
    buf.set_retries(retries);
    buf.set_context([tag, 0]);
    Ok(buf)
}

/// Keeps `engine`'s ordered queue busy (so that no agent work and no send handler runs)
/// until the returned gate is opened with `store(1, ..)`.
pub(crate) fn block_queue(engine: &Engine) -> Result<Arc<Atomic<i32>>> {
    let gate = Arc::new(Atomic::<i32>::new(0), GFP_KERNEL)?;
    let g2 = gate.clone();
    engine
        .wq
        .queue()
        .try_spawn(GFP_KERNEL, move || {
            while g2.load(Relaxed) == 0 {
                sleep_ms(1);
            }
        })
        .map_err(|_| ENOMEM)?;
    Ok(gate)
}

/// Posts `buf`, turning a failure into its error.
pub(crate) fn post(buf: SendBuf) -> Result<SendHandle> {
    Agent::post(buf).map_err(|e| e.err)
}

/// Sleeps for `ms` milliseconds.
pub(crate) fn sleep_ms(ms: i64) {
    kernel::time::delay::fsleep(kernel::time::Delta::from_millis(ms));
}

/// How a race test of cancel against another event ended.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RaceOutcome {
    /// Sends posted and cancelled.
    pub(crate) iterations: usize,
    /// Cancels that returned 0: the send was flushed.
    pub(crate) cancel_won: usize,
    /// Cancels that returned `EINVAL`: the other event had decided the send's fate.
    pub(crate) cancel_lost: usize,
    /// Every send got exactly one handler call, with the status its cancel result implies.
    pub(crate) exactly_once: bool,
}

/// Runs a race of cancel against the event that decides a send's fate, until each outcome
/// happened at least `min` times (or `max` sends were used).
///
/// `post_one(tag)` posts send `tag`; after a pseudo-random delay the test thread cancels it.
/// The delay window adapts to the machine: it widens while cancel always wins (the event had
/// no time to happen) and narrows while cancel always loses, so that both interleavings keep
/// happening even under software emulation, whose timing jitters. `won` is the status a send
/// ends with when its cancel lost.
pub(crate) fn race_cancel(
    rec: &Arc<Recorder>,
    min: usize,
    max: usize,
    mut post_one: impl FnMut(usize) -> Result<SendHandle>,
    won: WcStatus,
) -> Result<RaceOutcome> {
    const BATCH: usize = 50;
    let mut cancelled = KVec::with_capacity(max, GFP_KERNEL)?;
    let mut window_us: i64 = 20;
    let mut seed: u32 = 0x1234_5678;
    let (mut won_n, mut lost_n, mut batch_won, mut batch_lost) = (0usize, 0usize, 0usize, 0usize);
    for tag in 0..max {
        let h = post_one(tag)?;
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let us = i64::from(seed >> 8) % window_us.saturating_add(1);
        if us >= 1000 {
            sleep_ms(us / 1000);
        } else {
            kernel::time::delay::udelay(kernel::time::Delta::from_micros(us));
        }
        let ok = h.cancel().is_ok();
        cancelled.push(ok, GFP_KERNEL)?;
        if ok {
            won_n += 1;
            batch_won += 1;
        } else {
            lost_n += 1;
            batch_lost += 1;
        }
        if (tag + 1) % BATCH == 0 {
            if batch_lost == 0 {
                window_us = window_us.saturating_mul(2).min(50_000);
            } else if batch_won == 0 {
                window_us = (window_us / 2).max(1);
            }
            batch_won = 0;
            batch_lost = 0;
            if won_n >= min && lost_n >= min && tag + 1 >= 4 * BATCH {
                break;
            }
        }
    }
    let n = cancelled.len();
    let all = rec.wait_sends(n);
    let sends = rec.sends()?;
    let mut count = KVec::with_capacity(n, GFP_KERNEL)?;
    count.resize(n, 0u32, GFP_KERNEL)?;
    let mut agree = all && sends.len() == n;
    for (tag, status, _) in sends.iter() {
        let (Some(c), Some(was_cancelled)) = (count.get_mut(*tag), cancelled.get(*tag)) else {
            agree = false;
            continue;
        };
        *c = c.saturating_add(1);
        let want = if *was_cancelled {
            WcStatus::WrFlushErr
        } else {
            won
        };
        agree &= *status == want;
    }
    Ok(RaceOutcome {
        iterations: n,
        cancel_won: won_n,
        cancel_lost: lost_n,
        exactly_once: agree && count.iter().all(|c| *c == 1),
    })
}
