// SPDX-License-Identifier: GPL-2.0

//! Group A: create and post validation, bad input (scenarios 1–14).

use super::*;
use crate::engine::agent::SendSpec;

// `assert!` and `assert_eq!` that fail the running KUnit case instead of panicking, like those
// the suite module defines for its own cases.
macro_rules! assert {
    ($c:expr $(,)?) => {{
        kernel::kunit_assert!(
            "rmad_conformance",
            c"src/testing/suites/conformance/validation.rs",
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
            c"src/testing/suites/conformance/validation.rs",
            0,
            $l,
            $r
        );
    }};
}

pub(super) fn s01_create_zeroed() -> Result {
    let (_env, _rec, a) = setup(Behaviour::default())?;
    let before = a.buffers();
    let buf = a.create_mad(1, GFP_KERNEL)?;
    let zeroed = buf.mad().len() == 256 && buf.mad().iter().all(|b| *b == 0);
    let fields = buf.seg_count() == 0
        && buf.hdr_len() == 24
        && buf.data_len() == 232
        && buf.timeout_ms() == 0
        && buf.retries() == 0
        && buf.ah().is_none()
        && buf.context() == [0, 0]
        && Arc::ptr_eq(buf.agent(), &a);
    let counted = a.buffers() == before + 1;
    drop(buf);
    let uncounted = a.buffers() == before;
    a.unregister()?;
    assert!(zeroed);
    assert!(fields);
    assert!(counted);
    assert!(uncounted);
    Ok(())
}

pub(super) fn s02_create_too_large_einval() -> Result {
    let (_env, _rec, a) = setup(Behaviour::default())?;
    let r = a.create_send(
        SendSpec {
            hdr_len: 24,
            data_len: 233,
            ..SendSpec::mad(1)
        },
        GFP_KERNEL,
    );
    let code = errno(&r);
    drop(r);
    let count = a.buffers();
    a.unregister()?;
    assert_eq!(code, EINVAL.to_errno());
    assert_eq!(count, 0);
    Ok(())
}

pub(super) fn s03_create_rmpp_on_non_kernel_rmpp_agent_einval() -> Result {
    let env = Env::new()?;
    let rec = Recorder::new(Behaviour::default())?;
    let plain = env.agent(A, &rec, None)?;
    let user = rmpp_agent(&env, &rec, 1, wire::IB_MAD_USER_RMPP)?;
    let r1 = errno(&plain.create_send(
        SendSpec {
            rmpp_active: true,
            hdr_len: 56,
            data_len: 10,
            ..SendSpec::mad(1)
        },
        GFP_KERNEL,
    ));
    let r2 = errno(&user.create_send(
        SendSpec {
            rmpp_active: true,
            hdr_len: 56,
            data_len: 10,
            ..SendSpec::mad(1)
        },
        GFP_KERNEL,
    ));
    plain.unregister()?;
    user.unregister()?;
    assert_eq!(r1, EINVAL.to_errno());
    assert_eq!(r2, EINVAL.to_errno());
    Ok(())
}

pub(super) fn s04_create_on_kernel_rmpp_agent() -> Result {
    // Scenario 4: a kernel-RMPP agent (send-only, or for a class) creates an RMPP buffer of
    // 56 + 201 bytes as 2 segments of 200 bytes (199 of padding), each reachable, the third
    // not; the same as one MAD does not fit, on any agent. (rmad_rmpp_send sends them.)
    let env = Env::new()?;
    let rec = Recorder::new(Behaviour::default())?;
    let send_only = rmpp_agent(&env, &rec, 1, 0)?;
    let with_class = Agent::register(
        &env.engine,
        &env.transport,
        AgentConfig {
            port: A,
            qp_type: QpType::Gsi,
            reg: Some(reg(wire::IB_MGMT_CLASS_SUBN_ADM)),
            rmpp_version: 1,
            flags: 0,
            retry: Default::default(),
            send_handler: Some(rec.clone()),
            recv_handler: Some(rec.clone()),
        },
    );
    let registered = with_class.is_ok();
    let spec = |rmpp_active: bool| SendSpec {
        rmpp_active,
        hdr_len: 56,
        data_len: 201,
        ..SendSpec::mad(1)
    };
    let too_large = errno(&send_only.create_send(spec(false), GFP_KERNEL));
    let shape = send_only.create_send(spec(true), GFP_KERNEL).map(|mut b| {
        let reachable = [1, 2, 3, 0].map(|n| b.rmpp_segment(n).map(|s| s.len()));
        (b.seg_count(), b.seg_size(), b.mad().len(), reachable)
    });
    let count = send_only.buffers();
    send_only.unregister()?;
    if let Ok(a) = with_class {
        a.unregister()?;
    }
    assert!(registered);
    assert_eq!(too_large, EINVAL.to_errno());
    assert_eq!(
        shape.ok(),
        Some((2, 200, 256, [Some(200), Some(200), None, None]))
    );
    assert_eq!(count, 0);
    Ok(())
}

