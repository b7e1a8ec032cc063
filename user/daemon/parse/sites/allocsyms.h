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
 * - probe_offset may be after the entry: at the first instruction the kernel emulates (for
 *   free-likes after the NULL test); the arguments are still in their registers there
 *   (nothing before it writes them or branches away), and for allocating functions %rsp
 *   has not moved (the return address is at [rsp] for the return probe).
 * - A C++ operator or other extension that forwards to another allocation function (calls
 *   or jumps to it, directly or through the PLT/GOT) is not listed: the callee is probed, so
 *   each call is counted once (a note says so). */
#ifndef MEMTRACED_SITES_ALLOCSYMS_H
#define MEMTRACED_SITES_ALLOCSYMS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "protocol/sites.h"

/* Running process: objects from /proc/PID/maps, resolved as the dynamic linker binds symbols.
 * Returns 0, or -1 with a message in err. */
int alloc_sites_for_pid(pid_t pid, struct alloc_sites *out, char *err, size_t errlen);

/* A program about to be exec'd by a child (pid) that has not run yet: resolve from the
 * executable's DT_NEEDED / RUNPATH / ld.so.cache the way ld.so will. exe_path without a '/'
 * is searched in $PATH; LD_PRELOAD and LD_LIBRARY_PATH are taken from our environment (the
 * child inherits it). pid <= 0 means "in our own mount namespace". */
int alloc_sites_for_exec(const char *exe_path, pid_t pid, struct alloc_sites *out, char *err,
                         size_t errlen);

/* Allocation functions defined by objects pid maps now and `have` does not probe (a library
 * dlopen'ed since): every allocation function each such object defines itself (forwarders to
 * another allocation function left out), whoever binds to it (RTLD_DEEPBIND, dlsym).
 * added->n == 0 when nothing is new. Returns 0, or -1 with a message (sites_added.c). */
int alloc_sites_added(pid_t pid, const struct alloc_sites *have, struct alloc_sites *added,
		      char *err, size_t errlen);

#endif
