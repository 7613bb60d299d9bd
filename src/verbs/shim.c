// SPDX-License-Identifier: GPL-2.0
/*
 * Verbs glue for rmad's verbs transport.
 *
 * The rdma headers are not in the kernel crate's bindings, so the few verbs
 * calls rmad needs live here, behind a narrow ABI of opaque handles and plain
 * integers: an ib_client whose add/remove callbacks go to Rust, and per port a
 * private UD QP (with its PD, CQ and DMA-mapped send and receive buffers) that
 * sends MADs to a remote QP1 with the GSI Q_Key and receives the answers.
 * Every decision (what to send, where, what a completion means) is made in
 * Rust; this file only moves bytes and completions.
 */

#include <linux/bitmap.h>
#include <linux/build_bug.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/etherdevice.h>
#include <linux/ip.h>
#include <linux/netdevice.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/stddef.h>
#include <net/net_namespace.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "shim.h"

/* The layout VerbsRecvInfo in src/verbs.rs has. */
static_assert(sizeof(struct rmad_recv_info) == 52);
static_assert(offsetof(struct rmad_recv_info, pkey_index) == 8);
static_assert(offsetof(struct rmad_recv_info, has_grh) == 11);
static_assert(offsetof(struct rmad_recv_info, sgid) == 12);
static_assert(offsetof(struct rmad_recv_info, dgid) == 28);
static_assert(offsetof(struct rmad_recv_info, flow_label) == 44);
static_assert(offsetof(struct rmad_recv_info, traffic_class) == 49);
static_assert(offsetof(struct rmad_recv_info, sl) == 50);
static_assert(offsetof(struct rmad_recv_info, via_qp1) == 51);

#define RMAD_SQ 128
/* Receive buffers posted per port: as many as the C MAD layer's recv_queue_size. */
#define RMAD_RQ 512
/* Address handles kept per port, one per destination (see rmad_ah_get). */
#define RMAD_AH_CACHE 16
#define RMAD_MAD_SIZE 256
#define RMAD_GRH_SIZE 40

struct rmad_vport;

struct rmad_slot {
	struct ib_cqe cqe;
	struct rmad_vport *vp;
	u8 *buf;
	u64 dma;
	u64 wr_id;
	struct rmad_ah_entry *ah;
};

/*
 * An address handle and the destination it was made for. It is made once,
 * at the first transmission to the destination, and kept until the port
 * closes; @users counts the sends on the QP that use it.
 */
struct rmad_ah_entry {
	struct ib_ah *ah;
	struct rdma_ah_attr attr;
	u32 users;
	/* Not in the cache: destroyed when its last send completes. */
	bool transient;
};

struct rmad_vport {
	struct ib_device *dev;
	u32 port;
	void *ctx;
	struct ib_pd *pd;
	/*
	 * Send and receive completions are polled by two works, so a receive
	 * handler that waits for a send's completion (unregistering another
	 * agent) does not wait for itself.
	 */
	struct ib_cq *send_cq;
	struct ib_cq *recv_cq;
	struct ib_qp *qp;
	spinlock_t lock; /* protects free_send, nfree and the users counts */
	/* Indexes of the send slots that are free: a stack, O(1) both ways. */
	u16 free_send[RMAD_SQ];
	u32 nfree;
	/* Send slots set up (all of them once the port is open). */
	u32 nslots;
	/* Only the port's transmit work and close touch the cache's entries. */
	struct rmad_ah_entry ahs[RMAD_AH_CACHE];
	/* GID table changes of the port, which make the transmit work sweep the cache. */
	struct ib_event_handler events;
	atomic_t gid_changed;
	/*
	 * A send completed with an error: the QP may be in the error state (rxe
	 * moves it there when the netdev refuses a packet, for good), and the
	 * transmit work resets it before its next send (rmad_shim_vport_recover).
	 */
	atomic_t send_failed;
	/* Receives posted and not yet completed (their handler done). */
	atomic_t rq_posted;
	/* Times the QP was reset to RTS after it failed. */
	atomic_t resets;
	struct rmad_slot send[RMAD_SQ];
	struct rmad_slot recv[RMAD_RQ];
};

