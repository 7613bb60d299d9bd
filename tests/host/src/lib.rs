// SPDX-License-Identifier: GPL-2.0

//! Host build of rmad's kernel-independent source files, for `cargo test`.
//!
//! The modules below are the very files the kernel module compiles, included by path with the
//! same module paths as in the crate (`crate::mad`, `crate::testing::cases`): the pure layer
//! `src/mad.rs` with its files, and the table-driven cases `src/testing/cases.rs` with theirs,
//! which the tests run.

#![no_std]

#[cfg(test)]
extern crate std;

#[path = "../../../src/mad.rs"]
#[allow(dead_code, unused_imports)]
pub(crate) mod mad;

#[path = "../../../src/testing/cases.rs"]
#[allow(dead_code, unused_imports, unused_macros)]
mod testing_cases;

/// Fuzzing of the pure parts against reference models (issue 16 item 9): short seeded runs in
/// `cargo test`, long runs through `scripts/check/fuzz.sh`.
#[cfg(test)]
mod fuzz;

/// The part of the test flavour that is kernel-independent, at its path in the crate.
pub(crate) mod testing {
    pub(crate) use super::testing_cases as cases;
}

/// Runs one shared check and reports the failing row by name.
#[cfg(test)]
fn run(check: fn() -> testing::cases::CheckResult) {
    if let Err(f) = check() {
        panic!(
            "{} failed at case {} ({}:{})",
            f.check, f.case, f.file, f.line
        );
    }
}

#[cfg(test)]
mod wire_tests {
    use crate::run;
    use crate::testing::cases::wire as checks;

    #[test]
    fn constants() {
        run(checks::constants);
    }
    #[test]
    fn header_layout() {
        run(checks::header_layout);
    }
    #[test]
    fn short_buffers() {
        run(checks::short_buffers);
    }
    #[test]
    fn response_mad() {
        run(checks::response_mad);
    }
    #[test]
    fn cpi_fields() {
        run(checks::cpi_fields);
    }
    #[test]
    fn rmpp_fields() {
        run(checks::rmpp_fields);
    }
    #[test]
    fn class_tables() {
        run(checks::class_tables);
    }
    #[test]
    fn kernel_rmpp_agent() {
        run(checks::kernel_rmpp_agent);
    }
    #[test]
    fn self_description_values() {
        run(checks::self_description_values);
    }

    /// The list that iterating runners use names every check exactly once.
    #[test]
    fn all_lists_every_check() {
        assert_eq!(checks::ALL.len(), 9);
        for (name, check) in checks::ALL {
            if let Err(f) = check() {
                panic!("{name}: case {} line {}", f.case, f.line);
            }
        }
    }
}

#[cfg(test)]
mod state_tests {
    use crate::run;
    use crate::testing::cases::state as checks;

    #[test]
    fn transition_table() {
        run(checks::transition_table);
    }
    #[test]
    fn handler_statuses() {
        run(checks::handler_statuses);
    }
    #[test]
    fn flow_control_rules() {
        run(checks::flow_control_rules);
    }
    #[test]
    fn random_walks() {
        run(checks::random_walks);
    }
}

/// The RMPP machines of `src/mad/rmpp/` on the worked cases of Documentation/behaviour.md
/// §1.5, §2.8 and §2.10.
#[cfg(test)]
mod rmpp_tests {
    use crate::mad::rmpp::recv::{
        precheck,
        window_for_queue,
        Budget,
        Config,
        Kind,
        Phase,
        Transfer,
        Verdict,
        MAX_SEGMENTS,
        MAX_WINDOW, //
    };
    use crate::mad::rmpp::send::{
        ack_timeout_ms,
        AckClock,
        AckVerdict,
        AfterSend,
        SegHeader,
        Sizing,
        Timeout,
        Window, //
    };
    use crate::mad::rmpp::{
        last_pad,
        signed,
        Ack,
        RmppHdr,
        Status,
        IB_MGMT_RMPP_STATUS_ABORT_MAX,
        IB_MGMT_RMPP_STATUS_ABORT_MIN, //
    };
    use crate::mad::wire::{
        IB_MGMT_RMPP_FLAG_ACTIVE as ACTIVE,
        IB_MGMT_RMPP_FLAG_FIRST as FIRST,
        IB_MGMT_RMPP_FLAG_LAST as LAST,
        IB_MGMT_RMPP_TYPE_ABORT,
        IB_MGMT_RMPP_TYPE_ACK,
        IB_MGMT_RMPP_TYPE_DATA,
        IB_MGMT_RMPP_TYPE_STOP, //
    };
    use std::vec::Vec;

    /// A DATA segment header.
    fn seg(n: u32, flags: u8, paylen: u32) -> RmppHdr {
        RmppHdr {
            version: 1,
            rmpp_type: IB_MGMT_RMPP_TYPE_DATA,
            flags: ACTIVE | flags,
            seg_num: n,
            paylen_newwin: paylen,
            ..RmppHdr::default()
        }
    }

    /// An ACK header.
    fn ack_hdr(status: u8, n: u32, newwin: u32) -> RmppHdr {
        RmppHdr {
            version: 1,
            rmpp_type: IB_MGMT_RMPP_TYPE_ACK,
            flags: ACTIVE,
            status,
            seg_num: n,
            paylen_newwin: newwin,
            ..RmppHdr::default()
        }
    }

    /// ACK(s, w).
    fn ack(seg_num: u32, newwin: u32) -> Ack {
        Ack { seg_num, newwin }
    }

    /// Segment `n` of a transfer of `count` segments whose last one has `pad` bytes of
    /// padding, as a Linux sender writes it.
    fn data(count: u32, pad: u32, n: u32) -> RmppHdr {
        let w = Window::new(count, pad, 0, None).unwrap();
        let s = w.segment(n).unwrap();
        seg(n, s.flags, s.paylen)
    }

