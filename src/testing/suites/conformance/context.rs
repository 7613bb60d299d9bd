// SPDX-License-Identifier: GPL-2.0

//! Group H: context and locking (scenarios 62–63).

use super::*;

// `assert!` and `assert_eq!` that fail the running KUnit case instead of panicking, like those
// the suite module defines for its own cases.
macro_rules! assert {
    ($c:expr $(,)?) => {{
        kernel::kunit_assert!(
            "rmad_conformance",
            c"src/testing/suites/conformance/context.rs",
            0,
            $c
        );
    }};
}
#[allow(unused_macros)]
macro_rules! assert_eq {
    ($l:expr, $r:expr $(,)?) => {{
        kernel::kunit_assert_eq!(
            "rmad_conformance",
            c"src/testing/suites/conformance/context.rs",
            0,
            $l,
            $r
        );
    }};
}

/// [`request`] with `GFP_ATOMIC`.
fn request_atomic(a: &Arc<Agent>, tag: usize) -> Result<SendBuf> {
    let mut buf = a.create_mad(1, GFP_ATOMIC)?;
    let hdr = MadHdr {
        base_version: 1,
        mgmt_class: CLASS,
        class_version: 1,
        method: wire::IB_MGMT_METHOD_GET,
        tid: wire::make_tid(a.hi_tid, u32::try_from(tag).unwrap_or(0)),
        ..MadHdr::default()
    };
    hdr.write(buf.mad_mut()).map_err(|_| EINVAL)?;
    buf.set_ah(Some(Address {
        sl: 0,
        dlid: B,
        src_path_bits: 0,
        grh: None,
    }));
    buf.set_timeout_ms(60_000);
    buf.set_context([tag, 0]);
    Ok(buf)
}

pub(super) fn s62_handlers_unlocked_and_may_sleep() -> Result {
    let (env, rec, a) = setup(Behaviour {
        sleep_in_send_ms: 5,
        touch_agent: true,
        ..Behaviour::default()
    })?;
    let (b, brec) = env.responder(2, CLASS)?;
    // Completion, matched response, timeout, cancel and unregister deliveries.
    let _c = post(request(&a, CLASS, 1, B, 0, 0)?)?;
    let _r = post(request(&a, CLASS, 2, B, 5000, 0)?)?;
    let _t = post(request(&a, wire::IB_MGMT_CLASS_BM, 3, B, 50, 0)?)?;
    let x = post(request(&a, wire::IB_MGMT_CLASS_BM, 4, B, 60_000, 0)?)?;
    let _ = x.cancel();
    let four = rec.wait_sends(4);
    let _u = post(request(&a, wire::IB_MGMT_CLASS_BM, 5, B, 60_000, 0)?)?;
    let _ = wait_state(&a, &_u, SendState::WaitResp);
    finish(&env, &[&rec, &brec], &[&a, &b])?;
    let count = rec.send_count();
    assert!(four);
    assert_eq!(count, 5);
    Ok(())
}

pub(super) fn s63_api_usable_with_interrupts_disabled() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    stack_pin_init!(let lock = new_spinlock_irq!((), "s63"));
    let outcome = {
        let _g = lock.lock();
        let made = request_atomic(&a, 63);
        match made {
            Ok(buf) => {
                let spare = a.create_mad(1, GFP_ATOMIC);
                // Free with interrupts off.
                drop(spare);
                match Agent::post(buf) {
                    Ok(h) => [errno(&h.modify(60_000)), errno(&h.cancel()), 0],
                    Err(e) => [e.err.to_errno(), 0, 0],
                }
            }
            Err(e) => [e.to_errno(), 0, 0],
        }
    };
    let done = rec.wait_sends(1);
    finish(&env, &[&rec], &[&a])?;
    assert_eq!(outcome, [0, 0, 0]);
    assert!(done);
    Ok(())
}
