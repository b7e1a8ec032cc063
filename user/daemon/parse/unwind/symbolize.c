/* pc -> location list with libdw, the way eu-addr2line -i -f does it: the line table gives the
 * innermost file:line:column; the chain of DIEs around the pc gives one extra location per
 * DW_TAG_inlined_subroutine, located at its DW_AT_call_file/line/column in the function around
 * it. Objects without DWARF fall back to symbol names. */
#include "symbolize.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"
#include "scopes.h"
#include "symindex.h"

/* Inline chains are short; lists longer than this are cut at the outer end (the writer
 * replaces lists above 255 entries by "<unknown>" anyway). */
#define MAX_LOCS 255

struct loclist {
	const struct symindex *syms; /* the object's symbols by address, or NULL: libdw's lookup */
	mt_location locs[MAX_LOCS]; /* innermost first while building */
	int n;
	int oom;
};

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

static void push(struct loclist *l, const char *file, int line, int col, char *defname_owned)
{
	if (l->n >= MAX_LOCS) {
		free(defname_owned);
		return;
	}
	mt_location *loc = &l->locs[l->n];
	loc->filename = dup_or_empty(file);
	loc->defname = defname_owned ? defname_owned : strdup("??");
	if (!loc->filename || !loc->defname) {
		free((char *)loc->filename);
		free((char *)loc->defname);
		l->oom = 1;
		return;
	}
	loc->line = line > 0 ? (uint32_t)line : 0;
	loc->start_char = col > 0 ? (uint32_t)col : 0;
	loc->end_char = loc->start_char;
	l->n++;
}

static char *name_or_demangled(const char *name)
{
	if (!name)
		return NULL;
	char *d = demangle_symbol(name);
	return d ? d : strdup(name);
}

/* Function name of a subprogram / inlined_subroutine DIE: the demangled linkage name when
 * there is one (C++, Rust: full qualified name with parameters), else DW_AT_name.
 * dwarf_attr_integrate follows DW_AT_abstract_origin and DW_AT_specification. */
static char *die_function_name(Dwarf_Die *die)
{
	Dwarf_Attribute attr;
	const char *linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
	if (!linkage)
		linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
	if (linkage) {
		char *d = demangle_symbol(linkage);
		if (d)
			return d;
	}
	const char *name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &attr));
	if (name)
		return strdup(name);
	return linkage ? strdup(linkage) : NULL;
}

static int is_function_scope(Dwarf_Die *die)
{
	int tag = dwarf_tag(die);
	return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
	       tag == DW_TAG_entry_point;
}

static int next_function_scope(Dwarf_Die *scopes, int n, int from)
{
	for (int i = from; i < n; i++)
		if (is_function_scope(&scopes[i]))
			return i;
	return -1;
}

static const char *module_path(Dwfl_Module *mod)
{
	const char *name = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
	return name ? name : "?";
}

/* The start of the function holding addr (an address of the object: pc - bias), from the
 * object's .eh_frame_hdr, whose table lists each FDE's initial location, sorted: a stripped
 * object still bounds its functions there, so every pc of one unnamed function gets one name
 * (Debian's _json module: one line of a Python program was 5 rows, one per return address).
 * Only the table encoding linkers write (datarel sdata4); addr itself when there is none. */
static Dwarf_Addr function_start(Elf *elf, Dwarf_Addr addr)
{
	size_t nph = 0;
	if (!elf || elf_getphdrnum(elf, &nph) != 0) return addr;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_GNU_EH_FRAME) continue;
		Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_BYTE);
		const uint8_t *h = d ? d->d_buf : NULL;
		/* version 1; eh_frame_ptr sdata4 (pcrel); fde_count udata4; table datarel sdata4 */
		if (!h || d->d_size < 12 || h[0] != 1 || (h[1] & 0x07) != 0x03 || h[2] != 0x03 ||
		    h[3] != 0x3b)
			return addr;
		uint32_t n;
		memcpy(&n, h + 8, 4);
		if ((uint64_t)n * 8 > d->d_size - 12) return addr;
		int64_t lo = 0, hi = (int64_t)n - 1, found = -1;
		while (lo <= hi) { /* the last entry whose start is <= addr */
			int64_t mid = (lo + hi) / 2;
			int32_t rel;
			memcpy(&rel, h + 12 + mid * 8, 4);
			if ((Dwarf_Addr)((int64_t)ph.p_vaddr + rel) <= addr) found = mid, lo = mid + 1;
			else hi = mid - 1;
		}
		if (found < 0) return addr;
		int32_t rel;
		memcpy(&rel, h + 12 + found * 8, 4);
		return (Dwarf_Addr)((int64_t)ph.p_vaddr + rel);
	}
	return addr;
}

/* The symbol table's name for pc, demangled, or "object+0xSTART" (the start of its function
 * where the object's CFI says, else pc's own address). */
