/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What src/capi/exports.c offers to the Rust side of the C API besides the
 * exports: try_module_get() and module_put(), which are inline in C, for
 * src/capi/unregister.rs; the module notifier and within_module(), for
 * src/capi/unload.rs; and what the notifier calls in Rust.
 */
#ifndef _RMAD_CAPI_EXPORTS_H
#define _RMAD_CAPI_EXPORTS_H

#include <linux/types.h>

struct module;

bool rmad_capi_module_get(struct module *owner);
void rmad_capi_module_put(struct module *owner);
bool rmad_capi_within_module(unsigned long addr, const struct module *mod);
int rmad_capi_watch_modules(void);
void rmad_capi_unwatch_modules(void);

/* Implemented in Rust (src/capi/unload.rs). */
int rmad_capi_module_going(const struct module *mod);

#endif
