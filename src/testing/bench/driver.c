// SPDX-License-Identifier: GPL-2.0
/*
 * The driver of `make bench` (test flavour only): the same measurements, in
 * the same boot, on soft-RoCE rxe0, for three implementations of MAD agents
 * and a floor:
 *
 *   c          the C MAD layer (ib_register_mad_agent, ib_post_send_mad,
 *              ib_modify_mad, ib_cancel_mad) on ib_core's QP1;
 *   rmad       rmad's Rust API (src/testing/bench.rs has its operations);
 *   rmad-capi  rmad's exported C API (include/rmad.h), called from here;
 *   floor      spin_lock_irqsave + an O(1) list move + unlock + queue_work.
 *
 * Every implementation is driven by the same code below through a table of
 * operations (struct bench_ops in impl.h; the C MAD layer's in c_layer.c,
 * rmad's C API's in capi.c, rmad's Rust API's in src/testing/bench.rs), so
 * that each timed loop makes the same indirect call per operation. Sends
 * use vendor class 0x0b (range 1, no OUI), which neither ib_core nor rxe
 * answers. The sends that must stay unanswered go to a GID
 * that no port has (::ffff:10.0.0.2, through the port's IPv4 GID), which rxe
 * drops on receipt; the GETs that must be answered go to QP1 of the port
 * itself through its GID 0 (IPv6), where the responder registered here (an
 * ib_core agent, src/testing/ib_responder.c) answers them. (Not through the
 * IPv4 GID: the C MAD layer compares a response's GRH with the request's
 * GIDs, and for RoCEv2 over IPv4 that area holds an IPv4 header, so it never
 * matches a response there.)
 *
 * Each figure is printed as one line "bench-json: {...}" per repetition;
 * scripts/report/bench-report.py turns them into the tables and the plot. Figures
 * only: nothing is asserted.
 */

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/etherdevice.h>
#include <linux/kthread.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/timekeeping.h>
#include <linux/vmstat.h>
#include <linux/workqueue.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "../../../include/rmad.h"
#include "../ib_responder.h"
#include "bench.h"
#include "impl.h"

void bench_ctr_init(struct bench_ctr *c)
{
	atomic_set(&c->hits, 0);
	c->target = INT_MAX;
	c->at_ns = 0;
	c->insn_id = 0;
	c->insn_seq = 0;
	init_completion(&c->done);
}

/* The target of @c was reached: ends its counted window, if any, and notes when. */
static void bench_ctr_reached(struct bench_ctr *c)
{
	u32 id = c->insn_id;

	if (id) {
		c->insn_seq = bench_insn_end(id);
		c->insn_id = 0;
	}
	c->at_ns = ktime_get_ns();
	complete(&c->done);
}

/* Expects the count to reach @target (cumulative); set before the events start. */
void bench_ctr_expect(struct bench_ctr *c, int target)
{
	reinit_completion(&c->done);
	WRITE_ONCE(c->target, target);
	/* Orders the target before reading the count; bench_ctr_hit() pairs with it. */
	smp_mb();
	if (atomic_read(&c->hits) >= target)
		bench_ctr_reached(c);
}

void bench_ctr_hit(struct bench_ctr *c)
{
	if (atomic_inc_return(&c->hits) == READ_ONCE(c->target))
		bench_ctr_reached(c);
}

/* Waits in one-second slices (so that no hang detector mistakes it for a hang). */
int bench_wait_slices(struct completion *done, unsigned int ms)
{
	unsigned int waited;

	for (waited = 0; waited < ms; waited += 1000)
		if (wait_for_completion_timeout(done, HZ))
			return 0;
	return -ETIMEDOUT;
}

int bench_ctr_expect_more(struct bench_ctr *c, int more)
{
	int target = atomic_read(&c->hits) + more;

	bench_ctr_expect(c, target);
	return target;
}

int bench_ctr_wait(struct bench_ctr *c)
{
	return bench_wait_slices(&c->done, BENCH_WAIT_MS);
}

