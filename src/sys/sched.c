// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel calls that are macros or inline functions in C, which Rust cannot
 * call directly: one function each, no logic.
 */

#include <linux/sched.h>

void rmad_cond_resched(void);

/* cond_resched(): long work in process context yields between batches. */
void rmad_cond_resched(void)
{
	cond_resched();
}
