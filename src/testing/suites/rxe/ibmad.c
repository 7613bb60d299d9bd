// SPDX-License-Identifier: GPL-2.0
/*
 * Suite rmad_rxe (test flavour only): code written for ib_core's MAD layer, on
 * rmad through include/rmad_ib_mad.h, next to an ib_core agent on the same
 * port of rxe0.
 *
 * An agent of the header (class 0x0f) posts a chain of two SENDs from GID
 * index @gid_index to the same GID, through an address handle made on its
 * agent->qp->pd: one to class 0x0e, which an ib_core agent receives, and one
 * to class 0x0f, which reaches the header's agent through rmad. Each receive
 * handler gives its struct ib_wc and GRH to ib_init_ah_attr_from_wc(): the two
 * addresses must be the same. Then the header's ib_modify_mad() and
 * ib_cancel_mad() end two GETs that the header's agent leaves unanswered, the send handler sees the
 * context a client wrote while the send was outstanding, and the retries as
 * ib_core leaves them.
 */

#include <linux/completion.h>
#include <linux/etherdevice.h>
#include <linux/ip.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "../../../../include/rmad_ib_mad.h"
#include "../../../compat/compat.h"
#include "../../../verbs/shim.h"
#include "ibmad.h"

#define CORE_CLASS 0x0e
#define RMAD_CLASS 0x0f

/* What the test collects from the handlers. */
struct ibmad_test {
	struct completion recvd[2];
	struct completion sent;
	atomic_t sends;
	/* The last send completion. */
	struct ib_mad_send_buf *send_buf;
	int status;
	int retries;
	void *context1;
	/* The addresses ib_init_ah_attr_from_wc() gave: [0] ib_core's, [1] the header's. */
	struct rdma_ah_attr attr[2];
	int attr_ret[2];
	/* attr[i] holds a reference on its source GID entry, to drop. */
	bool have_attr[2];
	/* What the header's receive handler saw besides. */
	struct ib_mad_agent *rmad_agent;
	bool wc_right;
	struct ib_mad_recv_wc *kept;
};

static void ibmad_send_handler(struct ib_mad_agent *agent, struct ib_mad_send_wc *wc)
{
	struct ibmad_test *t = agent->context;

	t->send_buf = wc->send_buf;
	t->status = wc->status;
	t->retries = wc->send_buf->retries;
	t->context1 = wc->send_buf->context[1];
	atomic_inc(&t->sends);
	complete(&t->sent);
}

static void ibmad_recv_common(struct ibmad_test *t, int i, struct ib_mad_agent *agent,
			      struct ib_mad_recv_wc *wc)
{
	if (t->have_attr[i])
		return;
	t->attr_ret[i] = ib_init_ah_attr_from_wc(agent->device, agent->port_num, wc->wc,
						 wc->recv_buf.grh, &t->attr[i]);
	t->have_attr[i] = !t->attr_ret[i];
	complete(&t->recvd[i]);
}

/* ib_core's agent (class 0x0e). */
static void ibmad_core_recv(struct ib_mad_agent *agent, struct ib_mad_send_buf *send_buf,
			    struct ib_mad_recv_wc *wc)
{
	ibmad_recv_common(agent->context, 0, agent, wc);
	/* ib_core's own, not the header's. */
	(ib_free_recv_mad)(wc);
}

/* The header's agent (class 0x0f): keeps a SEND and writes it; leaves a GET unanswered. */
static void ibmad_rmad_recv(struct ib_mad_agent *agent, struct ib_mad_send_buf *send_buf,
			    struct ib_mad_recv_wc *wc)
{
	struct ibmad_test *t = agent->context;

	if (wc->recv_buf.mad->mad_hdr.method == IB_MGMT_METHOD_GET) {
		ib_free_recv_mad(wc);
		return;
	}

	t->wc_right = !send_buf && wc->wc && wc->wc->qp == agent->qp && wc->recv_buf.grh &&
		      wc->recv_buf.mad && wc->recv_buf.mad->mad_hdr.mgmt_class == RMAD_CLASS &&
		      wc->mad_len == sizeof(struct ib_mad) &&
		      list_is_singular(&wc->rmpp_list) &&
		      wc->wc->port_num == agent->port_num && wc->wc->status == IB_WC_SUCCESS;
	/* Writable, as cm.c writes a REQ it routes. */
	wc->recv_buf.mad->data[0] = 0x5a;
	t->kept = wc;
	ibmad_recv_common(t, 1, agent, wc);
}

