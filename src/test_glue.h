/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Test scaffolding (test build only): rmad's C API called from a timer and
 * from an hrtimer (test_glue.c), for src/capi_tests.rs.
 */
#ifndef RMAD_TEST_GLUE_H
#define RMAD_TEST_GLUE_H

#include <linux/types.h>

struct rmad_agent;
struct rmad_send_buf;

#define RMAD_FROM_TIMER 0
#define RMAD_FROM_HRTIMER 1

/* What the calls returned, and the context they ran in (mirrored in capi_tests.rs). */
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
};

/*
 * Posts @buf, modifies and cancels that post, tries to free it (outstanding),
 * reads the agent's hi_tid and context, then creates a buffer with GFP_ATOMIC,
 * sets it, reads it back (and its length) and frees it, reads and frees the kept
 * received MAD @recv, all from a timer (RMAD_FROM_TIMER) or an hrtimer
 * (RMAD_FROM_HRTIMER) callback. Returns 0, or -ETIMEDOUT if the callback did not run.
 */
int rmad_test_call_from(int where, struct rmad_agent *agent, struct rmad_send_buf *buf,
			struct rmad_recv_buf *recv, struct rmad_atomic_result *res);

struct task_struct;

/* A kernel thread running fn(data), named @name (kthread_run). */
struct task_struct *rmad_test_kthread_run(int (*fn)(void *), void *data, const char *name);
/* Sets the current task's failslab flag (failslab's task-filter). */
void rmad_test_make_it_fail(int on);

/*
 * Makes one of the test kernel's detectors report once ("leak", "kasan",
 * "lockdep", "hung" with @arg seconds, or "race" for KCSAN): positive controls
 * for the verdict.
 */
int rmad_test_control(const char *what, long arg);

#endif /* RMAD_TEST_GLUE_H */
