// SPDX-License-Identifier: GPL-2.0
/*
 * The driver of `make bench` (test flavour only): the same measurements, in
 * the same boot, on soft-RoCE rxe0, for three implementations of MAD agents
 * and a floor:
 *
 *   c          the C MAD layer (ib_register_mad_agent, ib_post_send_mad,
 *              ib_modify_mad, ib_cancel_mad) on ib_core's QP1;
 *   rmad       rmad's Rust API (src/testing/bench.rs implements its operations);
 *   rmad-capi  rmad's exported C API (include/rmad.h), called from here;
 *   floor      spin_lock_irqsave + an O(1) list move + unlock + queue_work.
 *
 * Every implementation is driven by the same code below through a table of
 * operations, so that each timed loop makes the same indirect call per
 * operation. Sends use vendor class 0x0b (range 1, no OUI), which neither
 * ib_core nor rxe answers. The sends that must stay unanswered go to a GID
 * that no port has (::ffff:10.0.0.2, through the port's IPv4 GID), which rxe
 * drops on receipt; the GETs that must be answered go to QP1 of the port
 * itself through its GID 0 (IPv6), where the responder registered here (an
 * ib_core agent) answers them. (Not through the IPv4 GID: the C MAD layer
 * compares a response's GRH with the request's GIDs, and for RoCEv2 over
 * IPv4 that area holds an IPv4 header, so it never matches a response there.)
 *
 * Each figure is printed as one line "bench-json: {...}" per repetition;
 * scripts/bench-report.py turns them into the tables and the plot. Figures
 * only: nothing is asserted.
 */

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/etherdevice.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/timekeeping.h>
#include <linux/vmstat.h>
#include <linux/workqueue.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "../../../include/rmad.h"
#include "bench.h"

#define BENCH_CLASS 0x0b
#define BENCH_PORT 1
/* The port's IPv6 link-local GID (requests the responder answers). */
#define BENCH_GID_INDEX 0
/* The port's IPv4-mapped GID (unanswered sends, to a GID nobody has). */
#define BENCH_SILENT_GID_INDEX 1
/* Timeout of sends that wait for a response nobody gives (10 minutes). */
#define BENCH_LONG_MS 600000
/* Longest wait for any event of the benchmark. */
#define BENCH_WAIT_MS 300000

/* What a send is, carried in its context: its handler counts it there. */
enum bench_kind {
	KIND_SILENT = 1,	/* one of the n outstanding sends nobody answers */
	KIND_MARKER,		/* timeout 0: completes when the device took it */
	KIND_REQ,		/* a GET the responder answers */
	KIND_GATE,		/* its handler holds the delivery queue */
	KIND_RESP,		/* (receive handler) a matched response */
};

/* Counts events and notes when a target count was reached. */
struct bench_ctr {
	atomic_t hits;
	int target;
	u64 at_ns;
	struct completion done;
};

/* The counters of one round, shared by the handlers of every implementation. */
struct rmad_bench_round {
	struct bench_ctr silent, marker, req, resp, gate_in;
	struct completion gate_go;
	atomic_t timed_out, flushed, other;
};

static void ctr_init(struct bench_ctr *c)
{
	atomic_set(&c->hits, 0);
	c->target = INT_MAX;
	c->at_ns = 0;
	init_completion(&c->done);
}

/* Expects the count to reach @target (cumulative); set before the events start. */
static void ctr_expect(struct bench_ctr *c, int target)
{
	reinit_completion(&c->done);
	WRITE_ONCE(c->target, target);
	/* Orders the target before reading the count; ctr_hit() pairs with it. */
	smp_mb();
	if (atomic_read(&c->hits) >= target) {
		c->at_ns = ktime_get_ns();
		complete(&c->done);
	}
}

static void ctr_hit(struct bench_ctr *c)
{
	if (atomic_inc_return(&c->hits) == READ_ONCE(c->target)) {
		c->at_ns = ktime_get_ns();
		complete(&c->done);
	}
}

/* Waits in one-second slices (so that no hang detector mistakes it for a hang). */
static int wait_slices(struct completion *done, unsigned int ms)
{
	unsigned int waited;

	for (waited = 0; waited < ms; waited += 1000)
		if (wait_for_completion_timeout(done, HZ))
			return 0;
	return -ETIMEDOUT;
}

static int ctr_wait(struct bench_ctr *c)
{
	return wait_slices(&c->done, BENCH_WAIT_MS);
}

/* For events that need a packet through the device, which UD may drop. */
#define BENCH_PACKET_WAIT_MS 20000

/* Called by every implementation's handlers: @kind of the send, its @status. */
void rmad_bench_event(struct rmad_bench_round *r, int kind, int status)
{
	if (kind == KIND_SILENT) {
		if (status == IB_WC_RESP_TIMEOUT_ERR)
			atomic_inc(&r->timed_out);
		else if (status == IB_WC_WR_FLUSH_ERR)
			atomic_inc(&r->flushed);
		else
			atomic_inc(&r->other);
	}
	switch (kind) {
	case KIND_SILENT:
		ctr_hit(&r->silent);
		break;
	case KIND_MARKER:
		ctr_hit(&r->marker);
		break;
	case KIND_REQ:
		ctr_hit(&r->req);
		break;
	case KIND_RESP:
		ctr_hit(&r->resp);
		break;
	case KIND_GATE:
		ctr_hit(&r->gate_in);
		wait_slices(&r->gate_go, BENCH_WAIT_MS);
		break;
	}
}

/* The device: rxe0, found through an ib_client of our own. */

static struct ib_device *bench_dev;

static int bench_client_add(struct ib_device *dev)
{
	if (!strcmp(dev_name(&dev->dev), "rxe0"))
		WRITE_ONCE(bench_dev, dev);
	return 0;
}

static void bench_client_remove(struct ib_device *dev, void *data)
{
	if (READ_ONCE(bench_dev) == dev)
		WRITE_ONCE(bench_dev, NULL);
}

static struct ib_client bench_client = {
	.name = "rmad_bench",
	.add = bench_client_add,
	.remove = bench_client_remove,
};

