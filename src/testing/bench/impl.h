/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the benchmark's C files share (src/testing/bench/: driver.c runs the
 * rounds, c_layer.c and capi.c are two of the implementations measured).
 */
#ifndef RMAD_BENCH_IMPL_H
#define RMAD_BENCH_IMPL_H

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/if_ether.h>
#include <linux/types.h>
#include <rdma/ib_verbs.h>

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

/* What a send is, carried in its context: its handler counts it there. */
enum bench_kind {
	KIND_SILENT = 1,	/* one of the n outstanding sends nobody answers */
	KIND_MARKER,		/* timeout 0: completes when the device took it */
	KIND_REQ,		/* a GET the responder answers */
	KIND_GATE,		/* its handler holds the delivery queue */
	KIND_RESP,		/* (receive handler) a matched response */
};

/* For events that need a packet through the device, which UD may drop. */
#define BENCH_PACKET_WAIT_MS 20000

/* Counts events and notes when a target count was reached. */
struct bench_ctr {
	atomic_t hits;
	int target;
	u64 at_ns;
	struct completion done;
};

/* The counters of one round, shared by the handlers of every implementation. */
struct rmad_bench_round {
	struct bench_ctr silent, marker, req, resp, gate_in;
	struct completion gate_go;
	atomic_t timed_out, flushed, other;
};

void bench_ctr_init(struct bench_ctr *c);
/* Expects the count to reach @target (cumulative); set before the events start. */
void bench_ctr_expect(struct bench_ctr *c, int target);
void bench_ctr_hit(struct bench_ctr *c);
/* Waits in one-second slices (so that no hang detector mistakes it for a hang). */
int bench_wait_slices(struct completion *done, unsigned int ms);
/* Waits for the target of @c, at most BENCH_WAIT_MS. */
int bench_ctr_wait(struct bench_ctr *c);

/* The operations every implementation provides; @p is its private state. */
struct bench_ops {
	const char *name;
	/* Registers the agents; creates @nreq requests and the markers. */
	int (*open)(void *p, struct rmad_bench_round *r, u32 n, u32 nreq);
	/* Creates the n silent sends (timeout @timeout_ms, no retries). */
	int (*create)(void *p, int timeout_ms);
	/*
	 * Posts silent send @i. Calls with different @i on different states may
	 * run at once (the scaling round's threads); on one state, one at a time.
	 */
	int (*post)(void *p, u32 i);
	/* Waits until the device has taken the n silent sends. */
	int (*wait_sent)(void *p);
	int (*modify)(void *p, u32 i, int ms);
	int (*cancel)(void *p, u32 i);
	int (*post_req)(void *p, u32 j);
	/* Posts the next marker, from the gate agent if @gate. */
	int (*post_marker)(void *p, int gate);
	int (*post_gate)(void *p);
	int (*cancel_gate)(void *p);
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

/* Markers per round: two on the agent, one on the gate agent (even and odd indexes). */
#define BENCH_MARKERS 4

/* Markers 0, 2, ... are the agent's; 1, 3, ... the gate agent's. */
static inline u32 bench_marker_index(u32 *posted, int gate)
{
	return 2 * posted[!!gate]++ + !!gate;
}

/* The device (rxe0), while the benchmark runs; NULL without one. */
struct ib_device *bench_device(void);
/* Destination of the answered sends: the port's own GID 0, and its MAC. */
extern union ib_gid bench_gid;
extern u8 bench_mac[ETH_ALEN];
/* Destination of the unanswered sends: a GID that no port has. */
extern const union ib_gid bench_silent_gid;
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

/* The implementations in C, and the size of the private state each one's @p points to. */
extern const struct bench_ops bench_c_ops;
extern const size_t bench_c_size;
extern const struct bench_ops bench_capi_ops;
extern const size_t bench_capi_size;

#endif /* RMAD_BENCH_IMPL_H */
