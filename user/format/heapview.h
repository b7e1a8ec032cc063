/* heapview: what the heap looked like, from a memtrace trace. Shared by the trace tools
 * memtrace-report, memtrace-flamegraph, memtrace-diff and memtrace-pprof.
 *
 * A trace is read once, streaming, through the format library's reader (memtrace.h). Every
 * allocation is charged to its call context: backtraces are interned into a trie of location
 * codes (one node per distinct prefix), so memory grows with the number of distinct stacks and
 * of blocks live at once, never with the length of the trace.
 *
 * Estimation (sampled traces). A trace samples allocated words with probability r (the
 * trace's sample_rate); an allocation of L words carries nsamples = n hits.
 *  - bytes: n / r words, i.e. n / r * word_size / 8 bytes (unbiased; memtrace_viewer's rule).
 *  - objects: each sampled allocation stands for 1 / P(sampled) objects of its size, where
 *    P(sampled) = 1 - (1 - r)^W and W is the number of words the sampler saw: L + 1 for
 *    OCaml heap blocks (the header word is sampled too), L for external (malloc) blocks,
 *    at least 1. This Horvitz-Thompson estimate is unbiased for any per-word Bernoulli or
 *    geometric sampler, and is exactly 1 per allocation when r = 1.
 *  - "live at time T": allocated at or before T and not collected by T.
 */
#ifndef MEMTRACE_HEAPVIEW_H
#define MEMTRACE_HEAPVIEW_H

#include <stdint.h>
#include <stdio.h>
#include "memtrace.h"

/* Estimated totals of one call context (or of a group of contexts). */
typedef struct hv_counts {
	double alloc_bytes, alloc_objects; /* allocated in the window */
	double live_bytes, live_objects;   /* still live at the end of the window */
	uint64_t alloc_events, live_events;   /* sampled allocations behind these */
	uint64_t alloc_samples, live_samples; /* sum of nsamples */
} hv_counts;

typedef struct hv_options {
	double from_s, to_s; /* time window in seconds since trace start; to_s < 0 = until the end */
	int lenient;         /* 1: a packet the reader skips is a warning; 0: it is an error */
	uint64_t until_us;   /* nonzero: the window ends at this absolute time, to_s ignored */
	/* called for each change of the live estimate in the window, in time order: a context's
	 * block allocated (bytes > 0) or freed (bytes < 0); NULL: none */
	void (*on_live)(void *arg, uint64_t time_us, uint32_t ctx, double bytes);
	void *on_live_arg;
} hv_options;

/* The moment the sampled live estimate of the window was highest (the earliest such moment):
 * its absolute time (the window's start when nothing was ever live), bytes and objects. Found
 * in the one pass of hv_load. */
typedef struct hv_peak {
	uint64_t time_us;
	double bytes, objects;
} hv_peak;

typedef struct hv_heap hv_heap;

/* Reads the whole trace at path. Returns NULL on error and sets *err to a malloc'd message
 * (the reader's for a malformed trace) that the caller frees. */
hv_heap *hv_load(const char *path, const hv_options *opt, char **err);
void hv_free(hv_heap *h);

const mt_trace_info *hv_info(const hv_heap *h);
uint64_t hv_end_time_us(const hv_heap *h);   /* end of the window: where tracing ended, or --to (absolute) */
const hv_counts *hv_total(const hv_heap *h);  /* the whole window */
hv_peak hv_get_peak(const hv_heap *h);
/* hv_load with the window ending at at_us (absolute, e.g. a peak's time): "live at the end" is
 * then live at that moment. */
hv_heap *hv_load_at(const char *path, const hv_options *opt, uint64_t at_us, char **err);

/* Contexts: 0 .. hv_context_count()-1; 0 is the empty backtrace. Only contexts with
 * allocations of their own have nonzero counts (interior trie nodes have zeros). */
uint32_t hv_context_count(const hv_heap *h);
const hv_counts *hv_context_counts(const hv_heap *h, uint32_t ctx);
uint32_t hv_context_depth(const hv_heap *h, uint32_t ctx);
uint32_t hv_context_parent(const hv_heap *h, uint32_t ctx);
uint64_t hv_context_code(const hv_heap *h, uint32_t ctx); /* the frame this node adds */
/* Fills codes[0 .. depth-1], outermost first; returns depth. codes must hold depth entries. */
uint32_t hv_context_stack(const hv_heap *h, uint32_t ctx, uint64_t *codes);

