// SPDX-License-Identifier: GPL-2.0

//! A C client of rmad's exported API, written in Rust: what the C API's suites (`rmad_capi`)
//! and the stress driver call through the same `extern "C"` functions other modules link
//! against. [`CRecorder`] is a pair of C handlers that record every call; the free functions make
//! agents and requests, and check stale handles.

use crate::{
    capi::{
        rmad_agent_hi_tid,
        rmad_cancel_mad,
        rmad_cancel_post,
        rmad_create_send_mad,
        rmad_free_send_mad,
        rmad_keep_recv_mad,
        rmad_modify_mad,
        rmad_modify_post,
        rmad_port_gid,
        rmad_post_send,
        rmad_post_send_mad,
        rmad_register_agent,
        rmad_send_buf_context,
        rmad_send_buf_mad,
        rmad_send_buf_retries,
        rmad_send_buf_set,
        rmad_unregister_agent,
        RmadAh,
        RmadRecvWc,
        RmadSendWc, //
    },
    engine::agent::SendSpec,
    mad::wire::{
        self,
        MadHdr, //
    },
};
use core::ffi::c_void;
use kernel::{
    ffi::c_int,
    new_condvar, new_spinlock,
    prelude::*,
    sync::{
        Arc,
        CondVar,
        SpinLock, //
    },
    time::{
        Instant,
        Monotonic, //
    },
};

/// `IB_WC_SUCCESS`.
pub(crate) const WC_SUCCESS: i32 = 0;

