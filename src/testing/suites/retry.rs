// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_retry`: the retry rules a client opts into (deadline, backoff, one-shot
//! modify; Documentation/behaviour.md §2.11) on the loopback fabric (`lb0`) and on soft-RoCE
//! (`rxe0`), through the Rust API and the C API.
//!
//! A schedule is checked as the waits the agent began, in order (`Stats::waits`, test flavour):
//! numbers the rules decide, never a measured duration; the sends go where nobody answers.

#[kernel::prelude::kunit_tests(rmad_retry)]
mod tests {
    use crate::{
        capi::{
            self,
            rmad_cancel_mad,
            rmad_create_send_mad,
            rmad_modify_mad,
            rmad_modify_post,
            rmad_post_send,
            rmad_post_send_mad,
            rmad_send_buf_retries,
            rmad_send_buf_set,
            rmad_send_buf_set_retry,
            rmad_unregister_agent,
            RmadAh,
            RmadRegReq,
            RMAD_RETRY_BACKOFF as C_BACKOFF,
            RMAD_RETRY_ONE_SHOT as C_ONE_SHOT, //
        },
        engine::{
            agent::{
                Agent,
                Stats, //
            },
            send::SendBuf, //
        },
        mad::{
            retry::Rules,
            state::{
                SendState,
                WcStatus, //
            },
            wire,
        },
        testing::{
            capi_client::{
                c_agent_with,
                c_agent_with_flags,
                c_request,
                lid_ah,
                rxe_ah,
                write_header_of,
                CBehaviour,
                CRecorder, //
            },
            lb0,
            post,
            reg,
            register_gsi,
            request,
            rxe_agent,
            rxe_request,
            sleep_ms,
            wait_for,
            wait_state,
            Behaviour,
            Recorder, //
        },
    };
    use core::ffi::c_void;
    use kernel::{
        prelude::*,
        sync::Arc, //
    };

    /// A LID that no port of the loopback fabric has: nobody answers.
    const NOWHERE: u16 = 0x55;

    /// `RMAD_WC_RESP_TIMEOUT_ERR` and `RMAD_WC_WR_FLUSH_ERR` as the C API reports them.
    const C_RESP_TIMEOUT: i32 = 20;
    const C_FLUSH: i32 = 5;

    /// Backoff alone.
    const BACKOFF: Rules = Rules {
        backoff: true,
        one_shot_modify: false,
        deadline_ms: 0,
    };

    /// One-shot modify alone.
    const ONE_SHOT: Rules = Rules {
        backoff: false,
        one_shot_modify: true,
        deadline_ms: 0,
    };

    /// A deadline alone.
    const fn deadline(ms: u32) -> Rules {
        Rules {
            backoff: false,
            one_shot_modify: false,
            deadline_ms: ms,
        }
    }

    /// An agent on port 1 of `lb0` that records its handlers' calls.
    fn lb0_agent() -> Result<(Arc<Agent>, Arc<Recorder>)> {
        let (engine, transport) = capi::devices::find(lb0::NAME, 1).ok_or(ENODEV)?;
        let rec = Recorder::new(Behaviour::default())?;
        let a = register_gsi(&engine, &transport, 1, &rec, None)?;
        Ok((a, rec))
    }

    /// A GET with tag `tag` from `a` to nobody, with `rules`.
    fn lost_get(
        a: &Arc<Agent>,
        tag: usize,
        timeout_ms: i32,
        retries: i32,
        rules: Rules,
    ) -> Result<SendBuf> {
        let mut buf = request(
            a,
            wire::IB_MGMT_CLASS_PERF_MGMT,
            tag,
            NOWHERE,
            timeout_ms,
            retries,
        )?;
        buf.set_retry_rules(rules);
        Ok(buf)
    }

    /// The waits an agent began (its counters `stats`), in milliseconds, from the `first` on.
    fn waits_from(stats: &Stats, first: usize) -> Result<KVec<u32>> {
        let mut waits = KVec::new();
        waits.extend_from_slice(
            stats.waits.as_slice().get(first..).unwrap_or(&[]),
            GFP_KERNEL,
        )?;
        Ok(waits)
    }

    /// The waits the agent began other than those of `holder_ms`, in order. Holders' waits
    /// begin when their transmissions complete, which may come after the send under test began
    /// its own, or never for a holder cancelled before it completed.
    fn waits_except(stats: &Stats, holder_ms: u32) -> Result<KVec<u32>> {
        let mut waits = KVec::new();
        for &w in stats.waits.as_slice().iter().filter(|&&w| w != holder_ms) {
            waits.push(w, GFP_KERNEL)?;
        }
        Ok(waits)
    }