static int rmad_client_add(struct ib_device *dev)
{
	rmad_rust_device_add(dev);
	return 0;
}

static void rmad_client_remove(struct ib_device *dev, void *data)
{
	rmad_rust_device_remove(dev);
}

static void rmad_client_rename(struct ib_device *dev, void *data)
{
	rmad_rust_device_renamed(dev);
}

static struct ib_client rmad_client = {
	.name = "rmad",
	.add = rmad_client_add,
	.remove = rmad_client_remove,
	.rename = rmad_client_rename,
};

int rmad_shim_register_client(void)
{
	return ib_register_client(&rmad_client);
}

void rmad_shim_unregister_client(void)
{
	ib_unregister_client(&rmad_client);
}

const char *rmad_shim_dev_name(struct ib_device *dev)
{
	return dev_name(&dev->dev);
}

u32 rmad_shim_port_count(struct ib_device *dev)
{
	return rdma_end_port(dev);
}

/* 1 if the port has a GSI QP (QP1) that MADs can be sent to. */
int rmad_shim_port_has_gsi(struct ib_device *dev, u32 port)
{
	return rdma_cap_ib_cm(dev, port) || rdma_protocol_roce(dev, port);
}

int rmad_shim_query_port(struct ib_device *dev, u32 port, u32 *lid, u8 *lmc,
			 u8 *has_smi)
{
	struct ib_port_attr attr;
	int ret = ib_query_port(dev, port, &attr);

	if (ret)
		return ret;
	*lid = attr.lid;
	*lmc = attr.lmc;
	*has_smi = rdma_cap_ib_smi(dev, port);
	return 0;
}

int rmad_shim_query_gid(struct ib_device *dev, u32 port, int index, u8 *gid)
{
	union ib_gid g;
	int ret = rdma_query_gid(dev, port, index, &g);

	if (!ret)
		memcpy(gid, g.raw, 16);
	return ret;
}

/* Entry @index of the P_Key table of (@dev, @port), from ib_core's cache (atomic-safe). */
int rmad_shim_query_pkey(struct ib_device *dev, u32 port, u16 index, u16 *pkey)
{
	return ib_get_cached_pkey(dev, port, index, pkey);
}

/*
 * The index of @gid in the GID table of (@dev, @port), among its first 256
 * entries (an address handle names its source GID with a u8), or -ENOENT.
 */
int rmad_shim_find_gid(struct ib_device *dev, u32 port, const u8 *gid)
{
	struct ib_port_attr attr;
	union ib_gid g;
	int i, n, ret;

	ret = ib_query_port(dev, port, &attr);
	if (ret)
		return ret;
	n = min_t(int, attr.gid_tbl_len, 256);
	for (i = 0; i < n; i++)
		if (!rdma_query_gid(dev, port, i, &g) && !memcmp(g.raw, gid, sizeof(g.raw)))
			return i;
	return -ENOENT;
}

/* The number of the private QP (what a peer that learnt it would send to). */
u32 rmad_shim_vport_qp_num(struct rmad_vport *vp)
{
	return vp->qp->qp_num;
}

/* The MAC of the port's netdev (RoCE), for address handles to this port. */
/* Takes a registration reference: the device's unregistration waits for it. */
int rmad_shim_dev_try_get(struct ib_device *dev)
{
	return ib_device_try_get(dev);
}

void rmad_shim_dev_put(struct ib_device *dev)
{
	ib_device_put(dev);
}

int rmad_shim_port_mac(struct ib_device *dev, u32 port, u8 *mac)
{
	struct net_device *ndev = ib_device_get_netdev(dev, port);

	if (!ndev)
		return -ENODEV;
	ether_addr_copy(mac, ndev->dev_addr);
	dev_put(ndev);
	return 0;
}

