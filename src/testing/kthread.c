// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel threads for the stress driver (src/testing/stress.rs), and
 * failslab's per-task flag: calls that are macros or field accesses in C,
 * one function each (test flavour only).
 */

#include <linux/kthread.h>
#include <linux/sched.h>

struct task_struct *rmad_test_kthread_run(int (*fn)(void *), void *data, const char *name);

/* Starts a kernel thread running @fn(@data), named @name. */
struct task_struct *rmad_test_kthread_run(int (*fn)(void *), void *data, const char *name)
{
	return kthread_run(fn, data, "%s", name);
}

void rmad_test_make_it_fail(int on);

/* Lets failslab fail (or not) the current task's allocations (task-filter mode). */
void rmad_test_make_it_fail(int on)
{
	current->make_it_fail = on;
}