    /// Posts `buf` and waits for its one send-handler call; returns the calls, the waits the
    /// agent began and its transmissions, after unregistering it.
    fn run_one(a: Arc<Agent>, rec: &Arc<Recorder>, buf: SendBuf) -> Result<Run> {
        let posted = post(buf).is_ok();
        let done = rec.wait_sends(1);
        let stats = a.stats();
        a.unregister()?;
        Ok(Run {
            completed: posted && done,
            sends: rec.sends()?,
            waits: waits_from(&stats, 0)?,
            transmitted: stats.transmitted,
        })
    }

    /// What one send did.
    struct Run {
        /// Posted, and its handler ran.
        completed: bool,
        /// The send-handler calls: tag, status, retries.
        sends: KVec<(usize, WcStatus, i32)>,
        /// The waits its agent began, in milliseconds.
        waits: KVec<u32>,
        /// Transmissions.
        transmitted: u64,
    }

    #[test]
    fn linear_waits_the_timeout_after_every_transmission() -> Result {
        let (a, rec) = lb0_agent()?;
        let buf = lost_get(&a, 1, 20, 5, Rules::default())?;
        let r = run_one(a, &rec, buf)?;
        assert!(r.completed);
        assert_eq!(&r.sends[..], &[(1, WcStatus::RespTimeoutErr, 5)][..]);
        assert_eq!(&r.waits[..], &[20, 20, 20, 20, 20, 20][..]);
        assert_eq!(r.transmitted, 6);
        Ok(())
    }

    #[test]
    fn backoff_doubles_each_wait_after_four() -> Result {
        let (a, rec) = lb0_agent()?;
        let buf = lost_get(&a, 2, 10, 7, BACKOFF)?;
        let r = run_one(a, &rec, buf)?;
        assert!(r.completed);
        assert_eq!(&r.sends[..], &[(2, WcStatus::RespTimeoutErr, 7)][..]);
        assert_eq!(&r.waits[..], &[10, 10, 10, 10, 20, 40, 80, 160][..]);
        assert_eq!(r.transmitted, 8);
        Ok(())
    }

    /// Checks a send that its deadline (`deadline_ms`) ended long before its retries ran out:
    /// `RESP_TIMEOUT_ERR`, fewer retries than allowed, one wait per transmission, none longer
    /// than the timeout, together no longer than the deadline.
    fn ended_by_deadline(
        r: &Run,
        tag: usize,
        timeout_ms: u32,
        retries: i32,
        deadline_ms: u32,
    ) -> bool {
        let Some(&(t, status, done)) = r.sends.first() else {
            return false;
        };
        let total: u32 = r.waits.iter().fold(0u32, |s, w| s.saturating_add(*w));
        r.completed
            && r.sends.len() == 1
            && t == tag
            && status == WcStatus::RespTimeoutErr
            && done < retries
            && u64::try_from(done).is_ok_and(|d| d.saturating_add(1) == r.transmitted)
            && usize::try_from(r.transmitted).is_ok_and(|n| n == r.waits.len())
            && r.waits.len() >= 2
            && r.waits.iter().all(|w| *w <= timeout_ms)
            && total <= deadline_ms
    }

    #[test]
    fn deadline_ends_a_send_before_its_retries_run_out() -> Result {
        let (a, rec) = lb0_agent()?;
        let buf = lost_get(&a, 3, 50, 1000, deadline(400))?;
        let r = run_one(a, &rec, buf)?;
        pr_info!(
            "rmad_retry: deadline 400 ms, timeout 50 ms: waits {:?}\n",
            &r.waits[..]
        );
        assert!(ended_by_deadline(&r, 3, 50, 1000, 400));
        Ok(())
    }

    /// Posts a GET with a first wait of `timeout_ms` and `retries`, modifies it to `modify_ms`
    /// once it waits, and returns the waits its agent began.
    fn modified(
        rules: Rules,
        timeout_ms: i32,
        retries: i32,
        modify_ms: i32,
    ) -> Result<(bool, KVec<u32>)> {
        let (a, rec) = lb0_agent()?;
        let h = post(lost_get(&a, 4, timeout_ms, retries, rules)?)?;
        let waiting = wait_state(&a, &h, SendState::WaitResp);
        let modified = h.modify(modify_ms).is_ok();
        let done = rec.wait_sends(1);
        let stats = a.stats();
        a.unregister()?;
        let sends = rec.sends()?;
        let waits = waits_from(&stats, 0)?;
        let ok = waiting
            && modified
            && done
            && sends.first().map(|s| (s.1, s.2)) == Some((WcStatus::RespTimeoutErr, retries));
        Ok((ok, waits))
    }

