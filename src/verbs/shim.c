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
 *
 * This file holds the client, the port's queries, and the private QP: its
 * opening and closing, its sends, and its recovery after a failed send. What
 * arrives is in src/verbs/recv.c, addresses in src/verbs/address.c, and the
 * port they share in src/verbs/vport.h.
 */

#include <linux/bitmap.h>
#include <linux/build_bug.h>
#include <linux/delay.h>
#include <linux/etherdevice.h>
#include <linux/netdevice.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/stddef.h>
#include <linux/workqueue.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "vport.h"

/* The layout VerbsRecvInfo in src/verbs.rs has. */
static_assert(sizeof(struct rmad_recv_info) == 100);
static_assert(offsetof(struct rmad_recv_info, pkey_index) == 8);
static_assert(offsetof(struct rmad_recv_info, has_grh) == 11);
static_assert(offsetof(struct rmad_recv_info, sgid) == 12);
static_assert(offsetof(struct rmad_recv_info, dgid) == 28);
static_assert(offsetof(struct rmad_recv_info, flow_label) == 44);
static_assert(offsetof(struct rmad_recv_info, traffic_class) == 49);
static_assert(offsetof(struct rmad_recv_info, sl) == 50);
static_assert(offsetof(struct rmad_recv_info, via_qp1) == 51);
static_assert(offsetof(struct rmad_recv_info, network_hdr_type) == 52);
static_assert(offsetof(struct rmad_recv_info, vlan_id) == 54);
static_assert(offsetof(struct rmad_recv_info, wc_flags) == 56);
static_assert(offsetof(struct rmad_recv_info, grh) == 60);

/* The layout TxFrame in src/verbs/tx.rs has. */
static_assert(sizeof(struct rmad_tx) == 64);
static_assert(offsetof(struct rmad_tx, wr_id) == 8);
static_assert(offsetof(struct rmad_tx, len) == 16);
static_assert(offsetof(struct rmad_tx, pkey_index) == 32);
static_assert(offsetof(struct rmad_tx, has_grh) == 36);
static_assert(offsetof(struct rmad_tx, traffic_class) == 39);
static_assert(offsetof(struct rmad_tx, dgid) == 40);
static_assert(offsetof(struct rmad_tx, dmac) == 56);

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

/* The number of the private QP (what a peer that learnt it would send to). */
u32 rmad_shim_vport_qp_num(struct rmad_vport *vp)
{
	return vp->qp->qp_num;
}

/* The port's private QP, for agent->qp of the ib_mad interface (src/compat/ib_mad.c). */
struct ib_qp *rmad_shim_vport_qp(struct rmad_vport *vp)
{
	return vp->qp;
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
	bool destroy = false, retire = false;
	unsigned long flags;

