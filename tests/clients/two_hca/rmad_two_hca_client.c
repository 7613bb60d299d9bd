// SPDX-License-Identifier: GPL-2.0
/*
 * rmad_two_hca_client: a client of the production rmad.ko on a host with two
 * RDMA devices (soft-RoCE rxe0 and rxe1, each on a netdev of its own).
 *
 * At load it registers, on port 1 of each device, a responder for GETs of
 * vendor class 0x0a (the same class on both: ib_core keeps registrations per
 * port of each device) and a requester, then runs one round. A round sends
 * N_GET GETs from each live device's requester to QP1 of that device's own
 * GID and checks that every answer came from the responder of the same device
 * to the requester of the same device: each responder writes its device's
 * index into the answer, and each handler counts what it saw by device.
 *
 * Writing to the parameter "action": "round" runs another round;
 * "unreachable" posts N_FAR SENDs from rxe1 to an address on rxe1's link that
 * nobody answers ARP for, then a GET on rxe1 and one on rxe0, to their own
 * GIDs: both GETs must complete before any of the N_FAR (whose destination is
 * being resolved meanwhile), and N_FAR more SENDs to that address fail at once,
 * from the remembered failure; "private <qpn>" sends a GET of the served class
 * to rmad's own private QP on rxe0, which must drop it; "from <index>" sends
 * a GET from rxe0's GID at that index to itself; "park" posts N_PARK
 * SENDs that nobody answers on rxe1 (timeout one minute), so that the test can
 * delete rxe1 with sends outstanding, and "flushed" checks that their handlers reported
 * IB_WC_WR_FLUSH_ERR once each, while rounds on rxe0 go on working;
 * "refused" posts N_FAR SENDs from rxe1 to 10.0.3.2 while the test has rxe1's
 * netdev refuse every packet, each of which must complete once, unsent;
 * "lookup <name> found|absent" checks that rmad knows a device by that name
 * (after a rename: the new one, not the old), through rmad_port_gid() and a
 * registration; "sibling" registers a second requester on rxe0 and has the first one's
 * receive handler post a send of it and unregister it, which must return
 * with that send flushed (in C the same call waits for itself). The last
 * line of each action, "PASS" or "FAIL", is what the test VM checks; rmmod
 * unregisters every agent, also those of the removed device.
 */

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/module.h>
#include <linux/unaligned.h>

#include "../../../include/rmad.h"

#define N_DEV 2
#define N_GET 4
#define N_PARK 3
#define N_FAR 5
/* TIDs of the "unreachable" action: the far SENDs, then the two GETs; when each completed. */
#define FAR_LO 2000
#define FAR_GET_RXE1 (FAR_LO + 2 * N_FAR)
#define FAR_GET_RXE0 (FAR_GET_RXE1 + 1)
#define FAR_N (FAR_GET_RXE0 + 1 - FAR_LO)
/* TID of the "sibling" action's GET, whose answer unregisters the sibling. */
#define SIBLING_LO 5000
#define SERVICE_CLASS 0x0a
/* Where the answer carries the request's number plus one, and the responder's device. */
#define SERVICE_DATA 24
#define SERVICE_DEVICE 28

static const char *const names[N_DEV] = { "rxe0", "rxe1" };

/* One device's two agents and what their handlers counted. */
struct dev {
	int index;
	u8 gid[16];
	struct rmad_agent *responder;
	struct rmad_agent *requester;
	/* Requests the responder answered, and the other device's agent refused to address. */
	atomic_t served, foreign_refused;
	/* Answers at the requester: from this device's responder, from another one. */
	atomic_t right, crossed;
	/* Send handler statuses of the requester: success, flushed, anything else. */
	atomic_t ok, flushed, other;
	/* The status of the last send that was neither successful nor flushed. */
	int other_status;
	atomic_t done;
	int expected;
	struct completion all_done;
};

static struct dev devs[N_DEV];
static int rounds;
/* The order in which the sends of the "unreachable" action completed, and their statuses. */
static atomic_t completions;
static int completed_as[FAR_N], status_of[FAR_N];
/* The "sibling" action's second requester on rxe0, and its unregistration's result. */
static struct dev sibling;
static int sibling_unregistered;

static void responder_send_handler(struct rmad_agent *agent, struct rmad_send_wc *wc)
{
	rmad_free_send_mad(wc->send_buf);
}

