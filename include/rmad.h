/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rmad: InfiniBand MAD agents for other kernel modules.
 *
 * The C API of the rmad module, mirroring the C MAD layer (ib_register_mad_agent,
 * ib_create_send_mad, ib_post_send_mad, ib_modify_mad, ib_cancel_mad,
 * ib_free_send_mad, ib_unregister_mad_agent) on rmad's agents.
 *
 * Handles. struct rmad_agent and struct rmad_send_buf pointers are handles,
 * never addresses: each one is unique for the life of the module, and once its
 * object is gone (agent unregistered, buffer freed) it stays invalid forever.
 * Every entry point validates its handles: NULL, stale and foreign values get
 * -EINVAL (or NULL, 0 or ERR_PTR(-EINVAL), as each function says), never a
 * crash and never another object. A handle is looked up in O(1) under a lock
 * of its own, so calls on different agents and buffers do not contend.
 *
 * Contexts. "Atomic-safe" functions may be called in any context that may not
 * sleep: with spinlocks held or interrupts disabled, from softirq (timers,
 * tasklets) and from hard interrupt context, including hrtimer callbacks in
 * the default mode. Like every user of spinlock_t, they must not be called
 * from HRTIMER_MODE_HARD callbacks or IRQF_NO_THREAD handlers. Handlers are
 * never called with an rmad lock held, nor from inside any rmad_* call other
 * than rmad_unregister_agent() (which delivers the flushes it causes).
 *
 * Build a client module against rmad's Module.symvers (KBUILD_EXTRA_SYMBOLS).
 *
 * Versions. RMAD_API_VERSION_MAJOR and RMAD_API_VERSION_MINOR say which API
 * this header describes; Documentation/changes.md lists what each version
 * changed and how to move a client. Check them at compile time, e.g.
 * static_assert(RMAD_API_VERSION_MAJOR == 4 && RMAD_API_VERSION_MINOR >= 2).
 */
#ifndef RMAD_H
#define RMAD_H

#include <linux/bits.h>
#include <linux/types.h>

/**
 * RMAD_API_VERSION_MAJOR - the major version of this API
 *
 * Grows with every change that can break a client written against the
 * previous version: a function, structure, constant or behaviour that changed
 * or went away (a client then fails to build, or worse, behaves differently).
 * The minor version starts again at 0.
 */
#define RMAD_API_VERSION_MAJOR 4

/**
 * RMAD_API_VERSION_MINOR - the minor version of this API
 *
 * Grows with every change that keeps clients of the same major version
 * working: a new function, constant or guarantee.
 */
#define RMAD_API_VERSION_MINOR 5

/**
 * RMAD_API_VERSION - one number for a version, to compare versions
 * @major: major version
 * @minor: minor version (below 65536)
 */
#define RMAD_API_VERSION(major, minor) (((major) << 16) + (minor))

/**
 * RMAD_API_VERSION_CODE - this header's version as one number
 *
 * E.g. #if RMAD_API_VERSION_CODE >= RMAD_API_VERSION(4, 2) for what version
 * 4.2 added.
 */
#define RMAD_API_VERSION_CODE RMAD_API_VERSION(RMAD_API_VERSION_MAJOR, RMAD_API_VERSION_MINOR)

struct module;

struct rmad_agent;
struct rmad_send_buf;
struct rmad_recv_buf;

/**
 * enum rmad_qp_type - which special QP an agent uses (ib_qp_type's IB_QPT_SMI, IB_QPT_GSI)
 * @RMAD_QPT_SMI: subnet management (QP0)
 * @RMAD_QPT_GSI: general services (QP1)
 */
enum rmad_qp_type {
	RMAD_QPT_SMI = 0,
	RMAD_QPT_GSI = 1,
};

/*
 * What a client reads and writes without <rdma/ib_verbs.h> or <rdma/ib_mad.h>:
 * each has the value of the ib_core constant named beside it (src/capi/exports.c
 * checks that they are equal).
 */

