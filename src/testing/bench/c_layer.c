// SPDX-License-Identifier: GPL-2.0
/*
 * The benchmark's operations on the C MAD layer (ib_register_mad_agent,
 * ib_post_send_mad, ib_modify_mad, ib_cancel_mad on ib_core's QP1), driven
 * by src/testing/bench/driver.c (test flavour only).
 */

#include <linux/err.h>
#include <linux/etherdevice.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "bench.h"
#include "impl.h"

struct c_impl {
	struct ib_device *dev;
	struct rmad_bench_round *r;
	/* The agent of the measured sends and of the gate (rounds.c, round B). */
	struct ib_mad_agent *agent;
	struct ib_ah *ah, *ah_silent;
	/* Where the silent sends are created, if not on @agent (bench_ops.share). */
	struct ib_mad_agent *send_agent;
	struct ib_ah *send_ah;
	u32 n, nreq, cap_reqs;
	/* The low word of the next TID of a buffer other than a silent send's. */
	u32 lo;
	/* The requests until posted (then NULL: the send handler frees them). */
	struct ib_mad_send_buf **bufs, **reqs, *gate_buf;
	u8 *posted;		/* per silent send */
};

static void c_send_handler(struct ib_mad_agent *agent, struct ib_mad_send_wc *wc)
{
	int kind = (long)wc->send_buf->context[0];

	ib_free_send_mad(wc->send_buf);
	rmad_bench_event(agent->context, kind, wc->status);
}

static void c_recv_handler(struct ib_mad_agent *agent, struct ib_mad_send_buf *send_buf,
			   struct ib_mad_recv_wc *rwc)
{
	ib_free_recv_mad(rwc);
	if (send_buf)
		rmad_bench_event(agent->context, KIND_RESP, 0);
}

static struct ib_ah *c_ah(struct ib_mad_agent *agent, const union ib_gid *dgid, u8 sgid_index)
{
	struct rdma_ah_attr attr = {};
	union ib_gid g = *dgid;

	attr.type = rdma_ah_find_type(agent->device, BENCH_PORT);
	rdma_ah_set_port_num(&attr, BENCH_PORT);
	rdma_ah_set_grh(&attr, &g, 0, sgid_index, 64, 0);
	if (attr.type == RDMA_AH_ATTR_TYPE_ROCE)
		memcpy(attr.roce.dmac, bench_mac, ETH_ALEN);
	return rdma_create_ah(agent->qp->pd, &attr, RDMA_CREATE_AH_SLEEPABLE);
}

static struct ib_mad_send_buf *c_buf(struct ib_mad_agent *agent, struct ib_ah *ah, u32 lo,
				     u8 method, int timeout_ms, long kind)
{
	struct ib_mad_send_buf *b;

	b = ib_create_send_mad(agent, 1, 0, 0, IB_MGMT_MAD_HDR, IB_MGMT_MAD_DATA, GFP_KERNEL,
			       IB_MGMT_BASE_VERSION);
	if (IS_ERR(b))
		return NULL;
	bench_fill(b->mad, agent->hi_tid, lo, method);
	b->ah = ah;
	b->timeout_ms = timeout_ms;
	b->retries = 0;
	b->context[0] = (void *)kind;
	return b;
}

static void c_close(void *p);

static int c_open(void *p, struct rmad_bench_round *r, u32 n)
{
	struct c_impl *c = p;

	memset(c, 0, sizeof(*c));
	c->dev = bench_device();
	c->r = r;
	c->n = n;
	c->lo = BENCH_LO_BASE;
	if (!c->dev)
		return -ENODEV;
	c->bufs = kvcalloc(n, sizeof(*c->bufs), GFP_KERNEL);
	c->posted = kvcalloc(n, 1, GFP_KERNEL);
	if (!c->bufs || !c->posted)
		goto fail;
	c->agent = ib_register_mad_agent(c->dev, BENCH_PORT, IB_QPT_GSI, NULL, 0, c_send_handler,
					 c_recv_handler, r, 0);
	if (IS_ERR(c->agent)) {
		c->agent = NULL;
		goto fail;
	}
	c->ah = c_ah(c->agent, &bench_gid, BENCH_GID_INDEX);
	if (IS_ERR(c->ah)) {
		c->ah = NULL;
		goto fail;
	}
	c->ah_silent = c_ah(c->agent, &bench_silent_gid, BENCH_SILENT_GID_INDEX);
	if (IS_ERR(c->ah_silent)) {
		c->ah_silent = NULL;
		goto fail;
	}
	return 0;
fail:
	c_close(c);
	return -ENOMEM;
}

static int c_create(void *p, int timeout_ms)
{
	struct c_impl *c = p;
	u32 i;

	/* Those of the last create were delivered, and their handler freed them. */
	for (i = 0; i < c->n; i++) {
		c->posted[i] = 0;
		c->bufs[i] = c_buf(c->send_agent ?: c->agent, c->send_ah ?: c->ah_silent, i,
				   IB_MGMT_METHOD_SEND, timeout_ms, KIND_SILENT);
		if (!c->bufs[i])
			return -ENOMEM;
	}
	return 0;
}

static int c_post(void *p, u32 i)
{
	struct c_impl *c = p;
	int ret = ib_post_send_mad(c->bufs[i], NULL);

	if (!ret)
		c->posted[i] = 1;
	return ret;
}

static int c_modify(void *p, u32 i, int ms)
{
	struct c_impl *c = p;

	return ib_modify_mad(c->bufs[i], ms);
}

static int c_cancel(void *p, u32 i)
{
	struct c_impl *c = p;

	ib_cancel_mad(c->bufs[i]);
	return 0;
}

