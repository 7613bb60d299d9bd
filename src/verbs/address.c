// SPDX-License-Identifier: GPL-2.0
/*
 * Addresses, for rmad's verbs glue: the private QP's cache of address handles
 * (one per destination, swept after GID table changes), the source GID of a
 * reply, and on RoCE the destination's MAC and the route's hop limit from
 * ib_core's address resolution. Everything here reads ib_core's caches (the
 * GID table) or the neighbour tables: nothing queries the device's port,
 * which on rxe takes rtnl_lock and may log, and on a hardware HCA can be a
 * firmware command.
 */

#include <linux/completion.h>
#include <linux/err.h>
#include <linux/jiffies.h>
#include <linux/etherdevice.h>
#include <linux/minmax.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <net/net_namespace.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

#include "vport.h"

/*
 * The index of @gid in the GID table of (@dev, @port), among its first 256
 * entries (an address handle names its source GID with a u8), or -ENOENT.
 * It runs once per answered request, so it reads ib_core's GID cache only:
 * the table's length is the port's immutable one (the length of ib_core's
 * cache), not a port query's (the C layer's reply path,
 * ib_init_ah_attr_from_wc, searches the same cache). Any context.
 */
int rmad_shim_find_gid(struct ib_device *dev, u32 port, const u8 *gid)
{
	union ib_gid g;
	int i, n;

	if (!rdma_is_port_valid(dev, port))
		return -EINVAL;
	n = min_t(int, ib_port_immutable_read(dev, port)->gid_tbl_len, 256);
	for (i = 0; i < n; i++)
		if (!rdma_query_gid(dev, port, i, &g) && !memcmp(g.raw, gid, sizeof(g.raw)))
			return i;
	return -ENOENT;
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
 * After a GID table change (an address removed or replaced), or once the last
 * send of a stale handle completed: destroys the cached address handles whose
 * source GID entry is gone or replaced, so that none keeps a deleted GID entry
 * allocated, and marks the current ones current (a post from the caller's
 * context uses no other, rmad_ah_find_ready). A handle that sends still use
 * is made stale instead: not ready, so that no new send takes it, and
 * destroyed by the sweep that its last send's completion asks for
 * (rmad_ah_unuse). The transmit work calls this first in every run. Only it
 * and close change a handle, so one is read here without the lock; whether a
 * send uses it is decided under the lock, where an entry taken out of use
 * (not ready) can gain no user from a post in the caller's context.
 */
void rmad_shim_vport_sweep(struct rmad_vport *vp)
{
	unsigned long flags;
	struct ib_ah *gone;
	bool valid;
	u32 gen;
	int i;

	if (!atomic_xchg(&vp->gid_changed, 0))
		return;
	/* After the exchange: a change from now on asks for another sweep. */
	gen = atomic_read(&vp->gid_gen);
	for (i = 0; i < RMAD_AH_CACHE; i++) {
		struct rmad_ah_entry *e = &vp->ahs[i];

		if (!e->ah)
			continue;
		valid = !e->stale && rmad_ah_current(vp, e);
		gone = NULL;
		spin_lock_irqsave(&vp->lock, flags);
		if (valid) {
			e->gid_gen = gen;
		} else if (!e->users) {
			gone = e->ah;
			e->ah = NULL;
			e->ready = false;
			e->stale = false;
			memset(&e->attr, 0, sizeof(e->attr));
			memset(&e->key, 0, sizeof(e->key));
			e->ver++;
		} else {
			e->ready = false;
			e->stale = true;
		}
		spin_unlock_irqrestore(&vp->lock, flags);
		if (gone)
			rdma_destroy_ah(gone, RDMA_DESTROY_AH_SLEEPABLE);
	}
}

/* @attr without the destination MAC: what a post in the caller's context matches. */
static void rmad_ah_key(const struct rdma_ah_attr *attr, struct rdma_ah_attr *key)
{
	*key = *attr;
	if (key->type == RDMA_AH_ATTR_TYPE_ROCE)
		eth_zero_addr(key->roce.dmac);
}

/*
 * Makes @e the one handle that posts in the caller's context use for its
 * destination, for RMAD_AH_FRESH_MS: another ready entry for the same
 * destination (made for a MAC that has changed since) serves them no more.
 * The caller holds the port's lock.
 */
static void rmad_ah_refresh(struct rmad_vport *vp, struct rmad_ah_entry *e)
{
	int i;

	for (i = 0; i < RMAD_AH_CACHE; i++) {
		struct rmad_ah_entry *o = &vp->ahs[i];

		if (o != e && o->ready && !memcmp(&o->key, &e->key, sizeof(o->key)))
			o->fresh_until = jiffies;
	}
	e->fresh_until = jiffies + msecs_to_jiffies(RMAD_AH_FRESH_MS);
}

/*
 * The address handle for @attr, with one more user: from the cache, made
 * and cached at the first transmission to the destination, or (when every
 * cache entry is in use by another destination) made for this send alone.
 * The transmit work is the only caller, so a handle is made and replaced
 * outside the lock; an entry being replaced is not ready meanwhile, so no
 * post in the caller's context uses it.
 */
struct rmad_ah_entry *rmad_ah_get(struct rmad_vport *vp, const struct rdma_ah_attr *attr)
{
	struct rmad_ah_entry *e, *free = NULL;
	unsigned long flags;
	struct ib_ah *ah, *old;
	u32 gen;
	int i;

	/* Before the handle is made: a change after this makes it not current. */
	gen = atomic_read(&vp->gid_gen);
	spin_lock_irqsave(&vp->lock, flags);
	for (i = 0; i < RMAD_AH_CACHE; i++) {
		e = &vp->ahs[i];
		if (e->ready && !memcmp(&e->attr, attr, sizeof(*attr))) {
			e->users++;
			rmad_ah_refresh(vp, e);
			spin_unlock_irqrestore(&vp->lock, flags);
			return e;
		}
		if (!free && (!e->ah || !e->users))
			free = e;
	}
	if (free) {
		free->users++; /* reserved: no send completion destroys it now */
		free->ready = false;
	}
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
	old = free->ah;
	if (old)
		rdma_destroy_ah(old, RDMA_DESTROY_AH_SLEEPABLE);
	spin_lock_irqsave(&vp->lock, flags);
	free->ah = ah;
	free->attr = *attr;
	rmad_ah_key(attr, &free->key);
	free->ver++;
	free->gid_gen = gen;
	free->stale = false;
	free->ready = true;
	rmad_ah_refresh(vp, free);
	spin_unlock_irqrestore(&vp->lock, flags);
	return free;
}

/*
 * The ready, fresh cached handle whose destination is @key (an address
 * without its MAC), with one more user, or NULL. Only a handle made or found
 * current since the last GID table change: its source GID entry may be gone
 * otherwise, and the transmit work sweeps first. The caller holds the port's
 * lock: any context.
 */
struct rmad_ah_entry *rmad_ah_find_ready(struct rmad_vport *vp, const struct rdma_ah_attr *key)
{
	u32 gen = atomic_read(&vp->gid_gen);
	int i;

	for (i = 0; i < RMAD_AH_CACHE; i++) {
		struct rmad_ah_entry *e = &vp->ahs[i];

		if (e->ready && e->gid_gen == gen && time_before(jiffies, e->fresh_until) &&
		    !memcmp(&e->key, key, sizeof(*key))) {
			e->users++;
			return e;
		}
	}
	return NULL;
}

static_assert(sizeof(struct rmad_ah_tkey) == 4 * sizeof(u64));

/* Whether two transmissions' keys are equal: four words, no byte compare. */
static bool rmad_ah_tkey_eq(const struct rmad_ah_tkey *a, const struct rmad_ah_tkey *b)
{
	const u64 *x = (const u64 *)a, *y = (const u64 *)b;

	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3];
}