/* Send completion statuses, rmad_send_wc.status: the ones rmad reports. */
#define RMAD_WC_SUCCESS		0	/* IB_WC_SUCCESS: sent (and answered, if asked) */
#define RMAD_WC_LOC_QP_OP_ERR	2	/* IB_WC_LOC_QP_OP_ERR: the device refused the send */
#define RMAD_WC_WR_FLUSH_ERR	5	/* IB_WC_WR_FLUSH_ERR: cancelled, or agent or device gone */
#define RMAD_WC_REM_ABORT_ERR	16	/* IB_WC_REM_ABORT_ERR: the peer aborted the transfer */
#define RMAD_WC_RESP_TIMEOUT_ERR 20	/* IB_WC_RESP_TIMEOUT_ERR: no response, retries spent */
#define RMAD_WC_GENERAL_ERR	21	/* IB_WC_GENERAL_ERR: anything else */

/* Management classes (MAD byte 1). */
#define RMAD_MGMT_CLASS_SUBN_LID_ROUTED	0x01	/* IB_MGMT_CLASS_SUBN_LID_ROUTED */
#define RMAD_MGMT_CLASS_SUBN_ADM	0x03	/* IB_MGMT_CLASS_SUBN_ADM */
#define RMAD_MGMT_CLASS_PERF_MGMT	0x04	/* IB_MGMT_CLASS_PERF_MGMT */
#define RMAD_MGMT_CLASS_CM		0x07	/* IB_MGMT_CLASS_CM */
#define RMAD_MGMT_CLASS_VENDOR_RANGE2_START 0x30 /* IB_MGMT_CLASS_VENDOR_RANGE2_START */

/* Methods (MAD byte 3). */
#define RMAD_MGMT_METHOD_GET		0x01	/* IB_MGMT_METHOD_GET */
#define RMAD_MGMT_METHOD_SET		0x02	/* IB_MGMT_METHOD_SET */
#define RMAD_MGMT_METHOD_SEND		0x03	/* IB_MGMT_METHOD_SEND */
#define RMAD_MGMT_METHOD_GET_RESP	0x81	/* IB_MGMT_METHOD_GET_RESP */
#define RMAD_MGMT_METHOD_RESP		0x80	/* IB_MGMT_METHOD_RESP: the response bit */

/* MAD status (bytes 4-5, big endian) ib_core answers a GET of a class nobody serves with. */
#define RMAD_MGMT_MAD_STATUS_UNSUPPORTED_METHOD_ATTRIB 0x000c

/* Sizes of one MAD for rmad_create_send_mad(): what a request or response of most classes is. */
#define RMAD_MGMT_MAD_HDR		24	/* IB_MGMT_MAD_HDR: the common MAD header */
#define RMAD_MGMT_MAD_DATA		232	/* IB_MGMT_MAD_DATA: the data after it */

/**
 * struct rmad_ah - where a send goes (an address handle's attributes)
 * @dlid: destination LID
 * @src_path_bits: source path bits
 * @has_grh: the packet carries a GRH (always on RoCE)
 * @sgid_index: index of the local source GID
 * @dgid: destination GID
 * @hop_limit: hop limit of the GRH (on RoCEv2 the IP TTL); 0 means 64
 * @traffic_class: traffic class of the GRH (on RoCEv2 the IP DSCP and ECN bits)
 * @sl: service level
 * @flow_label: flow label of the GRH (20 bits)
 *
 * The P_Key index is the send buffer's (rmad_create_send_mad()), as in the C
 * MAD layer: a post whose index the port's P_Key table lacks fails with
 * -EINVAL. On an RDMA device rmad sends in the partition of P_Key index 0
 * only: another index whose P_Key differs from index 0's fails the post with
 * -EOPNOTSUPP. On RoCE the destination MAC is resolved from @dgid by ib_core's
 * neighbour resolution: by rmad_resolve_ah(), or at the first transmission.
 */
struct rmad_ah {
	u16 dlid;
	u8 src_path_bits;
	u8 has_grh;
	u8 sgid_index;
	u8 dgid[16];
	u8 hop_limit;
	u8 traffic_class;
	u8 sl;
	u32 flow_label;
};

/**
 * struct rmad_send_wc - a send's completion, as given to the send handler
 * @send_buf: the buffer, owned by the client again
 * @post_id: the post that completed (as rmad_post_send() returned it)
 * @context: the agent's context, as given to rmad_register_agent()
 * @status: enum ib_wc_status value
 * @vendor_err: vendor error of the transport completion (0 otherwise)
 * @buf_context: the buffer's context, as given to rmad_send_buf_set(): what
 *               rmad_send_buf_context() returns, without another lookup
 */
