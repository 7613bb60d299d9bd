// SPDX-License-Identifier: GPL-2.0
/*
 * A peer of rmad's private QP (test flavour only): a UD QP of its own on a
 * verbs port that sends datagrams of any length and content to a QP of the
 * same port, the way a peer on the fabric that has learnt rmad's QP number
 * could. The hostile-peer suite (src/testing/suites/peer.rs) sends rmad what
 * no MAD layer should accept, through src/testing/peer.rs.
 */

#include <linux/completion.h>
#include <linux/err.h>
#include <linux/etherdevice.h>
#include <linux/jiffies.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "peer.h"

/* Room for a GRH-less datagram of a whole MAD and then some. */
#define PEER_BUF 512

struct rmad_test_peer {
	struct ib_device *dev;
	u32 port;
	u8 sgid_index;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *qp;
	u8 *buf;
	u64 dma;
	struct completion sent;
	int status;
};

static void peer_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rmad_test_peer *p = cq->cq_context;

	p->status = wc->status;
	complete(&p->sent);
}

static struct ib_cqe peer_cqe = { .done = peer_send_done };

static int peer_to_rts(struct ib_qp *qp, u32 port)
{
	struct ib_qp_attr attr = {
		.qp_state = IB_QPS_INIT,
		.pkey_index = 0,
		.port_num = port,
		.qkey = IB_QP1_QKEY,
	};
	int ret;

	ret = ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY);
	if (ret)
		return ret;
	attr.qp_state = IB_QPS_RTR;
	ret = ib_modify_qp(qp, &attr, IB_QP_STATE);
	if (ret)
		return ret;
	attr.qp_state = IB_QPS_RTS;
	attr.sq_psn = 0;
	return ib_modify_qp(qp, &attr, IB_QP_STATE | IB_QP_SQ_PSN);
}

struct rmad_test_peer *rmad_test_peer_open(struct ib_device *dev, u32 port, u8 sgid_index)
{
	struct ib_qp_init_attr init = {
		.cap = {
			.max_send_wr = 1,
			.max_recv_wr = 1,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
		.sq_sig_type = IB_SIGNAL_ALL_WR,
		.qp_type = IB_QPT_UD,
		.port_num = port,
	};
	struct rmad_test_peer *p;

	p = kzalloc_obj(*p);
	if (!p)
		return NULL;
	p->dev = dev;
	p->port = port;
	p->sgid_index = sgid_index;
	init_completion(&p->sent);
	p->buf = kzalloc(PEER_BUF, GFP_KERNEL);
	if (!p->buf)
		goto free;
	p->pd = ib_alloc_pd(dev, 0);
	if (IS_ERR(p->pd))
		goto free_buf;
	p->cq = ib_alloc_cq(dev, p, 2, 0, IB_POLL_WORKQUEUE);
	if (IS_ERR(p->cq))
		goto free_pd;
	init.send_cq = p->cq;
	init.recv_cq = p->cq;
	p->qp = ib_create_qp(p->pd, &init);
	if (IS_ERR(p->qp))
		goto free_cq;
	if (peer_to_rts(p->qp, port))
		goto free_qp;
	p->dma = ib_dma_map_single(dev, p->buf, PEER_BUF, DMA_TO_DEVICE);
	if (ib_dma_mapping_error(dev, p->dma))
		goto free_qp;
	return p;
free_qp:
	ib_destroy_qp(p->qp);
free_cq:
	ib_free_cq(p->cq);
free_pd:
	ib_dealloc_pd(p->pd);
free_buf:
	kfree(p->buf);
free:
	kfree(p);
	return NULL;
}

struct ib_ah *rmad_test_peer_ah(struct ib_pd *pd, u32 port, u8 sgid_index, const u8 *dgid)
{
	struct rdma_ah_attr attr = {};
	const struct ib_gid_attr *gid_attr;
	union ib_gid g;
	int ret = 0;

	memcpy(g.raw, dgid, sizeof(g.raw));
	attr.type = rdma_ah_find_type(pd->device, port);
	rdma_ah_set_port_num(&attr, port);
	rdma_ah_set_grh(&attr, &g, 0, sgid_index, 64, 0);
	if (attr.type == RDMA_AH_ATTR_TYPE_ROCE) {
		/* The destination is on the same port: its MAC is the source GID's. */
		gid_attr = rdma_get_gid_attr(pd->device, port, sgid_index);
		if (IS_ERR(gid_attr))
			return ERR_CAST(gid_attr);
		ret = rdma_read_gid_l2_fields(gid_attr, NULL, attr.roce.dmac);
		rdma_put_gid_attr(gid_attr);
	}
	if (ret)
		return ERR_PTR(ret);
	return rdma_create_ah(pd, &attr, RDMA_CREATE_AH_SLEEPABLE);
}

int rmad_test_peer_send(struct rmad_test_peer *p, u32 dqpn, const u8 *dgid, const void *data,
			u32 len)
{
	struct ib_ud_wr wr = {};
	struct ib_sge sge;
	struct ib_ah *ah;
	int ret;

	if (len > PEER_BUF)
		return -EINVAL;
	ah = rmad_test_peer_ah(p->pd, p->port, p->sgid_index, dgid);
	if (IS_ERR(ah))
		return PTR_ERR(ah);
	ib_dma_sync_single_for_cpu(p->dev, p->dma, PEER_BUF, DMA_TO_DEVICE);
	memcpy(p->buf, data, len);
	ib_dma_sync_single_for_device(p->dev, p->dma, PEER_BUF, DMA_TO_DEVICE);
	sge.addr = p->dma;
	sge.length = len;
	sge.lkey = p->pd->local_dma_lkey;
	wr.wr.wr_cqe = &peer_cqe;
	wr.wr.sg_list = &sge;
	wr.wr.num_sge = 1;
	wr.wr.opcode = IB_WR_SEND;
	wr.wr.send_flags = IB_SEND_SIGNALED;
	wr.ah = ah;
	wr.remote_qpn = dqpn;
	wr.remote_qkey = IB_QP1_QKEY;
	reinit_completion(&p->sent);
	ret = ib_post_send(p->qp, &wr.wr, NULL);
	if (!ret) {
		if (!wait_for_completion_timeout(&p->sent, 20 * HZ))
			ret = -ETIMEDOUT;
		else if (p->status != IB_WC_SUCCESS)
			ret = -EIO;
	}
	rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
	return ret;
}

void rmad_test_peer_close(struct rmad_test_peer *p)
{
	if (!p)
		return;
	ib_dma_unmap_single(p->dev, p->dma, PEER_BUF, DMA_TO_DEVICE);
	ib_destroy_qp(p->qp);
	ib_free_cq(p->cq);
	ib_dealloc_pd(p->pd);
	kfree(p->buf);
	kfree(p);
}
