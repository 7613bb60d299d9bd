// SPDX-License-Identifier: GPL-2.0
/*
 * The rounds of `make bench` (test flavour only), run by the driver
 * (src/testing/bench/driver.c) for each implementation through its table of
 * operations: round A with N sends outstanding, round B with N simultaneous
 * timeouts, round C the unregistration with N outstanding.
 *
 * At N <= BENCH_REPEAT_N ten or a hundred calls would be a figure's whole
 * sample, and the first of them pays the cold caches and, after each load of
 * the module, the emulator's first translation of its code: such figures
 * moved up to 10x from one repetition to the next. There each figure repeats
 * its part of the round until it has timed at least cfg->min_ops operations
 * (bench_target()), and reports their mean. The interrupts-off pass does not
 * repeat: it reports maxima, not times.
 */

#include <linux/delay.h>
#include <linux/math64.h>
#include <linux/printk.h>
#include <linux/slab.h>
#include <rdma/ib_verbs.h>

#include "../ib_responder.h"
#include "bench.h"
#include "impl.h"

/*
 * The time and the operations of one figure, summed over the passes of its
 * round, and the counted windows (insn.h) of id @id that they were: those
 * numbered @first to @last.
 */
struct bench_sum {
	u64 ns;
	u32 ops, passes;
	u32 id, first, last;
};

/* A figure of window @w of @ops, nothing summed yet. */
static struct bench_sum sum_of(const struct bench_ops *ops, enum bench_win w)
{
	return (struct bench_sum){ .id = bench_insn_id(ops->name, w) };
}

/* Adds a pass of @ns and @ops operations, whose counted window was number @seq. */
static void sum_add(struct bench_sum *s, u64 ns, u32 ops, u32 seq)
{
	if (!s->passes)
		s->first = seq;
	s->last = seq;
	s->ns += ns;
	s->ops += ops;
	s->passes++;
}

/*
 * Emits @s as ns per operation, or per pass if @per_pass (a figure for N sends
 * in all), and its counted windows (always per operation).
 */
static void sum_emit(const struct bench_ops *ops, const struct bench_cfg *cfg, const char *op,
		     const struct bench_sum *s, bool per_pass)
{
	u32 d = per_pass ? s->passes : s->ops;

	if (!d)
		return;
	bench_emit(ops->name, op, cfg->n, cfg->rep, div_u64(s->ns, d), "ns");
	bench_insn_emit(ops->name, op, cfg->n, cfg->rep, s->id, s->first, s->last, s->passes,
			s->ops);
}

/* Waits until the responder holds @target answers, at most @ms; returns how many it holds. */
static u32 resp_wait_for(struct rmad_test_responder *responder, u32 target, unsigned int ms)
{
	u64 end = ktime_get_ns() + (u64)ms * NSEC_PER_MSEC;
	u32 held;

	for (;;) {
		held = rmad_test_responder_held(responder);
		if (held >= target || ktime_get_ns() > end)
			return held;
		/* Not longer: at N = 10 a round waits here a thousand times. */
		usleep_range(200, 400);
	}
}

/*
 * Posts the n silent sends created last (timed: post), then a marker after
 * them (settle: from the first post until the marker completed).
 */
static int pass_post(const struct bench_ops *ops, void *p, struct rmad_bench_round *r,
		     const struct bench_cfg *cfg, struct bench_sum *post, struct bench_sum *settle)
{
	u64 t0, t, last;
	u32 i, seq;
	int ret;

	/* The settle window ends in the marker's handler. */
	r->marker.insn_id = settle->id;
	bench_insn_quiesce();
	bench_insn_pin(true);
	bench_insn_start(settle->id);
	bench_insn_start(post->id);
	t0 = ktime_get_ns();
	last = t0;
	for (i = 0; i < cfg->n; i++) {
		ret = ops->post(p, i);
		if (ret)
			break;
		bench_resched(i, &last);
	}
	t = ktime_get_ns();
	seq = bench_insn_end(post->id);
	bench_insn_pin(false);
	if (ret)
		return ret;
	bench_ctr_expect_more(&r->marker, 1);
	ret = ops->post_marker(p);
	if (!ret)
		ret = bench_ctr_wait(&r->marker);
	if (ret)
		return ret;
	sum_add(post, t - t0, cfg->n, seq);
	sum_add(settle, r->marker.at_ns - t0, cfg->n, r->marker.insn_seq);
	return 0;
}

