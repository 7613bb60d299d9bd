// SPDX-License-Identifier: GPL-2.0

//! What a piece of code costs the slab allocator, counted exactly: the kmalloc allocations and
//! kfree frees the current task makes while it runs, and those of rmad's slab cache of send
//! records (`allocs.c` probes the kmem tracepoints; every other allocation of Rust code is a
//! kmalloc).

use kernel::{
    ffi::{
        c_int,
        c_long,
        c_void, //
    },
    prelude::*,
};

/// `struct rmad_test_allocs` of `allocs.c`.
#[repr(C)]
struct RawAllocs {
    task: *mut c_void,
    on: c_int,
    allocs: c_long,
    bytes: c_long,
    frees: c_long,
    from_cache: c_long,
}

extern "C" {
    fn rmad_test_allocs_start(c: *mut RawAllocs) -> c_int;
    fn rmad_test_allocs_stop(c: *mut RawAllocs);
}

/// What the current task allocated and freed while a closure ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Allocs {
    /// kmalloc allocations, whatever the caller, and allocations from rmad's cache.
    pub(crate) allocs: usize,
    /// The sizes of the objects they got, in bytes: each request's kmalloc bucket, or the
    /// cache's object size (what it takes on a kernel without debugging metadata).
    pub(crate) bytes: usize,
    /// Objects freed with kfree, or to rmad's cache.
    pub(crate) frees: usize,
    /// Of `allocs`, those from rmad's cache of send records.
    pub(crate) from_cache: usize,
}

/// Runs `f` and counts the kmalloc allocations and kfree frees of the current task meanwhile (not
/// those of interrupts, nor of other tasks `f` wakes). Process context; one count at a time.
pub(crate) fn count<R>(f: impl FnOnce() -> R) -> Result<(R, Allocs)> {
    let mut raw = RawAllocs {
        task: core::ptr::null_mut(),
        on: 0,
        allocs: 0,
        bytes: 0,
        frees: 0,
        from_cache: 0,
    };
    // SAFETY: `raw` is valid for writes and stays in place until the stop below (or the
    // start failed, and then no probe holds it).
    let r = unsafe { rmad_test_allocs_start(&raw mut raw) };
    if r != 0 {
        return Err(Error::from_errno(r));
    }
    let out = f();
    // SAFETY: The count started above with `raw`, which is still in place.
    unsafe { rmad_test_allocs_stop(&raw mut raw) };
    let n = |v: c_long| usize::try_from(v).unwrap_or(usize::MAX);
    Ok((
        out,
        Allocs {
            allocs: n(raw.allocs),
            bytes: n(raw.bytes),
            frees: n(raw.frees),
            from_cache: n(raw.from_cache),
        },
    ))
}
