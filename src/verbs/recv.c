// SPDX-License-Identifier: GPL-2.0
/*
 * What arrives at a verbs port, for rmad's verbs glue: the private QP's
 * receive buffers (posted, handed to Rust, posted again) and the forwarding
 * agents in ib_core's MAD layer on QP1, which hand Rust the requests for
 * rmad's responders. The port itself is src/verbs/shim.c's.
 */

#include <linux/atomic.h>
#include <linux/bitops.h>
#include <linux/ip.h>
#include <linux/minmax.h>
#include <linux/workqueue.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "vport.h"

/* Posts the receive buffer of @s on its port's QP; 0 or the device's errno. */
int rmad_post_recv(struct rmad_slot *s)
{
	struct ib_sge sge = {
		.addr = s->dma,
		.length = RMAD_GRH_SIZE + RMAD_MAD_SIZE,
		.lkey = s->vp->pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = {
		.wr_cqe = &s->cqe,
		.sg_list = &sge,
		.num_sge = 1,
	};

	int ret;

	ib_dma_sync_single_for_device(s->vp->dev, s->dma, RMAD_GRH_SIZE + RMAD_MAD_SIZE,
				      DMA_FROM_DEVICE);
	atomic_inc(&s->vp->rq_posted);
	ret = ib_post_recv(s->vp->qp, &wr, NULL);
	if (ret)
		atomic_dec(&s->vp->rq_posted);
	return ret;
}

/*
 * A post of @s failed: the slot, off the QP, waits for the transmit work to
 * post it again a little later (rmad_repost, woken by the retry work), so
 * that one failure does not shrink the receive queue for good.
 */
void rmad_repost_later(struct rmad_slot *s)
{
	struct rmad_vport *vp = s->vp;

	/* Release: whatever read the buffer is done before it may be posted again. */
	smp_mb__before_atomic();
	set_bit(s - vp->recv, vp->unposted);
	/* Already queued: that run takes this slot too. */
	queue_delayed_work(system_dfl_wq, &vp->retry, msecs_to_jiffies(RMAD_RETRY_MS));
}

/*
 * Posts again the receive slots whose post failed; one that fails again waits
 * for the next try. Only the transmit work calls it (rmad_shim_vport_recover),
 * so no slot is posted twice.
 */
void rmad_repost(struct rmad_vport *vp)
{
	unsigned int i;

	for_each_set_bit(i, vp->unposted, RMAD_RQ) {
		/* Fully ordered: pairs with the release in rmad_repost_later. */
		if (test_and_clear_bit(i, vp->unposted) && rmad_post_recv(&vp->recv[i]))
			rmad_repost_later(&vp->recv[i]);
	}
}

/*
 * The hop limit, traffic class and flow label of a received header: a GRH or an
 * IPv6 header (the same layout), or on RoCEv2 over IPv4 the IP header in the
 * last 20 bytes (TTL and TOS; no flow label).
 */
static void rmad_fill_grh_fields(const void *grh, enum rdma_network_type t,
				 struct rmad_recv_info *info)
{
	if (t == RDMA_NETWORK_IPV4) {
		const struct iphdr *ip = grh + 20;

		info->hop_limit = ip->ttl;
		info->traffic_class = ip->tos;
	} else {
		const struct ib_grh *g = grh;
		u32 v = be32_to_cpu(g->version_tclass_flow);

		info->hop_limit = g->hop_limit;
		info->traffic_class = (v >> 20) & 0xff;
		info->flow_label = v & 0xfffff;
	}
}

/*
 * How a MAD arrived, from its work completion and the 40 bytes before it (the
 * GRH, or on RoCEv2 over IPv4 the IP header in its last 20 bytes).
 */
static_assert(sizeof_field(struct rmad_recv_info, grh) == RMAD_GRH_SIZE);

void rmad_shim_fill_info(const struct ib_wc *wc, const void *grh, struct rmad_recv_info *info)
{
	union ib_gid sgid, dgid;

	info->src_qp = wc->src_qp;
	info->slid = wc->slid;
	info->pkey_index = wc->pkey_index;
	info->dlid_path_bits = wc->dlid_path_bits;
	info->sl = wc->sl;
	info->wc_flags = wc->wc_flags & (IB_WC_GRH | IB_WC_WITH_NETWORK_HDR_TYPE | IB_WC_WITH_VLAN);
	info->network_hdr_type = wc->network_hdr_type;
	info->vlan_id = wc->vlan_id;
	if (wc->wc_flags & IB_WC_GRH) {
		memcpy(info->grh, grh, sizeof(info->grh));
		enum rdma_network_type t = RDMA_NETWORK_IB;

		if (wc->wc_flags & IB_WC_WITH_NETWORK_HDR_TYPE)
			t = wc->network_hdr_type;
		if (!ib_get_gids_from_rdma_hdr((union rdma_network_hdr *)grh, t, &sgid, &dgid)) {
			info->has_grh = 1;
			memcpy(info->sgid, sgid.raw, 16);
			memcpy(info->dgid, dgid.raw, 16);
			rmad_fill_grh_fields(grh, t, info);
		}
	}
}

void rmad_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rmad_slot *s = container_of(wc->wr_cqe, struct rmad_slot, cqe);
	struct rmad_vport *vp = s->vp;
	struct rmad_recv_info info = {};

	/*
	 * Flushed (the QP is closing, or in the error state and reposted by
	 * rmad_shim_vport_recover): not posted again here. Any other error (a
	 * datagram the buffer could not take) loses only that datagram: the
	 * buffer goes back, or a peer could use them all up. The count drops
	 * last, after any repost, so that it reaches 0 only with no handler
	 * running.
	 */
	if (wc->status == IB_WC_SUCCESS) {
		ib_dma_sync_single_for_cpu(vp->dev, s->dma, RMAD_GRH_SIZE + RMAD_MAD_SIZE,
					   DMA_FROM_DEVICE);
		rmad_shim_fill_info(wc, s->buf, &info);
		if (wc->byte_len >= RMAD_GRH_SIZE)
			rmad_rust_recv(vp->ctx, s->buf + RMAD_GRH_SIZE,
				       min_t(u32, wc->byte_len - RMAD_GRH_SIZE, RMAD_MAD_SIZE),
				       &info);
	}
	if (wc->status != IB_WC_WR_FLUSH_ERR && rmad_post_recv(s))
		rmad_repost_later(s);
	/*
	 * Fully ordered: the handler's reads of the buffer come before it may be
	 * posted again, and the count before the read of vp->recovering, which
	 * pairs with the barrier in rmad_shim_vport_recover: either the recovery
	 * sees the count at 0, or the last handler of the flush sees the
	 * recovery waiting and runs it again. Nothing else would: a recovery
	 * that gave up waiting would leave the QP in the error state, with no
	 * receive posted, until some unrelated send.
	 */
	if (!atomic_dec_return(&vp->rq_posted) && atomic_read(&vp->recovering))
		rmad_rust_kick(vp->ctx);
}

