// SPDX-License-Identifier: GPL-2.0
/*
 * The C MAD layer's side of the two-node checks (test flavour only): the same
 * burst of requests as src/testing/fabric.rs sends through rmad, sent through
 * ib_core (ib_register_mad_agent, ib_post_send_mad, ib_cancel_mad,
 * ib_modify_mad on QP1 of rxe0), tallied into the same figures, so that
 * tests/vm/fabric.sh can compare the two line for line; and the RMPP GET of
 * src/testing/fabric/rmpp.rs through a kernel-RMPP ib_core agent.
 */

#include <linux/atomic.h>
#include <linux/build_bug.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/jiffies.h>
#include <linux/minmax.h>
#include <linux/slab.h>
#include <linux/stddef.h>
#include <linux/timekeeping.h>
#include <linux/wait.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "c_client.h"

/* The layout Figures in src/testing/fabric.rs has. */
static_assert(sizeof(struct rmad_fabric_tally) == 48);
static_assert(offsetof(struct rmad_fabric_tally, retries) == 28);
static_assert(offsetof(struct rmad_fabric_tally, status_other) == 44);
/* The layout CRate in src/testing/fabric.rs has. */
static_assert(sizeof(struct rmad_fabric_rate) == 16);
static_assert(offsetof(struct rmad_fabric_rate, retries) == 12);

#define FABRIC_PORT 1

/* What the handlers of one burst share. */
struct fabric_burst {
	struct rmad_fabric_tally *t;
	atomic_t *calls;	/* handler calls per request */
	u32 count;
	atomic_t completed;
	struct completion all_done;
	spinlock_t lock;	/* protects *t */
};

static void fabric_send_handler(struct ib_mad_agent *agent, struct ib_mad_send_wc *wc)
{
	struct fabric_burst *b = agent->context;
	unsigned long i = (unsigned long)wc->send_buf->context[0];
	unsigned long flags;

	if (i < b->count)
		atomic_inc(&b->calls[i]);
	spin_lock_irqsave(&b->lock, flags);
	switch (wc->status) {
	case IB_WC_SUCCESS:
		b->t->success++;
		break;
	case IB_WC_RESP_TIMEOUT_ERR:
		b->t->timeout++;
		break;
	case IB_WC_WR_FLUSH_ERR:
		b->t->flushed++;
		break;
	default:
		b->t->other++;
	}
	b->t->retries += wc->send_buf->retries;
	b->t->completed++;
	spin_unlock_irqrestore(&b->lock, flags);
	ib_free_send_mad(wc->send_buf);
	if (atomic_inc_return(&b->completed) == b->count)
		complete(&b->all_done);
}

static void fabric_recv_handler(struct ib_mad_agent *agent, struct ib_mad_send_buf *send_buf,
				struct ib_mad_recv_wc *rwc)
{
	struct fabric_burst *b = agent->context;
	u16 status = be16_to_cpu(rwc->recv_buf.mad->mad_hdr.status);
	unsigned long flags;

	if (send_buf) {
		spin_lock_irqsave(&b->lock, flags);
		b->t->responses++;
		if (status == 0)
			b->t->status_ok++;
		else if (status == 0x000c)
			b->t->status_unsupported++;
		else
			b->t->status_other++;
		spin_unlock_irqrestore(&b->lock, flags);
	}
	ib_free_recv_mad(rwc);
}

/* Posts request @i of the burst; acts on it at once (1 cancel, 2 modify). */
static int fabric_post_one(struct ib_mad_agent *agent, struct ib_ah *ah, u8 class, u8 method,
			   u32 i, int timeout_ms, int retries, int action, int action_ms)
{
	struct ib_mad_send_buf *sb;
	struct ib_mad_hdr *h;
	int ret;

	sb = ib_create_send_mad(agent, 1, 0, 0, IB_MGMT_MAD_HDR, IB_MGMT_MAD_DATA, GFP_KERNEL,
				IB_MGMT_BASE_VERSION);
	if (IS_ERR(sb))
		return PTR_ERR(sb);
	h = sb->mad;
	h->base_version = IB_MGMT_BASE_VERSION;
	h->mgmt_class = class;
	h->class_version = 1;
	h->method = method;
	h->tid = cpu_to_be64(((u64)agent->hi_tid << 32) | i);
	sb->ah = ah;
	sb->timeout_ms = timeout_ms;
	sb->retries = retries;
	sb->context[0] = (void *)(unsigned long)i;
	ret = ib_post_send_mad(sb, NULL);
	if (ret) {
		ib_free_send_mad(sb);
		return ret;
	}
	/* A send that completed already is refused (-EINVAL); its status stands. */
	if (action == 1)
		ib_cancel_mad(sb);
	else if (action == 2)
		ib_modify_mad(sb, action_ms);
	return 0;
}

