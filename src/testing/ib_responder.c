// SPDX-License-Identifier: GPL-2.0
/*
 * A responder in ib_core's own MAD layer (test flavour only), not part of
 * rmad's data path: it answers GET requests of one class on QP1 with a
 * GET_RESP of status 0, the way any ib_core client would. Used by the
 * rmad_rxe suite, the demonstration and the two-node checks
 * (src/testing/ib_responder.rs).
 */

#include <linux/delay.h>
#include <linux/err.h>
#include <linux/etherdevice.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/timekeeping.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "ib_responder.h"

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
void *rmad_test_responder_start(struct ib_device *dev, u32 port, u8 mgmt_class)
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

void rmad_test_responder_stop(void *responder)
{
	if (responder)
		ib_unregister_mad_agent(responder);
}
