// SPDX-License-Identifier: GPL-2.0
/*
 * The goodput row of `make bench` (issue 34): an overloaded responder, as a
 * subnet administrator is under a storm of queries, and requesters that keep
 * many GETs outstanding against it, under three retry policies:
 *
 *   c             the C MAD layer (ib_core agents), retrying at a fixed interval
 *   rmad          rmad with the C layer's policy
 *   rmad-backoff  rmad with exponential backoff and a deadline (RMAD_RETRY_BACKOFF,
 *                 rmad_send_buf_set_retry())
 *
 * The responder, an ib_core agent on rxe0, queues at most GP_QUEUE answers and
 * sends GP_RATE of them per second; a request that finds the queue full is
 * dropped. Each requester replaces every GET that ends (answered or timed out)
 * with a new one. After GP_WARMUP_MS the run counts, for its seconds: answers
 * per second (goodput), requests that reached the responder per answer (the
 * transmissions it had to take), and the share of GETs that ended in a
 * timeout. Started by `goodput POLICY SECS` written to debugfs rmad/stress
 * (tests/vm/bench.sh); prints one "bench-goodput:" line. Figures only.
 */

#include <linux/delay.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "../../../include/rmad.h"
#include "bench.h"
#include "impl.h"

/* The responder's rate (answers per second) and queue. */
#define GP_RATE 250
#define GP_QUEUE 16
/* Requesters, and the GETs each keeps outstanding. */
#define GP_REQUESTERS 4
#define GP_WINDOW 256
/* Every GET: its response timeout and retries; with backoff, its deadline. */
#define GP_TIMEOUT_MS 100
#define GP_RETRIES 20
#define GP_DEADLINE_MS 10000
/*
 * Time before the counting starts: longer than any GET of the first window can
 * last (the deadline), so the window counts a steady state.
 */
#define GP_WARMUP_MS (GP_DEADLINE_MS + 2000)

enum gp_policy { GP_C, GP_RMAD, GP_RMAD_BACKOFF };

static const char * const gp_names[] = { "c", "rmad", "rmad-backoff" };

/* The responder: a bounded queue of answers, sent at GP_RATE per second. */
struct gp_responder {
	struct ib_mad_agent *agent;
	spinlock_t lock;	/* protects queue, head, len, stop */
	struct ib_mad_send_buf *queue[GP_QUEUE];
	u32 head, len;
	bool stop;
	/* Time owed answers since the last run of the work, in ns (at most GP_BURST answers). */
	u64 credit_ns, last_ns;
	struct delayed_work work;
	/* Requests that arrived, those dropped for a full queue, answers sent. */
	atomic_t arrived, dropped, served;
};

/* One policy's run: its counters, shared by its requesters' handlers. */
struct gp_run {
	enum gp_policy policy;
	bool stopping;		/* READ_ONCE: no GET replaces one that ends */
	atomic_t answered, timed_out, other, outstanding;
	/* Handlers between their look at stopping and the end of their post. */
	atomic_t posting;
	atomic_t lo;		/* TID low words, one per GET */
	wait_queue_head_t idle;
	union ib_gid gid;
	struct rmad_ah rah;
	struct ib_ah *ah[GP_REQUESTERS];
	struct ib_mad_agent *c[GP_REQUESTERS];
	struct rmad_agent *r[GP_REQUESTERS];
};

#define GP_NS_PER_ANSWER (NSEC_PER_SEC / GP_RATE)
/* Answers the work may send at once: it runs every jiffy, which may be 10 ms. */
#define GP_BURST 8

static void gp_serve(struct work_struct *w)
{
	struct gp_responder *g = container_of(to_delayed_work(w), struct gp_responder, work);
	u64 now = ktime_get_ns();
	struct ib_mad_send_buf *b;

	g->credit_ns = min(g->credit_ns + (now - g->last_ns), GP_BURST * GP_NS_PER_ANSWER);
	g->last_ns = now;
	for (;;) {
		b = NULL;
		spin_lock_bh(&g->lock);
		if (g->len && g->credit_ns >= GP_NS_PER_ANSWER) {
			b = g->queue[g->head];
			g->head = (g->head + 1) % GP_QUEUE;
			g->len--;
			g->credit_ns -= GP_NS_PER_ANSWER;
		}
		spin_unlock_bh(&g->lock);
		if (!b)
			break;
		if (ib_post_send_mad(b, NULL)) {
			rdma_destroy_ah(b->ah, RDMA_DESTROY_AH_SLEEPABLE);
			ib_free_send_mad(b);
		} else {
			atomic_inc(&g->served);
		}
	}
	if (!READ_ONCE(g->stop))
		schedule_delayed_work(&g->work, 1);
}

