// SPDX-License-Identifier: GPL-2.0
/*
 * A requester in ib_core's own MAD layer (test flavour only), not part of
 * rmad's data path: an agent on QP1 that posts SENDs nobody answers and counts
 * what its handlers see, by kind (bits 8..13 of the TID's low half). The
 * hostile-peer suite (src/testing/suites/peer.rs) sends it, at QP1, the
 * datagrams it sends rmad's private QP, to compare the two layers' receive
 * rules side by side.
 */

#include <linux/atomic.h>
#include <linux/err.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/unaligned.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "ib_requester.h"
#include "peer.h"

struct rmad_test_requester {
	struct ib_mad_agent *agent;
	spinlock_t lock; /* protects sends */
	/* The outstanding send of each kind, until its send handler runs. */
	struct ib_mad_send_buf *sends[RMAD_TEST_REQUESTER_KINDS];
	atomic_t hostile[RMAD_TEST_REQUESTER_KINDS];
	atomic_t real[RMAD_TEST_REQUESTER_KINDS];
	atomic_t unsolicited[RMAD_TEST_REQUESTER_KINDS];
	atomic_t success[RMAD_TEST_REQUESTER_KINDS];
	atomic_t flushed[RMAD_TEST_REQUESTER_KINDS];
	atomic_t other[RMAD_TEST_REQUESTER_KINDS];
};

/* The kind of a TID (network order, as in the MAD). */
static u32 kind_of(__be64 tid)
{
	return (be64_to_cpu(tid) >> 8) % RMAD_TEST_REQUESTER_KINDS;
}

static void requester_send_handler(struct ib_mad_agent *agent, struct ib_mad_send_wc *wc)
{
	struct rmad_test_requester *r = agent->context;
	struct ib_mad_send_buf *b = wc->send_buf;
	u32 kind = kind_of(((struct ib_mad_hdr *)b->mad)->tid);

	spin_lock(&r->lock);
	r->sends[kind] = NULL;
	spin_unlock(&r->lock);
	if (wc->status == IB_WC_SUCCESS)
		atomic_inc(&r->success[kind]);
	else if (wc->status == IB_WC_WR_FLUSH_ERR)
		atomic_inc(&r->flushed[kind]);
	else
		atomic_inc(&r->other[kind]);
	rdma_destroy_ah(b->ah, RDMA_DESTROY_AH_SLEEPABLE);
	ib_free_send_mad(b);
}

static void requester_recv_handler(struct ib_mad_agent *agent, struct ib_mad_send_buf *send_buf,
				   struct ib_mad_recv_wc *rwc)
{
	struct rmad_test_requester *r = agent->context;
	const u8 *mad = (const u8 *)rwc->recv_buf.mad;
	u32 kind = kind_of(rwc->recv_buf.mad->mad_hdr.tid);

	if (!send_buf)
		atomic_inc(&r->unsolicited[kind]);
	else if (mad[RMAD_TEST_HOSTILE_AT] == RMAD_TEST_HOSTILE)
		atomic_inc(&r->hostile[kind]);
	else
		atomic_inc(&r->real[kind]);
	ib_free_recv_mad(rwc);
}

struct rmad_test_requester *rmad_test_requester_start(struct ib_device *dev, u32 port)
{
	struct rmad_test_requester *r;

	r = kzalloc_obj(*r);
	if (!r)
		return NULL;
	spin_lock_init(&r->lock);
	r->agent = ib_register_mad_agent(dev, port, IB_QPT_GSI, NULL, 0, requester_send_handler,
					 requester_recv_handler, r, 0);
	if (IS_ERR(r->agent)) {
		kfree(r);
		return NULL;
	}
	return r;
}

u32 rmad_test_requester_hi_tid(struct rmad_test_requester *r)
{
	return r->agent->hi_tid;
}

int rmad_test_requester_post(struct rmad_test_requester *r, u32 kind, const u8 *dgid,
			     u8 sgid_index, int timeout_ms)
{
	struct ib_mad_send_buf *b;
	struct ib_mad_hdr *hdr;
	struct ib_ah *ah;
	int ret;

	if (kind >= RMAD_TEST_REQUESTER_KINDS)
		return -EINVAL;
	ah = rmad_test_peer_ah(r->agent->qp->pd, r->agent->port_num, sgid_index, dgid);
	if (IS_ERR(ah))
		return PTR_ERR(ah);
	b = ib_create_send_mad(r->agent, 1, 0, 0, IB_MGMT_MAD_HDR, IB_MGMT_MAD_DATA, GFP_KERNEL,
			       IB_MGMT_BASE_VERSION);
	if (IS_ERR(b)) {
		rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
		return PTR_ERR(b);
	}
	hdr = b->mad;
	hdr->base_version = IB_MGMT_BASE_VERSION;
	/* Not PerfMgmt: rxe's process_mad answers those at QP1 before any agent sees them. */
	hdr->mgmt_class = IB_MGMT_CLASS_CONG_MGMT;
	hdr->class_version = 1;
	hdr->method = IB_MGMT_METHOD_SEND;
	hdr->tid = cpu_to_be64(((u64)r->agent->hi_tid << 32) | (kind << 8));
	b->ah = ah;
	b->timeout_ms = timeout_ms;
	b->retries = 0;
	spin_lock(&r->lock);
	ret = r->sends[kind] ? -EBUSY : 0;
	if (!ret)
		r->sends[kind] = b;
	spin_unlock(&r->lock);
	if (!ret) {
		ret = ib_post_send_mad(b, NULL);
		if (ret) {
			spin_lock(&r->lock);
			r->sends[kind] = NULL;
			spin_unlock(&r->lock);
		}
	}
	if (ret) {
		rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
		ib_free_send_mad(b);
	}
	return ret;
}

void rmad_test_requester_cancel(struct rmad_test_requester *r, u32 kind)
{
	struct ib_mad_send_buf *b;

	if (kind >= RMAD_TEST_REQUESTER_KINDS)
		return;
	/*
	 * Under the lock: the send handler clears sends[] under it before it
	 * frees the buffer, and ib_cancel_mad() calls no handler.
	 */
	spin_lock(&r->lock);
	b = r->sends[kind];
	if (b)
		ib_cancel_mad(b);
	spin_unlock(&r->lock);
}

void rmad_test_requester_counts(struct rmad_test_requester *r, u32 kind,
				struct rmad_test_kind_counts *out)
{
	if (kind >= RMAD_TEST_REQUESTER_KINDS)
		return;
	out->hostile = atomic_read(&r->hostile[kind]);
	out->real = atomic_read(&r->real[kind]);
	out->unsolicited = atomic_read(&r->unsolicited[kind]);
	out->success = atomic_read(&r->success[kind]);
	out->flushed = atomic_read(&r->flushed[kind]);
	out->other = atomic_read(&r->other[kind]);
}

void rmad_test_requester_stop(struct rmad_test_requester *r)
{
	if (!r)
		return;
	ib_unregister_mad_agent(r->agent);
	kfree(r);
}
