/* The allocator's name and version, for messages and the trace's context (sites/ private). */
#ifndef MEMTRACED_SITES_ALLOCNAME_H
#define MEMTRACED_SITES_ALLOCNAME_H
#include <stdbool.h>
#include <stddef.h>

/* "jemalloc 5.3.0 (path)", "glibc 2.36 (path)", "tcmalloc (gperftools 2.10) (path)",
 * "mimalloc 2.0.9 compiled into the executable (path)"... */
void allocator_describe(const char *path, bool is_exe, char *out, size_t len);

#endif
