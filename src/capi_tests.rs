// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_capi`: the exported C API as a hostile or careless C client uses it, on
//! `rxe0` (which the test VM creates before loading rmad).
//!
//! Its promises under test: a handle is never given out twice, so a stale agent, buffer or
//! post handle is an error forever and never acts on a newer object; a buffer re-posted from
//! its own send handler stays cancellable; unregistering from the agent's own receive handler
//! is refused; the atomic-safe calls work from a timer and an hrtimer under lockdep; and a
//! received MAD kept by its handler stays the client's, past unregistration, until freed.

use crate::capi::{
    rmad_agent_context,
    rmad_agent_hi_tid,
    rmad_cancel_mad,
    rmad_cancel_post,
    rmad_create_send_mad,
    rmad_free_recv_mad,
    rmad_free_send_mad,
    rmad_keep_recv_mad,
    rmad_modify_mad,
    rmad_modify_post,
    rmad_port_gid,
    rmad_post_send,
    rmad_post_send_mad,
    rmad_recv_buf_ah,
    rmad_recv_buf_mad,
    rmad_register_agent,
    rmad_resolve_ah,
    rmad_send_buf_context,
    rmad_send_buf_mad,
    rmad_send_buf_retries,
    rmad_send_buf_set,
    rmad_unregister_agent,
    RmadAh,
    RmadRecvWc,
    RmadSendWc, //
};
use core::ffi::c_void;
use kernel::{
    ffi::c_int,
    new_condvar, new_spinlock,
    prelude::*,
    sync::{
        atomic::{
            Acquire,
            Atomic,
            Relaxed,
            Release, //
        },
        Arc,
        CondVar,
        SpinLock, //
    },
    time::{
        Delta,
        Instant,
        Monotonic, //
    },
};

/// `IB_WC_SUCCESS`.
pub(crate) const WC_SUCCESS: i32 = 0;
/// `IB_WC_WR_FLUSH_ERR`.
pub(crate) const WC_FLUSH: i32 = 5;
/// Methods used: GET is answered by ib_core (status 0x000C), SEND never is.
const GET: u8 = 0x01;
const SEND: u8 = 0x03;

/// `struct rmad_atomic_result` of `test_atomic.h`.
#[repr(C)]
#[derive(Default, Debug)]
struct AtomicResult {
    hardirq: c_int,
    softirq: c_int,
    irqs_off: c_int,
    post: c_int,
    modify: c_int,
    cancel: c_int,
    cancel_again: c_int,
    free_busy: c_int,
    create: c_int,
    mad_ok: c_int,
    free: c_int,
    stale_free: c_int,
    modify_mad: c_int,
    set: c_int,
    context_ok: c_int,
    retries: c_int,
    agent_context_ok: c_int,
    hi_tid: u32,
    send_len: u32,
    recv_mad_ok: c_int,
    recv_free: c_int,
}

extern "C" {
    fn rmad_test_call_from(
        r#where: c_int,
        agent: *mut c_void,
        buf: *mut c_void,
        recv: *mut c_void,
        res: *mut AtomicResult,
    ) -> c_int;
}

/// What the probe's handlers do besides recording.
#[derive(Clone, Copy, Default)]
pub(crate) struct Behaviour {
    /// Free every completed buffer in the send handler.
    pub(crate) free: bool,
    /// Unregister the agent from inside its receive handler.
    pub(crate) unregister_in_recv: bool,
    /// Keep the first received MAD past its handler.
    pub(crate) keep_first_recv: bool,
    /// Keep every received MAD past its handler.
    pub(crate) keep_all_recvs: bool,
}

/// One receive-handler call: the MAD's handle, whether the packet had a GRH, and the result
/// of keeping it (0 when not asked to).
type RecvCall = (u64, u8, i32);

/// One send-handler call: buffer handle, post id, status.
pub(crate) type SendCall = (u64, u64, i32);

/// The probe's records.
struct ProbeInner {
    sends: KVec<SendCall>,
    recvs: usize,
    recv_calls: KVec<RecvCall>,
    /// Results of calls made inside handlers (re-post, unregister).
    results: KVec<i32>,
    /// Post ids of re-posts made inside the send handler.
    reposts: KVec<u64>,
    /// The next successful completion re-posts its buffer once, with a long timeout.
    repost_armed: bool,
}

/// A C client's handlers, recording what they see; its address is the agent's context.
#[pin_data]
pub(crate) struct Probe {
    #[pin]
    inner: SpinLock<ProbeInner>,
    #[pin]
    changed: CondVar,
    behaviour: Behaviour,
    /// Where reposted buffers go.
    ah: RmadAh,
}

