// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_rmpp_send`: kernel RMPP, send side (Documentation/behaviour.md §2.8), on
//! the loopback fabric and against ib_core on rxe0, with exact segment, ACK and retry counts.
//!
//! Agent R is a kernel-RMPP agent on port 1 that sends segmented SETs of the SA class (56-byte
//! header, 200 data bytes per segment, every byte of segment `n` equal to `n`). Peer P on port
//! 2 is either a user-RMPP agent that sees every segment as a MAD of its own and answers with
//! ACKs, STOPs and ABORTs written by hand ([`Peer::Script`]), or a second kernel-RMPP agent
//! that reassembles and ACKs by itself ([`Peer::Kernel`]).

use crate::{
    engine::{
        agent::{
            Agent,
            AgentConfig,
            RecvHandler,
            SendHandler,
            SendSpec, //
        },
        send::{
            SendBuf,
            SendCompletion,
            SendHandle, //
        },
        transport::{
            RecvMad,
            Transport, //
        },
    },
    mad::{
        rmpp::{
            RmppHdr,
            Status, //
        },
        state::{
            SendState,
            WcStatus, //
        },
        wire::{
            self,
            MadHdr, //
        },
        Address, QpType,
    },
    testing::{
        ib_responder::IbResponder,
        post,
        reg,
        requests::gid_address,
        sleep_ms,
        suites::{
            conformance::{
                mad_hdr,
                mad_to, //
            },
            rmpp::rxe_rmpp_agent,
        },
        wait_for,
        wait_state,
        Env, //
    },
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{
        Arc,
        Mutex, //
    },
};

/// The class: SA, an RMPP class with a 56-byte header.
const SA: u8 = wire::IB_MGMT_CLASS_SUBN_ADM;
/// The SA class header.
const HDR: usize = 56;
/// Data bytes per segment of [`SA`].
const DATA: usize = 200;

/// A MAD a [`Tap`] received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Got {
    /// With a send (a matched response).
    matched: bool,
    /// The MAD's method.
    method: u8,
    /// Its RMPP header.
    rmpp: RmppHdr,
    /// Its length.
    len: usize,
    /// Whether the data of every 200-byte chunk `i` after the header is all `i + 1`, or for
    /// one segment `n`, all `n` (mod 256).
    intact: bool,
}

/// A control message a [`Tap`] received: (method, type, status, SegmentNumber,
/// NewWindowLast).
type Control = (u8, u8, u8, u32, u32);

/// A send completion a [`Tap`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Done {
    status: WcStatus,
    vendor_err: u32,
    retries: i32,
}

/// Handlers that record what they see.
#[pin_data]
struct Tap {
    #[pin]
    got: Mutex<KVec<Got>>,
    #[pin]
    done: Mutex<KVec<Done>>,
}

impl Tap {
    fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Tap {
                got <- new_mutex!(KVec::new(), "rmpp_send::Tap::got"),
                done <- new_mutex!(KVec::new(), "rmpp_send::Tap::done"),
            }),
            GFP_KERNEL,
        )
    }

    /// Every MAD received so far.
    fn got(&self) -> Result<KVec<Got>> {
        let g = self.got.lock();
        let mut v = KVec::with_capacity(g.len(), GFP_KERNEL)?;
        for x in g.iter() {
            v.push(*x, GFP_KERNEL)?;
        }
        Ok(v)
    }

    /// The send completions so far.
    fn done(&self) -> Result<KVec<Done>> {
        let g = self.done.lock();
        let mut v = KVec::with_capacity(g.len(), GFP_KERNEL)?;
        for x in g.iter() {
            v.push(*x, GFP_KERNEL)?;
        }
        Ok(v)
    }

    /// The (SegmentNumber, flags, PayloadLength, intact) of every DATA segment received.
    fn segments(&self) -> Result<KVec<(u32, u8, u32, bool)>> {
        let mut v = KVec::new();
        for g in self.got()?.iter() {
            if g.rmpp.rmpp_type == wire::IB_MGMT_RMPP_TYPE_DATA {
                v.push(
                    (g.rmpp.seg_num, g.rmpp.flags, g.rmpp.paylen_newwin, g.intact),
                    GFP_KERNEL,
                )?;
            }
        }
        Ok(v)
    }

    /// The SegmentNumbers of the DATA segments received.
    fn seg_nums(&self) -> Result<KVec<u32>> {
        let mut v = KVec::new();
        for s in self.segments()?.iter() {
            v.push(s.0, GFP_KERNEL)?;
        }
        Ok(v)
    }

    /// The (method, type, status, SegmentNumber, NewWindowLast) of every control message.
    fn controls(&self) -> Result<KVec<Control>> {
        let mut v = KVec::new();
        for g in self.got()?.iter() {
            let t = g.rmpp.rmpp_type;
            if t != wire::IB_MGMT_RMPP_TYPE_DATA && t != 0 {
                v.push(
                    (
                        g.method,
                        t,
                        g.rmpp.status,
                        g.rmpp.seg_num,
                        g.rmpp.paylen_newwin,
                    ),
                    GFP_KERNEL,
                )?;
            }
        }
        Ok(v)
    }
}

