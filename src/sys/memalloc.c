// SPDX-License-Identifier: GPL-2.0
/*
 * Allocation scopes for the C API's gfp_t arguments (src/sys/memalloc.rs).
 * The Rust kernel crate allocates with a few named flag sets only, so a
 * caller's GFP_NOIO or GFP_NOFS is honoured the way the kernel recommends:
 * memalloc_noio_save() / memalloc_nofs_save() around the allocations, which
 * the page allocator applies to every allocation the task makes meanwhile.
 */

#include <linux/gfp.h>
#include <linux/sched/mm.h>

#include "memalloc.h"

/*
 * Enters the scope that @gfp asks for: NOIO when it allows direct reclaim but
 * not IO, NOFS when it allows IO but not the filesystem, none otherwise (an
 * atomic mask does not reclaim directly). Returns the flags to restore and
 * sets @kind for rmad_memalloc_restore().
 */
unsigned int rmad_memalloc_save(gfp_t gfp, int *kind)
{
	*kind = RMAD_SCOPE_NONE;
	if (!(gfp & __GFP_DIRECT_RECLAIM))
		return 0;
	if (!(gfp & __GFP_IO)) {
		*kind = RMAD_SCOPE_NOIO;
		return memalloc_noio_save();
	}
	if (!(gfp & __GFP_FS)) {
		*kind = RMAD_SCOPE_NOFS;
		return memalloc_nofs_save();
	}
	return 0;
}

/* Leaves the scope rmad_memalloc_save() entered. */
void rmad_memalloc_restore(int kind, unsigned int flags)
{
	if (kind == RMAD_SCOPE_NOIO)
		memalloc_noio_restore(flags);
	else if (kind == RMAD_SCOPE_NOFS)
		memalloc_nofs_restore(flags);
}

/* The mask an allocation with @gfp gets now, in the current task's scope. */
gfp_t rmad_memalloc_effective(gfp_t gfp)
{
	return current_gfp_context(gfp);
}
