// SPDX-License-Identifier: GPL-2.0
/*
 * Positive controls for the test kernels' detectors (test flavour only;
 * KCSAN's on the kcsan kernel), written to debugfs rmad/control
 * (src/testing/control.rs): each one makes a detector report once, so that the verdict can
 * show that the detector would have caught a real problem. The VM scenario
 * runs them last (lockdep turns itself off after its first report), between
 * markers in the kernel log.
 */

#include <linux/completion.h>
#include <linux/compiler.h>
#include <linux/err.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/printk.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>

int rmad_test_control(const char *what, long arg);

/*
 * Leaks 64 objects of 77 bytes: kmemleak must report (at least three quarters
 * of) them. kmemleak scans conservatively: an object whose address a stale
 * word elsewhere still holds (its slot's earlier life) looks referenced, so a
 * few may be missed; the more objects, the smaller that share. Not inlined,
 * so that rmad_control_scrub_stack() overwrites the stack it used.
 */
static noinline void rmad_control_leak(void)
{
	static void *sink;
	int i;

	/*
	 * Each pointer is stored, so the allocation stays, and then forgotten.
	 * Zeroed: a kmalloc'ed object keeps what its memory held before, pointers
	 * among it (seen in kmemleak's dumps), and one leaked object pointing at
	 * others lets a single stale reference hide a whole chain of them
	 * (kmemleak found 21 of the 64 once). Zeroed, a stale pointer hides one.
	 */
	for (i = 0; i < 64; i++) {
		WRITE_ONCE(sink, kzalloc(77, GFP_KERNEL));
		WRITE_ONCE(sink, NULL);
	}
}

/*
 * Overwrites the stack below the caller's frame. kmemleak scans the stacks
 * of live tasks, and a copy of a leaked pointer left there by
 * rmad_control_leak() or the allocator would keep its object "referenced":
 * the control would then see fewer of its leaks, depending on how the
 * writer's stack happened to be reused.
 */
static noinline void rmad_control_scrub_stack(int depth)
{
	/* 1 KiB a frame, well below the kernel's frame-size limit; @depth frames. */
	char scrub[1024];

	memset(scrub, 0, sizeof(scrub));
	barrier_data(scrub);
	if (depth > 1)
		rmad_control_scrub_stack(depth - 1);
	barrier_data(scrub);
}

/* Reads just past the end of an allocation: KASAN must report it. */
static void rmad_control_kasan(void)
{
	char *p = kmalloc(77, GFP_KERNEL);

	if (!p)
		return;
	OPTIMIZER_HIDE_VAR(p);
	pr_info("rmad control: out-of-bounds read %d\n", READ_ONCE(p[80]));
	kfree(p);
}

static DEFINE_SPINLOCK(rmad_control_a);
static DEFINE_SPINLOCK(rmad_control_b);

/* Takes two locks in both orders: lockdep must report a possible deadlock. */
static void rmad_control_lockdep(void)
{
	spin_lock(&rmad_control_a);
	spin_lock(&rmad_control_b);
	spin_unlock(&rmad_control_b);
	spin_unlock(&rmad_control_a);
	spin_lock(&rmad_control_b);
	spin_lock(&rmad_control_a);
	spin_unlock(&rmad_control_a);
	spin_unlock(&rmad_control_b);
}

/* Blocks the caller uninterruptibly for @secs: the hung-task detector must report it. */
static void rmad_control_hung(long secs)
{
	schedule_timeout_uninterruptible(secs * HZ);
}

/* Two threads write one plain variable without a lock: KCSAN must report it. */
static int rmad_control_racy;

static int rmad_control_race_fn(void *data)
{
	unsigned long end = jiffies + 2 * HZ;

	while (time_before(jiffies, end)) {
		rmad_control_racy++;
		/* A plain access to memory in every iteration, not one kept in a register. */
		barrier();
	}
	complete(data);
	return 0;
}

static void rmad_control_race(void)
{
	DECLARE_COMPLETION_ONSTACK(done);
	unsigned long end = jiffies + 2 * HZ;
	struct task_struct *t;

	t = kthread_run(rmad_control_race_fn, &done, "rmad_control_race");
	if (IS_ERR(t))
		return;
	while (time_before(jiffies, end)) {
		rmad_control_racy++;
		barrier();
	}
	wait_for_completion(&done);
}

int rmad_test_control(const char *what, long arg)
{
	if (!strcmp(what, "leak")) {
		rmad_control_leak();
		rmad_control_scrub_stack(4);
	} else if (!strcmp(what, "kasan")) {
		rmad_control_kasan();
	} else if (!strcmp(what, "lockdep")) {
		rmad_control_lockdep();
	} else if (!strcmp(what, "hung")) {
		rmad_control_hung(arg);
	} else if (!strcmp(what, "race")) {
		rmad_control_race();
	} else {
		return -EINVAL;
	}
	return 0;
}
