// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_tree`: the intrusive red-black trees of [`crate::sys::rbtree`], the
//! lists of [`crate::sys::fifo`] and the indexes of [`crate::sys::buckets`] alone: order,
//! equal keys, one container per kind of links at a time (tree, list or index), references
//! given back.

#[kernel::prelude::kunit_tests(rmad_tree)]
mod tests {
    use crate::sys::{
        buckets::Buckets,
        fifo::Fifo,
        rbtree::{
            Links,
            Tree,
            TreeItem, //
        },
    };
    use kernel::{
        prelude::*,
        sync::Arc, //
    };

    /// An item with one kind of links, and a number to tell items apart.
    #[pin_data]
    struct Item {
        n: u32,
        #[pin]
        links: Links<u32>,
    }

    // SAFETY: `links` returns the structurally pinned field `links`; `from_links` is its
    // `container_of`. Each case uses its trees and lists from its own thread only.
    unsafe impl TreeItem<0> for Item {
        type Key = u32;
        type Ref = Arc<Item>;

        fn links(&self) -> &Links<u32> {
            &self.links
        }

        unsafe fn from_links(links: *const Links<u32>) -> *const Self {
            // SAFETY: `links` is the `links` field of a live item (the caller's promise).
            unsafe { kernel::container_of!(links, Self, links) }
        }
    }

