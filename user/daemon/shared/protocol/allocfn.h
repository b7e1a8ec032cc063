/* The allocation functions memtraced knows, by name: what each one is (allocating, freeing,
 * a C++ operator or other extension). */
#ifndef MEMTRACED_SITES_ALLOCFN_H
#define MEMTRACED_SITES_ALLOCFN_H
#include <stdbool.h>
#include <stddef.h>

/* The functions probed. Values are the BPF attach cookies (enum mt_fn in
 * include/memtraced_events.h has the same values). Aliases (one entry, several names) are
 * listed under the first name in this order, so free comes before the delete family. */
enum alloc_fn {
	AF_MALLOC, AF_CALLOC, AF_REALLOC, AF_REALLOCARRAY, AF_FREE, AF_POSIX_MEMALIGN,
	AF_ALIGNED_ALLOC, AF_MEMALIGN, AF_VALLOC, AF_PVALLOC,
	/* C++ operator new (size first; aligned forms: alignment second) */
	AF_NEW, AF_NEW_ARRAY, AF_NEW_NOTHROW, AF_NEW_ARRAY_NOTHROW, AF_NEW_ALIGNED,
	AF_NEW_ARRAY_ALIGNED, AF_NEW_ALIGNED_NOTHROW, AF_NEW_ARRAY_ALIGNED_NOTHROW,
	/* C++ operator delete (pointer first) */
	AF_DELETE, AF_DELETE_ARRAY, AF_DELETE_SIZED, AF_DELETE_ARRAY_SIZED, AF_DELETE_NOTHROW,
	AF_DELETE_ARRAY_NOTHROW, AF_DELETE_ALIGNED, AF_DELETE_ARRAY_ALIGNED,
	AF_DELETE_SIZED_ALIGNED, AF_DELETE_ARRAY_SIZED_ALIGNED, AF_DELETE_ALIGNED_NOTHROW,
	AF_DELETE_ARRAY_ALIGNED_NOTHROW,
	/* jemalloc's non-standard API (sallocx and nallocx are queries: not probed) */
	AF_MALLOCX, AF_RALLOCX, AF_XALLOCX, AF_DALLOCX, AF_SDALLOCX,
	/* other names allocators export: cfree (tcmalloc, mimalloc), reallocf (mimalloc: frees
	 * the block when it fails) */
	AF_CFREE, AF_REALLOCF,
	AF_COUNT
};
const char *alloc_fn_name(enum alloc_fn fn);
/* free, operator delete, dallocx...: the pointer is the first argument and no return probe
 * is needed, so the probe may go after the entry (see probe_site_choose). */
bool alloc_fn_is_free(enum alloc_fn fn);
/* The C++ operators and the other extensions beyond the C standard functions: when such a
 * function only forwards to another allocation function (libstdc++'s operator new calls
 * malloc), it is not probed, the callee's probe sees the call (resolve() in allocsyms.c). */
bool alloc_fn_is_extension(enum alloc_fn fn);

/* The function named name[0..len), or -1. */
int alloc_fn_by_name(const char *name, size_t len);

#endif