/* Destination of every send: QP1 of the port itself, through its GID 1. */
static union ib_gid bench_gid;
static u8 bench_mac[ETH_ALEN];
/* Destination of the unanswered sends: ::ffff:10.0.0.2, which no port has. */
static const union ib_gid bench_silent_gid = {
	.raw = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2 },
};

static int bench_addr(struct ib_device *dev)
{
	const struct ib_gid_attr *attr;
	int ret;

	ret = rdma_query_gid(dev, BENCH_PORT, BENCH_GID_INDEX, &bench_gid);
	if (ret)
		return ret;
	attr = rdma_get_gid_attr(dev, BENCH_PORT, BENCH_GID_INDEX);
	if (IS_ERR(attr))
		return PTR_ERR(attr);
	ret = rdma_read_gid_l2_fields(attr, NULL, bench_mac);
	rdma_put_gid_attr(attr);
	return ret;
}

static void bench_fill(void *mad, u32 hi_tid, u32 lo, u8 method)
{
	struct ib_mad_hdr *h = mad;

	memset(h, 0, sizeof(*h));
	h->base_version = IB_MGMT_BASE_VERSION;
	h->mgmt_class = BENCH_CLASS;
	h->class_version = 1;
	h->method = method;
	h->tid = cpu_to_be64(((u64)hi_tid << 32) | lo);
}

/*
 * The responder: an ib_core agent on QP1 for GETs of the class. It answers at
 * once (ECHO) or keeps its answers until released (HOLD).
 */
enum { RESP_ECHO, RESP_HOLD };

static struct {
	struct ib_mad_agent *agent;
	int mode;
	spinlock_t lock;	/* protects held, nheld */
	struct ib_mad_send_buf **held;
	u32 nheld, hold_max;
	atomic_t seen;
} resp;

static void resp_send_handler(struct ib_mad_agent *agent, struct ib_mad_send_wc *wc)
{
	rdma_destroy_ah(wc->send_buf->ah, RDMA_DESTROY_AH_SLEEPABLE);
	ib_free_send_mad(wc->send_buf);
}

static void resp_post(struct ib_mad_send_buf *b)
{
	if (ib_post_send_mad(b, NULL)) {
		rdma_destroy_ah(b->ah, RDMA_DESTROY_AH_SLEEPABLE);
		ib_free_send_mad(b);
	}
}

static void resp_recv_handler(struct ib_mad_agent *agent, struct ib_mad_send_buf *send_buf,
			      struct ib_mad_recv_wc *rwc)
{
	const struct ib_mad *req = rwc->recv_buf.mad;
	struct ib_mad_send_buf *b;
	struct ib_mad *out;
	struct ib_ah *ah;
	bool kept = false;

	if (send_buf || ib_response_mad(&req->mad_hdr))
		goto out;
	atomic_inc(&resp.seen);
	ah = ib_create_ah_from_wc(agent->qp->pd, rwc->wc, rwc->recv_buf.grh, agent->port_num);
	if (IS_ERR(ah))
		goto out;
	b = ib_create_send_mad(agent, rwc->wc->src_qp, rwc->wc->pkey_index, 0, IB_MGMT_MAD_HDR,
			       IB_MGMT_MAD_DATA, GFP_KERNEL, IB_MGMT_BASE_VERSION);
	if (IS_ERR(b)) {
		rdma_destroy_ah(ah, RDMA_DESTROY_AH_SLEEPABLE);
		goto out;
	}
	out = b->mad;
	memcpy(out, req, sizeof(*out));
	out->mad_hdr.method = IB_MGMT_METHOD_GET_RESP;
	out->mad_hdr.status = 0;
	b->ah = ah;
	if (READ_ONCE(resp.mode) == RESP_HOLD) {
		spin_lock(&resp.lock);
		if (resp.nheld < resp.hold_max) {
			resp.held[resp.nheld++] = b;
			kept = true;
		}
		spin_unlock(&resp.lock);
	}
	if (!kept)
		resp_post(b);
out:
	ib_free_recv_mad(rwc);
}

static int resp_start(struct ib_device *dev, u32 hold_max)
{
	struct ib_mad_reg_req req = {
		.mgmt_class = BENCH_CLASS,
		.mgmt_class_version = 1,
	};

	spin_lock_init(&resp.lock);
	resp.mode = RESP_ECHO;
	resp.nheld = 0;
	resp.hold_max = hold_max;
	resp.held = kvcalloc(hold_max, sizeof(*resp.held), GFP_KERNEL);
	if (!resp.held)
		return -ENOMEM;
	set_bit(IB_MGMT_METHOD_GET, req.method_mask);
	resp.agent = ib_register_mad_agent(dev, BENCH_PORT, IB_QPT_GSI, &req, 0,
					   resp_send_handler, resp_recv_handler, NULL, 0);
	if (IS_ERR(resp.agent)) {
		kvfree(resp.held);
		return PTR_ERR(resp.agent);
	}
	return 0;
}

/* Holds the answers from now on, until released. */
static void resp_hold(void)
{
	spin_lock(&resp.lock);
	WRITE_ONCE(resp.mode, RESP_HOLD);
	spin_unlock(&resp.lock);
}

/* Posts every held answer and goes back to answering at once. */
static void resp_release(void)
{
	u32 i, n;

	spin_lock(&resp.lock);
	WRITE_ONCE(resp.mode, RESP_ECHO);
	n = resp.nheld;
	resp.nheld = 0;
	spin_unlock(&resp.lock);
	for (i = 0; i < n; i++)
		resp_post(resp.held[i]);
}

static void resp_stop(void)
{
	resp_release();
	ib_unregister_mad_agent(resp.agent);
	kvfree(resp.held);
}