/*
 * Cancels the sends in cfg->perm_cancel's order, the first @timed of them
 * timed (cancel), then the others up to @all, and waits until all were
 * delivered. The counted window, when all are timed, runs until the last
 * flush was delivered: a cancel's whole cost.
 */
static int pass_cancel(const struct bench_ops *ops, void *p, struct rmad_bench_round *r,
		       const struct bench_cfg *cfg, u32 timed, u32 all, struct bench_sum *cancel)
{
	u64 t0, t, last;
	u32 k;
	int ret;

	if (timed == all)
		r->silent.insn_id = cancel->id;
	bench_ctr_expect_more(&r->silent, all);
	bench_insn_quiesce();
	if (timed == all)
		bench_insn_start(cancel->id);
	t0 = ktime_get_ns();
	last = t0;
	for (k = 0; k < timed; k++) {
		ops->cancel(p, cfg->perm_cancel[k]);
		bench_resched(k, &last);
	}
	t = ktime_get_ns();
	for (; k < all; k++)
		ops->cancel(p, cfg->perm_cancel[k]);
	ret = bench_ctr_wait(&r->silent);
	if (!ret)
		sum_add(cancel, t - t0, timed, r->silent.insn_seq);
	return ret;
}

/* modify: random sends to the same timeout again, @s of them per pass. */
static void pass_modify(const struct bench_ops *ops, void *p, const struct bench_cfg *cfg, u32 s)
{
	u32 count = bench_target(cfg, s), k, j, id = bench_insn_id(ops->name, WIN_MODIFY), seq;
	u64 t0, t, last;

	bench_insn_quiesce();
	bench_insn_start(id);
	t0 = ktime_get_ns();
	last = t0;
	for (k = 0, j = 0; k < count; k++) {
		ops->modify(p, cfg->perm_modify[j], BENCH_LONG_MS);
		if (++j == s)
			j = 0;
		bench_resched(k, &last);
	}
	t = ktime_get_ns();
	seq = bench_insn_end(id);
	bench_emit(ops->name, "modify", cfg->n, cfg->rep, div_u64(t - t0, count), "ns");
	bench_insn_emit(ops->name, "modify", cfg->n, cfg->rep, id, seq, seq, 1, count);
}

/*
 * One pass of match: @m GETs whose answers the responder holds, released at
 * once; ns from the release until all were delivered to the receive handler.
 * Bursts overrun QP1's receive queue (UD drops them): the GETs go 64 at a
 * time. Returns 1 if the responses did not all arrive (no figure).
 */
static int match_once(const struct bench_ops *ops, void *p, struct rmad_bench_round *r,
		      const struct bench_cfg *cfg, u32 m, struct bench_sum *sum)
{
	u32 k, held;
	u64 t0;
	int ret;

	ret = ops->reqs(p, m);
	if (ret)
		return ret;
	rmad_test_responder_hold(cfg->responder);
	for (k = 0; k < m; k++) {
		ret = ops->post_req(p, k);
		if (ret)
			break;
		if ((k & 63) == 63)
			resp_wait_for(cfg->responder, k + 1, 10000);
	}
	held = resp_wait_for(cfg->responder, m, 10000);
	if (ret || !held) {
		pr_err("bench: %s: the responder got %d requests, holds %u of %u\n", ops->name,
		       rmad_test_responder_seen(cfg->responder), held, m);
		rmad_test_responder_release(cfg->responder);
		return ret ?: -EIO;
	}
	if (held < m)
		pr_warn("bench: %s n=%u: %u of %u requests were lost\n", ops->name, cfg->n,
			m - held, m);
	/* No request's send handler runs before its response: both are expected from here. */
	r->resp.insn_id = sum->id;
	bench_ctr_expect_more(&r->resp, held);
	bench_ctr_expect_more(&r->req, held);
	bench_insn_quiesce();
	bench_insn_start(sum->id);
	t0 = ktime_get_ns();
	rmad_test_responder_release(cfg->responder);
	if (bench_wait_slices(&r->resp.done, BENCH_PACKET_WAIT_MS)) {
		pr_warn("bench: %s n=%u: %d of %u responses arrived; no match figure\n",
			ops->name, cfg->n, atomic_read(&r->resp.hits) - (r->resp.target - held),
			held);
		bench_wait_slices(&r->req.done, BENCH_PACKET_WAIT_MS);
		return 1;
	}
	sum_add(sum, r->resp.at_ns - t0, held, r->resp.insn_seq);
	bench_wait_slices(&r->req.done, BENCH_PACKET_WAIT_MS);
	return 0;
}

