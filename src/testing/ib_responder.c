// SPDX-License-Identifier: GPL-2.0
/*
 * A responder in ib_core's own MAD layer (test flavour only), not part of
 * rmad's data path: an agent on QP1 that answers GET requests of one class
 * with a GET_RESP of status 0, the way any ib_core client would. It answers
 * at once, or, while held, keeps up to hold_max answers until released (the
 * benchmark's matching round). With rmad_test_responder_segments(), it answers
 * with that many GET_RESPs carrying RMPP DATA headers instead, as a user-RMPP
 * responder would send a segmented answer without waiting for ACKs. Started
 * with rmad_test_responder_start_rmpp(), it is a kernel-RMPP agent that answers
 * with one RMPP transfer of a given length, segmented, windowed and retried by
 * ib_core's own RMPP sender (mad_rmpp.c). Used by
 * the rmad_rxe suite, the demonstration and the two-node checks
 * (src/testing/ib_responder.rs) and by the benchmark (src/testing/bench/).
 */

#include <linux/atomic.h>
#include <linux/err.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "ib_responder.h"

struct rmad_test_responder {
	struct ib_mad_agent *agent;
	/* Answers requested so far. */
	atomic_t seen;
	spinlock_t lock;	/* protects hold, held, nheld */
	bool hold;
	struct ib_mad_send_buf **held;
	u32 nheld;
	u32 hold_max;
	/* Segments per answer; 0 or 1: one plain GET_RESP. */
	u32 segments;
	/* Kernel RMPP: the data length of each answer (0: not an RMPP responder). */
	u32 rmpp_len;
	/* Answers whose send completed with IB_WC_SUCCESS, and with anything else. */
	atomic_t sent_ok;
	atomic_t sent_bad;
};

static void responder_send_handler(struct ib_mad_agent *agent, struct ib_mad_send_wc *wc)
{
	struct rmad_test_responder *r = agent->context;

	if (wc->status == IB_WC_SUCCESS)
		atomic_inc(&r->sent_ok);
	else
		atomic_inc(&r->sent_bad);
	rdma_destroy_ah(wc->send_buf->ah, RDMA_DESTROY_AH_SLEEPABLE);
	ib_free_send_mad(wc->send_buf);
}

static void responder_post(struct ib_mad_send_buf *b)
{
	if (ib_post_send_mad(b, NULL)) {
		rdma_destroy_ah(b->ah, RDMA_DESTROY_AH_SLEEPABLE);
		ib_free_send_mad(b);
	}
}

/* The answer to @rwc's request, addressed back to its sender; NULL if none can be made. */
static struct ib_mad_send_buf *responder_answer(struct ib_mad_agent *agent,
						struct ib_mad_recv_wc *rwc)
{
	const struct ib_mad *req = rwc->recv_buf.mad;
	struct ib_mad_send_buf *b;
	struct ib_mad *resp;
	struct ib_ah *ah;

	ah = ib_create_ah_from_wc(agent->qp->pd, rwc->wc, rwc->recv_buf.grh, agent->port_num);
	if (IS_ERR(ah))
		return NULL;
	b = ib_create_send_mad(agent, rwc->wc->src_qp, rwc->wc->pkey_index, 0, IB_MGMT_MAD_HDR,
			       IB_MGMT_MAD_DATA, GFP_KERNEL, IB_MGMT_BASE_VERSION);
	if (IS_ERR(b)) {
		rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
		return NULL;
	}
	resp = b->mad;
	memcpy(resp, req, sizeof(*resp));
	resp->mad_hdr.method = IB_MGMT_METHOD_GET_RESP;
	resp->mad_hdr.status = 0;
	b->ah = ah;
	return b;
}

/*
 * Answers @rwc's request with one RMPP transfer of @len data bytes, every byte of
 * segment n equal to n (mod 256), which ib_core segments and sends.
 */
static void responder_rmpp(struct ib_mad_agent *agent, struct ib_mad_recv_wc *rwc, u32 len)
{
	const struct ib_mad *req = rwc->recv_buf.mad;
	int hdr_len = ib_get_mad_data_offset(req->mad_hdr.mgmt_class);
	struct ib_mad_send_buf *b;
	struct ib_rmpp_mad *m;
	struct ib_ah *ah;
	int i;

	ah = ib_create_ah_from_wc(agent->qp->pd, rwc->wc, rwc->recv_buf.grh, agent->port_num);
	if (IS_ERR(ah))
		return;
	b = ib_create_send_mad(agent, rwc->wc->src_qp, rwc->wc->pkey_index, 1, hdr_len, len,
			       GFP_KERNEL, IB_MGMT_BASE_VERSION);
	if (IS_ERR(b)) {
		rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
		return;
	}
	m = b->mad;
	memcpy(m, req, hdr_len);
	m->mad_hdr.method = IB_MGMT_METHOD_GET_RESP;
	m->mad_hdr.status = 0;
	m->rmpp_hdr.rmpp_version = IB_MGMT_RMPP_VERSION;
	m->rmpp_hdr.rmpp_type = IB_MGMT_RMPP_TYPE_DATA;
	m->rmpp_hdr.rmpp_status = 0;
	ib_set_rmpp_flags(&m->rmpp_hdr, IB_MGMT_RMPP_FLAG_ACTIVE);
	for (i = 1; i <= b->seg_count; i++)
		memset(ib_get_rmpp_segment(b, i), i & 0xff, b->seg_size);
	b->ah = ah;
	b->retries = 10;
	responder_post(b);
}