/* The operations every implementation provides; @p is its private state. */
struct bench_ops {
	const char *name;
	/* Registers the agents; creates @nreq requests and the markers. */
	int (*open)(void *p, struct rmad_bench_round *r, u32 n, u32 nreq);
	/* Creates the n silent sends (timeout @timeout_ms, no retries). */
	int (*create)(void *p, int timeout_ms);
	int (*post)(void *p, u32 i);
	/* Waits until the device has taken the n silent sends. */
	int (*wait_sent)(void *p);
	int (*modify)(void *p, u32 i, int ms);
	int (*cancel)(void *p, u32 i);
	int (*post_req)(void *p, u32 j);
	/* Posts the next marker, from the gate agent if @gate. */
	int (*post_marker)(void *p, int gate);
	int (*post_gate)(void *p);
	int (*cancel_gate)(void *p);
	/* Unregisters (flushing what is outstanding) and frees everything. */
	void (*close)(void *p);
	/* The longest interrupts-off hold since the last call, or -1. */
	s64 (*irqoff_take)(void);
};

/* Markers per round: two on the agent, one on the gate agent (even and odd indexes). */
#define BENCH_MARKERS 4

/* The C MAD layer. */

struct c_impl {
	struct ib_device *dev;
	struct rmad_bench_round *r;
	struct ib_mad_agent *agent, *gate_agent;
	struct ib_ah *ah, *ah_silent, *gate_ah;
	u32 n, nreq, markers_posted[2];
	struct ib_mad_send_buf **bufs, **reqs, *markers[BENCH_MARKERS], *gate_buf;
	u8 *posted;		/* per silent send */
	bool gate_posted;
};

static void c_send_handler(struct ib_mad_agent *agent, struct ib_mad_send_wc *wc)
{
	int kind = (long)wc->send_buf->context[0];

	ib_free_send_mad(wc->send_buf);
	rmad_bench_event(agent->context, kind, wc->status);
}

static void c_recv_handler(struct ib_mad_agent *agent, struct ib_mad_send_buf *send_buf,
			   struct ib_mad_recv_wc *rwc)
{
	ib_free_recv_mad(rwc);
	if (send_buf)
		rmad_bench_event(agent->context, KIND_RESP, 0);
}

static struct ib_ah *c_ah(struct ib_mad_agent *agent, const union ib_gid *dgid, u8 sgid_index)
{
	struct rdma_ah_attr attr = {};
	union ib_gid g = *dgid;

	attr.type = rdma_ah_find_type(agent->device, BENCH_PORT);
	rdma_ah_set_port_num(&attr, BENCH_PORT);
	rdma_ah_set_grh(&attr, &g, 0, sgid_index, 64, 0);
	if (attr.type == RDMA_AH_ATTR_TYPE_ROCE)
		memcpy(attr.roce.dmac, bench_mac, ETH_ALEN);
	return rdma_create_ah(agent->qp->pd, &attr, RDMA_CREATE_AH_SLEEPABLE);
}

static struct ib_mad_send_buf *c_buf(struct ib_mad_agent *agent, struct ib_ah *ah, u32 lo,
				     u8 method, int timeout_ms, long kind)
{
	struct ib_mad_send_buf *b;

	b = ib_create_send_mad(agent, 1, 0, 0, IB_MGMT_MAD_HDR, IB_MGMT_MAD_DATA, GFP_KERNEL,
			       IB_MGMT_BASE_VERSION);
	if (IS_ERR(b))
		return NULL;
	bench_fill(b->mad, agent->hi_tid, lo, method);
	b->ah = ah;
	b->timeout_ms = timeout_ms;
	b->retries = 0;
	b->context[0] = (void *)kind;
	return b;
}

static void c_close(void *p);

static int c_open(void *p, struct rmad_bench_round *r, u32 n, u32 nreq)
{
	struct c_impl *c = p;
	u32 j;

	memset(c, 0, sizeof(*c));
	c->dev = READ_ONCE(bench_dev);
	c->r = r;
	c->n = n;
	c->nreq = nreq;
	if (!c->dev)
		return -ENODEV;
	c->bufs = kvcalloc(n, sizeof(*c->bufs), GFP_KERNEL);
	c->posted = kvcalloc(n, 1, GFP_KERNEL);
	c->reqs = kvcalloc(nreq ? nreq : 1, sizeof(*c->reqs), GFP_KERNEL);
	if (!c->bufs || !c->posted || !c->reqs)
		goto fail;
	c->agent = ib_register_mad_agent(c->dev, BENCH_PORT, IB_QPT_GSI, NULL, 0, c_send_handler,
					 c_recv_handler, r, 0);
	if (IS_ERR(c->agent)) {
		c->agent = NULL;
		goto fail;
	}
	c->gate_agent = ib_register_mad_agent(c->dev, BENCH_PORT, IB_QPT_GSI, NULL, 0,
					      c_send_handler, c_recv_handler, r, 0);
	if (IS_ERR(c->gate_agent)) {
		c->gate_agent = NULL;
		goto fail;
	}
	c->ah = c_ah(c->agent, &bench_gid, BENCH_GID_INDEX);
	if (IS_ERR(c->ah)) {
		c->ah = NULL;
		goto fail;
	}
	c->ah_silent = c_ah(c->agent, &bench_silent_gid, BENCH_SILENT_GID_INDEX);
	if (IS_ERR(c->ah_silent)) {
		c->ah_silent = NULL;
		goto fail;
	}
	c->gate_ah = c_ah(c->gate_agent, &bench_silent_gid, BENCH_SILENT_GID_INDEX);
	if (IS_ERR(c->gate_ah)) {
		c->gate_ah = NULL;
		goto fail;
	}
	for (j = 0; j < nreq; j++) {
		c->reqs[j] = c_buf(c->agent, c->ah, n + j, IB_MGMT_METHOD_GET, BENCH_LONG_MS,
				   KIND_REQ);
		if (!c->reqs[j])
			goto fail;
	}
	for (j = 0; j < BENCH_MARKERS; j++) {
		c->markers[j] = c_buf(j % 2 ? c->gate_agent : c->agent,
				      j % 2 ? c->gate_ah : c->ah_silent, n + nreq + j,
				      IB_MGMT_METHOD_SEND, 0, KIND_MARKER);
		if (!c->markers[j])
			goto fail;
	}
	c->gate_buf = c_buf(c->gate_agent, c->gate_ah, 0, IB_MGMT_METHOD_SEND, BENCH_LONG_MS,
			    KIND_GATE);
	if (!c->gate_buf)
		goto fail;
	return 0;
fail:
	c_close(c);
	return -ENOMEM;
}

