// SPDX-License-Identifier: GPL-2.0
/*
 * The benchmark's operations on rmad's exported C API (include/rmad.h),
 * called as a client module would, driven by src/testing/bench/driver.c
 * (test flavour only).
 */

#include <linux/err.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <rdma/ib_mad.h>

#include "../../../include/rmad.h"
#include "bench.h"
#include "impl.h"

struct capi_impl {
	struct rmad_bench_round *r;
	/* The agent of the measured sends and of the gate (rounds.c, round B). */
	struct rmad_agent *agent;
	/* Where the silent sends are created, if not on @agent (bench_ops.share). */
	struct rmad_agent *send_agent;
	struct rmad_ah ah, ah_silent;
	u32 n, nreq, cap_reqs;
	/* The low word of the next TID of a buffer other than a silent send's. */
	u32 lo;
	/* How many sends of the agent the device had taken before the last create. */
	u64 sent_before;
	/*
	 * Handles: stale once a send handler freed their buffer, which every
	 * rmad_* call then refuses with -EINVAL (include/rmad.h).
	 */
	struct rmad_send_buf **bufs, **reqs, *gate_buf;
	u8 *posted, *req_posted;
};

static void capi_send_handler(struct rmad_agent *agent, struct rmad_send_wc *wc)
{
	int kind = (long)wc->buf_context;

	rmad_free_send_mad(wc->send_buf);
	rmad_bench_event(wc->context, kind, wc->status);
}

static void capi_recv_handler(struct rmad_agent *agent, struct rmad_send_buf *send_buf,
			      const struct rmad_recv_wc *wc)
{
	if (send_buf)
		rmad_bench_event(wc->context, KIND_RESP, 0);
}

static struct rmad_send_buf *capi_buf(struct rmad_agent *agent, const struct rmad_ah *ah, u32 lo,
				      u8 method, int timeout_ms, long kind)
{
	struct rmad_send_buf *b;
	void *mad;

	b = rmad_create_send_mad(agent, 1, 0, 0, IB_MGMT_MAD_HDR, IB_MGMT_MAD_DATA, GFP_KERNEL,
				 IB_MGMT_BASE_VERSION);
	if (IS_ERR(b))
		return NULL;
	mad = rmad_send_buf_mad(b);
	if (!mad || rmad_send_buf_set(b, ah, timeout_ms, 0, (void *)kind)) {
		rmad_free_send_mad(b);
		return NULL;
	}
	bench_fill(mad, rmad_agent_hi_tid(agent), lo, method);
	return b;
}

static void capi_close(void *p);

static int capi_open(void *p, struct rmad_bench_round *r, u32 n)
{
	struct capi_impl *c = p;

	memset(c, 0, sizeof(*c));
	c->r = r;
	c->n = n;
	c->lo = BENCH_LO_BASE;
	c->ah.has_grh = 1;
	c->ah.sgid_index = BENCH_GID_INDEX;
	memcpy(c->ah.dgid, bench_gid.raw, sizeof(c->ah.dgid));
	c->ah_silent.has_grh = 1;
	c->ah_silent.sgid_index = BENCH_SILENT_GID_INDEX;
	memcpy(c->ah_silent.dgid, bench_silent_gid.raw, sizeof(c->ah_silent.dgid));
	c->bufs = kvcalloc(n, sizeof(*c->bufs), GFP_KERNEL);
	c->posted = kvcalloc(n, 1, GFP_KERNEL);
	if (!c->bufs || !c->posted)
		goto fail;
	c->agent = rmad_register_agent("rxe0", BENCH_PORT, RMAD_QPT_GSI, NULL, 0,
				       capi_send_handler, capi_recv_handler, r, 0);
	if (IS_ERR(c->agent)) {
		c->agent = NULL;
		goto fail;
	}
	return 0;
fail:
	capi_close(c);
	return -ENOMEM;
}

