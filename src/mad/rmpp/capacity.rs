// SPDX-License-Identifier: GPL-2.0

//! The capacity a transfer's reassembly buffer grows to (Documentation/behaviour.md §8.14), as
//! one pure function: the engine (`engine/agent/rmpp_recv.rs`) passes what the allocator takes
//! for a size, allocates exactly the capacity returned and charges it to the agent's and the
//! port's bounds. Host-tested against a model of the kernel's allocator (`tests/host`).
//!
//! A buffer that is too short moves to a new allocation: at least twice the old one, so that
//! a message is copied a logarithmic number of times; in steps that halve down from the
//! message's size when the sender announced it, so that the last move is from half of it (the
//! old and the new buffer then take one and a half times the message while the data moves,
//! where doubling from the first window could end with a move from nearly the whole message);
//! never more than `room`, what the agent can still hold beside the old buffer. Every value it
//! returns is one the allocator takes exactly, so that what is charged is what is used.

/// The capacity to move a buffer of capacity `old` to, so that it holds `want` bytes: see the
/// module documentation. `total` is the message's size when known, `room` the bytes the new
/// allocation may take, `alloc_size` what the allocator takes for a size (idempotent: its
/// values are sizes it takes exactly), `page` the page size. `None` when not even the least
/// allocation that holds `want` fits `room`: the transfer ends.
pub(crate) fn next_capacity(
    old: usize,
    want: usize,
    total: Option<usize>,
    room: usize,
    alloc_size: impl Fn(usize) -> usize,
    page: usize,
) -> Option<usize> {
    let least = alloc_size(want);
    let mut goal = old.saturating_mul(2).max(want);
    if let Some(t) = total {
        let mut step = t.max(want);
        while step / 2 >= goal {
            step /= 2;
        }
        goal = step;
    }
    let next = alloc_size(goal);
    // Short of room for that, all the whole pages that are left (for a large size the
    // allocator takes whole pages): growing by the least each time would copy the message
    // once a window.
    let rest = alloc_size(room - room % page.max(1));
    let cap = if next <= room {
        next
    } else if rest <= room {
        rest
    } else {
        least
    }
    .max(least);
    (cap <= room).then_some(cap)
}
