// SPDX-License-Identifier: GPL-2.0

//! The capacity a reassembly buffer grows to (`src/mad/rmpp/capacity.rs`), against a model of
//! the kernel's allocator (kmalloc buckets up to 8 KiB, power-of-two pages up to 4 MiB,
//! whole pages of vmalloc beyond): every capacity is one the allocator takes exactly, holds
//! what is wanted and fits the room; and whole messages streamed a segment at a time into an
//! agent's 16 MiB, with the old and the new buffer counted together at every move, never
//! exceed it, reach about 10 MiB when their size is announced and 8 MiB when it is not.

use crate::mad::rmpp::capacity::next_capacity;

/// The page size of the model.
const PAGE: usize = 4096;
/// An agent's bound (`engine/agent/rmpp_recv.rs` MAX_BYTES).
const MAX: usize = 16 << 20;

/// What kmalloc/kvmalloc takes for `n` bytes, modelled on 7.3's x86-64 defaults.
fn alloc_size(n: usize) -> usize {
    const BUCKETS: [usize; 13] = [
        8, 16, 32, 64, 96, 128, 192, 256, 512, 1024, 2048, 4096, 8192,
    ];
    let pages = n.div_ceil(PAGE) * PAGE;
    let kmalloc = if n == 0 {
        0
    } else if n <= 8192 {
        BUCKETS.iter().copied().find(|b| *b >= n).unwrap_or(8192)
    } else if n <= 4 << 20 {
        pages.next_power_of_two()
    } else {
        n
    };
    kmalloc.max(pages)
}

/// A message of `count` SA segments (56-byte header, 200 data bytes each) arriving in order,
/// each window of 64 growing the buffer as the engine does: whether it completes, and the
/// most bytes held at once (both buffers at each move).
fn stream(count: usize, announced: bool) -> (bool, usize) {
    let (hdr, data, window) = (56usize, 200usize, 64usize);
    let total = hdr + count * data;
    let (mut cap, mut peak) = (0usize, 0usize);
    for n in 1..=count {
        let segs = if announced {
            (n + window).min(count)
        } else {
            n + window
        };
        let want = (hdr + segs * data).max(hdr + n * data);
        if want <= cap {
            continue;
        }
        let Some(next) = next_capacity(
            cap,
            want,
            announced.then_some(total),
            MAX - cap,
            alloc_size,
            PAGE,
        ) else {
            return (false, peak);
        };
        peak = peak.max(cap + next);
        cap = next;
    }
    (true, peak)
}

#[test]
fn capacities_are_exact_sufficient_and_within_room() {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rand = |bound: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        usize::try_from(x % u64::try_from(bound).unwrap()).unwrap()
    };
    for _ in 0..200_000 {
        let old = alloc_size(rand(MAX));
        let want = old + 1 + rand(1 << 20);
        let total = (rand(2) == 0).then(|| want + rand(MAX));
        let room = rand(MAX + 1);
        match next_capacity(old, want, total, room, alloc_size, PAGE) {
            Some(cap) => {
                assert!(cap >= want, "{old} {want} {total:?} {room}: {cap}");
                assert!(cap <= room, "{old} {want} {total:?} {room}: {cap}");
                assert_eq!(alloc_size(cap), cap, "{old} {want} {total:?} {room}");
            }
            None => assert!(alloc_size(want) > room, "{old} {want} {total:?} {room}"),
        }
    }
}

#[test]
fn messages_stay_within_the_bound_and_reach_about_10_mib() {
    // Announced: everything up to 10 MiB completes (the 9 MiB message of rmad_rmpp_bounds
    // among them), with at most the bound held; nothing ever holds more.
    for count in (1..=52_428).step_by(97).chain([47_186, 52_428]) {
        let (done, peak) = stream(count, true);
        assert!(done, "{count} segments announced");
        assert!(peak <= MAX, "{count}: {peak}");
    }
    // Not announced (a FIRST with PayloadLength 0): up to 8 MiB.
    for count in (1..=41_900).step_by(97) {
        let (done, peak) = stream(count, false);
        assert!(done, "{count} segments");
        assert!(peak <= MAX, "{count}: {peak}");
    }
    // Beyond, ended within the bound (the 13.4 MB message of rmad_rmpp_bounds).
    for count in [56_000, 67_000, 84_000] {
        let (done, peak) = stream(count, true);
        assert!(!done, "{count}");
        assert!(peak <= MAX, "{count}: {peak}");
    }
}
