/* Reading what the dynamic linker reads from an ELF object: exported function symbols (with
 * symbol versions), segments (symbol value -> file offset) and the dynamic section. Knows
 * nothing of allocation functions: sites/ asks it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elfobj.h"

int open_regular(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;
	if (fd < 0) return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	return fd;
}

ssize_t read_regular(const char *path, char *buf, size_t len)
{
	int fd = open_regular(path);
	if (fd < 0) return -1;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return n;
}

int elfobj_open(struct elfobj *o, const char *path, char *err, size_t errlen)
{
	memset(o, 0, sizeof(*o));
	o->fd = -1;
	o->path = path;
	if (elf_version(EV_CURRENT) == EV_NONE) {
		snprintf(err, errlen, "libelf: %s", elf_errmsg(-1));
		return -1;
	}
	o->fd = open_regular(path);
	if (o->fd < 0) {
		snprintf(err, errlen, "cannot open %s: %s", path,
			 errno == EINVAL ? "not a regular file" : strerror(errno));
		return -1;
	}
	o->elf = elf_begin(o->fd, ELF_C_READ, NULL);
	if (!o->elf || elf_kind(o->elf) != ELF_K_ELF) {
		snprintf(err, errlen, "%s is not an ELF file", path);
		goto fail;
	}
	if (gelf_getclass(o->elf) != ELFCLASS64 || !gelf_getehdr(o->elf, &o->ehdr) ||
	    o->ehdr.e_machine != EM_X86_64) {
		snprintf(err, errlen, "%s is not a 64-bit x86-64 ELF object", path);
		goto fail;
	}
	size_t phnum = 0;
	if (elf_getphdrnum(o->elf, &phnum) != 0) phnum = 0;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(o->elf, i, &ph)) continue;
		if (ph.p_type == PT_INTERP) o->has_interp = true;
		if (ph.p_type == PT_DYNAMIC) o->has_dynamic = true;
	}
	return 0;
fail:
	elfobj_close(o);
	return -1;
}

void elfobj_close(struct elfobj *o)
{
	if (o->elf) elf_end(o->elf);
	if (o->fd >= 0) close(o->fd);
	o->elf = NULL;
	o->fd = -1;
}

/* uprobes take file offsets: find the PT_LOAD segment whose file-backed part holds vaddr.
 * For PIE and shared objects vaddr and offset often coincide, for non-PIE executables
 * (loaded at 0x400000) they do not. */
int elfobj_vaddr_to_offset(const struct elfobj *o, uint64_t vaddr, uint64_t *offset)
{
	size_t phnum = 0;
	if (elf_getphdrnum(o->elf, &phnum) != 0) return -1;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(o->elf, i, &ph) || ph.p_type != PT_LOAD) continue;
		if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz) {
			*offset = vaddr - ph.p_vaddr + ph.p_offset;
			return 0;
		}
	}
	return -1;
}

/* Calls fn for each function definition of one symbol table that dynamic binding can use:
 * GLOBAL/WEAK/UNIQUE FUNC or IFUNC, defined, at its default version. */
static int scan_functions(const struct elfobj *o, Elf_Scn *scn, const GElf_Shdr *sh, Elf_Data *versym,
			  elfobj_function_fn fn, void *ctx)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	if (!data || sh->sh_entsize == 0) return 0;
	size_t n = sh->sh_size / sh->sh_entsize;
	if (n > ELFOBJ_MAX_SYMBOLS) n = ELFOBJ_MAX_SYMBOLS;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym sym;
		if (!gelf_getsym(data, i, &sym)) break;
		if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
		int type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);
		if (type != STT_FUNC && type != STT_GNU_IFUNC) continue;
		if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE) continue;
		const char *name = elf_strptr(o->elf, sh->sh_link, sym.st_name);
		if (!name) continue;
		size_t len = strlen(name);
		/* .symtab may spell versions into the name: "malloc@@GLIBC_2.2.5" is the default
		 * version, "malloc@GLIBC_2.0" an old one that new links never bind to. */
		const char *at = strchr(name, '@');
		if (at) {
			if (at[1] != '@') continue;
			len = at - name;
		}
		/* .dynsym: .gnu.version index 0 is local, bit 15 marks a hidden (non-default)
		 * version, which ld.so only binds to a reference asking for that version. */
		if (versym) {
			GElf_Versym vs;
			if (!gelf_getversym(versym, i, &vs)) continue;
			if ((vs & 0x8000) || (vs & 0x7fff) == 0) continue;
		}
		struct elf_function f = {.name = name, .name_len = len, .vaddr = sym.st_value,
					 .size = sym.st_size, .ifunc = type == STT_GNU_IFUNC};
		int rc = fn(ctx, &f);
		if (rc) return rc;
	}
	return 0;
}

