// SPDX-License-Identifier: GPL-2.0

//! KUnit suite `rmad_handles`: the C API's handle table alone (the C API's own tests are in
//! [`super::capi`]).

#[kernel::prelude::kunit_tests(rmad_handles)]
mod tests {
    use crate::capi::handles::*;
    use kernel::prelude::*;
    use kernel::{
        static_lock_class,
        sync::Arc, //
    };

    /// A table of numbers.
    fn table() -> Result<Pin<KBox<HandleTable<u32>>>> {
        KBox::pin_init(HandleTable::new(KIND_BUF, static_lock_class!()), GFP_KERNEL)
    }

    #[test]
    fn handle_never_repeats_after_free() -> Result {
        let t = table()?;
        let h1 = t.insert(1, GFP_KERNEL).map_err(|(e, _)| e)?;
        let removed = t.remove(h1, |_| Ok(()))?;
        let h2 = t.insert(2, GFP_KERNEL).map_err(|(e, _)| e)?;
        // The slot is reused, its generation is not.
        assert!(h1 != h2);
        assert_eq!(h1 & INDEX_MASK, h2 & INDEX_MASK);
        assert_eq!(removed, 1);
        assert_eq!(t.with(h1, |v| *v), Err(EINVAL));
        assert_eq!(t.with(h2, |v| *v), Ok(2));
        assert_eq!(t.remove(h1, |_| Ok(())).err(), Some(EINVAL));
        Ok(())
    }

    #[test]
    fn foreign_values_are_refused() -> Result {
        let t = table()?;
        let h = t.insert(7, GFP_KERNEL).map_err(|(e, _)| e)?;
        let other_kind = (h & !(3 << KIND_SHIFT)) | (KIND_AGENT << KIND_SHIFT);
        let ours = Arc::new(0u8, GFP_KERNEL)?;
        let address = u64::try_from(Arc::as_ptr(&ours).addr()).unwrap_or(u64::MAX);
        // ERR_PTR(-EINVAL).
        let err_ptr = u64::MAX - 21;
        for bad in [
            0,
            1,
            u64::MAX,
            err_ptr,
            address,
            other_kind,
            h | (1 << 63),
            h + 1,
        ] {
            assert_eq!(t.with(bad, |v| *v), Err(EINVAL));
        }
        assert_eq!(t.with(h, |v| *v), Ok(7));
        Ok(())
    }

    #[test]
    fn reservation_is_invisible_until_filled() -> Result {
        let t = table()?;
        let h = t.reserve(GFP_KERNEL)?;
        let premature = t.remove(h, |_| Ok(())).err();
        assert_eq!(premature, Some(EINVAL));
        assert_eq!(t.with(h, |v| *v), Err(EINVAL));
        assert!(t.fill(h, 5).is_ok());
        assert_eq!(t.with(h, |v| *v), Ok(5));
        // A second fill of a live slot is refused, and so is releasing it.
        assert_eq!(t.fill(h, 6), Err(6));
        assert_eq!(t.release(h), Err(EINVAL));
        let r = t.reserve(GFP_KERNEL)?;
        assert!(t.release(r).is_ok());
        assert_eq!(t.fill(r, 7), Err(7));
        Ok(())
    }

    #[test]
    fn refusal_keeps_the_object() -> Result {
        let t = table()?;
        let h = t.insert(3, GFP_KERNEL).map_err(|(e, _)| e)?;
        assert_eq!(t.remove(h, |_| Err(EBUSY)).err(), Some(EBUSY));
        assert_eq!(t.with(h, |v| *v), Ok(3));
        Ok(())
    }

    #[test]
    fn many_slots_across_leaves() -> Result {
        let t = table()?;
        let n = LEAF * 40;
        let mut hs = KVec::with_capacity(n, GFP_KERNEL)?;
        for i in 0..n {
            let v = u32::try_from(i).map_err(|_| EINVAL)?;
            hs.push(t.insert(v, GFP_KERNEL).map_err(|(e, _)| e)?, GFP_KERNEL)?;
        }
        let mut ok = true;
        for (i, h) in hs.iter().enumerate() {
            ok &= t.with(*h, |v| *v).ok() == u32::try_from(i).ok();
            // Never NULL, a kernel address or an ERR_PTR: bit 63 is clear.
            ok &= *h != 0 && *h >> 63 == 0;
        }
        for h in hs.iter() {
            ok &= t.remove(*h, |_| Ok(())).is_ok();
        }
        for h in hs.iter() {
            ok &= t.with(*h, |v| *v).is_err();
        }
        assert!(ok);
        Ok(())
    }

    #[test]
    fn million_cycles_stale_handle_stays_stale() -> Result {
        // What makes a stale handle stale is this table: a million create/free cycles with a
        // handle kept from before, checked in each, and every new handle different from it.
        let t = table()?;
        let stale = t.insert(0, GFP_KERNEL).map_err(|(e, _)| e)?;
        let first = t.remove(stale, |_| Ok(()))?;
        let (mut aliases, mut wrong) = (0usize, 0usize);
        for i in 0..1_000_000u32 {
            let h = match t.insert(i, GFP_KERNEL) {
                Ok(h) => h,
                Err(_) => {
                    wrong += 1;
                    continue;
                }
            };
            aliases += usize::from(h == stale);
            wrong += usize::from(t.with(stale, |v| *v).is_ok());
            wrong += usize::from(t.remove(stale, |_| Ok(())).is_ok());
            wrong += usize::from(t.remove(h, |_| Ok(())).ok() != Some(i));
        }
        assert_eq!(first, 0);
        assert_eq!(aliases, 0);
        assert_eq!(wrong, 0);
        Ok(())
    }

    #[test]
    fn retired_slot_is_never_reused() -> Result {
        let t = table()?;
        let h = t.insert(1, GFP_KERNEL).map_err(|(e, _)| e)?;
        let (index, _) = t.decode(h).ok_or(EINVAL)?;
        // Age the slot to its last generation, as ~2^37 frees would.
        assert!(t.age_slot(index, GEN_MAX - 1));
        let last = t.encode(index, GEN_MAX - 1);
        assert!(t.remove(last, |_| Ok(())).is_ok());
        let next = t.insert(2, GFP_KERNEL).map_err(|(e, _)| e)?;
        assert!(t.decode(next).map(|(i, _)| i) != Some(index));
        assert_eq!(t.with(last, |v| *v), Err(EINVAL));
        Ok(())
    }
}
