/* Which allocation functions a target really calls, and where to put the uprobes.
 *
 * The objects of the target are searched the way the dynamic linker binds symbols: the
 * executable first, then the libraries in load order; the first definition of each function
 * wins (so an interposer such as libjemalloc, or a malloc defined by the executable, beats
 * libc). Pure userspace: libelf for symbols, capstone to choose probe sites.
 *
 * Notes for consumers:
 * - Functions that are aliases (glibc's aligned_alloc and memalign share one entry) are listed
 *   once, under the first name in enum order; their arguments are the same.
 * - Allocators call each other: glibc's realloc(NULL, n) calls malloc's entry and
 *   reallocarray tail-jumps to realloc, so a probe on each may see one user call twice.
 * - For free-like functions (alloc_fn_is_free), probe_offset may be after the entry: after
 *   the NULL test, or at the first instruction the kernel emulates; %rdi still holds the
 *   pointer there (nothing before it writes %rdi or branches away).
 * - A C++ operator or other extension that forwards to another allocation function (calls
 *   or jumps to it, directly or through the PLT/GOT) is not listed: the callee is probed, so
 *   each call is counted once (a note says so). */
#ifndef MEMTRACED_ALLOCSYMS_H
#define MEMTRACED_ALLOCSYMS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The functions probed. Values are the BPF attach cookies (enum mt_fn in
 * include/memtraced_events.h has the same values). Aliases (one entry, several names) are
 * listed under the first name in this order, so free comes before the delete family. */
enum alloc_fn {
	AF_MALLOC, AF_CALLOC, AF_REALLOC, AF_REALLOCARRAY, AF_FREE, AF_POSIX_MEMALIGN,
	AF_ALIGNED_ALLOC, AF_MEMALIGN, AF_VALLOC, AF_PVALLOC,
	/* C++ operator new (size first; aligned forms: alignment second) */
	AF_NEW, AF_NEW_ARRAY, AF_NEW_NOTHROW, AF_NEW_ARRAY_NOTHROW, AF_NEW_ALIGNED,
	AF_NEW_ARRAY_ALIGNED, AF_NEW_ALIGNED_NOTHROW, AF_NEW_ARRAY_ALIGNED_NOTHROW,
	/* C++ operator delete (pointer first) */
	AF_DELETE, AF_DELETE_ARRAY, AF_DELETE_SIZED, AF_DELETE_ARRAY_SIZED, AF_DELETE_NOTHROW,
	AF_DELETE_ARRAY_NOTHROW, AF_DELETE_ALIGNED, AF_DELETE_ARRAY_ALIGNED,
	AF_DELETE_SIZED_ALIGNED, AF_DELETE_ARRAY_SIZED_ALIGNED, AF_DELETE_ALIGNED_NOTHROW,
	AF_DELETE_ARRAY_ALIGNED_NOTHROW,
	/* jemalloc's non-standard API (sallocx and nallocx are queries: not probed) */
	AF_MALLOCX, AF_RALLOCX, AF_XALLOCX, AF_DALLOCX, AF_SDALLOCX,
	/* other names allocators export: cfree (tcmalloc, mimalloc), reallocf (mimalloc: frees
	 * the block when it fails) */
	AF_CFREE, AF_REALLOCF,
	AF_COUNT
};
const char *alloc_fn_name(enum alloc_fn fn);
/* free, operator delete, dallocx...: the pointer is the first argument and no return probe
 * is needed, so the probe may go after the entry (see probe_site_choose). */
bool alloc_fn_is_free(enum alloc_fn fn);
/* The C++ operators and the other extensions beyond the C standard functions: when such a
 * function only forwards to another allocation function (libstdc++'s operator new calls
 * malloc), it is not probed, the callee's probe sees the call (resolve() in allocsyms.c). */
bool alloc_fn_is_extension(enum alloc_fn fn);

struct probe_site {
	enum alloc_fn fn;
	char path[4096];        /* object file as reachable from us (through /proc/PID/root/...) */
	uint64_t entry_offset;  /* file offset of the function's entry (what uprobes take) */
	uint64_t probe_offset;  /* file offset where the probe goes: == entry_offset, or for free a
	                           later instruction the kernel emulates (after the NULL test) */
	bool emulated;          /* the kernel emulates the instruction at probe_offset (no
	                           single-step): informational */
};

#define MAX_PROBE_SITES 64
struct alloc_sites {
	struct probe_site sites[MAX_PROBE_SITES];
	int n;
	char allocator[128];    /* e.g. "glibc 2.36 (/usr/lib/x86_64-linux-gnu/libc.so.6)" */
	char notes[1024];       /* what was skipped and why (deleted mappings, unreadable or
	                           missing objects, ifuncs...), "; "-separated, maybe empty */
};

/* Running process: objects from /proc/PID/maps, resolved as the dynamic linker binds symbols.
 * Returns 0, or -1 with a message in err. */
int alloc_sites_for_pid(pid_t pid, struct alloc_sites *out, char *err, size_t errlen);

/* A program about to be exec'd by a child (pid) that has not run yet: resolve from the
 * executable's DT_NEEDED / RUNPATH / ld.so.cache the way ld.so will. exe_path without a '/'
 * is searched in $PATH; LD_PRELOAD and LD_LIBRARY_PATH are taken from our environment (the
 * child inherits it). pid <= 0 means "in our own mount namespace". */
int alloc_sites_for_exec(const char *exe_path, pid_t pid, struct alloc_sites *out, char *err,
                         size_t errlen);

/* Lower level, also used by the unit tests. */

/* Where to probe a function whose code (len bytes read from its entry, at virtual address
 * entry_vaddr, size of the function fn_size or 0 if unknown) is given. Returns the offset from
 * the entry: 0, or for a free-like function the instruction after a leading
 * `test %rdi,%rdi; je` when the kernel emulates it, else the first emulated instruction
 * reached by every call with %rdi intact (straight-line code before it that does not write
 * %rdi), when nothing else in the function jumps to it. *emulated tells whether the kernel
 * emulates the chosen instruction. */
uint64_t probe_site_choose(enum alloc_fn fn, const uint8_t *code, size_t len,
                           uint64_t entry_vaddr, uint64_t fn_size, bool *emulated);

/* Does the x86-64 kernel emulate this instruction instead of single-stepping it?
 * (arch/x86/kernel/uprobes.c: branch_setup_xol_ops, push_setup_xol_ops) */
bool probe_insn_emulated(const uint8_t *insn, size_t len);

#endif
