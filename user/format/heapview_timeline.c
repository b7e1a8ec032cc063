/* The live heap over time, by site (see heapview_timeline.h). The second pass gets each change
 * of the live estimate (hv_options.on_live) and keeps, per context, the sum of its changes in
 * the bucket it is in; a context's sum is written out when it changes bucket, so the memory is
 * bounded by the events and usually far below them. */
#include "heapview_timeline.h"

#include <stdlib.h>
#include <string.h>


struct collect {
	uint64_t t0, t1, peak; /* buckets 0..pb end at or before the peak, the rest after it */
	int nbuckets, pb;
	hv_change *d;         /* flushed (ctx, bucket) sums */
	size_t n, cap;
	uint32_t *cur_bucket; /* per context: its open bucket + 1 (0: none) */
	double *cur_bytes;
	size_t nctx;
	int oom;
};

/* The bucket of time t: pb + 1 even buckets over (t0, peak], the rest over (peak, t1]. */
static int bucket_of(const struct collect *c, uint64_t t)
{
	if (t <= c->t0) return 0;
	if (t <= c->peak) {
		uint64_t b = (t - c->t0 - 1) * (uint64_t)(c->pb + 1) / (c->peak - c->t0);
		return b > (uint64_t)c->pb ? c->pb : (int)b;
	}
	int after = c->nbuckets - c->pb - 1;
	if (after <= 0 || c->t1 <= c->peak) return c->nbuckets - 1;
	uint64_t b = (t - c->peak - 1) * (uint64_t)after / (c->t1 - c->peak);
	return c->pb + 1 + (b >= (uint64_t)after ? after - 1 : (int)b);
}

static uint64_t bucket_end(const struct collect *c, int b)
{
	if (b <= c->pb) return c->t0 + (c->peak - c->t0) * (uint64_t)(b + 1) / (uint64_t)(c->pb + 1);
	int after = c->nbuckets - c->pb - 1;
	return c->peak + (c->t1 - c->peak) * (uint64_t)(b - c->pb) / (uint64_t)after;
}

static void push(struct collect *c, uint32_t ctx, uint32_t bucket, double bytes)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 4096;
		hv_change *g = realloc(c->d, cap * sizeof *g);
		if (!g) { c->oom = 1; return; }
		c->d = g;
		c->cap = cap;
	}
	c->d[c->n++] = (hv_change){ctx, bucket, bytes};
}

static void on_live(void *arg, uint64_t t, uint32_t ctx, double bytes)
{
	struct collect *c = arg;
	if (c->oom) return;
	if (ctx >= c->nctx) {
		size_t n = c->nctx ? c->nctx : 1024;
		while (n <= ctx) n *= 2;
		uint32_t *b = realloc(c->cur_bucket, n * sizeof *b);
		if (b) c->cur_bucket = b;
		double *y = b ? realloc(c->cur_bytes, n * sizeof *y) : NULL;
		if (!b || !y) { c->oom = 1; return; }
		c->cur_bytes = y;
		memset(c->cur_bucket + c->nctx, 0, (n - c->nctx) * sizeof *b);
		c->nctx = n;
	}
	uint32_t bucket = (uint32_t)bucket_of(c, t) + 1;
	if (c->cur_bucket[ctx] != bucket) {
		if (c->cur_bucket[ctx]) push(c, ctx, c->cur_bucket[ctx] - 1, c->cur_bytes[ctx]);
		c->cur_bucket[ctx] = bucket;
		c->cur_bytes[ctx] = 0;
	}
	c->cur_bytes[ctx] += bytes;
}

static int by_peak_bytes(const void *a, const void *b)
{
	const hv_series *x = a, *y = b;
	if (x->at_peak != y->at_peak) return x->at_peak < y->at_peak ? 1 : -1;
	return strcmp(x->key, y->key);
}

void hv_timeline_free(hv_timeline *t)
{
	if (!t) return;
	for (int i = 0; i < t->nseries; i++) {
		free(t->series[i].key);
		free(t->series[i].live);
	}
	free(t->series);
	free(t->total);
	free(t->changes);
	free(t->ends);
	hv_free(t->h);
	free(t);
}

static int by_ctx_bucket(const void *a, const void *b)
{
	const hv_change *x = a, *y = b;
	if (x->ctx != y->ctx) return x->ctx < y->ctx ? -1 : 1;
	return x->bucket < y->bucket ? -1 : x->bucket > y->bucket;
}

static hv_timeline *load(const char *path, const hv_options *opt, int nbuckets, enum hv_group g,
			 int top, const char *const *wrappers, int nwrappers, int keep_wrappers,
			 int keep_changes, char **err);

hv_timeline *hv_timeline_load(const char *path, const hv_options *opt, int nbuckets,
			      enum hv_group g, int top, const char *const *wrappers, int nwrappers,
			      int keep_wrappers, char **err)
{
	return load(path, opt, nbuckets, g, top, wrappers, nwrappers, keep_wrappers, 0, err);
}

hv_timeline *hv_timeline_load_changes(const char *path, const hv_options *opt, int nbuckets,
				      enum hv_group g, int top, char **err)
{
	return load(path, opt, nbuckets, g, top, NULL, 0, 0, 1, err);
}