static int c_create(void *p, int timeout_ms)
{
	struct c_impl *c = p;
	u32 i;

	for (i = 0; i < c->n; i++) {
		c->bufs[i] = c_buf(c->agent, c->ah_silent, i, IB_MGMT_METHOD_SEND, timeout_ms,
				   KIND_SILENT);
		if (!c->bufs[i])
			return -ENOMEM;
	}
	return 0;
}

static int c_post(void *p, u32 i)
{
	struct c_impl *c = p;
	int ret = ib_post_send_mad(c->bufs[i], NULL);

	if (!ret)
		c->posted[i] = 1;
	return ret;
}

static int c_modify(void *p, u32 i, int ms)
{
	struct c_impl *c = p;

	return ib_modify_mad(c->bufs[i], ms);
}

static int c_cancel(void *p, u32 i)
{
	struct c_impl *c = p;

	ib_cancel_mad(c->bufs[i]);
	return 0;
}

static int c_post_req(void *p, u32 j)
{
	struct c_impl *c = p;
	int ret = ib_post_send_mad(c->reqs[j], NULL);

	if (!ret)
		c->reqs[j] = NULL;
	return ret;
}

/* Markers 0, 2, ... are the agent's; 1, 3, ... the gate agent's. */
static u32 marker_index(u32 *posted, int gate)
{
	return 2 * posted[!!gate]++ + !!gate;
}

static int c_post_marker(void *p, int gate)
{
	struct c_impl *c = p;
	u32 k = marker_index(c->markers_posted, gate);
	int ret;

	if (k >= BENCH_MARKERS || !c->markers[k])
		return -ENOSPC;
	ret = ib_post_send_mad(c->markers[k], NULL);
	if (!ret)
		c->markers[k] = NULL;
	return ret;
}

/* The C layer's send completions are in order: a marker posted last completes last. */
static int c_wait_sent(void *p)
{
	struct c_impl *c = p;
	struct bench_ctr *m = &c->r->marker;
	int ret;

	ctr_expect(m, atomic_read(&m->hits) + 1);
	ret = c_post_marker(p, 0);
	return ret ?: ctr_wait(m);
}

static int c_post_gate(void *p)
{
	struct c_impl *c = p;
	int ret = ib_post_send_mad(c->gate_buf, NULL);

	if (!ret)
		c->gate_posted = true;
	return ret;
}

static int c_cancel_gate(void *p)
{
	struct c_impl *c = p;

	ib_cancel_mad(c->gate_buf);
	c->gate_buf = NULL;
	return 0;
}

static void c_close(void *p)
{
	struct c_impl *c = p;
	u32 i;

	/* Unposted buffers hold a reference on their agent: free them first. */
	if (c->bufs)
		for (i = 0; i < c->n; i++)
			if (c->bufs[i] && !c->posted[i])
				ib_free_send_mad(c->bufs[i]);
	if (c->reqs)
		for (i = 0; i < c->nreq; i++)
			if (c->reqs[i])
				ib_free_send_mad(c->reqs[i]);
	for (i = 0; i < BENCH_MARKERS; i++)
		if (c->markers[i])
			ib_free_send_mad(c->markers[i]);
	/* A posted gate buffer goes with the unregistration's flush. */
	if (c->gate_buf && !c->gate_posted)
		ib_free_send_mad(c->gate_buf);
	if (c->agent)
		ib_unregister_mad_agent(c->agent);
	if (c->gate_agent)
		ib_unregister_mad_agent(c->gate_agent);
	if (c->ah)
		rdma_destroy_ah(c->ah, RDMA_DESTROY_AH_SLEEPABLE);
	if (c->ah_silent)
		rdma_destroy_ah(c->ah_silent, RDMA_DESTROY_AH_SLEEPABLE);
	if (c->gate_ah)
		rdma_destroy_ah(c->gate_ah, RDMA_DESTROY_AH_SLEEPABLE);
	kvfree(c->bufs);
	kvfree(c->posted);
	kvfree(c->reqs);
	memset(c, 0, sizeof(*c));
}

static s64 no_irqoff(void)
{
	return -1;
}

static const struct bench_ops c_ops = {
	.name = "c",
	.open = c_open,
	.create = c_create,
	.post = c_post,
	.wait_sent = c_wait_sent,
	.modify = c_modify,
	.cancel = c_cancel,
	.post_req = c_post_req,
	.post_marker = c_post_marker,
	.post_gate = c_post_gate,
	.cancel_gate = c_cancel_gate,
	.close = c_close,
	.irqoff_take = no_irqoff,
};

/* rmad's C API (include/rmad.h), as a client module would call it. */

struct capi_impl {
	struct rmad_bench_round *r;
	struct rmad_agent *agent, *gate_agent;
	struct rmad_ah ah, ah_silent;
	u32 n, nreq, markers_posted[2];
	struct rmad_send_buf **bufs, **reqs, *markers[BENCH_MARKERS], *gate_buf;
	u8 *posted, *req_posted;
};

static void capi_send_handler(struct rmad_agent *agent, struct rmad_send_wc *wc)
{
	int kind = (long)rmad_send_buf_context(wc->send_buf);

	rmad_free_send_mad(wc->send_buf);
	rmad_bench_event(wc->context, kind, wc->status);
}

static void capi_recv_handler(struct rmad_agent *agent, struct rmad_send_buf *send_buf,
			      const struct rmad_recv_wc *wc)
{
	if (send_buf)
		rmad_bench_event(wc->context, KIND_RESP, 0);
}

