/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What every rmad trace event records, filled in by Rust (src/sys/trace.rs
 * mirrors this structure and asserts its size and offsets).
 */
#ifndef _RMAD_TRACE_INFO_H
#define _RMAD_TRACE_INFO_H

#include <linux/types.h>

/* The events, in the order of enum Ev in src/sys/trace.rs. */
enum rmad_trace_ev {
	RMAD_TRACE_POST,
	RMAD_TRACE_SEND_TO_DEVICE,
	RMAD_TRACE_SEND_COMPLETION,
	RMAD_TRACE_RETRY,
	RMAD_TRACE_TIMEOUT,
	RMAD_TRACE_CANCEL,
	RMAD_TRACE_MODIFY,
	RMAD_TRACE_RESPONSE_MATCHED,
	RMAD_TRACE_RESPONSE_DROPPED,
	RMAD_TRACE_SEND_HANDLER,
	RMAD_TRACE_REQUEST_DROPPED,
	RMAD_TRACE_NR,
};

/**
 * struct rmad_trace_info - the fields of an rmad trace event
 * @dev: name of the device the agent sends through
 * @tid: transaction ID of the MAD
 * @qp_num: the agent's QP (0 or 1); for a dropped request, its source QP
 * @timeout_ms: the send's response timeout
 * @retries: retransmissions performed so far
 * @attr_id: attribute ID of the MAD
 * @status: completion status (sends) or MAD status (received responses)
 * @port: port number
 * @mgmt_class: management class of the MAD
 * @method: method of the MAD
 */
struct rmad_trace_info {
	const char *dev;
	u64 tid;
	u32 qp_num;
	u32 timeout_ms;
	u32 retries;
	u16 attr_id;
	u16 status;
	u8 port;
	u8 mgmt_class;
	u8 method;
};

/* src/sys/trace.c: for Rust (src/sys/trace.rs). */
extern int rmad_trace_probes;
int rmad_trace_reg(void);
void rmad_trace_unreg(void);
bool rmad_trace_enabled(u32 ev);
void rmad_trace_event(u32 ev, const struct rmad_trace_info *i);

#endif
