/* The dlopen wrapper: after a dlopen returns, the objects it loaded get their slots redirected.
 *
 * glibc's dlopen takes its caller from its return address: the caller's DT_RUNPATH (and
 * DT_RPATH chain) is searched for a bare name. Calling the real dlopen from here would make the
 * sampler the caller, so a call that depends on it (a bare name, from an object with a search
 * path of its own, or from an object we cannot place) tail-jumps to the real dlopen with the
 * caller's return address intact; its new objects are then patched by the walker thread
 * (walker.c), or in a forked child at the next slow path (pending_walk). Everything else is called from here and patched at once. */
#include <link.h>
#include <string.h>
#include <errno.h>
#include "internal.h"
#include "walker.h"

struct caller_query {
	uintptr_t addr;
	int found;      /* 0 not found, 1 found */
	int has_path;   /* the object has DT_RUNPATH or DT_RPATH */
};

static int find_caller(struct dl_phdr_info *info, size_t size, void *data)
{
	struct caller_query *q = data;
	const ElfW(Dyn) *dyn = NULL;
	bool inside = false;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && q->addr >= start && q->addr < start + ph->p_memsz)
			inside = true;
		if (ph->p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)start;
	}
	if (!inside)
		return 0;
	q->found = 1;
	for (; dyn && dyn->d_tag != DT_NULL; dyn++)
		if (dyn->d_tag == DT_RUNPATH || dyn->d_tag == DT_RPATH)
			q->has_path = 1;
	return 1;
}

static bool needs_callers_frame(const char *file, void *ret)
{
	if (!file || strchr(file, '/'))
		return false; /* the main program, or a path: the caller plays no part */
	struct caller_query q = { (uintptr_t)ret, 0, 0 };
	dl_iterate_phdr(find_caller, &q);
	return !q.found || q.has_path;
}

static __attribute__((noinline)) void *dlopen_then_patch(const char *file, int mode)
{
	void *h = mts_real.dlopen(file, mode);
	if (h && mts_config.active && mts_patch_all(false) == -EBUSY)
		mts_config.pending_walk = 1;
	return h;
}

HIDDEN void *mts_dlopen(const char *file, int mode)
{
	if (needs_callers_frame(file, __builtin_return_address(0))) {
		mts_config.pending_walk = 1;
		mts_walker_wake(); /* the walk after it runs on the walker thread (walker.c) */
		return mts_real.dlopen(file, mode); /* a tail jump (test_sampler: leaf by RUNPATH) */
	}
	return dlopen_then_patch(file, mode);
}
