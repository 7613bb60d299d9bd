// SPDX-License-Identifier: GPL-2.0
/*
 * Exports rmad's C API (implemented in Rust, src/capi.rs and src/capi/) to
 * other modules. Including the header here makes the compiler check that the
 * prototypes other modules see are those of the exported symbols, and the
 * assertions below check the structure layouts that src/capi/types.rs assumes
 * (it asserts the same numbers on its side). Also the module notifier of
 * src/capi/unload.rs, and the helpers Rust cannot call (inline in C).
 */

#include <linux/build_bug.h>
#include <linux/export.h>
#include <linux/module.h>
#include <linux/notifier.h>
#include <linux/printk.h>
#include <linux/stddef.h>

#include <rdma/ib_mad.h>
#include <rdma/ib_verbs.h>

#include "../../include/rmad.h"
#include "exports.h"

/* rmad.h's constants are ib_core's. */
static_assert((int)RMAD_QPT_SMI == (int)IB_QPT_SMI && (int)RMAD_QPT_GSI == (int)IB_QPT_GSI);
static_assert(RMAD_WC_SUCCESS == IB_WC_SUCCESS && RMAD_WC_LOC_QP_OP_ERR == IB_WC_LOC_QP_OP_ERR);
static_assert(RMAD_WC_WR_FLUSH_ERR == IB_WC_WR_FLUSH_ERR);
static_assert(RMAD_WC_REM_ABORT_ERR == IB_WC_REM_ABORT_ERR);
static_assert(RMAD_WC_RESP_TIMEOUT_ERR == IB_WC_RESP_TIMEOUT_ERR);
static_assert(RMAD_WC_GENERAL_ERR == IB_WC_GENERAL_ERR);
static_assert(RMAD_MGMT_CLASS_SUBN_LID_ROUTED == IB_MGMT_CLASS_SUBN_LID_ROUTED);
static_assert(RMAD_MGMT_CLASS_SUBN_ADM == IB_MGMT_CLASS_SUBN_ADM);
static_assert(RMAD_MGMT_CLASS_PERF_MGMT == IB_MGMT_CLASS_PERF_MGMT);
static_assert(RMAD_MGMT_CLASS_CM == IB_MGMT_CLASS_CM);
static_assert(RMAD_MGMT_CLASS_VENDOR_RANGE2_START == IB_MGMT_CLASS_VENDOR_RANGE2_START);
static_assert(RMAD_MGMT_METHOD_GET == IB_MGMT_METHOD_GET);
static_assert(RMAD_MGMT_METHOD_SET == IB_MGMT_METHOD_SET);
static_assert(RMAD_MGMT_METHOD_SEND == IB_MGMT_METHOD_SEND);
static_assert(RMAD_MGMT_METHOD_GET_RESP == IB_MGMT_METHOD_GET_RESP);
static_assert(RMAD_MGMT_METHOD_RESP == IB_MGMT_METHOD_RESP);
static_assert(RMAD_MGMT_MAD_STATUS_UNSUPPORTED_METHOD_ATTRIB ==
	      IB_MGMT_MAD_STATUS_UNSUPPORTED_METHOD_ATTRIB);
static_assert(RMAD_MGMT_MAD_HDR == IB_MGMT_MAD_HDR && RMAD_MGMT_MAD_DATA == IB_MGMT_MAD_DATA);
/* A version is two small numbers (include/rmad.h, RMAD_API_VERSION). */
static_assert(RMAD_API_VERSION_MAJOR > 0 && RMAD_API_VERSION_MINOR < 65536);
/* src/capi.rs has the same value; it must not collide with ib_core's flags. */
static_assert(RMAD_DETACH_BUFFERS == 1UL << 31 && !(RMAD_DETACH_BUFFERS & IB_MAD_USER_RMPP));
static_assert(RMAD_RETRY_BACKOFF == 1UL << 30 && !(RMAD_RETRY_BACKOFF & IB_MAD_USER_RMPP));
static_assert(RMAD_RETRY_ONE_SHOT == 1UL << 29 && !(RMAD_RETRY_ONE_SHOT & IB_MAD_USER_RMPP));

