// SPDX-License-Identifier: GPL-2.0

//! Posting: `ib_post_send_mad` for one buffer and for a chain, transmission, and the
//! flow-control backlog (Documentation/behaviour.md §1.6, §3.3).

use super::{
    queues::first_in,
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
            RecordState,
            SegSend,
            SendBuf,
            SendHandle,
            SendRecord,
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
        rec: &Arc<SendRecord>,
        st: &mut RecordState,
        checked: bool,
    ) -> Result<Handed> {
        if st.seg().is_some() {
            rmpp_send::load_segment(st)?;
        }
        let body = st.body.as_ref().ok_or(EINVAL)?;
        let ah = body.ah.ok_or(EINVAL)?;
        self.transport.post_send(
            self.port,
            SendWr {
                mad: &body.mad,
                ah,
                remote_qpn: body.remote_qpn,
                src_qpn: if self.qp_type == QpType::Smi { 0 } else { 1 },
                pkey_index: body.pkey_index,
                rec,
                gen: st.gen,
                checked,
            },
        )
    }

    /// After a successful [`Agent::transmit`]: counts and traces the hand-over if the transport
    /// did it at once (otherwise [`Agent::handed_over`] does, when the device gets it).
    pub(super) fn trace_sent(&self, st: &RecordState, handed: Handed) {
        if handed == Handed::Device {
            self.transmitted.add(1, Relaxed);
            self.trace_send(trace::Ev::SendToDevice, st, 0);
        }
    }

    /// The transport handed a transmission of one of the agent's sends to its device
    /// (transports that queue transmissions report them here, from outside the agent's lock):
    /// counted and traced without the lock, with the send's traced fields as they were when
    /// the transmission was framed.
    pub(crate) fn handed_over(&self, fields: &SendTrace) {
        self.transmitted.add(1, Relaxed);
        self.trace_fields(trace::Ev::SendToDevice, fields, 0);
    }

    /// Fires trace event `ev` for the send whose state is `st`, with `status`.
    pub(super) fn trace_send(&self, ev: trace::Ev, st: &RecordState, status: u32) {
        self.trace_fields(ev, &st.trace_fields(), status);
    }

    /// Fires trace event `ev` for a send whose traced fields are `f`, with `status`.
    fn trace_fields(&self, ev: trace::Ev, f: &SendTrace, status: u32) {
        trace::fire(ev, || trace::Info {
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
    pub(super) fn dispatch_backlog(self: &Arc<Self>, g: &mut AgentInner, max: u32) -> bool {
        for _ in 0..max {
            if g.dead || g.backlog == 0 || g.fc_send.saturating_add(g.fc_wait) >= self.sol_fc_max {
                return false;
            }
            let Some(rec) = first_in(g, Q_BACKLOG) else {
                return false;
            };
            Self::with_state(g, &rec, |g, st| {
                if self.apply(g, &rec, st, Event::BacklogDispatch).is_ok() {
                    match self.transmit(g, &rec, st, false) {
                        Ok(handed) => self.trace_sent(st, handed),
                        Err(e) => {
                            let _ = self.apply(g, &rec, st, Event::BacklogDispatchFailed);
                            // A device that went away (between two batches of its removal's
                            // cancels) flushes the send, like the rest of them.
                            let status = if e == ENODEV {
                                WcStatus::WrFlushErr
                            } else {
                                WcStatus::LocQpOpErr
                            };
                            st.status = Some((status, 0));
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
        let agent = buf.rec.agent.clone();
        agent.post_one(buf)
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
    /// the checks of the C layer and of its undefined cases, the transport's check of the
    /// destination, then, under the agent's lock, the post's state and its transmission or
    /// place in the backlog. On failure the buffer comes back unchanged but for `retries`.
    pub(super) fn post_one(self: &Arc<Self>, buf: SendBuf) -> Result<SendHandle, PostError> {
        let fail = |err: Error, buf: SendBuf| Err(PostError { err, buf });
        let Ok(hdr) = MadHdr::parse(buf.mad()) else {
            return fail(EINVAL, buf);
        };
        // Documentation/behaviour.md §1.6 steps 2 and 3, then the cases the C layer leaves
        // undefined.
        if self.send_handler.is_none()
            || (self.rmpp_version != 0 && !wire::ib_is_mad_class_rmpp(hdr.mgmt_class))
            || buf.body.ah.is_none()
            || buf.body.retries < 0
            || buf.body.timeout_ms < 0
        {
            return fail(EINVAL, buf);
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
        let window = if rmpp_active {
            let pad = buf
                .body
                .seg_count
                .checked_mul(buf.body.seg_size)
                .and_then(|b| b.checked_sub(buf.body.data_len))
                .and_then(|p| u32::try_from(p).ok());
            let count = u32::try_from(buf.body.seg_count).ok();
            let retries = u32::try_from(buf.body.retries).unwrap_or(0);
            match (count, pad) {
                (Some(c), Some(p)) => match Window::new(c, p, retries, None) {
                    Some(w) => Some(w),
                    None => return fail(EINVAL, buf),
                },
                _ => return fail(EINVAL, buf),
            }
        } else {
            None
        };
        let control = active_type.is_some() && !rmpp_active;
        // The checks above make both conversions lossless.
        let timeout_ms = u32::try_from(buf.body.timeout_ms).unwrap_or(0);
        let retries = u32::try_from(buf.body.retries).unwrap_or(0);
        let fc = state::is_solicited_fc(hdr.mgmt_class, timeout_ms, rmpp_active);

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
        let SendBuf { rec, mut body } = buf;
        body.internal |= control;
        let mut g = self.lock();
        if g.dead {
            drop(g);
            return fail(ESHUTDOWN, SendBuf { rec, body });
        }
        let res = Self::with_state(&mut g, &rec, |g, st| {
            if st.facts.state != SendState::Idle {
                // Only reachable through the C API: the buffer is outstanding already.
                return Err((EBUSY, body));
            }
            body.retries = 0;
            body.seg = window.map(|mut w| {
                // Segment 1 goes out with the post.
                let _ = w.next();
                SegSend {
                    window: w,
                    clock: Default::default(),
                }
            });
            st.gen = st.gen.wrapping_add(1);
            st.tid = hdr.tid;
            st.class = hdr.mgmt_class;
            st.method = hdr.method;
            st.attr_id = hdr.attr_id;
            st.is_response = hdr.is_response();
            st.status = None;
            // Cleared by the receive path before the send handler of the last post could run.
            st.in_recv = false;
            st.facts = SendFacts {
                state: SendState::Idle,
                fc,
                timeout_ms,
                retries_left: retries,
            };
            st.body = Some(body);
            Self::track(g, &rec, st);
            let adm = Admission {
                limit: self.sol_fc_max,
                in_use: g.fc_send.saturating_add(g.fc_wait),
                backlog_empty: g.backlog == 0,
            };
            let transmit = self
                .apply(g, &rec, st, Event::Post(adm))
                .is_ok_and(|o| o.transmit);
            let handed = if transmit {
                match self.transmit(g, &rec, st, true) {
                    Ok(handed) => Some(handed),
                    Err(e) => {
                        // T3: the post fails, no handler will run, the client gets the buffer.
                        let _ = self.apply(g, &rec, st, Event::DispatchFailed);
                        Self::untrack(g, &rec);
                        return match st.body.take() {
                            Some(body) => Err((e, body)),
                            None => Ok(None),
                        };
                    }
                }
            } else {
                None
            };
            g.outstanding = g.outstanding.saturating_add(1);
            g.stats.posted = g.stats.posted.saturating_add(1);
            self.trace_send(trace::Ev::Post, st, 0);
            if let Some(handed) = handed {
                self.trace_sent(st, handed);
            }
            Ok(Some(st.gen))
        });
        drop(g);
        match res {
            Ok(Some(gen)) => Ok(SendHandle { rec, gen }),
            // The body is always recovered above; this arm only keeps the types honest.
            Ok(None) => {
                pr_err!("failed post lost its buffer\n");
                Ok(SendHandle { rec, gen: 0 })
            }
            Err((err, body)) => fail(err, SendBuf { rec, body }),
        }
    }
}