    /// The receiving side as the engine will run it: one transfer for one key, started by a
    /// FIRST, every verdict and ACK recorded.
    struct Rx {
        cfg: Config,
        t: Option<Transfer>,
        acks: Vec<Ack>,
        verdicts: Vec<Verdict>,
    }

    impl Rx {
        fn new(window: u32, hdr: usize, max: u32) -> Self {
            Self {
                cfg: Config::new(window, hdr, max).unwrap(),
                t: None,
                acks: Vec::new(),
                verdicts: Vec::new(),
            }
        }

        fn feed(&mut self, h: &RmppHdr) -> Verdict {
            let v = match &mut self.t {
                Some(t) => t.on_segment(h),
                None => match Transfer::start(self.cfg, h) {
                    Ok((t, v)) => {
                        self.t = Some(t);
                        v
                    }
                    Err(v) => v,
                },
            };
            match v {
                Verdict::StoreAndAck { ack, .. } | Verdict::Complete { ack, .. } => {
                    self.acks.push(ack)
                }
                Verdict::Ack(a) => self.acks.push(a),
                _ => {}
            }
            self.verdicts.push(v);
            v
        }

        /// Feeds segments `ns` of a transfer of `count` segments with no padding.
        fn feed_all(&mut self, count: u32, ns: impl IntoIterator<Item = u32>) {
            for n in ns {
                self.feed(&data(count, 0, n));
            }
        }

        fn t(&self) -> &Transfer {
            self.t.as_ref().unwrap()
        }

        fn complete_len(&self) -> Option<usize> {
            self.verdicts.iter().find_map(|v| match v {
                Verdict::Complete { len, .. } => Some(*len),
                _ => None,
            })
        }
    }

    /// C's ACK sequence for N segments sent in order with window W (§2.10.4).
    fn in_order_acks(w: u32, count: u32) -> Vec<Ack> {
        let mut rx = Rx::new(w, 56, 100_000);
        rx.feed_all(count, 1..=count);
        assert_eq!(rx.t().phase(), Phase::Complete);
        rx.acks
    }

    #[test]
    fn worked_ack_sequences() {
        assert_eq!(in_order_acks(64, 5), [ack(1, 65), ack(5, 65)]);
        assert_eq!(in_order_acks(64, 65), [ack(1, 65), ack(65, 65)]);
        assert_eq!(
            in_order_acks(64, 130),
            [ack(1, 65), ack(65, 129), ack(129, 193), ack(130, 193)]
        );
        assert_eq!(in_order_acks(64, 1), [ack(1, 1)]);
        assert_eq!(in_order_acks(64, 2), [ack(1, 65), ack(2, 65)]);
        assert_eq!(
            in_order_acks(4, 10),
            [ack(1, 5), ack(5, 9), ack(9, 13), ack(10, 13)]
        );
        assert_eq!(in_order_acks(1, 3), [ack(1, 2), ack(2, 3), ack(3, 3)]);
    }

    #[test]
    fn in_order_verdicts() {
        let mut rx = Rx::new(4, 56, 100);
        rx.feed_all(6, 1..=6);
        assert_eq!(
            rx.verdicts,
            [
                Verdict::StoreAndAck {
                    n: 1,
                    ack: ack(1, 5)
                },
                Verdict::Store { n: 2 },
                Verdict::Store { n: 3 },
                Verdict::Store { n: 4 },
                Verdict::StoreAndAck {
                    n: 5,
                    ack: ack(5, 9)
                },
                Verdict::Complete {
                    n: 6,
                    ack: ack(6, 9),
                    len: 56 + 6 * 200,
                },
            ]
        );
        assert!(rx.verdicts.iter().all(Verdict::is_progress));
        let t = rx.t();
        assert_eq!((t.frontier(), t.last_ack(), t.newwin()), (6, 6, 9));
        assert_eq!(t.len(), Some(1256));
        assert!(t.no_gaps() && (1..=6).all(|n| t.holds(n)) && !t.holds(7) && !t.holds(0));
    }

    /// Each segment lost once: all but n in order, then n, then what the sender's go-back-N
    /// resends from the last ACK on.
    #[test]
    fn every_segment_lost_once() {
        // W = 4, N = 10: the ACKs up to the late segment n, worked by hand.
        let expected_after_n: [(u32, &[Ack]); 10] = [
            (1, &[ack(1, 5)]),
            (2, &[ack(1, 5), ack(5, 9)]),
            (3, &[ack(1, 5), ack(5, 9)]),
            (4, &[ack(1, 5), ack(5, 9)]),
            (5, &[ack(1, 5), ack(5, 9)]),
            (6, &[ack(1, 5), ack(5, 9), ack(9, 13)]),
            (7, &[ack(1, 5), ack(5, 9), ack(9, 13)]),
            (8, &[ack(1, 5), ack(5, 9), ack(9, 13)]),
            (9, &[ack(1, 5), ack(5, 9), ack(9, 13)]),
            (10, &[ack(1, 5), ack(5, 9), ack(9, 13), ack(10, 13)]),
        ];
        for (lost, after_n) in expected_after_n {
            let mut rx = Rx::new(4, 56, 100);
            rx.feed_all(10, (1..=10).filter(|n| *n != lost));
            rx.feed_all(10, [lost]);
            assert_eq!(rx.acks, after_n, "lost {lost}");
            let resume = rx.acks.last().unwrap().seg_num + 1;
            rx.feed_all(10, resume..=10);
            assert_eq!(rx.acks, in_order_acks(4, 10), "lost {lost}");
            assert_eq!(rx.complete_len(), Some(56 + 10 * 200), "lost {lost}");
        }
        // W = 64, N = 130: the same holds for every n.
        for lost in 1..=130 {
            let mut rx = Rx::new(64, 56, 1000);
            rx.feed_all(130, (1..=130).filter(|n| *n != lost));
            rx.feed_all(130, [lost]);
            let resume = rx.acks.last().unwrap().seg_num + 1;
            rx.feed_all(130, resume..=130);
            assert_eq!(rx.acks, in_order_acks(64, 130), "lost {lost}");
            assert_eq!(rx.t().phase(), Phase::Complete);
        }
    }

