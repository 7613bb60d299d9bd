// SPDX-License-Identifier: GPL-2.0
/*
 * Exports rmad's C API (implemented in Rust, src/capi.rs) to other modules.
 * Including the header here makes the compiler check that the prototypes
 * other modules see are those of the exported symbols.
 */

#include <linux/export.h>
#include <linux/module.h>

#include "../include/rmad.h"

EXPORT_SYMBOL_GPL(rmad_register_agent);
EXPORT_SYMBOL_GPL(rmad_unregister_agent);
EXPORT_SYMBOL_GPL(rmad_agent_context);
EXPORT_SYMBOL_GPL(rmad_agent_hi_tid);
EXPORT_SYMBOL_GPL(rmad_create_send_mad);
EXPORT_SYMBOL_GPL(rmad_free_send_mad);
EXPORT_SYMBOL_GPL(rmad_send_buf_mad);
EXPORT_SYMBOL_GPL(rmad_send_buf_set);
EXPORT_SYMBOL_GPL(rmad_send_buf_context);
EXPORT_SYMBOL_GPL(rmad_send_buf_retries);
EXPORT_SYMBOL_GPL(rmad_post_send_mad);
EXPORT_SYMBOL_GPL(rmad_modify_mad);
EXPORT_SYMBOL_GPL(rmad_cancel_mad);
EXPORT_SYMBOL_GPL(rmad_port_gid);
EXPORT_SYMBOL_GPL(rmad_response_mad);
EXPORT_SYMBOL_GPL(rmad_get_mad_data_offset);
EXPORT_SYMBOL_GPL(rmad_is_mad_class_rmpp);
