// SPDX-License-Identifier: GPL-2.0

//! Posting: `ib_post_send_mad` for one buffer and for a chain, transmission, and the
//! flow-control backlog (Documentation/behaviour.md §1.6, §3.3).

use super::{
    rmpp_send,
    Agent,
    AgentInner,
    Chain,
    ChainError,
    PostError,
    Q_BACKLOG, //
};
use crate::{
    engine::{
        send::{
            BodyBox,
            RecordState,
            SegSend,
            SendBuf,
            SendHandle,
            SendRef,
            SendTrace, //
        },
        transport::{
            Handed,
            SendWr, //
        },
    },
    mad::{
        rmpp::send::Window,
        state::{
            self,
            Admission,
            Event,
            SendFacts,
            SendState,
            WcStatus, //
        },
        wire::{
            self,
            MadHdr, //
        },
        QpType, //
    },
    sys::trace, //
};
use kernel::{
    interrupt::LocalInterruptDisabled,
    prelude::*,
    sync::{
        atomic::Relaxed,
        Arc, //
    },
};

impl Agent {
    /// Hands the send to the transport, with the agent's lock held (`_g`); `checked` if the
    /// transport's [`Transport::check_send`] passed for it just before the lock was taken.
    /// A segmented send's segment is built into its MAD first ([`rmpp_send::load_segment`]).
    /// Returns what the transport did with it, for [`Agent::trace_sent`].
    pub(super) fn transmit(
        &self,
        _g: &mut AgentInner,
        state: &mut RecordState,
        checked: bool,
    ) -> Result<Handed> {
        if state.seg().is_some() {
            rmpp_send::load_segment(state)?;
        }
        let body = state.body.as_ref().ok_or(EINVAL)?;
        let ah = body.ah.ok_or(EINVAL)?;
        // SAFETY: `_g` is the agent's state, which is only ever reached through the guard of
        // its interrupt-disabling lock (`Agent::inner`): local interrupts stay disabled for as
        // long as `_g` is borrowed, which outlives this call.
        let irqs_off = unsafe { LocalInterruptDisabled::assume_disabled() };
        self.transport.post_send(
            self.port,
            SendWr {
                body,
                ah,
                remote_qpn: body.remote_qpn,
                src_qpn: if self.qp_type == QpType::Smi { 0 } else { 1 },
                pkey_index: body.pkey_index,
                gen: state.gen,
                checked,
                irqs_off,
            },
        )
    }

    /// After a successful [`Agent::transmit`]: counts and traces the hand-over if the transport
    /// did it at once (otherwise [`Agent::handed_over`] does, when the device gets it).
    pub(super) fn trace_sent(&self, state: &RecordState, handed: Handed) {
        if handed == Handed::Device {
            self.transmitted.add(1, Relaxed);
            self.trace_send(trace::Ev::SendToDevice, state, 0);
        }
    }

    /// The transport handed a transmission of one of the agent's sends to its device
    /// (transports that queue transmissions report them here, from outside the agent's lock):
    /// counted and traced without the lock, with the send's traced fields as they were when
    /// the transmission was framed.
    pub(crate) fn handed_over(&self, fields: &SendTrace) {
        self.transmitted.add(1, Relaxed);
        self.trace_fields(trace::Ev::SendToDevice, || *fields, 0);
    }

    /// Fires trace event `ev` for the send whose state is `state`, with `status`. Inlined, so
    /// that a site costs one load while nothing traces rmad (the call cost a timeout 46
    /// instructions for its two sites).
    #[inline(always)]
    pub(super) fn trace_send(&self, ev: trace::Ev, state: &RecordState, status: u32) {
        if trace::any_probe() {
            self.trace_send_probed(ev, state, status);
        }
    }

    /// [`Agent::trace_send`] once some event has a probe.
    #[cold]
    #[inline(never)]
    fn trace_send_probed(&self, ev: trace::Ev, state: &RecordState, status: u32) {
        // The fields are read only if the event is enabled.
        self.trace_fields(ev, || state.trace_fields(), status);
    }

    /// Fires trace event `ev` for a send whose traced fields `fields` gives, with `status`.
    fn trace_fields(&self, ev: trace::Ev, fields: impl FnOnce() -> SendTrace, status: u32) {
        trace::fire(ev, || {
            let f = fields();
            trace::Info {
                dev: self.device_name().as_char_ptr(),
                tid: f.tid,
                qp_num: if self.qp_type == QpType::Smi { 0 } else { 1 },
                timeout_ms: f.timeout_ms,
                retries: f.retries,
                attr_id: f.attr_id,
                status: u16::try_from(status).unwrap_or(u16::MAX),
                port: self.port,
                mgmt_class: f.class,
                method: f.method,
            }
        });
    }