/* Gives back a send slot and its address handle's use (the CQ's workqueue or the transmit work). */
static void rmad_put_slot(struct rmad_slot *s)
{
	struct rmad_vport *vp = s->vp;
	struct rmad_ah_entry *e = s->ah;
	bool destroy = false;
	unsigned long flags;

	s->ah = NULL;
	spin_lock_irqsave(&vp->lock, flags);
	if (e) {
		e->users--;
		destroy = e->transient && !e->users;
	}
	vp->free_send[vp->nfree++] = s - vp->send;
	spin_unlock_irqrestore(&vp->lock, flags);
	/* Process context: the CQ is polled on a workqueue. */
	if (destroy) {
		rdma_destroy_ah(e->ah, RDMA_DESTROY_AH_SLEEPABLE);
		kfree(e);
	}
}

static void rmad_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rmad_slot *s = container_of(wc->wr_cqe, struct rmad_slot, cqe);
	struct rmad_vport *vp = s->vp;
	u64 wr_id = s->wr_id;

	ib_dma_unmap_single(vp->dev, s->dma, RMAD_MAD_SIZE, DMA_TO_DEVICE);
	if (wc->status != IB_WC_SUCCESS)
		atomic_set(&vp->send_failed, 1);
	rmad_put_slot(s);
	rmad_rust_send_done(vp->ctx, wr_id, wc->status, wc->vendor_err);
}

static int rmad_post_recv(struct rmad_slot *s)
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
static void rmad_fill_info(const struct ib_wc *wc, const void *grh, struct rmad_recv_info *info)
{
	union ib_gid sgid, dgid;

	info->src_qp = wc->src_qp;
	info->slid = wc->slid;
	info->pkey_index = wc->pkey_index;
	info->dlid_path_bits = wc->dlid_path_bits;
	info->sl = wc->sl;
	if (wc->wc_flags & IB_WC_GRH) {
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

static void rmad_recv_done(struct ib_cq *cq, struct ib_wc *wc)
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
		rmad_fill_info(wc, s->buf, &info);
		if (wc->byte_len >= RMAD_GRH_SIZE)
			rmad_rust_recv(vp->ctx, s->buf + RMAD_GRH_SIZE,
				       min_t(u32, wc->byte_len - RMAD_GRH_SIZE, RMAD_MAD_SIZE),
				       &info);
	}
	if (wc->status != IB_WC_WR_FLUSH_ERR)
		rmad_post_recv(s);
	/* Release: the handler's reads of the buffer come before it may be posted again. */
	smp_mb__before_atomic();
	atomic_dec(&vp->rq_posted);
}

static void rmad_free_slots(struct rmad_vport *vp)
{
	int i;

	for (i = 0; i < RMAD_RQ; i++) {
		if (vp->recv[i].buf) {
			ib_dma_unmap_single(vp->dev, vp->recv[i].dma,
					    RMAD_GRH_SIZE + RMAD_MAD_SIZE, DMA_FROM_DEVICE);
			kfree(vp->recv[i].buf);
		}
	}
	for (i = 0; i < RMAD_SQ; i++)
		kfree(vp->send[i].buf);
	for (i = 0; i < RMAD_AH_CACHE; i++)
		if (vp->ahs[i].ah)
			rdma_destroy_ah(vp->ahs[i].ah, RDMA_DESTROY_AH_SLEEPABLE);
}

