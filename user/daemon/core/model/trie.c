/* The context trie and the table of live sampled blocks (see trie.h).
 *
 * Nodes live in one growing array; the edges (parent, code) -> child are one open-addressing
 * hash table of node indices, so a node costs its struct plus a few slots. Live blocks are an
 * open-addressing table keyed by the record seq, with backward-shift deletion (no tombstones),
 * so a long run of alloc/free pairs does not grow it. */
#include "trie.h"
#include "hash.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct trie {
	double rate;
	double log_miss; /* log(1 - rate): a word is not sampled */
	uint64_t next_id;
	struct trie_node *nodes;
	size_t n_nodes, cap_nodes;
	uint32_t *edges; /* node index or TRIE_NONE; key = (nodes[i].parent, nodes[i].code) */
	size_t edge_cap; /* power of two */
	struct trie_block *blocks; /* empty slot: node == TRIE_NONE */
	size_t n_blocks, block_cap; /* power of two */
};

static size_t edge_hash(uint32_t parent, uint64_t code)
{
	return (size_t)mt_mix64(code ^ ((uint64_t)parent * 0x9e3779b97f4a7c15ULL));
}

struct trie *trie_new(double rate)
{
	struct trie *t = calloc(1, sizeof *t);
	if (!t) return NULL;
	t->rate = rate;
	t->log_miss = log1p(-rate);
	t->cap_nodes = 256;
	t->edge_cap = 512;
	t->block_cap = 1024;
	t->nodes = malloc(t->cap_nodes * sizeof *t->nodes);
	t->edges = malloc(t->edge_cap * sizeof *t->edges);
	t->blocks = malloc(t->block_cap * sizeof *t->blocks);
	if (!t->nodes || !t->edges || !t->blocks) {
		trie_free(t);
		return NULL;
	}
	memset(t->edges, 0xff, t->edge_cap * sizeof *t->edges);
	for (size_t i = 0; i < t->block_cap; i++) t->blocks[i].node = TRIE_NONE;
	t->nodes[0] = (struct trie_node){.code = 0, .parent = TRIE_NONE, .depth = 0};
	t->n_nodes = 1;
	return t;
}

void trie_free(struct trie *t)
{
	if (!t) return;
	free(t->nodes);
	free(t->edges);
	free(t->blocks);
	free(t);
}

static int edges_grow(struct trie *t)
{
	size_t cap = t->edge_cap * 2;
	uint32_t *e = malloc(cap * sizeof *e);
	if (!e) return -1;
	memset(e, 0xff, cap * sizeof *e);
	for (size_t i = 1; i < t->n_nodes; i++) {
		size_t h = edge_hash(t->nodes[i].parent, t->nodes[i].code) & (cap - 1);
		while (e[h] != TRIE_NONE) h = (h + 1) & (cap - 1);
		e[h] = (uint32_t)i;
	}
	free(t->edges);
	t->edges = e;
	t->edge_cap = cap;
	return 0;
}

/* The child of parent for code, created if missing. */
static uint32_t child(struct trie *t, uint32_t parent, uint64_t code)
{
	size_t mask = t->edge_cap - 1, h = edge_hash(parent, code) & mask;
	for (; t->edges[h] != TRIE_NONE; h = (h + 1) & mask) {
		const struct trie_node *n = &t->nodes[t->edges[h]];
		if (n->parent == parent && n->code == code) return t->edges[h];
	}
	if (t->n_nodes >= TRIE_NONE - 1) return TRIE_NONE;
	if (t->n_nodes == t->cap_nodes) {
		struct trie_node *nn = realloc(t->nodes, 2 * t->cap_nodes * sizeof *nn);
		if (!nn) return TRIE_NONE;
		t->nodes = nn;
		t->cap_nodes *= 2;
	}
	uint32_t idx = (uint32_t)t->n_nodes++;
	t->nodes[idx] = (struct trie_node){
		.code = code, .parent = parent, .depth = t->nodes[parent].depth + 1};
	/* keep the load factor under 1/2 */
	if (2 * t->n_nodes > t->edge_cap) {
		if (edges_grow(t) < 0) {
			t->n_nodes--;
			return TRIE_NONE;
		}
		return idx; /* edges_grow inserted it */
	}
	t->edges[h] = idx;
	return idx;
}

uint32_t trie_intern(struct trie *t, const uint64_t *codes, size_t n)
{
	uint32_t node = TRIE_ROOT;
	for (size_t i = 0; i < n && node != TRIE_NONE; i++) node = child(t, node, codes[i]);
	return node;
}

static size_t block_slot(const struct trie *t, uint64_t key)
{
	return (size_t)mt_mix64(key) & (t->block_cap - 1);
}

static int blocks_grow(struct trie *t)
{
	size_t cap = t->block_cap * 2;
	struct trie_block *b = malloc(cap * sizeof *b);
	if (!b) return -1;
	for (size_t i = 0; i < cap; i++) b[i].node = TRIE_NONE;
	for (size_t i = 0; i < t->block_cap; i++) {
		if (t->blocks[i].node == TRIE_NONE) continue;
		size_t h = (size_t)mt_mix64(t->blocks[i].key) & (cap - 1);
		while (b[h].node != TRIE_NONE) h = (h + 1) & (cap - 1);
		b[h] = t->blocks[i];
	}
	free(t->blocks);
	t->blocks = b;
	t->block_cap = cap;
	return 0;
}

