// SPDX-License-Identifier: GPL-2.0
/*
 * rmad_client: the smallest rmad client, a template to copy. At load it sends
 * one GET of the performance management class to QP1 of its own port (rxe0
 * port 1, through its IPv4 GID), and logs how the send ended and the MAD
 * status of the answer. Build it against rmad's Module.symvers (see the
 * README: "Your own client module").
 */
#include <linux/build_bug.h>
#include <linux/completion.h>
#include <linux/err.h>
#include <linux/module.h>
#include <linux/unaligned.h>

#include <rmad.h>

/*
 * The version of rmad's API this client is written for (Documentation/changes.md says what
 * each version changed): a header of another major version, or an older minor one, is
 * refused at compile time.
 */
static_assert(RMAD_API_VERSION_MAJOR == 4 && RMAD_API_VERSION_MINOR >= 2,
	      "rmad_client is written for rmad API 4.2");

static DECLARE_COMPLETION(done);

static void client_send_handler(struct rmad_agent *agent, struct rmad_send_wc *wc)
{
	pr_info("rmad_client: send done, status %d\n", wc->status);
	rmad_free_send_mad(wc->send_buf);
	complete(&done);
}

static void client_recv_handler(struct rmad_agent *agent, struct rmad_send_buf *send_buf,
				const struct rmad_recv_wc *wc)
{
	pr_info("rmad_client: answer, MAD status 0x%04x\n",
		get_unaligned_be16((const u8 *)wc->mad + 4));
}

static int __init rmad_client_init(void)
{
	struct rmad_ah ah = { .has_grh = 1, .sgid_index = 1 };
	struct rmad_send_buf *buf;
	struct rmad_agent *agent;
	u8 *mad;
	int ret;

	agent = rmad_register_agent("rxe0", 1, RMAD_QPT_GSI, NULL, 0, client_send_handler,
				    client_recv_handler, NULL, 0);
	if (IS_ERR(agent))
		return PTR_ERR(agent);
	buf = rmad_create_send_mad(agent, 1, 0, 0, RMAD_MGMT_MAD_HDR, RMAD_MGMT_MAD_DATA,
				   GFP_KERNEL, 1);
	if (IS_ERR(buf)) {
		ret = PTR_ERR(buf);
		goto out;
	}
	mad = rmad_send_buf_mad(buf);
	mad[0] = 1;				/* base version */
	mad[1] = RMAD_MGMT_CLASS_PERF_MGMT;
	mad[2] = 1;				/* class version */
	mad[3] = RMAD_MGMT_METHOD_GET;
	put_unaligned_be64((u64)rmad_agent_hi_tid(agent) << 32, mad + 8);	/* TID */
	ret = rmad_port_gid("rxe0", 1, 1, ah.dgid) ?:
	      rmad_send_buf_set(buf, &ah, 1000, 1, NULL) ?:
	      rmad_post_send_mad(buf, NULL);
	if (ret)
		rmad_free_send_mad(buf);	/* still ours: the post failed */
	else
		wait_for_completion(&done);	/* the handler frees it */
out:
	pr_info("rmad_client: done (%d)\n", ret);
	rmad_unregister_agent(agent);
	return 0;
}

static void __exit rmad_client_exit(void)
{
}

module_init(rmad_client_init);
module_exit(rmad_client_exit);
MODULE_DESCRIPTION("rmad client template");
MODULE_LICENSE("GPL");