static void gp_responder_send(struct ib_mad_agent *agent, struct ib_mad_send_wc *wc)
{
	rdma_destroy_ah(wc->send_buf->ah, RDMA_DESTROY_AH_SLEEPABLE);
	ib_free_send_mad(wc->send_buf);
}

/* Queues the answer to @rwc's GET, or drops the GET when the queue is full. */
static void gp_responder_recv(struct ib_mad_agent *agent, struct ib_mad_send_buf *send_buf,
			      struct ib_mad_recv_wc *rwc)
{
	struct gp_responder *g = agent->context;
	const struct ib_mad *req = rwc->recv_buf.mad;
	struct ib_mad_send_buf *b;
	struct ib_ah *ah;
	bool full;

	if (send_buf || ib_response_mad(&req->mad_hdr))
		goto out;
	atomic_inc(&g->arrived);
	spin_lock_bh(&g->lock);
	full = g->len == GP_QUEUE || g->stop;
	spin_unlock_bh(&g->lock);
	if (full)
		goto drop;
	ah = ib_create_ah_from_wc(agent->qp->pd, rwc->wc, rwc->recv_buf.grh, agent->port_num);
	if (IS_ERR(ah))
		goto drop;
	b = ib_create_send_mad(agent, rwc->wc->src_qp, rwc->wc->pkey_index, 0, IB_MGMT_MAD_HDR,
			       IB_MGMT_MAD_DATA, GFP_KERNEL, IB_MGMT_BASE_VERSION);
	if (IS_ERR(b)) {
		rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
		goto drop;
	}
	memcpy(b->mad, req, sizeof(*req));
	((struct ib_mad *)b->mad)->mad_hdr.method = IB_MGMT_METHOD_GET_RESP;
	((struct ib_mad *)b->mad)->mad_hdr.status = 0;
	b->ah = ah;
	spin_lock_bh(&g->lock);
	full = g->len == GP_QUEUE || g->stop;
	if (!full) {
		g->queue[(g->head + g->len) % GP_QUEUE] = b;
		g->len++;
	}
	spin_unlock_bh(&g->lock);
	if (full) {
		rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
		ib_free_send_mad(b);
		goto drop;
	}
	goto out;
drop:
	atomic_inc(&g->dropped);
out:
	ib_free_recv_mad(rwc);
}

static int gp_responder_start(struct gp_responder *g, struct ib_device *dev)
{
	struct ib_mad_reg_req req = { .mgmt_class = BENCH_CLASS, .mgmt_class_version = 1 };

	memset(g, 0, sizeof(*g));
	spin_lock_init(&g->lock);
	INIT_DELAYED_WORK(&g->work, gp_serve);
	set_bit(IB_MGMT_METHOD_GET, req.method_mask);
	g->agent = ib_register_mad_agent(dev, BENCH_PORT, IB_QPT_GSI, &req, 0, gp_responder_send,
					 gp_responder_recv, g, 0);
	if (IS_ERR(g->agent))
		return PTR_ERR(g->agent);
	g->last_ns = ktime_get_ns();
	schedule_delayed_work(&g->work, 1);
	return 0;
}

static void gp_responder_stop(struct gp_responder *g)
{
	spin_lock_bh(&g->lock);
	g->stop = true;
	spin_unlock_bh(&g->lock);
	cancel_delayed_work_sync(&g->work);
	/* Each buffer holds a reference on the agent that its unregistration waits for. */
	spin_lock_bh(&g->lock);
	while (g->len) {
		struct ib_mad_send_buf *b = g->queue[g->head];

		g->head = (g->head + 1) % GP_QUEUE;
		g->len--;
		spin_unlock_bh(&g->lock);
		rdma_destroy_ah(b->ah, RDMA_DESTROY_AH_SLEEPABLE);
		ib_free_send_mad(b);
		spin_lock_bh(&g->lock);
	}
	spin_unlock_bh(&g->lock);
	ib_unregister_mad_agent(g->agent);
}

/* Counts how a GET of @run ended. */
static void gp_ended(struct gp_run *run, int status)
{
	if (status == IB_WC_SUCCESS)
		atomic_inc(&run->answered);
	else if (status == IB_WC_RESP_TIMEOUT_ERR)
		atomic_inc(&run->timed_out);
	else
		atomic_inc(&run->other);
}

static int gp_post(struct gp_run *run, int i);

/*
 * A GET of requester @i ended: a new one replaces it unless the run stops. A
 * handler that saw the run going on is counted in posting until its post
 * returned, so that the run's close waits for it before it unregisters.
 */
