/* Heap profiles in pprof's format (google/pprof's profile.proto, gzipped), built sample by
 * sample from memtrace location codes: the sample types of Go's heap profiles
 * (alloc_objects/count, alloc_space/bytes, inuse_objects/count, inuse_space/bytes), one pprof
 * Location per location code of a mapping, its inlined source locations as several Lines
 * (innermost first). Used by memtrace-pprof (a trace file) and by memtraced's
 * /debug/pprof/heap (its live tries, several processes in one profile: one mapping each).
 *
 * Built with protobuf-c's generated code for the schema (user/tools/profile.proto). Out of
 * memory is sticky: the calls after it do nothing and pp_gzip fails. */
#ifndef MEMTRACE_PPROF_BUILD_H
#define MEMTRACE_PPROF_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "memtrace.h"

enum { PP_ALLOC_OBJECTS, PP_ALLOC_SPACE, PP_INUSE_OBJECTS, PP_INUSE_SPACE, PP_NVALUES };

typedef struct pp_head {
	const char *default_type;   /* "inuse_space" (a heap profile) or "alloc_space" */
	double period;              /* bytes per sample */
	int64_t time_nanos, duration_nanos;
	const char *comment;        /* NULL: none */
} pp_head;

typedef struct pp_label {
	const char *key, *value;
} pp_label;

typedef struct pp_profile pp_profile;

pp_profile *pp_new(const pp_head *h);
void pp_free(pp_profile *p);

/* A mapping (an executable; its location codes are its own, resolved by locs): its id, 0 when
 * out of memory. */
uint32_t pp_mapping(pp_profile *p, const char *filename, mt_locations_fn locs, void *ctx);
/* A sample at the context codes[0..n) (outermost first, like memtrace backtraces) of mapping,
 * values in PP_* order (rounded; negative ones count as 0), with labels. 0 or -1. */
int pp_sample(pp_profile *p, uint32_t mapping, const uint64_t *codes, size_t n,
	      const double values[PP_NVALUES], const pp_label *labels, size_t nlabels);
/* drop_frames: frames whose function matches (and what they call) leave the samples when a
 * tool reads the profile, so pprof's top names the caller of an allocation wrapper. */
int pp_drop_frames(pp_profile *p, const char *regex);
/* Appends the shell pattern s ('*' any text) to the alternation *re (malloc'ed, grown). */
int pp_regex_add(char **re, size_t *len, size_t *cap, const char *s);

/* The profile, packed and gzipped (level 1..9) into *out (malloc'ed). 0, or -1 when out of
 * memory. */
int pp_gzip(pp_profile *p, int level, uint8_t **out, size_t *len);

#endif
