/* The live heap over time, by site (heapview_timeline.c): for memtrace-timeline, memtrace-report
 * --timeline and memtrace-html. Two passes over a trace: the first finds the window's end and
 * its peak, the second sums the live estimate of each context into time buckets. */
#ifndef MEMTRACE_HEAPVIEW_TIMELINE_H
#define MEMTRACE_HEAPVIEW_TIMELINE_H

#include "heapview.h"

typedef struct hv_change {
	uint32_t ctx, bucket;
	double bytes;
} hv_change;

typedef struct hv_series {
	char *key;        /* the group key (hv_group_key); NULL for "other" */
	uint32_t ctx;     /* its heaviest context at the peak: for its names */
	double *live;     /* live bytes at the end of each bucket */
	double at_peak;   /* live bytes in the bucket of the peak */
} hv_series;

typedef struct hv_timeline {
	uint64_t t0_us, t1_us; /* the window, absolute */
	int nbuckets;
	uint64_t *ends;        /* bucket i ends at ends[i] (absolute): evenly spaced before and after
				* the peak, one bucket ending exactly at it */
	int peak_bucket;       /* the bucket that ends at the peak */
	double *total;         /* live bytes at the end of each bucket */
	hv_series *series;     /* the top sites by live bytes in the peak's bucket, then "other" */
	int nseries;
	hv_peak peak;          /* exact (hv_get_peak) */
	hv_heap *h;            /* the trace (names, info), wrappers applied */
	/* with keep_changes: each context's change of live bytes per bucket, by context then
	 * bucket (a context's live bytes at a bucket's end: the sum of its changes up to it) */
	hv_change *changes;
	size_t nchanges;
} hv_timeline;

/* top: sites shown (the rest is "other"); wrappers as hv_apply_wrappers. NULL and *err (to
 * free) on error. */
hv_timeline *hv_timeline_load(const char *path, const hv_options *opt, int nbuckets,
			      enum hv_group g, int top, const char *const *wrappers, int nwrappers,
			      int keep_wrappers, char **err);
/* The same, keeping t->changes. */
hv_timeline *hv_timeline_load_changes(const char *path, const hv_options *opt, int nbuckets,
				      enum hv_group g, int top, char **err);
void hv_timeline_free(hv_timeline *t);

#endif