static struct rmad_send_buf *capi_buf(struct rmad_agent *agent, const struct rmad_ah *ah, u32 lo,
				      u8 method, int timeout_ms, long kind)
{
	struct rmad_send_buf *b;
	void *mad;

	b = rmad_create_send_mad(agent, 1, 0, 0, IB_MGMT_MAD_HDR, IB_MGMT_MAD_DATA, GFP_KERNEL,
				 IB_MGMT_BASE_VERSION);
	if (IS_ERR(b))
		return NULL;
	mad = rmad_send_buf_mad(b);
	if (!mad || rmad_send_buf_set(b, ah, timeout_ms, 0, (void *)kind)) {
		rmad_free_send_mad(b);
		return NULL;
	}
	bench_fill(mad, rmad_agent_hi_tid(agent), lo, method);
	return b;
}

static void capi_close(void *p);

static int capi_open(void *p, struct rmad_bench_round *r, u32 n, u32 nreq)
{
	struct capi_impl *c = p;
	u32 j;

	memset(c, 0, sizeof(*c));
	c->r = r;
	c->n = n;
	c->nreq = nreq;
	c->ah.has_grh = 1;
	c->ah.sgid_index = BENCH_GID_INDEX;
	memcpy(c->ah.dgid, bench_gid.raw, sizeof(c->ah.dgid));
	c->ah_silent.has_grh = 1;
	c->ah_silent.sgid_index = BENCH_SILENT_GID_INDEX;
	memcpy(c->ah_silent.dgid, bench_silent_gid.raw, sizeof(c->ah_silent.dgid));
	c->bufs = kvcalloc(n, sizeof(*c->bufs), GFP_KERNEL);
	c->posted = kvcalloc(n, 1, GFP_KERNEL);
	c->reqs = kvcalloc(nreq ? nreq : 1, sizeof(*c->reqs), GFP_KERNEL);
	c->req_posted = kvcalloc(nreq ? nreq : 1, 1, GFP_KERNEL);
	if (!c->bufs || !c->posted || !c->reqs || !c->req_posted)
		goto fail;
	c->agent = rmad_register_agent("rxe0", BENCH_PORT, RMAD_QPT_GSI, NULL, 0,
				       capi_send_handler, capi_recv_handler, r, 0);
	if (IS_ERR(c->agent)) {
		c->agent = NULL;
		goto fail;
	}
	c->gate_agent = rmad_register_agent("rxe0", BENCH_PORT, RMAD_QPT_GSI, NULL, 0,
					    capi_send_handler, capi_recv_handler, r, 0);
	if (IS_ERR(c->gate_agent)) {
		c->gate_agent = NULL;
		goto fail;
	}
	for (j = 0; j < nreq; j++) {
		c->reqs[j] = capi_buf(c->agent, &c->ah, n + j, IB_MGMT_METHOD_GET, BENCH_LONG_MS,
				      KIND_REQ);
		if (!c->reqs[j])
			goto fail;
	}
	for (j = 0; j < BENCH_MARKERS; j++) {
		c->markers[j] = capi_buf(j % 2 ? c->gate_agent : c->agent, &c->ah_silent,
					 n + nreq + j, IB_MGMT_METHOD_SEND, 0, KIND_MARKER);
		if (!c->markers[j])
			goto fail;
	}
	c->gate_buf = capi_buf(c->gate_agent, &c->ah_silent, 0, IB_MGMT_METHOD_SEND,
			       BENCH_LONG_MS, KIND_GATE);
	if (!c->gate_buf)
		goto fail;
	return 0;
fail:
	capi_close(c);
	return -ENOMEM;
}

static int capi_create(void *p, int timeout_ms)
{
	struct capi_impl *c = p;
	u32 i;

	for (i = 0; i < c->n; i++) {
		c->bufs[i] = capi_buf(c->agent, &c->ah_silent, i, IB_MGMT_METHOD_SEND,
				      timeout_ms, KIND_SILENT);
		if (!c->bufs[i])
			return -ENOMEM;
	}
	return 0;
}

static int capi_post(void *p, u32 i)
{
	struct capi_impl *c = p;
	int ret = rmad_post_send_mad(c->bufs[i], NULL);

	if (!ret)
		c->posted[i] = 1;
	return ret;
}

/* rmad counts what the device took (its markers may wait behind the held queue). */
static int capi_wait_sent(void *p)
{
	struct capi_impl *c = p;

	return rmad_bench_rust_wait_sent(rmad_agent_hi_tid(c->agent), c->n);
}

static int capi_modify(void *p, u32 i, int ms)
{
	struct capi_impl *c = p;

	return rmad_modify_mad(c->bufs[i], ms);
}

static int capi_cancel(void *p, u32 i)
{
	struct capi_impl *c = p;

	return rmad_cancel_mad(c->bufs[i]);
}

static int capi_post_req(void *p, u32 j)
{
	struct capi_impl *c = p;
	int ret = rmad_post_send_mad(c->reqs[j], NULL);

	if (!ret)
		c->req_posted[j] = 1;
	return ret;
}

static int capi_post_marker(void *p, int gate)
{
	struct capi_impl *c = p;
	u32 k = marker_index(c->markers_posted, gate);
	int ret;

	if (k >= BENCH_MARKERS || !c->markers[k])
		return -ENOSPC;
	ret = rmad_post_send_mad(c->markers[k], NULL);
	if (!ret)
		c->markers[k] = NULL;
	return ret;
}

static int capi_post_gate(void *p)
{
	struct capi_impl *c = p;

	return rmad_post_send_mad(c->gate_buf, NULL);
}

static int capi_cancel_gate(void *p)
{
	struct capi_impl *c = p;

	return rmad_cancel_mad(c->gate_buf);
}

