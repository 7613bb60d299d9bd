// SPDX-License-Identifier: GPL-2.0
/*
 * failslab's per-task flag for the Rust client (client.rs): a field of
 * struct task_struct, which Rust must not reach through the bindings (their
 * layout of task_struct is not C's in the test kernel: a Rust write to
 * make_it_fail lands 48 bytes early).
 */

#include <linux/errno.h>
#include <linux/sched.h>

int rmad_rust_drop_make_it_fail(int on);

/*
 * Lets failslab fail (or not) the current task's slab allocations
 * (task-filter mode); -EOPNOTSUPP on a kernel without fault injection.
 */
int rmad_rust_drop_make_it_fail(int on)
{
#ifdef CONFIG_FAULT_INJECTION
	current->make_it_fail = on;
	return 0;
#else
	return -EOPNOTSUPP;
#endif
}
