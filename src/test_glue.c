// SPDX-License-Identifier: GPL-2.0
/*
 * Test scaffolding (test build only): what the Rust tests need of the kernel
 * that the 7.3 kernel crate does not offer.
 *
 * rmad_test_call_from() calls rmad's C API from a timer (softirq) and from an
 * hrtimer in the default mode (hard interrupt context), as a C client would,
 * and reports what each call returned; lockdep, which the test kernel has,
 * judges the locks those calls take. The rest serves the stress driver:
 * kernel threads, failslab's per-task flag and cond_resched().
 */

#include <linux/completion.h>
#include <linux/err.h>
#include <linux/gfp.h>
#include <linux/hrtimer.h>
#include <linux/irqflags.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/preempt.h>
#include <linux/timer.h>

#include "../include/rmad.h"
#include "test_glue.h"

struct rmad_atomic_call {
	struct timer_list timer;
	struct hrtimer hrtimer;
	struct completion done;
	struct rmad_agent *agent;
	struct rmad_send_buf *buf;
	struct rmad_recv_buf *recv;
	struct rmad_atomic_result *res;
};

/* The calls, in the callback's context. */
static void rmad_atomic_calls(struct rmad_atomic_call *c)
{
	struct rmad_atomic_result *r = c->res;
	struct rmad_send_buf *fresh;
	u64 post = 0;

	r->hardirq = in_hardirq();
	r->softirq = in_serving_softirq();
	r->irqs_off = irqs_disabled();
	r->post = rmad_post_send(c->buf, &post);
	r->modify = rmad_modify_post(c->buf, post, 60000);
	r->modify_mad = rmad_modify_mad(c->buf, 60000);
	/* Still waiting (60 s): freeing it is refused. */
	r->free_busy = rmad_free_send_mad(c->buf);
	r->cancel = rmad_cancel_post(c->buf, post);
	r->cancel_again = rmad_cancel_mad(c->buf);
	r->hi_tid = rmad_agent_hi_tid(c->agent);
	r->agent_context_ok = !!rmad_agent_context(c->agent);
	fresh = rmad_create_send_mad(c->agent, 1, 0, 0, 24, 232, GFP_ATOMIC, 1);
	r->create = IS_ERR(fresh) ? PTR_ERR(fresh) : 0;
	/* A kept received MAD: read, then freed. */
	r->recv_mad_ok = !!rmad_recv_buf_mad(c->recv, NULL);
	r->recv_free = rmad_free_recv_mad(c->recv);
	if (!IS_ERR(fresh)) {
		r->send_len = rmad_send_buf_len(fresh);
		r->mad_ok = !!rmad_send_buf_mad(fresh);
		r->set = rmad_send_buf_set(fresh, NULL, 100, 2, c);
		r->context_ok = rmad_send_buf_context(fresh) == c;
		r->retries = rmad_send_buf_retries(fresh);
		r->free = rmad_free_send_mad(fresh);
		r->stale_free = rmad_free_send_mad(fresh);
	}
	complete(&c->done);
}

static void rmad_atomic_timer(struct timer_list *t)
{
	struct rmad_atomic_call *c = timer_container_of(c, t, timer);

	rmad_atomic_calls(c);
}

static enum hrtimer_restart rmad_atomic_hrtimer(struct hrtimer *t)
{
	rmad_atomic_calls(container_of(t, struct rmad_atomic_call, hrtimer));
	return HRTIMER_NORESTART;
}

int rmad_test_call_from(int where, struct rmad_agent *agent, struct rmad_send_buf *buf,
			struct rmad_recv_buf *recv, struct rmad_atomic_result *res)
{
	struct rmad_atomic_call c = { .agent = agent, .buf = buf, .recv = recv, .res = res };
	unsigned long left;

	init_completion(&c.done);
	if (where == RMAD_FROM_TIMER) {
		timer_setup_on_stack(&c.timer, rmad_atomic_timer, 0);
		mod_timer(&c.timer, jiffies + 1);
	} else {
		hrtimer_setup_on_stack(&c.hrtimer, rmad_atomic_hrtimer, CLOCK_MONOTONIC,
				       HRTIMER_MODE_REL);
		hrtimer_start(&c.hrtimer, ms_to_ktime(1), HRTIMER_MODE_REL);
	}
	left = wait_for_completion_timeout(&c.done, 20 * HZ);
	if (where == RMAD_FROM_TIMER) {
		timer_delete_sync(&c.timer);
		timer_destroy_on_stack(&c.timer);
	} else {
		hrtimer_cancel(&c.hrtimer);
		destroy_hrtimer_on_stack(&c.hrtimer);
	}
	return left ? 0 : -ETIMEDOUT;
}

/* Kernel threads for the stress driver (stress.rs). */
struct task_struct *rmad_test_kthread_run(int (*fn)(void *), void *data, const char *name)
{
	return kthread_run(fn, data, "%s", name);
}

/* Lets failslab fail (or not) the current task's allocations (task-filter mode). */
void rmad_test_make_it_fail(int on)
{
	current->make_it_fail = on;
}

/*
 * Positive controls for the test kernels' detectors (KCSAN's on the kcsan
 * kernel): each one makes a detector report once, so that the verdict can
 * show that the detector would have caught a real problem. The VM scenario
 * runs them last (lockdep turns itself off after its first report), between
 * markers in the kernel log.
 */

/* Leaks 16 objects of 77 bytes: kmemleak must report them. */
static void rmad_control_leak(void)
{
	static void *sink;
	int i;

	/* Each pointer is stored, so the allocation stays, and then forgotten. */
	for (i = 0; i < 16; i++) {
		WRITE_ONCE(sink, kmalloc(77, GFP_KERNEL));
		WRITE_ONCE(sink, NULL);
	}
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
	if (!strcmp(what, "leak"))
		rmad_control_leak();
	else if (!strcmp(what, "kasan"))
		rmad_control_kasan();
	else if (!strcmp(what, "lockdep"))
		rmad_control_lockdep();
	else if (!strcmp(what, "hung"))
		rmad_control_hung(arg);
	else if (!strcmp(what, "race"))
		rmad_control_race();
	else
		return -EINVAL;
	return 0;
}
