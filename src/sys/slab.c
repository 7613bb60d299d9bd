// SPDX-License-Identifier: GPL-2.0
/*
 * The slab cache of send records: kmem_cache_create and kmem_cache_alloc are
 * macros in C, which Rust cannot call; one function each, no logic.
 */

#include <linux/slab.h>

#include "slab.h"

/* The cache every send record comes from, from module init to module exit. */
static struct kmem_cache *rmad_send_cache;

/*
 * Creates the cache of @size-byte objects aligned to @align. Not merged with
 * another cache: /proc/slabinfo shows rmad's records, and a record left at
 * module exit is reported by name.
 */
int rmad_slab_init(unsigned int size, unsigned int align)
{
	rmad_send_cache = kmem_cache_create("rmad_send", size, align, SLAB_NO_MERGE, NULL);
	return rmad_send_cache ? 0 : -ENOMEM;
}

/* Destroys the cache; every object of it has been freed. */
void rmad_slab_exit(void)
{
	kmem_cache_destroy(rmad_send_cache);
	rmad_send_cache = NULL;
}

/* One object, or NULL. */
void *rmad_slab_alloc(gfp_t gfp)
{
	if (!rmad_send_cache)
		return NULL;
	return kmem_cache_alloc(rmad_send_cache, gfp);
}

/* Frees an object of the cache; any context but NMI. */
void rmad_slab_free(void *obj)
{
	kmem_cache_free(rmad_send_cache, obj);
}

/* The cache itself (the test flavour counts its allocations). */
struct kmem_cache *rmad_slab_cache(void)
{
	return rmad_send_cache;
}
