// SPDX-License-Identifier: GPL-2.0

//! Allocation scopes: a C caller's `gfp_t` honoured in full.
//!
//! The 7.3 kernel crate allocates with a few named flag sets (`GFP_KERNEL`, `GFP_ATOMIC`,
//! `GFP_NOWAIT`, ...) and cannot express `GFP_NOIO` or `GFP_NOFS`. A caller that passes one
//! must not recurse into IO or filesystem reclaim, so rmad allocates with `GFP_KERNEL` inside
//! a [`Scope`] (`memalloc_noio_save` / `memalloc_nofs_save`, `src/sys/memalloc.c`), which the
//! page allocator applies to every allocation of the task meanwhile.

use core::marker::PhantomData;
use kernel::{
    bindings::gfp_t,
    ffi::{
        c_int,
        c_uint, //
    },
};

extern "C" {
    fn rmad_memalloc_save(gfp: gfp_t, kind: *mut c_int) -> c_uint;
    fn rmad_memalloc_restore(kind: c_int, flags: c_uint);
    // Declared with its siblings of `memalloc.c`, which the production build links; only the
    // suites ask what mask an allocation gets.
    #[cfg(rmad_test)]
    fn rmad_memalloc_effective(gfp: gfp_t) -> gfp_t;
}

/// The allocation scope a `gfp_t` asks for, while it lives; dropping it leaves the scope.
///
/// # Invariants
///
/// `(kind, flags)` is what `rmad_memalloc_save` returned on the current task, whose scope
/// this is: the type is neither `Send` nor `Sync`.
pub(crate) struct Scope {
    kind: c_int,
    flags: c_uint,
    _task: PhantomData<*mut ()>,
}

impl Scope {
    /// Enters the scope `gfp` asks for: none for an atomic mask or a full one.
    pub(crate) fn enter(gfp: gfp_t) -> Self {
        let mut kind = 0;
        // SAFETY: Plain call; `kind` is valid for a write.
        let flags = unsafe { rmad_memalloc_save(gfp, &mut kind) };
        // INVARIANT: On this task, which the value cannot leave.
        Self {
            kind,
            flags,
            _task: PhantomData,
        }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        // SAFETY: Restores what `enter` saved, on the same task (type invariant), once.
        unsafe { rmad_memalloc_restore(self.kind, self.flags) };
    }
}

/// The mask an allocation with `gfp` gets now, on the current task (`current_gfp_context`):
/// what the suites check a C caller's `GFP_NOIO` scope against; it wraps the declaration above.
#[cfg(rmad_test)]
pub(crate) fn effective(gfp: gfp_t) -> gfp_t {
    // SAFETY: Plain call.
    unsafe { rmad_memalloc_effective(gfp) }
}