static void capi_close(void *p)
{
	struct capi_impl *c = p;
	u32 i;

	/*
	 * Cancel what is outstanding and let it be delivered first, so that
	 * the unregistration finds nothing to flush (its batched walk once
	 * yielded with the agent's lock held). Handles of buffers already
	 * freed just get -EINVAL.
	 */
	if (c->bufs)
		for (i = 0; i < c->n; i++)
			if (c->bufs[i] && c->posted[i])
				rmad_cancel_mad(c->bufs[i]);
	if (c->reqs)
		for (i = 0; i < c->nreq; i++)
			if (c->reqs[i] && c->req_posted[i])
				rmad_cancel_mad(c->reqs[i]);
	if (c->gate_buf)
		rmad_cancel_mad(c->gate_buf);
	if (c->agent)
		rmad_bench_rust_wait_idle(rmad_agent_hi_tid(c->agent));
	if (c->gate_agent)
		rmad_bench_rust_wait_idle(rmad_agent_hi_tid(c->gate_agent));
	if (c->bufs)
		for (i = 0; i < c->n; i++)
			if (c->bufs[i] && !c->posted[i])
				rmad_free_send_mad(c->bufs[i]);
	if (c->reqs)
		for (i = 0; i < c->nreq; i++)
			if (c->reqs[i] && !c->req_posted[i])
				rmad_free_send_mad(c->reqs[i]);
	for (i = 0; i < BENCH_MARKERS; i++)
		if (c->markers[i])
			rmad_free_send_mad(c->markers[i]);
	/* Free fails with -EINVAL once its handler freed it: harmless. */
	if (c->gate_buf)
		rmad_free_send_mad(c->gate_buf);
	if (c->agent)
		rmad_unregister_agent(c->agent);
	if (c->gate_agent)
		rmad_unregister_agent(c->gate_agent);
	kvfree(c->bufs);
	kvfree(c->posted);
	kvfree(c->reqs);
	kvfree(c->req_posted);
	memset(c, 0, sizeof(*c));
}

static const struct bench_ops rust_ops = {
	.name = "rmad",
	.open = rmad_bench_rust_open,
	.create = rmad_bench_rust_create,
	.post = rmad_bench_rust_post,
	.wait_sent = rmad_bench_rust_wait_sent_p,
	.modify = rmad_bench_rust_modify,
	.cancel = rmad_bench_rust_cancel,
	.post_req = rmad_bench_rust_post_req,
	.post_marker = rmad_bench_rust_post_marker,
	.post_gate = rmad_bench_rust_post_gate,
	.cancel_gate = rmad_bench_rust_cancel_gate,
	.close = rmad_bench_rust_close,
	.irqoff_take = rmad_bench_rust_irqoff_take,
};

static const struct bench_ops capi_ops = {
	.name = "rmad-capi",
	.open = capi_open,
	.create = capi_create,
	.post = capi_post,
	.wait_sent = capi_wait_sent,
	.modify = capi_modify,
	.cancel = capi_cancel,
	.post_req = capi_post_req,
	.post_marker = capi_post_marker,
	.post_gate = capi_post_gate,
	.cancel_gate = capi_cancel_gate,
	.close = capi_close,
	.irqoff_take = rmad_bench_rust_irqoff_take,
};

/* The driver. */

struct bench_cfg {
	u32 n, sample, rtt_sample, rep;
	const u32 *perm_modify, *perm_cancel;
};

static void emit(const char *impl, const char *op, u32 n, u32 rep, s64 value, const char *unit)
{
	pr_info("bench-json: {\"impl\": \"%s\", \"op\": \"%s\", \"n\": %u, \"rep\": %u, \"value\": %lld, \"unit\": \"%s\"}\n",
		impl, op, n, rep, value, unit);
}

static u64 slab_bytes(void)
{
	return (u64)(global_node_page_state_pages(NR_SLAB_RECLAIMABLE_B) +
		     global_node_page_state_pages(NR_SLAB_UNRECLAIMABLE_B)) << PAGE_SHIFT;
}

/*
 * Gives the CPU away about once a second inside long loops (this kernel does
 * not preempt), and not more often: what it lets run would count as the
 * loop's time.
 */
static inline void bench_resched(u32 k, u64 *last)
{
	u64 now;

	if ((k & 15) != 15)
		return;
	now = ktime_get_ns();
	if (now - *last > NSEC_PER_SEC) {
		cond_resched();
		*last = ktime_get_ns();
	}
}

static void round_init(struct rmad_bench_round *r)
{
	ctr_init(&r->silent);
	ctr_init(&r->marker);
	ctr_init(&r->req);
	ctr_init(&r->resp);
	ctr_init(&r->gate_in);
	init_completion(&r->gate_go);
	atomic_set(&r->timed_out, 0);
	atomic_set(&r->flushed, 0);
	atomic_set(&r->other, 0);
}

/* Waits until the responder holds @target answers, at most @ms; returns how many it holds. */
static u32 resp_wait_for(u32 target, unsigned int ms)
{
	u64 end = ktime_get_ns() + (u64)ms * NSEC_PER_MSEC;
	u32 held;

	for (;;) {
		spin_lock(&resp.lock);
		held = resp.nheld;
		spin_unlock(&resp.lock);
		if (held >= target || ktime_get_ns() > end)
			return held;
		usleep_range(1000, 2000);
	}
}

/*
 * Round A, with n sends outstanding, for one implementation:
 *
 *   post      n sends (unanswered, timeout 10 min), ns per post call;
 *   settle    from the first post until a marker posted after them (timeout
 *             0, same queue) completed: all n were handed to the device;
 *   memory    slab growth across creating and posting the n sends, per send;
 *   modify    s random sends to the same timeout again, ns per call;
 *   match     m (s / 5) GETs the responder holds the answers to, released at
 *             once: ns per response from the release until all m were
 *             delivered to the receive handler;
 *   rtt       q GETs one at a time, from the post until the send handler;
 *   cancel    s random sends (another order), ns per call.
 */