pub(super) fn s05_create_undefined_inputs_einval() -> Result {
    let env = Env::new()?;
    let rec = Recorder::new(Behaviour::default())?;
    // A user-RMPP agent: the checks below come before the agent's kind is looked at.
    let r = rmpp_agent(&env, &rec, 1, wire::IB_MAD_USER_RMPP)?;
    // (rmpp_active, hdr_len, data_len): each one corrupts memory or loops in 7.3.
    let cases: [(bool, i32, i32); 7] = [
        (true, 56, -1),
        (false, -1, 10),
        (false, 24, -5),
        (false, 257, 0),
        (true, 256, 1),
        (true, 30, 10),
        (false, 20, 0),
    ];
    let mut codes = [0i32; 7];
    for (i, (rmpp, h, d)) in cases.iter().enumerate() {
        codes[i] = errno(&r.create_send(
            SendSpec {
                rmpp_active: *rmpp,
                hdr_len: *h,
                data_len: *d,
                ..SendSpec::mad(1)
            },
            GFP_KERNEL,
        ));
    }
    let count = r.buffers();
    r.unregister()?;
    for c in codes {
        assert_eq!(c, EINVAL.to_errno());
    }
    assert_eq!(count, 0);
    Ok(())
}

pub(super) fn s07_post_without_send_handler_einval() -> Result {
    let env = Env::new()?;
    let rec = Recorder::new(Behaviour::default())?;
    let a = Agent::register(
        &env.engine,
        &env.transport,
        AgentConfig {
            port: A,
            qp_type: QpType::Gsi,
            reg: Some(reg(CLASS)),
            rmpp_version: 0,
            flags: 0,
            retry: Default::default(),
            send_handler: None,
            recv_handler: Some(rec.clone()),
        },
    )?;
    let buf = request(&a, CLASS, 7, B, 0, 0)?;
    let (code, buf) = match Agent::post(buf) {
        Ok(_) => (0, None),
        Err(e) => (e.err.to_errno(), Some(e.buf)),
    };
    // The buffer came back untouched and can be posted (and refused) again.
    let again = buf.map(|b| Agent::post(b).map_err(|e| e.err.to_errno()).err());
    sleep_ms(50);
    let handlers = rec.send_count();
    a.unregister()?;
    assert_eq!(code, EINVAL.to_errno());
    assert_eq!(again, Some(Some(EINVAL.to_errno())));
    assert_eq!(handlers, 0);
    Ok(())
}

pub(super) fn s08_rmpp_agent_non_rmpp_class_einval() -> Result {
    let env = Env::new()?;
    let rec = Recorder::new(Behaviour::default())?;
    let r = rmpp_agent(&env, &rec, 1, 0)?;
    let buf = request(&r, wire::IB_MGMT_CLASS_CM, 8, B, 0, 0)?;
    let code = Agent::post(buf)
        .map(|_| 0)
        .unwrap_or_else(|e| e.err.to_errno());
    r.unregister()?;
    assert_eq!(code, EINVAL.to_errno());
    Ok(())
}

pub(super) fn s09_empty_chain_posts_nothing() -> Result {
    // The Rust API has no NULL buffer; its analogue, an empty chain, returns success and
    // does nothing, as `ib_post_send_mad(NULL)` returns 0 [QUIRK].
    let (env, _rec, a) = setup(Behaviour::default())?;
    let r = Agent::post_chain(KVec::new());
    let ok = matches!(&r, Ok(c) if c.posted.is_empty() && c.unposted.is_empty());
    drop(r);
    let stats = a.stats();
    a.unregister()?;
    assert!(ok);
    assert_eq!(stats.posted, 0);
    assert_eq!(env.fabric().stats().transmitted, 0);
    Ok(())
}

