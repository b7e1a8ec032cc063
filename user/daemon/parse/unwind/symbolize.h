/* Symbolizing one pc of a process into a memtrace location list with libdw. */
#ifndef MEMTRACED_SYMBOLIZE_H
#define MEMTRACED_SYMBOLIZE_H

#include <elfutils/libdwfl.h>

#include "memtrace.h"

/* The location list of pc (a call site: already return address - 1) in mod, OUTERMOST FIRST:
 * the function holding the call site, then each inlined function down to the innermost one,
 * each with the file:line:column of the call into the next (the innermost: of pc itself).
 * Without DWARF: the symbol table's name (.symtab or .dynsym), demangled, with the object path
 * as file and line 0; without a symbol: "object+0xADDR". Returns n >= 1 and a malloc'd array
 * in *out whose strings are malloc'd too (symbolize_free frees both), or -1 on out of memory. */
enum symbolize_depth {
	SYMBOLIZE_FULL,   /* DWARF, else the symbol table, else object+0xADDR */
	SYMBOLIZE_NAMES,  /* the symbol table, else object+0xADDR: no DWARF read */
	SYMBOLIZE_OFFSET, /* object+0xADDR only: neither read */
};
struct symindex;
/* syms: mod's symbols by address (symindex.h), or NULL to let libdw look them up */
int symbolize_pc(Dwfl_Module *mod, Dwarf_Addr pc, enum symbolize_depth depth,
		 const struct symindex *syms, mt_location **out);
void symbolize_free(mt_location *locs, int n);

/* A one-location list for a code that has no object behind it (truncated stack, unknown pc). */
int symbolize_marker(const char *file, const char *defname, mt_location **out);

#endif