static char *symbol_name(const struct loclist *l, Dwfl_Module *mod, Dwarf_Addr pc, bool use_symbols)
{
	const char *sym = !use_symbols ? NULL : l->syms ? symindex_find(l->syms, pc)
							: dwfl_module_addrname(mod, pc);
	char *n = name_or_demangled(sym);
	if (n)
		return n;
	Dwarf_Addr bias = 0;
	Elf *elf = dwfl_module_getelf(mod, &bias);
	if (!elf)
		dwfl_module_info(mod, NULL, &bias, NULL, NULL, NULL, NULL, NULL);
	const char *path = module_path(mod);
	const char *base = strrchr(path, '/');
	char *s = NULL;
	if (asprintf(&s, "%s+0x%" PRIx64, base ? base + 1 : path,
		     (uint64_t)function_start(elf, pc - bias)) < 0)
		return NULL;
	return s;
}

/* Fills l (innermost first) from DWARF; leaves it empty when pc has no DWARF. */
static void from_dwarf(Dwfl_Module *mod, Dwarf_Addr pc, struct loclist *l)
{
	Dwarf_Addr bias = 0;
	Dwarf_Die *cudie = dwfl_module_addrdie(mod, pc, &bias);
	if (!cudie)
		return;

	const char *file = NULL;
	int line = 0, col = 0;
	Dwfl_Line *ln = dwfl_module_getsrc(mod, pc);
	if (ln)
		file = dwfl_lineinfo(ln, NULL, &line, &col, NULL, NULL);
	if (!file) {
		file = module_path(mod);
		line = col = 0;
	}

	/* The physical chain (inlined instance inside its caller), innermost first. */
	Dwarf_Die *scopes = NULL;
	int ns = pc_scopes(cudie, pc - bias, &scopes);
	int fi = ns > 0 ? next_function_scope(scopes, ns, 0) : -1;
	if (fi < 0) {
		/* DWARF lines but no function DIE (assembly sources): name from the symbols. */
		push(l, file, line, col, symbol_name(l, mod, pc, true));
		free(scopes);
		return;
	}
	char *name = die_function_name(&scopes[fi]);
	push(l, file, line, col, name ? name : symbol_name(l, mod, pc, true));

	Dwarf_Files *files = NULL;
	size_t nfiles = 0;
	if (dwarf_getsrcfiles(cudie, &files, &nfiles) != 0)
		files = NULL;
	while (dwarf_tag(&scopes[fi]) == DW_TAG_inlined_subroutine) {
		Dwarf_Attribute attr;
		Dwarf_Word v;
		const char *call_file = NULL;
		int call_line = 0, call_col = 0;
		if (files && dwarf_formudata(dwarf_attr(&scopes[fi], DW_AT_call_file, &attr), &v) == 0 &&
		    v < nfiles)
			call_file = dwarf_filesrc(files, v, NULL, NULL);
		if (dwarf_formudata(dwarf_attr(&scopes[fi], DW_AT_call_line, &attr), &v) == 0)
			call_line = (int)v;
		if (dwarf_formudata(dwarf_attr(&scopes[fi], DW_AT_call_column, &attr), &v) == 0)
			call_col = (int)v;
		int outer = next_function_scope(scopes, ns, fi + 1);
		char *outer_name = outer >= 0 ? die_function_name(&scopes[outer]) : NULL;
		push(l, call_file ? call_file : file, call_line, call_col,
		     outer_name ? outer_name : symbol_name(l, mod, pc, true));
		if (outer < 0)
			break;
		fi = outer;
	}
	free(scopes);
}

static void free_strings(mt_location *locs, int n);

static int finish(struct loclist *l, mt_location **out)
{
	if (l->oom || l->n == 0) {
		free_strings(l->locs, l->n);
		*out = NULL;
		return -1;
	}
	mt_location *locs = malloc(sizeof(*locs) * l->n);
	if (!locs) {
		free_strings(l->locs, l->n);
		*out = NULL;
		return -1;
	}
	for (int i = 0; i < l->n; i++) /* innermost first -> outermost first */
		locs[i] = l->locs[l->n - 1 - i];
	*out = locs;
	return l->n;
}

int symbolize_pc(Dwfl_Module *mod, Dwarf_Addr pc, enum symbolize_depth depth,
		 const struct symindex *syms, mt_location **out)
{
	struct loclist *l = calloc(1, sizeof(*l));
	if (!l)
		return -1;
	l->syms = syms;
	if (depth == SYMBOLIZE_FULL)
		from_dwarf(mod, pc, l);
	if (l->n == 0 && !l->oom)
		push(l, module_path(mod), 0, 0, symbol_name(l, mod, pc, depth != SYMBOLIZE_OFFSET));
	int n = finish(l, out);
	free(l);
	return n;
}

int symbolize_marker(const char *file, const char *defname, mt_location **out)
{
	struct loclist *l = calloc(1, sizeof(*l));
	if (!l)
		return -1;
	push(l, file, 0, 0, strdup(defname));
	int n = finish(l, out);
	free(l);
	return n;
}

static void free_strings(mt_location *locs, int n)
{
	for (int i = 0; i < n; i++) {
		free((char *)locs[i].filename);
		free((char *)locs[i].defname);
	}
}

void symbolize_free(mt_location *locs, int n)
{
	if (!locs)
		return;
	free_strings(locs, n);
	free(locs);
}