static int round_ops(const struct bench_ops *ops, void *p, const struct bench_cfg *cfg)
{
	struct rmad_bench_round *r;
	u32 n = cfg->n, s = min(cfg->n, cfg->sample), q = min(cfg->n, cfg->rtt_sample);
	/* A response costs a trip through the device: a fifth of the sample is enough. */
	u32 m = min(cfg->n, max(cfg->sample / 5, 1u));
	u64 t0, t, slab0, last, rtt = 0;
	u32 i, k, held, done;
	s64 v;
	int ret;

	r = kzalloc_obj(*r);
	if (!r)
		return -ENOMEM;
	round_init(r);
	ret = ops->open(p, r, n, m + q);
	if (ret)
		goto out_free;
	slab0 = slab_bytes();
	ret = ops->create(p, BENCH_LONG_MS);
	if (ret)
		goto out;

	t0 = ktime_get_ns();
	last = t0;
	for (i = 0; i < n; i++) {
		ret = ops->post(p, i);
		if (ret)
			goto out;
		bench_resched(i, &last);
	}
	t = ktime_get_ns();
	ctr_expect(&r->marker, 1);
	ret = ops->post_marker(p, 0);
	if (!ret)
		ret = ctr_wait(&r->marker);
	if (ret)
		goto out;
	emit(ops->name, "post", n, cfg->rep, div_u64(t - t0, n), "ns");
	emit(ops->name, "settle", n, cfg->rep, r->marker.at_ns - t0, "ns");
	v = (s64)slab_bytes() - (s64)slab0;
	emit(ops->name, "memory", n, cfg->rep, div_s64(v, n), "bytes");

	t0 = ktime_get_ns();
	last = t0;
	for (k = 0; k < s; k++) {
		ops->modify(p, cfg->perm_modify[k], BENCH_LONG_MS);
		bench_resched(k, &last);
	}
	t = ktime_get_ns();
	emit(ops->name, "modify", n, cfg->rep, div_u64(t - t0, s), "ns");

	/* Bursts overrun QP1's receive queue (UD drops them): the GETs go 64 at a time. */
	resp_hold();
	for (k = 0; k < m; k++) {
		ret = ops->post_req(p, k);
		if (ret)
			break;
		if ((k & 63) == 63)
			resp_wait_for(k + 1, 10000);
	}
	held = resp_wait_for(m, 10000);
	if (ret || !held) {
		pr_err("bench: %s: the responder got %d requests, holds %u of %u\n", ops->name,
		       atomic_read(&resp.seen), held, m);
		resp_release();
		ret = ret ?: -EIO;
		goto out;
	}
	if (held < m)
		pr_warn("bench: %s n=%u: %u of %u requests were lost\n", ops->name, n, m - held, m);
	ctr_expect(&r->resp, held);
	t0 = ktime_get_ns();
	resp_release();
	if (!wait_slices(&r->resp.done, BENCH_PACKET_WAIT_MS))
		emit(ops->name, "match", n, cfg->rep, div_u64(r->resp.at_ns - t0, held), "ns");
	else
		pr_warn("bench: %s n=%u: %d of %u responses arrived; no match figure\n",
			ops->name, n, atomic_read(&r->resp.hits), held);
	ctr_expect(&r->req, held);
	wait_slices(&r->req.done, BENCH_PACKET_WAIT_MS);

	/* One at a time; a round trip whose packet was dropped is left out. */
	for (k = 0, done = 0; k < q; k++) {
		ctr_expect(&r->req, atomic_read(&r->req.hits) + 1);
		t0 = ktime_get_ns();
		ret = ops->post_req(p, m + k);
		if (ret)
			goto out;
		if (wait_slices(&r->req.done, BENCH_PACKET_WAIT_MS))
			continue;
		rtt += r->req.at_ns - t0;
		done++;
	}
	if (done)
		emit(ops->name, "rtt", n, cfg->rep, div_u64(rtt, done), "ns");
	if (done < q)
		pr_warn("bench: %s n=%u: %u of %u round trips completed\n", ops->name, n, done, q);

	ctr_expect(&r->silent, s);
	t0 = ktime_get_ns();
	last = t0;
	for (k = 0; k < s; k++) {
		ops->cancel(p, cfg->perm_cancel[k]);
		bench_resched(k, &last);
	}
	t = ktime_get_ns();
	emit(ops->name, "cancel", n, cfg->rep, div_u64(t - t0, s), "ns");
	ret = ctr_wait(&r->silent);
	if (ret)
		goto out;
out:
	ops->close(p);
	if (ret)
		pr_err("bench: %s n=%u: the round failed (%d)\n", ops->name, n, ret);
out_free:
	kfree(r);
	return ret;
}

/* Timeout of the sends of round B: they expire while the delivery queue is held. */
#define BENCH_SHORT_MS 1000

/*
 * Round B, n simultaneous timeouts: the delivery queue is held first (a
 * second agent's send handler blocks on it: ib_core's port workqueue for the
 * C layer, rmad's ordered completion queue), then n sends with a 1 s timeout
 * are posted; once the device took them all and 1.2 s more have passed, all
 * have expired, and the queue is released: ns from the release until the
 * n-th timeout was delivered.
 */
static int round_timeouts(const struct bench_ops *ops, void *p, const struct bench_cfg *cfg)
{
	struct rmad_bench_round *r;
	u32 n = cfg->n, i;
	u64 t0, last;
	int ret;

	r = kzalloc_obj(*r);
	if (!r)
		return -ENOMEM;
	round_init(r);
	ret = ops->open(p, r, n, 0);
	if (ret)
		goto out_free;
	ret = ops->create(p, BENCH_SHORT_MS);
	if (ret)
		goto out;
	/* The gate: its send waits for a response, then is cancelled. */
	ret = ops->post_gate(p);
	if (ret)
		goto out;
	ctr_expect(&r->marker, 1);
	ret = ops->post_marker(p, 1);
	if (!ret)
		ret = ctr_wait(&r->marker);
	if (ret)
		goto out;
	ctr_expect(&r->gate_in, 1);
	ret = ops->cancel_gate(p);
	if (!ret)
		ret = ctr_wait(&r->gate_in);
	if (ret)
		goto out;
	last = ktime_get_ns();
	for (i = 0; i < n; i++) {
		ret = ops->post(p, i);
		if (ret)
			goto out;
		bench_resched(i, &last);
	}
	ret = ops->wait_sent(p);
	if (ret)
		goto out;
	msleep(BENCH_SHORT_MS + 200);
	ctr_expect(&r->silent, n);
	t0 = ktime_get_ns();
	complete_all(&r->gate_go);
	ret = ctr_wait(&r->silent);
	if (ret)
		goto out;
	emit(ops->name, "timeouts", n, cfg->rep, r->silent.at_ns - t0, "ns");
	if (atomic_read(&r->timed_out) != n)
		pr_warn("bench: %s n=%u: %d of the sends timed out, %d flushed, %d other\n",
			ops->name, n, atomic_read(&r->timed_out), atomic_read(&r->flushed),
			atomic_read(&r->other));
out:
	complete_all(&r->gate_go);
	ops->close(p);
	if (ret)
		pr_err("bench: %s n=%u: the timeout round failed (%d)\n", ops->name, n, ret);
out_free:
	kfree(r);
	return ret;
}

