// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_order`: a matched send's receive handler returns before its send
//! handler runs, whatever order the transport reports the response and the send completion
//! in (Documentation/behaviour.md §2.4.4, §8.7).
//!
//! In the C layer one CQ per port carries both, and its worker runs the receive handler
//! before it looks at the next completion, so the send handler of a matched send never runs
//! before the receive handler returned. A transport with a CQ for sends and one for receives,
//! each polled by its own work (the verbs port), can process the send completion of an early
//! response while its receive handler runs. These cases force exactly that interleaving on the
//! loopback fabric: the response is processed before its send's completion (an early
//! response), and the receive handler has the completion processed while it runs
//! ([`Fabric::complete_send_now`]), then gives a send handler every chance to run before it
//! returns.

use crate::{
    capi::{
        devices,
        rmad_free_send_mad,
        rmad_post_send,
        rmad_register_agent,
        rmad_send_buf_context,
        rmad_send_buf_set,
        rmad_unregister_agent,
        RmadRecvWc,
        RmadSendWc, //
    },
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
        transport::RecvMad,
    },
    mad::{
        state::{
            SendState,
            WcStatus, //
        },
        wire,
    },
    testing::{
        capi_client::{
            create_mad,
            is_err,
            lid_ah,
            ptr_errno,
            write_request_header, //
        },
        loopback::Fabric,
        post,
        register_gsi,
        request,
        sleep_ms,
        wait_for,
        Env, //
    },
};
use core::ffi::c_void;
use kernel::{
    new_spinlock,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
        SpinLock, //
    },
    time::{
        Instant,
        Monotonic, //
    },
};

/// The class the requests use: answered by [`Env::responder`].
const CLASS: u8 = wire::IB_MGMT_CLASS_PERF_MGMT;
/// The responder's LID (port 2 of the fabric).
const B: u16 = 2;
/// How long a receive handler gives a send handler to run before it returns: long enough
/// for the engine's workqueue to run it many times over, when it may.
const GRACE_MS: i64 = 300;

/// What the handlers saw, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    /// The receive handler started; whether it had the request (its tag or C buffer).
    RecvStart {
        /// The request was known to the handler (`Some(tag)`, or the C buffer's context).
        request: Option<usize>,
    },
    /// The receive handler is about to return.
    RecvEnd {
        /// The send completion was processed while the handler ran.
        completed: bool,
        /// The send's state then (`None`: the handle was stale).
        state: Option<SendState>,
        /// The request was still known to the handler.
        request: Option<usize>,
        /// A send handler ran while the receive handler did.
        send_ran: bool,
    },
    /// The send handler ran, with this status.
    Send(WcStatus),
}

/// Handlers that record what they see; the receive handler has the send's completion
/// processed while it runs.
#[pin_data]
struct Probe {
    #[pin]
    seen: SpinLock<KVec<Seen>>,
    fabric: Arc<Fabric>,
    send_ran: Atomic<bool>,
}

impl Probe {
    fn new(fabric: &Arc<Fabric>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Probe {
                seen <- new_spinlock!(KVec::new(), "order::Probe"),
                fabric: fabric.clone(),
                send_ran: Atomic::new(false),
            }),
            GFP_KERNEL,
        )
    }

    fn push(&self, s: Seen) {
        // A record lost to memory pressure makes the test fail, not the kernel.
        let _ = self.seen.lock().push(s, GFP_ATOMIC);
    }

    fn seen(&self) -> Result<KVec<Seen>> {
        let g = self.seen.lock();
        let mut v = KVec::with_capacity(g.len(), GFP_ATOMIC)?;
        v.extend_from_slice(&g, GFP_ATOMIC)?;
        Ok(v)
    }

    /// Has the send's completion processed now, then waits [`GRACE_MS`] or until a send
    /// handler ran; returns whether there was a completion to process.
    fn complete_and_wait(&self) -> bool {
        let completed = self.fabric.complete_send_now();
        let start = Instant::<Monotonic>::now();
        while !self.send_ran.load(Relaxed) && start.elapsed().as_millis() < GRACE_MS {
            sleep_ms(5);
        }
        completed
    }

    /// A send handler ran.
    fn on_send(&self, status: WcStatus) {
        self.send_ran.store(true, Relaxed);
        self.push(Seen::Send(status));
    }
}

