/* The allocation functions one ELF object defines (sites/ private). */
#ifndef MEMTRACED_SITES_ALLOC_DEFS_H
#define MEMTRACED_SITES_ALLOC_DEFS_H
#include <stdbool.h>
#include <stdint.h>

#include "protocol/allocfn.h"
#include "elf/elfobj.h"

/* A function definition found in one object. */
struct fn_def {
	bool found;
	bool ifunc;           /* STT_GNU_IFUNC: the symbol is a resolver, not the function */
	uint64_t vaddr, size, offset;
};
/* The alloc functions this object exports: .dynsym definitions (GLOBAL/WEAK, default
 * version); with use_symtab also .symtab's global definitions (static executables). The
 * first definition of each name wins. */
void alloc_defs_of(const struct elfobj *o, bool use_symtab, struct fn_def defs[AF_COUNT]);

#endif