/* match: passes of match_once() until the figure has timed enough responses. */
static int pass_match(const struct bench_ops *ops, void *p, struct rmad_bench_round *r,
		      const struct bench_cfg *cfg, u32 m)
{
	struct bench_sum sum = sum_of(ops, WIN_MATCH);
	u32 count = bench_target(cfg, m);
	int ret;

	while (sum.ops < count) {
		ret = match_once(ops, p, r, cfg, m, &sum);
		if (ret < 0)
			return ret;
		if (ret)
			return 0;
	}
	sum_emit(ops, cfg, "match", &sum, false);
	return 0;
}

/*
 * rtt: GETs one at a time, @q created per pass, from the post until the send
 * handler ran; one whose packet was dropped is left out.
 */
static int pass_rtt(const struct bench_ops *ops, void *p, struct rmad_bench_round *r,
		    const struct bench_cfg *cfg, u32 q)
{
	u32 count = bench_target(cfg, q), tried = 0, done = 0, k;
	u64 rtt = 0, t0;
	int ret;

	while (tried < count) {
		ret = ops->reqs(p, q);
		if (ret)
			return ret;
		for (k = 0; k < q; k++, tried++) {
			bench_ctr_expect_more(&r->req, 1);
			t0 = ktime_get_ns();
			ret = ops->post_req(p, k);
			if (ret)
				return ret;
			if (bench_wait_slices(&r->req.done, BENCH_PACKET_WAIT_MS))
				continue;
			rtt += r->req.at_ns - t0;
			done++;
		}
	}
	if (done)
		bench_emit(ops->name, "rtt", cfg->n, cfg->rep, div_u64(rtt, done), "ns");
	if (done < tried)
		pr_warn("bench: %s n=%u: %u of %u round trips completed\n", ops->name, cfg->n, done,
			tried);
	return 0;
}

/*
 * At N <= BENCH_REPEAT_N, after the round's own pass: the n sends again,
 * created, posted and settled, then all cancelled (timed) and delivered, until
 * post and cancel have timed as many as their figures need.
 */
static int pass_again(const struct bench_ops *ops, void *p, struct rmad_bench_round *r,
		      const struct bench_cfg *cfg, struct bench_sum *post, struct bench_sum *settle,
		      struct bench_sum *cancel)
{
	u32 count = bench_target(cfg, cfg->n);
	int ret;

	/*
	 * Above BENCH_REPEAT_N one pass is the figure: its cancels are a sample
	 * of the n sends (fewer than n), and another pass would create the n
	 * sends again over the ones still outstanding, whose handles it drops.
	 */
	if (count <= cfg->n)
		return 0;
	while (post->ops < count || cancel->ops < count) {
		ret = ops->create(p, BENCH_LONG_MS);
		if (!ret)
			ret = pass_post(ops, p, r, cfg, post, settle);
		if (!ret)
			ret = pass_cancel(ops, p, r, cfg, cfg->n, cfg->n, cancel);
		if (ret)
			return ret;
	}
	return 0;
}

/*
 * Round A, with n sends outstanding, for one implementation:
 *
 *   post         n sends (unanswered, timeout 10 min), ns per post call;
 *   settle       from the first post until a marker posted after them
 *                (timeout 0, same queue) completed: all n were handed to the
 *                device;
 *   memory       slab growth across creating and posting the n sends, per send;
 *   create_free  a buffer created and freed (rows.c), ns per pair;
 *   modify       s random sends to the same timeout again, ns per call;
 *   match        m (s / 5) GETs the responder holds the answers to, released
 *                at once: ns per response from the release until all m were
 *                delivered to the receive handler;
 *   rtt          q GETs one at a time, from the post until the send handler;
 *   transaction  GETs created, posted, answered, completed and freed, a window
 *                of them at a time (rows.c), ns per transaction;
 *   cancel       s random sends (another order), ns per call.
 *
 * At N <= BENCH_REPEAT_N the n sends are then created, posted, settled and
 * cancelled again until post, settle and cancel timed cfg->min_ops sends.
 */