/* Answers a GET at once from the handler: its header, number plus one, our device. */
static void responder_recv_handler(struct rmad_agent *agent, struct rmad_send_buf *send_buf,
				   const struct rmad_recv_wc *wc)
{
	struct dev *d = wc->context;
	struct rmad_agent *other = devs[N_DEV - 1 - d->index].responder;
	struct rmad_send_buf *buf;
	struct rmad_ah ah;
	u8 *mad;

	if (send_buf || !wc->recv_buf || wc->mad_len < SERVICE_DEVICE + 1)
		return;
	/* Only an agent of the device it arrived on may answer it. */
	if (!IS_ERR_OR_NULL(other) && rmad_recv_buf_ah(other, wc->recv_buf, &ah) == -EINVAL)
		atomic_inc(&d->foreign_refused);
	if (rmad_recv_buf_ah(agent, wc->recv_buf, &ah))
		return;
	buf = rmad_create_send_mad(agent, wc->src_qp, wc->pkey_index, 0, RMAD_MGMT_MAD_HDR,
				   RMAD_MGMT_MAD_DATA, GFP_KERNEL, 1);
	if (IS_ERR(buf))
		return;
	mad = rmad_send_buf_mad(buf);
	memcpy(mad, wc->mad, 24);
	mad[3] = RMAD_MGMT_METHOD_GET_RESP;
	put_unaligned_be32(get_unaligned_be32(wc->mad + SERVICE_DATA) + 1, mad + SERVICE_DATA);
	mad[SERVICE_DEVICE] = d->index;
	/*
	 * Counted before the post: the answer may reach the requester, and its
	 * send handler complete the wait, before this handler goes on (seen once:
	 * "served 0, 1 ok").
	 */
	atomic_inc(&d->served);
	if (rmad_send_buf_set(buf, &ah, 0, 0, NULL) || rmad_post_send_mad(buf, NULL)) {
		atomic_dec(&d->served);
		rmad_free_send_mad(buf);
	}
}

static void requester_send_handler(struct rmad_agent *agent, struct rmad_send_wc *wc)
{
	struct dev *d = wc->context;
	const u8 *mad = rmad_send_buf_mad(wc->send_buf);
	u32 lo = mad ? get_unaligned_be32(mad + 12) : 0;

	if (lo >= FAR_LO && lo < FAR_LO + FAR_N) {
		completed_as[lo - FAR_LO] = atomic_inc_return(&completions);
		status_of[lo - FAR_LO] = wc->status;
	}
	if (wc->status == RMAD_WC_SUCCESS) {
		atomic_inc(&d->ok);
	} else if (wc->status == RMAD_WC_WR_FLUSH_ERR) {
		atomic_inc(&d->flushed);
	} else {
		WRITE_ONCE(d->other_status, wc->status);
		atomic_inc(&d->other);
	}
	rmad_free_send_mad(wc->send_buf);
	if (atomic_inc_return(&d->done) == d->expected)
		complete(&d->all_done);
}

static int post_request(struct dev *d, u32 lo, u8 method, int timeout_ms);

/*
 * From a receive handler, which runs in rmad's receive completion thread:
 * posts an unanswered SEND of the sibling, gives the device time to take it
 * (its completion is then pending), and unregisters the sibling.
 */
static void unregister_sibling(void)
{
	if (post_request(&sibling, SIBLING_LO + 1, RMAD_MGMT_METHOD_SEND, 60000))
		return;
	msleep(500);
	sibling_unregistered = rmad_unregister_agent(sibling.requester);
	sibling.requester = NULL;
}

static void requester_recv_handler(struct rmad_agent *agent, struct rmad_send_buf *send_buf,
				   const struct rmad_recv_wc *wc)
{
	struct dev *d = wc->context;
	const u8 *mad = wc->mad;

	if (!send_buf || wc->mad_len < SERVICE_DEVICE + 1 || mad[1] != SERVICE_CLASS)
		return;
	if (get_unaligned_be32(mad + 12) == SIBLING_LO && sibling.requester) {
		unregister_sibling();
		return;
	}
	if (mad[SERVICE_DEVICE] == d->index)
		atomic_inc(&d->right);
	else
		atomic_inc(&d->crossed);
}

