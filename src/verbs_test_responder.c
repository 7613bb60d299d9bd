// SPDX-License-Identifier: GPL-2.0
/*
 * Test and benchmark scaffolding that drives ib_core's own MAD layer, not part
 * of rmad's data path: a responder registered in ib_core for the rmad_rxe
 * suite (it answers GET requests of one class on QP1 with a GET_RESP of status
 * 0, the way any ib_core client would), and the C side of `make bench`, which
 * times ib_cancel_mad on many outstanding sends.
 */

#include <linux/delay.h>
#include <linux/err.h>
#include <linux/etherdevice.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/timekeeping.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "verbs_shim.h"

static void rmad_test_send_handler(struct ib_mad_agent *agent, struct ib_mad_send_wc *wc)
{
	rdma_destroy_ah(wc->send_buf->ah, RDMA_DESTROY_AH_SLEEPABLE);
	ib_free_send_mad(wc->send_buf);
}

static void rmad_test_recv_handler(struct ib_mad_agent *agent, struct ib_mad_send_buf *send_buf,
				   struct ib_mad_recv_wc *rwc)
{
	const struct ib_mad *req = rwc->recv_buf.mad;
	struct ib_mad_send_buf *b;
	struct ib_mad *resp;
	struct ib_ah *ah;

	if (send_buf || ib_response_mad(&req->mad_hdr))
		goto out;
	ah = ib_create_ah_from_wc(agent->qp->pd, rwc->wc, rwc->recv_buf.grh, agent->port_num);
	if (IS_ERR(ah))
		goto out;
	b = ib_create_send_mad(agent, rwc->wc->src_qp, rwc->wc->pkey_index, 0, IB_MGMT_MAD_HDR,
			       IB_MGMT_MAD_DATA, GFP_KERNEL, IB_MGMT_BASE_VERSION);
	if (IS_ERR(b)) {
		rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
		goto out;
	}
	resp = b->mad;
	memcpy(resp, req, sizeof(*resp));
	resp->mad_hdr.method = IB_MGMT_METHOD_GET_RESP;
	resp->mad_hdr.status = 0;
	b->ah = ah;
	if (ib_post_send_mad(b, NULL)) {
		rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
		ib_free_send_mad(b);
	}
out:
	ib_free_recv_mad(rwc);
}

/* Registers the responder for GETs of @mgmt_class (version 1) on QP1 of @dev/@port. */
void *rmad_shim_test_responder_start(struct ib_device *dev, u32 port, u8 mgmt_class)
{
	struct ib_mad_reg_req req = {
		.mgmt_class = mgmt_class,
		.mgmt_class_version = 1,
	};
	struct ib_mad_agent *agent;

	set_bit(IB_MGMT_METHOD_GET, req.method_mask);
	agent = ib_register_mad_agent(dev, port, IB_QPT_GSI, &req, 0, rmad_test_send_handler,
				      rmad_test_recv_handler, NULL, 0);
	return IS_ERR(agent) ? NULL : agent;
}

void rmad_shim_test_responder_stop(void *responder)
{
	if (responder)
		ib_unregister_mad_agent(responder);
}

/* Benchmark support: the C MAD layer's ib_cancel_mad on @n outstanding sends. */

struct rmad_bench_ctx {
	atomic_t done;
};

static void rmad_bench_send_handler(struct ib_mad_agent *agent, struct ib_mad_send_wc *wc)
{
	struct rmad_bench_ctx *ctx = agent->context;

	rdma_destroy_ah(wc->send_buf->ah, RDMA_DESTROY_AH_SLEEPABLE);
	ib_free_send_mad(wc->send_buf);
	atomic_inc(&ctx->done);
}

/*
 * Posts @n SEND MADs (which nobody answers) through ib_core's QP1 of @dev/@port
 * to the port's own GID @dgid (MAC @dmac), waits until they wait for
 * responses, then cancels them in the order @order (a permutation of 0..n-1)
 * and returns the nanoseconds the cancels took in all, or 0 on failure.
 */
u64 rmad_shim_bench_ib_cancel(struct ib_device *dev, u32 port, u32 n, const u32 *order,
			      const u8 *dgid, const u8 *dmac)
{
	struct rmad_bench_ctx ctx = { .done = ATOMIC_INIT(0) };
	struct ib_mad_send_buf **bufs;
	struct ib_mad_agent *agent;
	u64 start, total = 0;
	u32 i, posted = 0;

	bufs = kvcalloc(n, sizeof(*bufs), GFP_KERNEL);
	if (!bufs)
		return 0;
	agent = ib_register_mad_agent(dev, port, IB_QPT_GSI, NULL, 0, rmad_bench_send_handler,
				      NULL, &ctx, 0);
	if (IS_ERR(agent))
		goto out_free;
	for (i = 0; i < n; i++) {
		struct rdma_ah_attr attr = {};
		struct ib_mad_hdr *hdr;
		union ib_gid g;
		struct ib_ah *ah;

		attr.type = rdma_ah_find_type(dev, port);
		rdma_ah_set_port_num(&attr, port);
		memcpy(g.raw, dgid, 16);
		rdma_ah_set_grh(&attr, &g, 0, 1, 64, 0);
		if (attr.type == RDMA_AH_ATTR_TYPE_ROCE)
			memcpy(attr.roce.dmac, dmac, ETH_ALEN);
		ah = rdma_create_ah(agent->qp->pd, &attr, RDMA_CREATE_AH_SLEEPABLE);
		if (IS_ERR(ah))
			break;
		bufs[i] = ib_create_send_mad(agent, 1, 0, 0, IB_MGMT_MAD_HDR, IB_MGMT_MAD_DATA,
					     GFP_KERNEL, IB_MGMT_BASE_VERSION);
		if (IS_ERR(bufs[i])) {
			rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
			bufs[i] = NULL;
			break;
		}
		hdr = bufs[i]->mad;
		hdr->base_version = IB_MGMT_BASE_VERSION;
		hdr->mgmt_class = IB_MGMT_CLASS_PERF_MGMT;
		hdr->class_version = 1;
		hdr->method = IB_MGMT_METHOD_SEND;
		hdr->tid = cpu_to_be64(((u64)agent->hi_tid << 32) | i);
		bufs[i]->ah = ah;
		bufs[i]->timeout_ms = 600000;
		if (ib_post_send_mad(bufs[i], NULL)) {
			rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
			ib_free_send_mad(bufs[i]);
			bufs[i] = NULL;
			break;
		}
		posted++;
	}
	/* Let every send complete its transmission and wait for a response. */
	msleep(2000);
	if (posted == n) {
		start = ktime_get_ns();
		for (i = 0; i < n; i++)
			ib_cancel_mad(bufs[order[i]]);
		total = ktime_get_ns() - start;
	} else {
		for (i = 0; i < posted; i++)
			ib_cancel_mad(bufs[i]);
	}
	for (i = 0; i < 30000 && atomic_read(&ctx.done) < posted; i++)
		msleep(1);
	ib_unregister_mad_agent(agent);
out_free:
	kvfree(bufs);
	return total;
}