/* Answers @rwc's request with @n GET_RESPs, segments 1..n of one RMPP transfer. */
static void responder_segments(struct ib_mad_agent *agent, struct ib_mad_recv_wc *rwc, u32 n)
{
	struct ib_mad_send_buf *b;
	struct ib_rmpp_mad *m;
	u8 flags;
	u32 i;

	for (i = 1; i <= n; i++) {
		b = responder_answer(agent, rwc);
		if (!b)
			return;
		m = b->mad;
		m->rmpp_hdr.rmpp_version = IB_MGMT_RMPP_VERSION;
		m->rmpp_hdr.rmpp_type = IB_MGMT_RMPP_TYPE_DATA;
		m->rmpp_hdr.rmpp_status = 0;
		flags = IB_MGMT_RMPP_FLAG_ACTIVE;
		if (i == 1)
			flags |= IB_MGMT_RMPP_FLAG_FIRST;
		if (i == n)
			flags |= IB_MGMT_RMPP_FLAG_LAST;
		ib_set_rmpp_flags(&m->rmpp_hdr, flags);
		m->rmpp_hdr.seg_num = cpu_to_be32(i);
		m->rmpp_hdr.paylen_newwin = cpu_to_be32(i == n ? IB_MGMT_RMPP_DATA :
							n * IB_MGMT_RMPP_DATA);
		memset(m->data, (int)i, sizeof(m->data));
		responder_post(b);
	}
}

static void responder_recv_handler(struct ib_mad_agent *agent, struct ib_mad_send_buf *send_buf,
				   struct ib_mad_recv_wc *rwc)
{
	struct rmad_test_responder *r = agent->context;
	struct ib_mad_send_buf *b;
	bool kept = false;

	if (send_buf || ib_response_mad(&rwc->recv_buf.mad->mad_hdr))
		goto out;
	atomic_inc(&r->seen);
	if (r->rmpp_len) {
		responder_rmpp(agent, rwc, r->rmpp_len);
		goto out;
	}
	if (READ_ONCE(r->segments) > 1) {
		responder_segments(agent, rwc, READ_ONCE(r->segments));
		goto out;
	}
	b = responder_answer(agent, rwc);
	if (!b)
		goto out;
	spin_lock(&r->lock);
	if (r->hold && r->nheld < r->hold_max) {
		r->held[r->nheld++] = b;
		kept = true;
	}
	spin_unlock(&r->lock);
	if (!kept)
		responder_post(b);
out:
	ib_free_recv_mad(rwc);
}

/* Registers the responder; @rmpp_len non-zero: a kernel-RMPP agent answering with it. */
static struct rmad_test_responder *responder_start(struct ib_device *dev, u32 port,
						   u8 mgmt_class, u32 hold_max, u32 rmpp_len)
{
	struct ib_mad_reg_req req = {
		.mgmt_class = mgmt_class,
		.mgmt_class_version = 1,
	};
	struct rmad_test_responder *r;

	r = kzalloc_obj(*r);
	if (!r)
		return NULL;
	spin_lock_init(&r->lock);
	atomic_set(&r->seen, 0);
	atomic_set(&r->sent_ok, 0);
	atomic_set(&r->sent_bad, 0);
	r->hold_max = hold_max;
	r->rmpp_len = rmpp_len;
	if (hold_max) {
		r->held = kvcalloc(hold_max, sizeof(*r->held), GFP_KERNEL);
		if (!r->held)
			goto fail;
	}
	set_bit(IB_MGMT_METHOD_GET, req.method_mask);
	r->agent = ib_register_mad_agent(dev, port, IB_QPT_GSI, &req,
					 rmpp_len ? IB_MGMT_RMPP_VERSION : 0,
					 responder_send_handler, responder_recv_handler, r, 0);
	if (IS_ERR(r->agent))
		goto fail;
	return r;
fail:
	kvfree(r->held);
	kfree(r);
	return NULL;
}

struct rmad_test_responder *rmad_test_responder_start(struct ib_device *dev, u32 port,
						      u8 mgmt_class, u32 hold_max)
{
	return responder_start(dev, port, mgmt_class, hold_max, 0);
}

struct rmad_test_responder *rmad_test_responder_start_rmpp(struct ib_device *dev, u32 port,
							   u8 mgmt_class, u32 len)
{
	return responder_start(dev, port, mgmt_class, 0, len);
}

void rmad_test_responder_sent(struct rmad_test_responder *r, u32 *ok, u32 *bad)
{
	*ok = atomic_read(&r->sent_ok);
	*bad = atomic_read(&r->sent_bad);
}

void rmad_test_responder_hold(struct rmad_test_responder *r)
{
	spin_lock(&r->lock);
	r->hold = true;
	spin_unlock(&r->lock);
}

void rmad_test_responder_release(struct rmad_test_responder *r)
{
	u32 i, n;

	spin_lock(&r->lock);
	r->hold = false;
	n = r->nheld;
	r->nheld = 0;
	spin_unlock(&r->lock);
	for (i = 0; i < n; i++)
		responder_post(r->held[i]);
}

u32 rmad_test_responder_held(struct rmad_test_responder *r)
{
	u32 n;

	spin_lock(&r->lock);
	n = r->nheld;
	spin_unlock(&r->lock);
	return n;
}

void rmad_test_responder_segments(struct rmad_test_responder *r, u32 n)
{
	WRITE_ONCE(r->segments, n);
}

u32 rmad_test_responder_seen(struct rmad_test_responder *r)
{
	return atomic_read(&r->seen);
}

void rmad_test_responder_stop(struct rmad_test_responder *r)
{
	if (!r)
		return;
	rmad_test_responder_release(r);
	ib_unregister_mad_agent(r->agent);
	kvfree(r->held);
	kfree(r);
}