    /// The name of the device the agent sends through.
    pub(crate) fn device_name(&self) -> &CStr {
        self.transport.name()
    }

    /// Moves backlog heads to the transport while the flow-control limit allows
    /// (`process_backlog_mads`, Documentation/behaviour.md §3.3).
    /// At most `max` sends move; returns whether more could (the caller takes the lock again
    /// for the next batch). A dead agent dispatches nothing: unregistration flushes its backlog.
    pub(super) fn dispatch_backlog(self: &Arc<Self>, inner: &mut AgentInner, max: u32) -> bool {
        for _ in 0..max {
            if inner.dead
                || inner.backlog == 0
                || inner.fc_send.saturating_add(inner.fc_wait) >= self.sol_fc_max
            {
                return false;
            }
            let Some(rec) = inner.queues.first(Q_BACKLOG) else {
                return false;
            };
            Self::with_state(inner, &rec, |inner, state| {
                // Held back past its deadline: it is not transmitted (rmad.h).
                if self
                    .retry_step(state)
                    .is_some_and(|r| r.deadline_passed(state))
                {
                    self.end_past_deadline(inner, &rec, state);
                    return;
                }
                if self
                    .apply(inner, &rec, state, Event::BacklogDispatch)
                    .is_ok()
                {
                    match self.transmit(inner, state, false) {
                        Ok(handed) => self.trace_sent(state, handed),
                        Err(e) => {
                            let _ = self.apply(inner, &rec, state, Event::BacklogDispatchFailed);
                            // A device that went away (between two batches of its removal's
                            // cancels) flushes the send, like the rest of them.
                            let status = if e == ENODEV {
                                WcStatus::WrFlushErr
                            } else {
                                WcStatus::LocQpOpErr
                            };
                            state.status = Some((status, 0));
                        }
                    }
                }
            });
        }
        true
    }

    /// `ib_post_send_mad` for one buffer. On success the engine owns the buffer until the send
    /// handler gets it back; on failure the buffer comes back with the error and no handler
    /// will run. Never sleeps, never calls a handler; usable with interrupts disabled.
    pub(crate) fn post(buf: SendBuf) -> Result<SendHandle, PostError> {
        // The handle's reference of the record, taken first: it keeps the agent too while the
        // post runs (no reference of the agent of its own: 21 instructions a post).
        let rec = buf.body.rec().clone();
        let gen = rec.agent.post_one(buf, &rec)?;
        Ok(SendHandle { rec, gen })
    }

