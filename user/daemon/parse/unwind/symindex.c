/* An object's function symbols sorted by address. libdwfl 0.188's dwfl_module_addrname scans
 * the whole symbol table at each lookup: libLLVM-14's 45,000 symbols made each new frame cost
 * ~2 ms, and at a high sample rate clang went over the per-object time cap, after which its
 * frames were named libLLVM-14.so.1+0x... The index is built once per object from the same
 * table (dwfl_module_getsym_info: .symtab, else .dynsym, plus MiniDebugInfo), in O(n log n). */
#include "symindex.h"
#include "by_start.h"

#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int bind_rank(uint8_t bind)
{
	return bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2;
}

static int by_address(const void *a, const void *b)
{
	const struct symindex_entry *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	/* at one address: the global name first, then the larger symbol */
	int rx = bind_rank(x->bind), ry = bind_rank(y->bind);
	if (rx != ry)
		return rx - ry;
	return x->size > y->size ? -1 : x->size < y->size;
}

void symindex_build(struct symindex *x, Dwfl_Module *mod)
{
	if (x->built)
		return;
	x->built = true;
	uint64_t t0 = now_ns();
	int nsyms = dwfl_module_getsymtab(mod);
	if (nsyms <= 0) {
		x->failed = true;
		return;
	}
	x->e = malloc((size_t)nsyms * sizeof(*x->e));
	if (!x->e) {
		x->failed = true;
		return;
	}
	for (int i = 1; i < nsyms; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, NULL, NULL);
		int type = GELF_ST_TYPE(sym.st_info);
		if (!name || !*name || sym.st_shndx == SHN_UNDEF ||
		    (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE))
			continue;
		x->e[x->n++] = (struct symindex_entry){addr, sym.st_size, name,
						       (uint8_t)GELF_ST_BIND(sym.st_info)};
	}
	qsort(x->e, x->n, sizeof(*x->e), by_address);
	x->build_ns = now_ns() - t0;
}

const char *symindex_find(const struct symindex *x, uint64_t pc)
{
	size_t lo = starting_at_or_below(x->e, x->n, sizeof *x->e, offsetof(struct symindex_entry, start), pc);
	/* groups of one address, the nearest first; in a group the global name comes first. The
	 * first sized symbol holding pc wins (a sized one further down may still hold it: a
	 * function around a local label); else the nearest sizeless one. */
	const char *sizeless = NULL;
	bool passed_sized = false; /* a sizeless symbol below a sized one that ends before pc: no */
	size_t scanned = 0;
	while (lo > 0 && scanned < 64) {
		size_t g = lo - 1;
		while (g > 0 && x->e[g - 1].start == x->e[lo - 1].start)
			g--;
		for (size_t j = g; j < lo; j++, scanned++) {
			const struct symindex_entry *e = &x->e[j];
			if (e->size && pc - e->start < e->size)
				return e->name;
			if (!e->size && !sizeless && !passed_sized)
				sizeless = e->name;
		}
		for (size_t j = g; j < lo; j++)
			passed_sized |= x->e[j].size != 0;
		lo = g;
	}
	return sizeless;
}

void symindex_free(struct symindex *x)
{
	free(x->e);
	memset(x, 0, sizeof(*x));
}