impl RecvHandler for Tap {
    fn recv(&self, _agent: &Arc<Agent>, send: Option<&SendHandle>, mad: RecvMad) {
        let method = MadHdr::parse(&mad.mad).map_or(0, |h| h.method);
        let rmpp = RmppHdr::parse(&mad.mad).unwrap_or_default();
        let data = mad.mad.get(HDR..).unwrap_or(&[]);
        let intact = if mad.mad.len() == wire::IB_MGMT_MAD_SIZE {
            let n = u8::try_from(rmpp.seg_num % 256).unwrap_or(0);
            data.iter().all(|b| *b == n)
        } else {
            data.chunks(DATA).enumerate().all(|(i, c)| {
                c.iter()
                    .all(|b| usize::from(*b) == (i.saturating_add(1)) % 256)
            })
        };
        let _ = self.got.lock().push(
            Got {
                matched: send.is_some(),
                method,
                rmpp,
                len: mad.mad.len(),
                intact,
            },
            GFP_KERNEL,
        );
    }
}

impl SendHandler for Tap {
    fn send_done(&self, _agent: &Arc<Agent>, buf: SendBuf, wc: SendCompletion) {
        // P's own hand-written control messages complete too; only R's sends are of interest,
        // and the tests read R's tap.
        let _ = self.done.lock().push(
            Done {
                status: wc.status,
                vendor_err: wc.vendor_err,
                retries: buf.retries(),
            },
            GFP_KERNEL,
        );
    }
}

/// A segmented SA MAD of `a` with `method` and `tid` and `data_len` bytes to QP 1, every
/// byte of segment `n` equal to `n`; no destination yet.
fn segmented(a: &Arc<Agent>, method: u8, tid: u64, data_len: i32) -> Result<SendBuf> {
    let mut buf = a.create_send(
        SendSpec {
            rmpp_active: true,
            hdr_len: 56,
            data_len,
            ..SendSpec::mad(1)
        },
        GFP_KERNEL,
    )?;
    mad_hdr(SA, method, tid)
        .write(buf.mad_mut())
        .map_err(|_| EINVAL)?;
    crate::testing::fabric::rmpp::fill_segments(&mut buf)?;
    Ok(buf)
}

/// What answers R's segments on port 2.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Peer {
    /// A user-RMPP agent; the test writes its ACKs.
    Script,
    /// A kernel-RMPP agent, which ACKs by itself.
    Kernel,
}

/// R on port 1 and P on port 2.
struct Pair {
    env: Env,
    r: Arc<Agent>,
    rtap: Arc<Tap>,
    p: Arc<Agent>,
    ptap: Arc<Tap>,
}

impl Pair {
    fn new(peer: Peer) -> Result<Self> {
        let env = Env::new()?;
        let register = |port: u8, flags: u32, tap: &Arc<Tap>| {
            Agent::register(
                &env.engine,
                &env.transport,
                AgentConfig {
                    port,
                    qp_type: QpType::Gsi,
                    reg: Some(reg(SA)),
                    rmpp_version: 1,
                    flags,
                    send_handler: Some(tap.clone()),
                    recv_handler: Some(tap.clone()),
                },
            )
        };
        let rtap = Tap::new()?;
        let ptap = Tap::new()?;
        let r = register(1, 0, &rtap)?;
        let flags = if peer == Peer::Script {
            wire::IB_MAD_USER_RMPP
        } else {
            0
        };
        let p = register(2, flags, &ptap)?;
        Ok(Self {
            env,
            r,
            rtap,
            p,
            ptap,
        })
    }

    /// The TID of R's transfer `lo`.
    fn tid(&self, lo: u32) -> u64 {
        wire::make_tid(self.r.hi_tid, lo)
    }

    /// R's segmented SET `lo` of `data_len` bytes to P, every byte of segment `n` equal to
    /// `n`, with `timeout_ms` and `retries`; not posted.
    fn transfer(&self, lo: u32, data_len: i32, timeout_ms: i32, retries: i32) -> Result<SendBuf> {
        let mut buf = segmented(&self.r, wire::IB_MGMT_METHOD_SET, self.tid(lo), data_len)?;
        buf.set_ah(Some(Address {
            sl: 0,
            dlid: 2,
            src_path_bits: 0,
            grh: None,
        }));
        buf.set_timeout_ms(timeout_ms);
        buf.set_retries(retries);
        Ok(buf)
    }

    /// P's RMPP control message of `rmpp_type` for R's transfer `lo`: ACK(`seg`, `newwin`),
    /// or a STOP or ABORT with `status`.
    fn control(&self, lo: u32, rmpp_type: u8, status: u8, seg: u32, newwin: u32) -> Result {
        self.control_v(
            lo,
            wire::IB_MGMT_RMPP_VERSION,
            rmpp_type,
            status,
            seg,
            newwin,
        )
    }

    /// [`Pair::control`] with RMPP version `version`.
    fn control_v(
        &self,
        lo: u32,
        version: u8,
        rmpp_type: u8,
        status: u8,
        seg: u32,
        newwin: u32,
    ) -> Result {
        let method = wire::IB_MGMT_METHOD_SET | wire::IB_MGMT_METHOD_RESP;
        let mut buf = mad_to(&self.p, 1, mad_hdr(SA, method, self.tid(lo)), 1, None)?;
        RmppHdr {
            version,
            rmpp_type,
            resp_time: 0,
            flags: wire::IB_MGMT_RMPP_FLAG_ACTIVE,
            status,
            seg_num: seg,
            paylen_newwin: newwin,
        }
        .write(buf.mad_mut())
        .map_err(|_| EINVAL)?;
        post(buf).map(|_| ())
    }

    /// P's ACK(`seg`, `newwin`) of R's transfer `lo`.
    fn ack(&self, lo: u32, seg: u32, newwin: u32) -> Result {
        self.control(lo, wire::IB_MGMT_RMPP_TYPE_ACK, 0, seg, newwin)
    }

    /// Waits until the fabric has carried everything and the agents' work ran.
    fn settle(&self) -> bool {
        let idle = wait_for(|| self.env.fabric().is_idle());
        sleep_ms(20);
        idle && wait_for(|| self.env.fabric().is_idle())
    }