    /// `ib_post_send_mad` for a chain (`send_buf->next`): posts `bufs` in order and stops at
    /// the first failure, which returns the error, the failed buffer and the buffers after it;
    /// the earlier posts stand.
    ///
    /// Like 7.3, the chain also stops, successfully, after an element that flow control put in the
    /// backlog (Documentation/behaviour.md §1.6 step 7, [QUIRK]). Where C silently drops the rest
    /// of the chain, rmad hands the unposted buffers back in [`Chain::unposted`] so that nothing is
    /// lost.
    #[cfg_attr(
        not(rmad_test),
        expect(dead_code, reason = "Rust API that only the test flavour calls")
    )]
    pub(crate) fn post_chain(bufs: KVec<SendBuf>) -> Result<Chain, ChainError> {
        // Room for every outcome is reserved first, so that no buffer is ever dropped for
        // want of memory.
        let n = bufs.len();
        let (mut posted, mut unposted) = match (
            KVec::<SendHandle>::with_capacity(n, GFP_ATOMIC),
            KVec::<SendBuf>::with_capacity(n, GFP_ATOMIC),
        ) {
            (Ok(p), Ok(u)) => (p, u),
            _ => {
                return Err(ChainError {
                    err: ENOMEM,
                    posted: KVec::new(),
                    failed: None,
                    unposted: bufs,
                })
            }
        };
        let mut failed = None;
        let mut stop = false;
        let mut err = None;
        for buf in bufs {
            if stop {
                let _ = unposted.push_within_capacity(buf);
                continue;
            }
            match Agent::post(buf) {
                Ok(h) => {
                    // Flow control queued it: 7.3 processes no further element.
                    stop = h.agent().send_state(&h) == Some(SendState::Queued);
                    let _ = posted.push_within_capacity(h);
                }
                Err(e) => {
                    err = Some(e.err);
                    failed = Some(e.buf);
                    stop = true;
                }
            }
        }
        match err {
            None => Ok(Chain { posted, unposted }),
            Some(err) => Err(ChainError {
                err,
                posted,
                failed,
                unposted,
            }),
        }
    }

    /// Posts one buffer (`ib_post_send_mad` for one element, Documentation/behaviour.md §1.6):
    /// the checks of the C layer and of its undefined cases ([`Agent::plan_post`]), the
    /// transport's check of the destination, then, under the agent's lock, the post's state and
    /// its transmission or place in the backlog ([`Agent::start_post`]). On failure the buffer
    /// comes back unchanged but for `retries`. `rec` is the buffer's record; returns the
    /// post's generation.
    fn post_one(self: &Arc<Self>, buf: SendBuf, rec: &SendRef) -> Result<u64, PostError> {
        let fail = |err: Error, buf: SendBuf| Err(PostError { err, buf });
        let plan = match self.plan_post(&buf) {
            Ok(plan) => plan,
            Err(e) => return fail(e, buf),
        };
        // The transport's check of the destination, before the agent's lock: it may take the
        // transport's own locks and read the device's tables, and a post is refused for it as
        // the C layer's device refuses the work request.
        let checked = match buf.body.ah {
            Some(ah) => self
                .transport
                .check_send(self.port, &ah, buf.body.pkey_index),
            None => Err(EINVAL),
        };
        if let Err(e) = checked {
            return fail(e, buf);
        }
        let mut body = buf.body;
        body.internal |= plan.control;
        let mut inner = self.lock();
        if inner.dead {
            drop(inner);
            return fail(ESHUTDOWN, SendBuf { body });
        }
        let res = Self::with_state(&mut inner, rec, |inner, state| {
            self.start_post(inner, rec, state, body, plan)
        });
        drop(inner);
        res.or_else(|(err, body)| fail(err, SendBuf { body }))
    }

    /// What a post of `buf` will be, from its MAD and the agent: the checks of
    /// Documentation/behaviour.md §1.6 steps 2 and 3, then those of the cases the C layer
    /// leaves undefined; `EINVAL` if one fails.
    fn plan_post(&self, buf: &SendBuf) -> Result<PostPlan> {
        let hdr = MadHdr::parse(buf.mad()).map_err(|_| EINVAL)?;
        if self.send_handler.is_none()
            || (self.rmpp_version != 0 && !wire::ib_is_mad_class_rmpp(hdr.mgmt_class))
            || buf.body.ah.is_none()
            || buf.body.retries < 0
            || buf.body.timeout_ms < 0
        {
            return Err(EINVAL);
        }
        // On a kernel-RMPP agent an active RMPP MAD is the RMPP layer's (`ib_send_rmpp_mad`):
        // DATA is a segmented send, of the segments its buffer was created with (a buffer
        // created without them cannot be one: EINVAL); an ACK, STOP or ABORT goes out as one
        // MAD and, even when the client posts it, is freed at its completion with no handler
        // call (`ib_process_rmpp_send_wc` returns INTERNAL, §2.10.8).
        let active_type = if self.kernel_rmpp() {
            wire::rmpp_hdr(buf.mad())
                .ok()
                .filter(|h| {
                    wire::ib_get_rmpp_flags(h)
                        .is_ok_and(|f| f & wire::IB_MGMT_RMPP_FLAG_ACTIVE != 0)
                })
                .and_then(|h| h.get(1).copied())
        } else {
            None
        };
        let rmpp_active = active_type == Some(wire::IB_MGMT_RMPP_TYPE_DATA);
        // A segmented send keeps its windows' retry rules; a deadline would be a promise it
        // does not keep (upstream's `ib_set_mad_deadline` refuses one too).
        if rmpp_active && buf.body.retry.deadline_ms != 0 {
            return Err(EINVAL);
        }
        let window = if rmpp_active {
            let pad = buf
                .body
                .seg_count
                .checked_mul(buf.body.seg_size)
                .and_then(|b| b.checked_sub(buf.body.data_len))
                .and_then(|p| u32::try_from(p).ok());
            let count = u32::try_from(buf.body.seg_count).map_err(|_| EINVAL)?;
            let retries = u32::try_from(buf.body.retries).unwrap_or(0);
            Some(Window::new(count, pad.ok_or(EINVAL)?, retries, None).ok_or(EINVAL)?)
        } else {
            None
        };
        // The checks above make both conversions lossless.
        let timeout_ms = u32::try_from(buf.body.timeout_ms).unwrap_or(0);
        Ok(PostPlan {
            hdr,
            window,
            control: active_type.is_some() && !rmpp_active,
            timeout_ms,
            retries: u32::try_from(buf.body.retries).unwrap_or(0),
            fc: state::is_solicited_fc(hdr.mgmt_class, timeout_ms, rmpp_active),
        })
    }

    /// Under the agent's lock: the post `plan` of `body` becomes the send's state (a new
    /// generation), and the send is transmitted or put in the backlog. Returns the post's
    /// generation; on failure the error and the body, and nothing of the post remains.
    fn start_post(
        self: &Arc<Self>,
        inner: &mut AgentInner,
        rec: &SendRef,
        state: &mut RecordState,
        mut body: BodyBox,
        plan: PostPlan,
    ) -> Result<u64, (Error, BodyBox)> {
        if state.facts.state != SendState::Idle {
            // Only reachable through the C API: the buffer is outstanding already.
            return Err((EBUSY, body));
        }
        body.retries = 0;
        // Every post starts the retry rules' clock afresh: a deadline of an earlier post
        // (with other rules, perhaps) is not this one's. Only the rules' own `Posted` step
        // sets it again, for a send that opted into them.
        body.retry_clock = Default::default();
        body.seg = plan.window.map(|mut w| {
            // Segment 1 goes out with the post.
            let _ = w.next();
            SegSend {
                window: w,
                clock: Default::default(),
            }
        });
        plan.begin(state, body);
        inner.queues.track(rec, state);
        let adm = Admission {
            limit: self.sol_fc_max,
            in_use: inner.fc_send.saturating_add(inner.fc_wait),
            backlog_empty: inner.backlog == 0,
        };
        let transmit = Self::post_direct(inner, rec, state, adm)
            || self
                .apply(inner, rec, state, Event::Post(adm))
                .is_ok_and(|outcome| outcome.transmit);
        let handed = if transmit {
            match self.transmit(inner, state, true) {
                Ok(handed) => Some(handed),
                Err(e) => {
                    // T3: the post fails, no handler will run, the client gets the buffer.
                    let _ = self.apply(inner, rec, state, Event::DispatchFailed);
                    inner.queues.untrack(rec);
                    // The body was just put there.
                    return state.body.take().map_or_else(
                        || {
                            pr_err!("failed post lost its buffer\n");
                            Ok(state.gen)
                        },
                        |body| Err((e, body)),
                    );
                }
            }
        } else {
            None
        };
        inner.outstanding = inner.outstanding.saturating_add(1);
        inner.stats.posted = inner.stats.posted.saturating_add(1);
        self.trace_send(trace::Ev::Post, state, 0);
        if let Some(handed) = handed {
            self.trace_sent(state, handed);
        }
        Ok(state.gen)
    }
}