    #[test]
    fn modify_under_each_mode() -> Result {
        // The C layer's rule: the modify's timeout is every later wait's.
        let (ok, waits) = modified(Rules::default(), 1000, 2, 60)?;
        assert!(ok);
        assert_eq!(&waits[..], &[1000, 60, 60, 60][..]);
        // One-shot: the current wait only; then the send's own timeout again.
        let (ok, waits) = modified(ONE_SHOT, 1000, 2, 60)?;
        assert!(ok);
        assert_eq!(&waits[..], &[1000, 60, 1000, 1000][..]);
        // Backoff: the modify starts the count again (its own wait is the first).
        let (ok, waits) = modified(BACKOFF, 1000, 6, 10)?;
        assert!(ok);
        assert_eq!(&waits[..], &[1000, 10, 10, 10, 10, 20, 40, 80][..]);
        // A deadline: the modify extends it by its timeout, so the retry after the modify's
        // wait waits its whole timeout (without the extension, less than 500 ms were left).
        let (ok, waits) = modified(deadline(1500), 1000, 1, 1000)?;
        assert!(ok);
        assert_eq!(&waits[..], &[1000, 1000, 1000][..]);
        Ok(())
    }

    /// The rules each cancel and unregistration case runs under.
    const MODES: [Rules; 4] = [
        Rules {
            backoff: false,
            one_shot_modify: false,
            deadline_ms: 0,
        },
        BACKOFF,
        ONE_SHOT,
        Rules {
            backoff: true,
            one_shot_modify: true,
            deadline_ms: 60_000,
        },
    ];

    #[test]
    fn cancel_under_each_mode_flushes_once() -> Result {
        for (tag, rules) in (10usize..).zip(MODES) {
            let (a, rec) = lb0_agent()?;
            let h = post(lost_get(&a, tag, 60_000, 3, rules)?)?;
            let waiting = wait_state(&a, &h, SendState::WaitResp);
            let cancelled = h.cancel().is_ok();
            let done = rec.wait_sends(1);
            a.unregister()?;
            assert!(waiting && cancelled && done);
            assert_eq!(&rec.sends()?[..], &[(tag, WcStatus::WrFlushErr, 0)][..]);
        }
        Ok(())
    }

    #[test]
    fn unregister_under_each_mode_flushes_each_once() -> Result {
        let (a, rec) = lb0_agent()?;
        let mut handles = KVec::new();
        for (tag, rules) in (20usize..).zip(MODES) {
            handles.push(post(lost_get(&a, tag, 60_000, 3, rules)?)?, GFP_KERNEL)?;
        }
        let waiting = handles
            .iter()
            .all(|h| wait_state(&a, h, SendState::WaitResp));
        a.unregister()?;
        let sends = rec.sends()?;
        assert!(waiting);
        assert_eq!(sends.len(), 4);
        for tag in 20usize..24 {
            let calls = sends.iter().filter(|s| s.0 == tag).count();
            assert_eq!(calls, 1);
            assert!(sends.contains(&(tag, WcStatus::WrFlushErr, 0)));
        }
        Ok(())
    }

    #[test]
    fn rxe_backoff_and_deadline_schedules() -> Result {
        // Backoff on rxe0: SENDs to its own QP1, which ib_core never answers.
        let rec = Recorder::new(Behaviour::default())?;
        let s = rxe_agent(&rec)?;
        assert!(s.is_some());
        let Some((port, a)) = s else {
            return Ok(());
        };
        let mut buf = rxe_request(&port, &a, 5, wire::IB_MGMT_METHOD_SEND, 10, 6)?;
        buf.set_retry_rules(BACKOFF);
        let r = run_one(a, &rec, buf)?;
        assert!(r.completed);
        assert_eq!(&r.sends[..], &[(5, WcStatus::RespTimeoutErr, 6)][..]);
        assert_eq!(&r.waits[..], &[10, 10, 10, 10, 20, 40, 80][..]);
        assert_eq!(r.transmitted, 7);
        // A deadline on rxe0.
        let rec = Recorder::new(Behaviour::default())?;
        let Some((port, a)) = rxe_agent(&rec)? else {
            return Err(ENODEV);
        };
        let mut buf = rxe_request(&port, &a, 6, wire::IB_MGMT_METHOD_SEND, 50, 1000)?;
        buf.set_retry_rules(deadline(400));
        let r = run_one(a, &rec, buf)?;
        assert!(ended_by_deadline(&r, 6, 50, 1000, 400));
        Ok(())
    }

