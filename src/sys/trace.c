// SPDX-License-Identifier: GPL-2.0
/*
 * Defines rmad's trace events (src/sys/rmad_trace.h) and fires them for Rust,
 * which cannot expand the tracepoint macros.
 */

#include <linux/build_bug.h>
#include <linux/stddef.h>

#define CREATE_TRACE_POINTS
#include "rmad_trace.h"

/* src/sys/trace.rs asserts the same layout. */
static_assert(sizeof(struct rmad_trace_info) == 40);
static_assert(offsetof(struct rmad_trace_info, tid) == 8);
static_assert(offsetof(struct rmad_trace_info, retries) == 24);
static_assert(offsetof(struct rmad_trace_info, status) == 30);
static_assert(offsetof(struct rmad_trace_info, method) == 34);

/*
 * How many of rmad's events have a probe attached (ftrace, perf or BPF): the
 * tracepoint core calls rmad_trace_reg() when an event gets its first probe and
 * rmad_trace_unreg() when it loses its last. While it is 0, Rust skips the call
 * to rmad_trace_enabled() at every trace site of a send (four or five a send).
 */
int rmad_trace_probes;

int rmad_trace_reg(void)
{
	WRITE_ONCE(rmad_trace_probes, READ_ONCE(rmad_trace_probes) + 1);
	return 0;
}

void rmad_trace_unreg(void)
{
	WRITE_ONCE(rmad_trace_probes, READ_ONCE(rmad_trace_probes) - 1);
}

/* Whether event @ev is enabled: Rust fills in the fields only then. */
bool rmad_trace_enabled(u32 ev)
{
	switch (ev) {
	case RMAD_TRACE_POST:
		return trace_rmad_post_enabled();
	case RMAD_TRACE_SEND_TO_DEVICE:
		return trace_rmad_send_to_device_enabled();
	case RMAD_TRACE_SEND_COMPLETION:
		return trace_rmad_send_completion_enabled();
	case RMAD_TRACE_RETRY:
		return trace_rmad_retry_enabled();
	case RMAD_TRACE_TIMEOUT:
		return trace_rmad_timeout_enabled();
	case RMAD_TRACE_CANCEL:
		return trace_rmad_cancel_enabled();
	case RMAD_TRACE_MODIFY:
		return trace_rmad_modify_enabled();
	case RMAD_TRACE_RESPONSE_MATCHED:
		return trace_rmad_response_matched_enabled();
	case RMAD_TRACE_RESPONSE_DROPPED:
		return trace_rmad_response_dropped_enabled();
	case RMAD_TRACE_SEND_HANDLER:
		return trace_rmad_send_handler_enabled();
	case RMAD_TRACE_REQUEST_DROPPED:
		return trace_rmad_request_dropped_enabled();
	default:
		return false;
	}
}

/* Fires event @ev with the fields @i. */
void rmad_trace_event(u32 ev, const struct rmad_trace_info *i)
{
	switch (ev) {
	case RMAD_TRACE_POST:
		trace_rmad_post(i);
		break;
	case RMAD_TRACE_SEND_TO_DEVICE:
		trace_rmad_send_to_device(i);
		break;
	case RMAD_TRACE_SEND_COMPLETION:
		trace_rmad_send_completion(i);
		break;
	case RMAD_TRACE_RETRY:
		trace_rmad_retry(i);
		break;
	case RMAD_TRACE_TIMEOUT:
		trace_rmad_timeout(i);
		break;
	case RMAD_TRACE_CANCEL:
		trace_rmad_cancel(i);
		break;
	case RMAD_TRACE_MODIFY:
		trace_rmad_modify(i);
		break;
	case RMAD_TRACE_RESPONSE_MATCHED:
		trace_rmad_response_matched(i);
		break;
	case RMAD_TRACE_RESPONSE_DROPPED:
		trace_rmad_response_dropped(i);
		break;
	case RMAD_TRACE_SEND_HANDLER:
		trace_rmad_send_handler(i);
		break;
	case RMAD_TRACE_REQUEST_DROPPED:
		trace_rmad_request_dropped(i);
		break;
	default:
		break;
	}
}
