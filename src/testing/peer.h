/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A peer of rmad's private QP (src/testing/peer.c), for the test flavour's
 * Rust side (src/testing/peer.rs).
 */

#ifndef RMAD_TEST_PEER_H
#define RMAD_TEST_PEER_H

#include <linux/types.h>

struct ib_ah;
struct ib_device;
struct ib_pd;
struct rmad_test_peer;

/*
 * An address handle on @pd to @dgid, a GID of the same @port, from GID
 * @sgid_index (the destination MAC on RoCE is the source GID's); an ERR_PTR
 * on failure.
 */
struct ib_ah *rmad_test_peer_ah(struct ib_pd *pd, u32 port, u8 sgid_index, const u8 *dgid);

/* A UD QP of its own on (@dev, @port), sending from GID @sgid_index; NULL on failure. */
struct rmad_test_peer *rmad_test_peer_open(struct ib_device *dev, u32 port, u8 sgid_index);
/*
 * Sends the @len bytes at @data (at most 512) to QP @dqpn at GID @dgid with
 * the GSI Q_Key, and waits for the send completion: 0, or an errno.
 */
int rmad_test_peer_send(struct rmad_test_peer *p, u32 dqpn, const u8 *dgid, const void *data,
			u32 len);
/* Destroys the peer; NULL is ignored. */
void rmad_test_peer_close(struct rmad_test_peer *p);

#endif /* RMAD_TEST_PEER_H */