/* Called by every implementation's handlers: @kind of the send, its @status. */
void rmad_bench_event(struct rmad_bench_round *r, int kind, int status)
{
	if (kind == KIND_SILENT) {
		if (status == IB_WC_RESP_TIMEOUT_ERR)
			atomic_inc(&r->timed_out);
		else if (status == IB_WC_WR_FLUSH_ERR)
			atomic_inc(&r->flushed);
		else
			atomic_inc(&r->other);
	}
	switch (kind) {
	case KIND_SILENT:
		bench_ctr_hit(&r->silent);
		break;
	case KIND_MARKER:
		bench_ctr_hit(&r->marker);
		break;
	case KIND_REQ:
		bench_ctr_hit(&r->req);
		break;
	case KIND_RESP:
		bench_ctr_hit(&r->resp);
		break;
	case KIND_GATE:
		bench_ctr_hit(&r->gate_in);
		bench_wait_slices(&r->gate_go, BENCH_WAIT_MS);
		/* Past gate_go: the round may arm it again for its next pass. */
		bench_ctr_hit(&r->gate_out);
		break;
	case KIND_TXN:
		if (status != IB_WC_SUCCESS)
			atomic_inc(&r->txn_failed);
		up(&r->txn_window);
		bench_ctr_hit(&r->txn);
		break;
	}
}

/* The device: rxe0, found through an ib_client of our own. */

static struct ib_device *bench_dev;

static int bench_client_add(struct ib_device *dev)
{
	if (!strcmp(dev_name(&dev->dev), "rxe0"))
		WRITE_ONCE(bench_dev, dev);
	return 0;
}

static void bench_client_remove(struct ib_device *dev, void *data)
{
	if (READ_ONCE(bench_dev) == dev)
		WRITE_ONCE(bench_dev, NULL);
}

struct ib_device *bench_device(void)
{
	return READ_ONCE(bench_dev);
}

static struct ib_client bench_client = {
	.name = "rmad_bench",
	.add = bench_client_add,
	.remove = bench_client_remove,
};

/* Destination of every send: QP1 of the port itself, through its GID 1. */
union ib_gid bench_gid;
u8 bench_mac[ETH_ALEN];
/* Destination of the unanswered sends: ::ffff:10.0.0.2, which no port has. */
const union ib_gid bench_silent_gid = {
	.raw = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2 },
};

int bench_addr(struct ib_device *dev)
{
	const struct ib_gid_attr *attr;
	int ret;

	ret = rdma_query_gid(dev, BENCH_PORT, BENCH_GID_INDEX, &bench_gid);
	if (ret)
		return ret;
	attr = rdma_get_gid_attr(dev, BENCH_PORT, BENCH_GID_INDEX);
	if (IS_ERR(attr))
		return PTR_ERR(attr);
	ret = rdma_read_gid_l2_fields(attr, NULL, bench_mac);
	rdma_put_gid_attr(attr);
	return ret;
}

void bench_fill(void *mad, u32 hi_tid, u32 lo, u8 method)
{
	struct ib_mad_hdr *h = mad;

	memset(h, 0, sizeof(*h));
	h->base_version = IB_MGMT_BASE_VERSION;
	h->mgmt_class = BENCH_CLASS;
	h->class_version = 1;
	h->method = method;
	h->tid = cpu_to_be64(((u64)hi_tid << 32) | lo);
}

static const struct bench_ops rust_ops = {
	.name = "rmad",
	.open = rmad_bench_rust_open,
	.create = rmad_bench_rust_create,
	.post = rmad_bench_rust_post,
	.wait_sent = rmad_bench_rust_wait_sent_p,
	.modify = rmad_bench_rust_modify,
	.cancel = rmad_bench_rust_cancel,
	.reqs = rmad_bench_rust_reqs,
	.post_req = rmad_bench_rust_post_req,
	.post_marker = rmad_bench_rust_post_marker,
	.post_gate = rmad_bench_rust_post_gate,
	.cancel_gate = rmad_bench_rust_cancel_gate,
	.create_free = rmad_bench_rust_create_free,
	.txn = rmad_bench_rust_txn,
	.unregister = rmad_bench_rust_unregister,
	.close = rmad_bench_rust_close,
	.share = rmad_bench_rust_share,
};