static int capi_create(void *p, int timeout_ms)
{
	struct capi_impl *c = p;
	u32 i;

	/* Those of the last create were delivered, and their handler freed them. */
	c->sent_before = rmad_bench_rust_transmitted(rmad_agent_hi_tid(c->agent));
	for (i = 0; i < c->n; i++) {
		c->posted[i] = 0;
		c->bufs[i] = capi_buf(c->send_agent ?: c->agent, &c->ah_silent, i,
				      IB_MGMT_METHOD_SEND, timeout_ms, KIND_SILENT);
		if (!c->bufs[i])
			return -ENOMEM;
	}
	return 0;
}

static int capi_post(void *p, u32 i)
{
	struct capi_impl *c = p;
	int ret = rmad_post_send_mad(c->bufs[i], NULL);

	if (!ret)
		c->posted[i] = 1;
	return ret;
}

/* rmad counts what the device took (its markers may wait behind the held queue). */
static int capi_wait_sent(void *p)
{
	struct capi_impl *c = p;

	return rmad_bench_rust_wait_sent(rmad_agent_hi_tid(c->agent), c->sent_before + c->n);
}

static int capi_modify(void *p, u32 i, int ms)
{
	struct capi_impl *c = p;

	return rmad_modify_mad(c->bufs[i], ms);
}

static int capi_cancel(void *p, u32 i)
{
	struct capi_impl *c = p;

	return rmad_cancel_mad(c->bufs[i]);
}

/*
 * Cancels the requests posted (-EINVAL for those whose handler ran already)
 * and frees the others.
 */
static void capi_drop_reqs(struct capi_impl *c)
{
	u32 j;

	for (j = 0; j < c->nreq; j++) {
		if (c->req_posted[j])
			rmad_cancel_mad(c->reqs[j]);
		else if (c->reqs[j])
			rmad_free_send_mad(c->reqs[j]);
		c->reqs[j] = NULL;
		c->req_posted[j] = 0;
	}
	c->nreq = 0;
}

static int capi_reqs(void *p, u32 count)
{
	struct capi_impl *c = p;
	u32 j;

	capi_drop_reqs(c);
	if (count > c->cap_reqs) {
		kvfree(c->reqs);
		kvfree(c->req_posted);
		c->cap_reqs = 0;
		c->reqs = kvcalloc(count, sizeof(*c->reqs), GFP_KERNEL);
		c->req_posted = kvcalloc(count, 1, GFP_KERNEL);
		if (!c->reqs || !c->req_posted)
			return -ENOMEM;
		c->cap_reqs = count;
	}
	for (j = 0; j < count; j++) {
		c->reqs[j] = capi_buf(c->agent, &c->ah, c->lo++, IB_MGMT_METHOD_GET, BENCH_LONG_MS,
				      KIND_REQ);
		c->nreq = j + 1;
		if (!c->reqs[j])
			return -ENOMEM;
	}
	return 0;
}

static int capi_post_req(void *p, u32 j)
{
	struct capi_impl *c = p;
	int ret;

	if (j >= c->nreq)
		return -EINVAL;
	ret = rmad_post_send_mad(c->reqs[j], NULL);
	if (!ret)
		c->req_posted[j] = 1;
	return ret;
}

/* Posts @b, or frees it if the post fails. */
static int capi_post_new(struct rmad_send_buf *b)
{
	int ret;

	if (!b)
		return -ENOMEM;
	ret = rmad_post_send_mad(b, NULL);
	if (ret)
		rmad_free_send_mad(b);
	return ret;
}

static int capi_post_marker(void *p)
{
	struct capi_impl *c = p;

	return capi_post_new(capi_buf(c->agent, &c->ah_silent, c->lo++, IB_MGMT_METHOD_SEND, 0,
				      KIND_MARKER));
}

