// SPDX-License-Identifier: GPL-2.0
/*
 * The rows of `make bench` that tell the whole cost of a send (test flavour
 * only), run by round A (src/testing/bench/rounds.c) with its n sends
 * outstanding on the agent, in the timing pass only:
 *
 *   create_free  a send buffer of one MAD created and freed (C:
 *                ib_create_send_mad + ib_free_send_mad; rmad: Agent::create_mad
 *                and the buffer's drop; rmad's C API: rmad_create_send_mad +
 *                rmad_free_send_mad), ns per pair;
 *   transaction  a GET created, posted, answered by the responder, its send
 *                handler run and the buffer freed there, BENCH_TXN_WINDOW
 *                transactions in flight at once: ns per transaction, from the
 *                first create until the last send handler ran.
 */

#include <linux/jiffies.h>
#include <linux/math64.h>
#include <linux/printk.h>
#include <linux/semaphore.h>

#include "bench.h"
#include "impl.h"

/*
 * create_free: at least cfg->min_ops pairs at every N (a pair costs about a
 * microsecond), and no fewer than the round's sample.
 */
void bench_row_create_free(const struct bench_ops *ops, void *p, struct bench_cfg *cfg)
{
	u32 count = max(cfg->min_ops, min(cfg->n, cfg->sample)), k, seq;
	u32 id = bench_insn_id(ops->name, WIN_CREATE_FREE);
	u64 t0, t, last;
	int ret = 0;

	bench_insn_quiesce();
	bench_insn_start(id);
	t0 = ktime_get_ns();
	last = t0;
	for (k = 0; k < count && !ret; k++) {
		ret = ops->create_free(p);
		bench_resched(k, &last);
	}
	t = ktime_get_ns();
	seq = bench_insn_end(id);
	if (ret) {
		pr_warn("bench: %s n=%u: create_free failed (%d); no create_free figure\n",
			ops->name, cfg->n, ret);
		return;
	}
	bench_emit(ops->name, "create_free", cfg->n, cfg->rep, div_u64(t - t0, count), "ns");
	bench_insn_emit(ops->name, "create_free", cfg->n, cfg->rep, id, seq, seq, 1, count);
}

/*
 * transaction: bench_target() of the round's sample (at least cfg->min_ops at
 * N <= BENCH_REPEAT_N; above, min(N, sample): at N = 100 000 each of the C
 * layer's responses walks its list of 100 000). A transaction that ends
 * otherwise than answered (a datagram lost: BENCH_TXN_MS) costs its batch its
 * figure. Returns an error only if the transactions did not all end.
 */
int bench_row_txn(const struct bench_ops *ops, void *p, struct rmad_bench_round *r,
		  struct bench_cfg *cfg)
{
	u32 count = bench_target(cfg, min(cfg->n, cfg->sample)), k;
	u32 id = bench_insn_id(ops->name, WIN_TXN);
	int failed = atomic_read(&r->txn_failed), target, ret = 0;
	u64 t0, last;

	/*
	 * Counted, at least cfg->min_ops at every N: a thousand moved by 1-2 %
	 * between runs (the device's path through the network stack varies).
	 */
	if (bench_insn)
		count = max(count, cfg->min_ops);

	r->txn.insn_id = id;
	target = bench_ctr_expect_more(&r->txn, count);
	bench_insn_quiesce();
	bench_insn_start(id);
	t0 = ktime_get_ns();
	last = t0;
	for (k = 0; k < count; k++) {
		/* The send handlers open the window again. */
		if (down_timeout(&r->txn_window, msecs_to_jiffies(BENCH_PACKET_WAIT_MS))) {
			ret = -ETIMEDOUT;
			break;
		}
		ret = ops->txn(p);
		if (ret) {
			up(&r->txn_window);
			break;
		}
		bench_resched(k, &last);
	}
	/* Those that started end: answered, or timed out. */
	if (k < count)
		bench_ctr_expect(&r->txn, target - (int)(count - k));
	if (bench_ctr_wait(&r->txn)) {
		pr_err("bench: %s n=%u: %d of %u transactions ended\n", ops->name, cfg->n,
		       atomic_read(&r->txn.hits) - (target - (int)count), k);
		return -ETIMEDOUT;
	}
	failed = atomic_read(&r->txn_failed) - failed;
	if (ret || failed) {
		pr_warn("bench: %s n=%u: %d of %u transactions failed (%d); no transaction figure\n",
			ops->name, cfg->n, failed, k, ret);
		return 0;
	}
	bench_emit(ops->name, "transaction", cfg->n, cfg->rep, div_u64(r->txn.at_ns - t0, count),
		   "ns");
	bench_insn_emit(ops->name, "transaction", cfg->n, cfg->rep, id, r->txn.insn_seq,
			r->txn.insn_seq, 1, count);
	return 0;
}
