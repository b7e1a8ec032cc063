/* Unit tests of the daemon's context trie and live-block table (user/daemon/core/model/trie.c). */
#include "check.h"
#include "model/trie.h"

#include <stdlib.h>

static int count_nodes(void *ctx, uint32_t i, const struct trie_node *n)
{
	const struct trie_node **seen = ctx;
	/* parents come first */
	if (i != TRIE_ROOT && n->parent >= i) return 1;
	(void)seen;
	return 0;
}

static int sum_live(void *ctx, const struct trie_block *b)
{
	*(uint64_t *)ctx += b->bytes;
	return 0;
}

int main(void)
{
	struct trie *t = trie_new(1e-3);
	CHECK("trie_new", t != NULL);
	if (!t) return 1;

	uint64_t a[] = {10, 20, 30}, b[] = {10, 20, 31}, c[] = {10, 20};
	uint32_t na = trie_intern(t, a, 3), nb = trie_intern(t, b, 3), nc = trie_intern(t, c, 2);
	CHECK("trie_intern_same_stack_same_node", trie_intern(t, a, 3) == na);
	CHECK("trie_intern_distinct_leaves", na != nb && na != nc && nb != nc);
	CHECK("trie_shared_prefix", trie_node(t, na)->parent == nc && trie_node(t, nb)->parent == nc);
	CHECK("trie_node_count", trie_node_count(t) == 5); /* root, 10, 20, 30, 31 */
	CHECK("trie_empty_is_root", trie_intern(t, NULL, 0) == TRIE_ROOT);

	uint64_t bt[8];
	size_t d = trie_node_backtrace(t, nb, bt, 8);
	CHECK("trie_backtrace", d == 3 && bt[0] == 10 && bt[1] == 20 && bt[2] == 31);
	d = trie_node_backtrace(t, nb, bt, 2);
	CHECK("trie_backtrace_truncated_outermost", d == 3 && bt[0] == 10 && bt[1] == 20);

	CHECK("block_alloc", trie_block_alloc(t, 1, 0, na, 100, 2) == 0);
	CHECK("block_alloc_dup_rejected", trie_block_alloc(t, 1, 5, na, 100, 2) < 0);
	CHECK("block_alloc2", trie_block_alloc(t, 2, 1, na, 50, 1) == 0);
	const struct trie_node *n = trie_node(t, na);
	CHECK("counters_alloc", n->c.allocs == 2 && n->c.alloc_nsamples == 3 && n->c.live_blocks == 2 &&
				n->c.live_bytes == 150 && n->c.alloc_bytes_est > 23999 && n->c.alloc_bytes_est < 24001);
	struct trie_block blk;
	CHECK("block_free_found", trie_block_free(t, 1, &blk) == 1 && blk.id == 0 && blk.node == na);
	CHECK("block_free_twice", trie_block_free(t, 1, NULL) == 0);
	CHECK("block_free_unknown", trie_block_free(t, 99, NULL) == 0);
	n = trie_node(t, na);
	CHECK("counters_free", n->c.live_blocks == 1 && n->c.live_bytes == 50 && n->c.live_nsamples == 1 &&
			       n->c.allocs == 2);

	/* Many blocks, freed in a scrambled order: the table stays consistent (backward-shift
	 * deletion) and does not grow with the number of events. */
	int ok = 1;
	for (uint64_t k = 1000; k < 21000; k++)
		if (trie_block_alloc(t, k, k, nb, 8, 1)) ok = 0;
	for (uint64_t i = 0; i < 20000; i++) {
		uint64_t k = 1000 + (i * 7919) % 20000;
		if (trie_block_free(t, k, &blk) != 1 || blk.id != k) ok = 0;
	}
	CHECK("blocks_many_alloc_free", ok && trie_live_count(t) == 1 && trie_node(t, nb)->c.live_blocks == 0);
	size_t mem = trie_memory_bytes(t);
	for (int round = 0; round < 200; round++) {
		for (uint64_t k = 0; k < 100; k++) trie_block_alloc(t, 100000 + round * 100 + k, k, nc, 8, 1);
		for (uint64_t k = 0; k < 100; k++) trie_block_free(t, 100000 + round * 100 + k, NULL);
	}
	CHECK("memory_does_not_grow_with_events", trie_memory_bytes(t) == mem && trie_live_count(t) == 1);
	uint64_t live = 0;
	trie_for_each_live_block(t, sum_live, &live);
	CHECK("for_each_live_block", live == 50);
	CHECK("for_each_node_parents_first", trie_for_each_node(t, count_nodes, NULL) == 0);

	/* A deep and wide trie. */
	uint64_t deep[300];
	for (int i = 0; i < 300; i++) deep[i] = 1 + i;
	uint32_t nd = trie_intern(t, deep, 300);
	for (int w = 0; w < 5000; w++) { deep[299] = 1000000 + w; trie_intern(t, deep, 300); }
	deep[299] = 300;
	CHECK("deep_and_wide", nd != TRIE_NONE && trie_intern(t, deep, 300) == nd &&
				   trie_node(t, nd)->depth == 300 && trie_node_count(t) == 5 + 300 + 5000);
	trie_free(t);

	/* object estimates: a sampled block of w words stands for 1 / (1 - (1 - rate)^w) blocks */
	t = trie_new(0.01);
	uint64_t one[1] = {7};
	uint32_t n1 = trie_intern(t, one, 1);
	trie_block_alloc(t, 1, 41, n1, 8, 1);    /* 1 word: weight 100 */
	trie_block_alloc(t, 2, 40, n1, 8000, 9); /* 1000 words: weight 1 / (1 - 0.99^1000) ~ 1 */
	const struct trie_node *e = trie_node(t, n1);
	double w1 = trie_object_weight(t, 8), w1000 = trie_object_weight(t, 8000);
	CHECK("object_weight_one_word", w1 > 99.99 && w1 < 100.01);
	CHECK("object_weight_large_block", w1000 > 1.0 && w1000 < 1.0001);
	CHECK("alloc_objects_est", e->c.alloc_objects_est > 100.99 && e->c.alloc_objects_est < 101.01);
	CHECK("next_id_past_highest", trie_next_id(t) == 42);
	trie_block_free(t, 1, NULL);
	CHECK("live_objects_est_after_free", trie_node(t, n1)->c.live_objects_est < 1.0001);
	trie_block_free(t, 2, NULL);
	CHECK("live_objects_est_zero", trie_node(t, n1)->c.live_objects_est == 0);
	CHECK("alloc_objects_est_stays", trie_node(t, n1)->c.alloc_objects_est > 100.99);
	trie_free(t);
	return CHECK_DONE();
}