impl SendHandler for Probe {
    fn send_done(&self, _agent: &Arc<Agent>, _buf: SendBuf, wc: SendCompletion) {
        self.on_send(wc.status);
    }
}

impl RecvHandler for Probe {
    fn recv(&self, agent: &Arc<Agent>, send: Option<&SendHandle>, _mad: RecvMad) {
        self.push(Seen::RecvStart {
            request: send.and_then(SendHandle::tag),
        });
        let completed = self.complete_and_wait();
        self.push(Seen::RecvEnd {
            completed,
            state: send.and_then(|h| agent.send_state(h)),
            request: send.and_then(SendHandle::tag),
            send_ran: self.send_ran.load(Relaxed),
        });
    }
}

/// Holds the fabric and posts with `post_request` (returning its tag); the request reaches
/// the responder on port 2 first, then its response reaches port 1 ahead of the request's
/// send completion: an early response, whose receive handler runs on the fabric's worker.
/// Returns once the fabric has nothing left to process.
fn early_response(env: &Env, post_request: impl FnOnce() -> Result) -> Result<bool> {
    let fabric = env.fabric();
    fabric.set_knobs(|k| k.hold = true);
    post_request()?;
    // Queue: [the send completion, the request at the responder]. The request goes first.
    fabric.promote_recv();
    fabric.release(1);
    // Queue: [the send completion, the responder's send completion, the response].
    let queued = wait_for(|| fabric.pending() >= 3);
    fabric.promote_recv();
    fabric.release(1);
    let done = wait_for(|| fabric.pending() <= 1);
    fabric.set_knobs(|k| k.hold = false);
    Ok(queued && done && wait_for(|| fabric.is_idle()))
}

/// Checks the order a client must see, one thing at a time (a failure's line says which):
/// the receive handler with its request from start to end, the send completion processed
/// meanwhile, then the send handler. Before the fix the send handler ran while the receive
/// handler waited, which then saw its request gone (`Idle`, no tag, a stale C buffer).
macro_rules! assert_order {
    ($seen:expr, $tag:expr) => {{
        let seen: &[Seen] = $seen;
        assert_eq!(seen.len(), 3);
        assert_eq!(seen.first(), Some(&Seen::RecvStart { request: Some($tag) }));
        let end = seen.get(1);
        assert!(matches!(end, Some(Seen::RecvEnd { completed: true, .. })));
        assert!(matches!(end, Some(Seen::RecvEnd { send_ran: false, .. })));
        assert!(matches!(end, Some(Seen::RecvEnd { request: Some(t), .. }) if *t == $tag));
        assert!(matches!(
            end,
            Some(Seen::RecvEnd {
                state: Some(SendState::Done),
                ..
            })
        ));
        assert_eq!(seen.get(2), Some(&Seen::Send(WcStatus::Success)));
    }};
}

/// The C client's handlers: the same records, through the exported API.
///
/// # Safety
///
/// `wc` is valid for the call and its context is a live [`Probe`].
unsafe extern "C" fn c_send(_agent: *mut c_void, wc: *mut RmadSendWc) {
    // SAFETY: rmad passes a valid completion for the duration of the call.
    let wc = unsafe { &*wc };
    // SAFETY: The context is a `Probe` that the test keeps alive past unregistration.
    let p = unsafe { &*wc.context.cast::<Probe>() };
    // The client frees the buffer: its handle goes stale now.
    let _ = rmad_free_send_mad(wc.send_buf);
    p.on_send(WcStatus::from_code(
        u32::try_from(wc.status).unwrap_or(u32::MAX),
    ));
}

