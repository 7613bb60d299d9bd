/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The hooks of suite rmad_rxe into rxe0 and rmad's private QP
 * (src/testing/suites/rxe/hooks.c), for its Rust side
 * (src/testing/suites/rxe/hooks.rs).
 */

#ifndef RMAD_TEST_RXE_HOOKS_H
#define RMAD_TEST_RXE_HOOKS_H

#include <linux/types.h>

struct ib_device;
struct rmad_vport;

/* The private port's counters (mirrored by VportCounts in hooks.rs). */
struct rmad_test_vport_counts {
	/* Receives posted and not completed yet. */
	u32 rq_posted;
	/* Times the QP was reset to RTS after it failed. */
	u32 resets;
	/* Times a recovery found the device not drained and left it for later. */
	u32 deferred;
};

/* Counts every call of @dev's query_port from now on, from 0. */
void rmad_test_port_queries_start(struct ib_device *dev);
/* The calls counted so far. */
u32 rmad_test_port_queries(void);
/* Gives @dev its query_port back. */
void rmad_test_port_queries_stop(struct ib_device *dev);

/* Fails the next @n posts of receives to the private QP of @vp (-ENOMEM). */
void rmad_test_fail_recv_posts(struct rmad_vport *vp, u32 n);
/* The posts still to fail. */
u32 rmad_test_recv_posts_to_fail(void);
/* Gives the device of @vp its post_recv back. */
void rmad_test_fail_recv_posts_stop(struct rmad_vport *vp);

/* Moves the private QP of @vp to the error state; 0 or an errno. */
int rmad_test_vport_qp_error(struct rmad_vport *vp);
/* The counters of @vp. */
void rmad_test_vport_counts(struct rmad_vport *vp, struct rmad_test_vport_counts *out);

/*
 * Takes one use of the ready cached address handle of @vp from GID index
 * @sgid_index to GID @dgid, as a send on the device holds one; NULL if there
 * is none. rmad_test_ah_unhold() gives it back, as the send's completion does.
 */
void *rmad_test_ah_hold(struct rmad_vport *vp, u8 sgid_index, const u8 *dgid);
void rmad_test_ah_unhold(struct rmad_vport *vp, void *held);
/* How many cached address handles of @vp go from GID index @sgid_index to @dgid. */
u32 rmad_test_ah_cached(struct rmad_vport *vp, u8 sgid_index, const u8 *dgid);

/* Runs "ip addr @op @addr dev @netdev" in user space; its exit status, or an errno. */
int rmad_test_ip_addr(const char *op, const char *addr, const char *netdev);

#endif /* RMAD_TEST_RXE_HOOKS_H */
