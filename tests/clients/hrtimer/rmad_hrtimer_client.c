// SPDX-License-Identifier: GPL-2.0
/*
 * rmad_hrtimer_client: a client module of the production rmad.ko (make test)
 * that holds rmad.h to its word on contexts. From a timer (softirq) and from
 * an hrtimer in the default mode (hard interrupt context on this kernel),
 * it posts a send and cancels it, creates, fills and frees a buffer with
 * GFP_ATOMIC, and reads the agent's context, as rmad.h says it may; then it
 * reports what each call returned and what the send handler saw. Lockdep,
 * which the test kernel has (with raw-lock nesting checks), judges the locks
 * those calls take: the run's clean log is part of the check.
 *
 * With detached=1 it does something else: it registers an agent with
 * RMAD_DETACH_BUFFERS and creates a buffer that it keeps; the test VM then
 * deletes rxe0, and writing 1 to the parameter "finish" unregisters the agent
 * and frees the buffer from an hrtimer (hard interrupt). That buffer holds
 * the last reference to the agent, and the agent the last one to the removed
 * device's port: the free, which rmad.h says is atomic-safe, ends them all
 * there. With DEBUG_ATOMIC_SLEEP (the test kernel has it), anything on that
 * path that may sleep is reported ("sleeping function called from invalid
 * context"), which fails the run's clean log.
 */

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/hrtimer.h>
#include <linux/module.h>
#include <linux/timer.h>
#include <linux/unaligned.h>

#include "../../../include/rmad.h"

static struct rmad_agent *agent;
static struct rmad_ah ah = { .has_grh = 1, .sgid_index = 1 };
static atomic_t flushed, other;

struct call {
	struct timer_list timer;
	struct hrtimer hrtimer;
	struct completion done;
	struct rmad_send_buf *buf;
	int post, cancel, create, free, context_ok, hardirq;
};

static bool detached;
module_param(detached, bool, 0400);
MODULE_PARM_DESC(detached, "keep a buffer of an RMAD_DETACH_BUFFERS agent for \"finish\"");

static void client_send_handler(struct rmad_agent *a, struct rmad_send_wc *wc)
{
	if (wc->status == RMAD_WC_WR_FLUSH_ERR)
		atomic_inc(&flushed);
	else
		atomic_inc(&other);
}

/* The calls rmad.h says are atomic-safe, in the callback's context. */
static void client_calls(struct call *c)
{
	struct rmad_send_buf *fresh;
	u64 post = 0;

	c->hardirq = in_hardirq();
	c->post = rmad_post_send(c->buf, &post);
	c->cancel = rmad_cancel_post(c->buf, post);
	fresh = rmad_create_send_mad(agent, 1, 0, 0, RMAD_MGMT_MAD_HDR, RMAD_MGMT_MAD_DATA,
				     GFP_ATOMIC, 1);
	c->create = IS_ERR(fresh) ? PTR_ERR(fresh) : 0;
	c->free = IS_ERR(fresh) ? 0 : rmad_free_send_mad(fresh);
	c->context_ok = rmad_agent_context(agent) == &ah;
	complete(&c->done);
}

static void client_timer(struct timer_list *t)
{
	client_calls(container_of(t, struct call, timer));
}

static enum hrtimer_restart client_hrtimer(struct hrtimer *t)
{
	client_calls(container_of(t, struct call, hrtimer));
	return HRTIMER_NORESTART;
}

/* A SEND of class 0x04 to QP1 of rxe0 port 1, which nobody answers (timeout 60 s). */
static struct rmad_send_buf *client_send(u32 lo)
{
	struct rmad_send_buf *b;
	u8 *mad;

	b = rmad_create_send_mad(agent, 1, 0, 0, RMAD_MGMT_MAD_HDR, RMAD_MGMT_MAD_DATA,
				 GFP_KERNEL, 1);
	if (IS_ERR(b))
		return b;
	mad = rmad_send_buf_mad(b);
	mad[0] = 1;
	mad[1] = RMAD_MGMT_CLASS_PERF_MGMT;
	mad[2] = 1;
	mad[3] = RMAD_MGMT_METHOD_SEND;
	put_unaligned_be64(((u64)rmad_agent_hi_tid(agent) << 32) | lo, mad + 8);
	rmad_send_buf_set(b, &ah, 60000, 0, NULL);
	return b;
}

static int client_run(struct call *c, bool hard)
{
	c->buf = client_send(hard);
	if (IS_ERR(c->buf))
		return PTR_ERR(c->buf);
	init_completion(&c->done);
	if (hard) {
		hrtimer_setup_on_stack(&c->hrtimer, client_hrtimer, CLOCK_MONOTONIC,
				       HRTIMER_MODE_REL);
		hrtimer_start(&c->hrtimer, ms_to_ktime(1), HRTIMER_MODE_REL);
	} else {
		timer_setup_on_stack(&c->timer, client_timer, 0);
		mod_timer(&c->timer, jiffies + 1);
	}
	if (!wait_for_completion_timeout(&c->done, 20 * HZ))
		return -ETIMEDOUT;
	if (hard) {
		hrtimer_cancel(&c->hrtimer);
		destroy_hrtimer_on_stack(&c->hrtimer);
	} else {
		timer_delete_sync(&c->timer);
		timer_destroy_on_stack(&c->timer);
	}
	return 0;
}

