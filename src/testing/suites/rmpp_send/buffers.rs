// SPDX-License-Identifier: GPL-2.0

//! Segmented send buffers: the rules of creating and posting them, and large ones that allocate or
//! fail quietly.

use super::*;

// `assert!` and `assert_eq!` that fail the running KUnit case instead of panicking, like those
// the suite module defines for its own cases.
macro_rules! assert {
    ($c:expr $(,)?) => {{
        kernel::kunit_assert!(
            "rmad_rmpp_send",
            c"src/testing/suites/rmpp_send/buffers.rs",
            0,
            $c
        );
    }};
}
#[allow(unused_macros)]
macro_rules! assert_eq {
    ($l:expr, $r:expr $(,)?) => {{
        kernel::kunit_assert_eq!(
            "rmad_rmpp_send",
            c"src/testing/suites/rmpp_send/buffers.rs",
            0,
            $l,
            $r
        );
    }};
}

pub(super) fn segmented_create_and_post_rules() -> Result {
    // A user-RMPP agent cannot create a segmented buffer (EINVAL, as C); a kernel-RMPP
    // agent's plain buffer whose header the client turned into RMPP DATA, ACTIVE cannot be
    // posted (EINVAL: it has no segments), and nothing is lost: the buffer comes back.
    let t = Pair::new(Peer::Script)?;
    let spec = SendSpec {
        rmpp_active: true,
        hdr_len: 56,
        data_len: 400,
        ..SendSpec::mad(1)
    };
    let user = t.p.create_send(spec, GFP_KERNEL).err();
    let mut buf = mad_to(
        &t.r,
        1,
        mad_hdr(SA, wire::IB_MGMT_METHOD_SET, t.tid(50)),
        2,
        None,
    )?;
    RmppHdr {
        version: 1,
        rmpp_type: wire::IB_MGMT_RMPP_TYPE_DATA,
        flags: A | F | L,
        ..RmppHdr::default()
    }
    .write(buf.mad_mut())
    .map_err(|_| EINVAL)?;
    let refused = Agent::post(buf).err().map(|e| (e.err, e.buf.seg_count()));
    let segmented =
        t.r.create_send(spec, GFP_KERNEL)
            .map(|b| (b.seg_count(), b.seg_size()));
    t.finish()?;
    assert_eq!(user, Some(EINVAL));
    assert_eq!(refused, Some((EINVAL, 0)));
    assert_eq!(segmented.ok(), Some((2, DATA)));
    Ok(())
}

pub(super) fn large_segmented_buffers_allocate_or_fail_quietly() -> Result {
    // Scenario 6 and what kmalloc cannot give: an 8 MiB transfer (41 944 segments; more
    // than kmalloc's 4 MiB in one piece) is created for a caller that may sleep, its last
    // segment writable; for a caller that may not, the same is ENOMEM, and so is 2 GiB for
    // anyone; nothing is left counted on the agent. A second one is freed with interrupts
    // off under a spinlock, as the C API allows: kvmalloc'ed bytes are freed atomic-safely
    // (`vfree` there would be "sleeping function called from invalid context", which
    // rmad_vm_run.kernel_log_clean would report).
    let t = Pair::new(Peer::Script)?;
    let big = SendSpec {
        rmpp_active: true,
        hdr_len: 56,
        data_len: 8 << 20,
        ..SendSpec::mad(1)
    };
    let before = t.r.buffers();
    let made = t.r.create_send(big, GFP_KERNEL).map(|mut b| {
        let n = b.seg_count();
        let last = b.rmpp_segment(n).map(|s| {
            s.fill(0xa5);
            s.len()
        });
        (n, last, t.r.buffers())
    });
    let second = t.r.create_send(big, GFP_KERNEL);
    let freed_atomically = second.is_ok();
    let lock = KBox::pin_init(kernel::new_spinlock_irq!(second.ok()), GFP_KERNEL)?;
    {
        let mut g = lock.lock();
        drop(g.take());
    }
    let atomic = t.r.create_send(big, GFP_ATOMIC).err();
    let huge =
        t.r.create_send(
            SendSpec {
                data_len: i32::MAX,
                ..big
            },
            GFP_KERNEL,
        )
        .err();
    let after = t.r.buffers();
    t.finish()?;
    assert_eq!(
        made.ok(),
        Some((41_944, Some(DATA), before.saturating_add(1)))
    );
    assert!(freed_atomically);
    assert_eq!(atomic, Some(ENOMEM));
    assert_eq!(huge, Some(ENOMEM));
    assert_eq!(after, before);
    Ok(())
}
