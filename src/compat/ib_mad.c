// SPDX-License-Identifier: GPL-2.0
/*
 * The ib_mad interface (include/rmad_ib_mad.h): ib_core's MAD calls, on ib_core's
 * own structures, carried out by rmad's C API.
 *
 * Each object a client gets is ib_core's structure inside a wrapper that holds
 * rmad's handle: the client reads and writes the structure as it would under
 * ib_core (cm.c writes a send buffer's context while it is outstanding), and
 * rmad reads what a call needs from it at the call (@ah, @timeout_ms and
 * @retries at the post). The handlers rmad calls are the two trampolines below,
 * which hand the client ib_core's completions. This file is glue: C, because
 * the structures are ib_core's C ones; every rule of the MAD layer is rmad's.
 */

#include <linux/bitmap.h>
#include <linux/export.h>
#include <linux/overflow.h>
#include <linux/printk.h>
#include <linux/slab.h>
#include <linux/string.h>

#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "../../include/rmad.h"
#include "compat.h"

/* Only the declarations: this file defines the functions the macros name. */
#include "../../include/rmad_ib_mad.h"

#undef ib_register_mad_agent
#undef ib_unregister_mad_agent
#undef ib_create_send_mad
#undef ib_free_send_mad
#undef ib_post_send_mad
#undef ib_modify_mad
#undef ib_cancel_mad
#undef ib_free_recv_mad
#undef ib_get_rmpp_segment

/* Each function the header puts in place of ib_core's has ib_core's type. */
static_assert(__same_type(&rmad_ib_register_mad_agent, &ib_register_mad_agent));
static_assert(__same_type(&rmad_ib_unregister_mad_agent, &ib_unregister_mad_agent));
static_assert(__same_type(&rmad_ib_create_send_mad, &ib_create_send_mad));
static_assert(__same_type(&rmad_ib_free_send_mad, &ib_free_send_mad));
static_assert(__same_type(&rmad_ib_post_send_mad, &ib_post_send_mad));
static_assert(__same_type(&rmad_ib_modify_mad, &ib_modify_mad));
static_assert(__same_type(&rmad_ib_free_recv_mad, &ib_free_recv_mad));
static_assert(__same_type(&rmad_ib_get_rmpp_segment, &ib_get_rmpp_segment));

/* src/capi/compat.rs asserts the same layout. */
static_assert(sizeof(struct rmad_compat_wc) == 60);
static_assert(offsetof(struct rmad_compat_wc, pkey_index) == 8);
static_assert(offsetof(struct rmad_compat_wc, port) == 12);
static_assert(offsetof(struct rmad_compat_wc, vlan_id) == 14);
static_assert(offsetof(struct rmad_compat_wc, wc_flags) == 16);
static_assert(offsetof(struct rmad_compat_wc, grh) == 20);
static_assert(sizeof(((struct rmad_compat_wc *)0)->grh) == sizeof(struct ib_grh));

/* An agent: ib_core's structure, and rmad's handle of it. */
struct rmad_ib_agent {
	struct ib_mad_agent agent;
	struct rmad_agent *h;
};

/* A send buffer: ib_core's structure, and rmad's handle of it. */
struct rmad_ib_send {
	struct ib_mad_send_buf buf;
	struct rmad_send_buf *h;
};

/*
 * A received MAD as ib_core hands it out: the completion, its struct ib_wc, the
 * GRH and a copy of the MAD that the client may write (cm.c rewrites a routed
 * REQ in place), in one allocation that ib_free_recv_mad() frees.
 */
struct rmad_ib_recv {
	struct ib_mad_recv_wc wc;
	struct ib_wc ib_wc;
	struct ib_grh grh;
	u8 mad[];
};

static struct rmad_ib_agent *agent_of(struct ib_mad_agent *agent)
{
	return container_of(agent, struct rmad_ib_agent, agent);
}

static struct rmad_ib_send *send_of(struct ib_mad_send_buf *buf)
{
	return container_of(buf, struct rmad_ib_send, buf);
}

