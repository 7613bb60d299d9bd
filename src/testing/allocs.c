// SPDX-License-Identifier: GPL-2.0
/*
 * Counts the kmalloc allocations and kfree frees one task makes, and those of
 * rmad's own slab cache (test flavour only): probes on the kmem tracepoints
 * kmalloc, kfree, kmem_cache_alloc and kmem_cache_free, which
 * mm/slab_common.c exports to modules. Rust cannot register a tracepoint
 * probe (the register_trace_* functions are generated inline by the
 * tracepoint macros), so this file does, for src/testing/allocs.rs.
 *
 * Every allocation of Rust code goes through kmalloc (the kernel crate's
 * allocators call krealloc) except a send's record, which comes from rmad's
 * cache (src/sys/slab.c); the other caches are left out on purpose: on the
 * test kernel kmemleak allocates its own record of every allocation from a
 * cache of its own, which would count twice what the code under test asks
 * for.
 *
 * One count at a time: the suite that uses it runs its cases one after the
 * other.
 */

#include <linux/atomic.h>
#include <linux/errno.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/tracepoint.h>
#include <trace/events/kmem.h>

#include "../sys/slab.h"

/* What one task allocated and freed between rmad_test_allocs_start() and _stop(). */
struct rmad_test_allocs {
	/* The task counted. */
	struct task_struct *task;
	/*
	 * Set once every probe is registered, cleared before the first is
	 * unregistered: registering a probe allocates, and that is not the
	 * counted code's.
	 */
	int on;
	/* Allocations. */
	atomic_long_t allocs;
	/* Bytes those allocations take from the allocator (their kmalloc buckets' sizes). */
	atomic_long_t bytes;
	/* Frees of an object (not of NULL or ZERO_SIZE_PTR). */
	atomic_long_t frees;
	/* Of the allocations, those from rmad's cache of send records. */
	atomic_long_t from_cache;
};

/* Whether the event is the counted task's own, not an interrupt's on its CPU. */
static bool rmad_allocs_mine(const struct rmad_test_allocs *c)
{
	return READ_ONCE(c->on) && in_task() && current == c->task;
}

static void rmad_allocs_kmalloc(void *data, unsigned long call_site, const void *ptr,
				size_t bytes_req, size_t bytes_alloc, gfp_t gfp, int node)
{
	struct rmad_test_allocs *c = data;

	/*
	 * The bucket the request falls in, not @bytes_alloc: that is the slab's
	 * object size with the test kernel's debugging metadata (KASAN's
	 * redzones, slub_debug's tracking), not what the object takes on a
	 * kernel users run.
	 */
	if (ptr && rmad_allocs_mine(c)) {
		atomic_long_inc(&c->allocs);
		atomic_long_add(kmalloc_size_roundup(bytes_req), &c->bytes);
	}
}

static void rmad_allocs_kfree(void *data, unsigned long call_site, const void *ptr)
{
	struct rmad_test_allocs *c = data;

	if (!ZERO_OR_NULL_PTR(ptr) && rmad_allocs_mine(c))
		atomic_long_inc(&c->frees);
}

static void rmad_allocs_cache_alloc(void *data, unsigned long call_site, const void *ptr,
				    struct kmem_cache *s, gfp_t gfp, int node)
{
	struct rmad_test_allocs *c = data;

	if (ptr && s == rmad_slab_cache() && rmad_allocs_mine(c)) {
		atomic_long_inc(&c->allocs);
		atomic_long_inc(&c->from_cache);
		atomic_long_add(kmem_cache_size(s), &c->bytes);
	}
}

static void rmad_allocs_cache_free(void *data, unsigned long call_site, const void *ptr,
				   const struct kmem_cache *s)
{
	struct rmad_test_allocs *c = data;

	if (ptr && s == rmad_slab_cache() && rmad_allocs_mine(c))
		atomic_long_inc(&c->frees);
}

int rmad_test_allocs_start(struct rmad_test_allocs *c);

/* Starts counting the current task's allocations and frees into @c (zeroed first). */
int rmad_test_allocs_start(struct rmad_test_allocs *c)
{
	int ret;

	c->task = current;
	c->on = 0;
	atomic_long_set(&c->allocs, 0);
	atomic_long_set(&c->bytes, 0);
	atomic_long_set(&c->frees, 0);
	atomic_long_set(&c->from_cache, 0);
	ret = register_trace_kmalloc(rmad_allocs_kmalloc, c);
	if (ret)
		return ret;
	ret = register_trace_kfree(rmad_allocs_kfree, c);
	if (ret)
		goto out_kmalloc;
	ret = register_trace_kmem_cache_alloc(rmad_allocs_cache_alloc, c);
	if (ret)
		goto out_kfree;
	ret = register_trace_kmem_cache_free(rmad_allocs_cache_free, c);
	if (ret)
		goto out_cache_alloc;
	/* Registered probes see this store: registration synchronises with them. */
	WRITE_ONCE(c->on, 1);
	return 0;

out_cache_alloc:
	unregister_trace_kmem_cache_alloc(rmad_allocs_cache_alloc, c);
out_kfree:
	unregister_trace_kfree(rmad_allocs_kfree, c);
out_kmalloc:
	unregister_trace_kmalloc(rmad_allocs_kmalloc, c);
	tracepoint_synchronize_unregister();
	return ret;
}

void rmad_test_allocs_stop(struct rmad_test_allocs *c);

/* Stops counting into @c; once it returns no probe reads @c any more. */
void rmad_test_allocs_stop(struct rmad_test_allocs *c)
{
	/* The counted task is the caller: nothing of its own runs between. */
	WRITE_ONCE(c->on, 0);
	unregister_trace_kmem_cache_free(rmad_allocs_cache_free, c);
	unregister_trace_kmem_cache_alloc(rmad_allocs_cache_alloc, c);
	unregister_trace_kfree(rmad_allocs_kfree, c);
	unregister_trace_kmalloc(rmad_allocs_kmalloc, c);
	tracepoint_synchronize_unregister();
}
