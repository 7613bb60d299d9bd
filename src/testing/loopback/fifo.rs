// SPDX-License-Identifier: GPL-2.0

//! A first-in first-out queue with O(1) push and amortised O(1) pop, for the loopback
//! fabric's completion queue (the kernel crate has no `VecDeque`).
//!
//! A vector popped from the front shifts every element behind the head on each pop: with
//! 100 000 transmissions waiting, the fabric spent minutes moving memory under its lock while
//! posters waited for it with their agent's interrupts-off lock held. One vector that grows by
//! doubling fails too: the fabric pushes with `GFP_ATOMIC`, and 100 000 completions waiting at
//! once need more contiguous memory than the page allocator hands out (it warns, and the push
//! fails). So the queue is a chain of chunks of [`CHUNK`] elements, each a small allocation:
//! pushes go to the tail chunk, which joins the full chunks when it is full; pops come from the
//! head chunk, reversed once when it became the head. Each element is moved at most once by
//! that reversal, and no pop allocates.

use kernel::{
    alloc::{
        AllocError,
        Flags, //
    },
    prelude::*,
};

/// Elements per chunk. The fabric's 100 000 waiting events (about 100 bytes each) then need
/// some 800 chunks of about 12 KiB, listed in 19 KiB: no allocation the queue makes is large.
const CHUNK: usize = 128;

/// A first-in first-out queue.
///
/// # Invariants
///
/// The queue's order is `head` from its last element to its first, then the chunks of `older`
/// from the last chunk to the first, then the chunks of `newer` from the first chunk to the
/// last, then `tail`; within each chunk of `older`, `newer` and in `tail`, from the first
/// element to the last. The chunks of `older` and `newer` are not empty. `tail` has room for
/// [`CHUNK`] elements, or none (it was never allocated, or it became the head). `len` is the
/// number of elements. The chunks of `spare` are empty, with room for [`CHUNK`] elements each.
pub(crate) struct Fifo<T> {
    /// The oldest elements, the head last.
    head: KVec<T>,
    /// Chunks, the oldest last.
    older: KVec<KVec<T>>,
    /// Chunks, the newest last.
    newer: KVec<KVec<T>>,
    /// The newest elements, the tail last.
    tail: KVec<T>,
    /// Empty chunks that [`Fifo::reserve`] set aside for the pushes it promised.
    spare: KVec<KVec<T>>,
    /// The number of elements.
    len: usize,
}

impl<T> Fifo<T> {
    /// An empty queue; allocates nothing.
    pub(crate) const fn new() -> Self {
        // INVARIANT: Everything is empty.
        Self {
            head: KVec::new(),
            older: KVec::new(),
            newer: KVec::new(),
            tail: KVec::new(),
            spare: KVec::new(),
            len: 0,
        }
    }

    /// The number of elements.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether the queue is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// An empty chunk: a spare one, or a new one.
    fn chunk(&mut self, flags: Flags) -> Result<KVec<T>, AllocError> {
        match self.spare.pop() {
            Some(c) => Ok(c),
            None => KVec::with_capacity(CHUNK, flags),
        }
    }

    /// Makes room for `n` more pushes, so that they cannot fail until the next pop.
    pub(crate) fn reserve(&mut self, n: usize, flags: Flags) -> Result<(), AllocError> {
        let room = if self.tail.capacity() == 0 {
            0
        } else {
            CHUNK.saturating_sub(self.tail.len())
        };
        let chunks = n.saturating_sub(room).div_ceil(CHUNK);
        // Each new chunk a push takes may seal the chunk before it into `newer`.
        self.newer.reserve(chunks, flags)?;
        self.spare.reserve(chunks, flags)?;
        while self.spare.len() < chunks {
            let c = KVec::with_capacity(CHUNK, flags)?;
            // INVARIANT: `c` is empty with room for `CHUNK` elements.
            let _ = self.spare.push_within_capacity(c);
        }
        Ok(())
    }

    /// Appends `v` at the tail.
    pub(crate) fn push(&mut self, v: T, flags: Flags) -> Result<(), AllocError> {
        if self.tail.len() >= CHUNK {
            // Room for the full chunk first, so that a failure loses nothing (not even a
            // spare chunk).
            self.newer.reserve(1, flags)?;
            let fresh = self.chunk(flags)?;
            // INVARIANT: The full tail becomes the newest chunk of `newer`, in the same place
            // of the queue's order; the new tail is empty.
            let full = core::mem::replace(&mut self.tail, fresh);
            let _ = self.newer.push_within_capacity(full);
        } else if self.tail.capacity() == 0 {
            self.tail = self.chunk(flags)?;
        }
        // INVARIANT: The tail is the last element of `tail`.
        self.tail.push(v, flags)?;
        self.len = self.len.saturating_add(1);
        Ok(())
    }

    /// The element at the head, if any.
    pub(crate) fn front(&self) -> Option<&T> {
        self.head
            .last()
            .or_else(|| self.older.last().and_then(|c| c.first()))
            .or_else(|| self.newer.first().and_then(|c| c.first()))
            .or_else(|| self.tail.first())
    }

    /// Removes and returns the element at the head.
    pub(crate) fn pop(&mut self) -> Option<T> {
        if self.head.is_empty() {
            if self.older.is_empty() {
                // INVARIANT: `newer`'s chunks, oldest last, are `older`'s order.
                core::mem::swap(&mut self.older, &mut self.newer);
                self.older.reverse();
            }
            // INVARIANT: The next chunk in the queue's order becomes `head`, reversed so that
            // its first element is the last; without one, the tail does.
            let next = match self.older.pop() {
                Some(c) => c,
                None => core::mem::replace(&mut self.tail, KVec::new()),
            };
            self.head = next;
            self.head.reverse();
        }
        let v = self.head.pop()?;
        self.len = self.len.saturating_sub(1);
        Some(v)
    }