/*
 * Forwarding (the responder role): an agent in ib_core's MAD layer on QP1 of
 * a port, registered for what an rmad agent registered, hands every MAD it
 * receives to Rust with the port's context, then frees it.
 */
static void rmad_forward_send_done(struct ib_mad_agent *agent, struct ib_mad_send_wc *wc)
{
	/* Never sends: rmad answers from its private QP. */
}

static void rmad_forward_recv(struct ib_mad_agent *agent, struct ib_mad_send_buf *send_buf,
			      struct ib_mad_recv_wc *rwc)
{
	struct rmad_recv_info info = {};

	rmad_shim_fill_info(rwc->wc, rwc->recv_buf.grh, &info);
	info.via_qp1 = 1;
	rmad_rust_recv(agent->context, (const u8 *)rwc->recv_buf.mad,
		       min_t(size_t, rwc->mad_len, RMAD_MAD_SIZE), &info);
	ib_free_recv_mad(rwc);
}

/*
 * Registers the forwarding agent for @mgmt_class, @class_version, @oui and the
 * methods in the 128-bit mask (@mask_lo: methods 0-63) on QP1 of (@dev,
 * @port); its MADs go to rmad_rust_recv(@ctx, ...). Process context.
 * Returns the agent or ib_register_mad_agent's ERR_PTR.
 */
void *rmad_shim_forward_start(struct ib_device *dev, u32 port, void *ctx, u8 mgmt_class,
			      u8 class_version, const u8 *oui, u64 mask_lo, u64 mask_hi)
{
	struct ib_mad_reg_req req = {
		.mgmt_class = mgmt_class,
		.mgmt_class_version = class_version,
	};
	int m;

	memcpy(req.oui, oui, sizeof(req.oui));
	for (m = 0; m < 64; m++) {
		if (mask_lo & BIT_ULL(m))
			set_bit(m, req.method_mask);
		if (mask_hi & BIT_ULL(m))
			set_bit(m + 64, req.method_mask);
	}
	return ib_register_mad_agent(dev, port, IB_QPT_GSI, &req, 0, rmad_forward_send_done,
				     rmad_forward_recv, ctx, 0);
}

/* Unregisters a forwarding agent; no MAD of it reaches Rust after this returns. */
void rmad_shim_forward_stop(void *fwd)
{
	ib_unregister_mad_agent(fwd);
}