    /// Through the C API on rxe0: an agent registered with `flags`, one SEND that nobody
    /// answers, with `retry_flags` and `deadline_ms` set on the buffer unless `None`; returns
    /// the handler's status, the buffer's retries, and the waits its agent began.
    fn c_send(
        flags: u32,
        per_buf: Option<(u32, u32)>,
        timeout_ms: i32,
        retries: i32,
    ) -> Result<(i32, i32, KVec<u32>)> {
        let ah: RmadAh = rxe_ah()?;
        let probe = CRecorder::new(CBehaviour::default(), ah)?;
        let agent = c_agent_with_flags(&probe, flags)?;
        let b = c_request(agent, &ah, 7, wire::IB_MGMT_METHOD_SEND, timeout_ms)?;
        // SAFETY: The client owns `b`; `ah` is valid.
        let set = unsafe { rmad_send_buf_set(b, &ah, timeout_ms, retries, core::ptr::null_mut()) };
        let set_retry = per_buf.map_or(0, |(f, d)| rmad_send_buf_set_retry(b, f, d));
        // SAFETY: A NULL `bad_send_buf` is allowed.
        let posted = unsafe { rmad_post_send_mad(b, core::ptr::null_mut()) };
        let done = probe.wait_sends(1);
        let stats = capi::engine_agent_of(agent)?.stats();
        let status = probe.sends()?.first().map_or(-1, |s| s.2);
        let done_retries = rmad_send_buf_retries(b);
        let _ = crate::capi::rmad_free_send_mad(b);
        let _ = rmad_unregister_agent(agent);
        let waits = waits_from(&stats, 0)?;
        if set != 0 || set_retry != 0 || posted != 0 || !done {
            return Err(EINVAL);
        }
        Ok((status, done_retries, waits))
    }

    #[test]
    fn c_api_registration_flag_and_per_buffer_rules() -> Result {
        // The agent's default, from its registration.
        let (status, retries, waits) = c_send(C_BACKOFF, None, 10, 5)?;
        assert_eq!((status, retries), (C_RESP_TIMEOUT, 5));
        assert_eq!(&waits[..], &[10, 10, 10, 10, 20, 40][..]);
        // A buffer overrides it: back to the C layer's rules.
        let (status, retries, waits) = c_send(C_BACKOFF, Some((0, 0)), 10, 5)?;
        assert_eq!((status, retries), (C_RESP_TIMEOUT, 5));
        assert_eq!(&waits[..], &[10, 10, 10, 10, 10, 10][..]);
        // A deadline through the C API ends the send before its retries.
        let (status, retries, waits) = c_send(0, Some((0, 300)), 50, 1000)?;
        let total = waits.iter().fold(0u32, |s, w| s.saturating_add(*w));
        assert_eq!(status, C_RESP_TIMEOUT);
        assert!((1..1000).contains(&retries));
        assert!(total <= 300);
        Ok(())
    }

    #[test]
    fn c_api_refuses_what_it_does_not_know() -> Result {
        let ah: RmadAh = rxe_ah()?;
        let probe = CRecorder::new(CBehaviour::default(), ah)?;
        // A flag rmad_send_buf_set_retry() does not know is refused (the registration-only
        // RMAD_DETACH_BUFFERS too).
        let agent = c_agent_with_flags(&probe, C_ONE_SHOT)?;
        let b = c_request(agent, &ah, 8, wire::IB_MGMT_METHOD_SEND, 60_000)?;
        let unknown = rmad_send_buf_set_retry(b, 1 << 3, 0);
        let detach = rmad_send_buf_set_retry(b, 1 << 31, 0);
        let ok = rmad_send_buf_set_retry(b, C_ONE_SHOT | C_BACKOFF, 1000);
        // SAFETY: A NULL `bad_send_buf` is allowed.
        let posted = unsafe { rmad_post_send_mad(b, core::ptr::null_mut()) };
        // Outstanding: its rules cannot change.
        let busy = rmad_send_buf_set_retry(b, 0, 0);
        let modify = rmad_modify_mad(b, 100);
        let cancel = rmad_cancel_mad(b);
        let done = probe.wait_sends(1);
        let status = probe.sends()?.first().map_or(-1, |s| s.2);
        let _ = crate::capi::rmad_free_send_mad(b);
        let _ = rmad_unregister_agent(agent);
        let stale = rmad_send_buf_set_retry(b, 0, 0);
        assert_eq!((unknown, detach, ok, posted), (-22, -22, 0, 0));
        assert_eq!((busy, modify, cancel), (-16, 0, 0));
        assert!(done);
        assert_eq!(status, C_FLUSH);
        assert_eq!(stale, -22);
        Ok(())
    }