/*
 * Whether this run is the interrupts-off pass: the irqsoff tracer is on. The
 * tracer charges every stretch with interrupts off (it records its start and
 * end), as a kernel users run does not: with it on, a run reports only the
 * interrupts-off figures; with it off (the timing pass), only the times, the
 * rates and the memory. tests/vm/bench.sh runs each N once each way.
 */
bool bench_irqsoff_pass;

void bench_emit(const char *impl, const char *op, u32 n, u32 rep, s64 value, const char *unit)
{
	if (bench_irqsoff_pass != !strncmp(op, "irqoff", strlen("irqoff")))
		return;
	pr_info("bench-json: {\"impl\": \"%s\", \"op\": \"%s\", \"n\": %u, \"rep\": %u, \"value\": %lld, \"unit\": \"%s\"}\n",
		impl, op, n, rep, value, unit);
}

/*
 * Emits the irqsoff tracer's maximum since its last reset as figure @op of
 * @ops, and resets it; keeps the largest in @cfg. Nothing without the tracer.
 */
void bench_irqsoff_emit(const struct bench_ops *ops, struct bench_cfg *cfg, const char *op)
{
	char label[64];
	s64 v;

	snprintf(label, sizeof(label), "%s/%s/%u/%u", ops->name, op, cfg->n, cfg->rep);
	v = bench_irqsoff_take(label);
	if (v < 0)
		return;
	bench_emit(ops->name, op, cfg->n, cfg->rep, v, "ns");
	cfg->irqoff_max = max(cfg->irqoff_max, v);
}

/*
 * In the interrupts-off pass, the distribution of the holds of rmad's agent
 * locks that @ops's rounds took (timed by the test flavour: bench.rs), as
 * figures of @ops: how many, the bucket bounds under which half, 99 % and
 * 99.9 % of them ended, the longest, and how many lasted more than 100 µs.
 * Resets it. Only the agents' own holds: not the device's, not the host's.
 */
static void holds_emit(const struct bench_ops *ops, struct bench_cfg *cfg)
{
	s64 h[BENCH_HOLDS];

	rmad_bench_rust_holds_take(h);
	if (!bench_irqsoff_pass || !h[BENCH_HOLDS_COUNT])
		return;
	bench_emit(ops->name, "irqoff_holds", cfg->n, cfg->rep, h[BENCH_HOLDS_COUNT], "holds");
	bench_emit(ops->name, "irqoff_hold_p50", cfg->n, cfg->rep, h[BENCH_HOLDS_P50], "ns");
	bench_emit(ops->name, "irqoff_hold_p99", cfg->n, cfg->rep, h[BENCH_HOLDS_P99], "ns");
	bench_emit(ops->name, "irqoff_hold_p999", cfg->n, cfg->rep, h[BENCH_HOLDS_P999], "ns");
	bench_emit(ops->name, "irqoff_hold_max", cfg->n, cfg->rep, h[BENCH_HOLDS_MAX], "ns");
	bench_emit(ops->name, "irqoff_holds_over_100us", cfg->n, cfg->rep,
		   h[BENCH_HOLDS_OVER_100US], "holds");
}

u64 bench_slab_bytes(void)
{
	return (u64)(global_node_page_state_pages(NR_SLAB_RECLAIMABLE_B) +
		     global_node_page_state_pages(NR_SLAB_UNRECLAIMABLE_B)) << PAGE_SHIFT;
}

void bench_round_init(struct rmad_bench_round *r)
{
	bench_ctr_init(&r->silent);
	bench_ctr_init(&r->marker);
	bench_ctr_init(&r->req);
	bench_ctr_init(&r->resp);
	bench_ctr_init(&r->gate_in);
	bench_ctr_init(&r->gate_out);
	bench_ctr_init(&r->txn);
	init_completion(&r->gate_go);
	atomic_set(&r->timed_out, 0);
	atomic_set(&r->flushed, 0);
	atomic_set(&r->other, 0);
	sema_init(&r->txn_window, BENCH_TXN_WINDOW);
	atomic_set(&r->txn_failed, 0);
}

/* The scaling round. */

/* One posting thread of the scaling round, bound to one CPU. */
struct scale_thread {
	const struct bench_ops *ops;
	void *p;
	u32 n;
	struct completion *go;
	struct completion done;
	int ret;
	u64 end_ns;
};

