/* Which allocator an object is, and its version, for the trace's context string:
 * "jemalloc 5.3.0 (/usr/lib/x86_64-linux-gnu/libjemalloc.so.2)". Recognized by what the
 * object defines (tcmalloc and mimalloc also export glibc's __libc_malloc names, so the
 * distinctive names are checked first), not by its file name, so that an allocator compiled
 * into an executable is named too. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "allocname.h"
#include "elf/elfobj.h"

/* Looks a defined function up in .dynsym, then .symtab; its value, or 0. */
static uint64_t defined_symbol(const struct elfobj *o, const char *want)
{
	uint64_t found = 0;
	for (int pass = 0; pass < 2 && !found; pass++) {
		Elf_Scn *scn = NULL;
		while (!found && (scn = elf_nextscn(o->elf, scn))) {
			GElf_Shdr sh;
			if (!gelf_getshdr(scn, &sh) || sh.sh_entsize == 0 ||
			    sh.sh_type != (pass == 0 ? SHT_DYNSYM : SHT_SYMTAB))
				continue;
			Elf_Data *data = elf_getdata(scn, NULL);
			size_t n = data ? sh.sh_size / sh.sh_entsize : 0;
			if (n > ELFOBJ_MAX_SYMBOLS) n = ELFOBJ_MAX_SYMBOLS;
			for (size_t i = 0; i < n; i++) {
				GElf_Sym sym;
				if (!gelf_getsym(data, i, &sym)) break;
				if (sym.st_shndx == SHN_UNDEF || GELF_ST_TYPE(sym.st_info) != STT_FUNC) continue;
				const char *name = elf_strptr(o->elf, sh.sh_link, sym.st_name);
				size_t len = strlen(want);
				if (name && strncmp(name, want, len) == 0 && (name[len] == 0 || name[len] == '@')) {
					found = sym.st_value;
					break;
				}
			}
		}
	}
	return found;
}

/* Calls fn(bytes, size, arg) on each allocated, non-executable PROGBITS section (the
 * read-only data) until it returns non-zero. */
static int each_rodata(const struct elfobj *o, int (*fn)(const char *, size_t, void *), void *arg)
{
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC) ||
		    (sh.sh_flags & (SHF_EXECINSTR | SHF_WRITE)))
			continue;
		Elf_Data *data = elf_getdata(scn, NULL);
		if (data && data->d_buf && fn(data->d_buf, data->d_size, arg)) return 1;
	}
	return 0;
}

struct version_out {
	char *out;
	size_t len;
};

/* jemalloc's JEMALLOC_VERSION: "5.3.0-0-g<40 hex digits>". */
static int find_jemalloc_version(const char *buf, size_t size, void *arg)
{
	struct version_out *v = arg;
	/* the tag distance may be any number: look for "-g" followed by 40 hex digits */
	const char *end = buf + size;
	for (const char *g = buf; g + 42 <= end && (g = memmem(g, end - g, "-g", 2)); g += 2) {
		size_t hex = 0;
		while (g + 2 + hex < end && isxdigit((unsigned char)g[2 + hex])) hex++;
		if (hex != 40) continue;
		const char *start = g;   /* back over "-N" then "X.Y.Z" */
		while (start > buf && isdigit((unsigned char)start[-1])) start--;
		if (start == g || start <= buf || start[-1] != '-') continue;
		const char *ver_end = start - 1, *ver = ver_end;
		while (ver > buf && (isdigit((unsigned char)ver[-1]) || ver[-1] == '.')) ver--;
		if (ver == ver_end || !memchr(ver, '.', ver_end - ver)) continue;
		snprintf(v->out, v->len, "%.*s", (int)(ver_end - ver), ver);
		return 1;
	}
	return 0;
}

/* gperftools' TC_VERSION_STRING: "gperftools 2.10". */
static int find_gperftools_version(const char *buf, size_t size, void *arg)
{
	struct version_out *v = arg;
	static const char key[] = "gperftools ";
	const char *end = buf + size;
	for (const char *p = buf; (p = memmem(p, end - p, key, sizeof(key) - 1)); p++) {
		const char *d = p + sizeof(key) - 1;
		size_t n = 0;
		while (d + n < end && (isdigit((unsigned char)d[n]) || d[n] == '.')) n++;
		if (n && isdigit((unsigned char)d[0])) {
			snprintf(v->out, v->len, "%.*s", (int)n, d);
			return 1;
		}
	}
	return 0;
}

/* mimalloc's mi_version() is `mov $VERSION,%eax; ret`, VERSION = major*100 + minor*10 + patch. */
static int mimalloc_version(const struct elfobj *o, char *out, size_t len)
{
	uint64_t vaddr = defined_symbol(o, "mi_version"), off;
	uint8_t b[6];
	if (!vaddr || elfobj_vaddr_to_offset(o, vaddr, &off) != 0 || pread(o->fd, b, 6, off) != 6)
		return -1;
	size_t i = 0;
	if (b[0] == 0xf3 && b[1] == 0x0f) return -1;   /* endbr64 first: not worth decoding */
	if (b[i] != 0xb8 || b[i + 5] != 0xc3) return -1;
	uint32_t v;
	memcpy(&v, b + 1, 4);
	if (v == 0 || v > 9999) return -1;
	snprintf(out, len, "%u.%u.%u", v / 100, v / 10 % 10, v % 10);
	return 0;
}

void allocator_describe(const char *path, bool is_exe, char *out, size_t len)
{
	struct elfobj o;
	char err[256], version[64] = "";
	const char *name = NULL;
	if (elfobj_open(&o, path, err, sizeof(err)) == 0) {
		struct version_out v = { version, sizeof(version) };
		if (defined_symbol(&o, "mallocx") || defined_symbol(&o, "je_mallocx")) {
			name = "jemalloc";
			each_rodata(&o, find_jemalloc_version, &v);
		} else if (defined_symbol(&o, "tc_malloc")) {
			name = "tcmalloc";
			each_rodata(&o, find_gperftools_version, &v);
			if (version[0]) {   /* "tcmalloc (gperftools 2.10)" */
				char g[64];
				snprintf(g, sizeof(g), "(gperftools %s)", version);
				snprintf(version, sizeof(version), "%s", g);
			}
		} else if (defined_symbol(&o, "mi_malloc")) {
			name = "mimalloc";
			mimalloc_version(&o, version, sizeof(version));
		} else if (elfobj_glibc_version(&o, version, sizeof(version)) == 0) {
			name = "glibc";
		} else if (defined_symbol(&o, "__libc_malloc") && defined_symbol(&o, "__libc_start_main")) {
			name = "glibc";   /* a static program: the version banner is not linked in */
		}
		elfobj_close(&o);
	}
	if (!name) {
		/* unknown code: the file's name says what it is, if anything */
		const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
		snprintf(out, len, "%s (%s)", is_exe ? "the executable's own allocator" : base, path);
		return;
	}
	snprintf(out, len, "%s%s%s %s(%s)", name, version[0] ? " " : "", version,
	         is_exe ? "compiled into the executable " : "", path);
}