    /// An SA agent on `lb0` (solicited flow control: its sends past `sol_fc_max` wait in the
    /// backlog) and its recorder.
    fn sa_agent() -> Result<(Arc<Agent>, Arc<Recorder>)> {
        let (engine, transport) = capi::devices::find(lb0::NAME, 1).ok_or(ENODEV)?;
        let rec = Recorder::new(Behaviour::default())?;
        let sa = Some(reg(wire::IB_MGMT_CLASS_SUBN_ADM));
        let a = register_gsi(&engine, &transport, 1, &rec, sa)?;
        Ok((a, rec))
    }

    /// An SA GET with tag `tag` from `a` to nobody.
    fn sa_get(a: &Arc<Agent>, tag: usize, timeout_ms: i32, retries: i32) -> Result<SendBuf> {
        request(
            a,
            wire::IB_MGMT_CLASS_SUBN_ADM,
            tag,
            NOWHERE,
            timeout_ms,
            retries,
        )
    }

    #[test]
    fn deadline_ends_a_send_held_back_by_flow_control() -> Result {
        // A send that waits in the backlog (every flow-control slot taken by sends of 60 s)
        // ends by its deadline, not when a slot frees: RESP_TIMEOUT_ERR, never transmitted.
        let (a, rec) = sa_agent()?;
        let limit = usize::try_from(a.sol_fc_max)?;
        let mut handles = KVec::new();
        for tag in 0..limit {
            handles.push(post(sa_get(&a, tag, 60_000, 0)?)?, GFP_KERNEL)?;
        }
        let mut late = sa_get(&a, limit, 60_000, 3)?;
        late.set_retry_rules(deadline(100));
        let late = post(late)?;
        let queued = a.send_state(&late) == Some(SendState::Queued);
        let ended = rec.wait_sends(1);
        let stats = a.stats();
        let first = rec.sends()?;
        for h in handles.iter() {
            let _ = h.cancel();
        }
        a.unregister()?;
        assert!(limit > 0 && queued && ended);
        assert_eq!(&first[..], &[(limit, WcStatus::RespTimeoutErr, 0)][..]);
        assert_eq!(stats.transmitted, u64::try_from(limit)?);

        // A retry that finds the backlog taken waits there too: past the deadline it ends, and
        // the retry it never sent is not counted.
        let (a, rec) = sa_agent()?;
        let limit = usize::try_from(a.sol_fc_max)?;
        let mut retrying = sa_get(&a, 0, 50, 3)?;
        retrying.set_retry_rules(deadline(400));
        let mut handles = KVec::new();
        handles.push(post(retrying)?, GFP_KERNEL)?;
        for tag in 1..=limit {
            handles.push(post(sa_get(&a, tag, 60_000, 0)?)?, GFP_KERNEL)?;
        }
        let ended = rec.wait_sends(1);
        let stats = a.stats();
        let first = rec.sends()?;
        for h in handles.iter() {
            let _ = h.cancel();
        }
        a.unregister()?;
        assert!(ended);
        // It expired once with the last send in the backlog, went there as a retry, and the
        // last send took its slot: transmitted are the first `limit` posts and that one.
        assert_eq!(&first[..], &[(0, WcStatus::RespTimeoutErr, 0)][..]);
        assert_eq!(stats.transmitted, u64::try_from(limit)?.saturating_add(1));
        assert_eq!(stats.retried, 0);
        Ok(())
    }