/*
 * Sends @count requests of @class and @method through ib_core from port 1 of
 * @dev (the caller holds a reference on it) to QP1 at @dgid (from GID
 * @sgid_index), waits at most @wait_ms for every send handler, then 1 s more
 * for late responses, and fills @out.
 */
/* An address handle from @agent's port to @dgid, from its GID @sgid_index, hop limit 64. */
static struct ib_ah *fabric_ah(struct ib_mad_agent *agent, const u8 *dgid, u8 sgid_index)
{
	struct rdma_ah_attr attr = {};
	union ib_gid g;

	memcpy(g.raw, dgid, sizeof(g.raw));
	attr.type = rdma_ah_find_type(agent->device, FABRIC_PORT);
	rdma_ah_set_port_num(&attr, FABRIC_PORT);
	rdma_ah_set_grh(&attr, &g, 0, sgid_index, 64, 0);
	return rdma_create_ah(agent->qp->pd, &attr, RDMA_CREATE_AH_SLEEPABLE);
}

int rmad_fabric_c_burst(struct ib_device *dev, const u8 *dgid, u8 sgid_index, u8 class, u8 method,
			u32 count, int timeout_ms, int retries, int action, int action_ms,
			s64 wait_ms, struct rmad_fabric_tally *out)
{
	struct ib_mad_agent *agent;
	struct fabric_burst *b;
	struct ib_ah *ah;
	int ret = 0;
	u32 i;

	memset(out, 0, sizeof(*out));
	b = kzalloc_obj(*b);
	if (!b)
		return -ENOMEM;
	b->calls = kvcalloc(count, sizeof(*b->calls), GFP_KERNEL);
	if (!b->calls) {
		ret = -ENOMEM;
		goto free_b;
	}
	b->t = out;
	b->count = count;
	init_completion(&b->all_done);
	spin_lock_init(&b->lock);
	agent = ib_register_mad_agent(dev, FABRIC_PORT, IB_QPT_GSI, NULL, 0, fabric_send_handler,
				      fabric_recv_handler, b, 0);
	if (IS_ERR(agent)) {
		ret = PTR_ERR(agent);
		goto free_calls;
	}
	ah = fabric_ah(agent, dgid, sgid_index);
	if (IS_ERR(ah)) {
		ret = PTR_ERR(ah);
		goto unregister;
	}
	for (i = 0; i < count; i++) {
		ret = fabric_post_one(agent, ah, class, method, i, timeout_ms, retries, action,
				      action_ms);
		if (ret)
			break;
	}
	/* Only the posted requests complete. */
	if (ret) {
		b->count = i;
		if (atomic_read(&b->completed) < i)
			wait_for_completion_timeout(&b->all_done, msecs_to_jiffies(wait_ms));
	} else {
		wait_for_completion_timeout(&b->all_done, msecs_to_jiffies(wait_ms));
	}
	msleep(1000);
	for (i = 0; i < count; i++) {
		int n = atomic_read(&b->calls[i]);

		if (n == 0)
			out->never++;
		else if (n > 1)
			out->twice++;
	}
unregister:
	/* Flushes what is still outstanding: no handler runs after this. */
	ib_unregister_mad_agent(agent);
	if (!IS_ERR(ah))
		rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
free_calls:
	kvfree(b->calls);
free_b:
	kfree(b);
	return ret;
}

/* What the handlers of one RMPP GET share. */
struct fabric_rmpp {
	struct rmad_fabric_rmpp *r;
	struct completion done;
};

/*
 * Whether every data byte of segment n of the message in @rwc is n (mod 256), walking
 * its segments as ib_core holds them (data after @hdr_len in each).
 */
