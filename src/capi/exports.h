/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What src/capi/exports.c offers to the Rust side of the C API besides the
 * exports: try_module_get() and module_put(), which are inline in C, for
 * src/capi/unregister.rs.
 */
#ifndef _RMAD_CAPI_EXPORTS_H
#define _RMAD_CAPI_EXPORTS_H

#include <linux/types.h>

struct module;

bool rmad_capi_module_get(struct module *owner);
void rmad_capi_module_put(struct module *owner);

#endif