/* rmad's send handler: the client's, with ib_core's completion. */
static void rmad_ib_send_done(struct rmad_agent *h, struct rmad_send_wc *wc)
{
	struct rmad_ib_agent *a = wc->context;
	struct rmad_ib_send *s = wc->buf_context;
	struct ib_mad_send_wc ib_wc = {
		.send_buf = &s->buf,
		.status = wc->status,
		.vendor_err = wc->vendor_err,
	};
	int retries = rmad_send_buf_retries(wc->send_buf);

	/* As ib_core leaves it: the retransmissions of this post. */
	s->buf.retries = max(retries, 0);
	a->agent.send_handler(&a->agent, &ib_wc);
}

void rmad_compat_fill_wc(struct ib_wc *wc, struct ib_grh *grh, const struct rmad_compat_wc *cw,
			 struct ib_qp *qp, u32 mad_len)
{
	*wc = (struct ib_wc) {
		.status = IB_WC_SUCCESS,
		.opcode = IB_WC_RECV,
		.byte_len = mad_len + sizeof(struct ib_grh),
		.qp = qp,
		.src_qp = cw->src_qp,
		.wc_flags = cw->wc_flags,
		.pkey_index = cw->pkey_index,
		.slid = cw->slid,
		.sl = cw->sl,
		.dlid_path_bits = cw->dlid_path_bits,
		.port_num = cw->port,
		.vlan_id = cw->vlan_id,
		.network_hdr_type = cw->network_hdr_type,
	};
	if (cw->wc_flags & IB_WC_GRH)
		memcpy(grh, cw->grh, sizeof(*grh));
}

/*
 * rmad's receive handler: the client's, with ib_core's completion, which the
 * client owns from here until ib_free_recv_mad(). A MAD that rmad had no
 * handle for, or this glue no memory for, is dropped, as ib_core drops one it
 * has no buffer for.
 */
static void rmad_ib_recv(struct rmad_agent *h, struct rmad_send_buf *sb,
			 const struct rmad_recv_wc *wc)
{
	struct rmad_ib_agent *a = wc->context;
	struct ib_mad_send_buf *send_buf = NULL;
	struct rmad_compat_wc cw;
	struct rmad_ib_recv *r;
	size_t len;

	if (!wc->recv_buf || rmad_compat_recv_wc(wc->recv_buf, &cw)) {
		pr_warn_ratelimited("rmad: a MAD for an ib_mad agent dropped: no memory\n");
		return;
	}
	len = max_t(size_t, wc->mad_len, sizeof(struct ib_mad));
	r = kvzalloc(struct_size(r, mad, len), GFP_KERNEL);
	if (!r) {
		pr_warn_ratelimited("rmad: a MAD for an ib_mad agent dropped: no memory\n");
		return;
	}
	memcpy(r->mad, wc->mad, wc->mad_len);
	rmad_compat_fill_wc(&r->ib_wc, &r->grh, &cw, a->agent.qp, wc->mad_len);
	r->wc.wc = &r->ib_wc;
	r->wc.recv_buf.grh = &r->grh;
	r->wc.recv_buf.mad = (struct ib_mad *)r->mad;
	INIT_LIST_HEAD(&r->wc.rmpp_list);
	list_add(&r->wc.recv_buf.list, &r->wc.rmpp_list);
	r->wc.mad_len = wc->mad_len;
	r->wc.mad_seg_size = sizeof(struct ib_mad);
	if (sb) {
		struct rmad_ib_send *s = rmad_send_buf_context(sb);

		send_buf = s ? &s->buf : NULL;
	}
	a->agent.recv_handler(&a->agent, send_buf, &r->wc);
}