/* Posts one request of @method from GID @sgid_index to QP @qpn of @gid; 0 or the error. */
static int post_from(struct dev *d, u8 sgid_index, const u8 *gid, u32 qpn, u32 lo, u8 method,
		     int timeout_ms)
{
	struct rmad_ah ah = { .has_grh = 1, .sgid_index = sgid_index };
	struct rmad_send_buf *buf;
	u8 *mad;
	int ret;

	buf = rmad_create_send_mad(d->requester, qpn, 0, 0, RMAD_MGMT_MAD_HDR, RMAD_MGMT_MAD_DATA,
				   GFP_KERNEL, 1);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	mad = rmad_send_buf_mad(buf);
	mad[0] = 1;
	mad[1] = SERVICE_CLASS;
	mad[2] = 1;
	mad[3] = method;
	put_unaligned_be64(((u64)rmad_agent_hi_tid(d->requester) << 32) | lo, mad + 8);
	put_unaligned_be32(lo, mad + SERVICE_DATA);
	memcpy(ah.dgid, gid, 16);
	ret = rmad_send_buf_set(buf, &ah, timeout_ms, 2, NULL);
	if (!ret)
		ret = rmad_post_send_mad(buf, NULL);
	if (ret)
		rmad_free_send_mad(buf);
	return ret;
}

/* Posts one request of @method to QP @qpn of @gid; 0 or the error. */
static int post_qp(struct dev *d, const u8 *gid, u32 qpn, u32 lo, u8 method, int timeout_ms)
{
	return post_from(d, 1, gid, qpn, lo, method, timeout_ms);
}

/* Posts one request of @method to QP1 of @gid; 0 or the error. */
static int post_to(struct dev *d, const u8 *gid, u32 lo, u8 method, int timeout_ms)
{
	return post_qp(d, gid, 1, lo, method, timeout_ms);
}

/* Posts one request of @method to QP1 of the device's own GID; 0 or the error. */
static int post_request(struct dev *d, u32 lo, u8 method, int timeout_ms)
{
	return post_to(d, d->gid, lo, method, timeout_ms);
}

/*
 * Waits up to a minute for @c; whether it came. Interruptible: a wait that a
 * failure makes long reports FAIL instead of firing the hung-task detector.
 */
static bool wait_done(struct completion *c)
{
	return wait_for_completion_interruptible_timeout(c, 60 * HZ) > 0;
}

/* Clears a device's counters for a batch of @expected sends. */
static void reset(struct dev *d, int expected)
{
	atomic_set(&d->served, 0);
	atomic_set(&d->foreign_refused, 0);
	atomic_set(&d->right, 0);
	atomic_set(&d->crossed, 0);
	atomic_set(&d->ok, 0);
	atomic_set(&d->flushed, 0);
	atomic_set(&d->other, 0);
	atomic_set(&d->done, 0);
	d->expected = expected;
	reinit_completion(&d->all_done);
}

/*
 * One round on the devices whose port still exists: N_GET GETs each, all
 * answered by the same device. A removed device's post must fail with -ENODEV.
 */
static void run_round(void)
{
	bool live[N_DEV], pass = true;
	int i, j, bad = 0;

	rounds++;
	for (i = 0; i < N_DEV; i++) {
		u8 gid[16];

		live[i] = !rmad_port_gid(names[i], 1, 1, gid);
		reset(&devs[i], N_GET);
	}
	for (i = 0; i < N_DEV; i++) {
		for (j = 0; j < N_GET; j++) {
			int ret = post_request(&devs[i], 1000 * rounds + j, RMAD_MGMT_METHOD_GET,
					       5000);

			bad += live[i] ? ret != 0 : ret != -ENODEV;
		}
	}
	for (i = 0; i < N_DEV; i++) {
		struct dev *d = &devs[i];
		bool want = live[i];

		if (want && !wait_done(&d->all_done))
			bad++;
		pr_info("rmad_two_hca_client: round %d: %s %s: served %d (%d refused to the other device), answers %d right %d crossed, send handler %d ok %d flushed %d other (status %d)\n",
			rounds, names[i], want ? "live" : "removed", atomic_read(&d->served),
			atomic_read(&d->foreign_refused), atomic_read(&d->right),
			atomic_read(&d->crossed), atomic_read(&d->ok), atomic_read(&d->flushed),
			atomic_read(&d->other), READ_ONCE(d->other_status));
		pass &= atomic_read(&d->served) == (want ? N_GET : 0) &&
			atomic_read(&d->foreign_refused) == (want ? N_GET : 0) &&
			atomic_read(&d->right) == (want ? N_GET : 0) &&
			!atomic_read(&d->crossed) && atomic_read(&d->ok) == (want ? N_GET : 0) &&
			!atomic_read(&d->flushed) && !atomic_read(&d->other);
	}
	pr_info("rmad_two_hca_client: round %d: %s (rxe0 %s, rxe1 %s, %d bad posts or waits)\n",
		rounds, pass && !bad ? "PASS" : "FAIL", live[0] ? "live" : "removed",
		live[1] ? "live" : "removed", bad);
}