    /// Waits until R's tap saw `n` send completions.
    fn completions(&self, n: usize) -> bool {
        wait_for(|| self.rtap.done().is_ok_and(|d| d.len() >= n))
    }

    /// Unregisters both agents.
    fn finish(self) -> Result {
        self.r.unregister()?;
        self.p.unregister()
    }
}

/// ACTIVE, FIRST and LAST as they appear in a segment's flags.
const A: u8 = wire::IB_MGMT_RMPP_FLAG_ACTIVE;
const F: u8 = wire::IB_MGMT_RMPP_FLAG_FIRST;
const L: u8 = wire::IB_MGMT_RMPP_FLAG_LAST;

#[kernel::prelude::kunit_tests(rmad_rmpp_send)]
mod tests {
    use super::*;

    #[test]
    fn segments_go_out_window_by_window_as_acked() -> Result {
        // Scenario 53: 1 000 bytes with a 56-byte header are 5 segments of 200, no
        // padding. The first window is one segment (FIRST, PayloadLength 5 × 220 = 1 100);
        // ACK(1, 3) lets 2 and 3 go, ACK(3, 5) lets 4 and 5 go (LAST, PayloadLength 220), and
        // the final ACK(5, 5) completes the send with SUCCESS (no response expected), with no
        // retry.
        let t = Pair::new(Peer::Script)?;
        let buf = t.transfer(1, 1000, 0, 3)?;
        let count = buf.seg_count();
        let _h = post(buf)?;
        let idle1 = t.settle();
        let first = t.ptap.segments()?;
        t.ack(1, 1, 3)?;
        let idle2 = t.settle();
        let second = t.ptap.seg_nums()?;
        t.ack(1, 3, 5)?;
        let idle3 = t.settle();
        let before = t.rtap.done()?.len();
        t.ack(1, 5, 5)?;
        let completed = t.completions(1);
        let segs = t.ptap.segments()?;
        let done = t.rtap.done()?;
        let stats = t.r.stats();
        t.finish()?;
        assert!(idle1 && idle2 && idle3);
        assert_eq!(count, 5);
        assert_eq!(&first[..], &[(1, A | F, 1100, true)][..]);
        assert_eq!(&second[..], &[1, 2, 3][..]);
        assert_eq!(
            &segs[..],
            &[
                (1, A | F, 1100, true),
                (2, A, 0, true),
                (3, A, 0, true),
                (4, A, 0, true),
                (5, A | L, 220, true)
            ][..]
        );
        assert_eq!(before, 0);
        assert!(completed);
        assert_eq!(
            &done[..],
            &[Done {
                status: WcStatus::Success,
                vendor_err: 0,
                retries: 0
            }][..]
        );
        assert_eq!(stats.transmitted, 5);
        assert_eq!(stats.completed, 1);
        Ok(())
    }

    #[test]
    fn padding_shows_in_first_and_last_payload_length() -> Result {
        // §1.5's worked example: 201 bytes are 2 segments with 199 bytes of padding: segment 1
        // says 2 × 220 − 199 = 241, segment 2 says 220 − 199 = 21. No data at all is one
        // segment with FIRST and LAST and C's LAST value, 220 − 200 = 20.
        let t = Pair::new(Peer::Script)?;
        let _h = post(t.transfer(2, 201, 0, 0)?)?;
        let _ = t.settle();
        t.ack(2, 1, 2)?;
        let _ = t.settle();
        t.ack(2, 2, 2)?;
        let two = t.completions(1);
        let _h = post(t.transfer(3, 0, 0, 0)?)?;
        let _ = t.settle();
        t.ack(3, 1, 1)?;
        let one = t.completions(2);
        let segs = t.ptap.segments()?;
        let done = t.rtap.done()?;
        t.finish()?;
        assert!(two && one);
        assert_eq!(segs.len(), 3);
        assert_eq!(segs.first().map(|s| (s.0, s.1, s.2)), Some((1, A | F, 241)));
        assert_eq!(segs.get(1).map(|s| (s.0, s.1, s.2)), Some((2, A | L, 21)));
        assert_eq!(
            segs.get(2).map(|s| (s.0, s.1, s.2)),
            Some((1, A | F | L, 20))
        );
        assert!(done.iter().all(|d| d.status == WcStatus::Success));
        Ok(())
    }

    #[test]
    fn lost_acks_retried_go_back_n_with_retries_per_window() -> Result {
        // Scenario 54, and §7.2 item 11 not copied: `timeout_ms` 1000 gives an ACK wait of
        // at most 1000 ms after every window. Without an ACK segment 1 is sent again (retry 1
        // of 1); ACK(1, 2) moves on and gives the window its retry back; segment 2 is sent
        // and sent again when its wait expires (C would wait for ever here); with no retry
        // left the send ends with RESP_TIMEOUT_ERR, 2 retries in all.
        let t = Pair::new(Peer::Script)?;
        let _h = post(t.transfer(4, 1000, 1000, 1)?)?;
        let resent1 = wait_for(|| t.ptap.seg_nums().is_ok_and(|s| s.len() == 2));
        t.ack(4, 1, 2)?;
        let ended = t.completions(1);
        let _ = t.settle();
        let segs = t.ptap.seg_nums()?;
        let done = t.rtap.done()?;
        let stats = t.r.stats();
        t.finish()?;
        assert!(resent1);
        assert!(ended);
        assert_eq!(&segs[..], &[1, 1, 2, 2][..]);
        assert_eq!(
            &done[..],
            &[Done {
                status: WcStatus::RespTimeoutErr,
                vendor_err: 0,
                retries: 2
            }][..]
        );
        assert_eq!(stats.retried, 2);
        assert_eq!(stats.timed_out, 1);
        Ok(())
    }