struct ib_mad_agent *rmad_ib_register_mad_agent(struct ib_device *device, u32 port_num,
						enum ib_qp_type qp_type,
						struct ib_mad_reg_req *mad_reg_req,
						u8 rmpp_version,
						ib_mad_send_handler send_handler,
						ib_mad_recv_handler recv_handler,
						void *context, u32 registration_flags)
{
	struct rmad_reg_req reg = {};
	struct rmad_ib_agent *a;
	struct rmad_agent *h;

	if (!device || port_num > U8_MAX)
		return ERR_PTR(-EINVAL);
	a = kzalloc_obj(*a);
	if (!a)
		return ERR_PTR(-ENOMEM);
	a->agent = (struct ib_mad_agent) {
		.device = device,
		.qp = rmad_compat_port_qp(device, port_num),
		.recv_handler = recv_handler,
		.send_handler = send_handler,
		.context = context,
		.flags = registration_flags,
		.port_num = port_num,
		.rmpp_version = rmpp_version,
	};
	INIT_LIST_HEAD(&a->agent.mad_agent_sec_list);
	if (mad_reg_req) {
		reg.mgmt_class = mad_reg_req->mgmt_class;
		reg.mgmt_class_version = mad_reg_req->mgmt_class_version;
		memcpy(reg.oui, mad_reg_req->oui, sizeof(reg.oui));
		bitmap_to_arr64(reg.method_mask, mad_reg_req->method_mask, IB_MGMT_MAX_METHODS);
	}
	h = rmad_compat_register(device, port_num, qp_type, mad_reg_req ? &reg : NULL,
				 rmpp_version, send_handler ? rmad_ib_send_done : NULL,
				 recv_handler ? rmad_ib_recv : NULL, a, registration_flags,
				 send_handler, recv_handler, &a->agent.hi_tid);
	if (IS_ERR(h)) {
		kfree(a);
		return ERR_CAST(h);
	}
	a->h = h;
	/* The port closed between the two looks: the agent has no QP to give. */
	if (!a->agent.qp) {
		rmad_ib_unregister_mad_agent(&a->agent);
		return ERR_PTR(-ENODEV);
	}
	return &a->agent;
}
EXPORT_SYMBOL_GPL(rmad_ib_register_mad_agent);

static void rmad_ib_agent_release(void *arg)
{
	kfree(arg);
}

void rmad_ib_unregister_mad_agent(struct ib_mad_agent *mad_agent)
{
	struct rmad_ib_agent *a = agent_of(mad_agent);
	int ret = rmad_unregister_agent(a->h);

	/* From one of its own handlers: rmad finishes it once the handler returns. */
	if (ret == -EDEADLK)
		ret = rmad_unregister_agent_async(a->h, rmad_ib_agent_release, a, NULL);
	else if (!ret)
		kfree(a);
	if (ret)
		pr_err("rmad: ib_unregister_mad_agent: %d\n", ret);
}
EXPORT_SYMBOL_GPL(rmad_ib_unregister_mad_agent);

struct ib_mad_send_buf *rmad_ib_create_send_mad(struct ib_mad_agent *mad_agent, u32 remote_qpn,
						u16 pkey_index, int rmpp_active, int hdr_len,
						int data_len, gfp_t gfp_mask, u8 base_version)
{
	struct rmad_send_buf *h;
	struct rmad_ib_send *s;
	u32 seg_size = 0;
	int segs;

	if (!mad_agent)
		return ERR_PTR(-EINVAL);
	s = kzalloc_obj(*s, gfp_mask | __GFP_NOWARN);
	if (!s)
		return ERR_PTR(-ENOMEM);
	h = rmad_create_send_mad(agent_of(mad_agent)->h, remote_qpn, pkey_index, rmpp_active,
				 hdr_len, data_len, gfp_mask, base_version);
	if (IS_ERR(h)) {
		kfree(s);
		return ERR_CAST(h);
	}
	segs = rmad_send_buf_seg_count(h, &seg_size);
	s->h = h;
	s->buf.mad = rmad_send_buf_mad(h);
	s->buf.mad_agent = mad_agent;
	s->buf.hdr_len = hdr_len;
	s->buf.data_len = data_len;
	if (segs > 0) {
		s->buf.seg_count = segs;
		s->buf.seg_size = seg_size;
		s->buf.seg_rmpp_size = sizeof(struct ib_mad) - IB_MGMT_RMPP_HDR;
	}
	return &s->buf;
}
EXPORT_SYMBOL_GPL(rmad_ib_create_send_mad);

void rmad_ib_free_send_mad(struct ib_mad_send_buf *send_buf)
{
	struct rmad_ib_send *s;
	int ret;

	if (!send_buf)
		return;
	s = send_of(send_buf);
	ret = rmad_free_send_mad(s->h);
	if (ret) {
		/* Outstanding: freeing it would free what rmad still sends. */
		pr_err_ratelimited("rmad: ib_free_send_mad: %d, not freed\n", ret);
		return;
	}
	kfree(s);
}
EXPORT_SYMBOL_GPL(rmad_ib_free_send_mad);