/* An empty SEND (or GET) of @class from @agent's buffer to @ah. */
static struct ib_mad_send_buf *ibmad_buf(struct ib_mad_agent *agent, struct ib_ah *ah, u8 class,
					 u8 method, u32 tid)
{
	struct ib_mad_send_buf *b;
	struct ib_mad_hdr *h;

	b = ib_create_send_mad(agent, 1, 0, 0, IB_MGMT_MAD_HDR, IB_MGMT_MAD_DATA, GFP_KERNEL,
			       IB_MGMT_BASE_VERSION);
	if (IS_ERR(b))
		return b;
	h = b->mad;
	h->base_version = IB_MGMT_BASE_VERSION;
	h->mgmt_class = class;
	h->class_version = 1;
	h->method = method;
	h->tid = cpu_to_be64(((u64)agent->hi_tid << 32) | tid);
	b->ah = ah;
	return b;
}

/* The address handle to GID @gid_index of @agent's port, from it, on agent->qp->pd. */
static struct ib_ah *ibmad_ah(struct ib_mad_agent *agent, int gid_index)
{
	struct rdma_ah_attr attr = {};
	union ib_gid gid;
	int ret;

	ret = rdma_query_gid(agent->device, agent->port_num, gid_index, &gid);
	if (ret)
		return ERR_PTR(ret);
	attr.type = rdma_ah_find_type(agent->device, agent->port_num);
	rdma_ah_set_port_num(&attr, agent->port_num);
	rdma_ah_set_grh(&attr, &gid, 0, gid_index, 64, 0);
	return rdma_create_ah(agent->qp->pd, &attr, RDMA_CREATE_AH_SLEEPABLE);
}

/* Whether the two addresses back to the sender are the same; logs them if not. */
static int ibmad_same(const struct rdma_ah_attr *a, const struct rdma_ah_attr *b)
{
	const struct ib_global_route *ga = rdma_ah_read_grh(a), *gb = rdma_ah_read_grh(b);
	bool same = a->type == b->type && rdma_ah_get_sl(a) == rdma_ah_get_sl(b) &&
		    rdma_ah_get_ah_flags(a) == rdma_ah_get_ah_flags(b) &&
		    !memcmp(ga->dgid.raw, gb->dgid.raw, 16) && ga->sgid_index == gb->sgid_index &&
		    ga->flow_label == gb->flow_label && ga->traffic_class == gb->traffic_class &&
		    ga->hop_limit == gb->hop_limit && ga->sgid_attr == gb->sgid_attr &&
		    (a->type != RDMA_AH_ATTR_TYPE_ROCE ||
		     ether_addr_equal(a->roce.dmac, b->roce.dmac));

	if (!same)
		pr_err("rmad_rxe: ib_core: type %d sgid %d dgid %pI6 tc %u fl %u hl %u; header: type %d sgid %d dgid %pI6 tc %u fl %u hl %u\n",
		       a->type, ga->sgid_index, ga->dgid.raw, ga->traffic_class, ga->flow_label,
		       ga->hop_limit, b->type, gb->sgid_index, gb->dgid.raw, gb->traffic_class,
		       gb->flow_label, gb->hop_limit);
	return same ? 0 : -EBADMSG;
}

/* Whether @ok; if not, logs @what and sets *@ret to -EPROTO. */
static bool held(bool ok, const char *what, int *ret)
{
	if (!ok) {
		pr_err("rmad_rxe: ib_mad header: %s\n", what);
		*ret = -EPROTO;
	}
	return ok;
}

/* Waits up to 30 s for @c. */
static bool ibmad_wait(struct completion *c)
{
	return wait_for_completion_timeout(c, 30 * HZ) != 0;
}

