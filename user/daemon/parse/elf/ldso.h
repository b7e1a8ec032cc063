/* The dynamic linker's view of a program about to run: its load order, emulated from the
 * executable's DT_NEEDED, RPATH/RUNPATH, LD_PRELOAD, /etc/ld.so.preload and ld.so.cache.
 * root is "" or "/proc/PID/root": the prefix that makes the target's paths openable here. */
#ifndef MEMTRACED_ELF_LDSO_H
#define MEMTRACED_ELF_LDSO_H
#include <limits.h>
#include <stddef.h>

struct objlist {
	char (*paths)[PATH_MAX];   /* openable paths (root prefix included), load order */
	int n, cap;
};
int objlist_add(struct objlist *l, const char *path);
void objlist_free(struct objlist *l);
/* Load order of a dynamically linked program, as ld.so builds it: the executable, LD_PRELOAD,
 * /etc/ld.so.preload, then DT_NEEDED breadth first. Missing libraries go into notes
 * ("; "-separated). */
int ldso_load_order(const char *root, const char *exe, struct objlist *out, char *notes,
                    size_t noteslen, char *err, size_t errlen);
/* Looks name up in root's /etc/ld.so.cache (x86-64 libc6 entries); 0 and the target path. */
int ldso_cache_lookup(const char *root, const char *name, char *out, size_t outlen);

#endif