    #[test]
    fn late_ack_after_shortened_waits_costs_no_retry() -> Result {
        // Deviation 4 keeps C's patience: window 1's ACK comes at once, so window 2 waits a
        // few round trips, at least 50 ms, doubling with each expiry. Those shortened waits
        // resend segment 2 without using the window's one retry; only a wait of the whole
        // 2 s bound would. The ACK comes 3 s late, which C (2 s, then 2 s for its retry)
        // still takes: SUCCESS, segment 2 sent more than twice, at most the one retry used.
        let t = Pair::new(Peer::Script)?;
        let _h = post(t.transfer(7, 400, 0, 1)?)?;
        let first = wait_for(|| t.ptap.seg_nums().is_ok_and(|s| s.len() == 1));
        t.ack(7, 1, 2)?;
        let second = wait_for(|| t.ptap.seg_nums().is_ok_and(|s| s.contains(&2)));
        sleep_ms(3000);
        let early = t.rtap.done()?.len();
        t.ack(7, 2, 2)?;
        let ended = t.completions(1);
        let _ = t.settle();
        let segs = t.ptap.seg_nums()?;
        let done = t.rtap.done()?;
        t.finish()?;
        assert!(first && second && ended);
        assert_eq!(early, 0);
        assert_eq!(segs.first(), Some(&1));
        assert!(segs.iter().filter(|n| **n == 2).count() > 2);
        assert_eq!(done.len(), 1);
        assert!(done
            .first()
            .is_some_and(|d| d.status == WcStatus::Success && d.retries <= 1));
        Ok(())
    }

    #[test]
    fn response_after_last_ack_with_turnaround_ack() -> Result {
        // The double-sided turnaround (§2.10.6): with a response expected, the final ACK starts the wait for it and
        // draws the double-sided turnaround ACK (SegmentNumber 0, NewWindowLast 1, the
        // request's method); a repeated final ACK draws it again. P's GET_RESP then completes
        // the send with SUCCESS after R's receive handler saw it.
        let t = Pair::new(Peer::Script)?;
        let h = post(t.transfer(5, 400, 30_000, 0)?)?;
        let _ = t.settle();
        t.ack(5, 1, 2)?;
        let _ = t.settle();
        t.ack(5, 2, 2)?;
        let _ = t.settle();
        t.ack(5, 2, 2)?;
        let _ = t.settle();
        let waiting = t.r.send_state(&h);
        let controls = t.ptap.controls()?;
        let resp = wire::IB_MGMT_METHOD_GET_RESP;
        post(mad_to(&t.p, 1, mad_hdr(SA, resp, t.tid(5)), 1, None)?)?;
        let completed = t.completions(1);
        let matched = t.rtap.got()?.iter().filter(|g| g.matched).count();
        let done = t.rtap.done()?;
        t.finish()?;
        assert_eq!(waiting, Some(SendState::WaitResp));
        let turn = (
            wire::IB_MGMT_METHOD_SET,
            wire::IB_MGMT_RMPP_TYPE_ACK,
            0,
            0,
            1,
        );
        assert_eq!(&controls[..], &[turn, turn][..]);
        assert!(completed);
        assert_eq!(matched, 1);
        assert_eq!(done.first().map(|d| d.status), Some(WcStatus::Success));
        Ok(())
    }

    #[test]
    fn response_wait_expired_is_resp_timeout_without_resending() -> Result {
        // Scenario 55: every segment is ACKed and the response does not come within
        // `timeout_ms`: RESP_TIMEOUT_ERR at once, although retries are left, with one retry
        // counted and no segment sent again.
        let t = Pair::new(Peer::Script)?;
        let _h = post(t.transfer(6, 400, 2000, 3)?)?;
        let _ = t.settle();
        t.ack(6, 1, 2)?;
        let _ = t.settle();
        t.ack(6, 2, 2)?;
        let ended = t.completions(1);
        let _ = t.settle();
        let segs = t.ptap.seg_nums()?;
        let done = t.rtap.done()?;
        t.finish()?;
        assert!(ended);
        assert_eq!(&segs[..], &[1, 2][..]);
        assert_eq!(
            &done[..],
            &[Done {
                status: WcStatus::RespTimeoutErr,
                vendor_err: 0,
                retries: 1
            }][..]
        );
        Ok(())
    }