static int rmad_qp_to_rts(struct ib_qp *qp)
{
	struct ib_qp_attr attr = {
		.qp_state = IB_QPS_INIT,
		.pkey_index = 0,
		.port_num = 0,
		.qkey = IB_QP1_QKEY,
	};
	int ret;

	attr.port_num = qp->port;
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

/*
 * Whether the address handle of @e still references the GID entry its source
 * GID index has now (an address handle holds its source GID entry until it is
 * destroyed; a deleted entry stays allocated while referenced).
 */
static bool rmad_ah_current(struct rmad_vport *vp, const struct rmad_ah_entry *e)
{
	const struct ib_gid_attr *had = e->ah->sgid_attr, *now;
	bool same;

	if (!had)
		return true;
	now = rdma_get_gid_attr(vp->dev, vp->port, had->index);
	if (IS_ERR(now))
		return false;
	same = now == had;
	rdma_put_gid_attr(now);
	return same;
}

/*
 * After a GID table change (an address removed or replaced): destroys the
 * cached address handles that no send uses and whose source GID entry is gone
 * or replaced, so that none keeps a deleted GID entry allocated. The transmit
 * work calls it first in every run: only it adds users to the cache's entries,
 * so an entry seen unused here stays unused.
 */
void rmad_shim_vport_sweep(struct rmad_vport *vp)
{
	unsigned long flags;
	bool unused;
	int i;

	if (!atomic_xchg(&vp->gid_changed, 0))
		return;
	for (i = 0; i < RMAD_AH_CACHE; i++) {
		struct rmad_ah_entry *e = &vp->ahs[i];

		if (!e->ah)
			continue;
		spin_lock_irqsave(&vp->lock, flags);
		unused = !e->users;
		spin_unlock_irqrestore(&vp->lock, flags);
		if (!unused || rmad_ah_current(vp, e))
			continue;
		rdma_destroy_ah(e->ah, RDMA_DESTROY_AH_SLEEPABLE);
		e->ah = NULL;
		memset(&e->attr, 0, sizeof(e->attr));
	}
}

static void rmad_port_event(struct ib_event_handler *h, struct ib_event *ev)
{
	struct rmad_vport *vp = container_of(h, struct rmad_vport, events);

	if (ev->element.port_num != vp->port)
		return;
	switch (ev->event) {
	case IB_EVENT_GID_CHANGE:
		atomic_set(&vp->gid_changed, 1);
		break;
	/* What may change the LID and LMC (the MAC changes come with the GIDs). */
	case IB_EVENT_LID_CHANGE:
	case IB_EVENT_PORT_ACTIVE:
	case IB_EVENT_CLIENT_REREGISTER:
		break;
	default:
		return;
	}
	rmad_rust_port_changed(vp->ctx);
}

static bool rmad_sends_busy(struct rmad_vport *vp)
{
	unsigned long flags;
	bool busy;

	spin_lock_irqsave(&vp->lock, flags);
	busy = vp->nfree < vp->nslots;
	spin_unlock_irqrestore(&vp->lock, flags);
	return busy;
}

/*
 * Whether the device has completed every send and, with @rq, flushed every
 * receive (their handlers done); waits a little for it (about 20 ms at most:
 * the transmit work runs on an ordered queue that every port shares).
 */
static bool rmad_drained(struct rmad_vport *vp, bool rq)
{
	int i;

	for (i = 0;; i++) {
		/* Acquire: pairs with the release before each handler's decrement. */
		if (!rmad_sends_busy(vp) && (!rq || !atomic_read_acquire(&vp->rq_posted)))
			return true;
		if (i == 20)
			return false;
		usleep_range(500, 1000);
	}
}

/*
 * After a send completed with an error: brings the QP back to RTS if it left
 * it. rxe puts the whole QP in the error state, for good, when the netdev
 * refuses one packet (a full qdisc, or one being replaced): once the device
 * has completed every send and flushed every receive, the QP goes through
 * RESET back to RTS and the receives are posted again. A QP in the
 * send-queue-error state (hardware) still receives: once its sends are
 * done, it goes straight back to RTS, as the C MAD layer moves it. Nothing
 * is lost: every send completes once (the flushed ones with their flush
 * status), and no buffer is posted twice. The transmit work calls it first
 * in every run, before it posts anything; when the device has not drained
 * yet, or a transition fails, the next run tries again. Returns whether the
 * QP was brought back.
 */
bool rmad_shim_vport_recover(struct rmad_vport *vp)
{
	struct ib_qp_attr attr = {};
	struct ib_qp_init_attr init;
	int i;

	if (!atomic_xchg(&vp->send_failed, 0))
		return false;
	if (ib_query_qp(vp->qp, &attr, IB_QP_STATE, &init))
		goto later;
	switch (attr.qp_state) {
	case IB_QPS_RTS:
		return false;
	case IB_QPS_SQE:
		if (!rmad_drained(vp, false))
			goto later;
		attr.qp_state = IB_QPS_RTS;
		attr.cur_qp_state = IB_QPS_SQE;
		if (ib_modify_qp(vp->qp, &attr, IB_QP_STATE | IB_QP_CUR_STATE))
			goto failed;
		break;
	default:
		/* ERR, or a state a reset that failed half way left. */
		if (!rmad_drained(vp, true))
			goto later;
		attr.qp_state = IB_QPS_RESET;
		if (ib_modify_qp(vp->qp, &attr, IB_QP_STATE) || rmad_qp_to_rts(vp->qp))
			goto failed;
		for (i = 0; i < RMAD_RQ; i++)
			rmad_post_recv(&vp->recv[i]);
		break;
	}
	atomic_inc(&vp->resets);
	pr_info("rmad: %s port %u: the private QP failed a send and is back in RTS\n",
		dev_name(&vp->dev->dev), vp->port);
	return true;
failed:
	pr_warn_ratelimited("rmad: %s port %u: the private QP failed and could not be reset yet\n",
			    dev_name(&vp->dev->dev), vp->port);
later:
	atomic_set(&vp->send_failed, 1);
	return false;
}

/* How many times rmad_shim_vport_recover reset the QP. */
u32 rmad_shim_vport_resets(struct rmad_vport *vp)
{
	return atomic_read(&vp->resets);
}

/*
 * Completes, flushed, every send whose completion never came: once the QP and
 * the CQ are gone (no completion can run any more), a slot still in use is a
 * send the device did not report, or whose completion the CQ dropped.
 */
static void rmad_flush_lost_sends(struct rmad_vport *vp)
{
	DECLARE_BITMAP(free, RMAD_SQ);
	u32 i;

	bitmap_zero(free, RMAD_SQ);
	for (i = 0; i < vp->nfree; i++)
		__set_bit(vp->free_send[i], free);
	for (i = 0; i < vp->nslots; i++) {
		struct rmad_slot *s = &vp->send[i];

		if (test_bit(i, free))
			continue;
		ib_dma_unmap_single(vp->dev, s->dma, RMAD_MAD_SIZE, DMA_TO_DEVICE);
		rmad_put_slot(s);
		rmad_rust_send_done(vp->ctx, s->wr_id, IB_WC_WR_FLUSH_ERR, 0);
	}
}

/*
 * Destroys a port opened by rmad_shim_vport_open. The sends still on the QP
 * are flushed by the device, whose completions are waited for a while
 * (ib_drain_sq cannot be used: it posts a work request that UD QPs reject);
 * then the receive queue is drained, the QP and CQ destroyed, and any send
 * whose completion did not come completes flushed here, so that every send
 * reports exactly once however long the device takes.
 */
void rmad_shim_vport_close(struct rmad_vport *vp)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	int i;

	if (!vp)
		return;
	if (vp->events.device)
		ib_unregister_event_handler(&vp->events);
	if (vp->qp) {
		ib_modify_qp(vp->qp, &attr, IB_QP_STATE);
		for (i = 0; i < 10000 && rmad_sends_busy(vp); i++)
			usleep_range(1000, 2000);
		ib_drain_rq(vp->qp);
		ib_destroy_qp(vp->qp);
	}
	if (vp->send_cq)
		ib_free_cq(vp->send_cq);
	if (vp->recv_cq)
		ib_free_cq(vp->recv_cq);
	rmad_flush_lost_sends(vp);
	rmad_free_slots(vp);
	if (vp->pd)
		ib_dealloc_pd(vp->pd);
	kvfree(vp);
}