struct rmad_send_wc {
	struct rmad_send_buf *send_buf;
	u64 post_id;
	void *context;
	int status;
	u32 vendor_err;
	void *buf_context;
};

/**
 * struct rmad_recv_wc - a received MAD, as given to the receive handler
 * @mad: the MAD bytes
 * @context: the agent's context, as given to rmad_register_agent()
 * @mad_len: their number: a whole MAD, 256 bytes (a shorter datagram is no MAD;
 *           rmad drops it and counts it in debugfs rmad/ports); on a kernel-RMPP
 *           agent, a reassembled message: its header and all its data
 * @src_qp: source QP number (where a response goes: rmad_create_send_mad()'s @remote_qpn)
 * @slid: source LID
 * @pkey_index: P_Key index it arrived with (a response's @pkey_index)
 * @has_grh: the packet carried a GRH (always on RoCE)
 * @hop_limit: the GRH's hop limit as it arrived (on RoCEv2 over IPv4 the IP TTL)
 * @traffic_class: the GRH's traffic class (on RoCEv2 over IPv4 the IP TOS)
 * @recv_buf: the MAD's handle, or NULL when rmad had no memory for one
 * @sgid: source GID, when @has_grh
 * @flow_label: the GRH's flow label (0 over IPv4)
 *
 * The structure is valid during the handler. The MAD is too, unless the handler
 * keeps it with rmad_keep_recv_mad(): then @mad stays valid until
 * rmad_free_recv_mad(), even past the agent's unregistration.
 */
struct rmad_recv_wc {
	const void *mad;
	void *context;
	u32 mad_len;
	u32 src_qp;
	u16 slid;
	u16 pkey_index;
	u8 has_grh;
	u8 hop_limit;
	u8 traffic_class;
	struct rmad_recv_buf *recv_buf;
	u8 sgid[16];
	u32 flow_label;
};

/**
 * struct rmad_reg_req - class registration for unsolicited requests
 * @mgmt_class: management class
 * @mgmt_class_version: class version
 * @oui: OUI, for vendor-range-2 classes
 * @method_mask: bit m set: receive requests with method m (0..127)
 */
struct rmad_reg_req {
	u8 mgmt_class;
	u8 mgmt_class_version;
	u8 oui[3];
	u64 method_mask[2];
};

/**
 * typedef rmad_send_handler - a send completed (ib_mad_send_handler)
 * @agent: the agent that posted it
 * @wc: the completion: the buffer (the client's again), the post, the status
 *
 * Called exactly once per successful post, never with an rmad lock held, in
 * process context (it may sleep: that holds up only this agent's other
 * completions). Calling rmad_unregister_agent() on the handler's own agent
 * from it returns -EDEADLK.
 */
typedef void (*rmad_send_handler)(struct rmad_agent *agent, struct rmad_send_wc *wc);

/**
 * typedef rmad_recv_handler - a MAD arrived (ib_mad_recv_handler)
 * @agent: the agent it was routed to
 * @send_buf: the send it answers, or NULL for a request
 * @wc: the MAD and how it arrived; the MAD is freed when the handler returns
 *      unless the handler keeps it (rmad_keep_recv_mad())
 *
 * Process context; the same -EDEADLK rule applies.
 */
typedef void (*rmad_recv_handler)(struct rmad_agent *agent, struct rmad_send_buf *send_buf,
				  const struct rmad_recv_wc *wc);

/*
 * Registration flag: unregistering the agent does not wait for the send
 * buffers its client still owns. Those become inert: posting one fails with
 * -ESHUTDOWN, and rmad_free_send_mad() frees it, at any time, also after the
 * client's module is gone (rmad then frees it at its own unload).
 */
#define RMAD_DETACH_BUFFERS BIT(31)