    fn item(n: u32) -> Result<Arc<Item>> {
        Arc::pin_init(
            pin_init!(Item {
                n,
                links <- Links::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// The items' numbers in tree order, by `first` and `next`.
    fn order(t: &Tree<Item, 0>) -> Result<KVec<(u32, u32)>> {
        let mut v = KVec::new();
        let mut cur = t.first();
        while let Some((k, it)) = cur {
            v.push((k, it.n), GFP_KERNEL)?;
            cur = t.next(&it);
        }
        Ok(v)
    }

    #[test]
    fn keys_in_order_equal_keys_in_insertion_order() -> Result {
        let mut t = Tree::<Item, 0>::new();
        // Keys out of order, the last ones on the fast path (not below the last key).
        let keys = [5u32, 1, 9, 5, 3, 5, 9, 12];
        let mut items = KVec::new();
        for (n, k) in keys.iter().enumerate() {
            let it = item(u32::try_from(n).unwrap_or(0))?;
            assert!(t.insert(it.clone(), *k).is_ok());
            items.push(it, GFP_KERNEL)?;
        }
        let got = order(&t)?;
        assert_eq!(
            &got[..],
            &[
                (1, 1),
                (3, 4),
                (5, 0),
                (5, 3),
                (5, 5),
                (9, 2),
                (9, 6),
                (12, 7)
            ][..]
        );
        assert_eq!(t.len(), 8);
        assert_eq!(t.lower_bound(&5).map(|(k, it)| (k, it.n)), Some((5, 0)));
        assert_eq!(t.lower_bound(&6).map(|(k, it)| (k, it.n)), Some((9, 2)));
        assert!(t.lower_bound(&13).is_none());
        // Removing the first, a middle one and the last keeps the order and the ends right.
        for n in [1usize, 3, 7] {
            let it = items.get(n).ok_or(EINVAL)?;
            assert!(t.remove(it).is_some());
            assert!(!it.links.is_linked());
        }
        let got = order(&t)?;
        assert_eq!(&got[..], &[(3, 4), (5, 0), (5, 5), (9, 2), (9, 6)][..]);
        assert_eq!(t.first().map(|(k, _)| k), Some(3));
        // A key equal to the last goes after it.
        let last = item(99)?;
        assert!(t.insert(last.clone(), 9).is_ok());
        assert_eq!(order(&t)?.last().copied(), Some((9, 99)));
        Ok(())
    }

    #[test]
    fn one_tree_of_a_kind_at_a_time() -> Result {
        let mut a = Tree::<Item, 0>::new();
        let mut b = Tree::<Item, 0>::new();
        let it = item(1)?;
        assert!(a.insert(it.clone(), 1).is_ok());
        // In `a`: `b` refuses it and does not hold it; `a` refuses it twice.
        assert!(b.insert(it.clone(), 1).is_err());
        assert!(a.insert(it.clone(), 2).is_err());
        assert!(b.remove(&it).is_none());
        assert!(b.key_of(&it).is_none());
        assert_eq!(a.key_of(&it), Some(1));
        assert!(b.is_empty());
        // Out of `a`, `b` takes it.
        assert!(a.remove(&it).is_some());
        assert!(a.remove(&it).is_none());
        assert!(b.insert(it.clone(), 3).is_ok());
        assert_eq!(b.key_of(&it), Some(3));
        assert!(a.key_of(&it).is_none());
        Ok(())
    }

    #[test]
    fn references_are_given_back() -> Result {
        let it = item(1)?;
        let other = item(2)?;
        {
            let mut t = Tree::<Item, 0>::new();
            assert!(t.insert(it.clone(), 1).is_ok());
            assert!(t.insert(other.clone(), 2).is_ok());
            // Removed: the reference comes back to the caller.
            let back = t.remove(&it);
            assert!(back.as_ref().is_some_and(|b| Arc::ptr_eq(b, &it)));
            drop(back);
            // Dropped with `other` in it: the tree's reference is dropped and the links freed.
        }
        assert!(!other.links.is_linked());
        // Each is unique again: no reference was kept or lost.
        let it = Arc::into_unique_or_drop(it);
        let other = Arc::into_unique_or_drop(other);
        assert!(it.is_some());
        assert!(other.is_some());
        Ok(())
    }

    /// The items' numbers in list order, by `first` and `next`.
    fn fifo_order(f: &Fifo<Item, 0>) -> Result<KVec<(u32, u32)>> {
        let mut v = KVec::new();
        let mut cur = f.first();
        while let Some((k, it)) = cur {
            v.push((k, it.n), GFP_KERNEL)?;
            cur = f.next(&it);
        }
        Ok(v)
    }

    #[test]
    fn fifo_keeps_arrival_order_and_takes_from_anywhere() -> Result {
        let mut f = Fifo::<Item, 0>::new();
        let mut items = KVec::new();
        for (n, k) in [1u32, 2, 2, 5, 8].iter().enumerate() {
            let it = item(u32::try_from(n).unwrap_or(0))?;
            assert!(f.push_back(it.clone(), *k).is_ok());
            items.push(it, GFP_KERNEL)?;
        }
        assert_eq!(f.len(), 5);
        assert_eq!(
            &fifo_order(&f)?[..],
            &[(1, 0), (2, 1), (2, 2), (5, 3), (8, 4)][..]
        );
        // A key below the last one's is refused, and the item given back unlinked.
        let late = item(9)?;
        assert!(f.push_back(late.clone(), 7).is_err());
        assert!(!late.links.is_linked());
        assert_eq!(f.lower_bound(&3).map(|(k, it)| (k, it.n)), Some((5, 3)));
        assert_eq!(f.lower_bound(&2).map(|(k, it)| (k, it.n)), Some((2, 1)));
        assert!(f.lower_bound(&9).is_none());
        // Removing the first, a middle one and the last keeps the order and the ends right.
        for n in [0usize, 2, 4] {
            let it = items.get(n).ok_or(EINVAL)?;
            assert!(f.remove(it).is_some());
            assert!(!it.links.is_linked());
            assert!(f.remove(it).is_none());
        }
        assert_eq!(&fifo_order(&f)?[..], &[(2, 1), (5, 3)][..]);
        assert_eq!(f.len(), 2);
        // Appending after the new last, and emptying it, leaves no end behind.
        assert!(f.push_back(late.clone(), 5).is_ok());
        assert_eq!(&fifo_order(&f)?[..], &[(2, 1), (5, 3), (5, 9)][..]);
        for n in [1usize, 3] {
            assert!(f.remove(items.get(n).ok_or(EINVAL)?).is_some());
        }
        assert!(f.remove(&late).is_some());
        assert!(f.is_empty() && f.first().is_none());
        assert!(f.push_back(late.clone(), 0).is_ok());
        assert_eq!(&fifo_order(&f)?[..], &[(0, 9)][..]);
        Ok(())
    }

    #[test]
    fn fifo_and_tree_share_one_container_at_a_time() -> Result {
        let mut t = Tree::<Item, 0>::new();
        let mut f = Fifo::<Item, 0>::new();
        let it = item(1)?;
        assert!(t.insert(it.clone(), 4).is_ok());
        // In the tree: the list refuses it and does not hold it.
        assert!(f.push_back(it.clone(), 4).is_err());
        assert!(f.remove(&it).is_none());
        assert!(f.key_of(&it).is_none());
        assert!(f.next(&it).is_none());
        // Moved to the list: the tree no longer holds it, and refuses it back.
        assert!(t.remove(&it).is_some());
        assert!(f.push_back(it.clone(), 6).is_ok());
        assert_eq!(f.key_of(&it), Some(6));
        assert!(t.key_of(&it).is_none());
        assert!(t.insert(it.clone(), 1).is_err());
        assert!(f.push_back(it.clone(), 6).is_err());
        Ok(())
    }

    #[test]
    fn fifo_gives_references_back() -> Result {
        let it = item(1)?;
        let other = item(2)?;
        {
            let mut f = Fifo::<Item, 0>::new();
            assert!(f.push_back(it.clone(), 1).is_ok());
            assert!(f.push_back(other.clone(), 2).is_ok());
            let back = f.remove(&it);
            assert!(back.as_ref().is_some_and(|b| Arc::ptr_eq(b, &it)));
            drop(back);
            // Dropped with `other` in it: the list's reference is dropped and the links freed.
        }
        assert!(!other.links.is_linked());
        assert!(Arc::into_unique_or_drop(it).is_some());
        assert!(Arc::into_unique_or_drop(other).is_some());
        Ok(())
    }

    /// The numbers of the items of key `key` in `b`, by `find` and `next_same`.
    fn same_key(b: &Buckets<Item, 0, 8>, key: u32) -> Result<KVec<u32>> {
        let mut v = KVec::new();
        let mut cur = b.find(&key);
        while let Some(it) = cur {
            v.push(it.n, GFP_KERNEL)?;
            cur = b.next_same(&it);
        }
        Ok(v)
    }

    #[test]
    fn buckets_find_equal_keys_in_insertion_order() -> Result {
        // 300 items under 50 keys in 8 buckets: every bucket is a tree of many keys.
        const KEYS: u32 = 50;
        let mut b = Buckets::<Item, 0, 8>::new();
        let mut items = KVec::new();
        for n in 0..300u32 {
            let it = item(n)?;
            assert!(b.insert(it.clone(), n.wrapping_mul(7) % KEYS).is_ok());
            items.push(it, GFP_KERNEL)?;
        }
        assert_eq!(b.len(), 300);
        // Each key finds its six items, in the order they went in, and no other.
        let mut all_found = true;
        for key in 0..KEYS {
            let got = same_key(&b, key)?;
            let want = (0..300u32).filter(|n| n.wrapping_mul(7) % KEYS == key);
            all_found &= got.len() == 6 && got.iter().copied().eq(want);
        }
        assert!(all_found);
        assert!(b.find(&KEYS).is_none());
        // Every third item out: the rest keep their order, the removed are free.
        for it in items.iter().step_by(3) {
            assert!(b.remove(it).is_some());
            assert!(b.remove(it).is_none());
            assert!(!it.links.is_linked());
        }
        assert_eq!(b.len(), 200);
        let mut kept_order = true;
        for key in 0..KEYS {
            let got = same_key(&b, key)?;
            let want = (0..300u32).filter(|n| n % 3 != 0 && n.wrapping_mul(7) % KEYS == key);
            kept_order &= got.iter().copied().eq(want);
        }
        assert!(kept_order);
        // An item put back goes after the others of its key.
        let first = items.first().ok_or(EINVAL)?;
        assert!(b.insert(first.clone(), 0).is_ok());
        assert_eq!(same_key(&b, 0)?.last().copied(), Some(0));
        Ok(())
    }

    #[test]
    fn buckets_share_links_and_give_references_back() -> Result {
        let it = item(1)?;
        let other = item(2)?;
        {
            let mut b = Buckets::<Item, 0, 8>::new();
            let mut t = Tree::<Item, 0>::new();
            assert!(b.insert(it.clone(), 4).is_ok());
            // In the index: a tree refuses it and does not hold it; the index refuses it twice.
            assert!(t.insert(it.clone(), 4).is_err());
            assert!(t.remove(&it).is_none());
            assert!(b.insert(it.clone(), 5).is_err());
            // Moved to the tree: the index no longer holds it.
            let back = b.remove(&it);
            assert!(back.as_ref().is_some_and(|r| Arc::ptr_eq(r, &it)));
            drop(back);
            assert!(t.insert(it.clone(), 4).is_ok());
            assert!(b.next_same(&it).is_none());
            assert!(b.find(&4).is_none());
            assert!(b.remove(&it).is_none());
            assert!(b.insert(other.clone(), 2).is_ok());
            // Dropped with `other` in the index and `it` in the tree: both references go.
        }
        assert!(!it.links.is_linked());
        assert!(!other.links.is_linked());
        assert!(Arc::into_unique_or_drop(it).is_some());
        assert!(Arc::into_unique_or_drop(other).is_some());
        Ok(())
    }
}
