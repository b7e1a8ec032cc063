/* heapview: per-context heap accounting over a trace read by the format library's reader.
 * See heapview.h for the estimators. */
#include "heapview.h"
#include "hash.h"
#include "slot_index.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct hv_node {
	uint64_t code;
	uint32_t parent, depth;
	hv_counts counts;
} hv_node;

/* A sampled block that is live in the window: allocation id -> context and estimates. */
typedef struct hv_live {
	uint64_t id; /* UINT64_MAX = empty slot */
	uint32_t ctx;
	double bytes, objects;
	uint64_t samples;
} hv_live;

struct hv_heap {
	int fd;
	mt_reader *reader;
	mt_trace_info info;
	uint64_t end_time_us;
	hv_counts total;
	hv_peak peak;   /* the highest live estimate in the window */

	hv_node *nodes;
	uint32_t nnodes, cap_nodes;
	mt_slot_index children; /* (parent, code) -> node */

	hv_live *live;
	size_t live_cap, live_n;

	char *warning; /* first packet the reader skipped */
	int lenient;
	uint8_t *skip;  /* per context: its frame is an allocation wrapper (hv_set_site_skip) */
};

#define EMPTY_ID UINT64_MAX

static char *xstrdup_printf(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0) s = NULL;
	va_end(ap);
	return s;
}

/* ---------------------------------------------------------------- context trie */

static uint64_t child_hash(uint32_t parent, uint64_t code) { return mt_mix64(code * 31 + parent); }

static uint64_t node_hash(const void *ctx, uint32_t i)
{
	const hv_node *n = &((const hv_heap *)ctx)->nodes[i];
	return child_hash(n->parent, n->code);
}

static int64_t node_new(hv_heap *h, uint32_t parent, uint64_t code)
{
	if (h->nnodes == h->cap_nodes) {
		uint32_t cap = h->cap_nodes ? h->cap_nodes * 2 : 1024;
		hv_node *n = realloc(h->nodes, (size_t)cap * sizeof *n);
		if (!n) return -1;
		h->nodes = n;
		h->cap_nodes = cap;
	}
	hv_node *n = &h->nodes[h->nnodes];
	memset(n, 0, sizeof *n);
	n->code = code;
	n->parent = parent;
	n->depth = parent == UINT32_MAX ? 0 : h->nodes[parent].depth + 1;
	return h->nnodes++;
}

/* The child of parent for code, created if new. -1 on out of memory. */
static int64_t node_child(hv_heap *h, uint32_t parent, uint64_t code)
{
	mt_slot_index *ix = &h->children;
	if (mt_slot_reserve(ix, h->nnodes, 1024, node_hash, h) < 0) return -1;
	size_t j = mt_slot_first(ix, child_hash(parent, code));
	for (; ix->slots[j]; j = mt_slot_next(ix, j)) {
		const hv_node *n = &h->nodes[ix->slots[j] - 1];
		if (n->parent == parent && n->code == code) return ix->slots[j] - 1;
	}
	int64_t idx = node_new(h, parent, code);
	if (idx < 0) return -1;
	ix->slots[j] = (uint32_t)idx + 1;
	return idx;
}

/* ---------------------------------------------------------------- live blocks */

static size_t live_hash(uint64_t id, size_t cap) { return mt_mix64(id) & (cap - 1); }

static int live_grow(hv_heap *h)
{
	size_t cap = h->live_cap ? h->live_cap * 2 : 1024;
	hv_live *t = malloc(cap * sizeof *t);
	if (!t) return -1;
	for (size_t i = 0; i < cap; i++) t[i].id = EMPTY_ID;
	for (size_t i = 0; i < h->live_cap; i++) {
		if (h->live[i].id == EMPTY_ID) continue;
		size_t j = live_hash(h->live[i].id, cap);
		while (t[j].id != EMPTY_ID) j = (j + 1) & (cap - 1);
		t[j] = h->live[i];
	}
	free(h->live);
	h->live = t;
	h->live_cap = cap;
	return 0;
}

static int live_add(hv_heap *h, const hv_live *b)
{
	if ((h->live_n + 1) * 2 > h->live_cap && live_grow(h) < 0) return -1;
	size_t j = live_hash(b->id, h->live_cap);
	while (h->live[j].id != EMPTY_ID) j = (j + 1) & (h->live_cap - 1);
	h->live[j] = *b;
	h->live_n++;
	return 0;
}