int trie_block_alloc(struct trie *t, uint64_t key, uint64_t id, uint32_t node, uint64_t bytes,
		     uint64_t nsamples)
{
	if (node >= t->n_nodes) return -1;
	size_t mask = t->block_cap - 1, h = block_slot(t, key);
	for (; t->blocks[h].node != TRIE_NONE; h = (h + 1) & mask)
		if (t->blocks[h].key == key) return -1;
	struct trie_counters *c = &t->nodes[node].c;
	c->allocs++;
	if (id >= t->next_id) t->next_id = id + 1;
	c->alloc_nsamples += nsamples;
	c->alloc_bytes_est += (double)nsamples / t->rate * 8.0;
	double weight = trie_object_weight(t, bytes);
	c->alloc_objects_est += weight;
	if (2 * (t->n_blocks + 1) > t->block_cap) {
		if (blocks_grow(t) < 0) return -1;
		mask = t->block_cap - 1;
		for (h = block_slot(t, key); t->blocks[h].node != TRIE_NONE; h = (h + 1) & mask) {}
	}
	t->blocks[h] = (struct trie_block){
		.key = key, .id = id, .bytes = bytes, .nsamples = nsamples, .node = node};
	t->n_blocks++;
	c->live_blocks++;
	c->live_bytes += bytes;
	c->live_nsamples += nsamples;
	c->live_objects_est += weight;
	return 0;
}

int trie_block_free(struct trie *t, uint64_t key, struct trie_block *out)
{
	size_t mask = t->block_cap - 1, h = block_slot(t, key);
	for (; t->blocks[h].node != TRIE_NONE; h = (h + 1) & mask)
		if (t->blocks[h].key == key) break;
	if (t->blocks[h].node == TRIE_NONE) return 0;
	struct trie_block b = t->blocks[h];
	struct trie_counters *c = &t->nodes[b.node].c;
	c->live_blocks--;
	c->live_bytes -= b.bytes;
	c->live_nsamples -= b.nsamples;
	c->live_objects_est = c->live_blocks ? c->live_objects_est - trie_object_weight(t, b.bytes) : 0;
	if (out) *out = b;
	/* backward-shift deletion: pull later members of the probe run into the hole */
	size_t hole = h;
	for (size_t j = (h + 1) & mask; t->blocks[j].node != TRIE_NONE; j = (j + 1) & mask) {
		size_t home = block_slot(t, t->blocks[j].key);
		/* j may move to hole iff its home is not in the cyclic range (hole, j] */
		if (((j - home) & mask) >= ((j - hole) & mask)) {
			t->blocks[hole] = t->blocks[j];
			hole = j;
		}
	}
	t->blocks[hole].node = TRIE_NONE;
	t->n_blocks--;
	return 1;
}

int trie_block_set_time(struct trie *t, uint64_t key, uint64_t time_us)
{
	size_t mask = t->block_cap - 1;
	for (size_t h = block_slot(t, key); t->blocks[h].node != TRIE_NONE; h = (h + 1) & mask)
		if (t->blocks[h].key == key) {
			t->blocks[h].time_us = time_us;
			return 0;
		}
	return -1;
}

const struct trie_node *trie_node(const struct trie *t, uint32_t node)
{
	return node < t->n_nodes ? &t->nodes[node] : NULL;
}

size_t trie_node_count(const struct trie *t) { return t->n_nodes; }
size_t trie_live_count(const struct trie *t) { return t->n_blocks; }
double trie_rate(const struct trie *t) { return t->rate; }
uint64_t trie_next_id(const struct trie *t) { return t->next_id; }

double trie_object_weight(const struct trie *t, uint64_t bytes)
{
	double words = bytes / 8.0 < 1 ? 1 : bytes / 8.0;
	double p = -expm1(words * t->log_miss);
	return p > 0 ? 1 / p : 1;
}

size_t trie_memory_bytes(const struct trie *t)
{
	return sizeof *t + t->cap_nodes * sizeof *t->nodes + t->edge_cap * sizeof *t->edges +
	       t->block_cap * sizeof *t->blocks;
}

size_t trie_node_backtrace(const struct trie *t, uint32_t node, uint64_t *codes, size_t max)
{
	if (node >= t->n_nodes) return 0;
	size_t depth = t->nodes[node].depth;
	for (uint32_t n = node; n != TRIE_ROOT; n = t->nodes[n].parent) {
		size_t pos = t->nodes[n].depth - 1;
		if (pos < max) codes[pos] = t->nodes[n].code;
	}
	return depth;
}

int trie_for_each_node(const struct trie *t, trie_node_fn fn, void *ctx)
{
	for (size_t i = 0; i < t->n_nodes; i++) {
		int rc = fn(ctx, (uint32_t)i, &t->nodes[i]);
		if (rc) return rc;
	}
	return 0;
}

int trie_for_each_live_block(const struct trie *t, trie_block_fn fn, void *ctx)
{
	for (size_t i = 0; i < t->block_cap; i++) {
		if (t->blocks[i].node == TRIE_NONE) continue;
		int rc = fn(ctx, &t->blocks[i]);
		if (rc) return rc;
	}
	return 0;
}

struct stack_tally {
	size_t stacks;
	uint64_t samples;
};

static int tally_node(void *ctx, uint32_t index, const struct trie_node *node)
{
	struct stack_tally *t = ctx;
	if (node->c.allocs) t->stacks++;
	t->samples += node->c.alloc_nsamples;
	return 0;
}

size_t trie_stack_count(const struct trie *t)
{
	struct stack_tally tally = {0};
	trie_for_each_node(t, tally_node, &tally);
	return tally.stacks;
}

uint64_t trie_sample_count(const struct trie *t)
{
	struct stack_tally tally = {0};
	trie_for_each_node(t, tally_node, &tally);
	return tally.samples;
}