impl Probe {
    /// A probe that behaves as `behaviour` says and re-posts to `ah`.
    pub(crate) fn new(behaviour: Behaviour, ah: RmadAh) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                inner <- new_spinlock!(ProbeInner {
                    sends: KVec::new(),
                    recvs: 0,
                    recv_calls: KVec::new(),
                    results: KVec::new(),
                    reposts: KVec::new(),
                    repost_armed: false,
                }),
                changed <- new_condvar!("Probe::changed"),
                behaviour,
                ah,
            }),
            GFP_KERNEL,
        )
    }

    /// Waits until `cond` holds for the records, at most [`crate::testing::WAIT_MS`].
    fn wait(&self, cond: impl Fn(&ProbeInner) -> bool) -> bool {
        crate::testing::wait_locked(&self.inner, &self.changed, cond)
    }

    /// Waits for at least `n` send-handler calls.
    pub(crate) fn wait_sends(&self, n: usize) -> bool {
        self.wait(|g| g.sends.len() >= n)
    }

    /// A copy of the send-handler calls.
    pub(crate) fn sends(&self) -> Result<KVec<SendCall>> {
        let g = self.inner.lock();
        let mut v = KVec::with_capacity(g.sends.len(), GFP_ATOMIC)?;
        v.extend_from_slice(&g.sends, GFP_ATOMIC)?;
        Ok(v)
    }

    /// Results of calls made inside handlers.
    fn results(&self) -> Result<KVec<i32>> {
        let g = self.inner.lock();
        let mut v = KVec::with_capacity(g.results.len(), GFP_ATOMIC)?;
        v.extend_from_slice(&g.results, GFP_ATOMIC)?;
        Ok(v)
    }

    /// The context pointer for the C API.
    fn ctx(self: &Arc<Self>) -> *mut c_void {
        Arc::as_ptr(self).cast_mut().cast()
    }

    fn record_result(&self, r: c_int) {
        let _ = self.inner.lock().results.push(r, GFP_ATOMIC);
    }

    fn on_send(&self, wc: &RmadSendWc) {
        let buf = wc.send_buf;
        let repost = {
            let mut g = self.inner.lock();
            let armed = g.repost_armed && wc.status == WC_SUCCESS;
            if armed {
                g.repost_armed = false;
            }
            armed
        };
        if repost {
            let mut post = 0u64;
            // SAFETY: `buf` is the client's again (send handler); `ah` is valid.
            let r = unsafe {
                let _ = rmad_send_buf_set(buf, &self.ah, 60_000, 0, core::ptr::null_mut());
                rmad_post_send(buf, &mut post)
            };
            let mut g = self.inner.lock();
            let _ = g.results.push(r, GFP_ATOMIC);
            let _ = g.reposts.push(post, GFP_ATOMIC);
        } else if self.behaviour.free {
            let _ = rmad_free_send_mad(buf);
        }
        let mut g = self.inner.lock();
        let _ = g.sends.push(
            (
                u64::try_from(buf.addr()).unwrap_or(0),
                wc.post_id,
                wc.status,
            ),
            GFP_ATOMIC,
        );
        self.changed.notify_all();
    }

    fn on_recv(&self, agent: *mut c_void, wc: &RmadRecvWc) {
        if self.behaviour.unregister_in_recv {
            self.record_result(rmad_unregister_agent(agent));
        }
        let first = self.inner.lock().recvs == 0;
        let keep = self.behaviour.keep_all_recvs || (self.behaviour.keep_first_recv && first);
        let kept = if keep {
            rmad_keep_recv_mad(wc.recv_buf)
        } else {
            0
        };
        let mut g = self.inner.lock();
        let call = (num(wc.recv_buf), wc.has_grh, kept);
        // A record that does not fit is missing from `recv_calls`, which the test sees.
        let _ = g.recv_calls.push(call, GFP_ATOMIC);
        g.recvs = g.recvs.saturating_add(1);
        self.changed.notify_all();
    }
}

/// The send handler of probe agents.
///
/// # Safety
///
/// `wc` must point to a completion that is valid for the call, whose context is a live
/// [`Probe`] (rmad calls it so for agents made by [`c_agent`]).
unsafe extern "C" fn probe_send(_agent: *mut c_void, wc: *mut RmadSendWc) {
    // SAFETY: rmad passes a valid completion for the duration of the call.
    let wc = unsafe { &*wc };
    // SAFETY: The context is a `Probe` that the test keeps alive until unregistration returns.
    let p = unsafe { &*wc.context.cast::<Probe>() };
    p.on_send(wc);
}

/// The receive handler of probe agents.
///
/// # Safety
///
/// As for [`probe_send`], with a receive completion.
unsafe extern "C" fn probe_recv(agent: *mut c_void, _buf: *mut c_void, wc: *const RmadRecvWc) {
    // SAFETY: rmad passes a valid receive completion for the duration of the call.
    let wc = unsafe { &*wc };
    // SAFETY: As in `probe_send`.
    let p = unsafe { &*wc.context.cast::<Probe>() };
    p.on_recv(agent, wc);
}