    #[test]
    fn stop_abort_and_bad_acks_end_with_rem_abort_err() -> Result {
        // Scenarios 56 and 58: the peer's STOP(RESX) and ABORT(T2L) end the send with REM_ABORT_ERR and
        // the RMPP status in vendor_err; an ACK whose window is below its segment (W2S) and an
        // ACK beyond the window (S2B) do too, and draw C's ABORT with that status; so do an
        // RMPP message of an unknown version (UNV) and one of an unknown type (BADT), as in
        // C's `abort_send` and `nack_recv`. A STOP for a send that is fully ACKed changes
        // nothing.
        let t = Pair::new(Peer::Script)?;
        let v = wire::IB_MGMT_RMPP_VERSION;
        let cases: [(u32, u8, u8, u8, u32, u32); 6] = [
            (
                10,
                v,
                wire::IB_MGMT_RMPP_TYPE_STOP,
                Status::Resx.code(),
                0,
                0,
            ),
            (
                11,
                v,
                wire::IB_MGMT_RMPP_TYPE_ABORT,
                Status::T2l.code(),
                0,
                0,
            ),
            (12, v, wire::IB_MGMT_RMPP_TYPE_ACK, 0, 3, 2),
            (13, v, wire::IB_MGMT_RMPP_TYPE_ACK, 0, 4, 4),
            (15, 2, wire::IB_MGMT_RMPP_TYPE_ACK, 0, 1, 2),
            (16, v, 9, 0, 1, 2),
        ];
        for (i, (lo, version, ty, status, seg, win)) in cases.into_iter().enumerate() {
            let _h = post(t.transfer(lo, 1000, 0, 0)?)?;
            let _ = t.settle();
            t.control_v(lo, version, ty, status, seg, win)?;
            let _ = t.completions(i.saturating_add(1));
        }
        let _h = post(t.transfer(14, 200, 0, 0)?)?;
        let _ = t.settle();
        t.ack(14, 1, 1)?;
        let acked = t.completions(7);
        t.control(14, wire::IB_MGMT_RMPP_TYPE_STOP, 1, 0, 0)?;
        let _ = t.settle();
        let done = t.rtap.done()?;
        let controls = t.ptap.controls()?;
        let segs = t.ptap.seg_nums()?;
        t.finish()?;
        let statuses: KVec<(WcStatus, u32)> = {
            let mut v = KVec::new();
            for d in done.iter() {
                v.push((d.status, d.vendor_err), GFP_KERNEL)?;
            }
            v
        };
        let rae = WcStatus::RemAbortErr;
        assert!(acked);
        assert_eq!(
            &statuses[..],
            &[
                (rae, 1),
                (rae, 118),
                (rae, u32::from(Status::W2s.code())),
                (rae, u32::from(Status::S2b.code())),
                (rae, u32::from(Status::Unv.code())),
                (rae, u32::from(Status::Badt.code())),
                (WcStatus::Success, 0)
            ][..]
        );
        let abort = |s: Status| (wire::IB_MGMT_RMPP_TYPE_ABORT, s.code());
        let sent: KVec<(u8, u8)> = {
            let mut v = KVec::new();
            for c in controls.iter() {
                v.push((c.1, c.2), GFP_KERNEL)?;
            }
            v
        };
        assert_eq!(
            &sent[..],
            &[
                abort(Status::W2s),
                abort(Status::S2b),
                abort(Status::Unv),
                abort(Status::Badt)
            ][..]
        );
        // One segment each: nothing went out after the end.
        assert_eq!(&segs[..], &[1, 1, 1, 1, 1, 1, 1][..]);
        Ok(())
    }

    #[test]
    fn hostile_control_storm_each_send_ends_once() -> Result {
        // A hostile peer against segmented sends: eight SETs of 20 segments (two retries per
        // window, no response expected) get only 1 500 random ACKs, STOPs, ABORTs and RMPP
        // messages of unknown type or version, with random statuses, SegmentNumbers and
        // windows (the edges 0, 1, 19, 20, 21, 2^31 and 2^32 - 1 among them), on their TIDs
        // and on two TIDs of no send. Nothing panics (the kernel would), each send completes
        // exactly once with SUCCESS, REM_ABORT_ERR or RESP_TIMEOUT_ERR, some are aborted, no
        // segment beyond 20 goes out, and a clean transfer afterwards completes.
        let t = Pair::new(Peer::Script)?;
        for lo in 0..8u32 {
            let _h = post(t.transfer(0x100 + lo, 20 * 200, 0, 2)?)?;
        }
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let edges = [0u32, 1, 2, 19, 20, 21, 0x8000_0000, u32::MAX];
        let pick = |r: u64, shift: u32, or: u32| {
            let i = usize::try_from((r >> shift) % 12).unwrap_or(0);
            edges.get(i).copied().unwrap_or(or)
        };
        for i in 0..1500u32 {
            let r = next();
            let lo = 0x100 + u32::try_from(r % 10).unwrap_or(0);
            let rmpp_type = match (r >> 8) % 8 {
                0..=3 => wire::IB_MGMT_RMPP_TYPE_ACK,
                4 => wire::IB_MGMT_RMPP_TYPE_STOP,
                5 => wire::IB_MGMT_RMPP_TYPE_ABORT,
                6 => 0,
                _ => 9,
            };
            let version = if (r >> 12) % 16 == 0 {
                2
            } else {
                wire::IB_MGMT_RMPP_VERSION
            };
            let status = if (r >> 16) % 8 == 0 {
                u8::try_from((r >> 20) % 256).unwrap_or(0)
            } else {
                0
            };
            let seg = pick(r, 28, u32::try_from((r >> 32) % 24).unwrap_or(0));
            let win = pick(
                r,
                36,
                seg.saturating_add(u32::try_from((r >> 40) % 8).unwrap_or(0)),
            );
            t.control_v(lo, version, rmpp_type, status, seg, win)?;
            if i % 100 == 99 {
                let _ = t.settle();
            }
        }
        let ended = t.completions(8);
        let _ = t.settle();
        // A second completion of any of them would show by now.
        sleep_ms(500);
        let done = t.rtap.done()?;
        let segs = t.ptap.seg_nums()?;
        let _h = post(t.transfer(0x200, 200, 0, 0)?)?;
        let _ = t.settle();
        t.ack(0x200, 1, 1)?;
        let clean = t.completions(9);
        let after = t.rtap.done()?;
        // The handler records a completion before it returns, and the agent counts the send
        // as returned only once it has: wait for the count rather than read it at once.
        let drained = wait_for(|| t.r.outstanding() == 0);
        t.finish()?;
        let ok = |d: &Done| {
            matches!(
                d.status,
                WcStatus::Success | WcStatus::RemAbortErr | WcStatus::RespTimeoutErr
            )
        };
        assert!(ended);
        assert_eq!(done.len(), 8);
        assert!(done.iter().all(ok));
        assert!(done.iter().any(|d| d.status == WcStatus::RemAbortErr));
        assert!(segs.iter().all(|n| (1..=20).contains(n)));
        assert!(clean);
        assert_eq!(after.len(), 9);
        assert_eq!(after.last().map(|d| d.status), Some(WcStatus::Success));
        assert!(drained);
        Ok(())
    }