/* Opens a private UD QP on (dev, port); completions go to Rust with ctx. */
struct rmad_vport *rmad_shim_vport_open(struct ib_device *dev, u32 port, void *ctx)
{
	struct ib_qp_init_attr init = {};
	struct rmad_vport *vp;
	int i, ret;

	/* 640 slots: too large to insist on physically contiguous memory. */
	vp = kvzalloc_obj(*vp);
	if (!vp)
		return ERR_PTR(-ENOMEM);
	vp->dev = dev;
	vp->port = port;
	vp->ctx = ctx;
	spin_lock_init(&vp->lock);

	vp->pd = ib_alloc_pd(dev, 0);
	if (IS_ERR(vp->pd)) {
		ret = PTR_ERR(vp->pd);
		vp->pd = NULL;
		goto err;
	}
	vp->send_cq = ib_alloc_cq(dev, vp, RMAD_SQ, 0, IB_POLL_WORKQUEUE);
	if (IS_ERR(vp->send_cq)) {
		ret = PTR_ERR(vp->send_cq);
		vp->send_cq = NULL;
		goto err;
	}
	/* One more than the receives: ib_drain_rq's own completion at close. */
	vp->recv_cq = ib_alloc_cq(dev, vp, RMAD_RQ + 1, 0, IB_POLL_WORKQUEUE);
	if (IS_ERR(vp->recv_cq)) {
		ret = PTR_ERR(vp->recv_cq);
		vp->recv_cq = NULL;
		goto err;
	}
	init.send_cq = vp->send_cq;
	init.recv_cq = vp->recv_cq;
	init.sq_sig_type = IB_SIGNAL_ALL_WR;
	init.cap.max_send_wr = RMAD_SQ;
	/* RMAD_RQ are posted; the one more is ib_drain_rq's. */
	init.cap.max_recv_wr = RMAD_RQ + 1;
	init.cap.max_send_sge = 1;
	init.cap.max_recv_sge = 1;
	init.qp_type = IB_QPT_UD;
	init.port_num = port;
	vp->qp = ib_create_qp(vp->pd, &init);
	if (IS_ERR(vp->qp)) {
		ret = PTR_ERR(vp->qp);
		vp->qp = NULL;
		goto err;
	}
	ret = rmad_qp_to_rts(vp->qp);
	if (ret)
		goto err;

