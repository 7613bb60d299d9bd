// SPDX-License-Identifier: GPL-2.0

//! The RMPP send window of `src/mad/rmpp/send.rs` on the worked cases of Documentation/behaviour.md
//! §1.5 and §2.10, and whole transfers from the window to the receiver.

use super::{
    ack_hdr,
    seg,
    Rx, //
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
use crate::mad::rmpp::Status;
use crate::mad::wire::{
    IB_MGMT_RMPP_FLAG_ACTIVE as ACTIVE,
    IB_MGMT_RMPP_FLAG_FIRST as FIRST,
    IB_MGMT_RMPP_FLAG_LAST as LAST, //
};
use std::vec::Vec;

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
fn probe_sends_one_segment_then_goes_back_n() {
    // Deviation 5: a window of 8 in flight (2..=9 after ACK(1, 9)).
    let mut w = Window::new(17, 0, 3, None).unwrap();
    assert_eq!(w.next(), Some(1));
    assert_eq!(w.on_ack(&ack_hdr(0, 1, 9)), AckVerdict::Progress { advanced: true });
    for n in 2..=9 {
        assert_eq!(w.after_send(), AfterSend::Send(n));
    }
    assert_eq!(w.after_send(), AfterSend::AwaitAck);
    // The first shortened wait's expiry: segment 2 alone, then a wait for an ACK.
    assert_eq!(w.probe(), Some(2));
    assert!(w.probing());
    assert_eq!(w.after_send(), AfterSend::AwaitAck);
    assert_eq!(w.sent(), 2);
    // No ACK: the next probe goes back N, the window following segment by segment.
    assert_eq!(w.probe(), Some(2));
    assert!(!w.probing());
    assert_eq!(w.after_send(), AfterSend::Send(3));
    assert_eq!(w.retries_left(), 3);
    // The ACK that a probe waits for moves the window and sending goes on after it.
    let mut w = Window::new(17, 0, 3, None).unwrap();
    assert_eq!(w.next(), Some(1));
    assert_eq!(w.on_ack(&ack_hdr(0, 1, 9)), AckVerdict::Progress { advanced: true });
    while w.after_send() != AfterSend::AwaitAck {}
    assert_eq!(w.probe(), Some(2));
    assert_eq!(w.on_ack(&ack_hdr(0, 9, 17)), AckVerdict::Progress { advanced: true });
    assert!(!w.probing());
    assert_eq!(w.next(), Some(10));
    // A retry (a wait of the whole bound) goes back N whatever a probe left.
    assert_eq!(w.after_send(), AfterSend::Send(11));
    assert_eq!(w.probe(), Some(10));
    assert!(w.probing());
    assert_eq!(w.on_timeout(), Timeout::Retry { from: 10 });
    assert!(!w.probing());
    assert_eq!(w.after_send(), AfterSend::Send(11));
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