/// The C client's receive handler: the request's buffer and its context while it runs.
///
/// # Safety
///
/// As for [`c_send`], with a receive completion.
unsafe extern "C" fn c_recv(_agent: *mut c_void, buf: *mut c_void, wc: *const RmadRecvWc) {
    // SAFETY: rmad passes a valid receive completion for the duration of the call.
    let wc = unsafe { &*wc };
    // SAFETY: As in `c_send`.
    let p = unsafe { &*wc.context.cast::<Probe>() };
    // The buffer's context is what the client set at post: readable while the send is the
    // engine's, NULL through a stale handle.
    let context = |b: *mut c_void| (!b.is_null()).then(|| rmad_send_buf_context(b).addr());
    p.push(Seen::RecvStart {
        request: context(buf).filter(|c| *c != 0),
    });
    let completed = p.complete_and_wait();
    p.push(Seen::RecvEnd {
        completed,
        // The C API has no state to read: the test compares it with the Rust API's.
        state: Some(SendState::Done),
        request: context(buf).filter(|c| *c != 0),
        send_ran: p.send_ran.load(Relaxed),
    });
}

#[kernel::prelude::kunit_tests(rmad_order)]
mod tests {
    use super::*;

    #[test]
    fn early_response_receive_handler_returns_before_send_handler() -> Result {
        // The Rust API: the receive handler sees its request (the tag) from start to end,
        // the send completion processed meanwhile decides the send (Done), and its send
        // handler runs only after the receive handler returned.
        let env = Env::new()?;
        let probe = Probe::new(env.fabric())?;
        let a = register_gsi(&env.engine, &env.transport, 1, &probe, None)?;
        let (b, _brec) = env.responder(2, CLASS)?;
        let settled = early_response(&env, || {
            post(request(&a, CLASS, 31, B, 5000, 0)?).map(|_| ())
        })?;
        let ran = wait_for(|| probe.send_ran.load(Relaxed));
        let seen = probe.seen()?;
        let early = a.stats().early_responses;
        a.unregister()?;
        b.unregister()?;
        assert!(settled);
        assert!(ran);
        assert_eq!(early, 1);
        assert_order!(&seen, 31);
        Ok(())
    }

    #[test]
    fn early_response_capi_send_buf_valid_until_receive_handler_returns() -> Result {
        // The C API: the receive handler gets the request's buffer, whose context it can read
        // until it returns; the send handler, which frees the buffer, runs after. Before the
        // fix the send handler ran (and freed the buffer) while the receive handler waited.
        let env = Env::new()?;
        let reg = devices::register(c"lb_order", 2, env.engine.clone(), env.transport.clone())?;
        let probe = Probe::new(env.fabric())?;
        let (b, _brec) = env.responder(2, CLASS)?;
        // SAFETY: The name is NUL-terminated; the handlers match the C prototypes; the
        // context outlives the agent (unregistered below, before `probe` goes).
        let agent = unsafe {
            rmad_register_agent(
                c"lb_order".as_char_ptr(),
                1,
                1,
                core::ptr::null(),
                0,
                Some(c_send),
                Some(c_recv),
                Arc::as_ptr(&probe).cast_mut().cast(),
                0,
            )
        };
        if is_err(agent) {
            return Err(Error::from_errno(ptr_errno(agent)));
        }
        let tag = 32usize;
        let settled = early_response(&env, || {
            let buf = create_mad(agent, kernel::bindings::GFP_KERNEL);
            if is_err(buf) {
                return Err(ENOMEM);
            }
            write_request_header(agent, buf, wire::IB_MGMT_METHOD_GET, 32)?;
            let ah = lid_ah(B);
            let mut post_id = 0u64;
            // SAFETY: The client owns `buf`; `ah` and `post_id` are valid. The context is a
            // number the handlers compare, never dereferenced.
            kernel::error::to_result(unsafe {
                rmad_send_buf_set(buf, &ah, 5000, 0, core::ptr::without_provenance_mut(tag))
            })?;
            // SAFETY: As above.
            kernel::error::to_result(unsafe { rmad_post_send(buf, &mut post_id) })
        })?;
        let ran = wait_for(|| probe.send_ran.load(Relaxed));
        let seen = probe.seen()?;
        let unregistered = rmad_unregister_agent(agent);
        b.unregister()?;
        drop(reg);
        assert!(settled);
        assert!(ran);
        assert_eq!(unregistered, 0);
        assert_order!(&seen, tag);
        Ok(())
    }
}
