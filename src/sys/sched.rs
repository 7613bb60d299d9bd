// SPDX-License-Identifier: GPL-2.0

//! Scheduling: the one scheduler call rmad needs that the 7.3 kernel crate lacks.
//!
//! `cond_resched` is a macro in C, so `src/sys/sched.c` wraps it in a function.

extern "C" {
    fn rmad_cond_resched();
}

/// Gives the CPU away if something else should run (`cond_resched`): long work that touches
/// many sends calls it between batches, so that a kernel without preemption neither reports
/// a soft lockup nor starves other work on the CPU.
///
/// Process context only, with no lock held.
pub(crate) fn cond_resched() {
    // SAFETY: Plain call; callers are in process context and hold no spinlock.
    unsafe { rmad_cond_resched() };
}