/// The address of QP1 of rxe0 port 1, through its IPv4-mapped GID (index 1).
pub(crate) fn rxe_ah() -> Result<RmadAh> {
    let mut ah = RmadAh {
        dlid: 0,
        src_path_bits: 0,
        has_grh: 1,
        sgid_index: 1,
        dgid: [0; 16],
        hop_limit: 0,
        traffic_class: 0,
        sl: 0,
        flow_label: 0,
    };
    // SAFETY: The name is NUL-terminated; `dgid` has 16 bytes.
    kernel::error::to_result(unsafe {
        rmad_port_gid(c"rxe0".as_char_ptr(), 1, 1, ah.dgid.as_mut_ptr())
    })?;
    Ok(ah)
}

/// A handle as a number.
pub(crate) fn num(p: *mut c_void) -> u64 {
    u64::try_from(p.addr()).unwrap_or(0)
}

/// A number as the handle C sees.
fn to_handle(h: u64) -> *mut c_void {
    core::ptr::without_provenance_mut(usize::try_from(h).unwrap_or(0))
}

/// Whether a returned pointer is an `ERR_PTR` (or NULL).
pub(crate) fn is_err(p: *mut c_void) -> bool {
    p.is_null() || p.addr() >= usize::MAX - 4095
}

/// The errno of an `ERR_PTR`.
pub(crate) fn ptr_errno(p: *mut c_void) -> i32 {
    0i32.saturating_sub(
        i32::try_from(usize::MAX - p.addr())
            .unwrap_or(0)
            .saturating_add(1),
    )
}

/// What [`churn`] saw.
pub(crate) struct Churn {
    /// New handles equal to the stale one.
    pub(crate) aliases: usize,
    /// Calls through the stale handle that did not fail, and frees that did.
    pub(crate) wrong: usize,
    /// Creates that failed.
    pub(crate) failed: usize,
    /// How long the cycles took.
    pub(crate) ms: i64,
}

/// `cycles` create/free cycles on `agent`, with the freed handle `stale` checked in each:
/// no new handle may equal it and every call through it must fail.
pub(crate) fn churn(agent: *mut c_void, stale: *mut c_void, cycles: usize) -> Churn {
    let mut c = Churn {
        aliases: 0,
        wrong: 0,
        failed: 0,
        ms: 0,
    };
    let start = Instant::<Monotonic>::now();
    for i in 0..cycles {
        let h = rmad_create_send_mad(agent, 1, 0, 0, 24, 232, kernel::bindings::GFP_KERNEL, 1);
        if is_err(h) {
            c.failed += 1;
            continue;
        }
        c.aliases += usize::from(h == stale);
        c.wrong += usize::from(rmad_free_send_mad(stale) != EINVAL.to_errno());
        c.wrong += usize::from(!rmad_send_buf_mad(stale).is_null());
        c.wrong += usize::from(rmad_cancel_mad(stale) != EINVAL.to_errno());
        c.wrong += usize::from(rmad_free_send_mad(h) != 0);
        if i % 1024 == 0 {
            crate::wq::cond_resched();
        }
    }
    c.ms = start.elapsed().as_millis();
    c
}

/// Registers a GSI agent on rxe0 port 1 whose handlers are `probe`'s.
pub(crate) fn c_agent(probe: &Arc<Probe>) -> Result<*mut c_void> {
    // SAFETY: The name is NUL-terminated; the handlers match the C prototypes; the context
    // outlives the agent (the test unregisters before dropping the probe).
    let a = unsafe {
        rmad_register_agent(
            c"rxe0".as_char_ptr(),
            1,
            1,
            core::ptr::null(),
            0,
            Some(probe_send),
            Some(probe_recv),
            probe.ctx(),
            0,
        )
    };
    if is_err(a) {
        return Err(Error::from_errno(ptr_errno(a)));
    }
    Ok(a)
}

