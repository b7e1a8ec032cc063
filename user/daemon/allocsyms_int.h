/* Internals of the allocation-site finder (allocsyms.c, elfobj.c, ldso.c, probesite.c). */
#ifndef MEMTRACED_ALLOCSYMS_INT_H
#define MEMTRACED_ALLOCSYMS_INT_H
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdarg.h>

#include "allocsyms.h"

/* One ELF object opened with libelf. */
struct elfobj {
	int fd;
	Elf *elf;
	const char *path;     /* as opened; borrowed from the caller */
	GElf_Ehdr ehdr;
	bool has_interp;      /* PT_INTERP: a dynamically linked program */
	bool has_dynamic;     /* PT_DYNAMIC */
};
/* Opens path; fails unless it is a 64-bit x86-64 ELF file. */
int elfobj_open(struct elfobj *o, const char *path, char *err, size_t errlen);
void elfobj_close(struct elfobj *o);
/* Virtual address in the file's own address space -> file offset (PT_LOAD segments). */
int elfobj_vaddr_to_offset(const struct elfobj *o, uint64_t vaddr, uint64_t *offset);

/* A function definition found in one object. */
struct fn_def {
	bool found;
	bool ifunc;           /* STT_GNU_IFUNC: the symbol is a resolver, not the function */
	uint64_t vaddr, size, offset;
};
/* The alloc functions this object exports: .dynsym definitions (GLOBAL/WEAK, default
 * version); with use_symtab also .symtab's global definitions (static executables). */
void elfobj_alloc_defs(const struct elfobj *o, bool use_symtab, struct fn_def defs[AF_COUNT]);

/* The allocation function (another one than fn) that defs[fn] calls or jumps to, directly,
 * through the PLT or through the GOT: then fn only forwards and is not probed. -1 if none
 * (forwarder.c). */
int elfobj_forwarding_target(const struct elfobj *o, const struct fn_def defs[AF_COUNT],
                             enum alloc_fn fn);

/* "jemalloc 5.3.0 (path)", "glibc 2.36 (path)", "tcmalloc (gperftools 2.10) (path)",
 * "mimalloc 2.0.9 compiled into the executable (path)"... (allocname.c) */
void allocator_describe(const char *path, bool is_exe, char *out, size_t len);

/* What ld.so reads from an object's dynamic section. Strings are malloc'ed. */
struct elf_dynamic {
	char **needed;
	int n_needed;
	char *rpath, *runpath, *soname;
	char *interp;         /* PT_INTERP, or NULL */
};
int elfobj_dynamic(const struct elfobj *o, struct elf_dynamic *d);
void elf_dynamic_free(struct elf_dynamic *d);
/* Finds "glibc's release version X.Y" in .rodata; 0 and the version in out if found. */
int elfobj_glibc_version(const struct elfobj *o, char *out, size_t outlen);

/* ld.so emulation for exec mode (ldso.c). root is "" or "/proc/PID/root": the prefix that
 * makes the target's paths openable from here. */
struct objlist {
	char (*paths)[PATH_MAX];   /* openable paths (root prefix included), load order */
	int n, cap;
};
int objlist_add(struct objlist *l, const char *path);
void objlist_free(struct objlist *l);
/* Load order of a dynamically linked program, as ld.so builds it: the executable, LD_PRELOAD,
 * /etc/ld.so.preload, then DT_NEEDED breadth first. Missing libraries go into notes. */
int ldso_load_order(const char *root, const char *exe, struct objlist *out, char *notes,
                    size_t noteslen, char *err, size_t errlen);
/* Looks name up in root's /etc/ld.so.cache (x86-64 libc6 entries); 0 and the target path. */
int ldso_cache_lookup(const char *root, const char *name, char *out, size_t outlen);

/* Appends a "; "-separated note (allocsyms.c). */
void notes_add(char *notes, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
