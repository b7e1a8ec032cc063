/* Attaching a tracer's programs to an allocator's sites, one file per attach mode
 * (kernel_probe.h says which kernel has which). Internal to the tracer room: each returns 0,
 * or -1 with a message (the links made so far stay in t, closed by tracer_detach). */
#ifndef MEMTRACED_ATTACH_MODES_H
#define MEMTRACED_ATTACH_MODES_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tracer_internal.h"

/* session uprobes: one link per object for the allocation functions, one for the frees */
int attach_session(struct tracer *t, const struct alloc_sites *s, char *err, size_t errlen);
/* uprobe_multi: per object an entry link, a return link and a free link */
int attach_multi(struct tracer *t, const struct alloc_sites *s, char *err, size_t errlen);
/* perf-event uprobes: per site an entry and a return probe, or a free probe */
int attach_perf(struct tracer *t, const struct alloc_sites *s, char *err, size_t errlen);

/* The sites of one object (uprobe_multi takes one path and many offsets), by kind. */
struct object_sites {
	const char *path;                     /* the object, as the site names it */
	uint64_t aoff[MAX_PROBE_SITES], acookie[MAX_PROBE_SITES]; /* allocation functions */
	uint64_t foff[MAX_PROBE_SITES], fcookie[MAX_PROBE_SITES]; /* frees */
	unsigned na, nf;
};
/* The next object's sites not done yet (done: s->n flags, set as they are taken); false when
 * every site is done. */
bool object_sites_next(const struct alloc_sites *s, bool *done, uint32_t owner,
                       struct object_sites *o);
/* One uprobe_multi link per object: which program, with which attach type, at which sites. */
struct object_link {
	int prog;           /* program fd */
	int attach_type;    /* UPROBE_ATTACH_MULTI or UPROBE_ATTACH_SESSION */
	bool retprobe;      /* return probes (MULTI only) */
	bool frees;         /* at the free functions, else at the allocation functions */
};
/* For every object of s, the n links in order (session and multi modes). */
int attach_by_object(struct tracer *t, const struct alloc_sites *s,
                     const struct object_link *links, int n, char *err, size_t errlen);
#endif
