// SPDX-License-Identifier: GPL-2.0

//! Handlers that record every call ([`Recorder`]), with bounded waits for the records.
//!
//! Handlers run on workqueues, where a failed assertion would not reach KUnit (and a panic
//! would kill the VM), so they only record; tests wait for the records with a generous bound
//! and assert in the test thread.

use crate::{
    engine::{
        agent::{
            Agent,
            RecvHandler,
            SendHandler, //
        },
        send::{
            SendBuf,
            SendCompletion,
            SendHandle, //
        },
        transport::RecvMad, //
    },
    mad::{
        state::WcStatus,
        wire::MadHdr, //
    },
    testing::{
        env::sleep_ms,
        loopback::Fabric,
        requests::respond, //
    },
};
use kernel::{
    new_condvar, new_spinlock,
    prelude::*,
    sync::{
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
