// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_rmpp_send`: kernel RMPP, send side (Documentation/behaviour.md §2.8), on
//! the loopback fabric and against ib_core on rxe0, with exact segment, ACK and retry counts.
//!
//! Agent R is a kernel-RMPP agent on port 1 that sends segmented SETs of the SA class (56-byte
//! header, 200 data bytes per segment, every byte of segment `n` equal to `n`). Peer P on port
//! 2 is either a user-RMPP agent that sees every segment as a MAD of its own and answers with
//! ACKs, STOPs and ABORTs written by hand ([`Peer::Script`]), or a second kernel-RMPP agent
//! that reassembles and ACKs by itself ([`Peer::Kernel`]).
//!
//! The cases live in one file per purpose ([`window`]: the window, ACKs, retries and the
//! response wait; [`endings`]: STOP, ABORT, bad ACKs and cancel; [`peers`]: whole transfers
//! with a peer that runs RMPP itself; [`buffers`]: creating and posting segmented buffers),
//! with the helpers they share here; the suite below lists every case. Their `assert!`s fail
//! the running case, as the suite module's own do.

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

mod buffers;
mod endings;
mod peers;
mod window;

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
                    retry: Default::default(),
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
    use super::{
        buffers,
        endings,
        peers,
        window, //
    };
    use kernel::prelude::*;

    #[test]
    fn segments_go_out_window_by_window_as_acked() -> Result {
        window::segments_go_out_window_by_window_as_acked()
    }

    #[test]
    fn padding_shows_in_first_and_last_payload_length() -> Result {
        window::padding_shows_in_first_and_last_payload_length()
    }

    #[test]
    fn lost_acks_retried_go_back_n_with_retries_per_window() -> Result {
        window::lost_acks_retried_go_back_n_with_retries_per_window()
    }

    #[test]
    fn late_ack_after_shortened_waits_costs_no_retry() -> Result {
        window::late_ack_after_shortened_waits_costs_no_retry()
    }

    #[test]
    fn arrived_ack_stops_a_probe_after_one_segment() -> Result {
        window::arrived_ack_stops_a_probe_after_one_segment()
    }

    #[test]
    fn response_after_last_ack_with_turnaround_ack() -> Result {
        window::response_after_last_ack_with_turnaround_ack()
    }

    #[test]
    fn response_wait_expired_is_resp_timeout_without_resending() -> Result {
        window::response_wait_expired_is_resp_timeout_without_resending()
    }

    #[test]
    fn stop_abort_and_bad_acks_end_with_rem_abort_err() -> Result {
        endings::stop_abort_and_bad_acks_end_with_rem_abort_err()
    }

    #[test]
    fn hostile_control_storm_each_send_ends_once() -> Result {
        endings::hostile_control_storm_each_send_ends_once()
    }

    #[test]
    fn abort_while_a_segment_is_in_flight_is_rem_abort_err() -> Result {
        endings::abort_while_a_segment_is_in_flight_is_rem_abort_err()
    }

    #[test]
    fn cancel_at_each_stage_flushes_and_later_acks_are_ignored() -> Result {
        endings::cancel_at_each_stage_flushes_and_later_acks_are_ignored()
    }

    #[test]
    fn kernel_rmpp_peers_carry_1_mib() -> Result {
        peers::kernel_rmpp_peers_carry_1_mib()
    }

    #[test]
    fn kernel_rmpp_peers_recover_a_lost_segment_and_a_lost_ack() -> Result {
        peers::kernel_rmpp_peers_recover_a_lost_segment_and_a_lost_ack()
    }

    #[test]
    fn kernel_rmpp_responder_answers_256_kib_over_a_slow_lossy_wire() -> Result {
        peers::kernel_rmpp_responder_answers_256_kib_over_a_slow_lossy_wire()
    }

    #[test]
    fn rxe_rmad_responder_answers_rmad_with_a_segmented_response() -> Result {
        peers::rxe_rmad_responder_answers_rmad_with_a_segmented_response()
    }

    #[test]
    fn segmented_create_and_post_rules() -> Result {
        buffers::segmented_create_and_post_rules()
    }

    #[test]
    fn response_first_window_is_1_whatever_the_requester_announced() -> Result {
        peers::response_first_window_is_1_whatever_the_requester_announced()
    }

    #[test]
    fn large_segmented_buffers_allocate_or_fail_quietly() -> Result {
        buffers::large_segmented_buffers_allocate_or_fail_quietly()
    }

    #[test]
    fn rxe_segmented_request_to_ib_core_answered_with_a_segmented_response() -> Result {
        peers::rxe_segmented_request_to_ib_core_answered_with_a_segmented_response()
    }
}
