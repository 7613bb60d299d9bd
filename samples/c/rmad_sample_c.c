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
 *
 * Across machines (make test's two-node run):
 * - serve=1 serves GETs of vendor class 0x0a on rxe0 until unloaded: the
 *   receive handler keeps each request (rmad_keep_recv_mad()), a work item
 *   answers it later with the 32-bit number at byte 24 plus one, addressed by
 *   rmad_recv_buf_ah(), and frees it (rmad_free_recv_mad()). It also serves a
 *   table: a kernel-RMPP agent of vendor class 0x30 answers each GetTable with
 *   TABLE_RECORDS records in one RMPP transfer, which rmad segments and sends
 *   one window at a time.
 * - peer=10.0.1.2 sends 8 such GETs to that node's rxe0 through the
 *   IPv4-mapped GIDs and checks each answer, then fetches the table with a
 *   kernel-RMPP agent (rmad reassembles it) and checks every record.
 */

#include <linux/atomic.h>
#include <linux/build_bug.h>
#include <linux/completion.h>
#include <linux/err.h>
#include <linux/inet.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/unaligned.h>
#include <linux/workqueue.h>

#include "../../include/rmad.h"

/* Written for rmad's API 4.4 (Documentation/changes.md): refuse to build against another. */
static_assert(RMAD_API_VERSION_MAJOR == 4 && RMAD_API_VERSION_MINOR >= 4,
	      "rmad_sample_c is written for rmad API 4.4");

#define N_GET 4
#define N_CANCEL 2
/* The two-node service: vendor class, where its number is, GETs sent to a peer. */
#define SERVICE_CLASS 0x0a
#define SERVICE_DATA 24
#define N_PEER 8
#define FIRST_NUMBER 100
/*
 * The table service: a vendor class of range 2 (it uses RMPP and carries an OUI,
 * here a made-up one, at bytes 37-39), method GetTable, TABLE_RECORDS records of
 * RECORD_SIZE bytes: record i holds i and i * i (32 bits each, big-endian) and 8
 * bytes of i (mod 256). 4 800 bytes: 23 segments of 216.
 */
#define TABLE_CLASS 0x30
#define TABLE_OUI 37
#define TABLE_METHOD 0x12
#define TABLE_RECORDS 300
#define RECORD_SIZE 16
static const u8 table_oui[3] = { 0x00, 0x12, 0x34 };

static char *peer;
module_param(peer, charp, 0444);
MODULE_PARM_DESC(peer, "IPv4 address of a node serving vendor class 0x0a");
static bool serve;
module_param(serve, bool, 0444);
MODULE_PARM_DESC(serve, "serve GETs of vendor class 0x0a on rxe0 until unloaded");

static atomic_t done, succeeded, flushed, other, responses, good;
static int expected = N_GET + N_CANCEL;
static DECLARE_COMPLETION(all_done);

static void sample_send_handler(struct rmad_agent *agent, struct rmad_send_wc *wc)
{
	if (wc->status == RMAD_WC_SUCCESS)
		atomic_inc(&succeeded);
	else if (wc->status == RMAD_WC_WR_FLUSH_ERR)
		atomic_inc(&flushed);
	else
		atomic_inc(&other);
	rmad_free_send_mad(wc->send_buf);
	if (atomic_inc_return(&done) == expected)
		complete(&all_done);
}

static void sample_recv_handler(struct rmad_agent *agent, struct rmad_send_buf *send_buf,
				const struct rmad_recv_wc *wc)
{
	const u8 *mad = wc->mad;
	u32 number;

	if (!send_buf || rmad_response_mad(mad, wc->mad_len) != 1 || wc->mad_len < 28)
		return;
	atomic_inc(&responses);
	/* A service answer: status 0 and the request's number (from its TID) plus one. */
	number = FIRST_NUMBER + get_unaligned_be32(mad + 12) + 1;
	if (mad[1] == SERVICE_CLASS && !get_unaligned_be16(mad + 4) &&
	    get_unaligned_be32(mad + SERVICE_DATA) == number)
		atomic_inc(&good);
}

/* The longest a GET may take, retries included. */
#define SAMPLE_GET_DEADLINE_MS 20000

/* A @class request with @method from @sgid_index to QP1 of @gid, carrying FIRST_NUMBER + @lo. */
static struct rmad_send_buf *sample_request(struct rmad_agent *agent, u8 sgid_index,
					    const u8 *gid, u8 class, u32 lo, u8 method,
					    int timeout_ms, int retries)
{
	struct rmad_ah ah = { .has_grh = 1, .sgid_index = sgid_index };
	struct rmad_send_buf *buf;
	u8 *mad;
	int ret;

	buf = rmad_create_send_mad(agent, 1, 0, 0, RMAD_MGMT_MAD_HDR, RMAD_MGMT_MAD_DATA,
				   GFP_KERNEL, 1);
	if (IS_ERR(buf))
		return buf;
	mad = rmad_send_buf_mad(buf);
	mad[0] = 1;		/* base version */
	mad[1] = class;
	mad[2] = 1;		/* class version */
	mad[3] = method;
	put_unaligned_be64(((u64)rmad_agent_hi_tid(agent) << 32) | lo, mad + 8);
	put_unaligned_be32(FIRST_NUMBER + lo, mad + SERVICE_DATA);
	memcpy(ah.dgid, gid, 16);
	ret = rmad_send_buf_set(buf, &ah, timeout_ms, retries, NULL);
	/*
	 * A GET gives up by its deadline, however many retries it has left, and
	 * backs off from a responder that does not keep up (rmad_send_buf_set_retry()).
	 */
	if (!ret && method == RMAD_MGMT_METHOD_GET)
		ret = rmad_send_buf_set_retry(buf, RMAD_RETRY_BACKOFF, SAMPLE_GET_DEADLINE_MS);
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
		struct rmad_send_buf *b;

		b = sample_request(agent, 1, gid, RMAD_MGMT_CLASS_PERF_MGMT, i,
				   RMAD_MGMT_METHOD_GET, 5000, 0);
		if (IS_ERR(b)) {
			bad++;
		} else if (rmad_post_send_mad(b, NULL)) {
			/* Not posted: still the caller's, freed here. */
			rmad_free_send_mad(b);
			bad++;
		}
	}
	for (i = 0; i < N_CANCEL; i++) {
		cancel[i] = sample_request(agent, 1, gid, RMAD_MGMT_CLASS_PERF_MGMT, 100 + i,
					   RMAD_MGMT_METHOD_SEND, 60000, 0);
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
	fresh = rmad_create_send_mad(agent, 1, 0, 0, RMAD_MGMT_MAD_HDR, RMAD_MGMT_MAD_DATA,
				     GFP_KERNEL, 1);
	if (IS_ERR(fresh)) {
		bad++;
	} else {
		for (i = 0; i < N_CANCEL; i++) {
			bad += fresh == cancel[i];
			bad += rmad_free_send_mad(cancel[i]) != -EINVAL;
		}
		bad += !rmad_send_buf_mad(fresh);
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

/* Writes record @i of the table at @rec. */
static void table_record(u8 *rec, u32 i)
{
	put_unaligned_be32(i, rec);
	put_unaligned_be32(i * i, rec + 4);
	memset(rec + 8, i & 0xff, RECORD_SIZE - 8);
}

/* Whether @data (@len bytes) is the whole table. */
static bool table_right(const u8 *data, u32 len)
{
	u8 want[RECORD_SIZE];
	u32 i;

	if (len != TABLE_RECORDS * RECORD_SIZE)
		return false;
	for (i = 0; i < TABLE_RECORDS; i++) {
		table_record(want, i);
		if (memcmp(data + i * RECORD_SIZE, want, RECORD_SIZE))
			return false;
	}
	return true;
}

/* The table fetch: its answer, as its handlers saw it. */
static atomic_t table_records;
static DECLARE_COMPLETION(table_done);

static void table_send_handler(struct rmad_agent *agent, struct rmad_send_wc *wc)
{
	if (wc->status != RMAD_WC_SUCCESS)
		pr_info("rmad_sample_c: the GetTable ended with status %d\n", wc->status);
	rmad_free_send_mad(wc->send_buf);
	complete(&table_done);
}

/* The answer comes whole: rmad reassembled its segments into one MAD of mad_len bytes. */
static void table_recv_handler(struct rmad_agent *agent, struct rmad_send_buf *send_buf,
			       const struct rmad_recv_wc *wc)
{
	int off = rmad_get_mad_data_offset(TABLE_CLASS);
	const u8 *mad = wc->mad;

	if (!send_buf || wc->mad_len < off || mad[1] != TABLE_CLASS ||
	    mad[3] != (TABLE_METHOD | RMAD_MGMT_METHOD_RESP) || get_unaligned_be16(mad + 4))
		return;
	if (table_right(mad + off, wc->mad_len - off))
		atomic_set(&table_records, TABLE_RECORDS);
}

/*
 * Fetches the table from QP1 at @ah with a kernel-RMPP agent; returns the records
 * that came right (TABLE_RECORDS or 0), or an error.
 */
static int sample_fetch_table(const struct rmad_ah *ah)
{
	struct rmad_send_buf *buf;
	struct rmad_agent *agent;
	u8 *mad;
	int ret;

	agent = rmad_register_agent("rxe0", 1, RMAD_QPT_GSI, NULL, 1, table_send_handler,
				    table_recv_handler, NULL, 0);
	if (IS_ERR(agent))
		return PTR_ERR(agent);
	buf = rmad_create_send_mad(agent, 1, 0, 0, RMAD_MGMT_MAD_HDR, RMAD_MGMT_MAD_DATA,
				   GFP_KERNEL, 1);
	if (IS_ERR(buf)) {
		ret = PTR_ERR(buf);
		goto unregister;
	}
	mad = rmad_send_buf_mad(buf);
	mad[0] = 1;
	mad[1] = TABLE_CLASS;
	mad[2] = 1;
	mad[3] = TABLE_METHOD;
	put_unaligned_be64((u64)rmad_agent_hi_tid(agent) << 32, mad + 8);
	memcpy(mad + TABLE_OUI, table_oui, sizeof(table_oui));
	/* The timeout covers the whole transfer: the answer counts once it is all here. */
	ret = rmad_send_buf_set(buf, ah, 10000, 2, NULL);
	if (!ret)
		ret = rmad_post_send_mad(buf, NULL);
	if (ret) {
		rmad_free_send_mad(buf);
		goto unregister;
	}
	if (!wait_for_completion_timeout(&table_done, 60 * HZ))
		ret = -ETIMEDOUT;
unregister:
	if (rmad_unregister_agent(agent) && !ret)
		ret = -EBUSY;
	return ret ? ret : atomic_read(&table_records);
}

/* Sends N_PEER service GETs to the node with IPv4 address @addr (a string). */
static int sample_peer(const char *addr)
{
	static const u8 v4_prefix[12] = { [10] = 0xff, [11] = 0xff };
	struct rmad_ah ah = { .has_grh = 1 };
	struct rmad_agent *agent;
	u8 gid[16];
	int i, ret, table, bad = 0;

	/* The source: rxe0's IPv4-mapped GID (RoCEv2 over IPv4 needs both ends IPv4). */
	for (i = 0; i < 16; i++)
		if (!rmad_port_gid("rxe0", 1, i, gid) && !memcmp(gid, v4_prefix, 12))
			break;
	if (i == 16)
		return -ENODEV;
	ah.sgid_index = i;
	memcpy(ah.dgid, v4_prefix, 12);
	if (!in4_pton(addr, -1, ah.dgid + 12, -1, NULL))
		return -EINVAL;

	expected = N_PEER;
	agent = rmad_register_agent("rxe0", 1, RMAD_QPT_GSI, NULL, 0, sample_send_handler,
				    sample_recv_handler, NULL, 0);
	if (IS_ERR(agent))
		return PTR_ERR(agent);
	/* Resolved once here, in process context, as rdma_create_ah() callers do. */
	ret = rmad_resolve_ah(agent, &ah);
	for (i = 0; !ret && i < N_PEER; i++) {
		struct rmad_send_buf *b;

		b = sample_request(agent, ah.sgid_index, ah.dgid, SERVICE_CLASS, i,
				   RMAD_MGMT_METHOD_GET, 3000, 2);
		if (IS_ERR(b)) {
			bad++;
		} else if (rmad_post_send_mad(b, NULL)) {
			/* Not posted: still the caller's; unregister would wait for it. */
			rmad_free_send_mad(b);
			bad++;
		}
	}
	if (!ret && !bad && !wait_for_completion_timeout(&all_done, 60 * HZ))
		bad++;
	i = rmad_unregister_agent(agent);
	table = ret ? 0 : sample_fetch_table(&ah);
	pr_info("rmad_sample_c: %s: peer %s: %d answered, %d right answers, table of %d records right, %d other, %d bad, resolve %d, unregister %d\n",
		(!ret && !bad && !i && atomic_read(&succeeded) == N_PEER &&
		 atomic_read(&good) == N_PEER && table == TABLE_RECORDS) ? "PASS" : "FAIL",
		addr, atomic_read(&succeeded), atomic_read(&good), table, atomic_read(&other),
		bad, ret, i);
	return 0;
}

/* The service (serve=1): requests kept by the receive handler, answered by a work item. */
struct kept {
	struct list_head link;
	struct rmad_recv_buf *recv;
	u32 src_qp;
	u16 pkey_index;
};

static struct rmad_agent *server, *table_server;
static LIST_HEAD(kept_list);
static DEFINE_SPINLOCK(kept_lock);
static atomic_t answered, freed_late, tables;

static void server_send_handler(struct rmad_agent *agent, struct rmad_send_wc *wc)
{
	rmad_free_send_mad(wc->send_buf);
}

/* Answers one kept request: the address from its arrival, its header, its number plus one. */
static int server_answer(struct kept *k)
{
	struct rmad_send_buf *buf;
	struct rmad_ah ah;
	const u8 *req;
	u8 *mad;
	u32 len;
	int ret;

	req = rmad_recv_buf_mad(k->recv, &len);
	if (!req || len < SERVICE_DATA + 4)
		return -EINVAL;
	ret = rmad_recv_buf_ah(server, k->recv, &ah);
	if (ret)
		return ret;
	buf = rmad_create_send_mad(server, k->src_qp, k->pkey_index, 0, RMAD_MGMT_MAD_HDR,
				   RMAD_MGMT_MAD_DATA, GFP_KERNEL, 1);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	mad = rmad_send_buf_mad(buf);
	memcpy(mad, req, 24);
	mad[3] = RMAD_MGMT_METHOD_GET_RESP;
	put_unaligned_be32(get_unaligned_be32(req + SERVICE_DATA) + 1, mad + SERVICE_DATA);
	ret = rmad_send_buf_set(buf, &ah, 0, 0, NULL);
	if (!ret)
		ret = rmad_post_send_mad(buf, NULL);
	if (ret)
		rmad_free_send_mad(buf);
	return ret;
}

static void server_work_fn(struct work_struct *work)
{
	struct kept *k;

	for (;;) {
		spin_lock_bh(&kept_lock);
		k = list_first_entry_or_null(&kept_list, struct kept, link);
		if (k)
			list_del(&k->link);
		spin_unlock_bh(&kept_lock);
		if (!k)
			return;
		if (!server_answer(k))
			atomic_inc(&answered);
		rmad_free_recv_mad(k->recv);
		kfree(k);
	}
}

static DECLARE_WORK(server_work, server_work_fn);

static void table_server_send_handler(struct rmad_agent *agent, struct rmad_send_wc *wc)
{
	if (wc->status == RMAD_WC_SUCCESS)
		atomic_inc(&tables);
	rmad_free_send_mad(wc->send_buf);
}

/* Copies the @len bytes at @data into the segments of @buf, in order from the first. */
static int fill_segments(struct rmad_send_buf *buf, const u8 *data, u32 len)
{
	u32 seg_size, at;
	int n, seg;

	n = rmad_send_buf_seg_count(buf, &seg_size);
	if (n <= 0 || (u64)n * seg_size < len)
		return -EINVAL;
	for (seg = 1, at = 0; at < len; seg++, at += seg_size)
		memcpy(rmad_get_rmpp_segment(buf, seg), data + at, min(seg_size, len - at));
	return 0;
}

/*
 * Answers a GetTable from its receive handler (process context: it may allocate with
 * GFP_KERNEL): the table in one RMPP buffer, which rmad segments and sends.
 */
static void table_server_recv_handler(struct rmad_agent *agent, struct rmad_send_buf *send_buf,
				      const struct rmad_recv_wc *wc)
{
	int off = rmad_get_mad_data_offset(TABLE_CLASS);
	struct rmad_send_buf *buf;
	struct rmad_ah ah;
	u8 *mad, *table;
	int ret;
	u32 i;

	if (send_buf || !wc->recv_buf || wc->mad_len < TABLE_OUI + 3)
		return;
	if (rmad_recv_buf_ah(agent, wc->recv_buf, &ah))
		return;
	table = kmalloc(TABLE_RECORDS * RECORD_SIZE, GFP_KERNEL);
	if (!table)
		return;
	for (i = 0; i < TABLE_RECORDS; i++)
		table_record(table + i * RECORD_SIZE, i);
	buf = rmad_create_send_mad(agent, wc->src_qp, wc->pkey_index, 1, off,
				   TABLE_RECORDS * RECORD_SIZE, GFP_KERNEL, 1);
	if (IS_ERR(buf))
		goto free_table;
	/* The common header of the request, the RMPP header as rmad made it, the OUI. */
	mad = rmad_send_buf_mad(buf);
	memcpy(mad, wc->mad, RMAD_MGMT_MAD_HDR);
	mad[3] = TABLE_METHOD | RMAD_MGMT_METHOD_RESP;
	memcpy(mad + TABLE_OUI, table_oui, sizeof(table_oui));
	ret = fill_segments(buf, table, TABLE_RECORDS * RECORD_SIZE);
	/* No response to a response: each window waits for its ACK, sent again twice at most. */
	if (!ret)
		ret = rmad_send_buf_set(buf, &ah, 0, 2, NULL);
	if (!ret)
		ret = rmad_post_send_mad(buf, NULL);
	if (ret)
		rmad_free_send_mad(buf);
free_table:
	kfree(table);
}

static void server_recv_handler(struct rmad_agent *agent, struct rmad_send_buf *send_buf,
				const struct rmad_recv_wc *wc)
{
	struct kept *k;

	if (send_buf || !wc->recv_buf)
		return;
	k = kmalloc_obj(*k, GFP_KERNEL);
	if (!k)
		return;
	/* Kept: the MAD is ours after this handler returns, until rmad_free_recv_mad(). */
	if (rmad_keep_recv_mad(wc->recv_buf)) {
		kfree(k);
		return;
	}
	k->recv = wc->recv_buf;
	k->src_qp = wc->src_qp;
	k->pkey_index = wc->pkey_index;
	spin_lock_bh(&kept_lock);
	list_add_tail(&k->link, &kept_list);
	spin_unlock_bh(&kept_lock);
	schedule_work(&server_work);
}

static int server_start(void)
{
	struct rmad_reg_req reg = {
		.mgmt_class = SERVICE_CLASS,
		.mgmt_class_version = 1,
		.method_mask = { BIT_ULL(RMAD_MGMT_METHOD_GET) },
	};

	struct rmad_reg_req table_reg = {
		.mgmt_class = TABLE_CLASS,
		.mgmt_class_version = 1,
		.oui = { table_oui[0], table_oui[1], table_oui[2] },
		.method_mask = { BIT_ULL(TABLE_METHOD) },
	};

	server = rmad_register_agent("rxe0", 1, RMAD_QPT_GSI, &reg, 0, server_send_handler,
				     server_recv_handler, NULL, 0);
	if (IS_ERR(server))
		return PTR_ERR(server);
	/* rmpp_version 1: rmad segments the answers (kernel RMPP). */
	table_server = rmad_register_agent("rxe0", 1, RMAD_QPT_GSI, &table_reg, 1,
					   table_server_send_handler, table_server_recv_handler,
					   NULL, 0);
	if (IS_ERR(table_server)) {
		rmad_unregister_agent(server);
		return PTR_ERR(table_server);
	}
	pr_info("rmad_sample_c: serving class 0x%02x and a table of class 0x%02x\n",
		SERVICE_CLASS, TABLE_CLASS);
	return 0;
}

/*
 * Unregisters first (no request arrives any more, every answer has completed),
 * then frees what is still kept: kept MADs outlive their agent safely.
 */
static void server_stop(void)
{
	struct kept *k, *n;
	int ret = rmad_unregister_agent(server);

	if (rmad_unregister_agent(table_server) && !ret)
		ret = -EBUSY;

	cancel_work_sync(&server_work);
	list_for_each_entry_safe(k, n, &kept_list, link) {
		if (!rmad_free_recv_mad(k->recv))
			atomic_inc(&freed_late);
		list_del(&k->link);
		kfree(k);
	}
	pr_info("rmad_sample_c: served %d and %d tables, %d freed after unregister, unregister %d\n",
		atomic_read(&answered), atomic_read(&tables), atomic_read(&freed_late), ret);
}

static int __init rmad_sample_c_init(void)
{
	int ret;

	if (serve)
		return server_start();
	ret = peer ? sample_peer(peer) : sample_run();
	if (ret)
		pr_info("rmad_sample_c: FAIL: %d\n", ret);
	return 0;
}

static void __exit rmad_sample_c_exit(void)
{
	if (serve)
		server_stop();
}

module_init(rmad_sample_c_init);
module_exit(rmad_sample_c_exit);
MODULE_DESCRIPTION("rmad sample: a C driver using rmad's exported API");
MODULE_LICENSE("GPL");