/*
 * The handle of the last destination a post in the caller's context found
 * (rmad_ah_remember), if @tk is that destination and its entry still serves
 * it as rmad_ah_find_ready would (ready, current, fresh, and not given another
 * destination since), with one more user; otherwise NULL, and the caller asks
 * rmad_ah_find_ready. The caller holds the port's lock.
 */
struct rmad_ah_entry *rmad_ah_find_last(struct rmad_vport *vp, const struct rmad_ah_tkey *tk)
{
	struct rmad_ah_entry *e = vp->last_e;

	if (!e || e->ver != vp->last_ver || !rmad_ah_tkey_eq(&vp->last_tkey, tk))
		return NULL;
	if (!e->ready || e->gid_gen != atomic_read(&vp->gid_gen) ||
	    !time_before(jiffies, e->fresh_until))
		return NULL;
	e->users++;
	return e;
}

/* @e, found by rmad_ah_find_ready, serves @tk: the next such post looks here first. */
void rmad_ah_remember(struct rmad_vport *vp, const struct rmad_ah_tkey *tk,
		      struct rmad_ah_entry *e)
{
	vp->last_tkey = *tk;
	vp->last_e = e;
	vp->last_ver = e->ver;
}

/* Destroys the cached address handles (the port is closing: no send uses them). */
void rmad_ah_destroy_all(struct rmad_vport *vp)
{
	int i;

	for (i = 0; i < RMAD_AH_CACHE; i++)
		if (vp->ahs[i].ah)
			rdma_destroy_ah(vp->ahs[i].ah, RDMA_DESTROY_AH_SLEEPABLE);
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
 * as long). Reads the port's immutable protocol and ib_core's GID cache, and
 * the neighbour tables: no port query. Returns the hop limit, or an errno.
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