static int scale_fn(void *arg)
{
	struct scale_thread *t = arg;
	u64 last;
	u32 i;

	bench_wait_slices(t->go, BENCH_WAIT_MS);
	last = ktime_get_ns();
	for (i = 0; i < t->n && !t->ret; i++) {
		t->ret = t->ops->post(t->p, i);
		bench_resched(i, &last);
	}
	t->end_ns = ktime_get_ns();
	/* The module may go once @done is complete: nothing of it runs after. */
	kthread_complete_and_exit(&t->done, 0);
}

/* How the scaling round's n sends are posted. */
enum scale_mode {
	SCALE_1CPU,		/* one thread, one agent */
	SCALE_2CPU_2AGENTS,	/* two threads on two CPUs, an agent each, one port */
	SCALE_2CPU_1AGENT,	/* two threads on two CPUs, one agent */
	SCALE_MODES,
};

static const char * const scale_op[SCALE_MODES] = {
	"sends_1cpu", "sends_2cpu_2agents", "sends_2cpu_1agent",
};

/*
 * Round D, scaling: cfg->scale sends (unanswered, timeout 10 min) posted by
 * one thread or by two threads bound to CPUs 0 and 1 (half each), to two
 * agents on the port or to one (@mode): sends posted per second, from the
 * threads' release until the last of them returned. (What the device does
 * with them follows in both layers: rxe transmits from its own task.) @p2 is
 * a second state of the implementation.
 */
static int round_scale(const struct bench_ops *ops, void *p, void *p2, struct bench_cfg *cfg,
		       enum scale_mode mode)
{
	struct scale_thread t[2] = {};
	void *st[2] = { p, p2 };
	DECLARE_COMPLETION_ONSTACK(go);
	struct rmad_bench_round *r;
	u32 n = cfg->scale, threads = mode == SCALE_1CPU ? 1 : 2, k, started = 0;
	u64 t0 = 0, end = 0;
	int ret;

	r = kzalloc_obj(*r);
	if (!r)
		return -ENOMEM;
	bench_round_init(r);
	t[0].n = threads == 1 ? n : n - n / 2;
	t[1].n = n / 2;
	for (k = 0; k < threads; k++) {
		ret = ops->open(st[k], r, t[k].n);
		if (ret)
			goto out;
	}
	if (mode == SCALE_2CPU_1AGENT)
		ops->share(p2, p);
	for (k = 0; k < threads; k++) {
		ret = ops->create(st[k], BENCH_LONG_MS);
		if (ret)
			goto out;
	}
	for (k = 0; k < threads; k++) {
		struct task_struct *task;

		t[k].ops = ops;
		t[k].p = st[k];
		t[k].go = &go;
		init_completion(&t[k].done);
		task = kthread_create(scale_fn, &t[k], "rmad_bench_scale/%u", k);
		if (IS_ERR(task)) {
			ret = PTR_ERR(task);
			goto out_threads;
		}
		kthread_bind(task, k);
		wake_up_process(task);
		started++;
	}
	t0 = ktime_get_ns();
	complete_all(&go);
out_threads:
	/* A thread not released yet is released with nothing to post. */
	if (ret) {
		for (k = 0; k < started; k++)
			t[k].n = 0;
		complete_all(&go);
	}
	for (k = 0; k < started; k++) {
		wait_for_completion(&t[k].done);
		ret = ret ?: t[k].ret;
		end = max(end, t[k].end_ns);
	}
	if (!ret)
		bench_emit(ops->name, scale_op[mode], n, cfg->rep,
			   div64_u64((u64)n * NSEC_PER_SEC, max(end - t0, 1ull)), "sends/s");
out:
	/* The second state may have its sends on the first's agent: it closes first. */
	if (threads == 2)
		ops->close(p2);
	ops->close(p);
	if (ret)
		pr_err("bench: %s n=%u: the scaling round (%s) failed (%d)\n", ops->name, n,
		       scale_op[mode], ret);
	kfree(r);
	return ret;
}

/* The floor. */

struct floor_item {
	struct list_head node;
	struct work_struct work;
};

static DEFINE_SPINLOCK(floor_lock);

static void floor_work(struct work_struct *w)
{
}

