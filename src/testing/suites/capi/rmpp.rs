// SPDX-License-Identifier: GPL-2.0

//! Suite `rmad_capi`, kernel RMPP through the C API: the segments of a send buffer, and a
//! transfer from ib_core received as one message.

use super::*;

// `assert!` and `assert_eq!` that fail the running KUnit case instead of panicking, like those
// the suite module defines for its own cases.
#[allow(unused_macros)]
macro_rules! assert {
    ($c:expr $(,)?) => {{
        kernel::kunit_assert!("rmad_capi", c"src/testing/suites/capi/rmpp.rs", 0, $c);
    }};
}
#[allow(unused_macros)]
macro_rules! assert_eq {
    ($l:expr, $r:expr $(,)?) => {{
        kernel::kunit_assert_eq!("rmad_capi", c"src/testing/suites/capi/rmpp.rs", 0, $l, $r);
    }};
}

pub(super) fn kernel_rmpp_agent_segments_through_the_c_api() -> Result {
    // rmad.h: rmpp_version 1 without IB_MAD_USER_RMPP is kernel RMPP: an RMPP buffer of
    // 56 + 201 bytes is 2 segments of 200 bytes, rmad_send_buf_seg_count() says so, and
    // rmad_get_rmpp_segment() reaches segments 1 and 2, 200 bytes apart, and nothing else;
    // with the flag (user RMPP) rmpp_active is -EINVAL, as in C. `race` outlives the
    // agents (unregistered below).
    let race = register_race()?;
    let mut codes = [0i32; 2];
    let mut shape = None;
    let mut registered = 0;
    for (i, flags) in [0, wire::IB_MAD_USER_RMPP].into_iter().enumerate() {
        let a = sa_rmpp_agent(&race, flags);
        if is_err(a) {
            continue;
        }
        registered += 1;
        let b = rmad_create_send_mad(a, 1, 0, 1, 56, 201, kernel::bindings::GFP_KERNEL, 1);
        if let Some(c) = codes.get_mut(i) {
            *c = if is_err(b) { ptr_errno(b) } else { 0 };
        }
        if !is_err(b) {
            let mut size = 0u32;
            // SAFETY: `size` is a valid `u32`.
            let count = unsafe { rmad_send_buf_seg_count(b, &mut size) };
            let segs = [1, 2, 3, 0, -1].map(|n| rmad_get_rmpp_segment(b, n) as usize);
            let apart = segs[1].wrapping_sub(segs[0]);
            let reached = segs.map(|p| p != 0);
            shape = Some((count, size, apart, reached));
            let _ = rmad_free_send_mad(b);
        }
        let _ = rmad_unregister_agent(a);
    }
    assert_eq!(registered, 2);
    assert_eq!(codes[0], 0);
    assert_eq!(codes[1], EINVAL.to_errno());
    assert_eq!(
        shape,
        Some((2, 200, 200, [true, true, false, false, false]))
    );
    Ok(())
}

pub(super) fn kernel_rmpp_agent_gets_an_ib_core_transfer_as_one_message() -> Result {
    // rmad.h, @mad_len: on a kernel-RMPP agent, a reassembled message. A kernel-RMPP
    // ib_core agent on rxe0 answers a GET of the SA class with 20 000 bytes (100 segments);
    // the C API's receive handler gets it once, 56 + 20 000 bytes, kept past the handler
    // and read back with every byte where it belongs.
    const SA: u8 = wire::IB_MGMT_CLASS_SUBN_ADM;
    let port = crate::verbs::find_port(c"rxe0", 1);
    // The test VM always creates rxe0; without it the suite fails.
    assert!(port.is_some());
    let Some(port) = port else {
        return Ok(());
    };
    let responder = crate::testing::ib_responder::IbResponder::start_rmpp(&port, SA, 20_000);
    assert!(responder.is_some());
    // To the IPv6 link-local GID, where ib_core's RMPP sender can match ACKs.
    let mut own = rxe_ah()?;
    own.sgid_index = 0;
    // SAFETY: The name is NUL-terminated; `dgid` has 16 bytes.
    kernel::error::to_result(unsafe {
        rmad_port_gid(c"rxe0".as_char_ptr(), 1, 0, own.dgid.as_mut_ptr())
    })?;
    let probe = CRecorder::new(
        CBehaviour {
            free: true,
            keep_first_recv: true,
            ..CBehaviour::default()
        },
        own,
    )?;
    // SAFETY: The name is NUL-terminated; the handlers match the C prototypes; the context
    // outlives the agent (unregistered below).
    let a = unsafe {
        rmad_register_agent(
            c"rxe0".as_char_ptr(),
            1,
            1,
            core::ptr::null(),
            1,
            Some(c_recorder_send),
            Some(c_recorder_recv),
            probe.ctx(),
            0,
        )
    };
    assert!(!is_err(a));
    if is_err(a) {
        return Ok(());
    }
    let b = c_request(a, &own, 1, GET, 20_000)?;
    // SAFETY: The client owns the buffer; its MAD has 256 bytes.
    unsafe { *rmad_send_buf_mad(b).cast::<u8>().add(1) = SA };
    // SAFETY: Plain call.
    let posted = unsafe { rmad_post_send_mad(b, core::ptr::null_mut()) } == 0;
    let done = probe.wait(|g| g.recvs >= 1) && probe.wait_sends(1);
    let first = probe.inner.lock().recv_calls.first().copied();
    let kept = to_handle(first.map_or(0, |c| c.0));
    let mut len = 0u32;
    // SAFETY: `len` is valid for a write.
    let mad = unsafe { rmad_recv_buf_mad(kept, &mut len) }.cast::<u8>();
    let intact = !mad.is_null() && {
        // SAFETY: A non-NULL MAD is valid for `len` bytes until it is freed (below).
        let bytes = unsafe { core::slice::from_raw_parts(mad, usize::try_from(len)?) };
        bytes.get(56..).is_some_and(|d| {
            d.chunks(200)
                .enumerate()
                .all(|(i, c)| c.iter().all(|x| usize::from(*x) == (i + 1) % 256))
        })
    };
    let freed = rmad_free_recv_mad(kept);
    let unreg = rmad_unregister_agent(a);
    drop(responder);
    assert!(posted);
    assert!(done);
    assert_eq!(first.map(|c| c.2), Some(0));
    assert_eq!(len, 20_056);
    assert!(intact);
    assert_eq!(freed, 0);
    assert_eq!(unreg, 0);
    Ok(())
}
