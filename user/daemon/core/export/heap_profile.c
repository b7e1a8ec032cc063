/* Heap profiles of the traced processes' tries (heap_profile.h). */
#include "heap_profile.h"
#include "heapview.h"
#include "pprof_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DEPTH 4096

int profile_base_take(struct profile_base *b, const struct trie *t)
{
	memset(b, 0, sizeof *b);
	b->trie = t;
	b->n_nodes = trie_node_count(t);
	b->next_id = trie_next_id(t);
	b->alloc_objects = malloc(b->n_nodes * sizeof *b->alloc_objects);
	b->alloc_bytes = malloc(b->n_nodes * sizeof *b->alloc_bytes);
	if (!b->alloc_objects || !b->alloc_bytes) {
		profile_base_free(b);
		return -1;
	}
	for (size_t i = 0; i < b->n_nodes; i++) {
		const struct trie_node *nd = trie_node(t, (uint32_t)i);
		b->alloc_objects[i] = nd->c.alloc_objects_est;
		b->alloc_bytes[i] = nd->c.alloc_bytes_est;
	}
	return 0;
}

void profile_base_free(struct profile_base *b)
{
	free(b->alloc_objects);
	free(b->alloc_bytes);
	memset(b, 0, sizeof *b);
}

/* The live blocks allocated in the window, summed per node. */
struct window_live {
	const struct trie *t;
	uint64_t from_id;
	double per_sample;
	double *objects, *bytes;
};

static int add_new_block(void *ctx, const struct trie_block *b)
{
	struct window_live *w = ctx;
	if (b->id < w->from_id) return 0;
	w->objects[b->node] += trie_object_weight(w->t, b->bytes);
	w->bytes[b->node] += (double)b->nsamples * w->per_sample;
	return 0;
}

static int add_proc(pp_profile *pp, const struct profile_proc *p, uint64_t *codes)
{
	const struct trie *t = p->trie;
	size_t n = trie_node_count(t);
	double per_sample = 8.0 / trie_rate(t);
	const struct profile_base *base = p->base && p->base->trie == t && p->base->n_nodes <= n ? p->base : NULL;
	struct window_live w = {.t = t, .per_sample = per_sample};
	if (base) {
		w.from_id = base->next_id;
		w.objects = calloc(n, sizeof *w.objects);
		w.bytes = calloc(n, sizeof *w.bytes);
		if (!w.objects || !w.bytes) goto oom;
		trie_for_each_live_block(t, add_new_block, &w);
	}
	uint32_t m = pp_mapping(pp, p->exe, p->locs, p->locs_ctx);
	char pid[16];
	snprintf(pid, sizeof pid, "%d", (int)p->pid);
	/* pid and comm; exe, service and container: names that outlive a restart */
	pp_label labels[5] = {{"pid", pid}, {"comm", p->comm}};
	int nlabels = 2;
	if (p->exe && p->exe[0]) labels[nlabels++] = (pp_label){"exe", p->exe};
	if (p->service && p->service[0]) labels[nlabels++] = (pp_label){"service", p->service};
	if (p->container && p->container[0]) labels[nlabels++] = (pp_label){"container", p->container};
	for (size_t i = 1; i < n; i++) {
		const struct trie_node *nd = trie_node(t, (uint32_t)i);
		double v[PP_NVALUES] = {nd->c.alloc_objects_est, nd->c.alloc_bytes_est,
					nd->c.live_objects_est, (double)nd->c.live_nsamples * per_sample};
		if (base) {
			v[PP_ALLOC_OBJECTS] -= i < base->n_nodes ? base->alloc_objects[i] : 0;
			v[PP_ALLOC_SPACE] -= i < base->n_nodes ? base->alloc_bytes[i] : 0;
			v[PP_INUSE_OBJECTS] = w.objects[i];
			v[PP_INUSE_SPACE] = w.bytes[i];
		}
		bool any = false;
		for (int k = 0; k < PP_NVALUES; k++) any = any || v[k] >= 0.5;
		if (!any) continue;
		size_t depth = trie_node_backtrace(t, (uint32_t)i, codes, MAX_DEPTH);
		if (pp_sample(pp, m, codes, depth < MAX_DEPTH ? depth : MAX_DEPTH, v, labels, nlabels) < 0) goto oom;
	}
	free(w.objects);
	free(w.bytes);
	return 0;
oom:
	free(w.objects);
	free(w.bytes);
	return -1;
}

/* drop_frames: the allocation wrappers memtrace-pprof names too. */
static int drop_wrappers(pp_profile *pp)
{
	char *re = NULL;
	size_t len = 0, cap = 0;
	int rc = 0;
	for (int i = 0; hv_default_wrappers[i] && rc == 0; i++)
		rc = pp_regex_add(&re, &len, &cap, hv_default_wrappers[i]);
	if (rc == 0) rc = pp_drop_frames(pp, re ? re : "");
	free(re);
	return rc;
}

int heap_profile(const struct profile_proc *procs, size_t n, bool allocs, unsigned window_s,
		 uint8_t **out, size_t *len)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t now_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
	char comment[160];
	snprintf(comment, sizeof comment, "memtraced: %zu traced process%s; %s; values estimated "
		 "from samples", n, n == 1 ? "" : "es", window_s ? "allocations of the window only"
		 : "since each was attached");
	pp_head head = {
		.default_type = allocs ? "alloc_space" : "inuse_space",
		.period = n ? 8.0 / trie_rate(procs[0].trie) : 0,
		.time_nanos = now_ns - (int64_t)window_s * 1000000000,
		.duration_nanos = (int64_t)window_s * 1000000000,
		.comment = comment,
	};
	pp_profile *pp = pp_new(&head);
	uint64_t *codes = malloc(MAX_DEPTH * sizeof *codes);
	int rc = pp && codes ? drop_wrappers(pp) : -1;
	for (size_t i = 0; i < n && rc == 0; i++) rc = add_proc(pp, &procs[i], codes);
	if (rc == 0) rc = pp_gzip(pp, 6, out, len);
	free(codes);
	pp_free(pp);
	return rc;
}
