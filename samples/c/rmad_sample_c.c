// SPDX-License-Identifier: GPL-2.0
/*
 * rmad_sample_c: a C driver that uses rmad's exported API.
 *
 * At load it registers an agent on rxe0 port 1, sends four GET requests to
 * QP1 of the same port (ib_core answers them), sends two SEND requests that
 * nobody answers and cancels them by their post ids, checks that bad and stale
 * handles are refused (also once the memory behind them could have been
 * reused), waits for its handlers and reports what they saw. The test VM
 * checks the report.
 */

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/err.h>
#include <linux/module.h>
#include <linux/unaligned.h>
#include <rdma/ib_verbs.h>

#include "../../include/rmad.h"

#define N_GET 4
#define N_CANCEL 2

static atomic_t done, succeeded, flushed, other, responses;
static DECLARE_COMPLETION(all_done);

static void sample_send_handler(struct rmad_agent *agent, struct rmad_send_wc *wc)
{
	if (wc->status == IB_WC_SUCCESS)
		atomic_inc(&succeeded);
	else if (wc->status == IB_WC_WR_FLUSH_ERR)
		atomic_inc(&flushed);
	else
		atomic_inc(&other);
	rmad_free_send_mad(wc->send_buf);
	if (atomic_inc_return(&done) == N_GET + N_CANCEL)
		complete(&all_done);
}

static void sample_recv_handler(struct rmad_agent *agent, struct rmad_send_buf *send_buf,
				const struct rmad_recv_wc *wc)
{
	if (send_buf && rmad_response_mad(wc->mad, wc->mad_len) == 1)
		atomic_inc(&responses);
}

/* A class 0x04 request with @method to QP1 of rxe0 port 1 (GID index 1). */
static struct rmad_send_buf *sample_request(struct rmad_agent *agent, const u8 *gid, u32 lo,
					    u8 method, int timeout_ms)
{
	struct rmad_ah ah = { .has_grh = 1, .sgid_index = 1 };
	struct rmad_send_buf *buf;
	u8 *mad;
	int ret;

	buf = rmad_create_send_mad(agent, 1, 0, 0, 24, 232, GFP_KERNEL, 1);
	if (IS_ERR(buf))
		return buf;
	mad = rmad_send_buf_mad(buf);
	mad[0] = 1;		/* base version */
	mad[1] = 0x04;		/* performance management */
	mad[2] = 1;		/* class version */
	mad[3] = method;
	put_unaligned_be64(((u64)rmad_agent_hi_tid(agent) << 32) | lo, mad + 8);
	memcpy(ah.dgid, gid, 16);
	ret = rmad_send_buf_set(buf, &ah, timeout_ms, 0, NULL);
	if (ret) {
		rmad_free_send_mad(buf);
		return ERR_PTR(ret);
	}
	return buf;
}

static int sample_run(void)
{
	struct rmad_send_buf *cancel[N_CANCEL], *fresh;
	u64 post[N_CANCEL];
	struct rmad_agent *agent;
	u8 gid[16];
	int i, ret, bad = 0;

	ret = rmad_port_gid("rxe0", 1, 1, gid);
	if (ret)
		return ret;

	agent = rmad_register_agent("rxe0", 1, RMAD_QPT_GSI, NULL, 0, sample_send_handler,
				    sample_recv_handler, NULL, 0);
	if (IS_ERR(agent))
		return PTR_ERR(agent);

	/* Bad handles are refused, not dereferenced. */
	bad += rmad_cancel_mad(NULL) != -EINVAL;
	bad += rmad_modify_mad((struct rmad_send_buf *)agent, 10) != -EINVAL;
	bad += rmad_free_send_mad((struct rmad_send_buf *)0x1000) != -EINVAL;
	bad += rmad_unregister_agent(NULL) != -EINVAL;

	for (i = 0; i < N_GET; i++) {
		struct rmad_send_buf *b = sample_request(agent, gid, i, 0x01, 5000);

		if (IS_ERR(b) || rmad_post_send_mad(b, NULL))
			bad++;
	}
	for (i = 0; i < N_CANCEL; i++) {
		cancel[i] = sample_request(agent, gid, 100 + i, 0x03, 60000);
		if (IS_ERR(cancel[i]) || rmad_post_send(cancel[i], &post[i]))
			bad++;
	}
	for (i = 0; i < N_CANCEL; i++) {
		bad += rmad_free_send_mad(cancel[i]) != -EBUSY; /* outstanding */
		bad += rmad_cancel_post(cancel[i], post[i] + 1) != -EINVAL; /* not this post */
		bad += rmad_cancel_post(cancel[i], post[i]) != 0;
	}
	if (!wait_for_completion_timeout(&all_done, 30 * HZ))
		bad++;
	/* The handler freed them: the handles are stale now, and stay so. */
	for (i = 0; i < N_CANCEL; i++)
		bad += rmad_cancel_mad(cancel[i]) != -EINVAL;
	fresh = rmad_create_send_mad(agent, 1, 0, 0, 24, 232, GFP_KERNEL, 1);
	if (IS_ERR(fresh)) {
		bad++;
	} else {
		for (i = 0; i < N_CANCEL; i++) {
			bad += fresh == cancel[i];
			bad += rmad_free_send_mad(cancel[i]) != -EINVAL;
		}
		bad += rmad_send_buf_mad(fresh) == NULL;
		bad += rmad_free_send_mad(fresh) != 0;
	}

	ret = rmad_unregister_agent(agent);
	pr_info("rmad_sample_c: %s: %d answered (%d responses), %d cancelled, %d other, %d bad checks, unregister %d\n",
		(!bad && !ret && atomic_read(&succeeded) == N_GET &&
		 atomic_read(&responses) == N_GET && atomic_read(&flushed) == N_CANCEL &&
		 !atomic_read(&other)) ? "PASS" : "FAIL",
		atomic_read(&succeeded), atomic_read(&responses), atomic_read(&flushed),
		atomic_read(&other), bad, ret);
	return 0;
}

static int __init rmad_sample_c_init(void)
{
	int ret = sample_run();

	if (ret)
		pr_info("rmad_sample_c: FAIL: %d\n", ret);
	return 0;
}

static void __exit rmad_sample_c_exit(void)
{
}

module_init(rmad_sample_c_init);
module_exit(rmad_sample_c_exit);
MODULE_DESCRIPTION("rmad sample: a C driver using rmad's exported API");
MODULE_LICENSE("GPL");