    #[test]
    fn reposted_with_default_rules_waits_in_the_backlog() -> Result {
        // A buffer posted with a deadline, completed, given the C layer's rules back and posted
        // again behind flow control waits in the backlog until a slot frees: the deadline of
        // its first post (long past) is not its own any more.
        let rec = Recorder::new(Behaviour {
            keep: true,
            ..Behaviour::default()
        })?;
        let (engine, transport) = capi::devices::find(lb0::NAME, 1).ok_or(ENODEV)?;
        let sa = Some(reg(wire::IB_MGMT_CLASS_SUBN_ADM));
        let a = register_gsi(&engine, &transport, 1, &rec, sa)?;
        let limit = usize::try_from(a.sol_fc_max)?;
        let mut first = sa_get(&a, limit, 20, 0)?;
        first.set_retry_rules(deadline(50));
        let _ = post(first)?;
        let first_done = rec.wait_sends(1);
        let mut again = rec.take_kept().pop().ok_or(EINVAL)?;
        again.set_retry_rules(Rules::default());
        let mut handles = KVec::new();
        for tag in 0..limit {
            handles.push(post(sa_get(&a, tag, 60_000, 0)?)?, GFP_KERNEL)?;
        }
        let again = post(again)?;
        // Long past the first post's deadline: the agent's work would have ended it by now.
        sleep_ms(200);
        let queued = a.send_state(&again) == Some(SendState::Queued);
        let calls_while_queued = rec.send_count();
        let freed = handles.first().is_some_and(|h| h.cancel().is_ok());
        let limit64 = u64::try_from(limit)?;
        let sent = wait_for(|| a.stats().transmitted == limit64.saturating_add(2));
        let cancelled = again.cancel().is_ok();
        for h in handles.iter() {
            let _ = h.cancel();
        }
        let all_done = rec.wait_sends(limit.saturating_add(2));
        let sends = rec.sends()?;
        drop(rec.release_all());
        a.unregister()?;
        let first = sends.first().copied();
        let again_calls = sends.iter().skip(1).filter(|s| s.0 == limit).count();
        let later_flushed = sends.iter().skip(1).all(|s| s.1 == WcStatus::WrFlushErr);
        // A failed assertion ends the case without its destructors: nothing is left to them.
        drop((handles, again, a, rec, sends));
        assert!(limit > 0 && first_done && all_done);
        assert_eq!(first, Some((limit, WcStatus::RespTimeoutErr, 0)));
        assert!(queued);
        assert_eq!(calls_while_queued, 1);
        assert!(freed && sent && cancelled);
        assert!(later_flushed);
        assert_eq!(again_calls, 1);
        Ok(())
    }

    /// The SA class as a C request's header names it: class 0x03, version 2.
    const C_SA: (u8, u8) = (wire::IB_MGMT_CLASS_SUBN_ADM, 2);

    /// The address of nobody on `lb0`, for the C API.
    fn c_nowhere() -> RmadAh {
        lid_ah(NOWHERE)
    }

    /// Through the C API: an SA GET of `agent` to nobody on `lb0`, TID low word `lo`.
    fn c_sa_get(agent: *mut c_void, lo: u32, timeout_ms: i32) -> Result<*mut c_void> {
        let ah = c_nowhere();
        let b = crate::testing::capi_client::create_mad(agent, kernel::bindings::GFP_KERNEL);
        if crate::testing::capi_client::is_err(b) {
            return Err(ENOMEM);
        }
        write_header_of(agent, b, C_SA, wire::IB_MGMT_METHOD_GET, lo)?;
        // SAFETY: The test owns `b`; `ah` is valid.
        let r = unsafe { rmad_send_buf_set(b, &ah, timeout_ms, 0, core::ptr::null_mut()) };
        kernel::error::to_result(r)?;
        Ok(b)
    }

