/* An object's facts (objfacts.h), read with libelf through elf/elfobj.h. */
#include "objfacts.h"
#include "elfobj.h"
#include "usdt_notes.h"

#include <string.h>

/* A default-version global function definition named name in .dynsym (what dlsym and a
 * program's own call bind to). An ifunc's value is its resolver, not the function. */
/* A function's or a variable's (is_object) default-version definition in the .dynsym. */
static int dynsym_lookup(const struct elfobj *o, const char *name, uint64_t *value, bool *is_object)
{
	Elf_Scn *scn = NULL, *dynsym = NULL;
	Elf_Data *versym = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(o->elf, scn))) {
		if (!gelf_getshdr(scn, &sh)) continue;
		if (sh.sh_type == SHT_DYNSYM) dynsym = scn;
		else if (sh.sh_type == SHT_GNU_versym) versym = elf_getdata(scn, NULL);
	}
	if (!dynsym || !gelf_getshdr(dynsym, &sh) || !sh.sh_entsize) return -1;
	Elf_Data *data = elf_getdata(dynsym, NULL);
	if (!data) return -1;
	for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
		GElf_Sym sym;
		if (!gelf_getsym(data, i, &sym)) break;
		if (sym.st_shndx == SHN_UNDEF || !sym.st_value) continue;
		int type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);
		if (type != STT_FUNC && type != STT_OBJECT) continue;
		if (bind != STB_GLOBAL && bind != STB_WEAK) continue;
		const char *s = elf_strptr(o->elf, sh.sh_link, sym.st_name);
		if (!s || strcmp(s, name) != 0) continue;
		GElf_Versym vs;
		/* hidden (non-default) versions only bind to references asking for them */
		if (versym && gelf_getversym(versym, i, &vs) && ((vs & 0x8000) || (vs & 0x7fff) == 0))
			continue;
		*value = sym.st_value;
		*is_object = type == STT_OBJECT;
		return 0;
	}
	return -1;
}

struct symtab_find {
	const char *name;
	uint64_t value;
	bool found;
};

static int symtab_match(void *ctx, const struct elf_function *fn)
{
	struct symtab_find *s = ctx;
	size_t n = strlen(s->name);
	if (fn->name_len != n || memcmp(fn->name, s->name, n) != 0) return 0;
	s->value = fn->vaddr;
	s->found = true;
	return 1;
}

int elf_facts_of(const char *path, const char *symbol, struct elf_facts *f, char *err,
		 size_t errlen)
{
	memset(f, 0, sizeof *f);
	struct elfobj o;
	if (elfobj_open(&o, path, err, errlen) != 0) return -1; /* only x86-64 ELF opens */
	f->elf_x86_64 = true;
	f->has_interp = o.has_interp;
	f->has_otel_usdt = elfobj_has_usdt(&o, "otel_memory", "alloc");
	if (symbol && *symbol) {
		uint64_t v = 0;
		bool is_object = false;
		if (dynsym_lookup(&o, symbol, &v, &is_object) == 0) {
			f->sym_found = true;
		} else {
			struct symtab_find s = {.name = symbol};
			elfobj_each_function(&o, true, symtab_match, &s);
			f->sym_found = s.found;
			v = s.value;
		}
		f->sym_value = v;
		/* a function's place in the file (a probe's offset); a variable (in .bss, say) has
		 * only its address (glibc's __libc_single_threaded: inject/agent.c) */
		if (f->sym_found && !is_object && elfobj_vaddr_to_offset(&o, v, &f->sym_offset) != 0)
			f->sym_found = false;
	}
	elfobj_close(&o);
	return 0;
}
