// SPDX-License-Identifier: GPL-2.0

//! Suite `rmad_capi`, what handlers see and may do: re-post from a send handler, unregister
//! from a receive handler (refused), keep a received MAD past unregistration, and find their
//! agent's handle finished even while `rmad_register_agent` still runs.

use super::*;

// `assert!` and `assert_eq!` that fail the running KUnit case instead of panicking, like those
// the suite module defines for its own cases.
#[allow(unused_macros)]
macro_rules! assert {
    ($c:expr $(,)?) => {{
        kernel::kunit_assert!("rmad_capi", c"src/testing/suites/capi/handlers.rs", 0, $c);
    }};
}
#[allow(unused_macros)]
macro_rules! assert_eq {
    ($l:expr, $r:expr $(,)?) => {{
        kernel::kunit_assert_eq!(
            "rmad_capi",
            c"src/testing/suites/capi/handlers.rs",
            0,
            $l,
            $r
        );
    }};
}

pub(super) fn repost_from_handler_stays_cancellable() -> Result {
    let ah = rxe_ah()?;
    let probe = CRecorder::new(CBehaviour::default(), ah)?;
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

pub(super) fn unregister_from_own_recv_handler_refused() -> Result {
    let ah = rxe_ah()?;
    let probe = CRecorder::new(
        CBehaviour {
            free: true,
            unregister_in_recv: true,
            ..CBehaviour::default()
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

pub(super) fn recv_kept_past_unregister_until_freed() -> Result {
    let own = rxe_ah()?;
    let probe = CRecorder::new(
        CBehaviour {
            free: true,
            keep_first_recv: true,
            ..CBehaviour::default()
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

pub(super) fn handlers_see_a_finished_handle() -> Result {
    // A request that reaches an agent while `rmad_register_agent` is still running must
    // already find the handle its handler gets usable (rmad.h: handlers that run before
    // registration returns "receive the agent's handle already"). A flood of requests for
    // the class races a loop that registers and unregisters the agent on lb0.
    const ROUNDS: usize = 100;
    let class = wire::IB_MGMT_CLASS_DEVICE_MGMT;
    let (engine, transport) = devices::find(lb0::NAME, 2).ok_or(ENODEV)?;
    let rec = Recorder::new(Behaviour::default())?;
    let sender = register_gsi(&engine, &transport, 2, &rec, None)?;
    let race = register_race()?;
    let stop = Arc::new(Atomic::<bool>::new(false), GFP_KERNEL)?;
    let flooded = Arc::new(Atomic::<u32>::new(0), GFP_KERNEL)?;
    let (s2, stop2, flooded2) = (sender.clone(), stop.clone(), flooded.clone());
    crate::sys::workqueue::system_dfl()
        .try_spawn(GFP_KERNEL, move || {
            let mut tag = 0usize;
            // Bounded: the loop stops at the test's signal or after 200 000 requests.
            while !stop2.load(Acquire) && tag < 200_000 {
                // Timeout 0: each request completes when the fabric took it.
                if let Ok(b) = request(&s2, class, tag, 1, 0, 0) {
                    if post(b).is_ok() {
                        flooded2.add(1, Relaxed);
                    }
                }
                tag += 1;
                if tag % 64 == 0 {
                    crate::sys::sched::cond_resched();
                }
            }
            stop2.store(true, Release);
        })
        .map_err(|_| ENOMEM)?;
    let reg = RmadRegReq {
        mgmt_class: class,
        mgmt_class_version: 1,
        oui: [0; 3],
        method_mask: [1 << wire::IB_MGMT_METHOD_GET, 0],
    };
    let (mut registered, mut unregistered) = (0usize, 0usize);
    // Each registration lingers once its agent is routable, before it returns.
    REGISTERED_DELAY_MS.store(2, Relaxed);
    for _ in 0..ROUNDS {
        // SAFETY: The name is NUL-terminated and `reg` valid; the handlers match the C
        // prototypes; the context outlives the agent (unregistered below).
        let a = unsafe {
            rmad_register_agent(
                lb0::NAME.as_char_ptr(),
                1,
                1,
                &reg,
                0,
                Some(register_race_send),
                Some(register_race_recv),
                Arc::as_ptr(&race).cast_mut().cast(),
                0,
            )
        };
        if is_err(a) {
            continue;
        }
        registered += 1;
        unregistered += usize::from(rmad_unregister_agent(a) == 0);
    }
    REGISTERED_DELAY_MS.store(0, Relaxed);
    stop.store(true, Release);
    // The flood ends within one request of the signal; its sends then complete.
    let start = Instant::<Monotonic>::now();
    while start.elapsed().as_millis() < crate::testing::WAIT_MS
        && u64::from(flooded.load(Relaxed)) > u64::try_from(rec.send_count()).unwrap_or(0)
    {
        crate::testing::sleep_ms(10);
    }
    let unreg = sender.unregister();
    let (seen, unknown) = (race.seen.load(Relaxed), race.unknown.load(Relaxed));
    pr_info!(
        "capi: {} registrations, {} requests flooded, {} reached an agent, {} with an unknown handle\n",
        registered,
        flooded.load(Relaxed),
        seen,
        unknown
    );
    assert_eq!(registered, ROUNDS);
    assert_eq!(unregistered, ROUNDS);
    assert!(unreg.is_ok());
    // The race happened: requests reached the agents while they came and went.
    assert!(seen > 0);
    assert_eq!(unknown, 0);
    Ok(())
}