/// What the probe's handlers do besides recording.
#[derive(Clone, Copy, Default)]
pub(crate) struct CBehaviour {
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
pub(crate) type RecvCall = (u64, u8, i32);

/// One send-handler call: buffer handle, post id, status.
pub(crate) type SendCall = (u64, u64, i32);

/// The probe's records.
pub(crate) struct CRecorderInner {
    pub(crate) sends: KVec<SendCall>,
    /// The task each send-handler call ran in (`task_struct` address), in the order of
    /// `sends`: a handler never runs in the task that posted, modified, cancelled or
    /// unregistered.
    pub(crate) send_tasks: KVec<usize>,
    pub(crate) recvs: usize,
    pub(crate) recv_calls: KVec<RecvCall>,
    /// Results of calls made inside handlers (re-post, unregister).
    pub(crate) results: KVec<i32>,
    /// Post ids of re-posts made inside the send handler.
    pub(crate) reposts: KVec<u64>,
    /// The next successful completion re-posts its buffer once, with a long timeout.
    pub(crate) repost_armed: bool,
}

/// A C client's handlers, recording what they see; its address is the agent's context.
#[pin_data]
pub(crate) struct CRecorder {
    #[pin]
    pub(crate) inner: SpinLock<CRecorderInner>,
    #[pin]
    changed: CondVar,
    behaviour: CBehaviour,
    /// Where reposted buffers go.
    ah: RmadAh,
}

impl CRecorder {
    /// A probe that behaves as `behaviour` says and re-posts to `ah`.
    pub(crate) fn new(behaviour: CBehaviour, ah: RmadAh) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                inner <- new_spinlock!(CRecorderInner {
                    sends: KVec::new(),
                    send_tasks: KVec::new(),
                    recvs: 0,
                    recv_calls: KVec::new(),
                    results: KVec::new(),
                    reposts: KVec::new(),
                    repost_armed: false,
                }),
                changed <- new_condvar!("CRecorder::changed"),
                behaviour,
                ah,
            }),
            GFP_KERNEL,
        )
    }

    /// Waits until `cond` holds for the records, at most [`crate::testing::WAIT_MS`].
    pub(crate) fn wait(&self, cond: impl Fn(&CRecorderInner) -> bool) -> bool {
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

    /// A copy of the tasks the send-handler calls ran in.
    pub(crate) fn send_tasks(&self) -> Result<KVec<usize>> {
        let g = self.inner.lock();
        let mut v = KVec::with_capacity(g.send_tasks.len(), GFP_ATOMIC)?;
        v.extend_from_slice(&g.send_tasks, GFP_ATOMIC)?;
        Ok(v)
    }

    /// Results of calls made inside handlers.
    pub(crate) fn results(&self) -> Result<KVec<i32>> {
        let g = self.inner.lock();
        let mut v = KVec::with_capacity(g.results.len(), GFP_ATOMIC)?;
        v.extend_from_slice(&g.results, GFP_ATOMIC)?;
        Ok(v)
    }

    /// The context pointer for the C API.
    pub(crate) fn ctx(self: &Arc<Self>) -> *mut c_void {
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
        let task = kernel::task::Task::current_raw() as usize;
        let _ = g.send_tasks.push(task, GFP_ATOMIC);
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
/// [`CRecorder`] (rmad calls it so for agents made by [`c_agent`]).
pub(crate) unsafe extern "C" fn c_recorder_send(_agent: *mut c_void, wc: *mut RmadSendWc) {
    // SAFETY: rmad passes a valid completion for the duration of the call.
    let wc = unsafe { &*wc };
    // SAFETY: The context is a `CRecorder` that the test keeps alive until unregistration returns.
    let p = unsafe { &*wc.context.cast::<CRecorder>() };
    p.on_send(wc);
}

/// The receive handler of probe agents.
///
/// # Safety
///
/// As for [`c_recorder_send`], with a receive completion.
pub(crate) unsafe extern "C" fn c_recorder_recv(
    agent: *mut c_void,
    _buf: *mut c_void,
    wc: *const RmadRecvWc,
) {
    // SAFETY: rmad passes a valid receive completion for the duration of the call.
    let wc = unsafe { &*wc };
    // SAFETY: As in `c_recorder_send`.
    let p = unsafe { &*wc.context.cast::<CRecorder>() };
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

/// `rmad_create_send_mad` for one MAD to QP1 ([`SendSpec::mad`]), allocated with `gfp`: a
/// handle, or an `ERR_PTR`.
pub(crate) fn create_mad(agent: *mut c_void, gfp: kernel::bindings::gfp_t) -> *mut c_void {
    let s = SendSpec::mad(1);
    rmad_create_send_mad(
        agent,
        s.remote_qpn,
        s.pkey_index,
        0,
        s.hdr_len,
        s.data_len,
        gfp,
        s.base_version,
    )
}

/// A handle as a number.
pub(crate) fn num(p: *mut c_void) -> u64 {
    u64::try_from(p.addr()).unwrap_or(0)
}

/// A number as the handle C sees.
pub(crate) fn to_handle(h: u64) -> *mut c_void {
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
        let h = create_mad(agent, kernel::bindings::GFP_KERNEL);
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
            crate::sys::sched::cond_resched();
        }
    }
    c.ms = start.elapsed().as_millis();
    c
}

/// Registers a GSI agent on rxe0 port 1 whose handlers are `probe`'s.
pub(crate) fn c_agent(probe: &Arc<CRecorder>) -> Result<*mut c_void> {
    c_agent_with_flags(probe, 0)
}

/// Registers a GSI agent on rxe0 port 1 with registration `flags`, whose handlers are
/// `probe`'s.
pub(crate) fn c_agent_with_flags(probe: &Arc<CRecorder>, flags: u32) -> Result<*mut c_void> {
    c_agent_with(probe, 0, flags)
}

/// Registers a GSI agent on rxe0 port 1 with `rmpp_version` and registration `flags`, whose
/// handlers are `probe`'s.
pub(crate) fn c_agent_with(
    probe: &Arc<CRecorder>,
    rmpp_version: u8,
    flags: u32,
) -> Result<*mut c_void> {
    // SAFETY: The name is NUL-terminated; the handlers match the C prototypes; the context
    // outlives the agent (the test unregisters before dropping the probe).
    let a = unsafe {
        rmad_register_agent(
            c"rxe0".as_char_ptr(),
            1,
            1,
            core::ptr::null(),
            rmpp_version,
            Some(c_recorder_send),
            Some(c_recorder_recv),
            probe.ctx(),
            flags,
        )
    };
    if is_err(a) {
        return Err(Error::from_errno(ptr_errno(a)));
    }
    Ok(a)
}

/// Writes the header of a class-0x04 request of `agent` with `method` and TID low word `lo`
/// into the MAD of `b`, a buffer the caller owns; `EINVAL` if the buffer has no MAD (a defect
/// of rmad).
pub(crate) fn write_request_header(
    agent: *mut c_void,
    b: *mut c_void,
    method: u8,
    lo: u32,
) -> Result {
    write_header_of(agent, b, (wire::IB_MGMT_CLASS_PERF_MGMT, 1), method, lo)
}

/// Writes the header of a request of `agent` of `(class, version)` with `method` and TID low
/// word `lo` into the MAD of `b`, a buffer the caller owns; `EINVAL` if the buffer has no MAD.
pub(crate) fn write_header_of(
    agent: *mut c_void,
    b: *mut c_void,
    (mgmt_class, class_version): (u8, u8),
    method: u8,
    lo: u32,
) -> Result {
    let mad = rmad_send_buf_mad(b).cast::<u8>();
    if mad.is_null() {
        return Err(EINVAL);
    }
    let mut hdr = [0u8; wire::IB_MGMT_MAD_HDR];
    let _ = MadHdr {
        base_version: 1,
        mgmt_class,
        class_version,
        method,
        tid: wire::make_tid(rmad_agent_hi_tid(agent), lo),
        ..MadHdr::default()
    }
    .write(&mut hdr);
    // SAFETY: The caller owns the buffer, whose MAD is 256 bytes long.
    unsafe { core::ptr::copy_nonoverlapping(hdr.as_ptr(), mad, hdr.len()) };
    Ok(())
}

/// The address of LID `dlid` without a GRH (the loopback fabric's ports), for the C API.
pub(crate) fn lid_ah(dlid: u16) -> RmadAh {
    RmadAh {
        dlid,
        src_path_bits: 0,
        has_grh: 0,
        sgid_index: 0,
        dgid: [0; 16],
        hop_limit: 0,
        traffic_class: 0,
        sl: 0,
        flow_label: 0,
    }
}

/// A class-0x04 request with `method` from `agent` to QP1 of rxe0 port 1.
pub(crate) fn c_request(
    agent: *mut c_void,
    ah: &RmadAh,
    lo: u32,
    method: u8,
    timeout_ms: i32,
) -> Result<*mut c_void> {
    let b = create_mad(agent, kernel::bindings::GFP_KERNEL);
    if is_err(b) {
        return Err(ENOMEM);
    }
    write_request_header(agent, b, method, lo)?;
    // SAFETY: The client owns the buffer; `ah` is valid.
    let r = unsafe { rmad_send_buf_set(b, ah, timeout_ms, 0, core::ptr::null_mut()) };
    kernel::error::to_result(r)?;
    Ok(b)
}

/// Every call on a stale buffer handle fails; returns how many did not.
pub(crate) fn stale_buf_calls_succeeding(b: *mut c_void) -> usize {
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