/// What [`Agent::plan_post`] found a post to be, before the agent's lock is taken.
struct PostPlan {
    /// The MAD's header.
    hdr: MadHdr,
    /// A segmented send's window (kernel RMPP, DATA).
    window: Option<Window>,
    /// An RMPP ACK, STOP or ABORT of a kernel-RMPP agent: freed with no handler call.
    control: bool,
    /// The response timeout and retries the client set (both checked not negative).
    timeout_ms: u32,
    retries: u32,
    /// The send counts against the agent's flow-control limit.
    fc: bool,
}

impl PostPlan {
    /// Makes `state` the start of this post of `body`: a new generation, the MAD's identity
    /// as the indexes and traces read it, no status, and the state machine's facts.
    fn begin(&self, state: &mut RecordState, body: BodyBox) {
        state.gen = state.gen.wrapping_add(1);
        state.tid = self.hdr.tid;
        state.class = self.hdr.mgmt_class;
        state.method = self.hdr.method;
        state.attr_id = self.hdr.attr_id;
        state.is_response = self.hdr.is_response();
        state.status = None;
        // Cleared by the receive path before the send handler of the last post could run.
        state.in_recv = false;
        state.facts = SendFacts {
            state: SendState::Idle,
            fc: self.fc,
            timeout_ms: self.timeout_ms,
            retries_left: self.retries,
        };
        state.body = Some(body);
    }
}