    /// Moves the first element for which `pred` holds to the head, keeping the order of the
    /// others; returns whether there was one. O(n): for tests that reorder on purpose.
    pub(crate) fn promote(&mut self, pred: impl Fn(&T) -> bool) -> Result<bool, AllocError> {
        if let Some(k) = self.head.iter().rposition(&pred) {
            // INVARIANT: The elements after `k` come before it in the queue; rotating moves
            // it to the end (the head) and each of them one place down, in the same order.
            self.head[k..].rotate_left(1);
            return Ok(true);
        }
        // Room first, so that the element cannot be lost between two chunks.
        self.head.reserve(1, GFP_ATOMIC)?;
        let v = if let Some((c, j)) = self
            .older
            .iter()
            .enumerate()
            .rev()
            .find_map(|(c, chunk)| chunk.iter().position(&pred).map(|j| (c, j)))
        {
            Self::take(&mut self.older, c, j)
        } else if let Some((c, j)) = self
            .newer
            .iter()
            .enumerate()
            .find_map(|(c, chunk)| chunk.iter().position(&pred).map(|j| (c, j)))
        {
            Self::take(&mut self.newer, c, j)
        } else if let Some(j) = self.tail.iter().position(&pred) {
            self.tail.remove(j).ok()
        } else {
            None
        };
        let Some(v) = v else {
            return Ok(false);
        };
        // INVARIANT: The last element of `head` is the head.
        let _ = self.head.push_within_capacity(v);
        Ok(true)
    }

    /// Removes element `j` of chunk `c` of `chunks`, and the chunk if it is left empty.
    fn take(chunks: &mut KVec<KVec<T>>, c: usize, j: usize) -> Option<T> {
        let chunk = chunks.get_mut(c)?;
        let v = chunk.remove(j).ok()?;
        if chunk.is_empty() {
            // INVARIANT: No empty chunk stays in `older` or `newer`.
            let _ = chunks.remove(c);
        }
        Some(v)
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
        // Pushes and pops interleaved so that the head, the full chunks and the tail hold
        // elements at once (625 elements: ten chunks).
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
        // 1 leaves: 2, 3, 4 are now in the head chunk, reversed; 5, 6, 7 in the tail.
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

    #[test]
    fn promote_reaches_every_chunk() -> Result {
        let mut q = Fifo::new();
        for v in 0u32..300 {
            q.push(v, GFP_KERNEL)?;
        }
        // 0 leaves: the head chunk holds 1..128; 128..256 is a full chunk, 256..300 the tail.
        let _ = q.pop();
        let mut found = [false; 3];
        for (f, want) in found.iter_mut().zip([200u32, 299, 5]) {
            *f = q.promote(|v| *v == want)?;
        }
        let len = q.len();
        let out = drain(&mut q)?;
        let mut expected = KVec::new();
        for v in [5u32, 299, 200] {
            expected.push(v, GFP_KERNEL)?;
        }
        for v in 1u32..299 {
            if v != 5 && v != 200 {
                expected.push(v, GFP_KERNEL)?;
            }
        }
        assert_eq!(found, [true; 3]);
        assert_eq!(len, 299);
        assert_eq!(&out[..], &expected[..]);
        Ok(())
    }

    #[test]
    fn reserve_sets_chunks_aside_and_pushes_use_them() -> Result {
        let mut q = Fifo::new();
        q.push(1u32, GFP_KERNEL)?;
        // The tail has room for 127 more; 400 need three more chunks.
        q.reserve(400, GFP_KERNEL)?;
        let spare = q.spare.len();
        for v in 2u32..402 {
            q.push(v, GFP_KERNEL)?;
        }
        let left = q.spare.len();
        let out = drain(&mut q)?;
        assert_eq!(spare, 3);
        assert_eq!(left, 0);
        assert_eq!(out.len(), 401);
        assert!(out.iter().zip(1u32..).all(|(v, want)| *v == want));
        Ok(())
    }

    #[test]
    fn chunks_emptied_by_promote_and_a_tail_taken_by_pop() -> Result {
        let mut q = Fifo::new();
        // Three chunks: 0..128 (becomes the head), 128..256 (full), 256..258 (the tail).
        for v in 0u32..258 {
            q.push(v, GFP_KERNEL)?;
        }
        let first = q.pop();
        // Empties the tail chunk, then the full one, by promoting the last element first.
        let mut promoted = true;
        for v in (128u32..258).rev() {
            promoted &= q.promote(|x| *x == v)?;
        }
        let order = drain(&mut q)?;
        // Empty again: a pop takes the tail as the head, and pushes start a new tail.
        for v in [1000u32, 1001] {
            q.push(v, GFP_KERNEL)?;
        }
        let taken = q.pop();
        q.push(1002, GFP_KERNEL)?;
        let rest = drain(&mut q)?;
        let mut expected = KVec::new();
        for v in Iterator::chain(128u32..258, 1..128) {
            expected.push(v, GFP_KERNEL)?;
        }
        assert_eq!(first, Some(0));
        assert!(promoted);
        assert_eq!(&order[..], &expected[..]);
        assert_eq!(taken, Some(1000));
        assert_eq!(&rest[..], &[1001, 1002][..]);
        assert!(q.is_empty());
        Ok(())
    }
}
