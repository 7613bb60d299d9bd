/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The private port of rmad's verbs glue, shared by the files of the shim
 * (src/verbs/shim.c: the port and its sends; src/verbs/recv.c: what arrives;
 * src/verbs/address.c: address handles and addresses) and by the test
 * flavour's hooks of the private QP (src/testing/suites/rxe/hooks.c). Rust
 * sees none of it: to Rust a port is an opaque handle (src/verbs/shim.h).
 */
#ifndef RMAD_VERBS_VPORT_H
#define RMAD_VERBS_VPORT_H

#include <linux/atomic.h>
#include <linux/bitmap.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>

#include "shim.h"

#define RMAD_SQ 128
/* Receive buffers posted per port: as many as the C MAD layer's recv_queue_size. */
#define RMAD_RQ 512
/* Address handles kept per port, one per destination (see rmad_ah_get). */
#define RMAD_AH_CACHE 16
#define RMAD_MAD_SIZE 256
#define RMAD_GRH_SIZE 40
/* How long a failed post or reset waits before the transmit work tries it again. */
#define RMAD_RETRY_MS 20

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
 * How long a cached address handle serves posts from the caller's context
 * (rmad_shim_vport_send_now) after the transmit work last used it: on RoCE
 * the handle carries the destination's MAC, which only the transmit work
 * checks against the neighbour cache, so it checks again at least this
 * often.
 */
#define RMAD_AH_FRESH_MS 5000

/*
 * An address handle and the destination it was made for. It is made once,
 * at the first transmission to the destination, and kept until the port
 * closes or its source GID goes; @users counts the sends on the QP that use
 * it. @ready, @key, @fresh_until and @gid_gen are what a post from the
 * caller's context matches, under the port's lock: @ah and @attr change only
 * while @ready is false.
 */
/*
 * The fields of a transmission (struct rmad_tx) that its address handle is made
 * from, as they come: two equal ones make the same handle (rmad_tx_attr), so a
 * post compares these 32 bytes with the last destination's, not whole
 * attributes with every cached handle's (rmad_ah_find_last).
 */
struct rmad_ah_tkey {
	u8 dgid[16];
	u32 dlid;
	u32 flow_label;
	u8 sl;
	u8 path_bits;
	u8 has_grh;
	u8 sgid_index;
	u8 hop_limit;
	u8 traffic_class;
	u8 pad[2];
} __aligned(8);

struct rmad_ah_entry {
	struct ib_ah *ah;
	struct rdma_ah_attr attr;
	/* @attr without the destination MAC. */
	struct rdma_ah_attr key;
	unsigned long fresh_until;
	/* The port's gid_gen when the handle was made or last found current. */
	u32 gid_gen;
	u32 users;
	bool ready;
	/* Not in the cache: destroyed when its last send completes. */
	bool transient;
	/*
	 * Its source GID entry went while sends used it: no send takes it any
	 * more, and the transmit work destroys it once its last send completed.
	 */
	bool stale;
	/* Grows whenever the entry is given another destination or emptied. */
	u32 ver;
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
	/*
	 * Protects free_send, nfree, and the cache entries' users counts and
	 * readiness (see struct rmad_ah_entry).
	 */
	spinlock_t lock;
	/* Indexes of the send slots that are free: a stack, O(1) both ways. */
	u16 free_send[RMAD_SQ];
	u32 nfree;
	/* Send slots set up (all of them once the port is open). */
	u32 nslots;
	/*
	 * Only the port's transmit work and close make, replace and destroy
	 * the cache's handles; posts from the caller's context use ready ones.
	 */
	struct rmad_ah_entry ahs[RMAD_AH_CACHE];
	/*
	 * The destination a post in the caller's context found last (under the
	 * lock): its key, its entry, and that entry's ver then, so that a
	 * destination given to the entry since does not match.
	 */
	struct rmad_ah_tkey last_tkey;
	struct rmad_ah_entry *last_e;
	u32 last_ver;
	/*
	 * GID table changes of the port, which make the transmit work sweep the
	 * cache (gid_changed; also set when a stale handle's last send completed),
	 * and their count (gid_gen): a post from the caller's context uses only a
	 * handle found current since the last change.
	 */
	struct ib_event_handler events;
	atomic_t gid_changed;
	atomic_t gid_gen;
	/*
	 * A send completed with an error: the QP may be in the error state (rxe
	 * moves it there when the netdev refuses a packet, for good), and the
	 * transmit work resets it before its next send (rmad_shim_vport_recover).
	 */
	atomic_t send_failed;
	/*
	 * The transmit work took a failed send up and has not brought the QP
	 * back yet: the last receive handler of the flush, or the retry work,
	 * runs it again (rmad_recv_done, rmad_retry_work).
	 */
	atomic_t recovering;
	/* Receives posted and not yet completed (their handler done). */
	atomic_t rq_posted;
	/*
	 * Receive slots whose post failed: the transmit work posts them again
	 * (rmad_repost), woken by the retry work. Only the transmit work clears
	 * a bit; a slot's bit is set only while the slot is off the QP.
	 */
	DECLARE_BITMAP(unposted, RMAD_RQ);
	/* Runs the transmit work again a little later (a failed post, a failed reset). */
	struct delayed_work retry;
	/* Times the QP was reset to RTS after it failed. */
	atomic_t resets;
	/* Times a recovery found the device not drained yet and left it for later. */
	atomic_t deferred;
	struct rmad_slot send[RMAD_SQ];
	struct rmad_slot recv[RMAD_RQ];
};

/* recv.c: the receive path. */
int rmad_post_recv(struct rmad_slot *s);
void rmad_repost_later(struct rmad_slot *s);
void rmad_repost(struct rmad_vport *vp);
void rmad_recv_done(struct ib_cq *cq, struct ib_wc *wc);

/*
 * Gives back one use of @e (its send completed, or its post failed), under
 * the port's lock. Sets *@destroy when that was the last use of a transient
 * handle, which the caller destroys outside the lock, in process context
 * (only the transmit work makes and posts with transient handles). Returns
 * true when it was the last use of a stale cached handle: the caller then sets
 * gid_changed and kicks the transmit work, whose sweep destroys it.
 */
static inline bool rmad_ah_unuse(struct rmad_ah_entry *e, bool *destroy)
{
	e->users--;
	*destroy = e->transient && !e->users;
	return e->stale && !e->users;
}

/*
 * A stale handle's last send completed (rmad_ah_unuse): the transmit work
 * sweeps it. Any context, no lock held.
 */
static inline void rmad_ah_retire_later(struct rmad_vport *vp)
{
	atomic_set(&vp->gid_changed, 1);
	rmad_rust_kick(vp->ctx);
}

/* address.c: the address-handle cache. */
struct rmad_ah_entry *rmad_ah_get(struct rmad_vport *vp, const struct rdma_ah_attr *attr);
struct rmad_ah_entry *rmad_ah_find_ready(struct rmad_vport *vp, const struct rdma_ah_attr *key);
struct rmad_ah_entry *rmad_ah_find_last(struct rmad_vport *vp, const struct rmad_ah_tkey *tk);
void rmad_ah_remember(struct rmad_vport *vp, const struct rmad_ah_tkey *tk,
		      struct rmad_ah_entry *e);
void rmad_ah_destroy_all(struct rmad_vport *vp);

#endif /* RMAD_VERBS_VPORT_H */