    #[test]
    fn abort_while_a_segment_is_in_flight_is_rem_abort_err() -> Result {
        // §7.2 item 5 not copied (behaviour §8.14): the peer's ABORT arrives before segment
        // 1's send completion (the segment itself is lost, the ABORT overtakes the
        // completion). C marks the send done and reports the completion's SUCCESS; rmad
        // reports REM_ABORT_ERR with the status, at that completion.
        let t = Pair::new(Peer::Script)?;
        t.env.fabric().set_knobs(|k| {
            k.hold = true;
            k.drop_requests = 1;
        });
        let h = post(t.transfer(20, 1000, 0, 0)?)?;
        t.control(
            20,
            wire::IB_MGMT_RMPP_TYPE_ABORT,
            Status::Unspec.code(),
            0,
            0,
        )?;
        let promoted = t.env.fabric().promote_recv();
        t.env.fabric().release(1);
        let early = wait_state(&t.r, &h, SendState::EarlyResp);
        t.env.fabric().set_knobs(|k| k.hold = false);
        t.env.fabric().release(16);
        let completed = t.completions(1);
        let done = t.rtap.done()?;
        t.finish()?;
        assert!(promoted);
        assert!(early);
        assert!(completed);
        assert_eq!(
            &done[..],
            &[Done {
                status: WcStatus::RemAbortErr,
                vendor_err: u32::from(Status::Unspec.code()),
                retries: 0
            }][..]
        );
        Ok(())
    }

    #[test]
    fn cancel_at_each_stage_flushes_and_later_acks_are_ignored() -> Result {
        // Scenario 57: cancel with segment 1 in flight, while the send waits for an ACK, and while it waits
        // for the response after the last ACK: WR_FLUSH_ERR each time; a second cancel is
        // EINVAL; ACKs that come after open no window and send nothing.
        let t = Pair::new(Peer::Script)?;
        let mut results = KVec::new();
        // In flight.
        t.env.fabric().set_knobs(|k| k.hold = true);
        let h = post(t.transfer(30, 1000, 0, 0)?)?;
        results.push(h.cancel().is_ok(), GFP_KERNEL)?;
        results.push(h.cancel() == Err(EINVAL), GFP_KERNEL)?;
        t.env.fabric().set_knobs(|k| k.hold = false);
        t.env.fabric().release(16);
        let _ = t.settle();
        t.ack(30, 1, 5)?;
        // Waiting for an ACK.
        let h = post(t.transfer(31, 1000, 0, 0)?)?;
        results.push(wait_state(&t.r, &h, SendState::WaitResp), GFP_KERNEL)?;
        results.push(h.cancel().is_ok(), GFP_KERNEL)?;
        let _ = t.settle();
        t.ack(31, 1, 5)?;
        // Waiting for the response.
        let h = post(t.transfer(32, 200, 30_000, 0)?)?;
        let _ = t.settle();
        t.ack(32, 1, 1)?;
        let _ = t.settle();
        results.push(t.r.send_state(&h) == Some(SendState::WaitResp), GFP_KERNEL)?;
        results.push(h.cancel().is_ok(), GFP_KERNEL)?;
        let all = t.completions(3);
        let _ = t.settle();
        let done = t.rtap.done()?;
        let segs = t.ptap.seg_nums()?;
        t.finish()?;
        assert!(results.iter().all(|r| *r));
        assert!(all);
        assert_eq!(done.len(), 3);
        assert!(done.iter().all(|d| d.status == WcStatus::WrFlushErr));
        assert_eq!(&segs[..], &[1, 1, 1][..]);
        Ok(())
    }

    #[test]
    fn kernel_rmpp_peers_carry_1_mib() -> Result {
        // rmad to rmad, both kernel RMPP: 1 MiB is 5 243 segments, windowed by the receiver's
        // ACKs (W = 64); one message of 56 + 1 048 576 bytes at P, every byte in place, and
        // SUCCESS at R with no retry: every segment transmitted once.
        let t = Pair::new(Peer::Kernel)?;
        let _h = post(t.transfer(40, 1 << 20, 0, 0)?)?;
        let completed = t.completions(1);
        let _ = t.settle();
        let got = t.ptap.got()?;
        let done = t.rtap.done()?;
        let stats = t.r.stats();
        let pstats = t.p.rmpp_stats();
        pr_info!(
            "rmpp_send: 1 MiB: {} transmissions, {} ACKs from the receiver\n",
            stats.transmitted,
            pstats.acks
        );
        t.finish()?;
        assert!(completed);
        assert_eq!(got.len(), 1);
        assert_eq!(
            got.first().map(|g| (g.len, g.intact)),
            Some((HDR + (1 << 20), true))
        );
        assert_eq!(
            &done[..],
            &[Done {
                status: WcStatus::Success,
                vendor_err: 0,
                retries: 0
            }][..]
        );
        assert_eq!(stats.transmitted, 5243);
        assert_eq!(pstats.completed, 1);
        Ok(())
    }

