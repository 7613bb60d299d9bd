// SPDX-License-Identifier: GPL-2.0

//! A device's name, which `rdma dev set … name …` can change while rmad runs (ib_core then
//! calls the `ib_client`'s `rename`). Readers get a `&CStr` without a lock: a renamed-from
//! name is kept, never freed, until the port goes, so a name a reader holds stays valid.

use core::sync::atomic::{
    AtomicPtr,
    Ordering::{
        Acquire,
        Release, //
    },
};
use kernel::{
    new_mutex,
    prelude::*,
    str::{
        CStr,
        CString, //
    },
    sync::Mutex,
};

/// The current name of a device, and every name it had while its port was open.
///
/// # Invariants
///
/// `current` points to a `CString` owned by a box in `all`. Boxes are only added to `all`,
/// and dropped with it.
#[pin_data]
pub(crate) struct DevName {
    current: AtomicPtr<CString>,
    /// The names, oldest first; the last is `current`.
    #[pin]
    all: Mutex<KVec<KBox<CString>>>,
}

impl DevName {
    /// A name that starts as `name`.
    pub(crate) fn new(name: CString) -> Result<impl PinInit<Self>> {
        let mut first = KBox::new(name, GFP_KERNEL)?;
        let ptr = core::ptr::from_mut(&mut *first);
        let mut all = KVec::new();
        // Moving the box does not move the name it holds: `ptr` stays valid.
        all.push(first, GFP_KERNEL)?;
        Ok(pin_init!(DevName {
            // INVARIANT: `ptr` points into the only box of `all`.
            current: AtomicPtr::new(ptr),
            all <- new_mutex!(all, "DevName::all"),
        }))
    }

    /// The name now.
    pub(crate) fn get(&self) -> &CStr {
        let p = self.current.load(Acquire);
        // SAFETY: By the type invariant `p` points to a `CString` that lives as long as
        // `self`, and no one mutates it.
        unsafe { &*p }
    }

    /// Makes `name` the name now; readers of the old one keep a valid string.
    pub(crate) fn set(&self, name: CString) -> Result {
        let mut b = KBox::new(name, GFP_KERNEL)?;
        let ptr = core::ptr::from_mut(&mut *b);
        let mut all = self.all.lock();
        all.push(b, GFP_KERNEL)?;
        // INVARIANT: `ptr` points into the box just added to `all` (moving a box does not
        // move what it holds).
        self.current.store(ptr, Release);
        Ok(())
    }
}
