// SPDX-License-Identifier: GPL-2.0

//! Suite `rmad_capi`, stale handles: a handle of the C API names one object for the life of the
//! module, and a stale one is refused forever, never acting on a newer object.

use super::*;

// `assert!` and `assert_eq!` that fail the running KUnit case instead of panicking, like those
// the suite module defines for its own cases.
#[allow(unused_macros)]
macro_rules! assert {
    ($c:expr $(,)?) => {{
        kernel::kunit_assert!("rmad_capi", c"src/testing/suites/capi/handles.rs", 0, $c);
    }};
}
#[allow(unused_macros)]
macro_rules! assert_eq {
    ($l:expr, $r:expr $(,)?) => {{
        kernel::kunit_assert_eq!(
            "rmad_capi",
            c"src/testing/suites/capi/handles.rs",
            0,
            $l,
            $r
        );
    }};
}

pub(super) fn buffer_handle_never_aliases() -> Result {
    let ah = rxe_ah()?;
    let probe = CRecorder::new(CBehaviour::default(), ah)?;
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

pub(super) fn agent_handle_never_aliases() -> Result {
    let ah = rxe_ah()?;
    let probe = CRecorder::new(CBehaviour::default(), ah)?;
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
        let b = create_mad(a1, kernel::bindings::GFP_KERNEL);
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

pub(super) fn old_post_never_acts_on_a_repost() -> Result {
    let ah = rxe_ah()?;
    let probe = CRecorder::new(CBehaviour::default(), ah)?;
    let a = c_agent(&probe)?;
    let b = c_request(a, &ah, 1, SEND, 60_000)?;
    let (mut p1, mut p2) = (0u64, 0u64);
    // SAFETY: `p1` is valid for a write.
    let r1 = unsafe { rmad_post_send(b, &mut p1) };
    let c1 = rmad_cancel_post(b, p1);
    let flushed = probe.wait_sends(1);
    // A cancel sets the buffer's timeout to 0, as `ib_cancel_mad` does: without a new one,
    // the re-post would complete at its send completion, which can beat the cancel below.
    // SAFETY: `ah` is valid for reads; `p2` is valid for a write.
    let (set, r2) = unsafe {
        (
            rmad_send_buf_set(b, &ah, 60_000, 0, core::ptr::null_mut()),
            rmad_post_send(b, &mut p2),
        )
    };
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
    assert_eq!((r1, c1, set, r2, c2), (0, 0, 0, 0, 0));
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

pub(super) fn stale_handle_survives_many_create_free_cycles() -> Result {
    let ah = rxe_ah()?;
    let probe = CRecorder::new(CBehaviour::default(), ah)?;
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

pub(super) fn s32_modify_and_cancel_null_einval() -> Result {
    // Scenario 32: `ib_modify_mad(NULL, x)` is -EINVAL; so are rmad's other calls that
    // name a post, on a NULL buffer.
    let null = core::ptr::null_mut();
    let results = [
        rmad_modify_mad(null, 10),
        rmad_cancel_mad(null),
        rmad_modify_post(null, 1, 10),
        rmad_cancel_post(null, 1),
    ];
    assert_eq!(results, [EINVAL.to_errno(); 4]);
    Ok(())
}