/* The floor. */

struct floor_item {
	struct list_head node;
	struct work_struct work;
};

static DEFINE_SPINLOCK(floor_lock);

static void floor_work(struct work_struct *w)
{
}

static int floor_run(u32 n, const u32 *order, u32 s, s64 *ns)
{
	struct workqueue_struct *wq;
	struct floor_item *items;
	LIST_HEAD(from);
	LIST_HEAD(to);
	unsigned long flags;
	u64 t0, last;
	u32 i, k;

	items = kvcalloc(n, sizeof(*items), GFP_KERNEL);
	if (!items)
		return -ENOMEM;
	wq = alloc_ordered_workqueue("rmad_bench_floor", 0);
	if (!wq) {
		kvfree(items);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		INIT_WORK(&items[i].work, floor_work);
		list_add_tail(&items[i].node, &from);
	}
	t0 = ktime_get_ns();
	last = t0;
	for (k = 0; k < s; k++) {
		struct floor_item *it = &items[order[k]];

		spin_lock_irqsave(&floor_lock, flags);
		list_move_tail(&it->node, &to);
		spin_unlock_irqrestore(&floor_lock, flags);
		queue_work(wq, &it->work);
		bench_resched(k, &last);
	}
	*ns = div_u64(ktime_get_ns() - t0, s);
	destroy_workqueue(wq);
	kvfree(items);
	return 0;
}

/* A pseudo-random permutation of 0..n-1 (Fisher-Yates, xorshift from @seed). */
static void permute(u32 *v, u32 n, u64 seed)
{
	u32 i;

	for (i = 0; i < n; i++)
		v[i] = i;
	for (i = n; i > 1; i--) {
		u32 j, tmp;

		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		j = (u32)(seed % i);
		tmp = v[i - 1];
		v[i - 1] = v[j];
		v[j] = tmp;
	}
}

/*
 * Runs the benchmark for @n outstanding sends, @reps times: each repetition
 * runs every implementation (in an order that rotates) and the floor. @sample
 * bounds the timed modifies, cancels and matched responses, @rtt_sample the
 * round trips. @rust is the state of the Rust implementation.
 */
int rmad_bench_run(u32 n, u32 reps, u32 sample, u32 rtt_sample, void *rust)
{
	static const char * const floor_ops[] = { "post", "modify", "cancel" };
	struct c_impl *cimpl;
	struct capi_impl *capi;
	u32 *perm_m, *perm_c;
	u32 rep, k;
	int ret;

	if (!n || !reps || !sample || !rtt_sample)
		return -EINVAL;
	ret = ib_register_client(&bench_client);
	if (ret)
		return ret;
	cimpl = kzalloc_obj(*cimpl);
	capi = kzalloc_obj(*capi);
	perm_m = kvmalloc_array(n, sizeof(u32), GFP_KERNEL);
	perm_c = kvmalloc_array(n, sizeof(u32), GFP_KERNEL);
	ret = -ENOMEM;
	if (!cimpl || !capi || !perm_m || !perm_c)
		goto out;
	ret = -ENODEV;
	if (!READ_ONCE(bench_dev)) {
		pr_info("bench: no rxe0; nothing to measure\n");
		goto out;
	}
	ret = bench_addr(bench_dev);
	if (ret)
		goto out;
	ret = resp_start(bench_dev, min(n, sample));
	if (ret)
		goto out;
	pr_info("bench: n=%u, %u repetitions, sample %u (responses %u), round trips %u\n", n,
		reps, min(n, sample), min(n, max(sample / 5, 1u)), min(n, rtt_sample));
	for (rep = 0; rep < reps; rep++) {
		const struct bench_ops *ops[3] = { &c_ops, &rust_ops, &capi_ops };
		void *priv[3] = { cimpl, rust, capi };
		struct bench_cfg cfg = {
			.n = n,
			.sample = sample,
			.rtt_sample = rtt_sample,
			.rep = rep,
			.perm_modify = perm_m,
			.perm_cancel = perm_c,
		};
		u32 i;

		permute(perm_m, n, 0x9e3779b97f4a7c15ull ^ ((u64)n << 20) ^ rep);
		permute(perm_c, n, 0xd1b54a32d192ed03ull ^ ((u64)n << 20) ^ rep);
		for (i = 0; i < 3; i++) {
			u32 x = (i + rep) % 3;
			s64 irqoff;

			ops[x]->irqoff_take();
			round_ops(ops[x], priv[x], &cfg);
			round_timeouts(ops[x], priv[x], &cfg);
			irqoff = ops[x]->irqoff_take();
			if (irqoff >= 0)
				emit(ops[x]->name, "irqoff_max", n, rep, irqoff, "ns");
		}
		for (k = 0; k < ARRAY_SIZE(floor_ops); k++) {
			s64 ns;

			if (!floor_run(n, k == 2 ? perm_c : perm_m, min(n, sample), &ns))
				emit("floor", floor_ops[k], n, rep, ns, "ns");
		}
	}
	resp_stop();
	ret = 0;
out:
	kvfree(perm_m);
	kvfree(perm_c);
	kfree(capi);
	kfree(cimpl);
	ib_unregister_client(&bench_client);
	return ret;
}