/*
 * N_FAR SENDs from rxe1 to 10.0.3.77 (nobody answers ARP for it), then a GET
 * on rxe1 and one on rxe0: the GETs complete first, the far ones with
 * LOC_QP_OP_ERR once their destination's resolution failed; then N_FAR more to
 * the same address, refused from the remembered failure.
 */
static void far_round(void)
{
	static const u8 far[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 3, 77 };
	bool pass = true;
	int i, bad = 0, first_far = INT_MAX, last_get = 0;

	atomic_set(&completions, 0);
	memset(completed_as, 0, sizeof(completed_as));
	reset(&devs[0], 1);
	reset(&devs[1], N_FAR + 1);
	for (i = 0; i < N_FAR; i++)
		bad += post_to(&devs[1], far, FAR_LO + i, RMAD_MGMT_METHOD_SEND, 0) != 0;
	bad += post_request(&devs[1], FAR_GET_RXE1, RMAD_MGMT_METHOD_GET, 20000) != 0;
	bad += post_request(&devs[0], FAR_GET_RXE0, RMAD_MGMT_METHOD_GET, 20000) != 0;
	for (i = 0; i < N_DEV; i++)
		bad += !wait_done(&devs[i].all_done);
	for (i = 0; i < N_FAR; i++) {
		first_far = min(first_far, completed_as[i]);
		pass &= status_of[i] == RMAD_WC_LOC_QP_OP_ERR;
	}
	last_get = max(completed_as[FAR_GET_RXE1 - FAR_LO], completed_as[FAR_GET_RXE0 - FAR_LO]);
	pass &= status_of[FAR_GET_RXE1 - FAR_LO] == RMAD_WC_SUCCESS &&
		status_of[FAR_GET_RXE0 - FAR_LO] == RMAD_WC_SUCCESS && last_get < first_far;
	pr_info("rmad_two_hca_client: unreachable: GETs completed as %d (rxe1) and %d (rxe0), the first far send as %d\n",
		completed_as[FAR_GET_RXE1 - FAR_LO], completed_as[FAR_GET_RXE0 - FAR_LO],
		first_far);
	/* The failure is remembered: these complete without another resolution. */
	reset(&devs[1], N_FAR);
	for (i = 0; i < N_FAR; i++)
		bad += post_to(&devs[1], far, FAR_LO + N_FAR + i, RMAD_MGMT_METHOD_SEND, 0) != 0;
	bad += !wait_done(&devs[1].all_done);
	for (i = N_FAR; i < 2 * N_FAR; i++)
		pass &= status_of[i] == RMAD_WC_LOC_QP_OP_ERR;
	pr_info("rmad_two_hca_client: unreachable: %s (%d bad posts or waits)\n",
		pass && !bad ? "PASS" : "FAIL", bad);
}

/*
 * N_FAR SENDs from rxe1 to 10.0.3.2, whose packets the test's qdisc on rxe1's
 * netdev refuses: each completes exactly once, none with SUCCESS. (rxe moves
 * rmad's private QP to the error state at the first refusal; rmad resets it
 * before its next send, which the test's next round checks.)
 */
static void refused_round(void)
{
	static const u8 near[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 3, 2 };
	int i, bad = 0, sent = 0;

	reset(&devs[1], N_FAR);
	for (i = 0; i < N_FAR; i++)
		bad += post_to(&devs[1], near, FAR_LO + i, RMAD_MGMT_METHOD_SEND, 0) != 0;
	bad += !wait_done(&devs[1].all_done);
	/* A second completion of any of them would show here. */
	msleep(200);
	for (i = 0; i < N_FAR; i++)
		sent += status_of[i] == RMAD_WC_SUCCESS;
	pr_info("rmad_two_hca_client: refused: %s (%d completions, %d flushed, %d with status %d, %d sent, %d bad posts or waits)\n",
		!sent && !bad && atomic_read(&devs[1].done) == N_FAR ? "PASS" : "FAIL",
		atomic_read(&devs[1].done), atomic_read(&devs[1].flushed),
		atomic_read(&devs[1].other), READ_ONCE(devs[1].other_status), sent, bad);
}

/*
 * A GET of the served class straight to rmad's private QP @qpn on rxe0, around
 * QP1: rmad drops it and its two retries (requests belong on QP1), so the
 * responder never sees it and the GET times out.
 */
