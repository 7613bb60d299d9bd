/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Test scaffolding (test build only): rmad's C API called from a timer and
 * from an hrtimer (src/testing/atomic_calls.c), for the rmad_capi suite
 * (src/testing/atomic_calls.rs, which mirrors struct rmad_atomic_result).
 */
#ifndef RMAD_TEST_ATOMIC_CALLS_H
#define RMAD_TEST_ATOMIC_CALLS_H

#include <linux/types.h>

struct rmad_agent;
struct rmad_recv_buf;
struct rmad_send_buf;

#define RMAD_FROM_TIMER 0
#define RMAD_FROM_HRTIMER 1

/* What the calls returned, and their context (mirrored in src/testing/atomic_calls.rs). */
struct rmad_atomic_result {
	int hardirq;
	int softirq;
	int irqs_off;
	int post;
	int modify;
	int cancel;
	int cancel_again;
	int free_busy;
	int create;
	int mad_ok;
	int free;
	int stale_free;
	int modify_mad;
	int set;
	int context_ok;
	int retries;
	int agent_context_ok;
	u32 hi_tid;
	u32 send_len;
	int recv_mad_ok;
	int recv_free;
	int seg_count;
	u32 seg_size;
	int seg_ok;
	int seg_beyond_null;
};

/*
 * Posts @buf, modifies and cancels that post, tries to free it (outstanding),
 * reads the agent's hi_tid and context, then creates a buffer with GFP_ATOMIC,
 * sets it, reads it back (and its length) and frees it, reads and frees the kept
 * received MAD @recv, and reads the segments of the RMPP buffer @rmpp, all from a
 * timer (RMAD_FROM_TIMER) or an hrtimer (RMAD_FROM_HRTIMER) callback. Returns 0,
 * or -ETIMEDOUT if the callback did not run.
 */
int rmad_test_call_from(int where, struct rmad_agent *agent, struct rmad_send_buf *buf,
			struct rmad_recv_buf *recv, struct rmad_send_buf *rmpp,
			struct rmad_atomic_result *res);

#endif /* RMAD_TEST_ATOMIC_CALLS_H */
