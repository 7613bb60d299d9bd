// SPDX-License-Identifier: GPL-2.0

//! Group G: QP errors and send-queue overflow (scenarios 59–61).

use super::*;

// `assert!` and `assert_eq!` that fail the running KUnit case instead of panicking, like those
// the suite module defines for its own cases.
macro_rules! assert {
    ($c:expr $(,)?) => {{
        kernel::kunit_assert!(
            "rmad_conformance",
            c"src/testing/suites/conformance/qp_errors.rs",
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
            c"src/testing/suites/conformance/qp_errors.rs",
            0,
            $l,
            $r
        );
    }};
}

pub(super) fn s61_send_queue_overflow_fifo() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    let (p, prec) = peer(&env, CLASS)?;
    env.fabric().set_knobs(|k| k.sq_size = 2);
    let mut codes = [1i32; 8];
    for (i, c) in codes.iter_mut().enumerate() {
        *c = errno(&post(request(&a, CLASS, i, B, 0, 0)?).map(|_| ()));
    }
    let all = rec.wait_sends(8);
    let got = prec.wait_recvs(8);
    let order: KVec<u64> = {
        let mut v = KVec::new();
        for c in prec.calls()?.iter() {
            if let Call::Recv { tid, .. } = c {
                v.push(*tid & 0xffff_ffff, GFP_KERNEL)?;
            }
        }
        v
    };
    finish(&env, &[&rec, &prec], &[&a, &p])?;
    assert_eq!(codes, [0; 8]);
    assert!(all);
    assert!(got);
    assert_eq!(&order[..], &[0, 1, 2, 3, 4, 5, 6, 7][..]);
    Ok(())
}

pub(super) fn s60_hardware_error_status() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    // LOC_PROT_ERR (4) with vendor error 0x77 on both transmissions.
    env.fabric().set_knobs(|k| {
        k.error_completions = 2;
        k.error_status = Some((WcStatus::Other(4), 0x77));
    });
    let _n = post(request(&a, CLASS, 1, B, 0, 0)?)?;
    let n_done = rec.wait_sends(1);
    // With a timeout the error is swallowed (7.3): the send waits and times out.
    let _t = post(request(&a, CLASS, 2, B, 100, 0)?)?;
    let t_done = rec.wait_sends(2);
    let calls = rec.calls()?;
    finish(&env, &[&rec], &[&a])?;
    assert!(n_done);
    assert!(t_done);
    let first = matches!(calls.first(), Some(Call::Send { tag: 1, wc, .. })
        if wc.status == WcStatus::Other(4) && wc.vendor_err == 0x77);
    let second = matches!(calls.get(1), Some(Call::Send { tag: 2, wc, .. })
        if wc.status == WcStatus::RespTimeoutErr && wc.vendor_err == 0);
    assert!(first);
    assert!(second);
    Ok(())
}
