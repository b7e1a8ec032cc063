/* Names of JIT code from the perf map a program writes (see perfmap.c). Inside the unwind room. */
#ifndef MEMTRACED_UNWIND_PERFMAP_H
#define MEMTRACED_UNWIND_PERFMAP_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct perfmap_entry {
	uint64_t start, end;
	uint32_t seq;  /* line number: a later line for the same code wins */
	uint32_t name; /* offset in names */
};

struct perfmap {
	struct perfmap_entry *e; /* sorted by start, then seq */
	size_t n;
	char *names;
	uint64_t read_ns; /* when last read (0: never) */
	bool absent;      /* no file at the last read */
	bool known, same_root; /* what perfmap_init found: */
	long nspid, uid;       /* its PID in its own namespace, its user */
};

/* Notes what naming pid's perf map takes, while it runs (same_root: its root is ours). */
void perfmap_init(struct perfmap *m, pid_t pid, bool same_root);

/* (Re)reads /tmp/perf-PID.map of pid (PID as the target's own namespace numbers it, under its
 * root), if the file belongs to the process's user or root; false if there is none to read. */
bool perfmap_load(struct perfmap *m, pid_t pid);

/* The name of the code holding pc, or NULL. */
const char *perfmap_find(const struct perfmap *m, uint64_t pc, uint64_t *start);

void perfmap_free(struct perfmap *m);

/* Parses perf map text into m (replacing what it held); false when out of memory. */
bool perfmap_parse(struct perfmap *m, const char *text);

#endif