int rmad_test_ib_mad(struct ib_device *dev, u32 port, int gid_index)
{
	struct ib_mad_reg_req core_req = {
		.mgmt_class = CORE_CLASS,
		.mgmt_class_version = 1,
	};
	struct ib_mad_reg_req rmad_req = {
		.mgmt_class = RMAD_CLASS,
		.mgmt_class_version = 1,
	};
	struct ib_mad_send_buf *a = NULL, *b = NULL, *bad = NULL;
	struct ib_mad_agent *core = NULL, *agent = NULL;
	struct ib_ah *ah = NULL;
	struct ibmad_test *t;
	int ret = 0;

	t = kzalloc_obj(*t);
	if (!t)
		return -ENOMEM;
	init_completion(&t->recvd[0]);
	init_completion(&t->recvd[1]);
	init_completion(&t->sent);
	set_bit(IB_MGMT_METHOD_SEND, core_req.method_mask);
	set_bit(IB_MGMT_METHOD_SEND, rmad_req.method_mask);
	set_bit(IB_MGMT_METHOD_GET, rmad_req.method_mask);
	/* ib_core's own registration: the macro's name in parentheses. */
	core = (ib_register_mad_agent)(dev, port, IB_QPT_GSI, &core_req, 0, ibmad_send_handler,
				       ibmad_core_recv, t, 0);
	if (IS_ERR(core)) {
		ret = PTR_ERR(core);
		core = NULL;
		goto out;
	}
	agent = ib_register_mad_agent(dev, port, IB_QPT_GSI, &rmad_req, 0, ibmad_send_handler,
				      ibmad_rmad_recv, t, 0);
	if (IS_ERR(agent)) {
		ret = PTR_ERR(agent);
		agent = NULL;
		goto out;
	}
	t->rmad_agent = agent;
	if (!held(agent->device == dev && agent->port_num == port && agent->context == t,
		  "the agent's device, port and context", &ret))
		goto out;
	if (!held(agent->hi_tid != 0 && agent->qp && agent->qp->pd && agent->qp->device == dev,
		  "the agent's hi_tid and QP", &ret))
		goto out;
	if (!held(agent->qp != core->qp, "the agent's QP is rmad's, not ib_core's QP1", &ret))
		goto out;
	ah = ibmad_ah(agent, gid_index);
	if (IS_ERR(ah)) {
		ret = PTR_ERR(ah);
		ah = NULL;
		goto out;
	}

	/* A chain of two SENDs, one to each agent. */
	a = ibmad_buf(agent, ah, CORE_CLASS, IB_MGMT_METHOD_SEND, 1);
	b = ibmad_buf(agent, ah, RMAD_CLASS, IB_MGMT_METHOD_SEND, 2);
	if (!held(!IS_ERR(a) && !IS_ERR(b), "create", &ret))
		goto out;
	if (!held(!a->context[0] && !a->context[1] && !a->retries && !a->timeout_ms && !a->next,
		  "a new buffer is zeroed", &ret))
		goto out;
	a->next = b;
	ret = ib_post_send_mad(a, &bad);
	if (!held(!ret, "post of a chain", &ret))
		goto out;
	if (!held(ibmad_wait(&t->recvd[0]) && ibmad_wait(&t->recvd[1]), "both SENDs received",
		  &ret))
		goto out;
	if (!held(t->wc_right, "the header's receive completion", &ret))
		goto out;
	if (!held(!t->attr_ret[0] && !t->attr_ret[1], "ib_init_ah_attr_from_wc", &ret))
		goto out;
	ret = ibmad_same(&t->attr[0], &t->attr[1]);
	if (ret)
		goto out;
	if (!held(t->kept->recv_buf.mad->data[0] == 0x5a, "the kept MAD", &ret))
		goto out;
	ib_free_recv_mad(t->kept);
	t->kept = NULL;
	while (atomic_read(&t->sends) < 2) {
		if (!held(ibmad_wait(&t->sent), "both send completions", &ret))
			goto out;
	}
	if (!held(t->status == IB_WC_SUCCESS && t->retries == 0, "the SENDs' completions", &ret))
		goto out;

	/*
	 * A GET to the header's agent, which leaves it unanswered, cancelled: its
	 * handler sees context[1] as written while the send was outstanding.
	 */
	a->next = NULL;
	((struct ib_mad_hdr *)a->mad)->mgmt_class = RMAD_CLASS;
	a->timeout_ms = 20000;
	a->retries = 3;
	a->context[1] = NULL;
	((struct ib_mad_hdr *)a->mad)->method = IB_MGMT_METHOD_GET;
	reinit_completion(&t->sent);
	ret = ib_post_send_mad(a, NULL);
	if (!held(!ret, "post of a GET", &ret))
		goto out;
	a->context[1] = (void *)0x1234;
	ib_cancel_mad(a);
	if (!held(ibmad_wait(&t->sent), "the cancelled GET's completion", &ret))
		goto out;
	if (!held(t->send_buf == a && t->status == IB_WC_WR_FLUSH_ERR, "cancel flushes", &ret))
		goto out;
	if (!held(t->context1 == (void *)0x1234, "context written while outstanding", &ret))
		goto out;
	if (!held(ib_modify_mad(a, 100) == -EINVAL, "modify of a completed send", &ret))
		goto out;
	if (!held(ib_modify_mad(NULL, 100) == -EINVAL, "modify of NULL", &ret))
		goto out;
	ib_cancel_mad(NULL);

	/* The same GET, its wait cut to 100 ms with 1 retry: times out after 1 retransmission. */
	a->timeout_ms = 20000;
	a->retries = 1;
	reinit_completion(&t->sent);
	ret = ib_post_send_mad(a, NULL);
	if (!held(!ret, "post of a GET again", &ret))
		goto out;
	if (!held(ib_modify_mad(a, 100) == 0, "modify of an outstanding send", &ret))
		goto out;
	if (!held(ibmad_wait(&t->sent), "the modified GET's completion", &ret))
		goto out;
	if (!held(t->status == IB_WC_RESP_TIMEOUT_ERR && a->timeout_ms == 100,
		  "modify shortens the wait", &ret))
		goto out;
	if (!held(t->retries == 1, "retries count the retransmissions, as ib_core's", &ret))
		goto out;

	/* Refused: no address handle. */
	a->ah = NULL;
	if (!held(ib_post_send_mad(a, &bad) == -EINVAL && bad == a, "a post without an address",
		  &ret))
		goto out;
	ret = 0;
out:
	if (!IS_ERR_OR_NULL(a))
		ib_free_send_mad(a);
	if (!IS_ERR_OR_NULL(b))
		ib_free_send_mad(b);
	if (t->kept)
		ib_free_recv_mad(t->kept);
	if (agent)
		ib_unregister_mad_agent(agent);
	if (core)
		(ib_unregister_mad_agent)(core);
	if (ah)
		rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
	for (int i = 0; i < 2; i++)
		if (t->have_attr[i])
			rdma_destroy_ah_attr(&t->attr[i]);
	kfree(t);
	return ret;
}