    #[test]
    fn duplicates() {
        let mut rx = Rx::new(4, 56, 100);
        for n in 1..=6 {
            rx.feed_all(6, [n, n]);
        }
        assert_eq!(
            rx.verdicts,
            [
                Verdict::StoreAndAck {
                    n: 1,
                    ack: ack(1, 5)
                },
                // At or below the last ACK: the ACK again.
                Verdict::Ack(ack(1, 5)),
                Verdict::Store { n: 2 },
                // Above the last ACK and held: silence.
                Verdict::Drop,
                Verdict::Store { n: 3 },
                Verdict::Drop,
                Verdict::Store { n: 4 },
                Verdict::Drop,
                Verdict::StoreAndAck {
                    n: 5,
                    ack: ack(5, 9)
                },
                Verdict::Ack(ack(5, 9)),
                Verdict::Complete {
                    n: 6,
                    ack: ack(6, 9),
                    len: 1256,
                },
                // After completion, anything within the window draws the final ACK.
                Verdict::Ack(ack(6, 9)),
            ]
        );
        // A duplicate above a gap is dropped silently too.
        let mut rx = Rx::new(4, 56, 100);
        rx.feed_all(6, [1, 3, 3]);
        assert_eq!(rx.verdicts[2], Verdict::Drop);
        // The repeat ACK carries the frontier, which moved since the last ACK.
        rx.feed_all(6, [2, 1]);
        assert_eq!(rx.verdicts[4], Verdict::Ack(ack(3, 5)));
        assert_eq!(rx.t().last_ack(), 3);
        // Now 3 is at the last ACK: an ACK, not silence.
        assert_eq!(rx.feed(&data(6, 0, 3)), Verdict::Ack(ack(3, 5)));
    }

    #[test]
    fn reordering_within_the_window() {
        let mut rx = Rx::new(4, 56, 100);
        rx.feed_all(10, [1, 4, 3, 2, 5, 9, 8, 7, 6, 10]);
        assert_eq!(
            rx.verdicts,
            [
                Verdict::StoreAndAck {
                    n: 1,
                    ack: ack(1, 5)
                },
                Verdict::Store { n: 4 },
                Verdict::Store { n: 3 },
                Verdict::Store { n: 2 },
                Verdict::StoreAndAck {
                    n: 5,
                    ack: ack(5, 9)
                },
                Verdict::Store { n: 9 },
                Verdict::Store { n: 8 },
                Verdict::Store { n: 7 },
                Verdict::StoreAndAck {
                    n: 6,
                    ack: ack(9, 13)
                },
                Verdict::Complete {
                    n: 10,
                    ack: ack(10, 13),
                    len: 56 + 2000,
                },
            ]
        );
        // The LAST may arrive before the gap below it fills.
        let mut rx = Rx::new(64, 56, 100);
        rx.feed_all(4, [1, 4, 3]);
        assert_eq!(rx.t().count(), Some(4));
        assert_eq!(rx.t().len(), None);
        assert_eq!(
            rx.feed(&data(4, 0, 2)),
            Verdict::Complete {
                n: 2,
                ack: ack(4, 65),
                len: 56 + 800,
            }
        );
    }

    #[test]
    fn out_of_window_drop() {
        let mut rx = Rx::new(4, 56, 100);
        rx.feed_all(20, [1, 6, 7]);
        rx.feed(&seg(100, 0, 0));
        assert_eq!(&rx.verdicts[1..], [Verdict::Drop; 3]);
        assert_eq!((rx.t().frontier(), rx.t().newwin()), (1, 5));
        rx.feed_all(20, [5, 2, 3, 4, 6]);
        assert_eq!(
            &rx.verdicts[4..],
            [
                Verdict::Store { n: 5 },
                Verdict::Store { n: 2 },
                Verdict::Store { n: 3 },
                Verdict::StoreAndAck {
                    n: 4,
                    ack: ack(5, 9)
                },
                Verdict::Store { n: 6 },
            ]
        );
        // Beyond the window even with a count known: dropped, not S2B.
        assert_eq!(rx.feed(&seg(21, 0, 0)), Verdict::Drop);
        assert_eq!(rx.feed(&seg(u32::MAX >> 1, 0, 0)), Verdict::Drop);
        assert_eq!(rx.t().phase(), Phase::Active);
    }

    #[test]
    fn re_ack_of_old_segments() {
        let mut rx = Rx::new(64, 56, 100);
        rx.feed_all(3, [1]);
        // 0 and 2^31 and above are at most 0 as C's int: a repeat ACK.
        for n in [0, 0x8000_0000, 0xFFFF_FFFF, 0xC000_0000] {
            assert_eq!(rx.feed(&seg(n, 0, 0)), Verdict::Ack(ack(1, 65)), "{n:#x}");
        }
        // A FIRST again (segment 1 sent again) is a duplicate.
        assert_eq!(rx.feed(&data(3, 0, 1)), Verdict::Ack(ack(1, 65)));
        // FIRST on 0 or on a negative number is BAD_SEG, before any window check.
        let mut t = rx.t().clone();
        assert_eq!(
            t.on_segment(&seg(0x8000_0000, FIRST, 0)),
            Verdict::Reject(Status::BadSeg)
        );
        rx.feed_all(3, [2, 3]);
        assert_eq!(rx.t().phase(), Phase::Complete);
        for n in [0, 2, 3, 4, 65, 0x8000_0000] {
            assert_eq!(rx.feed(&seg(n, 0, 0)), Verdict::Ack(ack(3, 65)), "{n}");
        }
        assert_eq!(rx.feed(&data(3, 0, 1)), Verdict::Ack(ack(3, 65)));
        assert_eq!(rx.feed(&seg(66, 0, 0)), Verdict::Drop);
        assert!(!rx.verdicts.last().unwrap().is_progress());
        assert_eq!(signed(0x8000_0000), -0x8000_0000);
        assert_eq!(signed(0x7FFF_FFFF), 0x7FFF_FFFF);
        assert_eq!(signed(u32::MAX), -1);
    }