static void to_private_qp(u32 qpn)
{
	struct dev *d = &devs[0];
	int bad;

	reset(d, 1);
	bad = post_qp(d, d->gid, qpn, 3000, RMAD_MGMT_METHOD_GET, 200) != 0;
	bad += !wait_done(&d->all_done);
	pr_info("rmad_two_hca_client: GET to the private QP %u: served %d, %d timed out: %s\n",
		qpn, atomic_read(&d->served), atomic_read(&d->other),
		!bad && !atomic_read(&d->served) && atomic_read(&d->other) == 1 ? "PASS" : "FAIL");
}

/*
 * A GET from rxe0's GID @index to that same GID, answered by the responder
 * (both address handles, request and answer, use GID entry @index).
 */
static void from_gid(u32 index)
{
	struct dev *d = &devs[0];
	u8 gid[16];
	int bad;

	reset(d, 1);
	bad = index > 255 || rmad_port_gid(names[0], 1, index, gid) != 0;
	bad = bad || post_from(d, index, gid, 1, 4000, RMAD_MGMT_METHOD_GET, 5000) != 0;
	bad = bad || !wait_done(&d->all_done);
	pr_info("rmad_two_hca_client: GET from GID %u: served %d, %d ok: %s\n", index,
		atomic_read(&d->served), atomic_read(&d->ok),
		!bad && atomic_read(&d->served) == 1 && atomic_read(&d->ok) == 1 ? "PASS" : "FAIL");
}

/* Posts N_PARK unanswered SENDs on rxe1, to be flushed by its removal. */
static void park(void)
{
	struct dev *d = &devs[1];
	int i, bad = 0;

	reset(d, N_PARK);
	for (i = 0; i < N_PARK; i++)
		bad += post_request(d, 900 + i, RMAD_MGMT_METHOD_SEND, 60000) != 0;
	pr_info("rmad_two_hca_client: parked %d sends on rxe1: %s\n", N_PARK - bad,
		bad ? "FAIL" : "PASS");
}

/* Waits for the parked sends: each flushed once, nothing else. */
static void parked_flushed(void)
{
	struct dev *d = &devs[1];
	bool all = wait_done(&d->all_done);

	pr_info("rmad_two_hca_client: parked sends after removal: %d flushed %d ok %d other: %s\n",
		atomic_read(&d->flushed), atomic_read(&d->ok), atomic_read(&d->other),
		all && atomic_read(&d->flushed) == N_PARK && !atomic_read(&d->ok) &&
		!atomic_read(&d->other) ? "PASS" : "FAIL");
}

/*
 * Whether rmad knows device @name as @want says ("found" or "absent"): its
 * port's GID and a registration on it succeed, or both fail with -ENODEV.
 */
static void lookup(const char *name, const char *want)
{
	bool found = !strcmp(want, "found");
	struct rmad_agent *a;
	int gid_ret, reg_ret;
	u8 gid[16];

	gid_ret = rmad_port_gid(name, 1, 1, gid);
	a = rmad_register_agent(name, 1, RMAD_QPT_GSI, NULL, 0, requester_send_handler,
				requester_recv_handler, &devs[0], 0);
	reg_ret = PTR_ERR_OR_ZERO(a);
	if (!IS_ERR(a))
		rmad_unregister_agent(a);
	pr_info("rmad_two_hca_client: %s %s: gid %d, register %d: %s\n", "lookup", name, gid_ret,
		reg_ret,
		(found ? !gid_ret && !reg_ret : gid_ret == -ENODEV && reg_ret == -ENODEV) ?
		"PASS" : "FAIL");
}

/* A receive handler of rxe0's requester unregisters a sibling with a send in the device. */
static void unregister_from_handler(void)
{
	struct dev *d = &devs[0];
	bool pass;
	int bad;

	sibling.index = 0;
	memcpy(sibling.gid, d->gid, sizeof(sibling.gid));
	init_completion(&sibling.all_done);
	reset(&sibling, 1);
	reset(d, 1);
	sibling_unregistered = 1;
	sibling.requester = rmad_register_agent(names[0], 1, RMAD_QPT_GSI, NULL, 0,
						requester_send_handler, requester_recv_handler,
						&sibling, 0);
	bad = IS_ERR(sibling.requester);
	if (bad)
		sibling.requester = NULL;
	bad = bad || post_request(d, SIBLING_LO, RMAD_MGMT_METHOD_GET, 20000) != 0;
	bad = bad || !wait_done(&d->all_done);
	bad = bad || !wait_done(&sibling.all_done);
	pass = !bad && sibling_unregistered == 0 && atomic_read(&sibling.flushed) == 1 &&
	       atomic_read(&sibling.done) == 1 && atomic_read(&d->ok) == 1;
	pr_info("rmad_two_hca_client: sibling unregistered from a receive handler: %d, its send %d flushed %d other: %s\n",
		sibling_unregistered, atomic_read(&sibling.flushed),
		atomic_read(&sibling.done) - atomic_read(&sibling.flushed), pass ? "PASS" : "FAIL");
	if (sibling.requester) {
		rmad_unregister_agent(sibling.requester);
		sibling.requester = NULL;
	}
}

