/* An object's function symbols sorted by address, for lookups in O(log n) (see symindex.c).
 * Inside the unwind room. */
#ifndef MEMTRACED_UNWIND_SYMINDEX_H
#define MEMTRACED_UNWIND_SYMINDEX_H
#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct symindex_entry {
	uint64_t start, size; /* absolute (the module's bias added) */
	const char *name;     /* libdw's string: lives as long as the module */
	uint8_t bind;         /* STB_GLOBAL ranks first among symbols at one address */
};

struct symindex {
	struct symindex_entry *e;
	size_t n;
	bool built, failed;
	uint64_t build_ns; /* time the building took */
};

/* Builds the index of mod's symbol table (once; on failure, lookups find nothing). */
void symindex_build(struct symindex *x, Dwfl_Module *mod);

/* The name of the function symbol holding pc (or, among symbols without a size, the nearest one
 * below it), as dwfl_module_addrname finds it; NULL if none. */
const char *symindex_find(const struct symindex *x, uint64_t pc);

void symindex_free(struct symindex *x);
#endif