    #[test]
    fn abort_reasons() {
        let cfg = Config::new(64, 56, 10).unwrap();
        let start = |h: RmppHdr| Transfer::start(cfg, &h).map(|(_, v)| v);
        let started = |count: u32| Transfer::start(cfg, &data(count, 0, 1)).unwrap().0;
        // BAD_STATUS and BAD_SEG, at the start.
        let mut h = data(3, 0, 1);
        h.status = 1;
        assert_eq!(start(h), Err(Verdict::Reject(Status::BadStatus)));
        assert_eq!(start(seg(1, 0, 0)), Err(Verdict::Reject(Status::BadSeg)));
        assert_eq!(
            start(seg(2, FIRST, 0)),
            Err(Verdict::Reject(Status::BadSeg))
        );
        // A segment other than a FIRST finds no transfer: a silent drop.
        assert_eq!(start(seg(2, 0, 0)), Err(Verdict::Drop));
        assert_eq!(precheck(&seg(1, FIRST, 0)), Ok(Kind::First));
        assert_eq!(precheck(&seg(7, LAST, 0)), Ok(Kind::Other));
        // ... and later: the transfer ends, and drops all that follows.
        let mut t = started(3);
        let mut h = data(3, 0, 2);
        h.status = 0x7F;
        assert_eq!(t.on_segment(&h), Verdict::Reject(Status::BadStatus));
        assert_eq!(t.phase(), Phase::Ended);
        assert_eq!(t.on_segment(&data(3, 0, 2)), Verdict::Drop);
        assert_eq!(t.on_segment(&data(3, 0, 1)), Verdict::Drop);
        let mut t = started(3);
        assert_eq!(
            t.on_segment(&seg(2, FIRST, 0)),
            Verdict::Reject(Status::BadSeg)
        );
        assert_eq!(t.phase(), Phase::Ended);
        // A completed transfer answers them but stays complete.
        let (mut t, _) = Transfer::start(cfg, &data(1, 0, 1)).unwrap();
        assert_eq!(
            t.on_segment(&seg(2, FIRST, 0)),
            Verdict::Reject(Status::BadSeg)
        );
        assert_eq!(t.phase(), Phase::Complete);

        // BAD_LEN: LAST before the announced count, no LAST at it, a LAST PayloadLength that
        // disagrees with the FIRST's total, a message shorter than its class header.
        let mut t = started(3);
        assert_eq!(
            t.on_segment(&seg(2, LAST, 220)),
            Verdict::Reject(Status::BadLen)
        );
        let mut t = started(3);
        t.on_segment(&data(3, 0, 2));
        assert_eq!(t.on_segment(&seg(3, 0, 0)), Verdict::Reject(Status::BadLen));
        let mut t = started(3);
        assert_eq!(
            t.on_segment(&seg(3, LAST, 219)),
            Verdict::Reject(Status::BadLen)
        );
        assert_eq!(t.phase(), Phase::Ended);
        // The FIRST announced one segment, but has no LAST.
        assert_eq!(
            start(seg(1, FIRST, 100)),
            Err(Verdict::Reject(Status::BadLen))
        );
        // FIRST|LAST with a total of more than one segment.
        assert_eq!(
            start(seg(1, FIRST | LAST, 221)),
            Err(Verdict::Reject(Status::BadLen))
        );
        // One segment of 10 bytes with a 56-byte header: 46 bytes in all.
        assert_eq!(
            start(seg(1, FIRST | LAST, 10)),
            Err(Verdict::Reject(Status::BadLen))
        );
        // An unknown length (FIRST PayloadLength 0): whatever the LAST says, if long enough.
        let (mut t, _) = Transfer::start(cfg, &seg(1, FIRST, 0)).unwrap();
        assert_eq!(t.count(), None);
        assert_eq!(
            t.on_segment(&seg(2, LAST, 0)),
            Verdict::Complete {
                n: 2,
                ack: ack(2, 65),
                len: 56 + 400 - 220,
            }
        );
        // A LAST PayloadLength above 220 counts as no padding, as in C.
        let (mut t, _) = Transfer::start(cfg, &seg(1, FIRST, 0)).unwrap();
        assert!(matches!(
            t.on_segment(&seg(2, LAST, 5000)),
            Verdict::Complete { len: 456, .. }
        ));
        let (mut t, _) = Transfer::start(cfg, &seg(1, FIRST, 440)).unwrap();
        assert!(matches!(
            t.on_segment(&seg(2, LAST, 5000)),
            Verdict::Complete { len: 456, .. }
        ));

        // S2B: beyond the announced count within the window; beyond a LAST already held;
        // a LAST below a segment held.
        let mut t = started(3);
        assert_eq!(t.on_segment(&seg(4, 0, 0)), Verdict::Reject(Status::S2b));
        assert_eq!(t.phase(), Phase::Ended);
        let (mut t, _) = Transfer::start(cfg, &seg(1, FIRST, 0)).unwrap();
        assert_eq!(t.on_segment(&seg(3, LAST, 220)), Verdict::Store { n: 3 });
        assert_eq!(t.count(), Some(3));
        assert_eq!(t.on_segment(&seg(5, 0, 0)), Verdict::Reject(Status::S2b));
        let (mut t, _) = Transfer::start(cfg, &seg(1, FIRST, 0)).unwrap();
        assert_eq!(t.on_segment(&seg(5, 0, 0)), Verdict::Store { n: 5 });
        assert_eq!(
            t.on_segment(&seg(3, LAST, 220)),
            Verdict::Reject(Status::S2b)
        );
        let (mut t, _) = Transfer::start(cfg, &seg(1, FIRST, 0)).unwrap();
        t.on_segment(&seg(3, LAST, 220));
        assert_eq!(
            t.on_segment(&seg(2, LAST, 220)),
            Verdict::Reject(Status::BadLen)
        );

        // RESX (a STOP): more than max_segments (10), announced or reached.
        assert_eq!(
            start(seg(1, FIRST, 11 * 220)),
            Err(Verdict::Reject(Status::Resx))
        );
        assert!(start(seg(1, FIRST, 10 * 220)).is_ok());
        let (mut t, _) = Transfer::start(cfg, &seg(1, FIRST, 0)).unwrap();
        assert_eq!(t.on_segment(&seg(10, 0, 0)), Verdict::Store { n: 10 });
        assert_eq!(t.on_segment(&seg(11, 0, 0)), Verdict::Reject(Status::Resx));
        assert_eq!(Status::Resx.rmpp_type(), IB_MGMT_RMPP_TYPE_STOP);

        // T2L: the caller's inactivity timer.
        let mut t = started(3);
        assert_eq!(t.expire(), Verdict::Reject(Status::T2l));
        assert_eq!(t.expire(), Verdict::Drop);
        let (mut t, _) = Transfer::start(cfg, &data(1, 0, 1)).unwrap();
        assert_eq!(t.expire(), Verdict::Drop);
        assert_eq!(t.phase(), Phase::Complete);
    }