/* The test flavour's way from the shim's record to the header's (src/capi/compat.rs). */
void rmad_test_info_to_compat(const struct rmad_recv_info *info, u8 port,
			      struct rmad_compat_wc *out);

/* One packet of each kind ib_core's clients see: its completion and the 40 bytes before it. */
static void wc_packet(int kind, struct ib_wc *wc, struct ib_grh *grh)
{
	static const u8 sgid[16] = { 0xfe, 0x80, [8] = 0x02, 0x11, 0x22, 0xff,
				     0xfe, 0x33, 0x44, 0x55 };
	static const u8 dgid[16] = { 0xfe, 0x80, [8] = 0x02, 0x66, 0x77, 0xff,
				     0xfe, 0x88, 0x99, 0xaa };
	struct iphdr *ip = (struct iphdr *)((u8 *)grh + 20);

	*wc = (struct ib_wc) {
		.status = IB_WC_SUCCESS,
		.opcode = IB_WC_RECV,
		.src_qp = 1,
		.slid = 0x1234,
		.sl = 5,
		.dlid_path_bits = 3,
		.pkey_index = 2,
		.port_num = 1,
	};
	memset(grh, 0, sizeof(*grh));
	switch (kind) {
	case RMAD_TEST_WC_IB:
		return;
	case RMAD_TEST_WC_IB_GRH:
	case RMAD_TEST_WC_ROCE_V1:
	case RMAD_TEST_WC_ROCE_V2_IPV6:
		grh->version_tclass_flow = cpu_to_be32(6 << 28 | 0x2a << 20 | 0x12345);
		grh->paylen = cpu_to_be16(256);
		grh->next_hdr = kind == RMAD_TEST_WC_ROCE_V2_IPV6 ? IPPROTO_UDP : 0x1b;
		grh->hop_limit = 7;
		memcpy(grh->sgid.raw, sgid, 16);
		memcpy(grh->dgid.raw, dgid, 16);
		wc->wc_flags = IB_WC_GRH;
		if (kind == RMAD_TEST_WC_IB_GRH)
			return;
		wc->wc_flags |= IB_WC_WITH_NETWORK_HDR_TYPE | IB_WC_WITH_VLAN;
		wc->vlan_id = 42;
		wc->network_hdr_type = kind == RMAD_TEST_WC_ROCE_V1 ? RDMA_NETWORK_IB :
								    RDMA_NETWORK_IPV6;
		wc->slid = 0xffff;
		return;
	case RMAD_TEST_WC_ROCE_V2_IPV4:
		ip->version = 4;
		ip->ihl = 5;
		ip->tos = 0x2a;
		ip->tot_len = cpu_to_be16(20 + 8 + 12 + 256 + 4);
		ip->ttl = 9;
		ip->protocol = IPPROTO_UDP;
		ip->saddr = cpu_to_be32(0x0a000101);
		ip->daddr = cpu_to_be32(0x0a000102);
		ip->check = ip_fast_csum((u8 *)ip, ip->ihl);
		wc->wc_flags = IB_WC_GRH | IB_WC_WITH_NETWORK_HDR_TYPE;
		wc->network_hdr_type = RDMA_NETWORK_IPV4;
		wc->slid = 0xffff;
		return;
	}
}