/*
 * The floor's operations on @s items of @n in @order, @count of them in all
 * (passes of @s, each starting from the list and the queue as the first
 * found them): ns per operation into @ns. Each pass is a counted window of
 * id @id (insn.h), whose figure is printed as @op's of repetition @rep.
 */
static int floor_run(u32 n, const u32 *order, u32 s, u32 count, s64 *ns, u32 id,
		     const char *op, u32 rep)
{
	struct workqueue_struct *wq;
	struct floor_item *items;
	LIST_HEAD(from);
	LIST_HEAD(to);
	unsigned long flags;
	u64 t0, t, last, sum = 0;
	u32 i, k, done, seq = 0, first = 0, passes = 0;

	items = kvcalloc(n, sizeof(*items), GFP_KERNEL);
	if (!items)
		return -ENOMEM;
	wq = alloc_ordered_workqueue("rmad_bench_floor", 0);
	if (!wq) {
		kvfree(items);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		INIT_WORK(&items[i].work, floor_work);
		list_add_tail(&items[i].node, &from);
	}
	for (done = 0; done < count; done += s) {
		/* Untimed: the items back in the list, and their work run. */
		list_splice_tail_init(&to, &from);
		flush_workqueue(wq);
		bench_insn_quiesce();
		bench_insn_start(id);
		t0 = ktime_get_ns();
		last = t0;
		for (k = 0; k < s; k++) {
			struct floor_item *it = &items[order[k]];

			spin_lock_irqsave(&floor_lock, flags);
			list_move_tail(&it->node, &to);
			spin_unlock_irqrestore(&floor_lock, flags);
			queue_work(wq, &it->work);
			bench_resched(k, &last);
		}
		t = ktime_get_ns();
		seq = bench_insn_end(id);
		sum += t - t0;
		if (!passes++)
			first = seq;
	}
	*ns = div_u64(sum, done);
	bench_insn_emit("floor", op, n, rep, id, first, seq, passes, done);
	destroy_workqueue(wq);
	kvfree(items);
	return 0;
}

/* A pseudo-random permutation of 0..n-1 (Fisher-Yates, xorshift from @seed). */
static void permute(u32 *v, u32 n, u64 seed)
{
	u32 i;

	for (i = 0; i < n; i++)
		v[i] = i;
	for (i = n; i > 1; i--) {
		u32 j, tmp;

		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		j = (u32)(seed % i);
		tmp = v[i - 1];
		v[i - 1] = v[j];
		v[j] = tmp;
	}
}

/*
 * Runs the benchmark for @n outstanding sends, @reps times: each repetition
 * runs every implementation (in an order that rotates) and the floor. @sample
 * bounds the timed modifies, cancels and matched responses, @rtt_sample the
 * round trips; at @n <= BENCH_REPEAT_N each figure repeats its round until
 * it timed @min_ops operations. @scale is the number of sends of each
 * scaling round (0: no scaling round). @insn: the instruction-count mode
 * (insn.h). @rust and @rust2 are two states of the Rust implementation.
 */