    /// `mad_len` of a Linux sender's transfer is its `hdr_len + data_len` (§2.10.5), for the
    /// class headers of RMPP, vendor range 2, SA and device management.
    #[test]
    fn completion_length() {
        for hdr in [36usize, 40, 56, 64] {
            for data_len in [
                0usize, 1, 19, 20, 199, 200, 201, 219, 220, 221, 1000, 4400, 9999,
            ] {
                let s = Sizing::new(hdr, data_len).unwrap();
                assert_eq!(s.seg_size, 256 - hdr);
                assert_eq!(s.seg_count as usize * s.seg_size, data_len + s.pad as usize);
                let mut rx = Rx::new(64, hdr, 1000);
                for n in 1..=s.seg_count {
                    rx.feed(&data(s.seg_count, s.pad, n));
                }
                assert_eq!(rx.complete_len(), Some(hdr + data_len), "{hdr}/{data_len}");
                assert_eq!(rx.t().len(), Some(hdr + data_len));
            }
        }
        // One segment with PayloadLength 0: 36 bytes (C's formula), accepted with the
        // RMPP header alone as the class header.
        let mut rx = Rx::new(64, 36, 10);
        assert!(matches!(
            rx.feed(&seg(1, FIRST | LAST, 0)),
            Verdict::Complete { len: 36, .. }
        ));
        assert_eq!(last_pad(0), 220);
        assert_eq!(last_pad(220), 0);
        assert_eq!(last_pad(221), 0);
        assert_eq!(last_pad(u32::MAX), 0);
        let cfg = Config::new(64, 64, 10).unwrap();
        assert_eq!(cfg.data_size(), 192);
        assert_eq!(
            [0, 1, 2, 10, 11].map(|n| cfg.offset(n)),
            [None, Some(0), Some(192), Some(9 * 192), None]
        );
    }

    #[test]
    fn full_window_bitmap() {
        let mut rx = Rx::new(MAX_WINDOW, 56, 5000);
        rx.feed_all(3000, [1]);
        rx.feed_all(3000, (3..=1025).rev());
        assert!(rx.verdicts[1..]
            .iter()
            .all(|v| matches!(v, Verdict::Store { .. })));
        assert!(!rx.t().no_gaps());
        assert!(rx.t().holds(1025) && !rx.t().holds(2) && !rx.t().holds(1026));
        assert_eq!(rx.feed(&data(3000, 0, 1026)), Verdict::Drop);
        assert_eq!(
            rx.feed(&data(3000, 0, 2)),
            Verdict::StoreAndAck {
                n: 2,
                ack: ack(1025, 2049)
            }
        );
        assert!(rx.t().no_gaps());
        // Every other segment, then the gaps, across word boundaries.
        rx.feed_all(3000, (1027..=2049).step_by(2));
        rx.feed_all(3000, (1026..=2048).step_by(2));
        assert_eq!(rx.acks.last(), Some(&ack(2049, 3073)));
        rx.feed_all(3000, 2050..=3000);
        assert_eq!(rx.complete_len(), Some(56 + 3000 * 200));
    }

