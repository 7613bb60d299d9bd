/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The benchmark driver of the test flavour (src/testing/bench/driver.c) and the
 * operations of rmad's Rust API that it calls (src/testing/bench.rs).
 */
#ifndef RMAD_TEST_BENCH_H
#define RMAD_TEST_BENCH_H

#include <linux/types.h>

struct rmad_bench_round;

/* Called by every implementation's handlers: @kind of the send, its @status. */
void rmad_bench_event(struct rmad_bench_round *r, int kind, int status);

/*
 * Runs the benchmark for @n outstanding sends, each figure timing at least
 * @min_ops operations at small @n, and the scaling rounds with @scale sends
 * unless 0, counting instructions if @insn (src/testing/bench.rs passes
 * @rust, and @rust2 for the scaling round's second thread).
 */
int rmad_bench_run(u32 n, u32 reps, u32 sample, u32 rtt_sample, u32 min_ops, u32 scale,
		   bool insn, void *rust, void *rust2);

/*
 * The goodput row (src/testing/bench/goodput.c): retry policy @policy (0: the
 * C layer, 1: rmad, 2: rmad with backoff and a deadline) against an overloaded
 * responder on @dev for @secs seconds; prints a "bench-goodput:" line for
 * repetition @rep.
 */
struct ib_device;
int rmad_bench_goodput(struct ib_device *dev, int policy, u32 secs, u32 rep);

/* Implemented in src/testing/bench.rs: the operations through rmad's Rust API. */
int rmad_bench_rust_open(void *p, struct rmad_bench_round *r, u32 n);
int rmad_bench_rust_create(void *p, int timeout_ms);
int rmad_bench_rust_post(void *p, u32 i);
int rmad_bench_rust_wait_sent_p(void *p);
/* How many sends of the agent with @hi_tid the device has taken (0 without that agent). */
u64 rmad_bench_rust_transmitted(u32 hi_tid);
/* Waits until the agent with @hi_tid had @n sends in all taken by the device. */
int rmad_bench_rust_wait_sent(u32 hi_tid, u64 n);
/* Waits until the agent with @hi_tid has nothing outstanding. */
int rmad_bench_rust_wait_idle(u32 hi_tid);
int rmad_bench_rust_modify(void *p, u32 i, int ms);
int rmad_bench_rust_cancel(void *p, u32 i);
int rmad_bench_rust_reqs(void *p, u32 count);
int rmad_bench_rust_post_req(void *p, u32 j);
int rmad_bench_rust_post_marker(void *p);
int rmad_bench_rust_post_gate(void *p);
int rmad_bench_rust_cancel_gate(void *p);
int rmad_bench_rust_create_free(void *p);
int rmad_bench_rust_txn(void *p);
void rmad_bench_rust_unregister(void *p);
void rmad_bench_rust_close(void *p);
void rmad_bench_rust_share(void *p, void *owner);

/* Times the holds of every rmad agent's lock from now on (@on), or not. */
void rmad_bench_rust_hold_timing(bool on);

/* What rmad_bench_rust_holds_take() writes, by index. */
enum {
	BENCH_HOLDS_COUNT,
	BENCH_HOLDS_P50,
	BENCH_HOLDS_P99,
	BENCH_HOLDS_P999,
	BENCH_HOLDS_MAX,
	BENCH_HOLDS_OVER_100US,
	BENCH_HOLDS,
};

/*
 * The distribution of the timed holds since the last call, into @out
 * (BENCH_HOLDS values, unless NULL), and resets it: their count; the upper
 * bounds (1 µs, then powers of two in µs) of the buckets where 50 %, 99 % and
 * 99.9 % of them were reached, in ns; the longest, in ns; how many lasted more
 * than 100 µs.
 */
void rmad_bench_rust_holds_take(s64 *out);

/* The removal row's C MAD layer agent (src/testing/bench/hold.c, src/testing/bench/hold.rs). */
int rmad_bench_c_hold(u32 n);
void rmad_bench_c_unhold(u32 *posted, u32 *flushed, u32 *other);

#endif /* RMAD_TEST_BENCH_H */