int rmad_bench_run(u32 n, u32 reps, u32 sample, u32 rtt_sample, u32 min_ops, u32 scale,
		   bool insn, void *rust, void *rust2)
{
	static const char * const floor_ops[] = { "post", "modify", "cancel" };
	static const enum bench_win floor_wins[] = { WIN_POST, WIN_MODIFY, WIN_CANCEL };
	struct rmad_test_responder *responder = NULL;
	void *cimpl, *capi, *cimpl2, *capi2;
	u32 *perm_m, *perm_c;
	u32 rep, k;
	int ret;

	if (!n || !reps || !sample || !rtt_sample || !min_ops)
		return -EINVAL;
	ret = ib_register_client(&bench_client);
	if (ret)
		return ret;
	cimpl = kzalloc(bench_c_size, GFP_KERNEL);
	capi = kzalloc(bench_capi_size, GFP_KERNEL);
	cimpl2 = kzalloc(bench_c_size, GFP_KERNEL);
	capi2 = kzalloc(bench_capi_size, GFP_KERNEL);
	perm_m = kvmalloc_array(n, sizeof(u32), GFP_KERNEL);
	perm_c = kvmalloc_array(n, sizeof(u32), GFP_KERNEL);
	ret = -ENOMEM;
	if (!cimpl || !capi || !cimpl2 || !capi2 || !perm_m || !perm_c)
		goto out;
	ret = -ENODEV;
	if (!bench_device()) {
		pr_info("bench: no rxe0; nothing to measure\n");
		goto out;
	}
	ret = bench_addr(bench_device());
	if (ret)
		goto out;
	responder = rmad_test_responder_start(bench_device(), BENCH_PORT, BENCH_CLASS,
					      min(n, sample));
	if (!responder) {
		pr_err("bench: no ib_core responder for class 0x%x\n", BENCH_CLASS);
		ret = -EBUSY;
		goto out;
	}
	bench_insn = insn;
	bench_insn_run(n);
	/* The maximum since the tracer was turned on is not any round's: reading resets it. */
	bench_irqsoff_pass = bench_irqsoff_take(NULL) >= 0;
	pr_info("bench: n=%u, %u repetitions, sample %u (responses %u), round trips %u, at least %u operations per figure, %s pass\n",
		n, reps, min(n, sample), min(n, max(sample / 5, 1u)), min(n, rtt_sample),
		n <= BENCH_REPEAT_N && !bench_irqsoff_pass ? min_ops : 0,
		bench_irqsoff_pass ? "interrupts-off" : "timing");
	/* Timing reads the clock twice per hold: only where no time is taken. */
	rmad_bench_rust_hold_timing(bench_irqsoff_pass);
	for (rep = 0; rep < reps; rep++) {
		const struct bench_ops *ops[3] = { &bench_c_ops, &rust_ops, &bench_capi_ops };
		void *priv[3] = { cimpl, rust, capi };
		void *priv2[3] = { cimpl2, rust2, capi2 };
		struct bench_cfg cfg = {
			.n = n,
			.sample = sample,
			.rtt_sample = rtt_sample,
			.min_ops = min_ops,
			.scale = scale,
			.rep = rep,
			.perm_modify = perm_m,
			.perm_cancel = perm_c,
			.responder = responder,
		};
		u32 i;

		permute(perm_m, n, 0x9e3779b97f4a7c15ull ^ ((u64)n << 20) ^ rep);
		permute(perm_c, n, 0xd1b54a32d192ed03ull ^ ((u64)n << 20) ^ rep);
		for (i = 0; i < 3; i++) {
			u32 x = (i + rep) % 3;
			enum scale_mode mode;

			cfg.irqoff_max = -1;
			/* Holds before this implementation's rounds are not its own. */
			rmad_bench_rust_holds_take(NULL);
			bench_round_ops(ops[x], priv[x], &cfg);
			bench_round_timeouts(ops[x], priv[x], &cfg);
			bench_round_unregister(ops[x], priv[x], &cfg);
			for (mode = SCALE_1CPU; scale && !bench_irqsoff_pass && mode < SCALE_MODES;
			     mode++)
				if (mode == SCALE_1CPU || (cpu_online(0) && cpu_online(1)))
					round_scale(ops[x], priv[x], priv2[x], &cfg, mode);
			if (cfg.irqoff_max >= 0)
				bench_emit(ops[x]->name, "irqoff_max", n, rep, cfg.irqoff_max,
					   "ns");
			holds_emit(ops[x], &cfg);
		}
		for (k = 0; !bench_irqsoff_pass && k < ARRAY_SIZE(floor_ops); k++) {
			s64 ns;

			if (!floor_run(n, k == 2 ? perm_c : perm_m, min(n, sample),
				       bench_target(&cfg, min(n, sample)), &ns,
				       bench_insn_id("floor", floor_wins[k]), floor_ops[k], rep))
				bench_emit("floor", floor_ops[k], n, rep, ns, "ns");
		}
	}
	rmad_bench_rust_hold_timing(false);
	rmad_test_responder_stop(responder);
	ret = 0;
out:
	kvfree(perm_m);
	kvfree(perm_c);
	kfree(capi2);
	kfree(cimpl2);
	kfree(capi);
	kfree(cimpl);
	ib_unregister_client(&bench_client);
	return ret;
}