/*
 * Retry rules beyond the C MAD layer's, opt-in (Documentation/behaviour.md
 * §2.11). As registration flags they are what the agent's new buffers start
 * with; rmad_send_buf_set_retry() sets them for one buffer. Without them a
 * send retries exactly as ib_post_send_mad()'s do.
 *
 * RMAD_RETRY_BACKOFF: after 4 waits of timeout_ms, each wait for a response
 * doubles, up to 60 000 ms (never shorter than timeout_ms); a modify starts
 * the count again.
 * RMAD_RETRY_ONE_SHOT: rmad_modify_mad() and rmad_modify_post() set the
 * current wait only (or, while the send is not yet waiting, the next one);
 * the waits after it are timeout_ms again.
 * Segmented (kernel-RMPP) sends keep their windows' rules.
 */
#define RMAD_RETRY_BACKOFF	BIT(30)
#define RMAD_RETRY_ONE_SHOT	BIT(29)

/* The longest deadline of rmad_send_buf_set_retry(), in milliseconds (5 minutes). */
#define RMAD_MAX_DEADLINE_MS	300000

/**
 * rmad_register_agent - register a MAD agent on a port of an RDMA device
 * @device: device name, e.g. "rxe0" (its current name: after a rename, the new one;
 *          agents registered before keep their port)
 * @port: port number
 * @qp_type: RMAD_QPT_SMI or RMAD_QPT_GSI
 * @reg_req: class registration, or NULL
 * @rmpp_version: 0 or 1. 1 alone is kernel RMPP: rmad reassembles what the agent
 *                receives and hands it up as one message, and segments what it sends
 *                from a buffer created with rmpp_active (ACK-driven windows, ACK
 *                timeouts, go-back-N retries). 1 with
 *                IB_MAD_USER_RMPP in @flags is user RMPP: every segment is a MAD of its
 *                own, and segments after the first of an answer reach @recv_handler with
 *                no send buffer
 * @send_handler: the send handler
 * @recv_handler: the receive handler, or NULL
 * @context: handed to both handlers (wc->context) and returned by rmad_agent_context()
 * @flags: registration flags (IB_MAD_USER_RMPP), and RMAD_DETACH_BUFFERS,
 *         RMAD_RETRY_BACKOFF and RMAD_RETRY_ONE_SHOT
 *
 * Process context. Handlers may run before this returns (a request that
 * arrives at once); they receive the agent's handle already.
 *
 * Return: the agent, or an ERR_PTR: -ENODEV for an unknown device or port,
 * -ENOSPC when no handle is left, the errors of ib_register_mad_agent otherwise.
 */
struct rmad_agent *rmad_register_agent(const char *device, u32 port, int qp_type,
				       const struct rmad_reg_req *reg_req, u8 rmpp_version,
				       rmad_send_handler send_handler,
				       rmad_recv_handler recv_handler, void *context, u32 flags);

/**
 * rmad_unregister_agent - flush every send, wait for the handlers, free the agent
 * @agent: the agent
 *
 * Process context; delivers the flushes it causes in the calling thread and
 * waits until every handler has returned and every send buffer of the agent
 * is freed (unless registered with RMAD_DETACH_BUFFERS). Afterwards @agent is
 * invalid forever. A handler of another agent may call it, also a receive
 * handler while @agent has sends in the device (where
 * ib_unregister_mad_agent() waits for itself: rmad polls send completions in
 * a thread of their own).
 *
 * Return: 0; -EDEADLK when called from one of @agent's own handlers (nothing
 * is done and nothing waits: rmad_unregister_agent_async() works there);
 * -EINVAL for a bad handle or an agent that is already being unregistered.
 */
int rmad_unregister_agent(struct rmad_agent *agent);