static bool client_ok(const struct call *c, int ran)
{
	return !ran && !c->post && !c->cancel && !c->create && !c->free && c->context_ok;
}

/* detached=1: the buffer kept, and what the hrtimer's free returned. */
static struct rmad_send_buf *kept;
static struct hrtimer free_timer;
static struct completion freed;
static int free_ret = -EINPROGRESS, free_hardirq;

static enum hrtimer_restart client_free(struct hrtimer *t)
{
	free_hardirq = in_hardirq();
	free_ret = rmad_free_send_mad(kept);
	complete(&freed);
	return HRTIMER_NORESTART;
}

/* detached=1, "finish": unregisters the agent, then frees the kept buffer from an hrtimer. */
static int finish_set(const char *val, const struct kernel_param *kp)
{
	int unregistered, done;

	if (!detached || IS_ERR_OR_NULL(kept))
		return -EINVAL;
	unregistered = rmad_unregister_agent(agent);
	init_completion(&freed);
	hrtimer_setup(&free_timer, client_free, CLOCK_MONOTONIC, HRTIMER_MODE_REL);
	hrtimer_start(&free_timer, ms_to_ktime(1), HRTIMER_MODE_REL);
	done = wait_for_completion_timeout(&freed, 20 * HZ) != 0;
	hrtimer_cancel(&free_timer);
	pr_info("rmad_hrtimer_client: detached: %s: unregister %d, free from hrtimer (hardirq %d) %d\n",
		!unregistered && done && free_hardirq && !free_ret ? "PASS" : "FAIL",
		unregistered, free_hardirq, free_ret);
	kept = NULL;
	return 0;
}

static const struct kernel_param_ops finish_ops = {
	.set = finish_set,
};

module_param_cb(finish, &finish_ops, NULL, 0200);
MODULE_PARM_DESC(finish, "detached=1: unregister, then free the kept buffer from an hrtimer");

/* detached=1 at load: the agent and the buffer it keeps. */
static int client_detached(void)
{
	agent = rmad_register_agent("rxe0", 1, RMAD_QPT_GSI, NULL, 0, client_send_handler, NULL,
				    &ah, RMAD_DETACH_BUFFERS);
	if (IS_ERR(agent))
		return PTR_ERR(agent);
	kept = client_send(7);
	if (IS_ERR(kept)) {
		rmad_unregister_agent(agent);
		return PTR_ERR(kept);
	}
	pr_info("rmad_hrtimer_client: detached: agent and buffer kept\n");
	return 0;
}

static int __init rmad_hrtimer_client_init(void)
{
	struct call timer = {}, hrtimer = {};
	int ran_timer, ran_hrtimer, ret, i;

	ret = rmad_port_gid("rxe0", 1, 1, ah.dgid);
	if (ret)
		return ret;
	if (detached)
		return client_detached();
	agent = rmad_register_agent("rxe0", 1, RMAD_QPT_GSI, NULL, 0, client_send_handler, NULL,
				    &ah, 0);
	if (IS_ERR(agent))
		return PTR_ERR(agent);
	ran_timer = client_run(&timer, false);
	ran_hrtimer = client_run(&hrtimer, true);
	/* Both cancelled posts report a flush. */
	for (i = 0; i < 1000 && atomic_read(&flushed) + atomic_read(&other) < 2; i++)
		msleep(20);
	if (!IS_ERR_OR_NULL(timer.buf))
		rmad_free_send_mad(timer.buf);
	if (!IS_ERR_OR_NULL(hrtimer.buf))
		rmad_free_send_mad(hrtimer.buf);
	ret = rmad_unregister_agent(agent);
	pr_info("rmad_hrtimer_client: %s: timer post %d cancel %d create %d free %d; hrtimer (hardirq %d) post %d cancel %d create %d free %d; %d flushed, %d other; unregister %d\n",
		(client_ok(&timer, ran_timer) && client_ok(&hrtimer, ran_hrtimer) &&
		 hrtimer.hardirq && atomic_read(&flushed) == 2 && !atomic_read(&other) &&
		 !ret) ? "PASS" : "FAIL",
		timer.post, timer.cancel, timer.create, timer.free, hrtimer.hardirq, hrtimer.post,
		hrtimer.cancel, hrtimer.create, hrtimer.free, atomic_read(&flushed),
		atomic_read(&other), ret);
	return 0;
}

static void __exit rmad_hrtimer_client_exit(void)
{
	/* "finish" was never written: the agent and the buffer go the usual way. */
	if (detached && !IS_ERR_OR_NULL(kept)) {
		rmad_unregister_agent(agent);
		rmad_free_send_mad(kept);
	}
}

module_init(rmad_hrtimer_client_init);
module_exit(rmad_hrtimer_client_exit);
MODULE_DESCRIPTION("rmad's atomic-safe calls from a timer and an hrtimer, from a client module");
MODULE_LICENSE("GPL");
