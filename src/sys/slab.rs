// SPDX-License-Identifier: GPL-2.0

//! The slab cache that send records come from (`src/sys/slab.c`: `kmem_cache_create` and
//! `kmem_cache_alloc` are macros in C, and the 7.3 kernel crate has no slab cache).
//!
//! One cache, made at module init for the record's layout and destroyed at module exit, after
//! everything that could hold a record has gone. A dedicated cache costs one
//! `kmem_cache_alloc` per send (the kernel crate's allocators go through `krealloc`), sizes
//! the object exactly, and names rmad's records in `/proc/slabinfo`; a record left at module
//! exit is reported there by name.

use core::{
    alloc::Layout,
    ptr::NonNull, //
};
use kernel::{
    alloc::{
        flags,
        Flags, //
    },
    bindings,
    ffi::{
        c_int,
        c_uint,
        c_void, //
    },
    prelude::*,
};

extern "C" {
    fn rmad_slab_init(size: c_uint, align: c_uint) -> c_int;
    fn rmad_slab_exit();
    fn rmad_slab_alloc(gfp: kernel::bindings::gfp_t) -> *mut c_void;
    fn rmad_slab_free(obj: *mut c_void);
}

/// The cache, from its creation at module init to its drop at module exit.
///
/// # Invariants
///
/// While a `Cache` exists the C cache exists, with objects of the layout it was created for.
pub(crate) struct Cache {
    _created: (),
}

impl Cache {
    /// Creates the cache, for objects of `layout`. The cache is not merged with another, so
    /// that a record left at module exit is named in `kmem_cache_destroy`'s report.
    ///
    /// # Safety
    ///
    /// Called once, at module init, before any [`alloc`]; the value is dropped at module
    /// exit, once every object has been freed.
    pub(crate) unsafe fn create(layout: Layout) -> Result<Self> {
        let size = c_uint::try_from(layout.size()).map_err(|_| EINVAL)?;
        let align = c_uint::try_from(layout.align()).map_err(|_| EINVAL)?;
        // SAFETY: Plain call, once (the caller's promise).
        let r = unsafe { rmad_slab_init(size, align) };
        if r != 0 {
            return Err(Error::from_errno(r));
        }
        // INVARIANT: Created just above.
        Ok(Self { _created: () })
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        // SAFETY: Module exit (the creator's promise): no object is allocated any more, and
        // none is left (one that is would be reported by `kmem_cache_destroy`).
        unsafe { rmad_slab_exit() };
    }
}

/// One object of the cache, uninitialised; `ENOMEM` if the allocator has none (or the cache
/// is not there: the module is not loaded).
pub(crate) fn alloc(gfp: Flags) -> Result<NonNull<u8>> {
    // SAFETY: Plain call; the C side gives NULL without a cache.
    let p = unsafe { rmad_slab_alloc(raw(gfp)) };
    NonNull::new(p.cast()).ok_or(ENOMEM)
}

/// The `gfp_t` of `gfp`, which the kernel crate does not give out: `gfp` is a union of the
/// flags the crate names, so the union of the raw values of those it contains is its own.
fn raw(gfp: Flags) -> kernel::bindings::gfp_t {
    let named = [
        (flags::GFP_ATOMIC, bindings::GFP_ATOMIC),
        (flags::GFP_KERNEL, bindings::GFP_KERNEL),
        (flags::GFP_KERNEL_ACCOUNT, bindings::GFP_KERNEL_ACCOUNT),
        (flags::GFP_NOWAIT, bindings::GFP_NOWAIT),
        (flags::__GFP_ZERO, bindings::__GFP_ZERO),
        (flags::__GFP_HIGHMEM, bindings::__GFP_HIGHMEM),
        (flags::__GFP_NOWARN, bindings::__GFP_NOWARN),
    ];
    named
        .iter()
        .filter(|(f, _)| gfp.contains(*f))
        .fold(0, |raw, (_, r)| raw | r)
}

/// Frees an object of the cache; any context but NMI.
///
/// # Safety
///
/// `obj` came from [`alloc`], is freed once, and nothing reads it afterwards.
pub(crate) unsafe fn free(obj: NonNull<u8>) {
    // SAFETY: The caller's promise.
    unsafe { rmad_slab_free(obj.as_ptr().cast()) };
}