/* Removes id; returns 1 and the block in *out if it was there. Backward-shift deletion keeps
 * linear probing correct without tombstones. */
static int live_remove(hv_heap *h, uint64_t id, hv_live *out)
{
	if (!h->live_cap) return 0;
	size_t mask = h->live_cap - 1, j = live_hash(id, h->live_cap);
	while (h->live[j].id != id) {
		if (h->live[j].id == EMPTY_ID) return 0;
		j = (j + 1) & mask;
	}
	*out = h->live[j];
	size_t hole = j;
	for (size_t k = (j + 1) & mask; h->live[k].id != EMPTY_ID; k = (k + 1) & mask) {
		size_t home = live_hash(h->live[k].id, h->live_cap);
		/* move k into the hole unless its home lies cyclically in (hole, k] */
		int stays = hole <= k ? (home > hole && home <= k) : (home > hole || home <= k);
		if (!stays) {
			h->live[hole] = h->live[k];
			hole = k;
		}
	}
	h->live[hole].id = EMPTY_ID;
	h->live_n--;
	return 1;
}

/* ---------------------------------------------------------------- estimation */

double hv_sample_bytes(const mt_trace_info *info, uint64_t nsamples)
{
	double rate = info->sample_rate > 0 ? info->sample_rate : 1.0;
	return (double)nsamples / rate * (info->word_size ? info->word_size : 64) / 8.0;
}

double hv_sample_objects(const mt_trace_info *info, uint64_t length_words, enum mt_source src)
{
	double rate = info->sample_rate;
	if (!(rate > 0) || rate >= 1) return 1.0;
	double words = (double)length_words + (src == MT_SOURCE_EXTERNAL ? 0 : 1);
	if (words < 1) words = 1;
	double p = -expm1(words * log1p(-rate)); /* 1 - (1-r)^W, accurate for tiny r */
	return p > 0 ? 1.0 / p : 1.0;
}

static void counts_add_alloc(hv_counts *c, const hv_live *b)
{
	c->alloc_bytes += b->bytes;
	c->alloc_objects += b->objects;
	c->alloc_events++;
	c->alloc_samples += b->samples;
}

static void counts_add_live(hv_counts *c, const hv_live *b, int sign)
{
	c->live_bytes += sign * b->bytes;
	c->live_objects += sign * b->objects;
	c->live_events += sign;
	c->live_samples += sign * (int64_t)b->samples;
}

/* ---------------------------------------------------------------- loading */

static void on_warning(void *ctx, const char *msg)
{
	hv_heap *h = ctx;
	if (!h->warning) h->warning = strdup(msg);
	if (h->lenient) fprintf(stderr, "warning: %s\n", msg); /* else it becomes the error */
}

void hv_free(hv_heap *h)
{
	if (!h) return;
	if (h->reader) mt_reader_close(h->reader);
	if (h->fd >= 0) close(h->fd);
	free(h->nodes);
	mt_slot_free(&h->children);
	free(h->live);
	free(h->warning);
	free(h->skip);
	free(h);
}

void hv_set_site_skip(hv_heap *h, uint8_t *skip)
{
	free(h->skip);
	h->skip = skip;
}

int hv_context_skipped(const hv_heap *h, uint32_t ctx) { return h->skip && h->skip[ctx]; }

uint32_t hv_site_context(const hv_heap *h, uint32_t ctx)
{
	if (!h->skip) return ctx;
	uint32_t c = ctx;
	while (h->nodes[c].depth > 0 && h->skip[c]) c = h->nodes[c].parent;
	return h->nodes[c].depth > 0 ? c : ctx; /* only wrappers: the allocation site itself */
}

/* Checks that every frame the trie did not know yet has a location event before its use
 * (G18: every consumer that resolves codes needs it). */
static int check_code(hv_heap *h, const char *path, uint64_t code, uint64_t id, char **err)
{
	const mt_location *locs;
	if (mt_reader_lookup(h->reader, code, &locs) >= 0) return 0;
	*err = xstrdup_printf("%s: malformed trace: allocation %llu references location code %llu, "
			      "which no earlier location event describes",
			      path, (unsigned long long)id, (unsigned long long)code);
	return -1;
}