/* The symbol tables' sections (NULL where there is none) and .gnu.version's data. */
static void symbol_tables(const struct elfobj *o, Elf_Scn **dynsym, Elf_Scn **symtab,
			  Elf_Data **versym)
{
	Elf_Scn *scn = NULL;
	*dynsym = *symtab = NULL;
	*versym = NULL;
	while ((scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh)) continue;
		if (sh.sh_type == SHT_DYNSYM) *dynsym = scn;
		else if (sh.sh_type == SHT_SYMTAB) *symtab = scn;
		else if (sh.sh_type == SHT_GNU_versym) *versym = elf_getdata(scn, NULL);
	}
}

int elfobj_each_function(const struct elfobj *o, bool use_symtab, elfobj_function_fn fn, void *ctx)
{
	Elf_Data *versym;
	Elf_Scn *dynsym, *symtab;
	symbol_tables(o, &dynsym, &symtab, &versym);
	GElf_Shdr sh;
	int rc = 0;
	/* Only exported (.dynsym) definitions take part in dynamic binding. */
	if (dynsym && gelf_getshdr(dynsym, &sh)) rc = scan_functions(o, dynsym, &sh, versym, fn, ctx);
	if (!rc && use_symtab && symtab && gelf_getshdr(symtab, &sh))
		rc = scan_functions(o, symtab, &sh, NULL, fn, ctx);
	return rc;
}

static int find_in(const struct elfobj *o, Elf_Scn *scn, const char *name, uint64_t *vaddr,
		   uint64_t *size)
{
	GElf_Shdr sh;
	Elf_Data *data = gelf_getshdr(scn, &sh) ? elf_getdata(scn, NULL) : NULL;
	if (!data || sh.sh_entsize == 0) return -1;
	size_t n = sh.sh_size / sh.sh_entsize;
	if (n > ELFOBJ_MAX_SYMBOLS) n = ELFOBJ_MAX_SYMBOLS;
	for (size_t i = 0; i < n; i++) {
		GElf_Sym sym;
		if (!gelf_getsym(data, i, &sym)) break;
		if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
		const char *s = elf_strptr(o->elf, sh.sh_link, sym.st_name);
		if (s && strcmp(s, name) == 0) {
			*vaddr = sym.st_value;
			*size = sym.st_size;
			return 0;
		}
	}
	return -1;
}

int elfobj_find_symbol(const struct elfobj *o, const char *name, uint64_t *vaddr, uint64_t *size)
{
	Elf_Data *versym;
	Elf_Scn *dynsym, *symtab;
	symbol_tables(o, &dynsym, &symtab, &versym);
	if (dynsym && find_in(o, dynsym, name, vaddr, size) == 0) return 0;
	return symtab ? find_in(o, symtab, name, vaddr, size) : -1;
}

uint64_t elfobj_first_load(const struct elfobj *o)
{
	size_t phnum = 0;
	uint64_t low = UINT64_MAX;
	if (elf_getphdrnum(o->elf, &phnum) != 0) return 0;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(o->elf, i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < low)
			low = ph.p_vaddr - ph.p_offset;
	}
	return low == UINT64_MAX ? 0 : low;
}

bool elfobj_symbols_capped(const struct elfobj *o, bool use_symtab)
{
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;
		if (gelf_getshdr(scn, &sh) && sh.sh_entsize &&
		    (sh.sh_type == SHT_DYNSYM || (use_symtab && sh.sh_type == SHT_SYMTAB)) &&
		    sh.sh_size / sh.sh_entsize > ELFOBJ_MAX_SYMBOLS)
			return true;
	}
	return false;
}

static char *dup_string(const char *strtab, size_t strsz, uint64_t off)
{
	if (!strtab || off >= strsz) return NULL;
	size_t len = strnlen(strtab + off, strsz - off);
	if (len == strsz - off) return NULL;   /* not terminated inside the table */
	return strdup(strtab + off);
}

