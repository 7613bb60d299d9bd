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
	struct ib_mad_agent *agent, *gate_agent;
	struct ib_ah *ah, *ah_silent, *gate_ah;
	/* Where the silent sends are created, if not on @agent (bench_ops.share). */
	struct ib_mad_agent *send_agent;
	struct ib_ah *send_ah;
	u32 n, nreq, markers_posted[2];
	struct ib_mad_send_buf **bufs, **reqs, *markers[BENCH_MARKERS], *gate_buf;
	u8 *posted;		/* per silent send */
	bool gate_posted;
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

static int c_open(void *p, struct rmad_bench_round *r, u32 n, u32 nreq)
{
	struct c_impl *c = p;
	u32 j;

	memset(c, 0, sizeof(*c));
	c->dev = bench_device();
	c->r = r;
	c->n = n;
	c->nreq = nreq;
	if (!c->dev)
		return -ENODEV;
	c->bufs = kvcalloc(n, sizeof(*c->bufs), GFP_KERNEL);
	c->posted = kvcalloc(n, 1, GFP_KERNEL);
	c->reqs = kvcalloc(nreq ? nreq : 1, sizeof(*c->reqs), GFP_KERNEL);
	if (!c->bufs || !c->posted || !c->reqs)
		goto fail;
	c->agent = ib_register_mad_agent(c->dev, BENCH_PORT, IB_QPT_GSI, NULL, 0, c_send_handler,
					 c_recv_handler, r, 0);
	if (IS_ERR(c->agent)) {
		c->agent = NULL;
		goto fail;
	}
	c->gate_agent = ib_register_mad_agent(c->dev, BENCH_PORT, IB_QPT_GSI, NULL, 0,
					      c_send_handler, c_recv_handler, r, 0);
	if (IS_ERR(c->gate_agent)) {
		c->gate_agent = NULL;
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
	c->gate_ah = c_ah(c->gate_agent, &bench_silent_gid, BENCH_SILENT_GID_INDEX);
	if (IS_ERR(c->gate_ah)) {
		c->gate_ah = NULL;
		goto fail;
	}
	for (j = 0; j < nreq; j++) {
		c->reqs[j] = c_buf(c->agent, c->ah, n + j, IB_MGMT_METHOD_GET, BENCH_LONG_MS,
				   KIND_REQ);
		if (!c->reqs[j])
			goto fail;
	}
	for (j = 0; j < BENCH_MARKERS; j++) {
		c->markers[j] = c_buf(j % 2 ? c->gate_agent : c->agent,
				      j % 2 ? c->gate_ah : c->ah_silent, n + nreq + j,
				      IB_MGMT_METHOD_SEND, 0, KIND_MARKER);
		if (!c->markers[j])
			goto fail;
	}
	c->gate_buf = c_buf(c->gate_agent, c->gate_ah, 0, IB_MGMT_METHOD_SEND, BENCH_LONG_MS,
			    KIND_GATE);
	if (!c->gate_buf)
		goto fail;
	return 0;
fail:
	c_close(c);
	return -ENOMEM;
}

static int c_create(void *p, int timeout_ms)
{
	struct c_impl *c = p;
	u32 i;

	for (i = 0; i < c->n; i++) {
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

static int c_post_req(void *p, u32 j)
{
	struct c_impl *c = p;
	int ret = ib_post_send_mad(c->reqs[j], NULL);

	if (!ret)
		c->reqs[j] = NULL;
	return ret;
}

static int c_post_marker(void *p, int gate)
{
	struct c_impl *c = p;
	u32 k = bench_marker_index(c->markers_posted, gate);
	int ret;

	if (k >= BENCH_MARKERS || !c->markers[k])
		return -ENOSPC;
	ret = ib_post_send_mad(c->markers[k], NULL);
	if (!ret)
		c->markers[k] = NULL;
	return ret;
}

/* The C layer's send completions are in order: a marker posted last completes last. */
static int c_wait_sent(void *p)
{
	struct c_impl *c = p;
	struct bench_ctr *m = &c->r->marker;
	int ret;

	bench_ctr_expect(m, atomic_read(&m->hits) + 1);
	ret = c_post_marker(p, 0);
	return ret ?: bench_ctr_wait(m);
}

static int c_post_gate(void *p)
{
	struct c_impl *c = p;
	int ret = ib_post_send_mad(c->gate_buf, NULL);

	if (!ret)
		c->gate_posted = true;
	return ret;
}

static int c_cancel_gate(void *p)
{
	struct c_impl *c = p;

	ib_cancel_mad(c->gate_buf);
	c->gate_buf = NULL;
	return 0;
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
	if (c->reqs)
		for (i = 0; i < c->nreq; i++)
			if (c->reqs[i]) {
				ib_free_send_mad(c->reqs[i]);
				c->reqs[i] = NULL;
			}
	for (i = 0; i < BENCH_MARKERS; i++)
		if (c->markers[i]) {
			ib_free_send_mad(c->markers[i]);
			c->markers[i] = NULL;
		}
	/* A posted gate buffer goes with the unregistration's flush. */
	if (c->gate_buf && !c->gate_posted)
		ib_free_send_mad(c->gate_buf);
	c->gate_buf = NULL;
	if (c->agent)
		ib_unregister_mad_agent(c->agent);
	if (c->gate_agent)
		ib_unregister_mad_agent(c->gate_agent);
	c->agent = NULL;
	c->gate_agent = NULL;
}

static void c_close(void *p)
{
	struct c_impl *c = p;

	c_unregister(p);
	if (c->ah)
		rdma_destroy_ah(c->ah, RDMA_DESTROY_AH_SLEEPABLE);
	if (c->ah_silent)
		rdma_destroy_ah(c->ah_silent, RDMA_DESTROY_AH_SLEEPABLE);
	if (c->gate_ah)
		rdma_destroy_ah(c->gate_ah, RDMA_DESTROY_AH_SLEEPABLE);
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
	.post_req = c_post_req,
	.post_marker = c_post_marker,
	.post_gate = c_post_gate,
	.cancel_gate = c_cancel_gate,
	.unregister = c_unregister,
	.close = c_close,
	.share = c_share,
};

const size_t bench_c_size = sizeof(struct c_impl);
