// SPDX-License-Identifier: GPL-2.0
/*
 * Hooks of suite rmad_rxe (test flavour only) into rxe0 and rmad's private QP
 * on it: calls of the device's query_port counted and posts of receives to
 * one QP failed, both by interposing on the device's operations (so that
 * every caller is seen, ib_core's and rmad's alike, with no tracer); the
 * private QP moved to the error state, as rxe moves it when its netdev
 * refuses a packet; the private port's counters read; a cached address
 * handle held in use, as a send on the device holds it; and the netdev's
 * addresses changed, by the ip tool in user space.
 *
 * One interposition of each kind at a time, on one device: KUnit runs the
 * cases one after the other. The original operation is kept here, so that a
 * caller that read the hook's address just before it was taken away still
 * reaches the device.
 */

#include <linux/atomic.h>
#include <linux/build_bug.h>
#include <linux/compiler.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/umh.h>
#include <rdma/ib_verbs.h>

#include "hooks.h"
#include "../../../verbs/vport.h"

/* The layout VportCounts in hooks.rs has. */
static_assert(sizeof(struct rmad_test_vport_counts) == 12);

static int (*rmad_test_query_port_of)(struct ib_device *dev, u32 port,
				      struct ib_port_attr *attr);
static atomic_t rmad_test_port_query_count;

static int rmad_test_counting_query_port(struct ib_device *dev, u32 port,
					 struct ib_port_attr *attr)
{
	atomic_inc(&rmad_test_port_query_count);
	return rmad_test_query_port_of(dev, port, attr);
}

void rmad_test_port_queries_start(struct ib_device *dev)
{
	atomic_set(&rmad_test_port_query_count, 0);
	rmad_test_query_port_of = dev->ops.query_port;
	WRITE_ONCE(dev->ops.query_port, rmad_test_counting_query_port);
}

u32 rmad_test_port_queries(void)
{
	return atomic_read(&rmad_test_port_query_count);
}

void rmad_test_port_queries_stop(struct ib_device *dev)
{
	WRITE_ONCE(dev->ops.query_port, rmad_test_query_port_of);
}

static int (*rmad_test_post_recv_of)(struct ib_qp *qp, const struct ib_recv_wr *wr,
				     const struct ib_recv_wr **bad_wr);
static struct ib_qp *rmad_test_failing_qp;
static atomic_t rmad_test_posts_to_fail;

static int rmad_test_failing_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr,
				       const struct ib_recv_wr **bad_wr)
{
	if (qp == READ_ONCE(rmad_test_failing_qp) &&
	    atomic_add_unless(&rmad_test_posts_to_fail, -1, 0)) {
		*bad_wr = wr;
		return -ENOMEM;
	}
	return rmad_test_post_recv_of(qp, wr, bad_wr);
}

void rmad_test_fail_recv_posts(struct rmad_vport *vp, u32 n)
{
	atomic_set(&rmad_test_posts_to_fail, n);
	WRITE_ONCE(rmad_test_failing_qp, vp->qp);
	rmad_test_post_recv_of = vp->dev->ops.post_recv;
	WRITE_ONCE(vp->dev->ops.post_recv, rmad_test_failing_post_recv);
}

u32 rmad_test_recv_posts_to_fail(void)
{
	return atomic_read(&rmad_test_posts_to_fail);
}

void rmad_test_fail_recv_posts_stop(struct rmad_vport *vp)
{
	WRITE_ONCE(vp->dev->ops.post_recv, rmad_test_post_recv_of);
}

int rmad_test_vport_qp_error(struct rmad_vport *vp)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };

	return ib_modify_qp(vp->qp, &attr, IB_QP_STATE);
}

void rmad_test_vport_counts(struct rmad_vport *vp, struct rmad_test_vport_counts *out)
{
	out->rq_posted = atomic_read(&vp->rq_posted);
	out->resets = atomic_read(&vp->resets);
	out->deferred = atomic_read(&vp->deferred);
}

/* Whether cache entry @e is a handle from GID index @sgid_index to @dgid. */
static bool rmad_test_ah_is(const struct rmad_ah_entry *e, u8 sgid_index, const u8 *dgid)
{
	const struct ib_global_route *grh = &e->attr.grh;

	return e->ah && (e->attr.ah_flags & IB_AH_GRH) && grh->sgid_index == sgid_index &&
	       !memcmp(grh->dgid.raw, dgid, 16);
}

void *rmad_test_ah_hold(struct rmad_vport *vp, u8 sgid_index, const u8 *dgid)
{
	struct rmad_ah_entry *held = NULL;
	unsigned long flags;
	int i;

	spin_lock_irqsave(&vp->lock, flags);
	for (i = 0; i < RMAD_AH_CACHE && !held; i++) {
		if (vp->ahs[i].ready && rmad_test_ah_is(&vp->ahs[i], sgid_index, dgid)) {
			held = &vp->ahs[i];
			held->users++;
		}
	}
	spin_unlock_irqrestore(&vp->lock, flags);
	return held;
}

void rmad_test_ah_unhold(struct rmad_vport *vp, void *held)
{
	struct rmad_ah_entry *e = held;
	bool destroy, retire;
	unsigned long flags;

	spin_lock_irqsave(&vp->lock, flags);
	retire = rmad_ah_unuse(e, &destroy);
	spin_unlock_irqrestore(&vp->lock, flags);
	/* As rmad_put_slot does for a send's completion (a cached handle is never transient). */
	if (retire)
		rmad_ah_retire_later(vp);
}

u32 rmad_test_ah_cached(struct rmad_vport *vp, u8 sgid_index, const u8 *dgid)
{
	unsigned long flags;
	u32 n = 0;
	int i;

	spin_lock_irqsave(&vp->lock, flags);
	for (i = 0; i < RMAD_AH_CACHE; i++)
		n += rmad_test_ah_is(&vp->ahs[i], sgid_index, dgid);
	spin_unlock_irqrestore(&vp->lock, flags);
	return n;
}

int rmad_test_ip_addr(const char *op, const char *addr, const char *netdev)
{
	static const char path[] = "/bin/ip", addr_cmd[] = "addr", dev[] = "dev";
	static const char env_path[] = "PATH=/bin:/sbin";
	char *argv[7], *envp[2];

	/* The helper copies the strings to the new process: none is written. */
	argv[0] = (char *)path;
	argv[1] = (char *)addr_cmd;
	argv[2] = (char *)op;
	argv[3] = (char *)addr;
	argv[4] = (char *)dev;
	argv[5] = (char *)netdev;
	argv[6] = NULL;
	envp[0] = (char *)env_path;
	envp[1] = NULL;
	return call_usermodehelper(path, argv, envp, UMH_WAIT_PROC);
}
