/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The instruction-count mode of `make bench` (BENCH_INSN=1; test flavour
 * only). Each timed window of the benchmark is also a counted one: a marker
 * at its start and one at its end, which QEMU's TCG plugin of
 * tools/insncount/ turns into the guest's instruction count at that point
 * (every vCPU together). The driver then prints, for each figure, which of
 * its windows it summed and how many operations they held ("bench-insn:"
 * lines); scripts/report/insn-report.py pairs them with the plugin's log.
 *
 * A marker is a 7-byte NOP (nopl 0x52AD<id>(%rax)): outside the counting mode
 * nothing executes it, and any CPU would run it as a NOP.
 */
#ifndef RMAD_BENCH_INSN_H
#define RMAD_BENCH_INSN_H

#include <linux/types.h>

/* The counted windows: one per kind of figure, each with ids of its own per implementation. */
enum bench_win {
	WIN_POST = 1,		/* the post calls */
	WIN_SETTLE,		/* from the first post until the device completed the last */
	WIN_CANCEL,		/* the cancel calls, until the last flush was delivered */
	WIN_MODIFY,		/* the modify calls */
	WIN_MATCH,		/* from the responses' release until the last was delivered */
	WIN_CREATE_FREE,	/* buffers created and freed */
	WIN_TXN,		/* transactions, from the first create until the last handler */
	WIN_TIMEOUTS,		/* from the delivery queue's release until the last timeout */
	WIN_UNREGISTER,		/* the unregistration with the sends outstanding */
	BENCH_WINS,
};

/*
 * The marker id of window @w of implementation @impl (its start; its end is
 * the next id). Ids below 2 * BENCH_WINS * BENCH_INSN_IMPLS; one more marks
 * the start of a run (a load of the module).
 */
#define BENCH_INSN_IMPLS 4
#define BENCH_INSN_RUN_ID (2 * BENCH_WINS * BENCH_INSN_IMPLS)

/* Whether this load counts instructions (module parameter bench_insn). */
extern bool bench_insn;

/* The id of window @w of the implementation named @impl ("c", "rmad", "rmad-capi", "floor"). */
u32 bench_insn_id(const char *impl, enum bench_win w);

/*
 * In the counting mode, lets what is pending run before a window starts (the
 * console's printer, the device's work): a window holds only what it does.
 */
void bench_insn_quiesce(void);

/*
 * In the counting mode, keeps this thread on its CPU from @on until !@on: what
 * would preempt it (the device's work, woken by the posts) waits, so that a
 * window of calls counts the calls alone, the same way in every run.
 */
void bench_insn_pin(bool on);

/* Starts window @id (after bench_insn_quiesce(), and before its clock is read). */
void bench_insn_start(u32 id);

/* Ends window @id; returns its number among the ends of @id in this load, from 0. */
u32 bench_insn_end(u32 id);

/* Marks the start of a run for @n outstanding sends ("bench-insn-run:" line first). */
void bench_insn_run(u32 n);

/*
 * Prints the "bench-insn:" line of figure @op of @impl: the windows of id @id
 * numbered @first to @last, @windows of them, held @ops operations.
 */
void bench_insn_emit(const char *impl, const char *op, u32 n, u32 rep, u32 id, u32 first,
		     u32 last, u32 windows, u32 ops);

#endif /* RMAD_BENCH_INSN_H */