/**
 * rmad_unregister_agent_async - unregister later, in rmad's thread
 * @agent: the agent
 * @release: called once no handler of @agent runs or will run, or NULL
 * @arg: handed to @release
 * @owner: the module that contains @release (THIS_MODULE), or NULL
 *
 * For where rmad_unregister_agent() cannot wait, first of all one of @agent's
 * own handlers. Atomic-safe; never calls a handler; allocates nothing (what it
 * needs was made at registration), so it cannot fail for a valid agent that
 * nobody unregisters yet. Handlers of @agent may go on running until the
 * unregistration, which happens in rmad's own thread as
 * rmad_unregister_agent() does it, once the handler that asked has returned;
 * then @release(@arg) is called, and @owner, pinned from this call on, is
 * released: the client's module cannot be unloaded while @agent could still
 * call into it. If @owner is already being unloaded (its exit runs or has
 * run), it cannot be pinned: the unregistration is made all the same, and the
 * unload waits for it and for @release before the module's memory goes. After
 * this call succeeds, @agent is refused by rmad_unregister_agent() and this
 * function (-EINVAL); its other calls work until the unregistration, and the
 * handle is invalid once @release has returned.
 *
 * Whatever a client module leaves registered, rmad unregisters when that
 * module unloads (after its exit, before its memory goes), without calling
 * the agent's handlers again, and logs a warning; it also waits there for the
 * unregistrations in progress in other threads of the agents with code in
 * that module (a handler, or the release function of an asynchronous
 * unregistration), and for nothing else: no handler ever runs in a module
 * that is gone.
 *
 * Return: 0; -EINVAL for a bad handle or an agent already being unregistered.
 */
int rmad_unregister_agent_async(struct rmad_agent *agent, void (*release)(void *arg), void *arg,
				struct module *owner);

/**
 * rmad_agent_context - the context given at registration
 * @agent: the agent
 *
 * Atomic-safe.
 *
 * Return: the context; NULL for a bad handle.
 */
void *rmad_agent_context(struct rmad_agent *agent);

/**
 * rmad_agent_hi_tid - the agent's hi_tid (upper 32 bits of its TIDs)
 * @agent: the agent
 *
 * Atomic-safe.
 *
 * Return: the hi_tid; 0 for a bad handle.
 */
u32 rmad_agent_hi_tid(struct rmad_agent *agent);

/**
 * rmad_resolve_ah - prepare an address for sends from an agent's port
 * @agent: the agent
 * @ah: the destination
 *
 * On RoCE, resolves the MAC of @ah's destination GID through ib_core's
 * neighbour resolution and keeps it for the port (a minute, then it is
 * resolved again), the way rdma_create_ah() callers resolve first. Optional:
 * without it, the first transmission to the destination resolves it, in
 * rmad's transmit work, never in the post. Process context; may wait about a
 * second.
 *
 * Return: 0 (also on InfiniBand and for an address without a GRH, where there
 * is nothing to resolve); -EHOSTUNREACH when the destination cannot be
 * resolved; -EINVAL for a bad handle or a NULL @ah.
 */
int rmad_resolve_ah(struct rmad_agent *agent, const struct rmad_ah *ah);

/**
 * rmad_create_send_mad - allocate a send buffer (ib_create_send_mad)
 * @agent: the agent
 * @remote_qpn: destination QP number
 * @pkey_index: P_Key table index
 * @rmpp_active: the buffer carries an RMPP transfer: only on a kernel-RMPP
 *               agent; @data_len is cut into segments of (256 - @hdr_len) bytes,
 *               reached with rmad_get_rmpp_segment(), and posting sends them one
 *               window at a time, each with the headers of the buffer's MAD
 * @hdr_len: header bytes (at least 36, the RMPP header, with @rmpp_active)
 * @data_len: payload bytes
 * @gfp_mask: allocation flags, honoured as given: atomic-safe with GFP_ATOMIC;
 *             GFP_NOIO and GFP_NOFS hold for every allocation of the call
 * @base_version: MAD base version
 *
 * Return: the buffer, owned by the caller, or an ERR_PTR: -EINVAL for a bad
 * handle and for every length the C MAD layer leaves undefined, -ESHUTDOWN
 * while the agent is being unregistered, -ENOMEM (quietly, without an allocator
 * warning, even for huge lengths; with GFP_KERNEL an RMPP payload that fits in
 * 2^31 - 1 bytes is reclaimed for as C's segments are), -ENOSPC when no handle
 * is left.
 */
struct rmad_send_buf *rmad_create_send_mad(struct rmad_agent *agent, u32 remote_qpn,
					   u16 pkey_index, int rmpp_active, int hdr_len,
					   int data_len, gfp_t gfp_mask, u8 base_version);

/**
 * rmad_free_send_mad - free a buffer (ib_free_send_mad)
 * @send_buf: a buffer the caller owns
 *
 * Atomic-safe. Afterwards @send_buf is invalid forever.
 *
 * Return: 0; -EBUSY while the buffer is outstanding (nothing is freed);
 * -EINVAL for a bad handle.
 */