    #[test]
    fn configuration() {
        assert_eq!(window_for_queue(512), 64);
        assert_eq!(window_for_queue(64), 8);
        assert_eq!(window_for_queue(8192), 1024);
        assert_eq!(window_for_queue(0), 1);
        assert_eq!(window_for_queue(u32::MAX), MAX_WINDOW);
        assert!(Config::new(0, 56, 1).is_none());
        assert!(Config::new(MAX_WINDOW + 1, 56, 1).is_none());
        assert!(Config::new(1, 35, 1).is_none());
        assert!(Config::new(1, 256, 1).is_none());
        assert!(Config::new(1, 255, 1).is_some());
        assert!(Config::new(1, 56, 0).is_none());
        assert!(Config::new(1, 56, MAX_SEGMENTS + 1).is_none());
        let c = Config::new(1024, 36, MAX_SEGMENTS).unwrap();
        assert_eq!(
            (c.window(), c.hdr_size(), c.max_segments()),
            (1024, 36, MAX_SEGMENTS)
        );
        let mut b = Budget::new(2);
        assert!(b.try_acquire() && b.try_acquire() && !b.try_acquire());
        assert_eq!(b.active(), 2);
        b.release();
        assert!(b.try_acquire());
        b.release();
        b.release();
        b.release();
        assert_eq!(b.active(), 0);
        assert!(!Budget::new(0).try_acquire());
    }

    #[test]
    fn headers_and_statuses() {
        let h = RmppHdr {
            version: 1,
            rmpp_type: 2,
            resp_time: 0x1F,
            flags: 0x7,
            status: 0x80,
            seg_num: 0x0102_0304,
            paylen_newwin: 0xA0B0_C0D0,
        };
        let mut mad = [0xEEu8; 256];
        h.write(&mut mad).unwrap();
        assert_eq!(
            mad[24..36],
            [1, 2, 0xFF, 0x80, 1, 2, 3, 4, 0xA0, 0xB0, 0xC0, 0xD0]
        );
        assert!(mad[..24].iter().chain(&mad[36..]).all(|b| *b == 0xEE));
        assert_eq!(RmppHdr::parse(&mad), Ok(h));
        assert!(RmppHdr::parse(&mad[..35]).is_err());
        assert!(h.write(&mut mad[..35]).is_err());
        let mut odd = h;
        odd.resp_time = 0xFF;
        odd.flags = 0xFF;
        odd.write(&mut mad).unwrap();
        assert_eq!(mad[26], 0xFF);
        let a = ack(3, 67).hdr();
        assert_eq!(
            (a.rmpp_type, a.flags, a.status, a.seg_num, a.paylen_newwin),
            (IB_MGMT_RMPP_TYPE_ACK, ACTIVE, 0, 3, 67)
        );
        let all = [
            Status::Resx,
            Status::T2l,
            Status::BadLen,
            Status::BadSeg,
            Status::Badt,
            Status::W2s,
            Status::S2b,
            Status::BadStatus,
            Status::Unv,
            Status::Tmr,
            Status::Unspec,
        ];
        let codes = all.map(Status::code);
        assert_eq!(codes, [1, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127]);
        for code in 0..=255u8 {
            let s = Status::from_code(code);
            assert_eq!(s.is_some(), codes.contains(&code));
            if let Some(s) = s {
                assert_eq!(s.code(), code);
                let h = s.hdr();
                assert_eq!(
                    (h.status, h.seg_num, h.paylen_newwin, h.flags),
                    (code, 0, 0, ACTIVE)
                );
                let abort =
                    (IB_MGMT_RMPP_STATUS_ABORT_MIN..=IB_MGMT_RMPP_STATUS_ABORT_MAX).contains(&code);
                let kind = if abort {
                    IB_MGMT_RMPP_TYPE_ABORT
                } else {
                    IB_MGMT_RMPP_TYPE_STOP
                };
                assert_eq!(h.rmpp_type, kind);
            }
        }
    }

    /// The §1.5 sizes and what `send_next_seg` writes in each segment.
    #[test]
    fn send_segment_fields() {
        let hdr = |w: &Window, n| w.segment(n).unwrap();
        let s = Sizing::new(56, 201).unwrap();
        assert_eq!(
            s,
            Sizing {
                seg_size: 200,
                seg_count: 2,
                pad: 199
            }
        );
        let w = Window::new(s.seg_count, s.pad, 0, None).unwrap();
        assert_eq!(
            hdr(&w, 1),
            SegHeader {
                flags: ACTIVE | FIRST,
                seg_num: 1,
                paylen: 2 * 220 - 199
            }
        );
        assert_eq!(
            hdr(&w, 2),
            SegHeader {
                flags: ACTIVE | LAST,
                seg_num: 2,
                paylen: 21
            }
        );
        assert_eq!((w.segment(0), w.segment(3)), (None, None));
        let s = Sizing::new(56, 1000).unwrap();
        assert_eq!((s.seg_count, s.pad), (5, 0));
        let w = Window::new(5, 0, 0, None).unwrap();
        assert_eq!(
            (1..=5)
                .map(|n| (hdr(&w, n).flags, hdr(&w, n).paylen))
                .collect::<Vec<_>>(),
            [
                (ACTIVE | FIRST, 1100),
                (ACTIVE, 0),
                (ACTIVE, 0),
                (ACTIVE, 0),
                (ACTIVE | LAST, 220)
            ]
        );
        // One segment: FIRST and LAST, with the LAST value (C assigns it second).
        let s = Sizing::new(56, 10).unwrap();
        assert_eq!((s.seg_count, s.pad), (1, 190));
        let w = Window::new(1, 190, 0, None).unwrap();
        assert_eq!(
            (hdr(&w, 1).flags, hdr(&w, 1).paylen),
            (ACTIVE | FIRST | LAST, 30)
        );
        // No data: one segment of padding.
        assert_eq!(
            Sizing::new(56, 0).map(|s| (s.seg_count, s.pad)),
            Some((1, 200))
        );
        assert_eq!(
            Sizing::new(36, 440).map(|s| (s.seg_count, s.pad)),
            Some((2, 0))
        );
        assert_eq!(Sizing::new(35, 10), None);
        assert_eq!(Sizing::new(256, 10), None);
        assert_eq!(Sizing::new(56, usize::MAX), None);
        assert!(Window::new(0, 0, 0, None).is_none());
        assert!(Window::new(1, 221, 0, None).is_none());
        assert!(Window::new(u32::MAX / 220 + 1, 0, 0, None).is_none());
        assert_eq!(
            [0, 1, 1999, 2000, 2001, u32::MAX].map(ack_timeout_ms),
            [2000, 1, 1999, 2000, 2000, 2000]
        );
    }