    #[test]
    fn c_api_reposted_with_default_rules_waits_in_the_backlog() -> Result {
        // The same through the C API: rmad_send_buf_set_retry(buf, 0, 0) after a post with a
        // deadline, then a post behind flow control.
        let probe = CRecorder::new(CBehaviour::default(), c_nowhere())?;
        let reg = RmadRegReq {
            mgmt_class: wire::IB_MGMT_CLASS_SUBN_ADM,
            mgmt_class_version: 2,
            oui: [0; 3],
            method_mask: [1 << wire::IB_MGMT_METHOD_GET, 0],
        };
        // SAFETY: The name is NUL-terminated and `reg` valid; the handlers match the C
        // prototypes; the context outlives the agent (unregistered below).
        let agent = unsafe {
            crate::capi::rmad_register_agent(
                lb0::NAME.as_char_ptr(),
                1,
                1,
                &reg,
                0,
                Some(crate::testing::capi_client::c_recorder_send),
                Some(crate::testing::capi_client::c_recorder_recv),
                probe.ctx(),
                0,
            )
        };
        if crate::testing::capi_client::is_err(agent) {
            return Err(ENODEV);
        }
        let engine_agent = capi::engine_agent_of(agent)?;
        let limit = usize::try_from(engine_agent.sol_fc_max)?;
        let b = c_sa_get(agent, 1000, 20)?;
        let with_deadline = rmad_send_buf_set_retry(b, 0, 50);
        // SAFETY: A NULL `bad_send_buf` is allowed.
        let first = unsafe { rmad_post_send_mad(b, core::ptr::null_mut()) };
        let first_done = probe.wait_sends(1);
        let reset = rmad_send_buf_set_retry(b, 0, 0);
        let ah = c_nowhere();
        // SAFETY: The test owns `b`; `ah` is valid.
        let set = unsafe { rmad_send_buf_set(b, &ah, 60_000, 0, core::ptr::null_mut()) };
        let mut holders = KVec::new();
        for lo in 0..limit {
            let h = c_sa_get(agent, u32::try_from(lo)?, 60_000)?;
            // SAFETY: As above.
            let _ = unsafe { rmad_post_send_mad(h, core::ptr::null_mut()) };
            holders.push(h, GFP_KERNEL)?;
        }
        // SAFETY: As above.
        let again = unsafe { rmad_post_send_mad(b, core::ptr::null_mut()) };
        sleep_ms(200);
        let calls_while_queued = probe.sends()?.len();
        let freed = holders.first().map_or(-1, |&h| rmad_cancel_mad(h));
        let limit64 = u64::try_from(limit)?;
        let sent = wait_for(|| engine_agent.stats().transmitted == limit64.saturating_add(2));
        let cancelled = rmad_cancel_mad(b);
        for &h in holders.iter() {
            let _ = rmad_cancel_mad(h);
        }
        let all_done = probe.wait_sends(limit.saturating_add(2));
        let sends = probe.sends()?;
        for &h in holders.iter() {
            let _ = crate::capi::rmad_free_send_mad(h);
        }
        let _ = crate::capi::rmad_free_send_mad(b);
        let _ = rmad_unregister_agent(agent);
        // The buffer's two send-handler calls: the first post's, then the re-post's.
        let mut b_calls = [0i32; 3];
        let mut n_b = 0usize;
        for s in sends
            .iter()
            .filter(|s| s.0 == crate::testing::capi_client::num(b))
        {
            if let Some(slot) = b_calls.get_mut(n_b) {
                *slot = s.2;
            }
            n_b = n_b.saturating_add(1);
        }
        // A failed assertion ends the case without its destructors: nothing is left to them.
        drop((engine_agent, holders, sends, probe));
        assert!(limit > 0 && first_done && all_done);
        assert_eq!((with_deadline, first, reset, set, again), (0, 0, 0, 0, 0));
        assert_eq!(calls_while_queued, 1);
        assert_eq!(freed, 0);
        assert!(sent);
        assert_eq!(cancelled, 0);
        assert_eq!((n_b, b_calls[0], b_calls[1]), (2, C_RESP_TIMEOUT, C_FLUSH));
        Ok(())
    }

    /// A send held back by flow control is modified to `modify_ms` under `rules`, then
    /// dispatched: the waits it began (timeout 100 ms, 1 retry).
    fn modified_in_the_backlog(rules: Rules, modify_ms: i32) -> Result<(bool, KVec<u32>)> {
        let (a, rec) = sa_agent()?;
        let limit = usize::try_from(a.sol_fc_max)?;
        let mut handles = KVec::new();
        for tag in 0..limit {
            handles.push(post(sa_get(&a, tag, 60_000, 0)?)?, GFP_KERNEL)?;
        }
        let mut late = sa_get(&a, limit, 100, 1)?;
        late.set_retry_rules(rules);
        let late = post(late)?;
        let queued = a.send_state(&late) == Some(SendState::Queued);
        let modified = late.modify(modify_ms).is_ok();
        // A slot frees: the late send goes out, waits, retries once and times out.
        let freed = handles.first().is_some_and(|h| h.cancel().is_ok());
        let done = rec.wait_sends(2);
        let stats = a.stats();
        let sends = rec.sends()?;
        for h in handles.iter() {
            let _ = h.cancel();
        }
        a.unregister()?;
        let ended = sends.contains(&(limit, WcStatus::RespTimeoutErr, 1));
        let waits = waits_except(&stats, 60_000)?;
        Ok((queued && modified && freed && done && ended, waits))
    }

