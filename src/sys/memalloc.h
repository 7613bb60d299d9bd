/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Allocation scopes for the C API's gfp_t arguments (src/sys/memalloc.c), for
 * their Rust side (src/sys/memalloc.rs).
 */

#ifndef RMAD_SYS_MEMALLOC_H
#define RMAD_SYS_MEMALLOC_H

#include <linux/types.h>

/* The scopes rmad_memalloc_save() enters. */
#define RMAD_SCOPE_NONE 0
#define RMAD_SCOPE_NOIO 1
#define RMAD_SCOPE_NOFS 2

unsigned int rmad_memalloc_save(gfp_t gfp, int *kind);
void rmad_memalloc_restore(int kind, unsigned int flags);
gfp_t rmad_memalloc_effective(gfp_t gfp);

#endif /* RMAD_SYS_MEMALLOC_H */