    #[test]
    fn ack_clock_follows_the_round_trip_and_backs_off() {
        const MS: i64 = 1_000_000;
        let mut c = AckClock::default();
        // Nothing measured: C's wait.
        assert_eq!(c.wait_ms(0, 3), 2000);
        assert_eq!(c.wait_ms(300, 3), 300);
        // A 10 ms round trip: 4 × 10 = 40, raised to the 50 ms floor.
        c.waiting(0);
        c.acked(10 * MS, true);
        assert_eq!(c.srtt_ns(), Some(10 * MS));
        assert_eq!(c.wait_ms(0, 3), 50);
        // A 90 ms sample: (7 × 10 + 90) / 8 = 20 ms, so 80 ms.
        c.waiting(100 * MS);
        c.acked(190 * MS, true);
        assert_eq!(c.srtt_ns(), Some(20 * MS));
        assert_eq!(c.wait_ms(0, 3), 80);
        // Expiries double the wait up to the bound, and the resent window gives no sample.
        c.waiting(200 * MS);
        c.expired();
        assert_eq!(c.wait_ms(0, 3), 160);
        c.waiting(300 * MS);
        c.expired();
        c.expired();
        c.expired();
        c.expired();
        assert_eq!(c.wait_ms(0, 3), 2000);
        assert_eq!(c.wait_ms(100, 3), 100);
        c.acked(5000 * MS, true);
        assert_eq!(c.srtt_ns(), Some(20 * MS));
        assert_eq!(c.wait_ms(0, 3), 80);
        // An ACK that moves nothing changes nothing; the floor never exceeds the bound.
        c.waiting(6000 * MS);
        c.acked(6001 * MS, false);
        assert_eq!(c.srtt_ns(), Some(20 * MS));
        assert_eq!(c.wait_ms(10, 3), 10);
        for _ in 0..40 {
            c.expired();
        }
        assert_eq!(c.wait_ms(0, 3), 2000);
        // With no retry left a window waits the whole bound, measured round trip or not.
        c.acked(7000 * MS, true);
        assert_eq!(c.wait_ms(0, 3), 80);
        assert_eq!(c.wait_ms(0, 0), 2000);
        assert_eq!(c.wait_ms(500, 0), 500);
    }

    #[test]
    fn only_expiries_of_the_whole_ack_bound_use_a_retry() {
        const MS: i64 = 1_000_000;
        let mut c = AckClock::default();
        // Nothing measured: the armed wait is the bound, and its expiry counts.
        assert_eq!(c.arm(0, 3), 2000);
        assert!(!c.expired());
        assert_eq!(c.arm(300, 3), 300);
        assert!(!c.expired());
        let mut c = AckClock::default();
        // Measured at 10 ms: 50, 100, ... 1600 ms are shortened (free), 2000 is not.
        c.waiting(0);
        c.acked(10 * MS, true);
        let mut waits = Vec::new();
        loop {
            let ms = c.arm(0, 3);
            let short = c.expired();
            waits.push((ms, short));
            if !short {
                break;
            }
        }
        assert_eq!(
            waits,
            [
                (50, true),
                (100, true),
                (200, true),
                (400, true),
                (800, true),
                (1600, true),
                (2000, false)
            ]
        );
        // An expiry with nothing armed since is not shortened.
        assert!(!c.expired());
        // A window with no retry left waits the bound: its expiry counts.
        c.acked(20 * MS, true);
        assert_eq!(c.arm(0, 0), 2000);
        assert!(!c.expired());
        // The window goes back N on a probe without using a retry.
        let mut w = Window::new(4, 0, 1, None).unwrap();
        assert_eq!((w.next(), w.next()), (Some(1), None));
        assert_eq!(w.probe(), Some(1));
        assert_eq!(w.retries_left(), 1);
        assert_eq!(w.next(), None);
        // Everything ACKed: the wait was the response's, not the clock's; no probe.
        let mut w = Window::new(1, 0, 1, None).unwrap();
        assert_eq!(w.next(), Some(1));
        assert_eq!(w.on_ack(&ack_hdr(0, 1, 1)), AckVerdict::AllAcked);
        assert_eq!(w.probe(), None);
    }

