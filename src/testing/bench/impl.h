/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the benchmark's C files share (src/testing/bench/: driver.c runs the
 * benchmark, rounds.c and rows.c are its rounds, c_layer.c and capi.c two of
 * the implementations measured).
 */
#ifndef RMAD_BENCH_IMPL_H
#define RMAD_BENCH_IMPL_H

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/if_ether.h>
#include <linux/minmax.h>
#include <linux/sched.h>
#include <linux/semaphore.h>
#include <linux/timekeeping.h>
#include <linux/types.h>
#include <rdma/ib_verbs.h>

#include "insn.h"

#define BENCH_CLASS 0x0b
#define BENCH_PORT 1
/* The port's IPv6 link-local GID (requests the responder answers). */
#define BENCH_GID_INDEX 0
/* The port's IPv4-mapped GID (unanswered sends, to a GID nobody has). */
#define BENCH_SILENT_GID_INDEX 1
/* Timeout of sends that wait for a response nobody gives (10 minutes). */
#define BENCH_LONG_MS 600000
/* Longest wait for any event of the benchmark. */
#define BENCH_WAIT_MS 300000

/* Timeout of the transactions' GETs: a lost one fails its batch, which then gives no figure. */
#define BENCH_TXN_MS 2000
/* Transactions in flight at once (the responder row's window too). */
#define BENCH_TXN_WINDOW 16

/* What a send is, carried in its context: its handler counts it there. */
enum bench_kind {
	KIND_SILENT = 1,	/* one of the n outstanding sends nobody answers */
	KIND_MARKER,		/* timeout 0: completes when the device took it */
	KIND_REQ,		/* a GET the responder answers */
	KIND_GATE,		/* its handler holds the delivery queue */
	KIND_RESP,		/* (receive handler) a matched response */
	KIND_TXN,		/* a transaction's GET: its handler opens the window again */
};

/* For events that need a packet through the device, which UD may drop. */
#define BENCH_PACKET_WAIT_MS 20000

/*
 * Counts events and notes when a target count was reached; ends the counted
 * window @insn_id there (insn.h; 0: none), whose number it notes in @insn_seq.
 */
struct bench_ctr {
	atomic_t hits;
	int target;
	u64 at_ns;
	struct completion done;
	u32 insn_id, insn_seq;
};

/* The counters of one round, shared by the handlers of every implementation. */
struct rmad_bench_round {
	/* gate_out: the gate's handler is past gate_go. */
	struct bench_ctr silent, marker, req, resp, gate_in, gate_out, txn;
	struct completion gate_go;
	atomic_t timed_out, flushed, other;
	/* Transactions that may still start, and those that ended otherwise than answered. */
	struct semaphore txn_window;
	atomic_t txn_failed;
};

void bench_ctr_init(struct bench_ctr *c);
/* Expects the count to reach @target (cumulative); set before the events start. */
void bench_ctr_expect(struct bench_ctr *c, int target);
/* Expects @more events after those counted so far; returns the target. */
int bench_ctr_expect_more(struct bench_ctr *c, int more);
void bench_ctr_hit(struct bench_ctr *c);
/* Waits in one-second slices (so that no hang detector mistakes it for a hang). */
int bench_wait_slices(struct completion *done, unsigned int ms);
/* Waits for the target of @c, at most BENCH_WAIT_MS. */
int bench_ctr_wait(struct bench_ctr *c);

/*
 * The operations every implementation provides; @p is its private state.
 * Every buffer an operation creates, the implementation's send handler frees.
 */
struct bench_ops {
	const char *name;
	/* Registers the agent (the timed sends' and the gate's: rounds.c, round B). */
	int (*open)(void *p, struct rmad_bench_round *r, u32 n);
	/*
	 * Creates the n silent sends (timeout @timeout_ms, no retries), again
	 * once the last ones were delivered.
	 */
	int (*create)(void *p, int timeout_ms);
	/*
	 * Posts silent send @i. Calls with different @i on different states may
	 * run at once (the scaling round's threads); on one state, one at a time.
	 */
	int (*post)(void *p, u32 i);
	/* Waits until the device has taken the n silent sends of the last create. */
	int (*wait_sent)(void *p);
	int (*modify)(void *p, u32 i, int ms);
	int (*cancel)(void *p, u32 i);
	/*
	 * Creates @count GETs the responder answers, posted by post_req(0 ..
	 * @count - 1); those of the last call still posted are cancelled, the
	 * others freed.
	 */
	int (*reqs)(void *p, u32 count);
	int (*post_req)(void *p, u32 j);
	/* Creates and posts a marker. */
	int (*post_marker)(void *p);
	/* Creates and posts the gate's send (it waits for a response). */
	int (*post_gate)(void *p);
	int (*cancel_gate)(void *p);
	/* Creates a send buffer of one MAD on the agent and frees it. */
	int (*create_free)(void *p);
	/*
	 * Starts one transaction: creates a GET the responder answers (timeout
	 * BENCH_TXN_MS, no retries) and posts it (frees it if the post fails).
	 */
	int (*txn)(void *p);
	/*
	 * Frees the buffers not posted and unregisters the agents, which flush
	 * what is still outstanding (the flush round C measures).
	 */
	void (*unregister)(void *p);
	/* Cancels what is outstanding, waits for it, unregisters, frees everything. */
	void (*close)(void *p);
	/*
	 * From now until @p's next open, @p creates its silent sends on @owner's
	 * agent (both opened; @owner is closed after @p): the scaling round's
	 * two threads posting to one agent.
	 */
	void (*share)(void *p, void *owner);
};

