/* The table of wrapped names: symbol, wrapper, where the real function goes. */
#include <string.h>
#include <dlfcn.h>
#include "internal.h"

#define W(sym, wrapper, realp, fn) [fn] = { sym, (void *)wrapper, (void **)(realp), fn }
#define DECL(name) extern char name[] HIDDEN

DECL(mts_malloc); DECL(mts_calloc); DECL(mts_realloc); DECL(mts_reallocarray); DECL(mts_free);
DECL(mts_cfree); DECL(mts_posix_memalign); DECL(mts_aligned_alloc); DECL(mts_memalign);
DECL(mts_valloc); DECL(mts_pvalloc);
DECL(mts_new); DECL(mts_new_array); DECL(mts_new_nothrow); DECL(mts_new_array_nothrow);
DECL(mts_new_aligned); DECL(mts_new_array_aligned); DECL(mts_new_aligned_nothrow);
DECL(mts_new_array_aligned_nothrow);
DECL(mts_delete); DECL(mts_delete_array); DECL(mts_delete_sized); DECL(mts_delete_array_sized);
DECL(mts_delete_nothrow); DECL(mts_delete_array_nothrow); DECL(mts_delete_aligned);
DECL(mts_delete_array_aligned); DECL(mts_delete_sized_aligned);
DECL(mts_delete_array_sized_aligned); DECL(mts_delete_aligned_nothrow);
DECL(mts_delete_array_aligned_nothrow);
DECL(mts_mallocx); DECL(mts_rallocx); DECL(mts_xallocx); DECL(mts_dallocx); DECL(mts_sdallocx);
DECL(mts_reallocf); DECL(mts_dlopen); DECL(mts_dlsym); DECL(mts_dlvsym);
extern void *mts_dlsym_real HIDDEN, *mts_dlvsym_real HIDDEN; /* dlsym_hook.c */

struct real_fns mts_real;
uintptr_t mts_canonical[MTS_FN_COUNT];