int rmad_test_wc_round_trip(int kind)
{
	struct ib_wc in, out;
	struct ib_grh grh_in, grh_out;
	struct rmad_recv_info info = {};
	struct rmad_compat_wc cw;

	wc_packet(kind, &in, &grh_in);
	/* The verbs transport's record (src/verbs/recv.c), the engine's, then the header's. */
	rmad_shim_fill_info(&in, &grh_in, &info);
	rmad_test_info_to_compat(&info, in.port_num, &cw);
	memset(&grh_out, 0xee, sizeof(grh_out));
	rmad_compat_fill_wc(&out, &grh_out, &cw, NULL, sizeof(struct ib_mad));
	/* Every field ib_init_ah_attr_from_wc() and the connection manager read. */
	if (out.wc_flags != in.wc_flags || out.network_hdr_type != in.network_hdr_type ||
	    out.vlan_id != in.vlan_id || out.sl != in.sl || out.slid != in.slid ||
	    out.dlid_path_bits != in.dlid_path_bits || out.pkey_index != in.pkey_index ||
	    out.src_qp != in.src_qp || out.port_num != in.port_num || out.status != in.status) {
		pr_err("rmad_rxe: packet %d: wc_flags %x/%x type %u/%u vlan %u/%u sl %u/%u slid %x/%x bits %u/%u pkey %u/%u qp %u/%u port %u/%u\n",
		       kind, in.wc_flags, out.wc_flags, in.network_hdr_type, out.network_hdr_type,
		       in.vlan_id, out.vlan_id, in.sl, out.sl, in.slid, out.slid, in.dlid_path_bits,
		       out.dlid_path_bits, in.pkey_index, out.pkey_index, in.src_qp, out.src_qp,
		       in.port_num, out.port_num);
		return -EBADMSG;
	}
	if ((in.wc_flags & IB_WC_GRH) && memcmp(&grh_in, &grh_out, sizeof(grh_in))) {
		pr_err("rmad_rxe: packet %d: the GRH differs: %*ph / %*ph\n", kind,
		       (int)sizeof(grh_in), &grh_in, (int)sizeof(grh_out), &grh_out);
		return -EBADMSG;
	}
	return 0;
}