int rmad_free_send_mad(struct rmad_send_buf *send_buf);

/**
 * rmad_send_buf_mad - the MAD bytes of a buffer the caller owns
 * @send_buf: the buffer
 *
 * Atomic-safe. The bytes stay where they are until the buffer is freed; write
 * them only while you own the buffer.
 *
 * Return: the MAD; NULL while the buffer is outstanding or for a bad handle.
 */
void *rmad_send_buf_mad(struct rmad_send_buf *send_buf);

/**
 * rmad_send_buf_len - the length of a buffer's MAD
 * @send_buf: a buffer the caller owns
 *
 * Atomic-safe.
 *
 * Return: the bytes rmad_send_buf_mad() points to (the header and data lengths
 * given at creation, padded to the MAD size as ib_create_send_mad() does); 0
 * while the buffer is outstanding or for a bad handle.
 */
u32 rmad_send_buf_len(struct rmad_send_buf *send_buf);

/**
 * rmad_get_rmpp_segment - RMPP segment @seg_num of a buffer (ib_get_rmpp_segment)
 * @send_buf: a buffer the caller owns, created with rmpp_active
 * @seg_num: the segment, from 1 to the count rmad_send_buf_seg_count() returns
 *
 * Atomic-safe. The segment's bytes (seg_size of them) are the payload that
 * follows the headers of that segment's MAD: fill them before posting. They stay
 * where they are until the buffer is freed.
 *
 * Return: the segment; NULL out of range, for a buffer without segments, while
 * the buffer is outstanding, or for a bad handle.
 */
void *rmad_get_rmpp_segment(struct rmad_send_buf *send_buf, int seg_num);

/**
 * rmad_send_buf_seg_count - how a buffer's payload is segmented
 * @send_buf: a buffer the caller owns
 * @seg_size: where to store the payload bytes per segment, or NULL
 *
 * Atomic-safe.
 *
 * Return: the number of RMPP segments (0 for a buffer created without
 * rmpp_active); -EBUSY while outstanding; -EINVAL for a bad handle.
 */
int rmad_send_buf_seg_count(struct rmad_send_buf *send_buf, u32 *seg_size);

/**
 * rmad_send_buf_set - set where and how a buffer the caller owns is sent
 * @send_buf: the buffer
 * @ah: destination
 * @timeout_ms: response timeout in milliseconds (0: no response expected)
 * @retries: retransmissions on timeout
 * @context: returned by rmad_send_buf_context()
 *
 * Atomic-safe.
 *
 * Return: 0; -EBUSY while the buffer is outstanding; -EINVAL for a bad handle.
 */
int rmad_send_buf_set(struct rmad_send_buf *send_buf, const struct rmad_ah *ah,
		      int timeout_ms, int retries, void *context);

/**
 * rmad_send_buf_set_retry - set the retry rules of a buffer the caller owns
 * @send_buf: the buffer
 * @retry_flags: RMAD_RETRY_BACKOFF, RMAD_RETRY_ONE_SHOT, or 0 (replacing
 *               what the buffer had from its agent's registration)
 * @deadline_ms: the longest time each post of the buffer may take, from the
 *               post, in milliseconds; 0 for none; more than
 *               RMAD_MAX_DEADLINE_MS counts as that. No retry starts after it,
 *               and every wait for a response ends by it, so the send handler
 *               gets RMAD_WC_RESP_TIMEOUT_ERR no later than the deadline
 *               (plus its delivery) whatever the retries left. A modify
 *               extends it by its timeout.
 *
 * Atomic-safe. A send still held back by flow control at its deadline is not
 * transmitted: it completes with RMAD_WC_RESP_TIMEOUT_ERR then too. A modify of
 * a send that expects no response (timeout_ms 0) keeps its timeout, one-shot
 * or not, as in the C layer.
 *
 * Return: 0; -EINVAL for another flag or a bad handle; -EBUSY while the buffer
 * is outstanding. Posting a segmented (kernel-RMPP) send with a deadline fails
 * with -EINVAL.
 */
