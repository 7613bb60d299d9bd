// SPDX-License-Identifier: GPL-2.0
/*
 * The markers of the instruction-count mode of `make bench` (insn.h), and the
 * lines that tell scripts/report/insn-report.py what each window held.
 */

#include <linux/atomic.h>
#include <linux/delay.h>
#include <linux/preempt.h>
#include <linux/printk.h>
#include <linux/string.h>

#include "insn.h"

bool bench_insn;

/*
 * What runs before a window starts, in the counting mode: the console's
 * printer thread (the figures printed since the last window) and the device's
 * work. A sleep lets them run; they are done well within it.
 */
#define BENCH_INSN_QUIET_MS 20

/* How many windows of each id ended in this load. */
static atomic_t ends[BENCH_INSN_RUN_ID];

/* The plugin needs the id as an immediate: one marker per id, chosen by a switch. */
#define MARK(i) asm volatile(".byte 0x0f,0x1f,0x80; .long %c0" :: "i"(0x52AD0000 | (i)) : "memory")
#define MARK_CASE(i)		\
	case (i):		\
		MARK(i);	\
		break
#define MARK_CASES8(i) \
	MARK_CASE(i); MARK_CASE((i) + 1); MARK_CASE((i) + 2); MARK_CASE((i) + 3); \
	MARK_CASE((i) + 4); MARK_CASE((i) + 5); MARK_CASE((i) + 6); MARK_CASE((i) + 7)

static_assert(BENCH_INSN_RUN_ID == 80, "the marker cases below cover ids 0 to 80");

static void mark(u32 id)
{
	switch (id) {
	MARK_CASES8(0); MARK_CASES8(8); MARK_CASES8(16); MARK_CASES8(24); MARK_CASES8(32);
	MARK_CASES8(40); MARK_CASES8(48); MARK_CASES8(56); MARK_CASES8(64); MARK_CASES8(72);
	MARK_CASE(80);
	}
}

static const char * const impls[BENCH_INSN_IMPLS] = { "c", "rmad", "rmad-capi", "floor" };

u32 bench_insn_id(const char *impl, enum bench_win w)
{
	u32 k;

	for (k = 0; k < BENCH_INSN_IMPLS; k++)
		if (!strcmp(impl, impls[k]))
			break;
	/* An unknown name counts as the floor's: no implementation has one. */
	if (k == BENCH_INSN_IMPLS)
		k = BENCH_INSN_IMPLS - 1;
	return 2 * (k * BENCH_WINS + (u32)w);
}

void bench_insn_quiesce(void)
{
	if (bench_insn)
		msleep(BENCH_INSN_QUIET_MS);
}

void bench_insn_pin(bool on)
{
	if (!bench_insn)
		return;
	if (on)
		preempt_disable();
	else
		preempt_enable();
}

void bench_insn_start(u32 id)
{
	if (bench_insn)
		mark(id);
}

u32 bench_insn_end(u32 id)
{
	if (!bench_insn || id >= BENCH_INSN_RUN_ID)
		return 0;
	mark(id + 1);
	return atomic_inc_return(&ends[id]) - 1;
}

void bench_insn_run(u32 n)
{
	u32 k;

	if (!bench_insn)
		return;
	for (k = 0; k < BENCH_INSN_RUN_ID; k++)
		atomic_set(&ends[k], 0);
	pr_info("bench-insn-run: n=%u\n", n);
	mark(BENCH_INSN_RUN_ID);
}

void bench_insn_emit(const char *impl, const char *op, u32 n, u32 rep, u32 id, u32 first,
		     u32 last, u32 windows, u32 ops)
{
	if (!bench_insn || !windows || !ops)
		return;
	pr_info("bench-insn: {\"impl\": \"%s\", \"op\": \"%s\", \"n\": %u, \"rep\": %u, \"id\": %u, \"first\": %u, \"last\": %u, \"windows\": %u, \"ops\": %u}\n",
		impl, op, n, rep, id, first, last, windows, ops);
}