static void gp_replace(struct gp_run *run, int i)
{
	bool replaced;

	atomic_inc(&run->posting);
	/* Pairs with gp_close()'s: it sees this count, or this sees stopping. */
	smp_mb__after_atomic();
	replaced = !READ_ONCE(run->stopping) && !gp_post(run, i);
	if (atomic_dec_and_test(&run->posting))
		wake_up(&run->idle);
	if (!replaced)
		atomic_dec(&run->outstanding);
}

static void gp_c_send(struct ib_mad_agent *agent, struct ib_mad_send_wc *wc)
{
	struct gp_run *run = agent->context;
	int i = (long)wc->send_buf->context[0];

	gp_ended(run, wc->status);
	ib_free_send_mad(wc->send_buf);
	gp_replace(run, i);
}

static void gp_c_recv(struct ib_mad_agent *agent, struct ib_mad_send_buf *send_buf,
		      struct ib_mad_recv_wc *rwc)
{
	ib_free_recv_mad(rwc);
}

static void gp_r_send(struct rmad_agent *agent, struct rmad_send_wc *wc)
{
	struct gp_run *run = wc->context;
	int i = (long)wc->buf_context;

	gp_ended(run, wc->status);
	rmad_free_send_mad(wc->send_buf);
	gp_replace(run, i);
}

static void gp_r_recv(struct rmad_agent *agent, struct rmad_send_buf *send_buf,
		      const struct rmad_recv_wc *wc)
{
}

/* Creates and posts one GET of requester @i; 0 or an error (nothing outstanding then). */
static int gp_post(struct gp_run *run, int i)
{
	u32 lo = BENCH_LO_BASE + ((u32)atomic_inc_return(&run->lo) & 0x3fffffff);

	if (run->policy == GP_C) {
		struct ib_mad_send_buf *b;

		b = ib_create_send_mad(run->c[i], 1, 0, 0, IB_MGMT_MAD_HDR, IB_MGMT_MAD_DATA,
				       GFP_KERNEL, IB_MGMT_BASE_VERSION);
		if (IS_ERR(b))
			return PTR_ERR(b);
		bench_fill(b->mad, run->c[i]->hi_tid, lo, IB_MGMT_METHOD_GET);
		b->ah = run->ah[i];
		b->timeout_ms = GP_TIMEOUT_MS;
		b->retries = GP_RETRIES;
		b->context[0] = (void *)(long)i;
		if (ib_post_send_mad(b, NULL)) {
			ib_free_send_mad(b);
			return -EIO;
		}
	} else {
		struct rmad_send_buf *b;
		void *mad;

		b = rmad_create_send_mad(run->r[i], 1, 0, 0, IB_MGMT_MAD_HDR, IB_MGMT_MAD_DATA,
					 GFP_KERNEL, IB_MGMT_BASE_VERSION);
		if (IS_ERR(b))
			return PTR_ERR(b);
		mad = rmad_send_buf_mad(b);
		if (!mad || rmad_send_buf_set(b, &run->rah, GP_TIMEOUT_MS, GP_RETRIES,
					      (void *)(long)i) ||
		    (run->policy == GP_RMAD_BACKOFF &&
		     rmad_send_buf_set_retry(b, RMAD_RETRY_BACKOFF, GP_DEADLINE_MS))) {
			rmad_free_send_mad(b);
			return -EINVAL;
		}
		bench_fill(mad, rmad_agent_hi_tid(run->r[i]), lo, IB_MGMT_METHOD_GET);
		if (rmad_post_send_mad(b, NULL)) {
			rmad_free_send_mad(b);
			return -EIO;
		}
	}
	return 0;
}

/* Registers requester @i of @run; 0 or an error. */
static int gp_open(struct gp_run *run, struct ib_device *dev, int i)
{
	struct rdma_ah_attr attr = {};

	if (run->policy != GP_C) {
		run->r[i] = rmad_register_agent("rxe0", BENCH_PORT, RMAD_QPT_GSI, NULL, 0,
						gp_r_send, gp_r_recv, run, 0);
		if (IS_ERR(run->r[i])) {
			int ret = PTR_ERR(run->r[i]);

			run->r[i] = NULL;
			return ret;
		}
		return 0;
	}
	run->c[i] = ib_register_mad_agent(dev, BENCH_PORT, IB_QPT_GSI, NULL, 0, gp_c_send,
					  gp_c_recv, run, 0);
	if (IS_ERR(run->c[i])) {
		int ret = PTR_ERR(run->c[i]);

		run->c[i] = NULL;
		return ret;
	}
	attr.type = rdma_ah_find_type(dev, BENCH_PORT);
	rdma_ah_set_port_num(&attr, BENCH_PORT);
	rdma_ah_set_grh(&attr, &run->gid, 0, BENCH_GID_INDEX, 64, 0);
	if (attr.type == RDMA_AH_ATTR_TYPE_ROCE)
		memcpy(attr.roce.dmac, bench_mac, ETH_ALEN);
	run->ah[i] = rdma_create_ah(run->c[i]->qp->pd, &attr, RDMA_CREATE_AH_SLEEPABLE);
	if (IS_ERR(run->ah[i])) {
		int ret = PTR_ERR(run->ah[i]);

		run->ah[i] = NULL;
		return ret;
	}
	return 0;
}