static bool fabric_rmpp_intact(struct ib_mad_recv_wc *rwc, u32 hdr_len)
{
	u32 left = rwc->mad_len > hdr_len ? rwc->mad_len - hdr_len : 0;
	struct ib_mad_recv_buf *seg;
	u32 n = 0, i, chunk;
	bool ok = true;

	list_for_each_entry(seg, &rwc->rmpp_list, list) {
		const u8 *d = (const u8 *)seg->mad + hdr_len;

		n++;
		chunk = min_t(u32, left, IB_MGMT_MAD_SIZE - hdr_len);
		for (i = 0; i < chunk; i++)
			ok = ok && d[i] == (u8)n;
		left -= chunk;
	}
	return ok && left == 0;
}

static void fabric_rmpp_send_handler(struct ib_mad_agent *agent, struct ib_mad_send_wc *wc)
{
	struct fabric_rmpp *f = agent->context;

	f->r->retries = wc->send_buf->retries;
	f->r->status = wc->status;
	ib_free_send_mad(wc->send_buf);
	complete(&f->done);
}

/* ib_core calls it before the send handler of the GET the answer matched. */
static void fabric_rmpp_recv_handler(struct ib_mad_agent *agent, struct ib_mad_send_buf *send_buf,
				     struct ib_mad_recv_wc *rwc)
{
	struct fabric_rmpp *f = agent->context;
	u32 hdr_len = ib_get_mad_data_offset(rwc->recv_buf.mad->mad_hdr.mgmt_class);

	if (send_buf) {
		f->r->len = rwc->mad_len;
		f->r->intact = fabric_rmpp_intact(rwc, hdr_len);
	}
	ib_free_recv_mad(rwc);
}

/*
 * The GET of @class, TID 1; segmented by ib_core's RMPP sender with @req_bytes of data
 * (every byte of segment n equal to n, mod 256) when @req_bytes is not 0.
 */
static struct ib_mad_send_buf *fabric_rmpp_get(struct ib_mad_agent *agent, u8 class,
					       u32 req_bytes)
{
	int hdr_len = req_bytes ? ib_get_mad_data_offset(class) : IB_MGMT_MAD_HDR;
	int data_len = req_bytes ? req_bytes : IB_MGMT_MAD_DATA;
	struct ib_mad_send_buf *msg;
	struct ib_rmpp_mad *m;
	int n;

	msg = ib_create_send_mad(agent, 1, 0, req_bytes != 0, hdr_len, data_len, GFP_KERNEL,
				 IB_MGMT_BASE_VERSION);
	if (IS_ERR(msg))
		return msg;
	m = msg->mad;
	m->mad_hdr.base_version = IB_MGMT_BASE_VERSION;
	m->mad_hdr.mgmt_class = class;
	m->mad_hdr.class_version = 1;
	m->mad_hdr.method = IB_MGMT_METHOD_GET;
	m->mad_hdr.tid = cpu_to_be64(((u64)agent->hi_tid << 32) | 1);
	if (req_bytes) {
		m->rmpp_hdr.rmpp_version = IB_MGMT_RMPP_VERSION;
		m->rmpp_hdr.rmpp_type = IB_MGMT_RMPP_TYPE_DATA;
		ib_set_rmpp_flags(&m->rmpp_hdr, IB_MGMT_RMPP_FLAG_ACTIVE);
		for (n = 1; n <= msg->seg_count; n++)
			memset(ib_get_rmpp_segment(msg, n), n & 0xff, msg->seg_size);
	}
	return msg;
}

int rmad_fabric_c_rmpp(struct ib_device *dev, const u8 *dgid, u8 sgid_index, u8 class,
		       int timeout_ms, int retries, u32 req_bytes, s64 wait_ms,
		       struct rmad_fabric_rmpp *out)
{
	struct ib_mad_send_buf *msg;
	struct ib_mad_agent *agent;
	struct fabric_rmpp *f;
	struct ib_ah *ah;
	int ret;