int rmad_send_buf_set_retry(struct rmad_send_buf *send_buf, u32 retry_flags, u32 deadline_ms);

/**
 * rmad_send_buf_context - the context set with rmad_send_buf_set()
 * @send_buf: the buffer
 *
 * Atomic-safe.
 *
 * Return: the context; NULL for a bad handle.
 */
void *rmad_send_buf_context(struct rmad_send_buf *send_buf);

/**
 * rmad_send_buf_retries - the retries of a buffer
 * @send_buf: a buffer the caller owns
 *
 * Before the buffer is posted, the retries set with rmad_send_buf_set(); in
 * and after its send handler, the retransmissions its last post performed.
 *
 * Atomic-safe.
 *
 * Return: the count; -EBUSY while outstanding; -EINVAL for a bad handle.
 */
int rmad_send_buf_retries(struct rmad_send_buf *send_buf);

/**
 * rmad_post_send_mad - post one send (ib_post_send_mad)
 * @send_buf: a buffer the caller owns
 * @bad_send_buf: set to @send_buf on failure, if not NULL
 *
 * Atomic-safe; never calls a handler. On success the buffer is outstanding
 * until its send handler returns it; on failure the caller still owns it.
 *
 * A buffer created with rmpp_active whose MAD still says RMPP DATA, ACTIVE, is a
 * segmented send: its handler runs once, after the last segment is ACKed (with
 * a timeout_ms of 0) or after the response (otherwise), with RMAD_WC_REM_ABORT_ERR
 * and the peer's RMPP status in vendor_err if the peer stops or aborts it, and
 * RMAD_WC_RESP_TIMEOUT_ERR when a window's retries run out; retries count per
 * window, and each window waits min(timeout_ms, 2000) ms for its ACK.
 *
 * Return: 0; -EBUSY if the buffer is already outstanding; -EINVAL for a bad
 * handle or bad contents (RMPP DATA, ACTIVE on a buffer created without
 * rmpp_active, too); the errors of ib_post_send_mad otherwise.
 */
int rmad_post_send_mad(struct rmad_send_buf *send_buf, struct rmad_send_buf **bad_send_buf);

/**
 * rmad_post_send - post one send and learn the id of this post
 * @send_buf: a buffer the caller owns
 * @post_id: set to the id of this post on success (may be NULL)
 *
 * Atomic-safe; as rmad_post_send_mad(). A buffer can be posted many times; the
 * pair (@send_buf, *@post_id) names this post alone, so rmad_modify_post() and
 * rmad_cancel_post() with it never touch a later post of the same buffer. The
 * send handler of this post may already have run when the call returns.
 *
 * Return: as rmad_post_send_mad().
 */
int rmad_post_send(struct rmad_send_buf *send_buf, u64 *post_id);

/**
 * rmad_modify_mad - change the response timeout of the buffer's current post (ib_modify_mad)
 * @send_buf: the buffer
 * @timeout_ms: new timeout from now, in milliseconds; 0 cancels
 *
 * Atomic-safe; never calls a handler.
 *
 * Return: 0; -EINVAL when the buffer is not outstanding, already cancelled or
 * its final status is decided, and for a bad handle.
 */
int rmad_modify_mad(struct rmad_send_buf *send_buf, int timeout_ms);

/**
 * rmad_cancel_mad - cancel the buffer's current post (ib_cancel_mad)
 * @send_buf: the buffer
 *
 * Atomic-safe. On success the send handler reports IB_WC_WR_FLUSH_ERR later,
 * from the completion workqueue.
 *
 * Return: as rmad_modify_mad(@send_buf, 0).
 */
int rmad_cancel_mad(struct rmad_send_buf *send_buf);

/**
 * rmad_modify_post - change the response timeout of one post
 * @send_buf: the buffer
 * @post_id: the post, as rmad_post_send() returned it
 * @timeout_ms: new timeout from now, in milliseconds; 0 cancels
 *
 * Atomic-safe.
 *
 * Return: as rmad_modify_mad(); -EINVAL too when @post_id is not the
 * buffer's outstanding post.
 */
int rmad_modify_post(struct rmad_send_buf *send_buf, u64 post_id, int timeout_ms);

