/* The allocation functions one ELF object defines: its exported functions, by name. */
#include "alloc_defs.h"

#include <string.h>

struct defs_walk {
	const struct elfobj *o;
	struct fn_def *defs;
};

static int take_alloc_fn(void *ctx, const struct elf_function *f)
{
	struct defs_walk *w = ctx;
	int fn = alloc_fn_by_name(f->name, f->name_len);
	if (fn < 0 || w->defs[fn].found) return 0;
	uint64_t off;
	if (elfobj_vaddr_to_offset(w->o, f->vaddr, &off) != 0) return 0;
	w->defs[fn] = (struct fn_def){.found = true, .ifunc = f->ifunc, .vaddr = f->vaddr,
				      .size = f->size, .offset = off};
	return 0;
}

void alloc_defs_of(const struct elfobj *o, bool use_symtab, struct fn_def defs[AF_COUNT])
{
	memset(defs, 0, sizeof(*defs) * AF_COUNT);
	struct defs_walk w = {.o = o, .defs = defs};
	elfobj_each_function(o, use_symtab, take_alloc_fn, &w);
}
