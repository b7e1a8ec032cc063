/* One ELF object opened with libelf, read the way the dynamic linker reads it: exported
 * function definitions (with symbol versions), PT_LOAD segments (virtual address -> file
 * offset), the dynamic section, glibc's version string. Knows nothing of allocators. */
#ifndef MEMTRACED_ELF_ELFOBJ_H
#define MEMTRACED_ELF_ELFOBJ_H
#include <gelf.h>
#include <limits.h>
#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct elfobj {
	int fd;
	Elf *elf;
	const char *path;     /* as opened; borrowed from the caller */
	GElf_Ehdr ehdr;
	bool has_interp;      /* PT_INTERP: a dynamically linked program */
	bool has_dynamic;     /* PT_DYNAMIC */
};
/* Opens a file the target controls (its objects, scripts, ld.so's files) read-only, and only
 * if it is a regular file: a FIFO or a device planted at that path would block us or feed us
 * forever. -1 with errno otherwise (EINVAL: not a regular file). */
int open_regular(const char *path);
/* Reads at most len - 1 bytes of such a file into buf, NUL-terminated; the count or -1. */
ssize_t read_regular(const char *path, char *buf, size_t len);

/* Opens path; fails unless it is a 64-bit x86-64 ELF file. */
int elfobj_open(struct elfobj *o, const char *path, char *err, size_t errlen);
void elfobj_close(struct elfobj *o);
/* Virtual address in the file's own address space -> file offset (PT_LOAD segments). */
int elfobj_vaddr_to_offset(const struct elfobj *o, uint64_t vaddr, uint64_t *offset);

/* A function definition that dynamic binding can use. name is not NUL-terminated at
 * name_len when .symtab spells a version into it ("malloc@@GLIBC_2.2.5"). */
struct elf_function {
	const char *name;
	size_t name_len;
	uint64_t vaddr, size;
	bool ifunc;           /* STT_GNU_IFUNC: the symbol is a resolver, not the function */
};
/* Return non-zero to stop the walk (that value is returned). */
typedef int (*elfobj_function_fn)(void *ctx, const struct elf_function *f);
/* Every exported (.dynsym, default version) function definition, in table order; with
 * use_symtab also .symtab's global ones (static executables). Each table is read up to
 * ELFOBJ_MAX_SYMBOLS entries: a target's file sets how long the walk takes. */
int elfobj_each_function(const struct elfobj *o, bool use_symtab, elfobj_function_fn fn, void *ctx);
#define ELFOBJ_MAX_SYMBOLS (1u << 22)
/* Does a symbol table that elfobj_each_function reads hold more than ELFOBJ_MAX_SYMBOLS? */
bool elfobj_symbols_capped(const struct elfobj *o, bool use_symtab);

/* A defined symbol of any type (a function or data: _PyRuntime) by its exact name, in .dynsym
 * then .symtab: 0 with its st_value and st_size, -1 when there is none. */
int elfobj_find_symbol(const struct elfobj *o, const char *name, uint64_t *vaddr, uint64_t *size);
/* The virtual address of the file's offset 0 (the first PT_LOAD's p_vaddr - p_offset): its
 * mapping's start minus this is the load bias. */
uint64_t elfobj_first_load(const struct elfobj *o);
/* What ld.so reads from an object's dynamic section. Strings are malloc'ed. */
struct elf_dynamic {
	char **needed;
	int n_needed;
	char *rpath, *runpath, *soname;
	char *interp;         /* PT_INTERP, or NULL */
};
#define ELFOBJ_MAX_NEEDED 4096   /* DT_NEEDED entries read per object */
int elfobj_dynamic(const struct elfobj *o, struct elf_dynamic *d);
void elf_dynamic_free(struct elf_dynamic *d);
/* Finds "glibc's release version X.Y" in .rodata; 0 and the version in out if found. */
int elfobj_glibc_version(const struct elfobj *o, char *out, size_t outlen);

#endif