    #[test]
    fn kernel_rmpp_peers_recover_a_lost_segment_and_a_lost_ack() -> Result {
        // The first segment and then the first ACK are lost: each is recovered by an ACK
        // timeout (2 s with no response expected: nothing is measured yet) and a go-back-N
        // retry, and 64 KiB (328 segments) arrive intact; the two retries show in the send's
        // count, and nothing else adds one (a later window whose ACK is slower than the
        // measured wait is probed again without using a retry).
        let t = Pair::new(Peer::Kernel)?;
        t.env.fabric().set_knobs(|k| {
            k.drop_requests = 1;
            k.drop_responses = 1;
        });
        let _h = post(t.transfer(41, 64 << 10, 0, 2)?)?;
        let completed = t.completions(1);
        let _ = t.settle();
        let got = t.ptap.got()?;
        let done = t.rtap.done()?;
        let lost = t.env.fabric().stats().lost;
        t.finish()?;
        assert!(completed);
        assert_eq!(lost, 2);
        assert_eq!(
            got.first().map(|g| (g.len, g.intact)),
            Some((HDR + (64 << 10), true))
        );
        assert_eq!(got.len(), 1);
        assert_eq!(done.len(), 1);
        assert_eq!(
            done.first().map(|d| (d.status, d.vendor_err)),
            Some((WcStatus::Success, 0))
        );
        assert_eq!(done.first().map(|d| d.retries), Some(2));
        Ok(())
    }

    #[test]
    fn kernel_rmpp_responder_answers_256_kib_over_a_slow_lossy_wire() -> Result {
        // The responder role: R answers P's GET with a segmented GET_RESP of 256 KiB (no
        // response to wait for, so only ACKs drive it), over a wire that takes 1 ms each way
        // and loses a few segments and ACKs: P reassembles it once, intact, and R's answer
        // completes with SUCCESS.
        let t = Pair::new(Peer::Kernel)?;
        t.r.unregister()?;
        let server = crate::testing::fabric::rmpp::Server::new(256 << 10)?;
        let r = Agent::register(
            &t.env.engine,
            &t.env.transport,
            AgentConfig {
                port: 1,
                qp_type: QpType::Gsi,
                reg: Some(reg(SA)),
                rmpp_version: 1,
                flags: 0,
                send_handler: Some(server.clone()),
                recv_handler: Some(server.clone()),
            },
        )?;
        t.env.fabric().set_knobs(|k| k.delay_ms = 1);
        let get = mad_to(
            &t.p,
            1,
            mad_hdr(
                SA,
                wire::IB_MGMT_METHOD_GET,
                wire::make_tid(t.p.hi_tid, 0x99),
            ),
            1,
            None,
        )?;
        let mut get = get;
        get.set_timeout_ms(25_000);
        let _h = post(get)?;
        let mut lossy = 0;
        let done = wait_for(|| {
            lossy += 1;
            if lossy % 200 == 0 {
                t.env.fabric().set_knobs(|k| {
                    k.drop_requests = 1;
                    k.drop_responses = 1;
                });
            }
            server.figures().1 + server.figures().2 > 0
        }) || wait_for(|| server.figures().1 + server.figures().2 > 0);
        let _ = t.settle();
        let figures = server.figures();
        let got = t.ptap.got()?;
        let lost = t.env.fabric().stats().lost;
        pr_info!(
            "rmpp_send: responder 256 KiB: answers {:?}, {} lost, P transfers {:?}\n",
            figures,
            lost,
            t.p.rmpp_stats()
        );
        r.unregister()?;
        t.p.unregister()?;
        assert!(done);
        assert_eq!((figures.0, figures.1, figures.2), (1, 1, 0));
        assert_eq!(
            got.first().map(|g| (g.matched, g.len, g.intact)),
            Some((true, HDR + (256 << 10), true))
        );
        Ok(())
    }

    #[test]
    fn rxe_rmad_responder_answers_rmad_with_a_segmented_response() -> Result {
        // rmad on both ends of rxe0: a kernel-RMPP rmad agent registered for the SA class
        // (ib_core forwards it the GET) answers with 20 000 bytes from the private QP; the
        // requester's ACKs come back to that private QP, which takes them although they are
        // requests (Documentation/behaviour.md §8.21). One message, intact, and SUCCESS on
        // both sides.
        let tap = Tap::new()?;
        let found = rxe_rmpp_agent(&tap)?;
        assert!(found.is_some());
        let Some((port, r)) = found else {
            return Ok(());
        };
        let engine = crate::verbs::verbs_engine().ok_or(ENODEV)?;
        let transport: Arc<dyn Transport> = port.clone();
        let server = crate::testing::fabric::rmpp::Server::new(20_000)?;
        let s = Agent::register(
            &engine,
            &transport,
            AgentConfig {
                port: 1,
                qp_type: QpType::Gsi,
                reg: Some(reg(SA)),
                rmpp_version: 1,
                flags: 0,
                send_handler: Some(server.clone()),
                recv_handler: Some(server.clone()),
            },
        );
        let Ok(s) = s else {
            r.unregister()?;
            assert!(s.is_ok());
            return Ok(());
        };
        let mut get = crate::testing::requests::mad(&r, SA, wire::IB_MGMT_METHOD_GET, 61)?;
        get.set_ah(Some(gid_address(port.gid(1, 0).ok_or(ENODEV)?, 0)));
        get.set_timeout_ms(20_000);
        let posted = post(get).is_ok();
        let done = wait_for(|| tap.done().is_ok_and(|d| !d.is_empty()));
        let answered = wait_for(|| server.figures().1 + server.figures().2 > 0);
        let figures = server.figures();
        let got = tap.got()?;
        let d = tap.done()?;
        pr_info!(
            "rmpp_send: rxe0 rmad responder: answers {:?}, requester {:?}, port {:?}\n",
            figures,
            r.rmpp_stats(),
            port.drops().requests
        );
        s.unregister()?;
        r.unregister()?;
        assert!(posted);
        assert!(done);
        assert!(answered);
        assert_eq!((figures.0, figures.1, figures.2), (1, 1, 0));
        assert_eq!(
            got.first().map(|g| (g.matched, g.len, g.intact)),
            Some((true, HDR + 20_000, true))
        );
        assert_eq!(d.first().map(|x| x.status), Some(WcStatus::Success));
        Ok(())
    }