/// A class-0x04 request with `method` from `agent` to QP1 of rxe0 port 1.
pub(crate) fn c_request(
    agent: *mut c_void,
    ah: &RmadAh,
    lo: u32,
    method: u8,
    timeout_ms: i32,
) -> Result<*mut c_void> {
    let b = rmad_create_send_mad(agent, 1, 0, 0, 24, 232, kernel::bindings::GFP_KERNEL, 1);
    if is_err(b) {
        return Err(ENOMEM);
    }
    let mad = rmad_send_buf_mad(b).cast::<u8>();
    if mad.is_null() {
        return Err(EINVAL);
    }
    let tid = (u64::from(rmad_agent_hi_tid(agent)) << 32) | u64::from(lo);
    let mut hdr = [1u8, 0x04, 1, method, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    if let Some(t) = hdr.get_mut(8..16) {
        t.copy_from_slice(&tid.to_be_bytes());
    }
    // SAFETY: The client owns the buffer, whose MAD is 256 bytes long; `ah` is valid.
    let r = unsafe {
        core::ptr::copy_nonoverlapping(hdr.as_ptr(), mad, hdr.len());
        rmad_send_buf_set(b, ah, timeout_ms, 0, core::ptr::null_mut())
    };
    kernel::error::to_result(r)?;
    Ok(b)
}

/// Every call on a stale buffer handle fails; returns how many did not.
fn stale_buf_calls_succeeding(b: *mut c_void) -> usize {
    let mut post = 0u64;
    // SAFETY: Every pointer argument is NULL or valid; the handle is not dereferenced.
    let results = unsafe {
        [
            rmad_free_send_mad(b) == EINVAL.to_errno(),
            rmad_send_buf_mad(b).is_null(),
            rmad_send_buf_set(b, core::ptr::null(), 10, 0, core::ptr::null_mut())
                == EINVAL.to_errno(),
            rmad_send_buf_context(b).is_null(),
            rmad_send_buf_retries(b) == EINVAL.to_errno(),
            rmad_post_send_mad(b, core::ptr::null_mut()) == EINVAL.to_errno(),
            rmad_post_send(b, &mut post) == EINVAL.to_errno(),
            rmad_modify_mad(b, 10) == EINVAL.to_errno(),
            rmad_cancel_mad(b) == EINVAL.to_errno(),
            rmad_cancel_post(b, 1) == EINVAL.to_errno(),
            rmad_modify_post(b, 1, 10) == EINVAL.to_errno(),
        ]
    };
    results.iter().filter(|ok| !**ok).count()
}

#[kernel::prelude::kunit_tests(rmad_capi)]
mod tests {
    use super::*;

    #[test]
    fn buffer_handle_never_aliases() -> Result {
        let ah = rxe_ah()?;
        let probe = Probe::new(Behaviour::default(), ah)?;
        let a = c_agent(&probe)?;
        let mut aliases = 0usize;
        let mut wrong = 0usize;
        for i in 0..20u32 {
            let h1 = c_request(a, &ah, i, SEND, 0)?;
            let freed = rmad_free_send_mad(h1);
            let h2 = c_request(a, &ah, i, SEND, 0)?;
            aliases += usize::from(h1 == h2);
            wrong += usize::from(freed != 0);
            wrong += stale_buf_calls_succeeding(h1);
            // The newer buffer is untouched by the calls on the stale one.
            wrong += usize::from(rmad_send_buf_mad(h2).is_null());
            wrong += usize::from(rmad_free_send_mad(h2) != 0);
        }
        let unreg = rmad_unregister_agent(a);
        assert_eq!(aliases, 0);
        assert_eq!(wrong, 0);
        assert_eq!(unreg, 0);
        Ok(())
    }

    #[test]
    fn agent_handle_never_aliases() -> Result {
        let ah = rxe_ah()?;
        let probe = Probe::new(Behaviour::default(), ah)?;
        let mut aliases = 0usize;
        let mut wrong = 0usize;
        for _ in 0..20 {
            let a1 = c_agent(&probe)?;
            wrong += usize::from(rmad_unregister_agent(a1) != 0);
            let a2 = c_agent(&probe)?;
            aliases += usize::from(a1 == a2);
            wrong += usize::from(rmad_unregister_agent(a1) != EINVAL.to_errno());
            wrong += usize::from(rmad_agent_hi_tid(a1) != 0);
            wrong += usize::from(!rmad_agent_context(a1).is_null());
            let b = rmad_create_send_mad(a1, 1, 0, 0, 24, 232, kernel::bindings::GFP_KERNEL, 1);
            wrong += usize::from(!is_err(b) || ptr_errno(b) != EINVAL.to_errno());
            // The newer agent still works.
            wrong += usize::from(rmad_agent_hi_tid(a2) == 0);
            wrong += usize::from(rmad_agent_context(a2) != probe.ctx());
            wrong += usize::from(rmad_unregister_agent(a2) != 0);
        }
        assert_eq!(aliases, 0);
        assert_eq!(wrong, 0);
        Ok(())
    }

    #[test]
    fn old_post_never_acts_on_a_repost() -> Result {
        let ah = rxe_ah()?;
        let probe = Probe::new(Behaviour::default(), ah)?;
        let a = c_agent(&probe)?;
        let b = c_request(a, &ah, 1, SEND, 60_000)?;
        let (mut p1, mut p2) = (0u64, 0u64);
        // SAFETY: `p1` is valid for a write.
        let r1 = unsafe { rmad_post_send(b, &mut p1) };
        let c1 = rmad_cancel_post(b, p1);
        let flushed = probe.wait_sends(1);
        // SAFETY: As above.
        let r2 = unsafe { rmad_post_send(b, &mut p2) };
        // The first post is over: its id must not reach the second.
        let stale_cancel = rmad_cancel_post(b, p1);
        let stale_modify = rmad_modify_post(b, p1, 10);
        let c2 = rmad_cancel_post(b, p2);
        let both = probe.wait_sends(2);
        let sends = probe.sends()?;
        pr_info!(
            "capi: post {} cancel {} re-post {} cancel {}; stale {} {}; completions {:?}\n",
            r1,
            c1,
            r2,
            c2,
            stale_cancel,
            stale_modify,
            &sends[..]
        );
        let free = rmad_free_send_mad(b);
        let unreg = rmad_unregister_agent(a);
        assert_eq!((r1, c1, r2, c2), (0, 0, 0, 0));
        assert!(flushed && both);
        assert!(p1 != p2);
        assert_eq!(stale_cancel, EINVAL.to_errno());
        assert_eq!(stale_modify, EINVAL.to_errno());
        assert_eq!(sends.len(), 2);
        assert!(sends.iter().all(|s| s.2 == WC_FLUSH));
        assert!(sends.first().map(|s| s.1) == Some(p1) && sends.get(1).map(|s| s.1) == Some(p2));
        assert_eq!((free, unreg), (0, 0));
        Ok(())
    }

    #[test]
    fn stale_handle_survives_many_create_free_cycles() -> Result {
        let ah = rxe_ah()?;
        let probe = Probe::new(Behaviour::default(), ah)?;
        let a = c_agent(&probe)?;
        let stale = c_request(a, &ah, 0, SEND, 0)?;
        let freed = rmad_free_send_mad(stale);
        let c = churn(a, stale, CYCLES);
        let unreg = rmad_unregister_agent(a);
        pr_info!(
            "capi: {} create/free cycles in {} ms, {} aliases, {} wrong results\n",
            CYCLES,
            c.ms,
            c.aliases,
            c.wrong
        );
        let (aliases, wrong) = (c.aliases, c.wrong + c.failed);
        assert_eq!(freed, 0);
        assert_eq!(aliases, 0);
        assert_eq!(wrong, 0);
        assert_eq!(unreg, 0);
        Ok(())
    }

    /// Create/free cycles of [`stale_handle_survives_many_create_free_cycles`]. Each costs
    /// about 1.5 ms in the test VM (KASAN, kmemleak and lockdep record every allocation), and
    /// KUnit cases stay well below the hung-task detector's 30 s; `rmad_handles` runs a million
    /// cycles of the handle table alone, and the stress driver more of these.
    const CYCLES: usize = 5_000;

    #[test]
    fn repost_from_handler_stays_cancellable() -> Result {
        let ah = rxe_ah()?;
        let probe = Probe::new(Behaviour::default(), ah)?;
        let a = c_agent(&probe)?;
        let b = c_request(a, &ah, 7, SEND, 0)?;
        let mut not_cancellable = 0usize;
        let mut lost = 0usize;
        let mut stale_ok = 0usize;
        const N: usize = 500;
        for i in 0..N {
            probe.inner.lock().repost_armed = true;
            // SAFETY: Plain call.
            let _ = unsafe { rmad_send_buf_set(b, &ah, 0, 0, core::ptr::null_mut()) };
            let mut p0 = 0u64;
            // SAFETY: `p0` is valid for a write.
            if unsafe { rmad_post_send(b, &mut p0) } != 0 {
                lost += 1;
                break;
            }
            // The handler re-posts it (long timeout) when the first post completes.
            let want = (i + 1) * 2;
            if !probe.wait(|g| g.reposts.len() > i) {
                lost += 1;
                break;
            }
            stale_ok += usize::from(rmad_cancel_post(b, p0) == 0);
            let r = if i % 2 == 0 {
                rmad_cancel_mad(b)
            } else {
                let p1 = probe.inner.lock().reposts.get(i).copied().unwrap_or(0);
                rmad_cancel_post(b, p1)
            };
            not_cancellable += usize::from(r != 0);
            if !probe.wait_sends(want) {
                lost += 1;
                break;
            }
        }
        let results = probe.results()?;
        let sends = probe.sends()?;
        let free = rmad_free_send_mad(b);
        let unreg = rmad_unregister_agent(a);
        pr_info!(
            "capi: {} re-posts from the handler, {} not cancellable, {} stale post ids accepted\n",
            results.len(),
            not_cancellable,
            stale_ok
        );
        assert_eq!(lost, 0);
        assert_eq!(not_cancellable, 0);
        assert_eq!(stale_ok, 0);
        assert!(results.iter().all(|r| *r == 0));
        assert_eq!(sends.len(), N * 2);
        assert_eq!(sends.iter().filter(|s| s.2 == WC_FLUSH).count(), N);
        assert_eq!((free, unreg), (0, 0));
        Ok(())
    }

    #[test]
    fn unregister_from_own_recv_handler_refused() -> Result {
        let ah = rxe_ah()?;
        let probe = Probe::new(
            Behaviour {
                free: true,
                unregister_in_recv: true,
                ..Behaviour::default()
            },
            ah,
        )?;
        let a = c_agent(&probe)?;
        let b = c_request(a, &ah, 3, GET, 5000)?;
        // SAFETY: Plain call.
        let posted = unsafe { rmad_post_send_mad(b, core::ptr::null_mut()) };
        // ib_core answers the GET; the response reaches the receive handler.
        let answered = probe.wait(|g| g.recvs >= 1) && probe.wait_sends(1);
        let results = probe.results()?;
        let unreg = rmad_unregister_agent(a);
        assert_eq!(posted, 0);
        assert!(answered);
        assert_eq!(&results[..], &[EDEADLK.to_errno()][..]);
        assert_eq!(unreg, 0);
        Ok(())
    }

    #[test]
    fn recv_kept_past_unregister_until_freed() -> Result {
        let own = rxe_ah()?;
        let probe = Probe::new(
            Behaviour {
                free: true,
                keep_first_recv: true,
                ..Behaviour::default()
            },
            own,
        )?;
        let a = c_agent(&probe)?;
        let mut posted = 0;
        for lo in 0..2 {
            let b = c_request(a, &own, lo, GET, 5000)?;
            // SAFETY: Plain call.
            posted += usize::from(unsafe { rmad_post_send_mad(b, core::ptr::null_mut()) } == 0);
        }
        // ib_core answers both GETs; the first answer is kept, the second is not.
        let answered = probe.wait(|g| g.recvs >= 2) && probe.wait_sends(2);
        let (n_calls, first, second) = {
            let g = probe.inner.lock();
            let c = &g.recv_calls;
            (c.len(), c.first().copied(), c.get(1).copied())
        };
        let none = (0, 0, 0);
        let (first, second) = (first.unwrap_or(none), second.unwrap_or(none));
        let (kept, other) = (to_handle(first.0), to_handle(second.0));
        let mut len = 0u32;
        // SAFETY: `len` is valid for a write.
        let mad = unsafe { rmad_recv_buf_mad(kept, &mut len) }.cast::<u8>();
        // SAFETY: A non-NULL MAD is valid for `len` bytes until it is freed (below).
        let method = (!mad.is_null()).then(|| unsafe { *mad.add(3) });
        let mut ah = RmadAh { has_grh: 0, ..own };
        // SAFETY: `ah` is valid for writes (or NULL on purpose).
        let reply = unsafe {
            (
                rmad_recv_buf_ah(a, kept, &mut ah),
                rmad_recv_buf_ah(a, kept, core::ptr::null_mut()),
                rmad_recv_buf_ah(a, other, &mut RmadAh { ..own }),
            )
        };
        // The unkept MAD ended with its handler; the kept one cannot be kept twice.
        let ended = (
            // SAFETY: NULL `len` is allowed.
            unsafe { rmad_recv_buf_mad(other, core::ptr::null_mut()) }.is_null(),
            rmad_free_recv_mad(other),
            rmad_keep_recv_mad(other),
            rmad_keep_recv_mad(kept),
        );
        let unreg = rmad_unregister_agent(a);
        // Past unregistration the kept MAD is still there, until it is freed.
        // SAFETY: NULL `len` is allowed.
        let after = unsafe { rmad_recv_buf_mad(kept, core::ptr::null_mut()) }.cast::<u8>();
        // SAFETY: `ah` is valid for a write.
        let stale_agent = unsafe { rmad_recv_buf_ah(a, kept, &mut ah) };
        let freed = (rmad_free_recv_mad(kept), rmad_free_recv_mad(kept));
        // SAFETY: NULL `len` is allowed.
        let gone = unsafe { rmad_recv_buf_mad(kept, core::ptr::null_mut()) }.is_null();
        assert_eq!(posted, 2);
        assert!(answered);
        assert_eq!(n_calls, 2);
        assert!([first, second].iter().all(|c| c.0 != 0 && c.1 == 1));
        assert_eq!(first.2, 0);
        assert_eq!(len, 256);
        assert!(method.is_some_and(|m| m & 0x80 != 0));
        // The answer came from rxe0's own GID 1 to itself: the reply goes back there.
        assert_eq!(reply, (0, EINVAL.to_errno(), EINVAL.to_errno()));
        assert_eq!(
            (ah.has_grh, ah.sgid_index, ah.dgid),
            (1, own.sgid_index, own.dgid)
        );
        let einval = EINVAL.to_errno();
        assert_eq!(ended, (true, einval, einval, einval));
        assert_eq!(unreg, 0);
        assert_eq!(after, mad);
        assert_eq!(stale_agent, einval);
        assert_eq!(freed, (0, einval));
        assert!(gone);
        Ok(())
    }

    #[test]
    fn calls_on_one_buffer_never_wait_for_another() -> Result {
        // While one thread holds buffer B's slot (as a call on B does), another thread's
        // calls on buffer A, of another agent, complete: no lock is shared between them. With
        // a module-wide lock they would wait until B is let go, after the bound below, in
        // every attempt. One attempt can also miss for a reason outside rmad: the holder spins
        // with interrupts off, so a caller that landed on the holder's CPU, or that waits for
        // an IPI to it, cannot go on; up to three attempts, each with a new pair of buffers.
        let ah = rxe_ah()?;
        let probe = Probe::new(Behaviour::default(), ah)?;
        let (a, b) = (c_agent(&probe)?, c_agent(&probe)?);
        let mut outcomes = [Outcome::default(); 3];
        let mut attempts = 0;
        let mut failed = 0;
        for (i, o) in (1u32..).zip(outcomes.iter_mut()) {
            match calls_while_another_is_held(&probe, a, b, &ah, i) {
                Ok(seen) => *o = seen,
                Err(e) => {
                    failed = e.to_errno();
                    break;
                }
            }
            attempts += 1;
            if o.inside {
                break;
            }
        }
        // Unregistered before any assertion: the probe must outlive the agents.
        let unreg = (rmad_unregister_agent(a), rmad_unregister_agent(b));
        let used = &outcomes[..attempts];
        assert_eq!(failed, 0);
        // Every call succeeded in every attempt, whether it finished inside or not.
        assert!(used.iter().all(|o| o.calls == [0, 0, 0, 0]));
        assert!(used.iter().any(|o| o.inside));
        assert_eq!(unreg, (0, 0));
        Ok(())
    }

    /// What one attempt of [`calls_on_one_buffer_never_wait_for_another`] saw.
    #[derive(Clone, Copy, Default)]
    struct Outcome {
        /// The calls on A finished while B's slot was held.
        inside: bool,
        /// What `rmad_send_buf_mad` (0 when non-NULL), set, post, modify and cancel returned,
        /// the first two folded into one.
        calls: [i32; 4],
    }

    /// Posts, modifies and cancels a new buffer of agent `a` from another thread while this
    /// one holds the slot of a new buffer of agent `b` for up to 5 s; once the cancelled send
    /// has reached `probe`'s handler (the `lo`th), frees both buffers.
    fn calls_while_another_is_held(
        probe: &Arc<Probe>,
        a: *mut c_void,
        b: *mut c_void,
        ah: &RmadAh,
        lo: u32,
    ) -> Result<Outcome> {
        let ba = c_request(a, ah, lo.checked_mul(2).ok_or(EINVAL)?, SEND, 60_000)?;
        let bb = c_request(
            b,
            ah,
            lo.checked_mul(2)
                .ok_or(EINVAL)?
                .checked_add(1)
                .ok_or(EINVAL)?,
            SEND,
            60_000,
        )?;
        let shared = Arc::pin_init(
            pin_init!(Shared {
                held: Atomic::new(false),
                done: Atomic::new(false),
                calls: [
                    Atomic::new(0),
                    Atomic::new(0),
                    Atomic::new(0),
                    Atomic::new(0)
                ],
            }),
            GFP_KERNEL,
        )?;
        let (s2, ah2, ba2) = (shared.clone(), *ah, num(ba));
        kernel::workqueue::system_unbound().try_spawn(GFP_KERNEL, move || {
            while !s2.held.load(Acquire) {
                core::hint::spin_loop();
            }
            let ba = core::ptr::without_provenance_mut(usize::try_from(ba2).unwrap_or(0));
            let mut post = 0u64;
            // SAFETY: Plain calls; `post` is valid for a write.
            let codes = unsafe {
                let set = if rmad_send_buf_mad(ba).is_null() {
                    EINVAL.to_errno()
                } else {
                    rmad_send_buf_set(ba, &ah2, 60_000, 0, core::ptr::null_mut())
                };
                let posted = rmad_post_send(ba, &mut post);
                [
                    set,
                    posted,
                    rmad_modify_post(ba, post, 50_000),
                    rmad_cancel_post(ba, post),
                ]
            };
            for (slot, code) in s2.calls.iter().zip(codes) {
                slot.store(code, Relaxed);
            }
            s2.done.store(true, Release);
        })?;
        let mut inside = false;
        let held = crate::capi::hold_buf_slot(bb, || {
            shared.held.store(true, Release);
            // Bounded in time: with a shared lock the other thread could not finish while we
            // hold it. 5 s stays well inside the soft-lockup and RCU-stall detectors' 20 s.
            let start = Instant::<Monotonic>::now();
            while start.elapsed() < Delta::from_secs(5) {
                inside = shared.done.load(Acquire);
                if inside {
                    break;
                }
                core::hint::spin_loop();
            }
        });
        // The other thread must never wait forever, whatever happened here.
        shared.held.store(true, Release);
        held?;
        // B is let go: the calls finish now if they had not (bounded, in case they hang).
        for _ in 0..20_000 {
            if shared.done.load(Acquire) {
                break;
            }
            crate::testing::sleep_ms(1);
        }
        if !shared.done.load(Acquire) {
            return Err(ETIMEDOUT);
        }
        let calls = shared.calls.each_ref().map(|c| c.load(Relaxed));
        if !probe.wait_sends(usize::try_from(lo)?) {
            return Err(ETIMEDOUT);
        }
        let frees = (rmad_free_send_mad(ba), rmad_free_send_mad(bb));
        if frees != (0, 0) {
            return Err(EBUSY);
        }
        Ok(Outcome { inside, calls })
    }

    /// What the two threads of [`calls_while_another_is_held`] share.
    #[pin_data]
    struct Shared {
        held: Atomic<bool>,
        /// Set once the calls on A have all returned.
        done: Atomic<bool>,
        /// Their return codes (see [`Outcome::calls`]).
        calls: [Atomic<i32>; 4],
    }

    #[test]
    fn resolve_ah_resolves_and_checks_its_arguments() -> Result {
        // rxe0's own GID resolves (to its own MAC: loopback), an address without a GRH needs
        // nothing, bad arguments are refused. (An unreachable destination cannot be made on
        // rxe0's dummy netdev, which needs no ARP: the two-node suite checks that one.)
        let own = rxe_ah()?;
        let no_grh = RmadAh { has_grh: 0, ..own };
        let probe = Probe::new(Behaviour::default(), own)?;
        let a = c_agent(&probe)?;
        // SAFETY: Plain calls; the addresses are valid for reads (or NULL on purpose).
        let got = unsafe {
            (
                rmad_resolve_ah(a, &own),
                rmad_resolve_ah(a, &no_grh),
                rmad_resolve_ah(a, core::ptr::null()),
                rmad_resolve_ah(core::ptr::null_mut(), &own),
            )
        };
        let unreg = rmad_unregister_agent(a);
        assert_eq!(got.0, 0);
        assert_eq!(got.1, 0);
        assert_eq!(got.2, EINVAL.to_errno());
        assert_eq!(got.3, EINVAL.to_errno());
        assert_eq!(unreg, 0);
        Ok(())
    }

    #[test]
    fn calls_from_timer_and_hrtimer() -> Result {
        let ah = rxe_ah()?;
        let probe = Probe::new(
            Behaviour {
                free: true,
                keep_all_recvs: true,
                ..Behaviour::default()
            },
            ah,
        )?;
        let a = c_agent(&probe)?;
        let mut results = [AtomicResult::default(), AtomicResult::default()];
        let mut ran = [EINVAL.to_errno(); 2];
        let mut gone = [false; 2];
        for (where_, ((res, ran), gone)) in results
            .iter_mut()
            .zip(ran.iter_mut())
            .zip(gone.iter_mut())
            .enumerate()
        {
            // A GET that ib_core answers: its answer is kept, and handed to the callback.
            let g = c_request(a, &ah, 20 + u32::try_from(where_)?, GET, 5000)?;
            // SAFETY: Plain call.
            let _ = unsafe { rmad_post_send_mad(g, core::ptr::null_mut()) };
            let _ = probe.wait(|p| p.recv_calls.len() > where_);
            let recv = to_handle(probe.inner.lock().recv_calls.get(where_).map_or(0, |c| c.0));
            let b = c_request(a, &ah, 9, SEND, 60_000)?;
            // SAFETY: `res` is valid for writes; the handles are validated by rmad.
            *ran = unsafe {
                rmad_test_call_from(c_int::try_from(where_).unwrap_or(0), a, b, recv, res)
            };
            // SAFETY: NULL `len` is allowed.
            *gone = unsafe { rmad_recv_buf_mad(recv, core::ptr::null_mut()) }.is_null();
            // The GET's completion (freed by the probe) and the cancelled post's (flushed);
            // then the second buffer is ours to free.
            let _ = probe.wait_sends(2 * where_ + 2);
            let _ = rmad_free_send_mad(b);
        }
        let unreg = rmad_unregister_agent(a);
        let hi_tid = rmad_agent_hi_tid(a);
        let [t, h] = &results;
        pr_info!("capi: from timer {:?}\n", t);
        pr_info!("capi: from hrtimer {:?}\n", h);
        assert_eq!(ran, [0, 0]);
        // The timer ran in softirq context, the hrtimer in hard interrupt context.
        assert!(t.softirq != 0 && t.hardirq == 0);
        assert!(h.hardirq != 0 && h.irqs_off != 0);
        for r in &results {
            assert_eq!((r.post, r.modify, r.modify_mad, r.cancel), (0, 0, 0, 0));
            assert_eq!(
                (r.set, r.context_ok, r.retries, r.agent_context_ok),
                (0, 1, 2, 1)
            );
            assert_eq!(r.cancel_again, EINVAL.to_errno());
            assert_eq!(r.free_busy, EBUSY.to_errno());
            assert!(r.hi_tid != 0);
            assert_eq!((r.create, r.mad_ok, r.free), (0, 1, 0));
            assert_eq!(r.stale_free, EINVAL.to_errno());
            assert_eq!(r.send_len, 256);
            assert_eq!((r.recv_mad_ok, r.recv_free), (1, 0));
        }
        assert_eq!(gone, [true, true]);
        assert_eq!(unreg, 0);
        assert_eq!(hi_tid, 0);
        Ok(())
    }
}