const struct wrap_entry mts_wraps[MTS_FN_COUNT] = {
	W("malloc", mts_malloc, &mts_real.malloc, MTS_MALLOC),
	W("calloc", mts_calloc, &mts_real.calloc, MTS_CALLOC),
	W("realloc", mts_realloc, &mts_real.realloc, MTS_REALLOC),
	W("reallocarray", mts_reallocarray, &mts_real.reallocarray, MTS_REALLOCARRAY),
	W("free", mts_free, &mts_real.free, MTS_FREE),
	W("cfree", mts_cfree, &mts_real.cfree, MTS_CFREE),
	W("posix_memalign", mts_posix_memalign, &mts_real.posix_memalign, MTS_POSIX_MEMALIGN),
	W("aligned_alloc", mts_aligned_alloc, &mts_real.aligned_alloc, MTS_ALIGNED_ALLOC),
	W("memalign", mts_memalign, &mts_real.memalign, MTS_MEMALIGN),
	W("valloc", mts_valloc, &mts_real.valloc, MTS_VALLOC),
	W("pvalloc", mts_pvalloc, &mts_real.pvalloc, MTS_PVALLOC),
	W("_Znwm", mts_new, &mts_real.new_[0], MTS_NEW),
	W("_Znam", mts_new_array, &mts_real.new_[1], MTS_NEW_ARRAY),
	W("_ZnwmRKSt9nothrow_t", mts_new_nothrow, &mts_real.new_[2], MTS_NEW_NOTHROW),
	W("_ZnamRKSt9nothrow_t", mts_new_array_nothrow, &mts_real.new_[3], MTS_NEW_ARRAY_NOTHROW),
	W("_ZnwmSt11align_val_t", mts_new_aligned, &mts_real.new_[4], MTS_NEW_ALIGNED),
	W("_ZnamSt11align_val_t", mts_new_array_aligned, &mts_real.new_[5], MTS_NEW_ARRAY_ALIGNED),
	W("_ZnwmSt11align_val_tRKSt9nothrow_t", mts_new_aligned_nothrow, &mts_real.new_[6],
	  MTS_NEW_ALIGNED_NOTHROW),
	W("_ZnamSt11align_val_tRKSt9nothrow_t", mts_new_array_aligned_nothrow, &mts_real.new_[7],
	  MTS_NEW_ARRAY_ALIGNED_NOTHROW),
	W("_ZdlPv", mts_delete, &mts_real.delete_[0], MTS_DELETE),
	W("_ZdaPv", mts_delete_array, &mts_real.delete_[1], MTS_DELETE_ARRAY),
	W("_ZdlPvm", mts_delete_sized, &mts_real.delete_[2], MTS_DELETE_SIZED),
	W("_ZdaPvm", mts_delete_array_sized, &mts_real.delete_[3], MTS_DELETE_ARRAY_SIZED),
	W("_ZdlPvRKSt9nothrow_t", mts_delete_nothrow, &mts_real.delete_[4], MTS_DELETE_NOTHROW),
	W("_ZdaPvRKSt9nothrow_t", mts_delete_array_nothrow, &mts_real.delete_[5],
	  MTS_DELETE_ARRAY_NOTHROW),
	W("_ZdlPvSt11align_val_t", mts_delete_aligned, &mts_real.delete_[6], MTS_DELETE_ALIGNED),
	W("_ZdaPvSt11align_val_t", mts_delete_array_aligned, &mts_real.delete_[7],
	  MTS_DELETE_ARRAY_ALIGNED),
	W("_ZdlPvmSt11align_val_t", mts_delete_sized_aligned, &mts_real.delete_[8],
	  MTS_DELETE_SIZED_ALIGNED),
	W("_ZdaPvmSt11align_val_t", mts_delete_array_sized_aligned, &mts_real.delete_[9],
	  MTS_DELETE_ARRAY_SIZED_ALIGNED),
	W("_ZdlPvSt11align_val_tRKSt9nothrow_t", mts_delete_aligned_nothrow, &mts_real.delete_[10],
	  MTS_DELETE_ALIGNED_NOTHROW),
	W("_ZdaPvSt11align_val_tRKSt9nothrow_t", mts_delete_array_aligned_nothrow,
	  &mts_real.delete_[11], MTS_DELETE_ARRAY_ALIGNED_NOTHROW),
	W("mallocx", mts_mallocx, &mts_real.mallocx, MTS_MALLOCX),
	W("rallocx", mts_rallocx, &mts_real.rallocx, MTS_RALLOCX),
	W("xallocx", mts_xallocx, &mts_real.xallocx, MTS_XALLOCX),
	W("dallocx", mts_dallocx, &mts_real.dallocx, MTS_DALLOCX),
	W("sdallocx", mts_sdallocx, &mts_real.sdallocx, MTS_SDALLOCX),
	W("reallocf", mts_reallocf, &mts_real.reallocf, MTS_REALLOCF),
	W("dlopen", mts_dlopen, &mts_real.dlopen, MTS_DLOPEN),
	W("dlsym", mts_dlsym, &mts_dlsym_real, MTS_DLSYM),
	W("dlvsym", mts_dlvsym, &mts_dlvsym_real, MTS_DLVSYM),
};

/* Relocation names arrive by the thousand in a large library: a first-byte filter before any
 * string compare (every wrapped name starts with one of these). */
const struct wrap_entry *mts_wrap_by_name(const char *name)
{
	switch (name[0]) {
	case 'm': case 'c': case 'r': case 'f': case 'p': case 'a': case 'v': case '_':
	case 'x': case 'd': case 's':
		break;
	default:
		return NULL;
	}
	if (name[0] == '_' && (name[1] != 'Z' || (name[2] != 'n' && name[2] != 'd')))
		return NULL;
	for (int i = 0; i < MTS_FN_COUNT; i++)
		if (strcmp(mts_wraps[i].name, name) == 0)
			return &mts_wraps[i];
	return NULL;
}

const struct wrap_entry *mts_wrap_by_addr(uintptr_t wrapper)
{
	for (int i = 0; i < MTS_FN_COUNT; i++)
		if ((uintptr_t)mts_wraps[i].wrapper == wrapper)
			return &mts_wraps[i];
	return NULL;
}