	for (i = 0; i < RMAD_SQ; i++) {
		vp->send[i].vp = vp;
		vp->send[i].cqe.done = rmad_send_done;
		vp->send[i].buf = kzalloc(RMAD_MAD_SIZE, GFP_KERNEL);
		if (!vp->send[i].buf) {
			ret = -ENOMEM;
			goto err;
		}
		vp->free_send[vp->nfree++] = i;
		vp->nslots++;
	}
	for (i = 0; i < RMAD_RQ; i++) {
		struct rmad_slot *s = &vp->recv[i];

		s->vp = vp;
		s->cqe.done = rmad_recv_done;
		s->buf = kzalloc(RMAD_GRH_SIZE + RMAD_MAD_SIZE, GFP_KERNEL);
		if (!s->buf) {
			ret = -ENOMEM;
			goto err;
		}
		s->dma = ib_dma_map_single(dev, s->buf, RMAD_GRH_SIZE + RMAD_MAD_SIZE,
					   DMA_FROM_DEVICE);
		if (ib_dma_mapping_error(dev, s->dma)) {
			kfree(s->buf);
			s->buf = NULL;
			ret = -ENOMEM;
			goto err;
		}
		ret = rmad_post_recv(s);
		if (ret)
			goto err;
	}
	INIT_IB_EVENT_HANDLER(&vp->events, dev, rmad_port_event);
	ib_register_event_handler(&vp->events);
	return vp;
err:
	rmad_shim_vport_close(vp);
	return ERR_PTR(ret);
}

/*
 * The address handle for @attr, with one more user: from the cache, made
 * and cached at the first transmission to the destination, or (when every
 * cache entry is in use by another destination) made for this send alone.
 * The transmit work is the only caller, so the cache's keys and handles
 * change under no lock; the users counts are shared with send completions.
 */
static struct rmad_ah_entry *rmad_ah_get(struct rmad_vport *vp, const struct rdma_ah_attr *attr)
{
	struct rmad_ah_entry *e, *free = NULL;
	unsigned long flags;
	struct ib_ah *ah;
	int i;