/*
 * The low words of the TIDs of everything but the n silent sends (0 .. n - 1):
 * from here up, one per buffer, so that no two outstanding sends of an agent
 * share a TID.
 */
#define BENCH_LO_BASE 0x40000000u

/* The device (rxe0), while the benchmark runs; NULL without one. */
struct ib_device *bench_device(void);
/* Destination of the answered sends: the port's own GID 0, and its MAC. */
extern union ib_gid bench_gid;
extern u8 bench_mac[ETH_ALEN];
/* Destination of the unanswered sends: a GID that no port has. */
extern const union ib_gid bench_silent_gid;
/* Sets bench_gid and bench_mac from @dev's port; 0 or an error. */
int bench_addr(struct ib_device *dev);
/* Writes the MAD header of a send of the benchmark's class, TID @hi_tid:@lo. */
void bench_fill(void *mad, u32 hi_tid, u32 lo, u8 method);

/*
 * The irqsoff tracer's longest interrupts-off stretch (any CPU, any code)
 * since the last call, in ns, and resets it; -1 without the tracer
 * (irqsoff.c). @label names the figure, for BENCH_IRQSOFF_WHERE's report of
 * where the stretch was; NULL when the value only resets. Waits for a shell
 * of tests/vm/bench.sh to answer: never inside a timed loop.
 */
s64 bench_irqsoff_take(const char *label);

/* The driver's parts that its rounds (rounds.c, rows.c) share (driver.c). */

struct rmad_test_responder;

/* Up to this N, each figure repeats its round until it has timed cfg->min_ops operations. */
#define BENCH_REPEAT_N 100

/* What the rounds of one implementation in one repetition are given. */
struct bench_cfg {
	u32 n, sample, rtt_sample, rep;
	/* Operations each figure times at least, at N <= BENCH_REPEAT_N. */
	u32 min_ops;
	/* Sends of each scaling round (0: none). */
	u32 scale;
	const u32 *perm_modify, *perm_cancel;
	struct rmad_test_responder *responder;
	/* The largest irqsoff figure of the implementation's rounds of this repetition. */
	s64 irqoff_max;
};

/*
 * Whether this run is the interrupts-off pass (the irqsoff tracer is on): it
 * reports only the interrupts-off figures, and its rounds are not repeated.
 */
extern bool bench_irqsoff_pass;
/* Prints one figure as a "bench-json:" line, if this pass reports it. */
void bench_emit(const char *impl, const char *op, u32 n, u32 rep, s64 value, const char *unit);
/* Emits the irqsoff tracer's maximum since its last reset as figure @op of @ops. */
void bench_irqsoff_emit(const struct bench_ops *ops, struct bench_cfg *cfg, const char *op);
/* The slab's size now (reclaimable and not), in bytes. */
u64 bench_slab_bytes(void);
void bench_round_init(struct rmad_bench_round *r);

/*
 * How many operations a figure whose round times @per_pass of them times in
 * all: at N <= BENCH_REPEAT_N in the timing pass, at least cfg->min_ops (its
 * round repeats); otherwise one pass.
 */
static inline u32 bench_target(const struct bench_cfg *cfg, u32 per_pass)
{
	if (cfg->n > BENCH_REPEAT_N || bench_irqsoff_pass)
		return per_pass;
	return max(per_pass, cfg->min_ops);
}

/*
 * Gives the CPU away about once a second inside long loops (this kernel does
 * not preempt), and not more often: what it lets run would count as the
 * loop's time.
 */
static inline void bench_resched(u32 k, u64 *last)
{
	u64 now;

	if ((k & 15) != 15)
		return;
	now = ktime_get_ns();
	if (now - *last > NSEC_PER_SEC) {
		cond_resched();
		*last = ktime_get_ns();
	}
}

/* The rounds (rounds.c): N outstanding; N simultaneous timeouts; unregistration with N. */
int bench_round_ops(const struct bench_ops *ops, void *p, struct bench_cfg *cfg);
int bench_round_timeouts(const struct bench_ops *ops, void *p, struct bench_cfg *cfg);
int bench_round_unregister(const struct bench_ops *ops, void *p, struct bench_cfg *cfg);
/* The rows of the whole cost of a send (rows.c), run by bench_round_ops with N outstanding. */
void bench_row_create_free(const struct bench_ops *ops, void *p, struct bench_cfg *cfg);
int bench_row_txn(const struct bench_ops *ops, void *p, struct rmad_bench_round *r,
		  struct bench_cfg *cfg);

/* The implementations in C, and the size of the private state each one's @p points to. */
extern const struct bench_ops bench_c_ops;
extern const size_t bench_c_size;
extern const struct bench_ops bench_capi_ops;
extern const size_t bench_capi_size;

#endif /* RMAD_BENCH_IMPL_H */