hv_heap *hv_load(const char *path, const hv_options *opt, char **err)
{
	hv_options defaults = { .from_s = 0, .to_s = -1, .lenient = 0 };
	if (!opt) opt = &defaults;
	*err = NULL;
	hv_heap *h = calloc(1, sizeof *h);
	if (!h) { *err = strdup("out of memory"); return NULL; }
	h->lenient = opt->lenient;
	h->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (h->fd < 0) {
		*err = xstrdup_printf("%s: %s", path, strerror(errno));
		goto fail;
	}
	char *rerr = NULL;
	h->reader = mt_reader_open(h->fd, on_warning, h, &rerr);
	if (!h->reader) {
		*err = xstrdup_printf("%s: %s", path, rerr ? rerr : "cannot read trace");
		free(rerr);
		goto fail;
	}
	h->info = *mt_reader_info(h->reader);
	h->end_time_us = h->info.start_time_us;
	if (node_new(h, UINT32_MAX, 0) < 0) goto oom;

	uint64_t start = h->info.start_time_us;
	uint64_t from = opt->from_s > 0 ? start + (uint64_t)(opt->from_s * 1e6) : 0;
	uint64_t to = opt->until_us ? opt->until_us
		    : opt->to_s >= 0 ? start + (uint64_t)(opt->to_s * 1e6) : UINT64_MAX;
	h->peak.time_us = from > start ? from : start;

	/* path[i] = trie node of the backtrace prefix of length i of the previous allocation;
	 * common_prefix lets the next allocation start from there. */
	uint32_t *path_nodes = NULL;
	size_t path_cap = 0, path_len = 0;
	mt_event ev;
	int rc;
	int past_window = 0;
	while ((rc = mt_reader_next(h->reader, &ev)) > 0) {
		if (h->warning && !opt->lenient) break;
		if (ev.time_us > to) { /* the window is over: the rest cannot change it */
			past_window = 1;
			break;
		}
		h->end_time_us = ev.time_us;
		if (ev.type == MT_EV_COLLECT) {
			hv_live b;
			if (live_remove(h, ev.id, &b)) {
				counts_add_live(&h->nodes[b.ctx].counts, &b, -1);
				counts_add_live(&h->total, &b, -1);
				if (opt->on_live) opt->on_live(opt->on_live_arg, ev.time_us, b.ctx, -b.bytes);
			}
			continue;
		}
		if (ev.type != MT_EV_ALLOC) continue;

		if (ev.backtrace_len + 1 > path_cap) {
			size_t cap = ev.backtrace_len + 64;
			uint32_t *p = realloc(path_nodes, cap * sizeof *p);
			if (!p) { free(path_nodes); goto oom; }
			path_nodes = p;
			path_cap = cap;
		}
		path_nodes[0] = 0;
		size_t keep = ev.common_prefix < path_len ? ev.common_prefix : path_len;
		if (keep > ev.backtrace_len) keep = ev.backtrace_len;
		for (size_t i = keep; i < ev.backtrace_len; i++) {
			uint32_t before = h->nnodes;
			int64_t child = node_child(h, path_nodes[i], ev.backtrace[i]);
			if (child < 0) { free(path_nodes); goto oom; }
			if (h->nnodes != before && check_code(h, path, ev.backtrace[i], ev.id, err) < 0) {
				free(path_nodes);
				goto fail;
			}
			path_nodes[i + 1] = (uint32_t)child;
		}
		path_len = ev.backtrace_len;
		if (ev.time_us < from) continue;

		hv_live b = {
			.id = ev.id,
			.ctx = path_nodes[ev.backtrace_len],
			.bytes = hv_sample_bytes(&h->info, ev.nsamples),
			.objects = hv_sample_objects(&h->info, ev.length, ev.source),
			.samples = ev.nsamples,
		};
		counts_add_alloc(&h->nodes[b.ctx].counts, &b);
		counts_add_alloc(&h->total, &b);
		counts_add_live(&h->nodes[b.ctx].counts, &b, 1);
		counts_add_live(&h->total, &b, 1);
		if (live_add(h, &b) < 0) { free(path_nodes); goto oom; }
		if (opt->on_live) opt->on_live(opt->on_live_arg, ev.time_us, b.ctx, b.bytes);
		/* only an allocation raises the live total: the peak is after one (the earliest
		 * moment of the highest total) */
		if (h->total.live_bytes > h->peak.bytes) {
			h->peak.time_us = ev.time_us;
			h->peak.bytes = h->total.live_bytes;
			h->peak.objects = h->total.live_objects;
		}
	}
	free(path_nodes);
	/* The window ends where tracing ended (the writer's last packet: memtraced closes a trace
	 * with an empty one at that time; an xz run of 20 s read "0.102 s", its last event), or
	 * at --to when the trace goes on past it. */
	uint64_t packets_end = mt_reader_packets_end_us(h->reader);
	if (past_window)
		h->end_time_us = to;
	else if (packets_end > h->end_time_us)
		h->end_time_us = packets_end < to ? packets_end : to;
	if (rc < 0) {
		*err = xstrdup_printf("%s: %s", path, mt_reader_error(h->reader));
		goto fail;
	}
	if (h->warning && !opt->lenient) {
		*err = xstrdup_printf("%s: malformed trace: %s (use --lenient to skip such packets)",
				      path, h->warning);
		goto fail;
	}
	/* Sums of freed blocks leave rounding dust behind: nothing live means exactly 0. */
	for (uint32_t i = 0; i < h->nnodes; i++)
		if (!h->nodes[i].counts.live_events)
			h->nodes[i].counts.live_bytes = h->nodes[i].counts.live_objects = 0;
	if (!h->total.live_events) h->total.live_bytes = h->total.live_objects = 0;
	/* The live table is not needed any more: only the per-context sums are. */
	free(h->live);
	h->live = NULL;
	h->live_cap = h->live_n = 0;
	return h;
oom:
	*err = strdup("out of memory");
fail:
	hv_free(h);
	return NULL;
}