	spin_lock_irqsave(&vp->lock, flags);
	for (i = 0; i < RMAD_AH_CACHE; i++) {
		e = &vp->ahs[i];
		if (e->ah && !memcmp(&e->attr, attr, sizeof(*attr))) {
			e->users++;
			spin_unlock_irqrestore(&vp->lock, flags);
			return e;
		}
		if (!free && (!e->ah || !e->users))
			free = e;
	}
	if (free)
		free->users++; /* reserved: no send completion destroys it now */
	spin_unlock_irqrestore(&vp->lock, flags);

	ah = rdma_create_ah(vp->pd, (struct rdma_ah_attr *)attr, RDMA_CREATE_AH_SLEEPABLE);
	if (IS_ERR(ah)) {
		if (free) {
			spin_lock_irqsave(&vp->lock, flags);
			free->users--;
			spin_unlock_irqrestore(&vp->lock, flags);
		}
		return ERR_CAST(ah);
	}
	if (!free) {
		e = kzalloc_obj(*e);
		if (!e) {
			rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
			return ERR_PTR(-ENOMEM);
		}
		e->ah = ah;
		e->users = 1;
		e->transient = true;
		return e;
	}
	/* An unused entry for another destination is replaced. */
	if (free->ah)
		rdma_destroy_ah(free->ah, RDMA_DESTROY_AH_SLEEPABLE);
	free->ah = ah;
	free->attr = *attr;
	return free;
}

/*
 * Sends one MAD from vp's QP to remote_qpn with the GSI Q_Key. The address is
 * given by its parts: with has_grh, dgid, sgid_index, hop_limit, traffic_class
 * and flow_label (and, on RoCE, the destination MAC that Rust resolved);
 * otherwise dlid and src_path_bits; and the SL. Called by the port's
 * transmit work only, in process context with no rmad lock held: an address
 * handle is made sleepably at the first transmission to a destination and
 * reused after that. Returns -EBUSY when the send queue is full.
 */