/* Unregisters every requester of @run (which flushes what is outstanding). */
static void gp_close(struct gp_run *run)
{
	int i;

	WRITE_ONCE(run->stopping, true);
	/* A handler that saw the run going on has posted when this returns. */
	smp_mb();	/* Pairs with gp_replace()'s. */
	wait_event(run->idle, !atomic_read(&run->posting));
	for (i = 0; i < GP_REQUESTERS; i++) {
		if (run->c[i])
			ib_unregister_mad_agent(run->c[i]);
		if (run->ah[i])
			rdma_destroy_ah(run->ah[i], RDMA_DESTROY_AH_SLEEPABLE);
		if (run->r[i])
			rmad_unregister_agent(run->r[i]);
	}
}

/* What the counting window saw. */
struct gp_counts {
	u64 answered, timed_out, other, arrived, dropped, served;
};

static void gp_snap(struct gp_run *run, struct gp_responder *g, struct gp_counts *c)
{
	c->answered = atomic_read(&run->answered);
	c->timed_out = atomic_read(&run->timed_out);
	c->other = atomic_read(&run->other);
	c->arrived = atomic_read(&g->arrived);
	c->dropped = atomic_read(&g->dropped);
	c->served = atomic_read(&g->served);
}

/*
 * Runs policy @policy on @dev (rxe0, which the caller holds registered) for
 * @secs seconds after the warm-up; prints its figures.
 */
int rmad_bench_goodput(struct ib_device *dev, int policy, u32 secs, u32 rep)
{
	struct gp_counts a, b;
	struct gp_responder *g;
	struct gp_run *run;
	int i, j, ret;

	if (policy < GP_C || policy > GP_RMAD_BACKOFF || !secs || secs > 600)
		return -EINVAL;
	g = kzalloc_obj(*g);
	run = kzalloc_obj(*run);
	ret = -ENOMEM;
	if (!g || !run)
		goto out;
	run->policy = policy;
	init_waitqueue_head(&run->idle);
	ret = bench_addr(dev);
	if (ret)
		goto out;
	run->gid = bench_gid;
	run->rah.has_grh = 1;
	run->rah.sgid_index = BENCH_GID_INDEX;
	memcpy(run->rah.dgid, bench_gid.raw, sizeof(run->rah.dgid));
	ret = gp_responder_start(g, dev);
	if (ret)
		goto out;
	for (i = 0; i < GP_REQUESTERS && !ret; i++)
		ret = gp_open(run, dev, i);
	/* Every requester's window, counted before it is posted. */
	for (i = 0; i < GP_REQUESTERS && !ret; i++)
		for (j = 0; j < GP_WINDOW; j++) {
			atomic_inc(&run->outstanding);
			if (gp_post(run, i))
				atomic_dec(&run->outstanding);
		}
	if (!ret) {
		msleep(GP_WARMUP_MS);
		gp_snap(run, g, &a);
		msleep(secs * MSEC_PER_SEC);
		gp_snap(run, g, &b);
	}
	gp_close(run);
	gp_responder_stop(g);
	if (ret)
		goto out;
	/* The GETs that other statuses ended after the window: the close's flushes. */
	b.other = atomic_read(&run->other) - b.other;
	b.answered -= a.answered;
	b.timed_out -= a.timed_out;
	b.arrived -= a.arrived;
	pr_info("bench-goodput: {\"policy\": \"%s\", \"rep\": %u, \"secs\": %u, \"warmup_ms\": %u, \"rate\": %u, \"queue\": %u, \"outstanding\": %u, \"timeout_ms\": %u, \"retries\": %u, \"deadline_ms\": %u, \"answered\": %llu, \"timed_out\": %llu, \"arrived\": %llu, \"dropped\": %llu, \"served\": %llu, \"flushed_at_close\": %llu}\n",
		gp_names[policy], rep, secs, GP_WARMUP_MS, GP_RATE, GP_QUEUE,
		GP_REQUESTERS * GP_WINDOW,
		GP_TIMEOUT_MS, GP_RETRIES, policy == GP_RMAD_BACKOFF ? GP_DEADLINE_MS : 0,
		b.answered, b.timed_out, b.arrived, b.dropped - a.dropped, b.served - a.served,
		b.other);
out:
	kfree(run);
	kfree(g);
	return ret;
}