pub(super) fn s10_chain_stops_at_failed_dispatch() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    let mut chain = KVec::new();
    for tag in 1..=3 {
        chain.push(request(&a, CLASS, tag, B, 0, 0)?, GFP_KERNEL)?;
    }
    env.fabric().set_knobs(|k| {
        k.pass_before_fail = 1;
        k.fail_posts = 1;
    });
    let r = Agent::post_chain(chain);
    let (code, posted, failed_tag, rest) = match r {
        Ok(_) => (0, 0, 0, KVec::new()),
        Err(e) => (
            e.err.to_errno(),
            e.posted.len(),
            e.failed.as_ref().map_or(0, |b| b.context()[0]),
            e.unposted,
        ),
    };
    let rest_tags: KVec<usize> = {
        let mut v = KVec::new();
        for b in rest.iter() {
            v.push(b.context()[0], GFP_KERNEL)?;
        }
        v
    };
    drop(rest);
    let one = rec.wait_sends(1);
    sleep_ms(50);
    let sends = rec.sends()?;
    finish(&env, &[&rec], &[&a])?;
    assert_eq!(code, EIO.to_errno());
    assert_eq!(posted, 1);
    assert_eq!(failed_tag, 2);
    assert_eq!(&rest_tags[..], &[3][..]);
    assert!(one);
    assert_eq!(&sends[..], &[(1, WcStatus::Success, 0)][..]);
    Ok(())
}

pub(super) fn s12_dispatch_failure_no_handler() -> Result {
    let (env, rec, a) = setup(Behaviour::default())?;
    env.fabric().set_knobs(|k| k.fail_posts = 1);
    let buf = request(&a, CLASS, 12, B, 100, 1)?;
    let code = Agent::post(buf)
        .map(|_| 0)
        .unwrap_or_else(|e| e.err.to_errno());
    sleep_ms(100);
    let handlers = rec.send_count();
    let outstanding = a.outstanding();
    a.unregister()?;
    assert_eq!(code, EIO.to_errno());
    assert_eq!(handlers, 0);
    assert_eq!(outstanding, 0);
    Ok(())
}

pub(super) fn s13_outstanding_buffer_cannot_be_posted_again() -> Result {
    // The buffer moved into the engine at post; the client holds only a handle, so a
    // second post of an outstanding buffer cannot be written. What remains checkable is
    // that the handle of a post goes stale once the buffer is back and re-posted.
    let (env, rec, a) = setup(Behaviour {
        keep: true,
        ..Behaviour::default()
    })?;
    let h1 = post(request(&a, CLASS, 13, B, 0, 0)?)?;
    let done = rec.wait_sends(1);
    let mut kept = rec.take_kept();
    let buf = kept.pop();
    let h2 = match buf {
        Some(b) => Some(post(b)?),
        None => None,
    };
    let stale = h1.cancel().map_err(|e| e.to_errno()).err();
    let two = rec.wait_sends(2);
    drop(h2);
    finish(&env, &[&rec], &[&a])?;
    assert!(done);
    assert!(two);
    assert_eq!(stale, Some(EINVAL.to_errno()));
    Ok(())
}

pub(super) fn s14_negative_retries_or_timeout_einval() -> Result {
    let (env, _rec, a) = setup(Behaviour::default())?;
    let c1 = Agent::post(request(&a, CLASS, 14, B, 100, -1)?)
        .map(|_| 0)
        .unwrap_or_else(|e| e.err.to_errno());
    let c2 = Agent::post(request(&a, CLASS, 14, B, -1, 0)?)
        .map(|_| 0)
        .unwrap_or_else(|e| e.err.to_errno());
    let mut no_ah = request(&a, CLASS, 14, B, 0, 0)?;
    no_ah.set_ah(None);
    let c3 = Agent::post(no_ah)
        .map(|_| 0)
        .unwrap_or_else(|e| e.err.to_errno());
    let sent = env.fabric().stats().transmitted;
    a.unregister()?;
    assert_eq!(c1, EINVAL.to_errno());
    assert_eq!(c2, EINVAL.to_errno());
    assert_eq!(c3, EINVAL.to_errno());
    assert_eq!(sent, 0);
    Ok(())
}