static_assert(sizeof(struct rmad_ah) == 28 && offsetof(struct rmad_ah, dgid) == 5);
static_assert(offsetof(struct rmad_ah, hop_limit) == 21 && offsetof(struct rmad_ah, sl) == 23);
static_assert(offsetof(struct rmad_ah, flow_label) == 24);
static_assert(sizeof(struct rmad_send_wc) == 40);
static_assert(offsetof(struct rmad_send_wc, post_id) == 8);
static_assert(offsetof(struct rmad_send_wc, context) == 16);
static_assert(offsetof(struct rmad_send_wc, status) == 24);
static_assert(offsetof(struct rmad_send_wc, vendor_err) == 28);
static_assert(offsetof(struct rmad_send_wc, buf_context) == 32);
static_assert(sizeof(struct rmad_recv_wc) == 64);
static_assert(offsetof(struct rmad_recv_wc, context) == 8);
static_assert(offsetof(struct rmad_recv_wc, mad_len) == 16);
static_assert(offsetof(struct rmad_recv_wc, src_qp) == 20);
static_assert(offsetof(struct rmad_recv_wc, slid) == 24);
static_assert(offsetof(struct rmad_recv_wc, pkey_index) == 26);
static_assert(offsetof(struct rmad_recv_wc, has_grh) == 28);
static_assert(offsetof(struct rmad_recv_wc, hop_limit) == 29);
static_assert(offsetof(struct rmad_recv_wc, traffic_class) == 30);
static_assert(offsetof(struct rmad_recv_wc, flow_label) == 56);
static_assert(offsetof(struct rmad_recv_wc, recv_buf) == 32);
static_assert(offsetof(struct rmad_recv_wc, sgid) == 40);
static_assert(sizeof(struct rmad_reg_req) == 24 && offsetof(struct rmad_reg_req, method_mask) == 8);

EXPORT_SYMBOL_GPL(rmad_register_agent);
EXPORT_SYMBOL_GPL(rmad_unregister_agent);
EXPORT_SYMBOL_GPL(rmad_unregister_agent_async);

bool rmad_capi_module_get(struct module *owner)
{
	return try_module_get(owner);
}

void rmad_capi_module_put(struct module *owner)
{
	module_put(owner);
}

bool rmad_capi_within_module(unsigned long addr, const struct module *mod)
{
	return within_module(addr, mod);
}

/* A module is going: its exit returned (or its init failed), its memory is still there. */
static int rmad_capi_module_event(struct notifier_block *nb, unsigned long action, void *data)
{
	struct module *mod = data;
	int ended;

	if (action != MODULE_STATE_GOING)
		return NOTIFY_DONE;
	ended = rmad_capi_module_going(mod);
	if (ended > 0)
		pr_warn("rmad: module %s left %d agents registered at its unload: unregistered them\n",
			mod->name, ended);
	return NOTIFY_OK;
}

static struct notifier_block rmad_capi_module_nb = {
	.notifier_call = rmad_capi_module_event,
};

int rmad_capi_watch_modules(void)
{
	return register_module_notifier(&rmad_capi_module_nb);
}

void rmad_capi_unwatch_modules(void)
{
	unregister_module_notifier(&rmad_capi_module_nb);
}
EXPORT_SYMBOL_GPL(rmad_agent_context);
EXPORT_SYMBOL_GPL(rmad_agent_hi_tid);
EXPORT_SYMBOL_GPL(rmad_resolve_ah);
EXPORT_SYMBOL_GPL(rmad_create_send_mad);
EXPORT_SYMBOL_GPL(rmad_free_send_mad);
EXPORT_SYMBOL_GPL(rmad_send_buf_mad);
EXPORT_SYMBOL_GPL(rmad_send_buf_len);
EXPORT_SYMBOL_GPL(rmad_get_rmpp_segment);
EXPORT_SYMBOL_GPL(rmad_send_buf_seg_count);
EXPORT_SYMBOL_GPL(rmad_send_buf_set);
EXPORT_SYMBOL_GPL(rmad_send_buf_set_retry);
EXPORT_SYMBOL_GPL(rmad_send_buf_context);
EXPORT_SYMBOL_GPL(rmad_send_buf_retries);
EXPORT_SYMBOL_GPL(rmad_post_send_mad);
EXPORT_SYMBOL_GPL(rmad_post_send);
EXPORT_SYMBOL_GPL(rmad_modify_mad);
EXPORT_SYMBOL_GPL(rmad_cancel_mad);
EXPORT_SYMBOL_GPL(rmad_modify_post);
EXPORT_SYMBOL_GPL(rmad_cancel_post);
EXPORT_SYMBOL_GPL(rmad_keep_recv_mad);
EXPORT_SYMBOL_GPL(rmad_free_recv_mad);
EXPORT_SYMBOL_GPL(rmad_recv_buf_mad);
EXPORT_SYMBOL_GPL(rmad_recv_buf_ah);
EXPORT_SYMBOL_GPL(rmad_port_gid);
EXPORT_SYMBOL_GPL(rmad_response_mad);
EXPORT_SYMBOL_GPL(rmad_get_mad_data_offset);
EXPORT_SYMBOL_GPL(rmad_is_mad_class_rmpp);