int bench_round_ops(const struct bench_ops *ops, void *p, struct bench_cfg *cfg)
{
	struct bench_sum post = sum_of(ops, WIN_POST), settle = sum_of(ops, WIN_SETTLE);
	struct bench_sum cancel = sum_of(ops, WIN_CANCEL);
	struct rmad_bench_round *r;
	u32 n = cfg->n, s = min(cfg->n, cfg->sample), q = min(cfg->n, cfg->rtt_sample);
	/* A response costs a trip through the device: a fifth of the sample is enough. */
	u32 m = min(cfg->n, max(cfg->sample / 5, 1u));
	/* Repeating, every pass cancels all n: the next one creates them again. */
	u32 cancel_all = bench_target(cfg, n) > n ? n : s;
	u64 slab0;
	int ret;

	r = kzalloc_obj(*r);
	if (!r)
		return -ENOMEM;
	bench_round_init(r);
	ret = ops->open(p, r, n);
	if (ret)
		goto out_free;
	slab0 = bench_slab_bytes();
	ret = ops->create(p, BENCH_LONG_MS);
	if (ret)
		goto out;
	bench_irqsoff_take(NULL);
	ret = pass_post(ops, p, r, cfg, &post, &settle);
	if (ret)
		goto out;
	bench_emit(ops->name, "memory", n, cfg->rep,
		   div_s64((s64)bench_slab_bytes() - (s64)slab0, n), "bytes");
	/* The whole cost of a send, timed only where times are reported. */
	if (!bench_irqsoff_pass)
		bench_row_create_free(ops, p, cfg);
	pass_modify(ops, p, cfg, s);
	ret = pass_match(ops, p, r, cfg, m);
	if (!ret)
		ret = pass_rtt(ops, p, r, cfg, q);
	if (!ret && !bench_irqsoff_pass)
		ret = bench_row_txn(ops, p, r, cfg);
	if (ret)
		goto out;
	/* Posting, settling, modifying, matching and the round trips. */
	bench_irqsoff_emit(ops, cfg, "irqoff_ops");
	ret = pass_cancel(ops, p, r, cfg, s, cancel_all, &cancel);
	if (ret)
		goto out;
	/* The cancels and the delivery of what they flushed. */
	bench_irqsoff_emit(ops, cfg, "irqoff_cancel");
	ret = pass_again(ops, p, r, cfg, &post, &settle, &cancel);
out:
	/* What was timed in whole passes, also when a later pass failed. */
	sum_emit(ops, cfg, "post", &post, false);
	sum_emit(ops, cfg, "settle", &settle, true);
	sum_emit(ops, cfg, "cancel", &cancel, false);
	ops->close(p);
	if (ret)
		pr_err("bench: %s n=%u: the round failed (%d)\n", ops->name, n, ret);
out_free:
	kfree(r);
	return ret;
}

/* Posts the n silent sends (untimed), yielding now and then. */
static int post_all(const struct bench_ops *ops, void *p, u32 n)
{
	u64 last = ktime_get_ns();
	u32 i;
	int ret;

	for (i = 0; i < n; i++) {
		ret = ops->post(p, i);
		if (ret)
			return ret;
		bench_resched(i, &last);
	}
	return 0;
}

/*
 * Timeout of the sends of round B: they expire while the delivery queue is
 * held (a pass waits this long, and BENCH_SHORT_WAIT_MS more, once the device
 * took them). When the round repeats (N <= BENCH_REPEAT_N), a pass waits
 * BENCH_AGAIN_MS and BENCH_AGAIN_WAIT_MS more: its few sends were taken within
 * milliseconds, and a thousand passes at 0.5 s would take minutes.
 */
#define BENCH_SHORT_MS 300
#define BENCH_SHORT_WAIT_MS 200
#define BENCH_AGAIN_MS 4
#define BENCH_AGAIN_WAIT_MS 8