static int action_set(const char *val, const struct kernel_param *kp)
{
	char name[16], want[8];
	u32 qpn;

	if (sscanf(val, "lookup %15s %7s", name, want) == 2)
		lookup(name, want);
	else if (sscanf(val, "private %u", &qpn) == 1)
		to_private_qp(qpn);
	else if (sscanf(val, "from %u", &qpn) == 1)
		from_gid(qpn);
	else if (sysfs_streq(val, "round"))
		run_round();
	else if (sysfs_streq(val, "refused"))
		refused_round();
	else if (sysfs_streq(val, "unreachable"))
		far_round();
	else if (sysfs_streq(val, "park"))
		park();
	else if (sysfs_streq(val, "flushed"))
		parked_flushed();
	else if (sysfs_streq(val, "sibling"))
		unregister_from_handler();
	else
		return -EINVAL;
	return 0;
}

static const struct kernel_param_ops action_ops = {
	.set = action_set,
};

module_param_cb(action, &action_ops, NULL, 0200);
MODULE_PARM_DESC(action,
		 "round, unreachable, refused, private <qpn>, from <gid index>, park, flushed, sibling or lookup <name> found|absent");

/* Unregisters what @d has (also on a removed device); logs errors. */
static void dev_stop(struct dev *d)
{
	int ret;

	if (!IS_ERR_OR_NULL(d->requester)) {
		ret = rmad_unregister_agent(d->requester);
		if (ret)
			pr_info("rmad_two_hca_client: %s: unregister requester: %d\n",
				names[d->index], ret);
	}
	if (!IS_ERR_OR_NULL(d->responder)) {
		ret = rmad_unregister_agent(d->responder);
		if (ret)
			pr_info("rmad_two_hca_client: %s: unregister responder: %d\n",
				names[d->index], ret);
	}
	d->requester = NULL;
	d->responder = NULL;
}

static int dev_start(struct dev *d, int index)
{
	struct rmad_reg_req reg = {
		.mgmt_class = SERVICE_CLASS,
		.mgmt_class_version = 1,
		.method_mask = { BIT_ULL(RMAD_MGMT_METHOD_GET) },
	};
	int ret;

	d->index = index;
	init_completion(&d->all_done);
	ret = rmad_port_gid(names[index], 1, 1, d->gid);
	if (ret)
		return ret;
	d->responder = rmad_register_agent(names[index], 1, RMAD_QPT_GSI, &reg, 0,
					   responder_send_handler, responder_recv_handler, d, 0);
	if (IS_ERR(d->responder))
		return PTR_ERR(d->responder);
	d->requester = rmad_register_agent(names[index], 1, RMAD_QPT_GSI, NULL, 0,
					   requester_send_handler, requester_recv_handler, d, 0);
	if (IS_ERR(d->requester))
		return PTR_ERR(d->requester);
	return 0;
}

static int __init rmad_two_hca_client_init(void)
{
	int i, ret;

	for (i = 0; i < N_DEV; i++) {
		ret = dev_start(&devs[i], i);
		pr_info("rmad_two_hca_client: %s: class 0x%02x responder and requester registered: %d\n",
			names[i], SERVICE_CLASS, ret);
		if (ret) {
			while (i >= 0)
				dev_stop(&devs[i--]);
			return ret;
		}
	}
	run_round();
	return 0;
}

static void __exit rmad_two_hca_client_exit(void)
{
	int i;

	for (i = 0; i < N_DEV; i++)
		dev_stop(&devs[i]);
	pr_info("rmad_two_hca_client: unloaded\n");
}

module_init(rmad_two_hca_client_init);
module_exit(rmad_two_hca_client_exit);
MODULE_DESCRIPTION("rmad test client: one class served on two RDMA devices, one removed");
MODULE_LICENSE("GPL");
