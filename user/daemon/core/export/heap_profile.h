/* --listen's /debug/pprof/heap and /debug/pprof/allocs: Go's heap profile layout (sample types
 * alloc_objects, alloc_space, inuse_objects, inuse_space) built from the tries of the traced
 * processes, one pprof mapping and the labels pid and comm per process, the allocation
 * wrappers in drop_frames as memtrace-pprof does. Values are estimates from the samples: bytes
 * as nsamples / rate * 8, objects each sampled block weighted by 1 / P(sampled).
 *
 * A window (Go's ?seconds=N): a base taken at its start; the profile then holds only what was
 * allocated since (alloc_*: the counters' growth; inuse_*: the live blocks allocated since). */
#ifndef MEMTRACED_HEAP_PROFILE_H
#define MEMTRACED_HEAP_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "memtrace.h"
#include "model/trie.h"

/* A process's counters at the start of a window. */
struct profile_base {
	pid_t pid;                /* the caller's: whose it is */
	const struct trie *trie;  /* the trie it was taken of (a process that exec'd has another) */
	size_t n_nodes;
	uint64_t next_id;         /* blocks allocated later have ids from here */
	double *alloc_objects, *alloc_bytes; /* per node */
};
/* 0, or -1 when out of memory. */
int profile_base_take(struct profile_base *b, const struct trie *t);
void profile_base_free(struct profile_base *b);

struct profile_proc {
	pid_t pid;
	const char *comm, *exe;
	const char *service, *container; /* labels too where not NULL nor "" (export/labels.h) */
	const struct trie *trie;
	mt_locations_fn locs;
	void *locs_ctx;
	const struct profile_base *base; /* NULL, or one of another trie: everything since attach */
};

/* The gzipped profile of procs[0..n) into *out (malloc'ed), default sample type inuse_space
 * (allocs: alloc_space); window_s > 0 says the length of the window the bases began. 0, or -1
 * when out of memory. */
int heap_profile(const struct profile_proc *procs, size_t n, bool allocs, unsigned window_s,
		 uint8_t **out, size_t *len);

#endif
