/* The location lists of frames already symbolized, shared by every process's unwinder: the
 * same library (same build-id and path) at the same offset symbolizes the same in every process
 * that maps it, so only the first pays for libdw's DWARF (its line tables and DIEs, some MB per
 * object per process: docs/performance.md, "Many processes"). Thread-safe: each process's
 * channel is served on a thread of its own. */
#ifndef MEMTRACED_UNWIND_SYMCACHE_H
#define MEMTRACED_UNWIND_SYMCACHE_H
#include <stdint.h>

#include "symbolize.h"

/* A copy of the list of (object, offset) at this depth into *out (symbolize_free frees it):
 * n >= 1, or 0 when not known (or out of memory). */
int symcache_get(uint64_t obj_hash, uint64_t offset, enum symbolize_depth depth, mt_location **out);
/* Keeps a copy of locs (n >= 1) for the others; silently not when full or out of memory. */
void symcache_put(uint64_t obj_hash, uint64_t offset, enum symbolize_depth depth,
		  const mt_location *locs, int n);

#endif
