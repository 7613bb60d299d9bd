/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The slab cache of send records (src/sys/slab.c), for its Rust side
 * (src/sys/slab.rs) and the test flavour's allocation counts.
 */

#ifndef RMAD_SYS_SLAB_H
#define RMAD_SYS_SLAB_H

#include <linux/types.h>

struct kmem_cache;

int rmad_slab_init(unsigned int size, unsigned int align);
void rmad_slab_exit(void);
void *rmad_slab_alloc(gfp_t gfp);
void rmad_slab_free(void *obj);
struct kmem_cache *rmad_slab_cache(void);

#endif /* RMAD_SYS_SLAB_H */
