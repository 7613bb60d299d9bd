// SPDX-License-Identifier: GPL-2.0

//! Suite `rmad_capi`, where the calls may be made: on one buffer while another's slot is held,
//! from a timer and an hrtimer, with a caller's `GFP_NOIO` or `GFP_NOFS`, a large kept MAD freed
//! with a spinlock held; and the arguments of `rmad_resolve_ah`.

use super::*;

// `assert!` and `assert_eq!` that fail the running KUnit case instead of panicking, like those
// the suite module defines for its own cases.
#[allow(unused_macros)]
macro_rules! assert {
    ($c:expr $(,)?) => {{
        kernel::kunit_assert!("rmad_capi", c"src/testing/suites/capi/contexts.rs", 0, $c);
    }};
}
#[allow(unused_macros)]
macro_rules! assert_eq {
    ($l:expr, $r:expr $(,)?) => {{
        kernel::kunit_assert_eq!(
            "rmad_capi",
            c"src/testing/suites/capi/contexts.rs",
            0,
            $l,
            $r
        );
    }};
}

pub(super) fn calls_on_one_buffer_never_wait_for_another() -> Result {
    // While one thread holds buffer B's slot (as a call on B does), another thread's
    // calls on buffer A, of another agent, complete: no lock is shared between them. With
    // a module-wide lock they would wait until B is let go, after the bound below, in
    // every attempt. One attempt can also miss for a reason outside rmad: the holder spins
    // with interrupts off, so a caller that landed on the holder's CPU, or that waits for
    // an IPI to it, cannot go on; up to three attempts, each with a new pair of buffers.
    let ah = rxe_ah()?;
    let probe = CRecorder::new(CBehaviour::default(), ah)?;
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
    probe: &Arc<CRecorder>,
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
    crate::sys::workqueue::system_dfl().try_spawn(GFP_KERNEL, move || {
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

pub(super) fn resolve_ah_resolves_and_checks_its_arguments() -> Result {
    // rxe0's own GID resolves (to its own MAC: loopback), an address without a GRH needs
    // nothing, bad arguments are refused. (An unreachable destination cannot be made on
    // rxe0's dummy netdev, which needs no ARP: the two-node suite checks that one.)
    let own = rxe_ah()?;
    let no_grh = RmadAh { has_grh: 0, ..own };
    let probe = CRecorder::new(CBehaviour::default(), own)?;
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

pub(super) fn calls_from_timer_and_hrtimer() -> Result {
    let ah = rxe_ah()?;
    let probe = CRecorder::new(
        CBehaviour {
            free: true,
            keep_all_recvs: true,
            ..CBehaviour::default()
        },
        ah,
    )?;
    let a = c_agent(&probe)?;
    // A kernel-RMPP agent's buffer of 56 + 1 000 bytes (5 segments of 200), whose
    // segments the callbacks read; `race` outlives the agent (unregistered below).
    let race = register_race()?;
    let ra = sa_rmpp_agent(&race, 0);
    let rb = if is_err(ra) {
        core::ptr::null_mut()
    } else {
        rmad_create_send_mad(ra, 1, 0, 1, 56, 1000, kernel::bindings::GFP_KERNEL, 1)
    };
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
        let from = [FROM_TIMER, FROM_HRTIMER]
            .get(where_)
            .copied()
            .ok_or(EINVAL)?;
        *ran = match call_from(from, a, b, recv, rb) {
            Ok(r) => {
                *res = r;
                0
            }
            Err(e) => e,
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
    let rmpp_freed = !is_err(rb) && rmad_free_send_mad(rb) == 0;
    let rmpp_unreg = !is_err(ra) && rmad_unregister_agent(ra) == 0;
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
        assert_eq!(
            (r.seg_count, r.seg_size, r.seg_ok, r.seg_beyond_null),
            (5, 200, 1, 1)
        );
    }
    assert!(rmpp_freed && rmpp_unreg);
    assert_eq!(gone, [true, true]);
    assert_eq!(unreg, 0);
    assert_eq!(hi_tid, 0);
    Ok(())
}

pub(super) fn create_honours_noio_and_nofs() -> Result {
    // A caller's GFP_NOIO or GFP_NOFS must hold for every allocation of the create: none
    // may recurse into IO or filesystem reclaim.
    let io = 1u32 << kernel::bindings::___GFP_IO_BIT;
    let fs = 1u32 << kernel::bindings::___GFP_FS_BIT;
    let kernel_mask = kernel::bindings::GFP_KERNEL;
    let ah = rxe_ah()?;
    let probe = CRecorder::new(CBehaviour::default(), ah)?;
    let a = c_agent(&probe)?;
    let mut seen = [0u32; 3];
    for (s, mask) in seen
        .iter_mut()
        .zip([kernel_mask & !(io | fs), kernel_mask & !fs, kernel_mask])
    {
        let b = create_mad(a, mask);
        *s = CREATE_GFP_SEEN.load(Relaxed);
        if !is_err(b) {
            let _ = rmad_free_send_mad(b);
        }
    }
    let unreg = rmad_unregister_agent(a);
    let [noio, nofs, full] = seen;
    pr_info!(
        "capi: allocation masks noio {:#x} nofs {:#x} kernel {:#x}\n",
        noio,
        nofs,
        full
    );
    assert_eq!(unreg, 0);
    assert_eq!(noio & (io | fs), 0);
    assert_eq!(nofs & (io | fs), io);
    assert_eq!(full & (io | fs), io | fs);
    Ok(())
}

/// The handle of the MAD that [`keep_it`] kept (0: none).
static KEPT: Atomic<usize> = Atomic::new(0);

/// A receive handler that keeps its MAD.
///
/// # Safety
///
/// `wc` must be a receive completion valid for the call.
unsafe extern "C" fn keep_it(_agent: *mut c_void, _buf: *mut c_void, wc: *const RmadRecvWc) {
    // SAFETY: The caller's promise.
    let recv_buf = unsafe { (*wc).recv_buf };
    if rmad_keep_recv_mad(recv_buf) == 0 {
        KEPT.store(recv_buf.addr(), Release);
    }
}

pub(super) fn large_kept_mad_freed_with_a_spinlock_held() -> Result {
    // rmad.h: rmad_free_recv_mad is atomic-safe, a spinlock held too. A kept MAD may be an RMPP
    // message reassembled past what kmalloc gives (4 MiB), which kvmalloc takes from vmalloc,
    // and vfree may sleep outside an interrupt: DEBUG_ATOMIC_SLEEP reports such a call
    // (rmad_vm_run.kernel_log_clean). Before the fix the free ran vfree under the lock. The
    // 5 MiB MAD reaches the handler as rmad's receive path hands one to a C client.
    const BYTES: usize = 5 << 20;
    let mut mad = KVVec::with_capacity(BYTES, GFP_KERNEL)?;
    mad.resize(BYTES, 0, GFP_KERNEL)?;
    // SAFETY: Reads where the bytes live, nothing more.
    let vmalloced = unsafe { kernel::bindings::is_vmalloc_addr(mad.as_ptr().cast()) };
    let wc = crate::testing::requests::plain_arrival(1, 1);
    let c_wc = RmadRecvWc {
        mad: core::ptr::null(),
        context: core::ptr::null_mut(),
        mad_len: 0,
        src_qp: 1,
        slid: 1,
        pkey_index: 0,
        has_grh: 0,
        hop_limit: 0,
        traffic_class: 0,
        recv_buf: core::ptr::null_mut(),
        sgid: [0; 16],
        flow_label: 0,
    };
    KEPT.store(0, Relaxed);
    crate::capi::deliver(
        keep_it,
        0,
        0,
        c_wc,
        crate::engine::transport::RecvMad { mad, wc },
        core::ptr::null(),
    );
    let kept = KEPT.load(Acquire);
    let lock = KBox::pin_init(kernel::new_spinlock_irq!(()), GFP_KERNEL)?;
    let freed = {
        let _g = lock.lock();
        rmad_free_recv_mad(core::ptr::with_exposed_provenance_mut(kept))
    };
    let again = rmad_free_recv_mad(core::ptr::with_exposed_provenance_mut(kept));
    assert!(vmalloced);
    assert!(kept != 0);
    assert_eq!(freed, 0);
    assert_eq!(again, EINVAL.to_errno());
    Ok(())
}