/*
 * Round B times a tenth of what the other figures do when it repeats, and at
 * least BENCH_TIMEOUTS_PASSES passes: 1 000 timeouts by default at N = 10
 * (100 passes), 2 000 at N = 100 (20 passes). Each pass waits for its sends
 * to expire and costs about 25 ms under emulation: 10 000 timeouts at N = 10
 * took 22-27 s per implementation and repetition, half of the bench at that
 * N. On a quiet host 100 passes agreed within 1.14x from one repetition to
 * the next, and 10 passes (N = 100) within 1.93x.
 */
#define BENCH_TIMEOUTS_SHARE 10
#define BENCH_TIMEOUTS_PASSES 20

/* The sends of round B that did not end timed out, over its passes. */
struct timeouts_tally {
	int timed_out, flushed, other;
};

/*
 * One pass of round B: the delivery of the agent's timeouts is held first
 * (the gate, a cancelled send of the same agent, has its send handler block:
 * on ib_core's port workqueue for the C layer, on the agent's work item for
 * rmad, which delivers its timeouts apart from other agents'), then n sends
 * with a timeout of @ms are posted;
 * once the device took them all and @wait_ms more have passed, all have
 * expired, and the queue is released: ns from the release until the n-th
 * timeout was delivered.
 */
static int timeouts_once(const struct bench_ops *ops, void *p, struct rmad_bench_round *r,
			 const struct bench_cfg *cfg, int ms, int wait_ms, struct bench_sum *sum,
			 struct timeouts_tally *tally)
{
	int timed_out = atomic_read(&r->timed_out), flushed = atomic_read(&r->flushed);
	int other = atomic_read(&r->other), ret;
	u64 t0;

	ret = ops->create(p, ms);
	if (ret)
		return ret;
	/* The gate: its send waits for a response, then is cancelled. */
	ret = ops->post_gate(p);
	if (ret)
		return ret;
	bench_ctr_expect_more(&r->marker, 1);
	ret = ops->post_marker(p);
	if (!ret)
		ret = bench_ctr_wait(&r->marker);
	if (ret)
		return ret;
	bench_ctr_expect_more(&r->gate_in, 1);
	bench_ctr_expect_more(&r->gate_out, 1);
	ret = ops->cancel_gate(p);
	if (!ret)
		ret = bench_ctr_wait(&r->gate_in);
	if (!ret)
		ret = post_all(ops, p, cfg->n);
	if (!ret)
		ret = ops->wait_sent(p);
	if (ret)
		return ret;
	msleep(ms + wait_ms);
	r->silent.insn_id = sum->id;
	bench_ctr_expect_more(&r->silent, cfg->n);
	bench_irqsoff_take(NULL);
	bench_insn_quiesce();
	bench_insn_start(sum->id);
	t0 = ktime_get_ns();
	complete_all(&r->gate_go);
	ret = bench_ctr_wait(&r->silent);
	if (ret)
		return ret;
	sum_add(sum, r->silent.at_ns - t0, cfg->n, r->silent.insn_seq);
	if (atomic_read(&r->timed_out) - timed_out != cfg->n) {
		tally->timed_out += atomic_read(&r->timed_out) - timed_out;
		tally->flushed += atomic_read(&r->flushed) - flushed;
		tally->other += atomic_read(&r->other) - other;
	}
	/* The gate's handler is past gate_go before it is armed again. */
	ret = bench_ctr_wait(&r->gate_out);
	if (!ret)
		reinit_completion(&r->gate_go);
	return ret;
}

