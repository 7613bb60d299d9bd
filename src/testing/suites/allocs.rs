// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_allocs`: what a send costs the slab allocator, counted exactly
//! ([`crate::testing::allocs`]): a send buffer is one allocation, from rmad's slab cache,
//! which its drop returns, and modify and cancel allocate nothing.

#[kernel::prelude::kunit_tests(rmad_allocs)]
mod tests {
    use crate::{
        engine::send::SendBuf,
        mad::state::{
            SendState,
            WcStatus, //
        },
        testing::{
            allocs,
            post,
            request,
            wait_state,
            Behaviour,
            Env,
            Recorder, //
        },
    };
    use kernel::prelude::*;

    /// Buffers per case: enough that one allocation more per buffer cannot hide.
    const N: usize = 64;
    /// The class the cases send (vendor class 0x0b: nobody answers it).
    const CLASS: u8 = 0x0b;
    /// The most bytes a buffer of one IB MAD may take from the allocator: its record with the
    /// MAD (the C layer's one `ib_mad_send_wr_private` with its MAD is a 1 KiB object).
    const MAX_BYTES: usize = 768;

    #[test]
    fn a_send_buffer_is_one_allocation_which_its_drop_returns() -> Result {
        let env = Env::new()?;
        let rec = Recorder::new(Behaviour::default())?;
        let a = env.agent(1, &rec, None)?;
        let mut bufs = KVec::<SendBuf>::with_capacity(N, GFP_KERNEL)?;
        let (made, created) = allocs::count(|| {
            let mut made = 0usize;
            for _ in 0..N {
                if let Ok(b) = a.create_mad(1, GFP_KERNEL) {
                    if bufs.push_within_capacity(b).is_ok() {
                        made += 1;
                    }
                }
            }
            made
        })?;
        let ((), dropped) = allocs::count(|| bufs.clear())?;
        a.unregister()?;
        pr_info!("rmad_allocs: {N} buffers: created {created:?}, dropped {dropped:?}\n");
        assert_eq!(made, N);
        assert_eq!(created.allocs, N);
        assert_eq!(created.from_cache, N);
        assert!(created.bytes <= MAX_BYTES * N);
        assert_eq!(created.frees, 0);
        assert_eq!(dropped.frees, N);
        assert_eq!(dropped.allocs, 0);
        Ok(())
    }

    #[test]
    fn modify_and_cancel_allocate_nothing() -> Result {
        let env = Env::new()?;
        let rec = Recorder::new(Behaviour::default())?;
        let a = env.agent(1, &rec, None)?;
        let mut handles = KVec::with_capacity(N, GFP_KERNEL)?;
        for tag in 0..N {
            let h = post(request(&a, CLASS, tag, 2, 60_000, 0)?)?;
            handles.push(h, GFP_KERNEL)?;
        }
        let waiting = handles
            .iter()
            .all(|h| wait_state(&a, h, SendState::WaitResp));
        let (results, counted) = allocs::count(|| {
            let modified = handles.iter().filter(|h| h.modify(30_000).is_ok()).count();
            let cancelled = handles.iter().filter(|h| h.cancel().is_ok()).count();
            (modified, cancelled)
        })?;
        let flushed = rec.wait_sends(N);
        let sends = rec.sends()?;
        a.unregister()?;
        pr_info!("rmad_allocs: {N} modifies and {N} cancels: {counted:?}\n");
        assert!(waiting);
        assert_eq!(results, (N, N));
        assert_eq!(counted.allocs, 0);
        assert!(flushed);
        assert_eq!(sends.len(), N);
        assert!(sends.iter().all(|s| s.1 == WcStatus::WrFlushErr));
        Ok(())
    }
}
