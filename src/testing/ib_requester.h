/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A requester in ib_core's own MAD layer (src/testing/ib_requester.c), for
 * the hostile-peer suite's comparison of the two layers' receive rules
 * (src/testing/ib_requester.rs).
 */

#ifndef RMAD_TEST_IB_REQUESTER_H
#define RMAD_TEST_IB_REQUESTER_H

#include <linux/types.h>

struct ib_device;
struct rmad_test_requester;

/* Kinds a requester counts by: bits 8..13 of a TID's low half. */
#define RMAD_TEST_REQUESTER_KINDS 64
/*
 * A response whose byte at this offset (the attribute modifier's last, which
 * matching ignores) is RMAD_TEST_HOSTILE counts as hostile.
 */
#define RMAD_TEST_HOSTILE_AT 23
#define RMAD_TEST_HOSTILE 0xee

/* What a requester's handlers saw for one kind. */
struct rmad_test_kind_counts {
	/* Receive-handler calls with the send: for a hostile datagram, for a real answer. */
	u32 hostile;
	u32 real;
	/* Receive-handler calls without a send. */
	u32 unsolicited;
	/* Send-handler calls: IB_WC_SUCCESS, IB_WC_WR_FLUSH_ERR, anything else. */
	u32 success;
	u32 flushed;
	u32 other;
};

/* Registers a GSI agent (no class) on (@dev, @port); NULL on failure. */
struct rmad_test_requester *rmad_test_requester_start(struct ib_device *dev, u32 port);
/* The agent's hi_tid. */
u32 rmad_test_requester_hi_tid(struct rmad_test_requester *r);
/*
 * Posts a SEND of class CongestionManagement with TID low half @kind << 8 to QP1 of
 * @dgid, from GID @sgid_index, waiting @timeout_ms for a response that nobody
 * but the test sends: 0, or an errno (-EBUSY if @kind has one outstanding).
 */
int rmad_test_requester_post(struct rmad_test_requester *r, u32 kind, const u8 *dgid,
			     u8 sgid_index, int timeout_ms);
/* Cancels @kind's outstanding send (which nothing else completes meanwhile). */
void rmad_test_requester_cancel(struct rmad_test_requester *r, u32 kind);
/* What the handlers saw for @kind. */
void rmad_test_requester_counts(struct rmad_test_requester *r, u32 kind,
				struct rmad_test_kind_counts *out);
/* Unregisters the agent (flushing what is outstanding) and frees @r; NULL is ignored. */
void rmad_test_requester_stop(struct rmad_test_requester *r);

#endif /* RMAD_TEST_IB_REQUESTER_H */
