/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Suite rmad_rxe: code written for ib_core's MAD layer on rmad through
 * include/rmad_ib_mad.h (src/testing/suites/rxe/ibmad.c, for ibmad.rs).
 */

#ifndef RMAD_TEST_RXE_IBMAD_H
#define RMAD_TEST_RXE_IBMAD_H

#include <linux/types.h>

struct ib_device;

/*
 * Runs the header's checks on @port of @dev from GID index @gid_index: 0, or
 * the first error (logged with what failed). Process context.
 */
int rmad_test_ib_mad(struct ib_device *dev, u32 port, int gid_index);

/* The kinds of packet rmad_test_wc_round_trip() takes. */
enum {
	RMAD_TEST_WC_IB,		/* InfiniBand, no GRH */
	RMAD_TEST_WC_IB_GRH,		/* InfiniBand with a GRH */
	RMAD_TEST_WC_ROCE_V1,		/* RoCE v1: a GRH, network type IB, a VLAN */
	RMAD_TEST_WC_ROCE_V2_IPV4,	/* RoCE v2 over IPv4: the IP header in the GRH's end */
	RMAD_TEST_WC_ROCE_V2_IPV6,	/* RoCE v2 over IPv6, a VLAN */
	RMAD_TEST_WC_KINDS,
};

/*
 * Takes a packet of @kind through what rmad keeps of it (the verbs transport's
 * record, the engine's) to the struct ib_wc and GRH the header hands a client:
 * 0 if they equal the packet's own in every field ib_core's clients read,
 * -EBADMSG (and what differs, logged) otherwise.
 */
int rmad_test_wc_round_trip(int kind);

#endif /* RMAD_TEST_RXE_IBMAD_H */
