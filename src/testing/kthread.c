// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel threads for the stress driver (src/testing/stress.rs), and
 * failslab's per-task flag: calls that are macros or field accesses in C,
 * one function each (test flavour only).
 */

#include <linux/errno.h>
#include <linux/kthread.h>
#include <linux/sched.h>

struct task_struct *rmad_test_kthread_run(int (*fn)(void *), void *data, const char *name);

/* Starts a kernel thread running @fn(@data), named @name. */
struct task_struct *rmad_test_kthread_run(int (*fn)(void *), void *data, const char *name)
{
	return kthread_run(fn, data, "%s", name);
}

int rmad_test_make_it_fail(int on);

/*
 * Lets failslab fail (or not) the current task's allocations (task-filter
 * mode). Returns -EOPNOTSUPP on a kernel without fault injection (the bench
 * kernel), where the flag does not exist.
 */
int rmad_test_make_it_fail(int on)
{
#ifdef CONFIG_FAULT_INJECTION
	current->make_it_fail = on;
	return 0;
#else
	return -EOPNOTSUPP;
#endif
}