/* Round B, n simultaneous timeouts: passes of timeouts_once() until it timed enough. */
int bench_round_timeouts(const struct bench_ops *ops, void *p, struct bench_cfg *cfg)
{
	struct timeouts_tally tally = {};
	struct rmad_bench_round *r;
	struct bench_sum sum = sum_of(ops, WIN_TIMEOUTS);
	u32 n = cfg->n, count = bench_target(cfg, n);
	bool again = count > n;
	int ret;

	if (again)
		count = max(count / BENCH_TIMEOUTS_SHARE, n * BENCH_TIMEOUTS_PASSES);

	r = kzalloc_obj(*r);
	if (!r)
		return -ENOMEM;
	bench_round_init(r);
	ret = ops->open(p, r, n);
	if (ret)
		goto out_free;
	while (!ret && sum.ops < count)
		ret = timeouts_once(ops, p, r, cfg, again ? BENCH_AGAIN_MS : BENCH_SHORT_MS,
				    again ? BENCH_AGAIN_WAIT_MS : BENCH_SHORT_WAIT_MS, &sum,
				    &tally);
	/* A time for n timeouts delivered: the mean of the passes. */
	sum_emit(ops, cfg, "timeouts", &sum, true);
	if (sum.passes)
		bench_irqsoff_emit(ops, cfg, "irqoff_timeouts");
	if (tally.timed_out || tally.flushed || tally.other)
		pr_warn("bench: %s n=%u: in passes where not all did, %d of the sends timed out, %d flushed, %d other\n",
			ops->name, n, tally.timed_out, tally.flushed, tally.other);
	complete_all(&r->gate_go);
	ops->close(p);
	if (ret)
		pr_err("bench: %s n=%u: the timeout round failed (%d)\n", ops->name, n, ret);
out_free:
	kfree(r);
	return ret;
}

/*
 * Waits until the device has completed the n silent sends of the last create,
 * the same way for every layer: a marker posted after them (timeout 0)
 * completes after them, send completions being in order on one QP. (What a
 * layer counts as taken by the device is not the same: rmad's Rust and C APIs
 * count a send taken when it is handed to the device, which completes it
 * later.) Not while the delivery queue is held: the marker's handler would
 * wait behind it.
 */
static int wait_completed(const struct bench_ops *ops, void *p, struct rmad_bench_round *r)
{
	int ret;

	bench_ctr_expect_more(&r->marker, 1);
	ret = ops->post_marker(p);
	return ret ?: bench_ctr_wait(&r->marker);
}

/*
 * One pass of round C: n sends that nobody answers are posted and completed by
 * the device, then the agents are unregistered: ns until the unregistration
 * returned with all n flushed, and (first pass) the irqsoff tracer's maximum
 * meanwhile.
 */
static int unregister_once(const struct bench_ops *ops, void *p, struct rmad_bench_round *r,
			   struct bench_cfg *cfg, struct bench_sum *sum)
{
	u32 n = cfg->n, seq;
	u64 t0, t;
	int ret;

	bench_round_init(r);
	ret = ops->open(p, r, n);
	if (ret)
		return ret;
	ret = ops->create(p, BENCH_LONG_MS);
	if (!ret)
		ret = post_all(ops, p, n);
	if (!ret)
		ret = wait_completed(ops, p, r);
	if (ret)
		goto out;
	bench_irqsoff_take(NULL);
	bench_insn_quiesce();
	bench_insn_start(sum->id);
	t0 = ktime_get_ns();
	/* Returns once every send handler ran. */
	ops->unregister(p);
	t = ktime_get_ns();
	seq = bench_insn_end(sum->id);
	if (!sum->passes)
		bench_irqsoff_emit(ops, cfg, "irqoff_unregister");
	if (atomic_read(&r->flushed) == n) {
		sum_add(sum, t - t0, n, seq);
	} else {
		pr_warn("bench: %s n=%u: the unregistration flushed %d of %u sends, %d other\n",
			ops->name, n, atomic_read(&r->flushed), n,
			atomic_read(&r->timed_out) + atomic_read(&r->other));
		ret = -EIO;
	}
out:
	ops->close(p);
	return ret;
}

/* Round C, unregistration with n outstanding: passes of unregister_once(). */
int bench_round_unregister(const struct bench_ops *ops, void *p, struct bench_cfg *cfg)
{
	struct rmad_bench_round *r;
	struct bench_sum sum = sum_of(ops, WIN_UNREGISTER);
	u32 count = bench_target(cfg, cfg->n);
	int ret = 0;

	r = kzalloc_obj(*r);
	if (!r)
		return -ENOMEM;
	while (!ret && sum.ops < count)
		ret = unregister_once(ops, p, r, cfg, &sum);
	sum_emit(ops, cfg, "unregister", &sum, true);
	if (ret)
		pr_err("bench: %s n=%u: the unregistration round failed (%d)\n", ops->name, cfg->n,
		       ret);
	kfree(r);
	return ret;
}