    #[test]
    fn segmented_create_and_post_rules() -> Result {
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

    #[test]
    fn response_first_window_is_1_whatever_the_requester_announced() -> Result {
        // The deviation of behaviour §8.14 (no `repwin`): P's GET, then an ACK(0, 10) for it
        // (a requester announcing a window of 10 before the response, as a non-Linux one may;
        // C would send segments 1-10 at once). R's 10-segment GET_RESP still sends segment 1
        // alone; P's ACK(1, 10) (method GET, reaching R through its registration) lets 2-10
        // go, and ACK(10, 10) completes the response with SUCCESS.
        let t = Pair::new(Peer::Script)?;
        let ptid = wire::make_tid(t.p.hi_tid, 9);
        let get = wire::IB_MGMT_METHOD_GET;
        post(mad_to(&t.p, 1, mad_hdr(SA, get, ptid), 1, None)?)?;
        let asked = t.settle();
        let p_ack = |seg: u32, newwin: u32| -> Result {
            let mut buf = mad_to(&t.p, 1, mad_hdr(SA, get, ptid), 1, None)?;
            RmppHdr {
                version: wire::IB_MGMT_RMPP_VERSION,
                rmpp_type: wire::IB_MGMT_RMPP_TYPE_ACK,
                flags: A,
                seg_num: seg,
                paylen_newwin: newwin,
                ..RmppHdr::default()
            }
            .write(buf.mad_mut())
            .map_err(|_| EINVAL)?;
            post(buf).map(|_| ())
        };
        p_ack(0, 10)?;
        let announced = t.settle();
        let mut resp = segmented(&t.r, wire::IB_MGMT_METHOD_GET_RESP, ptid, 2000)?;
        resp.set_ah(Some(Address {
            sl: 0,
            dlid: 2,
            src_path_bits: 0,
            grh: None,
        }));
        resp.set_retries(3);
        let _h = post(resp)?;
        let idle1 = t.settle();
        let first = t.ptap.seg_nums()?;
        p_ack(1, 10)?;
        let idle2 = t.settle();
        let second = t.ptap.seg_nums()?;
        p_ack(10, 10)?;
        let completed = t.completions(1);
        let done = t.rtap.done()?;
        t.finish()?;
        assert!(asked && announced && idle1 && idle2);
        assert_eq!(&first[..], &[1][..]);
        assert_eq!(&second[..], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10][..]);
        assert!(completed);
        assert_eq!(
            done.first().map(|d| (d.status, d.retries)),
            Some((WcStatus::Success, 0))
        );
        Ok(())
    }

    #[test]
    fn large_segmented_buffers_allocate_or_fail_quietly() -> Result {
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

    #[test]
    fn rxe_segmented_request_to_ib_core_answered_with_a_segmented_response() -> Result {
        // Interoperation with ib_core's RMPP on rxe0, both directions in one exchange: rmad
        // sends a GET of 20 000 bytes (100 segments) to a kernel-RMPP ib_core agent, which
        // reassembles it (its ACKs window rmad's segments) and answers with 20 000 bytes of its
        // own, which rmad reassembles and matches. rmad's send completes with SUCCESS and
        // ib_core's with SUCCESS too (it got rmad's final ACK).
        let tap = Tap::new()?;
        let found = rxe_rmpp_agent(&tap)?;
        // The test VM always creates rxe0; without it the suite fails.
        assert!(found.is_some());
        let Some((port, r)) = found else {
            return Ok(());
        };
        let responder = IbResponder::start_rmpp(&port, SA, 20_000);
        assert!(responder.is_some());
        let Some(responder) = responder else {
            r.unregister()?;
            return Ok(());
        };
        let tid = wire::make_tid(r.hi_tid, 60);
        let mut buf = segmented(&r, wire::IB_MGMT_METHOD_GET, tid, 20_000)?;
        // To the IPv6 link-local GID (ib_core's RMPP over RoCEv2 matches ACKs there only,
        // Documentation/behaviour.md §8.21).
        buf.set_ah(Some(gid_address(port.gid(1, 0).ok_or(ENODEV)?, 0)));
        buf.set_timeout_ms(60_000);
        buf.set_retries(3);
        let count = buf.seg_count();
        let posted = post(buf).is_ok();
        let done = wait_for(|| tap.done().is_ok_and(|d| !d.is_empty()));
        let acked = wait_for(|| responder.sent() == (1, 0));
        let sent = responder.sent();
        drop(responder);
        let got = tap.got()?;
        let d = tap.done()?;
        let stats = r.stats();
        r.unregister()?;
        pr_info!(
            "rmpp_send: rxe0: {} segments, {} transmissions, ib_core answers {:?}\n",
            count,
            stats.transmitted,
            sent
        );
        assert!(posted);
        assert_eq!(count, 100);
        assert!(done);
        assert!(acked);
        assert_eq!(
            got.first().map(|g| (g.matched, g.len, g.intact)),
            Some((true, HDR + 20_000, true))
        );
        assert_eq!(d.first().map(|x| x.status), Some(WcStatus::Success));
        Ok(())
    }
}