/* The location list of a code, outermost first (n >= 0); the strings live as long as h. */
int hv_lookup(const hv_heap *h, uint64_t code, const mt_location **locs);

/* Names used by every tool for a frame's innermost source location. */
const char *hv_defname(const mt_location *loc); /* "??" if empty */
const char *hv_filename(const mt_location *loc);

/* Allocation wrappers (heapview_wrappers.c): an allocation is attributed to the first frame of
 * its stack that is not an allocation function or a wrapper of one (xmalloc, g_malloc,
 * operator new, PyMem_Malloc, zmalloc...), by name (shell patterns), or for a frame without a
 * name (object+0xOFFSET) when every sample through it calls an allocation function directly
 * from it and it is called from two or more places. The stacks themselves keep every frame. */
typedef struct hv_wrapper_report {
	uint32_t unnamed_folded;   /* frames without a name taken as wrappers by the rule above */
	char example[128];         /* one of them */
} hv_wrapper_report;
/* Applies the default patterns plus extra[0..nextra) (none with keep: every frame is a site).
 * 0, or -1 when out of memory. */
int hv_apply_wrappers(hv_heap *h, const char *const *extra, int nextra, int keep,
		      hv_wrapper_report *rep);
/* Is the function name one of the allocation wrappers' default patterns or extra ones? */
int hv_is_wrapper_name(const char *name, const char *const *extra, int nextra);
/* The default patterns, NULL-terminated (for pprof's drop_frames). */
extern const char *const hv_default_wrappers[];
/* The context an allocation at ctx is attributed to: ctx, or its nearest ancestor whose frame
 * is not a wrapper (ctx itself when every frame is one). */
uint32_t hv_site_context(const hv_heap *h, uint32_t ctx);
/* Is ctx's frame taken as a wrapper (after hv_apply_wrappers)? */
int hv_context_skipped(const hv_heap *h, uint32_t ctx);
/* (heapview_wrappers.c) Per context, 1: its frame is a wrapper; h takes the malloc'd array. */
void hv_set_site_skip(hv_heap *h, uint8_t *skip);

/* How contexts are grouped into rows of a report or a diff. */
enum hv_group { HV_GROUP_FUNCTION, HV_GROUP_LINE, HV_GROUP_STACK };
int hv_parse_group(const char *s, enum hv_group *g); /* 0 ok, -1 unknown */

/* The group key of a context, written into a malloc'd string (NULL on out of memory):
 * function -> innermost function of the allocation site (after wrappers, hv_site_context);
 * line -> its "file:line" ("function (object)" without a line);
 * stack -> every frame, allocation site first, "file:line function" joined by " <- "
 * (inlined locations of one frame joined by " & "): the same text for the same symbolic
 * stack in two traces, whatever their location codes. */
char *hv_group_key(const hv_heap *h, uint32_t ctx, enum hv_group g);

/* Rows: contexts aggregated by group key. */
typedef struct hv_row {
	char *key;
	hv_counts counts;
	uint32_t heaviest_ctx; /* the context of the group with most bytes (by the sort field) */
	double heaviest_value;
	uint32_t ncontexts;
} hv_row;

typedef struct hv_rows {
	hv_row *rows;
	size_t n;
} hv_rows;

/* by_live: pick the heaviest context by live bytes instead of allocated bytes. */
int hv_group_rows(const hv_heap *h, enum hv_group g, int by_live, hv_rows *out);
void hv_rows_free(hv_rows *r);
/* Sorts the rows with cmp (qsort; an empty table has no array to sort). */
void hv_rows_sort(hv_rows *r, int (*cmp)(const void *, const void *));
/* Finds a row by key (linear; for tests and diff). */
const hv_row *hv_rows_find(const hv_rows *r, const char *key);

/* Prints the call stack of a context, allocation site first, one source location a line:
 * "    at function (file:line)" with inlined frames marked "[inlined]". */
void hv_print_stack(FILE *out, const hv_heap *h, uint32_t ctx, const char *indent, int max_frames);

/* Human bytes: "12.3 MiB". buf must hold 32 chars. */
const char *hv_human_bytes(double bytes, char *buf);

/* Estimation primitives (see the header comment). */
double hv_sample_bytes(const mt_trace_info *info, uint64_t nsamples);
double hv_sample_objects(const mt_trace_info *info, uint64_t length_words, enum mt_source src);

#endif