int elfobj_dynamic(const struct elfobj *o, struct elf_dynamic *d)
{
	memset(d, 0, sizeof(*d));
	size_t phnum = 0;
	if (elf_getphdrnum(o->elf, &phnum) != 0) return -1;
	GElf_Phdr dyn_ph = { 0 };
	bool have_dyn = false;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(o->elf, i, &ph)) continue;
		if (ph.p_type == PT_DYNAMIC) { dyn_ph = ph; have_dyn = true; }
		/* ld.so takes the first PT_INTERP (the kernel too); a second one is ignored */
		if (ph.p_type == PT_INTERP && !d->interp && ph.p_filesz > 0 && ph.p_filesz < PATH_MAX) {
			Elf_Data *data = elf_getdata_rawchunk(o->elf, ph.p_offset, ph.p_filesz, ELF_T_BYTE);
			if (data && data->d_buf)
				d->interp = strndup(data->d_buf, ph.p_filesz);
		}
	}
	if (!have_dyn) return 0;
	Elf_Data *dyn = elf_getdata_rawchunk(o->elf, dyn_ph.p_offset, dyn_ph.p_filesz, ELF_T_DYN);
	if (!dyn) return -1;
	size_t ndyn = dyn_ph.p_filesz / sizeof(Elf64_Dyn);
	uint64_t strtab_vaddr = 0, strsz = 0;
	for (size_t i = 0; i < ndyn; i++) {
		GElf_Dyn e;
		if (!gelf_getdyn(dyn, i, &e) || e.d_tag == DT_NULL) break;
		if (e.d_tag == DT_STRTAB) strtab_vaddr = e.d_un.d_ptr;
		if (e.d_tag == DT_STRSZ) strsz = e.d_un.d_val;
	}
	uint64_t strtab_off;
	if (!strtab_vaddr || !strsz || strsz > (64u << 20) ||
	    elfobj_vaddr_to_offset(o, strtab_vaddr, &strtab_off) != 0)
		return -1;
	Elf_Data *strdata = elf_getdata_rawchunk(o->elf, strtab_off, strsz, ELF_T_BYTE);
	if (!strdata || !strdata->d_buf) return -1;
	const char *strtab = strdata->d_buf;
	for (size_t i = 0; i < ndyn; i++) {
		GElf_Dyn e;
		if (!gelf_getdyn(dyn, i, &e) || e.d_tag == DT_NULL) break;
		char *s = NULL;
		switch (e.d_tag) {
		case DT_NEEDED:
			/* (a real object needs a few dozen; the target's file sets the count) */
			if (d->n_needed >= ELFOBJ_MAX_NEEDED) break;
			if (!(s = dup_string(strtab, strsz, e.d_un.d_val))) break;
			char **grown = realloc(d->needed, (d->n_needed + 1) * sizeof(*grown));
			if (!grown) { free(s); break; }
			d->needed = grown;
			d->needed[d->n_needed++] = s;
			break;
		case DT_RPATH:
			if (!d->rpath) d->rpath = dup_string(strtab, strsz, e.d_un.d_val);
			break;
		case DT_RUNPATH:
			if (!d->runpath) d->runpath = dup_string(strtab, strsz, e.d_un.d_val);
			break;
		case DT_SONAME:
			if (!d->soname) d->soname = dup_string(strtab, strsz, e.d_un.d_val);
			break;
		}
	}
	return 0;
}

void elf_dynamic_free(struct elf_dynamic *d)
{
	for (int i = 0; i < d->n_needed; i++) free(d->needed[i]);
	free(d->needed);
	free(d->rpath);
	free(d->runpath);
	free(d->soname);
	free(d->interp);
	memset(d, 0, sizeof(*d));
}

/* glibc's libc.so.6 carries its banner, "GNU C Library (...) stable release version 2.36.",
 * in .rodata: the version of the library actually mapped, even in another mount namespace. */
int elfobj_glibc_version(const struct elfobj *o, char *out, size_t outlen)
{
	size_t shstrndx;
	if (elf_getshdrstrndx(o->elf, &shstrndx) != 0) return -1;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS) continue;
		const char *name = elf_strptr(o->elf, shstrndx, sh.sh_name);
		if (!name || strcmp(name, ".rodata") != 0) continue;
		Elf_Data *data = elf_getdata(scn, NULL);
		if (!data || !data->d_buf) return -1;
		static const char key[] = "release version ";
		const char *hit = memmem(data->d_buf, data->d_size, key, sizeof(key) - 1);
		if (!hit) return -1;
		const char *v = hit + sizeof(key) - 1, *end = (const char *)data->d_buf + data->d_size;
		size_t n = 0;
		while (v + n < end && n + 1 < outlen && ((v[n] >= '0' && v[n] <= '9') || v[n] == '.'))
			n++;
		while (n > 0 && v[n - 1] == '.') n--;   /* the sentence's full stop */
		if (n == 0) return -1;
		memcpy(out, v, n);
		out[n] = 0;
		return 0;
	}
	return -1;
}
