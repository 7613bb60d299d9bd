// SPDX-License-Identifier: GPL-2.0

//! A first-in first-out queue with O(1) push and amortised O(1) pop, for the loopback
//! fabric's completion queue (the kernel crate has no `VecDeque`).
//!
//! A vector popped from the front shifts every element behind the head on each pop: with
//! 100 000 transmissions waiting, the fabric spent minutes moving memory under its lock while
//! posters waited for it with their agent's interrupts-off lock held. Two vectors avoid it:
//! pushes go to the back of `incoming`; pops come from the back of `outgoing`, which holds
//! the oldest elements in reverse order; when `outgoing` runs dry the two swap storage and
//! the new `outgoing` is reversed once, in place. Each element is moved at most once by
//! that reversal, and no pop allocates.

use kernel::{
    alloc::{
        AllocError,
        Flags, //
    },
    prelude::*,
};

/// A first-in first-out queue.
///
/// # Invariants
///
/// The queue's order is `outgoing` from its last element to its first, then `incoming` from
/// its first element to its last.
pub(crate) struct Fifo<T> {
    /// The oldest elements, the head last.
    outgoing: KVec<T>,
    /// The newest elements, the tail last.
    incoming: KVec<T>,
}

impl<T> Fifo<T> {
    /// An empty queue; allocates nothing.
    pub(crate) const fn new() -> Self {
        // INVARIANT: Both vectors are empty.
        Self {
            outgoing: KVec::new(),
            incoming: KVec::new(),
        }
    }

    /// The number of elements.
    pub(crate) fn len(&self) -> usize {
        self.outgoing.len().saturating_add(self.incoming.len())
    }

    /// Whether the queue is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.outgoing.is_empty() && self.incoming.is_empty()
    }

    /// Makes room for `n` more pushes, so that they cannot fail.
    pub(crate) fn reserve(&mut self, n: usize, flags: Flags) -> Result<(), AllocError> {
        self.incoming.reserve(n, flags)
    }

    /// Appends `v` at the tail.
    pub(crate) fn push(&mut self, v: T, flags: Flags) -> Result<(), AllocError> {
        // INVARIANT: The tail is the last element of `incoming`.
        self.incoming.push(v, flags)
    }

    /// The element at the head, if any.
    pub(crate) fn front(&self) -> Option<&T> {
        self.outgoing.last().or_else(|| self.incoming.first())
    }

    /// Removes and returns the element at the head.
    pub(crate) fn pop(&mut self) -> Option<T> {
        if self.outgoing.is_empty() {
            // INVARIANT: `outgoing` is empty, so the order is `incoming`'s; after the swap
            // and the reversal it is the new `outgoing` read from its end.
            core::mem::swap(&mut self.outgoing, &mut self.incoming);
            self.outgoing.reverse();
        }
        self.outgoing.pop()
    }

    /// Moves the first element for which `pred` holds to the head, keeping the order of the
    /// others; returns whether there was one. O(n): for tests that reorder on purpose.
    pub(crate) fn promote(&mut self, pred: impl Fn(&T) -> bool) -> Result<bool, AllocError> {
        if let Some(k) = self.outgoing.iter().rposition(&pred) {
            // INVARIANT: The elements after `k` come before it in the queue; rotating moves
            // it to the end (the head) and each of them one place down, in the same order.
            self.outgoing[k..].rotate_left(1);
            return Ok(true);
        }
        let Some(j) = self.incoming.iter().position(&pred) else {
            return Ok(false);
        };
        // Room first, so that the element cannot be lost between the two vectors.
        self.outgoing.reserve(1, GFP_ATOMIC)?;
        let Ok(v) = self.incoming.remove(j) else {
            return Ok(false);
        };
        // INVARIANT: The last element of `outgoing` is the head.
        let _ = self.outgoing.push_within_capacity(v);
        Ok(true)
    }
}

impl<T> Default for Fifo<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[kernel::prelude::kunit_tests(rmad_fifo)]
mod tests {
    use super::*;

    /// Drains `q` into a vector, head first.
    fn drain(q: &mut Fifo<u32>) -> Result<KVec<u32>> {
        let mut out = KVec::new();
        while let Some(v) = q.pop() {
            out.push(v, GFP_KERNEL)?;
        }
        Ok(out)
    }

    #[test]
    fn pops_in_push_order_across_interleaving() -> Result {
        let mut q = Fifo::new();
        let mut popped = KVec::new();
        // Pushes and pops interleaved so that both vectors hold elements at once.
        for round in 0u32..50 {
            for i in 0..round {
                q.push(round * 100 + i, GFP_KERNEL)?;
            }
            for _ in 0..round / 2 {
                if let Some(v) = q.pop() {
                    popped.push(v, GFP_KERNEL)?;
                }
            }
        }
        let len = q.len();
        for v in drain(&mut q)? {
            popped.push(v, GFP_KERNEL)?;
        }
        let mut expected = KVec::new();
        for round in 0u32..50 {
            for i in 0..round {
                expected.push(round * 100 + i, GFP_KERNEL)?;
            }
        }
        assert_eq!(len, 625);
        assert_eq!(&popped[..], &expected[..]);
        assert!(q.is_empty());
        assert!(q.pop().is_none());
        Ok(())
    }

    #[test]
    fn front_is_the_next_pop() -> Result {
        let mut q = Fifo::new();
        assert!(q.front().is_none());
        for v in [1u32, 2, 3] {
            q.push(v, GFP_KERNEL)?;
        }
        let first = q.front().copied();
        let popped = q.pop();
        q.push(4, GFP_KERNEL)?;
        let next = q.front().copied();
        assert_eq!(first, Some(1));
        assert_eq!(popped, Some(1));
        assert_eq!(next, Some(2));
        assert_eq!(&drain(&mut q)?[..], &[2, 3, 4][..]);
        Ok(())
    }

    #[test]
    fn promote_moves_the_first_match_to_the_head() -> Result {
        let mut q = Fifo::new();
        for v in [1u32, 2, 3, 4] {
            q.push(v, GFP_KERNEL)?;
        }
        // 1 leaves: 2, 3, 4 are now in the reversed vector; 5, 6, 7 in the other.
        let _ = q.pop();
        for v in [5u32, 6, 7] {
            q.push(v, GFP_KERNEL)?;
        }
        let in_outgoing = q.promote(|v| *v == 3)?;
        let in_incoming = q.promote(|v| *v % 6 == 0)?;
        let none = q.promote(|v| *v > 100)?;
        assert!(in_outgoing);
        assert!(in_incoming);
        assert!(!none);
        assert_eq!(&drain(&mut q)?[..], &[6, 3, 2, 4, 5, 7][..]);
        Ok(())
    }
}