/* Frees the requests not posted. (Those posted end answered, or flushed by the unregistration.) */
static void c_free_reqs(struct c_impl *c)
{
	u32 j;

	for (j = 0; c->reqs && j < c->nreq; j++)
		if (c->reqs[j]) {
			ib_free_send_mad(c->reqs[j]);
			c->reqs[j] = NULL;
		}
	c->nreq = 0;
}

static int c_reqs(void *p, u32 count)
{
	struct c_impl *c = p;
	u32 j;

	c_free_reqs(c);
	if (count > c->cap_reqs) {
		kvfree(c->reqs);
		c->cap_reqs = 0;
		c->reqs = kvcalloc(count, sizeof(*c->reqs), GFP_KERNEL);
		if (!c->reqs)
			return -ENOMEM;
		c->cap_reqs = count;
	}
	for (j = 0; j < count; j++) {
		c->reqs[j] = c_buf(c->agent, c->ah, c->lo++, IB_MGMT_METHOD_GET, BENCH_LONG_MS,
				   KIND_REQ);
		c->nreq = j + 1;
		if (!c->reqs[j])
			return -ENOMEM;
	}
	return 0;
}

static int c_post_req(void *p, u32 j)
{
	struct c_impl *c = p;
	int ret;

	if (j >= c->nreq || !c->reqs[j])
		return -EINVAL;
	ret = ib_post_send_mad(c->reqs[j], NULL);
	if (!ret)
		c->reqs[j] = NULL;
	return ret;
}

/* Posts @b, or frees it if the post fails. */
static int c_post_new(struct ib_mad_send_buf *b)
{
	int ret;

	if (!b)
		return -ENOMEM;
	ret = ib_post_send_mad(b, NULL);
	if (ret)
		ib_free_send_mad(b);
	return ret;
}

static int c_post_marker(void *p)
{
	struct c_impl *c = p;

	return c_post_new(c_buf(c->agent, c->ah_silent, c->lo++, IB_MGMT_METHOD_SEND, 0,
				KIND_MARKER));
}

/* The C layer's send completions are in order: a marker posted last completes last. */
static int c_wait_sent(void *p)
{
	struct c_impl *c = p;
	struct bench_ctr *m = &c->r->marker;
	int ret;

	bench_ctr_expect_more(m, 1);
	ret = c_post_marker(p);
	return ret ?: bench_ctr_wait(m);
}

static int c_post_gate(void *p)
{
	struct c_impl *c = p;
	struct ib_mad_send_buf *b;
	int ret;

	b = c_buf(c->agent, c->ah_silent, c->lo++, IB_MGMT_METHOD_SEND, BENCH_LONG_MS,
		  KIND_GATE);
	ret = c_post_new(b);
	if (!ret)
		c->gate_buf = b;
	return ret;
}

static int c_cancel_gate(void *p)
{
	struct c_impl *c = p;

	if (!c->gate_buf)
		return -EINVAL;
	ib_cancel_mad(c->gate_buf);
	c->gate_buf = NULL;
	return 0;
}

static int c_create_free(void *p)
{
	struct c_impl *c = p;
	struct ib_mad_send_buf *b;

	b = ib_create_send_mad(c->agent, 1, 0, 0, IB_MGMT_MAD_HDR, IB_MGMT_MAD_DATA, GFP_KERNEL,
			       IB_MGMT_BASE_VERSION);
	if (IS_ERR(b))
		return PTR_ERR(b);
	ib_free_send_mad(b);
	return 0;
}

static int c_txn(void *p)
{
	struct c_impl *c = p;

	return c_post_new(c_buf(c->agent, c->ah, c->lo++, IB_MGMT_METHOD_GET, BENCH_TXN_MS,
				KIND_TXN));
}

static void c_unregister(void *p)
{
	struct c_impl *c = p;
	u32 i;

	/* Unposted buffers hold a reference on their agent: free them first. */
	if (c->bufs)
		for (i = 0; i < c->n; i++)
			if (c->bufs[i] && !c->posted[i]) {
				ib_free_send_mad(c->bufs[i]);
				c->bufs[i] = NULL;
			}
	c_free_reqs(c);
	/* A posted gate buffer goes with the unregistration's flush. */
	c->gate_buf = NULL;
	if (c->agent)
		ib_unregister_mad_agent(c->agent);
	c->agent = NULL;
}

static void c_close(void *p)
{
	struct c_impl *c = p;

	c_unregister(p);
	if (c->ah)
		rdma_destroy_ah(c->ah, RDMA_DESTROY_AH_SLEEPABLE);
	if (c->ah_silent)
		rdma_destroy_ah(c->ah_silent, RDMA_DESTROY_AH_SLEEPABLE);
	kvfree(c->bufs);
	kvfree(c->posted);
	kvfree(c->reqs);
	memset(c, 0, sizeof(*c));
}

/* The owner's address handle too: it outlives the sends (the owner closes last). */
static void c_share(void *p, void *owner)
{
	struct c_impl *c = p, *o = owner;

	c->send_agent = o->agent;
	c->send_ah = o->ah_silent;
}

const struct bench_ops bench_c_ops = {
	.name = "c",
	.open = c_open,
	.create = c_create,
	.post = c_post,
	.wait_sent = c_wait_sent,
	.modify = c_modify,
	.cancel = c_cancel,
	.reqs = c_reqs,
	.post_req = c_post_req,
	.post_marker = c_post_marker,
	.post_gate = c_post_gate,
	.cancel_gate = c_cancel_gate,
	.create_free = c_create_free,
	.txn = c_txn,
	.unregister = c_unregister,
	.close = c_close,
	.share = c_share,
};

const size_t bench_c_size = sizeof(struct c_impl);
