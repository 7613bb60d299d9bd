// SPDX-License-Identifier: GPL-2.0
/*
 * rmad's C API called from a timer and from an hrtimer (test flavour only):
 * rmad_test_call_from() calls it from a timer (softirq) and from an hrtimer
 * in the default mode (hard interrupt context), as a C client would, and
 * reports what each call returned; lockdep, which the test kernel has,
 * judges the locks those calls take. For the rmad_capi suite
 * (src/testing/atomic_calls.rs).
 */

#include <linux/build_bug.h>
#include <linux/completion.h>
#include <linux/err.h>
#include <linux/gfp.h>
#include <linux/hrtimer.h>
#include <linux/irqflags.h>
#include <linux/jiffies.h>
#include <linux/preempt.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/stddef.h>
#include <linux/string.h>
#include <linux/timer.h>

#include "../../include/rmad.h"
#include "atomic_calls.h"

/* The layout src/testing/atomic_calls.rs has. */
static_assert(sizeof(struct rmad_atomic_result) == 100);
static_assert(offsetof(struct rmad_atomic_result, hi_tid) == 68);
static_assert(offsetof(struct rmad_atomic_result, recv_free) == 80);
static_assert(offsetof(struct rmad_atomic_result, seg_beyond_null) == 96);

struct rmad_atomic_call {
	struct timer_list timer;
	struct hrtimer hrtimer;
	struct completion done;
	struct rmad_agent *agent;
	struct rmad_send_buf *buf;
	struct rmad_recv_buf *recv;
	struct rmad_send_buf *rmpp;
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
	fresh = rmad_create_send_mad(c->agent, 1, 0, 0, RMAD_MGMT_MAD_HDR, RMAD_MGMT_MAD_DATA,
				     GFP_ATOMIC, 1);
	r->create = IS_ERR(fresh) ? PTR_ERR(fresh) : 0;
	/* A kept received MAD: read, then freed. */
	r->recv_mad_ok = !!rmad_recv_buf_mad(c->recv, NULL);
	r->recv_free = rmad_free_recv_mad(c->recv);
	/* The RMPP buffer's segments: the count, the last one, and one beyond it. */
	r->seg_count = rmad_send_buf_seg_count(c->rmpp, &r->seg_size);
	r->seg_ok = r->seg_count > 0 && !!rmad_get_rmpp_segment(c->rmpp, r->seg_count);
	r->seg_beyond_null = !rmad_get_rmpp_segment(c->rmpp, r->seg_count + 1);
	if (!IS_ERR(fresh)) {
		r->send_len = rmad_send_buf_len(fresh);
		r->mad_ok = !!rmad_send_buf_mad(fresh);
		/* Both setters of a buffer: 0 only if each returned 0. */
		r->set = rmad_send_buf_set(fresh, NULL, 100, 2, c) ?:
			 rmad_send_buf_set_retry(fresh, RMAD_RETRY_BACKOFF, 1000);
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
			struct rmad_recv_buf *recv, struct rmad_send_buf *rmpp,
			struct rmad_atomic_result *res)
{
	struct rmad_atomic_call c = {
		.agent = agent, .buf = buf, .recv = recv, .rmpp = rmpp, .res = res
	};
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