    #[test]
    fn send_window_go_back_n_and_retries() {
        let mut w = Window::new(10, 0, 2, None).unwrap();
        assert_eq!((w.next(), w.next()), (Some(1), None));
        assert_eq!(w.after_send(), AfterSend::AwaitAck);
        // No ACK: the same segment again, twice, then failure.
        assert_eq!(w.on_timeout(), Timeout::Retry { from: 1 });
        assert_eq!(w.on_timeout(), Timeout::Retry { from: 1 });
        assert_eq!(w.retries_left(), 0);
        assert_eq!(w.on_timeout(), Timeout::Fail);
        // An ACK moving on restores the retries of the new window.
        assert_eq!(
            w.on_ack(&ack_hdr(0, 1, 5)),
            AckVerdict::Progress { advanced: true }
        );
        assert_eq!(w.retries_left(), 2);
        assert_eq!(
            [
                w.after_send(),
                w.after_send(),
                w.after_send(),
                w.after_send(),
                w.after_send()
            ],
            [
                AfterSend::Send(2),
                AfterSend::Send(3),
                AfterSend::Send(4),
                AfterSend::Send(5),
                AfterSend::AwaitAck
            ]
        );
        // Go back to the segment after the last ACKed one, and on from there.
        assert_eq!(w.on_timeout(), Timeout::Retry { from: 2 });
        assert_eq!(w.retries_left(), 1);
        assert_eq!((w.sent(), w.after_send()), (2, AfterSend::Send(3)));
        // An ACK of the same segment with a wider window: accepted, retries unchanged.
        assert_eq!(
            w.on_ack(&ack_hdr(0, 1, 6)),
            AckVerdict::Progress { advanced: false }
        );
        assert_eq!((w.retries_left(), w.newwin()), (1, 6));
        assert_eq!(
            w.on_ack(&ack_hdr(0, 1, 6)),
            AckVerdict::Progress { advanced: false }
        );
        // Old ACKs: a smaller window, a lower segment.
        assert_eq!(w.on_ack(&ack_hdr(0, 1, 5)), AckVerdict::Ignore);
        assert_eq!(
            w.on_ack(&ack_hdr(0, 5, 9)),
            AckVerdict::Progress { advanced: true }
        );
        assert_eq!(w.on_ack(&ack_hdr(0, 4, 9)), AckVerdict::Ignore);
        assert_eq!(w.on_ack(&ack_hdr(0, 0x8000_0000, 9)), AckVerdict::Ignore);
        // ACKs beyond what was sent skip ahead (deviation 3).
        assert_eq!(w.sent(), 5);
        assert_eq!(
            w.on_ack(&ack_hdr(0, 7, 9)),
            AckVerdict::Progress { advanced: true }
        );
        assert_eq!(w.next(), Some(8));
        // S2B: beyond the count or the current window.
        assert_eq!(
            w.on_ack(&ack_hdr(0, 10, 13)),
            AckVerdict::Abort(Status::S2b)
        );
        assert_eq!(
            w.on_ack(&ack_hdr(0, 11, 13)),
            AckVerdict::Abort(Status::S2b)
        );
        assert_eq!(
            w.on_ack(&ack_hdr(0, 9, 13)),
            AckVerdict::Progress { advanced: true }
        );
        assert_eq!(w.on_ack(&ack_hdr(0, 10, 13)), AckVerdict::AllAcked);
        assert!(w.all_acked());
        assert_eq!(w.after_send(), AfterSend::AwaitResponse);
        assert_eq!(w.next(), None);
        // Waiting for the response: no RMPP retry, but one retry used, as in C.
        assert_eq!(w.on_timeout(), Timeout::NoResponse);
        assert_eq!(w.retries_left(), 1);
        assert_eq!(w.on_ack(&ack_hdr(0, 10, 13)), AckVerdict::AlreadyAcked);
        // A status and W2S come before everything, even when all is ACKed.
        assert_eq!(
            w.on_ack(&ack_hdr(1, 10, 13)),
            AckVerdict::Abort(Status::BadStatus)
        );
        assert_eq!(w.on_ack(&ack_hdr(0, 10, 9)), AckVerdict::Abort(Status::W2s));
        // Signed comparisons: NewWindowLast 2^31 is below any positive SegmentNumber.
        let mut w = Window::new(10, 0, 2, None).unwrap();
        assert_eq!(
            w.on_ack(&ack_hdr(0, 1, 0x8000_0000)),
            AckVerdict::Abort(Status::W2s)
        );
        assert_eq!(w.on_ack(&ack_hdr(0, 0xFFFF_FFFF, 5)), AckVerdict::Ignore);
        // The turnaround ACK (0, 1) of a double-sided transfer is old for a fresh window.
        assert_eq!(
            w.on_ack(&ack_hdr(0, 0, 1)),
            AckVerdict::Progress { advanced: false }
        );
        assert_eq!(w.on_ack(&ack_hdr(0, 0, 0)), AckVerdict::Ignore);
        assert_eq!(w.on_ack(&ack_hdr(0, 2, 2)), AckVerdict::Abort(Status::S2b));
    }

    #[test]
    fn send_first_window() {
        let w = |repwin| Window::new(10, 0, 0, repwin).unwrap().newwin();
        assert_eq!(
            [
                None,
                Some(0),
                Some(1),
                Some(7),
                Some(10),
                Some(11),
                Some(u32::MAX)
            ]
            .map(w),
            [1, 1, 1, 7, 10, 10, 10]
        );
        let mut win = Window::new(3, 0, 0, Some(u32::MAX)).unwrap();
        assert_eq!(
            [win.next(), win.next(), win.next(), win.next()],
            [Some(1), Some(2), Some(3), None]
        );
    }

    /// A sender and a receiver with a lossless channel: the ACKs the window takes are exactly
    /// the receiver's, and the transfer ends all ACKed.
    #[test]
    fn send_and_receive() {
        for (w, count) in [(1, 1), (1, 5), (4, 10), (64, 130), (3, 100)] {
            let mut tx = Window::new(count, 7, 1, None).unwrap();
            let mut rx = Rx::new(w, 56, 1000);
            let mut queue: Vec<u32> = tx.next().into_iter().collect();
            while let Some(n) = queue.pop() {
                let s = tx.segment(n).unwrap();
                let acks = rx.acks.len();
                rx.feed(&seg(n, s.flags, s.paylen));
                for a in rx.acks.split_off(acks) {
                    let v = tx.on_ack(&ack_hdr(0, a.seg_num, a.newwin));
                    assert!(
                        matches!(v, AckVerdict::Progress { .. } | AckVerdict::AllAcked),
                        "{v:?}"
                    );
                }
                if let AfterSend::Send(n) = tx.after_send() {
                    queue.push(n);
                }
            }
            assert!(tx.all_acked(), "W {w}, N {count}");
            assert_eq!(rx.complete_len(), Some(56 + count as usize * 200 - 7));
        }
    }
}