static hv_timeline *load(const char *path, const hv_options *opt, int nbuckets, enum hv_group g,
			 int top, const char *const *wrappers, int nwrappers, int keep_wrappers,
			 int keep_changes, char **err)
{
	*err = NULL;
	if (nbuckets < 1) nbuckets = 1;
	hv_heap *first = hv_load(path, opt, err);
	if (!first) return NULL;
	const mt_trace_info *info = hv_info(first);
	struct collect c = {.nbuckets = nbuckets, .t1 = hv_end_time_us(first)};
	c.t0 = info->start_time_us + (opt->from_s > 0 ? (uint64_t)(opt->from_s * 1e6) : 0);
	if (c.t1 < c.t0) c.t1 = c.t0;
	c.peak = hv_get_peak(first).time_us;
	if (c.peak < c.t0) c.peak = c.t0;
	if (c.peak > c.t1) c.peak = c.t1;
	/* the peak's bucket where an even spacing would put it (at least one bucket before) */
	c.pb = c.t1 > c.t0 ? (int)((c.peak - c.t0) * (uint64_t)nbuckets / (c.t1 - c.t0)) : 0;
	if (c.pb >= nbuckets) c.pb = nbuckets - 1;
	if (c.peak == c.t1) c.pb = nbuckets - 1;
	if (c.peak == c.t0) c.pb = 0;
	if (c.peak < c.t1 && nbuckets > 1 && c.pb > nbuckets - 2) c.pb = nbuckets - 2;
	hv_free(first);

	hv_options o = *opt;
	o.on_live = on_live;
	o.on_live_arg = &c;
	hv_timeline *t = calloc(1, sizeof *t);
	hv_heap *h = t ? hv_load(path, &o, err) : NULL;
	if (!h || c.oom) goto fail;
	t->h = h;
	t->t0_us = c.t0;
	t->t1_us = c.t1;
	t->nbuckets = nbuckets;
	t->peak = hv_get_peak(h);
	t->peak_bucket = c.pb;
	t->ends = malloc((size_t)nbuckets * sizeof *t->ends);
	if (!t->ends) goto oom;
	for (int b = 0; b < nbuckets; b++) t->ends[b] = bucket_end(&c, b);
	for (uint32_t ctx = 0; ctx < c.nctx; ctx++) /* the open buckets */
		if (c.cur_bucket[ctx]) push(&c, ctx, c.cur_bucket[ctx] - 1, c.cur_bytes[ctx]);
	if (c.oom || hv_apply_wrappers(h, wrappers, nwrappers, keep_wrappers, NULL) < 0) goto oom;

	/* per context: its change per bucket -> live at each bucket's end, by group key */
	uint32_t nctx = hv_context_count(h);
	int *series_of = malloc(nctx * sizeof *series_of); /* -1: not yet known */
	t->total = calloc((size_t)nbuckets, sizeof *t->total);
	if (!series_of || !t->total) { free(series_of); goto oom; }
	for (uint32_t i = 0; i < nctx; i++) series_of[i] = -1;
	/* every key gets a series first; the top ones are kept after sorting */
	int cap = 0;
	for (size_t i = 0; i < c.n; i++) {
		uint32_t ctx = c.d[i].ctx;
		if (ctx >= nctx) continue;
		if (series_of[ctx] < 0) {
			char *key = hv_group_key(h, ctx, g);
			if (!key) { free(series_of); goto oom; }
			int found = -1;
			for (int k = 0; k < t->nseries && found < 0; k++)
				if (strcmp(t->series[k].key, key) == 0) found = k;
			if (found >= 0) free(key);
			else {
				if (t->nseries == cap) {
					cap = cap ? 2 * cap : 64;
					hv_series *s = realloc(t->series, (size_t)cap * sizeof *s);
					if (!s) { free(key); free(series_of); goto oom; }
					t->series = s;
				}
				hv_series *s = &t->series[t->nseries];
				*s = (hv_series){.key = key, .ctx = ctx,
						 .live = calloc((size_t)nbuckets, sizeof(double))};
				if (!s->live) { free(key); free(series_of); goto oom; }
				found = t->nseries++;
			}
			series_of[ctx] = found;
		}
		t->series[series_of[ctx]].live[c.d[i].bucket] += c.d[i].bytes;
	}
	free(series_of);
	for (int k = 0; k < t->nseries; k++) /* changes -> live at each bucket's end */
		for (int b = 1; b < nbuckets; b++) t->series[k].live[b] += t->series[k].live[b - 1];
	for (int k = 0; k < t->nseries; k++)
		for (int b = 0; b < nbuckets; b++) {
			if (t->series[k].live[b] < 1e-6) t->series[k].live[b] = 0; /* rounding dust */
			t->total[b] += t->series[k].live[b];
		}
	for (int k = 0; k < t->nseries; k++) t->series[k].at_peak = t->series[k].live[c.pb];
	if (t->nseries > 1) qsort(t->series, (size_t)t->nseries, sizeof *t->series, by_peak_bytes);
	/* the rest folded into "other" */
	if (top >= 0 && t->nseries > top) {
		hv_series other = {.key = NULL, .live = calloc((size_t)nbuckets, sizeof(double))};
		if (!other.live) goto oom;
		for (int k = top; k < t->nseries; k++) {
			for (int b = 0; b < nbuckets; b++) other.live[b] += t->series[k].live[b];
			other.at_peak += t->series[k].at_peak;
			free(t->series[k].key);
			free(t->series[k].live);
		}
		t->nseries = top + 1;
		t->series[top] = other;
	}
	if (keep_changes) {
		qsort(c.d, c.n, sizeof *c.d, by_ctx_bucket);
		t->changes = c.d;
		t->nchanges = c.n;
		c.d = NULL;
	}
	free(c.d);
	free(c.cur_bucket);
	free(c.cur_bytes);
	return t;
oom:
	if (!*err) *err = strdup("out of memory");
fail:
	if (!*err && c.oom) *err = strdup("out of memory");
	free(c.d);
	free(c.cur_bucket);
	free(c.cur_bytes);
	if (t) {
		if (!t->h) hv_free(h);
		hv_timeline_free(t);
	}
	return NULL;
}
