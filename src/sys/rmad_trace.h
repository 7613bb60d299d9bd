/* SPDX-License-Identifier: GPL-2.0 */
/*
 * rmad's trace events (system "rmad"), with the fields of ib_core's ib_mad
 * events: device, port, QP, class, method, attribute, TID, status, timeout
 * and retries. Fired from Rust through src/sys/trace.c.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM rmad

#if !defined(_RMAD_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _RMAD_TRACE_H

#include <linux/tracepoint.h>

#include "rmad_trace_info.h"

DECLARE_EVENT_CLASS(rmad_mad_template,
	TP_PROTO(const struct rmad_trace_info *i),
	TP_ARGS(i),

	TP_STRUCT__entry(
		__string(dev, i->dev)
		__field(u64, tid)
		__field(u32, qp_num)
		__field(u32, timeout_ms)
		__field(u32, retries)
		__field(u16, attr_id)
		__field(u16, status)
		__field(u8, port)
		__field(u8, mgmt_class)
		__field(u8, method)
	),

	TP_fast_assign(
		__assign_str(dev);
		__entry->tid = i->tid;
		__entry->qp_num = i->qp_num;
		__entry->timeout_ms = i->timeout_ms;
		__entry->retries = i->retries;
		__entry->attr_id = i->attr_id;
		__entry->status = i->status;
		__entry->port = i->port;
		__entry->mgmt_class = i->mgmt_class;
		__entry->method = i->method;
	),

	TP_printk("dev=%s port=%u qp=%u class=0x%02x method=0x%02x attr=0x%04x tid=0x%016llx status=%u timeout=%u retries=%u",
		  __get_str(dev), __entry->port, __entry->qp_num, __entry->mgmt_class,
		  __entry->method, __entry->attr_id, __entry->tid, __entry->status,
		  __entry->timeout_ms, __entry->retries)
);

/* Each event counts itself in rmad_trace_probes while it has a probe (trace.c). */
#define RMAD_EVENT(name)						\
	DEFINE_EVENT_FN(rmad_mad_template, name,			\
		TP_PROTO(const struct rmad_trace_info *i), TP_ARGS(i),	\
		rmad_trace_reg, rmad_trace_unreg)

/* A post succeeded. */
RMAD_EVENT(rmad_post);
/* A transmission (first or retry) was handed to the device. */
RMAD_EVENT(rmad_send_to_device);
/* The transport reported a transmission's completion (status: its wc status). */
RMAD_EVENT(rmad_send_completion);
/* A send's timeout expired and it is sent again. */
RMAD_EVENT(rmad_retry);
/* A send's timeout expired with no retry left: RESP_TIMEOUT_ERR. */
RMAD_EVENT(rmad_timeout);
/* A send was cancelled (ib_cancel_mad, or modify to 0). */
RMAD_EVENT(rmad_cancel);
/* A send's timeout was changed (timeout: the new one). */
RMAD_EVENT(rmad_modify);
/* A received response was matched to a send (status: the MAD's status). */
RMAD_EVENT(rmad_response_matched);
/* A received response matched no send, or one that takes no response. */
RMAD_EVENT(rmad_response_dropped);
/* The send handler is called (status: the send's final status). */
RMAD_EVENT(rmad_send_handler);
/*
 * A request arrived at rmad's private QP, where only responses belong (qp: its
 * source QP), and was dropped.
 */
RMAD_EVENT(rmad_request_dropped);

#endif /* _RMAD_TRACE_H */

/* Out of the kernel tree: the header is found through the module's include path. */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE rmad_trace
#include <trace/define_trace.h>