/* The destination of a send to @ah, as rmad takes it: the address handle's attributes. */
static int ah_of(struct ib_ah *ah, struct rmad_ah *out)
{
	struct rdma_ah_attr attr = {};
	int ret = rdma_query_ah(ah, &attr);

	if (ret)
		return ret;
	if (rdma_ah_get_dlid(&attr) > U16_MAX)
		return -EINVAL;
	*out = (struct rmad_ah) {
		.dlid = rdma_ah_get_dlid(&attr),
		.src_path_bits = rdma_ah_get_path_bits(&attr),
		.sl = rdma_ah_get_sl(&attr),
	};
	if (rdma_ah_get_ah_flags(&attr) & IB_AH_GRH) {
		const struct ib_global_route *grh = rdma_ah_read_grh(&attr);

		out->has_grh = 1;
		out->sgid_index = grh->sgid_index;
		memcpy(out->dgid, grh->dgid.raw, sizeof(out->dgid));
		out->hop_limit = grh->hop_limit;
		out->traffic_class = grh->traffic_class;
		out->flow_label = grh->flow_label;
	}
	return 0;
}

/* Posts one buffer as ib_core's post does: to @ah, with @timeout_ms and @retries. */
static int post_one(struct ib_mad_send_buf *send_buf)
{
	struct rmad_ib_send *s = send_of(send_buf);
	int retries = send_buf->retries;
	struct rmad_ah ah;
	int ret;

	if (!send_buf->ah || !send_buf->mad_agent ||
	    send_buf->ah->device != send_buf->mad_agent->device)
		return -EINVAL;
	ret = ah_of(send_buf->ah, &ah);
	if (ret)
		return ret;
	ret = rmad_send_buf_set(s->h, &ah, send_buf->timeout_ms, retries, s);
	if (ret)
		return ret;
	/*
	 * ib_core counts the retransmissions in @retries from 0, and the send
	 * handler may run before the post returns.
	 */
	send_buf->retries = 0;
	ret = rmad_post_send_mad(s->h, NULL);
	if (ret)
		send_buf->retries = retries;
	return ret;
}

int rmad_ib_post_send_mad(struct ib_mad_send_buf *send_buf,
			  struct ib_mad_send_buf **bad_send_buf)
{
	struct ib_mad_send_buf *next;
	int ret;

	for (; send_buf; send_buf = next) {
		/* Read first: once posted, the buffer may complete and be reused. */
		next = send_buf->next;
		ret = post_one(send_buf);
		if (ret) {
			if (bad_send_buf)
				*bad_send_buf = send_buf;
			return ret;
		}
	}
	return 0;
}
EXPORT_SYMBOL_GPL(rmad_ib_post_send_mad);

int rmad_ib_modify_mad(struct ib_mad_send_buf *send_buf, u32 timeout_ms)
{
	int ret;

	if (!send_buf)
		return -EINVAL;
	timeout_ms = min_t(u32, timeout_ms, INT_MAX);
	ret = rmad_modify_mad(send_of(send_buf)->h, timeout_ms);
	if (!ret)
		WRITE_ONCE(send_buf->timeout_ms, timeout_ms);
	return ret;
}
EXPORT_SYMBOL_GPL(rmad_ib_modify_mad);

void rmad_ib_free_recv_mad(struct ib_mad_recv_wc *mad_recv_wc)
{
	if (mad_recv_wc)
		kvfree(container_of(mad_recv_wc, struct rmad_ib_recv, wc));
}
EXPORT_SYMBOL_GPL(rmad_ib_free_recv_mad);

void *rmad_ib_get_rmpp_segment(struct ib_mad_send_buf *send_buf, int seg_num)
{
	if (!send_buf)
		return NULL;
	return rmad_get_rmpp_segment(send_of(send_buf)->h, seg_num);
}
EXPORT_SYMBOL_GPL(rmad_ib_get_rmpp_segment);