static int capi_post_gate(void *p)
{
	struct capi_impl *c = p;
	struct rmad_send_buf *b;
	int ret;

	b = capi_buf(c->agent, &c->ah_silent, c->lo++, IB_MGMT_METHOD_SEND, BENCH_LONG_MS,
		     KIND_GATE);
	ret = capi_post_new(b);
	if (!ret)
		c->gate_buf = b;
	return ret;
}

static int capi_cancel_gate(void *p)
{
	struct capi_impl *c = p;

	return rmad_cancel_mad(c->gate_buf);
}

static int capi_create_free(void *p)
{
	struct capi_impl *c = p;
	struct rmad_send_buf *b;

	b = rmad_create_send_mad(c->agent, 1, 0, 0, IB_MGMT_MAD_HDR, IB_MGMT_MAD_DATA, GFP_KERNEL,
				 IB_MGMT_BASE_VERSION);
	if (IS_ERR(b))
		return PTR_ERR(b);
	return rmad_free_send_mad(b);
}

static int capi_txn(void *p)
{
	struct capi_impl *c = p;

	return capi_post_new(capi_buf(c->agent, &c->ah, c->lo++, IB_MGMT_METHOD_GET,
				      BENCH_TXN_MS, KIND_TXN));
}

static void capi_unregister(void *p)
{
	struct capi_impl *c = p;
	u32 i;

	/* Unposted buffers: an unregistration waits for every buffer of its agent. */
	if (c->bufs)
		for (i = 0; i < c->n; i++)
			if (c->bufs[i] && !c->posted[i]) {
				rmad_free_send_mad(c->bufs[i]);
				c->bufs[i] = NULL;
			}
	if (c->reqs)
		for (i = 0; i < c->nreq; i++)
			if (c->reqs[i] && !c->req_posted[i]) {
				rmad_free_send_mad(c->reqs[i]);
				c->reqs[i] = NULL;
			}
	/* A posted gate goes with the unregistration's flush, or its handler freed it. */
	c->gate_buf = NULL;
	if (c->agent)
		rmad_unregister_agent(c->agent);
	c->agent = NULL;
}

static void capi_close(void *p)
{
	struct capi_impl *c = p;
	u32 i;

	/*
	 * Cancel what is outstanding and let it be delivered first, so that
	 * the unregistration finds nothing to flush (its batched walk once
	 * yielded with the agent's lock held). Handles of buffers already
	 * freed just get -EINVAL.
	 */
	if (c->bufs)
		for (i = 0; i < c->n; i++)
			if (c->bufs[i] && c->posted[i])
				rmad_cancel_mad(c->bufs[i]);
	if (c->reqs)
		for (i = 0; i < c->nreq; i++)
			if (c->reqs[i] && c->req_posted[i])
				rmad_cancel_mad(c->reqs[i]);
	if (c->gate_buf)
		rmad_cancel_mad(c->gate_buf);
	if (c->agent)
		rmad_bench_rust_wait_idle(rmad_agent_hi_tid(c->agent));
	capi_unregister(p);
	kvfree(c->bufs);
	kvfree(c->posted);
	kvfree(c->reqs);
	kvfree(c->req_posted);
	memset(c, 0, sizeof(*c));
}

static void capi_share(void *p, void *owner)
{
	struct capi_impl *c = p, *o = owner;

	c->send_agent = o->agent;
}

const struct bench_ops bench_capi_ops = {
	.name = "rmad-capi",
	.open = capi_open,
	.create = capi_create,
	.post = capi_post,
	.wait_sent = capi_wait_sent,
	.modify = capi_modify,
	.cancel = capi_cancel,
	.reqs = capi_reqs,
	.post_req = capi_post_req,
	.post_marker = capi_post_marker,
	.post_gate = capi_post_gate,
	.cancel_gate = capi_cancel_gate,
	.create_free = capi_create_free,
	.txn = capi_txn,
	.unregister = capi_unregister,
	.close = capi_close,
	.share = capi_share,
};

const size_t bench_capi_size = sizeof(struct capi_impl);
