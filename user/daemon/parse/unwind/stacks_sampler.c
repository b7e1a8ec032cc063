/* The in-process sampler's frames (stacks_int.h: STACKS_SAMPLER_FRAME). Its wrappers take the
 * place of the allocation functions in the program's GOT and are left out of the stacks; but
 * the program called operator new there, and under uprobes its stacks show operator new's
 * frame (the probe is on the malloc it calls). The rule that folds an allocating wrapper into
 * its callers (user/format/heapview_wrappers.c) needs that frame: without it the same program
 * ranked its sites differently in the two modes (issue 38). So the wrapper's frame is replaced
 * by operator new's, named as libstdc++ names it; the C functions' probes sit on their entry
 * in both modes, whose frame neither shows. */
#include "stacks_int.h"

#include <string.h>

/* The sampler's wrappers of operator new (user/sampler/wrap_ext.c), and what they stand for. */
static const struct {
	const char *wrapper, *name;
} news[] = {
	{"mts_new", "operator new(unsigned long)"},
	{"mts_new_array", "operator new[](unsigned long)"},
	{"mts_new_nothrow", "operator new(unsigned long, std::nothrow_t const&)"},
	{"mts_new_array_nothrow", "operator new[](unsigned long, std::nothrow_t const&)"},
	{"mts_new_aligned", "operator new(unsigned long, std::align_val_t)"},
	{"mts_new_array_aligned", "operator new[](unsigned long, std::align_val_t)"},
	{"mts_new_aligned_nothrow", "operator new(unsigned long, std::align_val_t, std::nothrow_t const&)"},
	{"mts_new_array_aligned_nothrow",
	 "operator new[](unsigned long, std::align_val_t, std::nothrow_t const&)"},
};
#define NNEWS (sizeof news / sizeof news[0])

Dwarf_Addr stacks_sampler_frame(struct stacks *s, Dwarf_Addr pc)
{
	Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, pc);
	struct object *o = mod ? stacks_module_object(s, mod) : NULL;
	if (!o || o->depth == SYMBOLIZE_OFFSET) return 0;
	symindex_build(&o->syms, mod);
	const char *name = symindex_find(&o->syms, pc);
	for (size_t i = 0; name && i < NNEWS; i++)
		if (strcmp(name, news[i].wrapper) == 0) return STACKS_SAMPLER_FRAME | i;
	return 0;
}

uint64_t stacks_sampler_code(struct stacks *s, Dwarf_Addr frame)
{
	size_t i = (size_t)(frame & ~STACKS_SAMPLER_FRAME);
	if (i >= NNEWS) return 0;
	return stacks_marker_code(s, "sampler", i, "<operator new, through the sampler>", news[i].name);
}
