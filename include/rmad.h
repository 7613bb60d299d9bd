/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rmad: InfiniBand MAD agents for other kernel modules.
 *
 * The C API of the rmad module, mirroring the C MAD layer (ib_register_mad_agent,
 * ib_create_send_mad, ib_post_send_mad, ib_modify_mad, ib_cancel_mad,
 * ib_free_send_mad, ib_unregister_mad_agent) on rmad's agents. Every entry
 * point validates its handles: NULL, stale (freed) and foreign pointers get
 * -EINVAL (or NULL/ERR_PTR(-EINVAL)) instead of a crash.
 *
 * Build a client module against rmad's Module.symvers (KBUILD_EXTRA_SYMBOLS).
 */
#ifndef RMAD_H
#define RMAD_H

#include <linux/types.h>

struct rmad_agent;
struct rmad_send_buf;

/* Which special QP an agent uses. */
enum rmad_qp_type {
	RMAD_QPT_SMI = 0,
	RMAD_QPT_GSI = 1,
};

/**
 * struct rmad_ah - where a send goes (an address handle's attributes)
 * @dlid: destination LID
 * @src_path_bits: source path bits
 * @has_grh: the packet carries a GRH (always on RoCE)
 * @sgid_index: index of the local source GID
 * @dgid: destination GID
 */
struct rmad_ah {
	u16 dlid;
	u8 src_path_bits;
	u8 has_grh;
	u8 sgid_index;
	u8 dgid[16];
};

/**
 * struct rmad_send_wc - a send's completion, as given to the send handler
 * @send_buf: the buffer, owned by the client again
 * @status: enum ib_wc_status value
 * @vendor_err: vendor error of the transport completion (0 otherwise)
 */
struct rmad_send_wc {
	struct rmad_send_buf *send_buf;
	int status;
	u32 vendor_err;
};

/**
 * struct rmad_recv_wc - a received MAD, valid only during the receive handler
 * @mad: the MAD bytes
 * @mad_len: their number
 * @src_qp: source QP number
 * @slid: source LID
 */
struct rmad_recv_wc {
	const void *mad;
	u32 mad_len;
	u32 src_qp;
	u16 slid;
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

/* Called exactly once per successful post, never with an rmad lock held. */
typedef void (*rmad_send_handler)(struct rmad_agent *agent, struct rmad_send_wc *wc);
/* A response matched to @send_buf, or a request (@send_buf NULL). */
typedef void (*rmad_recv_handler)(struct rmad_agent *agent, struct rmad_send_buf *send_buf,
				  const struct rmad_recv_wc *wc);

/**
 * rmad_register_agent - register a MAD agent on a port of an RDMA device
 * @device: device name, e.g. "rxe0"
 * @port: port number
 * @qp_type: RMAD_QPT_SMI or RMAD_QPT_GSI
 * @reg_req: class registration, or NULL
 * @rmpp_version: 0 or 1
 * @send_handler: the send handler
 * @recv_handler: the receive handler, or NULL
 * @context: returned by rmad_agent_context()
 * @flags: registration flags (IB_MAD_USER_RMPP)
 *
 * Process context. Returns the agent or an ERR_PTR: -ENODEV for an unknown
 * device or port, the errors of ib_register_mad_agent otherwise.
 */
struct rmad_agent *rmad_register_agent(const char *device, u32 port, int qp_type,
				       const struct rmad_reg_req *reg_req, u8 rmpp_version,
				       rmad_send_handler send_handler,
				       rmad_recv_handler recv_handler, void *context, u32 flags);

/**
 * rmad_unregister_agent - flush every send, wait for the handlers, free the agent
 * @agent: the agent
 *
 * Process context; waits until every send buffer of the agent is freed. Never
 * call it from the agent's own handler (-EDEADLK). -EINVAL for a bad handle.
 */
int rmad_unregister_agent(struct rmad_agent *agent);

/* The @context given at registration; NULL for a bad handle. */
void *rmad_agent_context(struct rmad_agent *agent);

/* The agent's hi_tid (upper 32 bits of its TIDs); 0 for a bad handle. */
u32 rmad_agent_hi_tid(struct rmad_agent *agent);

/**
 * rmad_create_send_mad - allocate a send buffer (ib_create_send_mad)
 *
 * Returns the buffer or an ERR_PTR (-EINVAL for every length the C MAD layer
 * leaves undefined, -ENOMEM). Atomic-safe with GFP_ATOMIC.
 */
struct rmad_send_buf *rmad_create_send_mad(struct rmad_agent *agent, u32 remote_qpn,
					   u16 pkey_index, int rmpp_active, int hdr_len,
					   int data_len, gfp_t gfp_mask, u8 base_version);

/* Frees a buffer that is not outstanding (ib_free_send_mad); -EBUSY while it is. */
int rmad_free_send_mad(struct rmad_send_buf *send_buf);

/* The MAD bytes of a buffer the client owns; NULL while outstanding or for a bad handle. */
void *rmad_send_buf_mad(struct rmad_send_buf *send_buf);

/* Sets destination, timeout, retries and context of a buffer the client owns. */
int rmad_send_buf_set(struct rmad_send_buf *send_buf, const struct rmad_ah *ah,
		      int timeout_ms, int retries, void *context);

/* The context set with rmad_send_buf_set(); NULL for a bad handle. */
void *rmad_send_buf_context(struct rmad_send_buf *send_buf);

/* Retransmissions performed (valid in and after the send handler); -EINVAL for a bad handle. */
int rmad_send_buf_retries(struct rmad_send_buf *send_buf);

/**
 * rmad_post_send_mad - post one send (ib_post_send_mad)
 * @send_buf: the buffer
 * @bad_send_buf: set to @send_buf on failure, if not NULL
 *
 * Atomic-safe; never calls a handler. -EBUSY if the buffer is already outstanding.
 */
int rmad_post_send_mad(struct rmad_send_buf *send_buf, struct rmad_send_buf **bad_send_buf);

/* ib_modify_mad: 0 or -EINVAL (not outstanding, already cancelled, bad handle). */
int rmad_modify_mad(struct rmad_send_buf *send_buf, int timeout_ms);

/* ib_cancel_mad, returning what ib_modify_mad(send_buf, 0) returns. */
int rmad_cancel_mad(struct rmad_send_buf *send_buf);

/* GID @index of @port of @device into @gid (16 bytes); -ENODEV, -EINVAL. */
int rmad_port_gid(const char *device, u32 port, int index, u8 *gid);

/* Wire helpers (ib_response_mad, ib_get_mad_data_offset, ib_is_mad_class_rmpp). */
int rmad_response_mad(const void *mad, size_t len);
int rmad_get_mad_data_offset(u8 mgmt_class);
int rmad_is_mad_class_rmpp(u8 mgmt_class);

#endif /* RMAD_H */