    #[test]
    fn modify_before_the_send_waits_under_each_mode() -> Result {
        // The C layer's rule: the modify's timeout is every wait from the next on.
        let (ok, waits) = modified_in_the_backlog(Rules::default(), 300)?;
        assert!(ok);
        assert_eq!(&waits[..], &[300, 300][..]);
        // One-shot: the next wait only.
        let (ok, waits) = modified_in_the_backlog(ONE_SHOT, 300)?;
        assert!(ok);
        assert_eq!(&waits[..], &[300, 100][..]);
        Ok(())
    }

    #[test]
    fn c_api_one_shot_by_registration_and_modify_post() -> Result {
        // RMAD_RETRY_ONE_SHOT at registration is the buffers' default; rmad_modify_post() of
        // the post sets the current wait only.
        let ah: RmadAh = rxe_ah()?;
        let probe = CRecorder::new(CBehaviour::default(), ah)?;
        let agent = c_agent_with_flags(&probe, C_ONE_SHOT)?;
        let b = c_request(agent, &ah, 10, wire::IB_MGMT_METHOD_SEND, 1000)?;
        // SAFETY: The client owns `b`; `ah` is valid.
        let set = unsafe { rmad_send_buf_set(b, &ah, 1000, 1, core::ptr::null_mut()) };
        let mut id = 0u64;
        // SAFETY: `id` is valid for a write.
        let posted = unsafe { rmad_post_send(b, &mut id) };
        let engine_agent = capi::engine_agent_of(agent)?;
        let waiting = wait_for(|| !engine_agent.stats().waits.as_slice().is_empty());
        let modified = rmad_modify_post(b, id, 60);
        let done = probe.wait_sends(1);
        let stats = engine_agent.stats();
        let status = probe.sends()?.first().map_or(-1, |s| s.2);
        let _ = crate::capi::rmad_free_send_mad(b);
        let _ = rmad_unregister_agent(agent);
        assert_eq!((set, posted, modified), (0, 0, 0));
        assert!(waiting && done);
        assert_eq!(status, C_RESP_TIMEOUT);
        assert_eq!(stats.waits.as_slice(), &[1000, 60, 1000][..]);
        Ok(())
    }

    #[test]
    fn c_api_segmented_send_refuses_a_deadline() -> Result {
        // A kernel-RMPP agent's segmented send keeps its windows' rules: with a deadline its
        // post is -EINVAL; the same buffer without one posts.
        let ah: RmadAh = rxe_ah()?;
        let probe = CRecorder::new(CBehaviour::default(), ah)?;
        let agent = c_agent_with(&probe, 1, 0)?;
        let b = rmad_create_send_mad(agent, 1, 0, 1, 56, 201, kernel::bindings::GFP_KERNEL, 1);
        if crate::testing::capi_client::is_err(b) {
            let _ = rmad_unregister_agent(agent);
            return Err(ENOMEM);
        }
        let written = write_header_of(agent, b, C_SA, wire::IB_MGMT_METHOD_GET, 9);
        // SAFETY: The client owns `b`; `ah` is valid.
        let set = unsafe { rmad_send_buf_set(b, &ah, 1000, 0, core::ptr::null_mut()) };
        let with_deadline = rmad_send_buf_set_retry(b, C_BACKOFF, 1000);
        // SAFETY: A NULL `bad_send_buf` is allowed.
        let refused = unsafe { rmad_post_send_mad(b, core::ptr::null_mut()) };
        let without = rmad_send_buf_set_retry(b, C_BACKOFF, 0);
        // SAFETY: As above.
        let posted = unsafe { rmad_post_send_mad(b, core::ptr::null_mut()) };
        let _ = rmad_cancel_mad(b);
        let done = probe.wait_sends(1);
        let calls = probe.sends()?.len();
        let _ = crate::capi::rmad_free_send_mad(b);
        let _ = rmad_unregister_agent(agent);
        assert!(written.is_ok());
        assert_eq!((set, with_deadline, refused), (0, 0, -22));
        assert_eq!((without, posted), (0, 0));
        assert!(done);
        assert_eq!(calls, 1);
        Ok(())
    }
}