/**
 * rmad_cancel_post - cancel one post
 * @send_buf: the buffer
 * @post_id: the post, as rmad_post_send() returned it
 *
 * Atomic-safe.
 *
 * Return: as rmad_modify_post(@send_buf, @post_id, 0).
 */
int rmad_cancel_post(struct rmad_send_buf *send_buf, u64 post_id);

/**
 * rmad_keep_recv_mad - keep a received MAD past its handler (ib_core's ownership of a recv wc)
 * @recv_buf: wc->recv_buf, from inside the receive handler
 *
 * Atomic-safe. Without it, rmad frees the MAD when the handler returns; with
 * it, the client owns it until rmad_free_recv_mad(), so it can answer later,
 * from another context. A kept MAD holds nothing of its agent: it may be kept
 * past rmad_unregister_agent() and freed afterwards.
 *
 * Return: 0; -EINVAL for a bad or stale handle or a MAD already kept.
 */
int rmad_keep_recv_mad(struct rmad_recv_buf *recv_buf);

/**
 * rmad_free_recv_mad - free a kept MAD (ib_free_recv_mad)
 * @recv_buf: a MAD kept with rmad_keep_recv_mad()
 *
 * Atomic-safe. Afterwards @recv_buf is invalid forever.
 *
 * Return: 0; -EINVAL for a bad or stale handle or a MAD that was not kept
 * (rmad frees those when their handler returns).
 */
int rmad_free_recv_mad(struct rmad_recv_buf *recv_buf);

/**
 * rmad_recv_buf_mad - the bytes of a received MAD
 * @recv_buf: a kept MAD, or wc->recv_buf during its handler
 * @len: set to their number, if not NULL
 *
 * Atomic-safe.
 *
 * Return: the MAD, valid until it is freed; NULL for a bad or stale handle.
 */
const void *rmad_recv_buf_mad(struct rmad_recv_buf *recv_buf, u32 *len);

/**
 * rmad_recv_buf_ah - the address that answers a received MAD (ib_create_ah_from_wc)
 * @agent: the agent that answers (on the device and port the MAD arrived at)
 * @recv_buf: a kept MAD, or wc->recv_buf during its handler
 * @ah: filled in as ib_init_ah_attr_from_wc() does: to the source LID with its
 *      SL, from the LID it was sent to; with a GRH, to its source GID, from this
 *      port's GID it was sent to (anywhere in the first 256 entries of the GID
 *      table), with its traffic class and flow label, hop limit 0xff (on RoCE
 *      the route's)
 *
 * Process context (reads the port's GID table; on RoCE, resolves the route as
 * ib_create_ah_from_wc() does, which may wait about a second).
 *
 * Return: 0; -EINVAL for a bad handle, a NULL @ah or a MAD that arrived at
 * another port or device; -ENOENT when the port no longer has the GID it was sent to.
 */
int rmad_recv_buf_ah(struct rmad_agent *agent, struct rmad_recv_buf *recv_buf,
		     struct rmad_ah *ah);

/**
 * rmad_port_gid - read a GID of a port
 * @device: device name (its current name)
 * @port: port number
 * @index: GID table index
 * @gid: 16 bytes to fill in
 *
 * Return: 0; -ENODEV for an unknown (or removed) device or port; -EINVAL for
 * a bad argument or an empty GID entry.
 */
int rmad_port_gid(const char *device, u32 port, int index, u8 *gid);

/**
 * rmad_response_mad - whether a MAD is a response (ib_response_mad)
 * @mad: the MAD
 * @len: its length
 *
 * Return: 1 or 0; -EINVAL for NULL or a buffer shorter than the MAD header.
 */
int rmad_response_mad(const void *mad, size_t len);

/**
 * rmad_get_mad_data_offset - where a class's data starts (ib_get_mad_data_offset)
 * @mgmt_class: management class
 *
 * Return: the offset in bytes.
 */
int rmad_get_mad_data_offset(u8 mgmt_class);

/**
 * rmad_is_mad_class_rmpp - whether a class uses RMPP (ib_is_mad_class_rmpp)
 * @mgmt_class: management class
 *
 * Return: 1 or 0.
 */
int rmad_is_mad_class_rmpp(u8 mgmt_class);

#endif /* RMAD_H */
