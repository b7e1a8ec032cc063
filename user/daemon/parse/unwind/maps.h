/* The target's mappings as the unwinder should see them (see maps.c). Inside the unwind room. */
#ifndef MEMTRACED_UNWIND_MAPS_H
#define MEMTRACED_UNWIND_MAPS_H
#include <stddef.h>
#include <stdint.h>

enum maps_kind {
	MAPS_COPY,      /* a later mapping of an object already mapped (V8's builtins) */
	MAPS_ANON_EXEC, /* anonymous executable memory: JIT code */
};

struct maps_region {
	uint64_t start, end;
	enum maps_kind kind;
	uint64_t alias; /* a copy: where its first byte lies in the object's own mapping (0: nowhere) */
	char name[64];  /* anonymous: "[anon:jit]" or the name the program gave it ("[anon:NAME]");
			 * a copy: the object's base name */
};

struct maps_view {
	struct maps_region *r; /* sorted by start */
	size_t n;
};

/* From the text of /proc/PID/maps: fills v with the regions libdw must not see as part of an
 * object, and returns the text to give libdw (those lines left out), malloc'ed; NULL when out
 * of memory. */
char *maps_view_build(const char *text, struct maps_view *v);

/* The region holding pc, or NULL. */
const struct maps_region *maps_view_find(const struct maps_view *v, uint64_t pc);

void maps_view_free(struct maps_view *v);

/* The whole of a text file (NUL-terminated, malloc'ed; at most max bytes), or NULL. */
char *maps_read_file(const char *path, size_t max);
char *maps_read_fd(int fd, size_t max); /* the same, from an open file (left open) */

#endif