	s->ah = NULL;
	spin_lock_irqsave(&vp->lock, flags);
	if (e)
		retire = rmad_ah_unuse(e, &destroy);
	vp->free_send[vp->nfree++] = s - vp->send;
	spin_unlock_irqrestore(&vp->lock, flags);
	/* Process context: the CQ is polled on a workqueue. */
	if (destroy) {
		rdma_destroy_ah(e->ah, RDMA_DESTROY_AH_SLEEPABLE);
		kfree(e);
	}
	/* Any context (a failed post from the caller's): the transmit work destroys it. */
	if (retire)
		rmad_ah_retire_later(vp);
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
	rmad_ah_destroy_all(vp);
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

static void rmad_port_event(struct ib_event_handler *h, struct ib_event *ev)
{
	struct rmad_vport *vp = container_of(h, struct rmad_vport, events);

	if (ev->element.port_num != vp->port)
		return;
	switch (ev->event) {
	case IB_EVENT_GID_CHANGE:
		atomic_inc(&vp->gid_gen);
		/* The count before the flag: a sweep that clears the flag reads the new count. */
		smp_mb__after_atomic();
		atomic_set(&vp->gid_changed, 1);
		break;
	/* Rust checks a post's P_Key index against the table again. */
	case IB_EVENT_PKEY_CHANGE:
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
 * the transmit work waits here, and what it has not drained yet runs it again
 * later, see rmad_shim_vport_recover).
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

/* The retry work: the transmit work runs again (rmad_shim_vport_recover). */
static void rmad_retry_work(struct work_struct *work)
{
	struct rmad_vport *vp = container_of(to_delayed_work(work), struct rmad_vport, retry);

	rmad_rust_kick(vp->ctx);
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
 * in every run, before it posts anything. Until the QP is back, something
 * always runs it again: while the device has not drained yet, the next send
 * completion or the last receive handler of the flush (rmad_recv_done);
 * after a failed query or transition, the retry work a little later. Runs
 * without a failed send post again the receives whose post failed. Returns
 * whether the QP was brought back.
 */
bool rmad_shim_vport_recover(struct rmad_vport *vp)
{
	struct ib_qp_attr attr = {};
	struct ib_qp_init_attr init;
	int i;

	if (atomic_xchg(&vp->send_failed, 0))
		atomic_set(&vp->recovering, 1);
	if (!atomic_read(&vp->recovering)) {
		rmad_repost(vp);
		return false;
	}
	/*
	 * Orders vp->recovering before the count of posted receives that
	 * rmad_drained reads; pairs with rmad_recv_done's decrement.
	 */
	smp_mb();
	if (ib_query_qp(vp->qp, &attr, IB_QP_STATE, &init))
		goto failed;
	switch (attr.qp_state) {
	case IB_QPS_RTS:
		atomic_set(&vp->recovering, 0);
		rmad_repost(vp);
		return false;
	case IB_QPS_SQE:
		if (!rmad_drained(vp, false))
			goto deferred;
		attr.qp_state = IB_QPS_RTS;
		attr.cur_qp_state = IB_QPS_SQE;
		if (ib_modify_qp(vp->qp, &attr, IB_QP_STATE | IB_QP_CUR_STATE))
			goto failed;
		rmad_repost(vp);
		break;
	default:
		/* ERR, or a state a reset that failed half way left. */
		if (!rmad_drained(vp, true))
			goto deferred;
		attr.qp_state = IB_QPS_RESET;
		if (ib_modify_qp(vp->qp, &attr, IB_QP_STATE) || rmad_qp_to_rts(vp->qp))
			goto failed;
		/* Every buffer is off the QP now: flushed, or waiting for a repost. */
		for (i = 0; i < RMAD_RQ; i++) {
			clear_bit(i, vp->unposted);
			if (rmad_post_recv(&vp->recv[i]))
				rmad_repost_later(&vp->recv[i]);
		}
		break;
	}
	atomic_set(&vp->recovering, 0);
	atomic_inc(&vp->resets);
	pr_info("rmad: %s port %u: the private QP failed a send and is back in RTS\n",
		dev_name(&vp->dev->dev), vp->port);
	return true;
failed:
	pr_warn_ratelimited("rmad: %s port %u: the private QP failed and could not be reset yet\n",
			    dev_name(&vp->dev->dev), vp->port);
	queue_delayed_work(system_dfl_wq, &vp->retry, msecs_to_jiffies(RMAD_RETRY_MS));
	return false;
deferred:
	atomic_inc(&vp->deferred);
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
	/*
	 * Nothing queues it any more: the receive completions are done, and the
	 * transmit work no longer runs (Rust disabled it before closing).
	 */
	cancel_delayed_work_sync(&vp->retry);
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
	INIT_DELAYED_WORK(&vp->retry, rmad_retry_work);

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
 * The address of @tx as ib_core takes it; with @mac, the destination MAC
 * too (RoCE), otherwise none (the key of a cached handle, rmad_ah_key).
 */
static void rmad_tx_attr(struct rmad_vport *vp, const struct rmad_tx *tx, bool mac,
			 struct rdma_ah_attr *attr)
{
	memset(attr, 0, sizeof(*attr));
	attr->type = rdma_ah_find_type(vp->dev, vp->port);
	rdma_ah_set_port_num(attr, vp->port);
	rdma_ah_set_dlid(attr, tx->dlid);
	rdma_ah_set_path_bits(attr, tx->src_path_bits);
	rdma_ah_set_sl(attr, tx->sl);
	if (tx->has_grh) {
		union ib_gid g;

		memcpy(g.raw, tx->dgid, 16);
		rdma_ah_set_grh(attr, &g, tx->flow_label, tx->sgid_index, tx->hop_limit,
				tx->traffic_class);
	}
	if (mac && attr->type == RDMA_AH_ATTR_TYPE_ROCE)
		ether_addr_copy(attr->roce.dmac, tx->dmac);
}

/* The fields of @tx that its address handle is made from (struct rmad_ah_tkey). */
static void rmad_tx_tkey(const struct rmad_tx *tx, struct rmad_ah_tkey *k)
{
	memcpy(k->dgid, tx->dgid, sizeof(k->dgid));
	k->dlid = tx->dlid;
	k->flow_label = tx->flow_label;
	k->sl = tx->sl;
	k->path_bits = tx->src_path_bits;
	k->has_grh = tx->has_grh;
	k->sgid_index = tx->sgid_index;
	k->hop_limit = tx->hop_limit;
	k->traffic_class = tx->traffic_class;
	k->pad[0] = 0;
	k->pad[1] = 0;
}

/*
 * Posts @tx from slot @s with the address handle of @e (one use of it taken
 * for the slot). On failure the slot and its use are given back. Any context:
 * ib_post_send is atomic-safe, as the C MAD layer calls it with interrupts
 * off.
 */
static int rmad_tx_post(struct rmad_vport *vp, struct rmad_slot *s, struct rmad_ah_entry *e,
			const struct rmad_tx *tx)
{
	struct ib_ud_wr wr = {};
	struct ib_sge sge;
	int ret;

	s->ah = e;
	if (tx->len == RMAD_MAD_SIZE) {
		/*
		 * The device reads the send's own MAD, as the C MAD layer's reads
		 * its send buffer's: the transmission (wr_id) keeps the record, and
		 * its MAD unwritten, until the send completion hands it back
		 * (src/verbs/tx.rs). No copy per post.
		 */
		s->dma = ib_dma_map_single(vp->dev, (void *)tx->mad, RMAD_MAD_SIZE,
					   DMA_TO_DEVICE);
	} else {
		memcpy(s->buf, tx->mad, tx->len);
		memset(s->buf + tx->len, 0, RMAD_MAD_SIZE - tx->len);
		s->dma = ib_dma_map_single(vp->dev, s->buf, RMAD_MAD_SIZE, DMA_TO_DEVICE);
	}
	if (ib_dma_mapping_error(vp->dev, s->dma)) {
		rmad_put_slot(s);
		return -ENOMEM;
	}
	s->wr_id = tx->wr_id;
	sge.addr = s->dma;
	sge.length = RMAD_MAD_SIZE;
	sge.lkey = vp->pd->local_dma_lkey;
	wr.wr.wr_cqe = &s->cqe;
	wr.wr.sg_list = &sge;
	wr.wr.num_sge = 1;
	wr.wr.opcode = IB_WR_SEND;
	wr.wr.send_flags = IB_SEND_SIGNALED;
	wr.ah = e->ah;
	wr.remote_qpn = tx->remote_qpn;
	wr.remote_qkey = IB_QP1_QKEY;
	wr.pkey_index = tx->pkey_index;
	ret = ib_post_send(vp->qp, &wr.wr, NULL);
	if (ret) {
		ib_dma_unmap_single(vp->dev, s->dma, RMAD_MAD_SIZE, DMA_TO_DEVICE);
		rmad_put_slot(s);
	}
	return ret;
}

/*
 * Sends one MAD from vp's QP to tx->remote_qpn with the GSI Q_Key. Called by
 * the port's transmit work only, in process context with no rmad lock held:
 * an address handle is made sleepably at the first transmission to a
 * destination and reused after that. Returns -EBUSY when the send queue is
 * full.
 */
int rmad_shim_vport_send(struct rmad_vport *vp, const struct rmad_tx *tx)
{
	struct rdma_ah_attr attr;
	struct rmad_ah_entry *e;
	struct rmad_slot *s;
	unsigned long flags;

	if (tx->len > RMAD_MAD_SIZE)
		return -EINVAL;
	rmad_tx_attr(vp, tx, true, &attr);
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
	return rmad_tx_post(vp, s, e, tx);
}

/*
 * Sends one MAD as rmad_shim_vport_send does, from the caller's context (any
 * context, rmad's locks held, so local interrupts are off: the port's lock is
 * taken without turning them off again): the C MAD layer's ib_post_send_mad
 * posts to the QP from its caller too. Only when nothing needs the transmit work: a ready
 * cached address handle for the destination (tx->dmac is not read), a free
 * slot, and a QP that no failed send may have left in the error state (a
 * failed send, or a recovery under way, sends everything through the
 * transmit work, which brings the QP back first). Both are decided under the
 * port's lock, which a recovery takes to see whether sends are in flight
 * (rmad_drained): a slot taken here keeps the QP from being reset under this
 * post. Returns -EBUSY when every slot is in use (a send completion frees
 * one, and runs the transmit work), -EAGAIN when the transmit work must send
 * it for another reason.
 */
int rmad_shim_vport_send_now(struct rmad_vport *vp, const struct rmad_tx *tx)
{
	struct rdma_ah_attr key;
	struct rmad_ah_tkey tk;
	struct rmad_ah_entry *e;
	struct rmad_slot *s;

	lockdep_assert_irqs_disabled();
	if (tx->len > RMAD_MAD_SIZE)
		return -EINVAL;
	rmad_tx_tkey(tx, &tk);
	/*
	 * Slots are looked at under the port's lock only: a send completion
	 * frees one under it before it looks whether a transmission waits, which
	 * the caller counted before this call (src/verbs/tx.rs).
	 */
	spin_lock(&vp->lock);
	if (!vp->nfree) {
		spin_unlock(&vp->lock);
		return -EBUSY;
	}
	e = NULL;
	if (!atomic_read(&vp->send_failed) && !atomic_read(&vp->recovering)) {
		/* The last destination again, as a run of posts alike is: no whole compare. */
		e = rmad_ah_find_last(vp, &tk);
		if (!e) {
			rmad_tx_attr(vp, tx, false, &key);
			e = rmad_ah_find_ready(vp, &key);
			if (e)
				rmad_ah_remember(vp, &tk, e);
		}
	}
	if (!e) {
		spin_unlock(&vp->lock);
		return -EAGAIN;
	}
	s = &vp->send[vp->free_send[--vp->nfree]];
	spin_unlock(&vp->lock);
	return rmad_tx_post(vp, s, e, tx);
}