int rmad_shim_vport_send(struct rmad_vport *vp, const u8 *mad, u32 len, u64 wr_id,
			 u32 remote_qpn, u16 pkey_index, u32 dlid, u8 src_path_bits,
			 u8 has_grh, const u8 *dgid, u8 sgid_index, u8 hop_limit,
			 u8 traffic_class, u32 flow_label, u8 sl, const u8 *dmac)
{
	struct rdma_ah_attr attr = {};
	struct rmad_ah_entry *e;
	struct rmad_slot *s;
	struct ib_ud_wr wr = {};
	struct ib_sge sge;
	unsigned long flags;
	int ret;

	if (len > RMAD_MAD_SIZE)
		return -EINVAL;
	attr.type = rdma_ah_find_type(vp->dev, vp->port);
	rdma_ah_set_port_num(&attr, vp->port);
	rdma_ah_set_dlid(&attr, dlid);
	rdma_ah_set_path_bits(&attr, src_path_bits);
	rdma_ah_set_sl(&attr, sl);
	if (has_grh) {
		union ib_gid g;

		memcpy(g.raw, dgid, 16);
		rdma_ah_set_grh(&attr, &g, flow_label, sgid_index, hop_limit, traffic_class);
	}
	if (attr.type == RDMA_AH_ATTR_TYPE_ROCE)
		ether_addr_copy(attr.roce.dmac, dmac);

	spin_lock_irqsave(&vp->lock, flags);
	s = vp->nfree ? &vp->send[vp->free_send[--vp->nfree]] : NULL;
	spin_unlock_irqrestore(&vp->lock, flags);
	if (!s)
		return -EBUSY;
	e = rmad_ah_get(vp, &attr);
	if (IS_ERR(e)) {
		rmad_put_slot(s);
		return PTR_ERR(e);
	}
	s->ah = e;
	memset(s->buf, 0, RMAD_MAD_SIZE);
	memcpy(s->buf, mad, len);
	s->dma = ib_dma_map_single(vp->dev, s->buf, RMAD_MAD_SIZE, DMA_TO_DEVICE);
	if (ib_dma_mapping_error(vp->dev, s->dma)) {
		rmad_put_slot(s);
		return -ENOMEM;
	}
	s->wr_id = wr_id;
	sge.addr = s->dma;
	sge.length = RMAD_MAD_SIZE;
	sge.lkey = vp->pd->local_dma_lkey;
	wr.wr.wr_cqe = &s->cqe;
	wr.wr.sg_list = &sge;
	wr.wr.num_sge = 1;
	wr.wr.opcode = IB_WR_SEND;
	wr.wr.send_flags = IB_SEND_SIGNALED;
	wr.ah = e->ah;
	wr.remote_qpn = remote_qpn;
	wr.remote_qkey = IB_QP1_QKEY;
	wr.pkey_index = pkey_index;
	ret = ib_post_send(vp->qp, &wr.wr, NULL);
	if (ret) {
		ib_dma_unmap_single(vp->dev, s->dma, RMAD_MAD_SIZE, DMA_TO_DEVICE);
		rmad_put_slot(s);
	}
	return ret;
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

	rmad_fill_info(rwc->wc, rwc->recv_buf.grh, &info);
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

/* Completion of one address resolution (rmad_shim_resolve_dmac). */
struct rmad_resolution {
	struct completion done;
	int status;
};

static void rmad_resolved(int status, struct sockaddr *src_addr, struct rdma_dev_addr *addr,
			  void *context)
{
	struct rmad_resolution *r = context;

	r->status = status;
	complete(&r->done);
}

/*
 * Resolves the MAC of the next hop to @dgid from GID @sgid_index of (@dev,
 * @port), through ib_core's address resolution (the IP neighbour tables, as
 * rdma_create_user_ah does for user space). Process context; waits at most
 * about a second. Returns 0 with the MAC in @dmac and the route's hop limit
 * in @hop_limit, or an errno.
 */
int rmad_shim_resolve_dmac(struct ib_device *dev, u32 port, u8 sgid_index, const u8 *dgid,
			   u8 *dmac, u8 *hop_limit)
{
	const struct ib_gid_attr *sgid_attr;
	struct rmad_resolution r;
	struct rdma_dev_addr addr = {};
	union {
		struct sockaddr_in v4;
		struct sockaddr_in6 v6;
	} src, dst;
	union ib_gid g;
	int ret;

	sgid_attr = rdma_get_gid_attr(dev, port, sgid_index);
	if (IS_ERR(sgid_attr))
		return PTR_ERR(sgid_attr);
	memcpy(g.raw, dgid, sizeof(g.raw));
	rdma_gid2ip((struct sockaddr *)&src, &sgid_attr->gid);
	rdma_gid2ip((struct sockaddr *)&dst, &g);
	addr.net = &init_net;
	addr.sgid_attr = sgid_attr;
	init_completion(&r.done);
	ret = rdma_resolve_ip((struct sockaddr *)&src, (struct sockaddr *)&dst, &addr, 1000,
			      rmad_resolved, true, &r);
	if (!ret) {
		wait_for_completion(&r.done);
		ret = r.status;
	}
	if (!ret) {
		ether_addr_copy(dmac, addr.dst_dev_addr);
		*hop_limit = addr.hoplimit;
	}
	rdma_put_gid_attr(sgid_attr);
	return ret;
}

/*
 * The hop limit ib_init_ah_attr_from_wc() gives an answer from GID
 * @sgid_index of (@dev, @port) to @dgid: 0xff, or on RoCE the route's, from
 * the same resolution as rmad_shim_resolve_dmac() (so, on RoCE, it may wait
 * as long). Returns the hop limit, or an errno.
 */
int rmad_shim_reply_hop_limit(struct ib_device *dev, u32 port, u8 sgid_index, const u8 *dgid)
{
	u8 dmac[ETH_ALEN], hop_limit;
	int ret;

	if (!rdma_protocol_roce(dev, port))
		return 0xff;
	ret = rmad_shim_resolve_dmac(dev, port, sgid_index, dgid, dmac, &hop_limit);
	return ret ? ret : hop_limit;
}