	memset(out, 0, sizeof(*out));
	out->status = -1;
	f = kzalloc_obj(*f);
	if (!f)
		return -ENOMEM;
	f->r = out;
	init_completion(&f->done);
	agent = ib_register_mad_agent(dev, FABRIC_PORT, IB_QPT_GSI, NULL, IB_MGMT_RMPP_VERSION,
				      fabric_rmpp_send_handler, fabric_rmpp_recv_handler, f, 0);
	if (IS_ERR(agent)) {
		ret = PTR_ERR(agent);
		goto free_f;
	}
	ah = fabric_ah(agent, dgid, sgid_index);
	if (IS_ERR(ah)) {
		ret = PTR_ERR(ah);
		goto unregister;
	}
	msg = fabric_rmpp_get(agent, class, req_bytes);
	if (IS_ERR(msg)) {
		ret = PTR_ERR(msg);
		goto destroy;
	}
	msg->ah = ah;
	msg->timeout_ms = timeout_ms;
	msg->retries = retries;
	ret = ib_post_send_mad(msg, NULL);
	if (ret) {
		ib_free_send_mad(msg);
		goto destroy;
	}
	/* Killable: a transfer may take minutes, longer than the hung-task detector waits. */
	wait_for_completion_killable_timeout(&f->done, msecs_to_jiffies(wait_ms));
destroy:
	/* Unregistered first: no handler runs after this, and nothing uses the AH. */
	ib_unregister_mad_agent(agent);
	rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
	kfree(f);
	return ret;
unregister:
	ib_unregister_mad_agent(agent);
free_f:
	kfree(f);
	return ret;
}

/* What the handlers of one windowed run share. */
struct fabric_rate {
	u32 count;
	atomic_t completed, answered, retries;
	u64 end_ns;
	wait_queue_head_t room;		/* woken by each send handler */
	struct completion all_done;
};

static void rate_send_handler(struct ib_mad_agent *agent, struct ib_mad_send_wc *wc)
{
	struct fabric_rate *f = agent->context;

	if (wc->status == IB_WC_SUCCESS)
		atomic_inc(&f->answered);
	atomic_add(wc->send_buf->retries, &f->retries);
	ib_free_send_mad(wc->send_buf);
	if (atomic_inc_return(&f->completed) == f->count) {
		f->end_ns = ktime_get_ns();
		complete(&f->all_done);
	}
	wake_up(&f->room);
}

static void rate_recv_handler(struct ib_mad_agent *agent, struct ib_mad_send_buf *send_buf,
			      struct ib_mad_recv_wc *rwc)
{
	ib_free_recv_mad(rwc);
}

int rmad_fabric_c_rate(struct ib_device *dev, const u8 *dgid, u8 sgid_index, u8 class,
		       u32 count, u32 window, int timeout_ms, int retries, s64 wait_ms,
		       struct rmad_fabric_rate *out)
{
	long wait = msecs_to_jiffies(wait_ms);
	struct ib_mad_agent *agent;
	struct fabric_rate *f;
	struct ib_ah *ah;
	u64 t0;
	int ret = 0;
	u32 i;

	memset(out, 0, sizeof(*out));
	if (!count || !window)
		return -EINVAL;
	f = kzalloc_obj(*f);
	if (!f)
		return -ENOMEM;
	f->count = count;
	init_waitqueue_head(&f->room);
	init_completion(&f->all_done);
	agent = ib_register_mad_agent(dev, FABRIC_PORT, IB_QPT_GSI, NULL, 0, rate_send_handler,
				      rate_recv_handler, f, 0);
	if (IS_ERR(agent)) {
		ret = PTR_ERR(agent);
		goto free_f;
	}
	ah = fabric_ah(agent, dgid, sgid_index);
	if (IS_ERR(ah)) {
		ret = PTR_ERR(ah);
		goto unregister;
	}
	t0 = ktime_get_ns();
	for (i = 0; i < count; i++) {
		/* At most @window outstanding: GET i waits for the handler of GET i - window. */
		if (!wait_event_timeout(f->room, i - atomic_read(&f->completed) < window, wait)) {
			ret = -ETIMEDOUT;
			break;
		}
		ret = fabric_post_one(agent, ah, class, IB_MGMT_METHOD_GET, i, timeout_ms, retries,
				      0, 0);
		if (ret)
			break;
	}
	if (!ret && !wait_for_completion_timeout(&f->all_done, wait))
		ret = -ETIMEDOUT;
	if (!ret) {
		out->ns = f->end_ns - t0;
		out->answered = atomic_read(&f->answered);
		out->retries = atomic_read(&f->retries);
	}
	/* Flushes what is still outstanding: no handler runs after this. */
	ib_unregister_mad_agent(agent);
	rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
	kfree(f);
	return ret;
unregister:
	ib_unregister_mad_agent(agent);
free_f:
	kfree(f);
	return ret;
}
