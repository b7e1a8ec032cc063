/* The allocation functions by name (see allocfn.h). */
#include "allocfn.h"

#include <string.h>

static const char *const fn_names[AF_COUNT] = {
	[AF_MALLOC] = "malloc", [AF_CALLOC] = "calloc", [AF_REALLOC] = "realloc",
	[AF_REALLOCARRAY] = "reallocarray", [AF_FREE] = "free",
	[AF_POSIX_MEMALIGN] = "posix_memalign", [AF_ALIGNED_ALLOC] = "aligned_alloc",
	[AF_MEMALIGN] = "memalign", [AF_VALLOC] = "valloc", [AF_PVALLOC] = "pvalloc",
	[AF_NEW] = "_Znwm", [AF_NEW_ARRAY] = "_Znam",
	[AF_NEW_NOTHROW] = "_ZnwmRKSt9nothrow_t", [AF_NEW_ARRAY_NOTHROW] = "_ZnamRKSt9nothrow_t",
	[AF_NEW_ALIGNED] = "_ZnwmSt11align_val_t", [AF_NEW_ARRAY_ALIGNED] = "_ZnamSt11align_val_t",
	[AF_NEW_ALIGNED_NOTHROW] = "_ZnwmSt11align_val_tRKSt9nothrow_t",
	[AF_NEW_ARRAY_ALIGNED_NOTHROW] = "_ZnamSt11align_val_tRKSt9nothrow_t",
	[AF_DELETE] = "_ZdlPv", [AF_DELETE_ARRAY] = "_ZdaPv",
	[AF_DELETE_SIZED] = "_ZdlPvm", [AF_DELETE_ARRAY_SIZED] = "_ZdaPvm",
	[AF_DELETE_NOTHROW] = "_ZdlPvRKSt9nothrow_t", [AF_DELETE_ARRAY_NOTHROW] = "_ZdaPvRKSt9nothrow_t",
	[AF_DELETE_ALIGNED] = "_ZdlPvSt11align_val_t", [AF_DELETE_ARRAY_ALIGNED] = "_ZdaPvSt11align_val_t",
	[AF_DELETE_SIZED_ALIGNED] = "_ZdlPvmSt11align_val_t",
	[AF_DELETE_ARRAY_SIZED_ALIGNED] = "_ZdaPvmSt11align_val_t",
	[AF_DELETE_ALIGNED_NOTHROW] = "_ZdlPvSt11align_val_tRKSt9nothrow_t",
	[AF_DELETE_ARRAY_ALIGNED_NOTHROW] = "_ZdaPvSt11align_val_tRKSt9nothrow_t",
	[AF_MALLOCX] = "mallocx", [AF_RALLOCX] = "rallocx", [AF_XALLOCX] = "xallocx",
	[AF_DALLOCX] = "dallocx", [AF_SDALLOCX] = "sdallocx",
	[AF_CFREE] = "cfree", [AF_REALLOCF] = "reallocf",
};
_Static_assert(sizeof(fn_names) / sizeof(fn_names[0]) == AF_COUNT, "a name for every alloc_fn");

const char *alloc_fn_name(enum alloc_fn fn)
{
	return (unsigned)fn < AF_COUNT && fn_names[fn] ? fn_names[fn] : "?";
}

bool alloc_fn_is_free(enum alloc_fn fn)
{
	return fn == AF_FREE || (fn >= AF_DELETE && fn <= AF_DELETE_ARRAY_ALIGNED_NOTHROW) ||
	       fn == AF_DALLOCX || fn == AF_SDALLOCX || fn == AF_CFREE;
}

bool alloc_fn_is_extension(enum alloc_fn fn)
{
	return (unsigned)fn < AF_COUNT && fn >= AF_NEW;
}

int alloc_fn_by_name(const char *name, size_t len)
{
	for (int fn = 0; fn < AF_COUNT; fn++) {
		const char *want = alloc_fn_name(fn);
		if (strlen(want) == len && memcmp(want, name, len) == 0) return fn;
	}
	return -1;
}
