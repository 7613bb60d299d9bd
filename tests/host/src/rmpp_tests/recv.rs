// SPDX-License-Identifier: GPL-2.0

//! The RMPP receiver of `src/mad/rmpp/recv.rs` on the worked cases of Documentation/behaviour.md
//! §2.8 and §2.10.

use super::{
    ack,
    data,
    seg,
    Rx, //
};
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
use crate::mad::rmpp::send::Sizing;
use crate::mad::rmpp::{
    last_pad,
    signed,
    Ack,
    RmppHdr,
    Status, //
};
use crate::mad::wire::{
    IB_MGMT_RMPP_FLAG_FIRST as FIRST,
    IB_MGMT_RMPP_FLAG_LAST as LAST,
    IB_MGMT_RMPP_TYPE_STOP, //
};
use std::vec::Vec;

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