/* ---------------------------------------------------------------- accessors */

const mt_trace_info *hv_info(const hv_heap *h) { return &h->info; }
uint64_t hv_end_time_us(const hv_heap *h) { return h->end_time_us; }

hv_peak hv_get_peak(const hv_heap *h) { return h->peak; }

hv_heap *hv_load_at(const char *path, const hv_options *opt, uint64_t at_us, char **err)
{
	hv_options o = *opt;
	o.until_us = at_us ? at_us : 1; /* (0 means unset: the first microsecond instead) */
	return hv_load(path, &o, err);
}
const hv_counts *hv_total(const hv_heap *h) { return &h->total; }
uint32_t hv_context_count(const hv_heap *h) { return h->nnodes; }
const hv_counts *hv_context_counts(const hv_heap *h, uint32_t c) { return &h->nodes[c].counts; }
uint32_t hv_context_depth(const hv_heap *h, uint32_t c) { return h->nodes[c].depth; }
uint32_t hv_context_parent(const hv_heap *h, uint32_t c) { return h->nodes[c].parent; }
uint64_t hv_context_code(const hv_heap *h, uint32_t c) { return h->nodes[c].code; }

uint32_t hv_context_stack(const hv_heap *h, uint32_t c, uint64_t *codes)
{
	uint32_t depth = h->nodes[c].depth;
	for (uint32_t i = depth; i > 0; i--) {
		codes[i - 1] = h->nodes[c].code;
		c = h->nodes[c].parent;
	}
	return depth;
}

int hv_lookup(const hv_heap *h, uint64_t code, const mt_location **locs)
{
	return mt_reader_lookup(h->reader, code, locs);
}

const char *hv_defname(const mt_location *loc)
{
	return loc && loc->defname && *loc->defname ? loc->defname : "??";
}

const char *hv_filename(const mt_location *loc)
{
	return loc && loc->filename && *loc->filename ? loc->filename : "??";
}

const char *hv_human_bytes(double bytes, char *buf)
{
	static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int u = 0;
	double v = bytes < 0 ? -bytes : bytes;
	while (v >= 1024 && u < 5) { v /= 1024; u++; }
	if (u == 0) snprintf(buf, 32, "%s%.0f B", bytes < 0 ? "-" : "", v);
	else snprintf(buf, 32, "%s%.1f %s", bytes < 0 ? "-" : "", v, units[u]);
	return buf;
}
