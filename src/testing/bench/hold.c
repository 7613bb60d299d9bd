// SPDX-License-Identifier: GPL-2.0
/*
 * The C MAD layer's side of `make bench`'s removal row (test flavour only):
 * an ib_core agent on rxe0 with N sends outstanding (unanswered, timeout 10
 * minutes) while tests/vm/bench.sh removes the device. Like every client of
 * the C layer, it unregisters its agent from its ib_client's remove callback,
 * which flushes the N sends there: the cost the removal row measures. The
 * Rust side and the commands are in src/testing/bench/hold.rs.
 */

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/err.h>
#include <linux/etherdevice.h>
#include <linux/mutex.h>
#include <linux/string.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "bench.h"
#include "impl.h"

/* The agent that holds the sends, and what its handler saw. */
static struct {
	struct mutex lock;	/* protects dev, agent, ah */
	struct ib_device *dev;	/* rxe0 while it is registered */
	struct ib_mad_agent *agent;
	struct ib_ah *ah;
	u32 n;
	atomic_t flushed, other;
	struct completion marker;
	bool client;		/* hold_client is registered */
} hold = {
	.lock = __MUTEX_INITIALIZER(hold.lock),
};

/* Unregisters the agent (flushing what is outstanding) and destroys its address handle. */
static void hold_drop_locked(void)
{
	if (hold.agent)
		ib_unregister_mad_agent(hold.agent);
	if (hold.ah)
		rdma_destroy_ah(hold.ah, RDMA_DESTROY_AH_SLEEPABLE);
	hold.agent = NULL;
	hold.ah = NULL;
}

static int hold_add(struct ib_device *dev)
{
	mutex_lock(&hold.lock);
	if (!strcmp(dev_name(&dev->dev), "rxe0"))
		hold.dev = dev;
	mutex_unlock(&hold.lock);
	return 0;
}

/* The device goes: as every client of the C layer must, unregister the agent first. */
static void hold_remove(struct ib_device *dev, void *data)
{
	mutex_lock(&hold.lock);
	if (hold.dev == dev) {
		hold_drop_locked();
		hold.dev = NULL;
	}
	mutex_unlock(&hold.lock);
}

static struct ib_client hold_client = {
	.name = "rmad_bench_hold",
	.add = hold_add,
	.remove = hold_remove,
};

static void hold_send_handler(struct ib_mad_agent *agent, struct ib_mad_send_wc *wc)
{
	long kind = (long)wc->send_buf->context[0];

	ib_free_send_mad(wc->send_buf);
	if (kind == KIND_MARKER)
		complete(&hold.marker);
	else if (wc->status == IB_WC_WR_FLUSH_ERR)
		atomic_inc(&hold.flushed);
	else
		atomic_inc(&hold.other);
}

static void hold_recv_handler(struct ib_mad_agent *agent, struct ib_mad_send_buf *send_buf,
			      struct ib_mad_recv_wc *rwc)
{
	ib_free_recv_mad(rwc);
}

/* An address handle to the GID nobody has, through the port's IPv4 GID, to its own MAC. */
static struct ib_ah *hold_ah(struct ib_mad_agent *agent)
{
	struct rdma_ah_attr attr = {};
	const struct ib_gid_attr *gattr;
	union ib_gid g = bench_silent_gid;
	int ret;

	attr.type = rdma_ah_find_type(agent->device, BENCH_PORT);
	rdma_ah_set_port_num(&attr, BENCH_PORT);
	rdma_ah_set_grh(&attr, &g, 0, BENCH_SILENT_GID_INDEX, 64, 0);
	if (attr.type == RDMA_AH_ATTR_TYPE_ROCE) {
		gattr = rdma_get_gid_attr(agent->device, BENCH_PORT, BENCH_GID_INDEX);
		if (IS_ERR(gattr))
			return ERR_CAST(gattr);
		ret = rdma_read_gid_l2_fields(gattr, NULL, attr.roce.dmac);
		rdma_put_gid_attr(gattr);
		if (ret)
			return ERR_PTR(ret);
	}
	return rdma_create_ah(agent->qp->pd, &attr, RDMA_CREATE_AH_SLEEPABLE);
}

/* Posts one send of the agent: @kind KIND_SILENT (timeout 10 min) or KIND_MARKER (0). */
static int hold_post(u32 lo, long kind)
{
	struct ib_mad_send_buf *b;
	int ret;

	b = ib_create_send_mad(hold.agent, 1, 0, 0, IB_MGMT_MAD_HDR, IB_MGMT_MAD_DATA, GFP_KERNEL,
			       IB_MGMT_BASE_VERSION);
	if (IS_ERR(b))
		return PTR_ERR(b);
	bench_fill(b->mad, hold.agent->hi_tid, lo, IB_MGMT_METHOD_SEND);
	b->ah = hold.ah;
	b->timeout_ms = kind == KIND_MARKER ? 0 : BENCH_LONG_MS;
	b->retries = 0;
	b->context[0] = (void *)kind;
	ret = ib_post_send_mad(b, NULL);
	if (ret)
		ib_free_send_mad(b);
	return ret;
}

/*
 * Registers an agent on rxe0 and posts @n sends nobody answers, then a
 * marker (timeout 0) behind them; returns once the marker completed: the
 * device took all @n (the C layer completes sends in order).
 */
int rmad_bench_c_hold(u32 n)
{
	int ret = 0;
	u32 i;

	/* Not under the lock: registering calls hold_add(), which takes it. */
	if (!hold.client) {
		ret = ib_register_client(&hold_client);
		if (ret)
			return ret;
		hold.client = true;
	}
	mutex_lock(&hold.lock);
	if (hold.agent) {
		ret = -EBUSY;
		goto out;
	}
	if (!hold.dev) {
		ret = -ENODEV;
		goto out;
	}
	hold.n = n;
	atomic_set(&hold.flushed, 0);
	atomic_set(&hold.other, 0);
	init_completion(&hold.marker);
	hold.agent = ib_register_mad_agent(hold.dev, BENCH_PORT, IB_QPT_GSI, NULL, 0,
					   hold_send_handler, hold_recv_handler, NULL, 0);
	if (IS_ERR(hold.agent)) {
		ret = PTR_ERR(hold.agent);
		hold.agent = NULL;
		goto out;
	}
	hold.ah = hold_ah(hold.agent);
	if (IS_ERR(hold.ah)) {
		ret = PTR_ERR(hold.ah);
		hold.ah = NULL;
		goto fail;
	}
	for (i = 0; i < n && !ret; i++)
		ret = hold_post(i, KIND_SILENT);
	ret = ret ?: hold_post(n, KIND_MARKER);
	if (ret)
		goto fail;
	mutex_unlock(&hold.lock);
	/* Without the lock: the device's removal may come meanwhile, and takes it. */
	return bench_wait_slices(&hold.marker, BENCH_WAIT_MS);
fail:
	hold_drop_locked();
out:
	mutex_unlock(&hold.lock);
	return ret;
}

/*
 * Unregisters the agent if the device is still there (flushing what is
 * outstanding) and the client; reports how the sends of the last hold ended.
 */
void rmad_bench_c_unhold(u32 *posted, u32 *flushed, u32 *other)
{
	mutex_lock(&hold.lock);
	hold_drop_locked();
	*posted = hold.n;
	*flushed = atomic_read(&hold.flushed);
	*other = atomic_read(&hold.other);
	mutex_unlock(&hold.lock);
	if (hold.client)
		ib_unregister_client(&hold_client);
	hold.client = false;
	hold.dev = NULL;
}
