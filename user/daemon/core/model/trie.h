/* The context trie (as in OCaml's Spacetime): every distinct call stack seen in a sample is
 * interned as a path of call sites from the root (outermost frame) to a leaf (the allocation
 * site). A node is one location code under its parent context and carries counters. Live
 * sampled blocks (keyed by the tracer's record seq) point at their node and carry their
 * allocation id, so a FREE record turns into a collect of the right id.
 *
 * Memory grows with the number of distinct contexts and of live sampled blocks, never with the
 * number of events: freed blocks leave no trace in the block table.
 *
 * Not thread-safe: one trie per traced process, used from the session's thread. */
#ifndef MEMTRACED_TRIE_H
#define MEMTRACED_TRIE_H

#include <stddef.h>
#include <stdint.h>

#define TRIE_ROOT 0u           /* the empty context; its code is 0 */
#define TRIE_NONE UINT32_MAX   /* "no node" (out of memory) */

/* Counters of one context, for the allocations made exactly there (not its descendants). */
struct trie_counters {
	uint64_t allocs;          /* sampled allocations */
	uint64_t alloc_nsamples;  /* sum of their nsamples */
	double alloc_bytes_est;   /* estimated bytes allocated: nsamples / rate * 8 */
	uint64_t live_blocks;     /* sampled blocks still live */
	uint64_t live_bytes;      /* their actual sizes, summed */
	uint64_t live_nsamples;   /* their nsamples (estimated live bytes: live_nsamples / rate * 8) */
	double alloc_objects_est; /* estimated allocations: each sampled one weighs 1/P(sampled) */
	double live_objects_est;  /* estimated live blocks, the same way */
};

struct trie_node {
	uint64_t code;    /* location code of this call site (0 for the root) */
	uint32_t parent;  /* TRIE_NONE for the root */
	uint32_t depth;   /* number of codes from the root: the root is 0 */
	struct trie_counters c;
};

/* One live sampled block. */
struct trie_block {
	uint64_t key;      /* the tracer's record seq */
	uint64_t id;       /* allocation id in the trace */
	uint64_t bytes;
	uint64_t nsamples;
	uint32_t node;
	uint64_t time_us;  /* the allocation's trace time (0 = not set; see trie_block_set_time) */
};

struct trie;

struct trie *trie_new(double rate);
void trie_free(struct trie *t);

/* Interns the context codes[0..n) (OUTERMOST FIRST, like memtrace backtraces) and returns its
 * node (TRIE_ROOT for n == 0), or TRIE_NONE if out of memory. */
uint32_t trie_intern(struct trie *t, const uint64_t *codes, size_t n);

/* Records a sampled allocation at node; returns 0, or -1 if out of memory (counters are still
 * updated) or if key is already live (then nothing changes). */
int trie_block_alloc(struct trie *t, uint64_t key, uint64_t id, uint32_t node, uint64_t bytes,
		     uint64_t nsamples);
/* A sampled block is freed: returns 1 and its block in *out (if given), or 0 if key is not a
 * live block (a free of a block we never saw allocated). */
int trie_block_free(struct trie *t, uint64_t key, struct trie_block *out);
/* Sets the trace time (absolute us) of the live block key, for heap snapshots: 0, or -1 if
 * key is not a live block. */
int trie_block_set_time(struct trie *t, uint64_t key, uint64_t time_us);

/* Read access. The node pointer is valid until the next trie_intern. */
const struct trie_node *trie_node(const struct trie *t, uint32_t node);
size_t trie_node_count(const struct trie *t);  /* the root included */
/* Distinct call stacks sampled (nodes where allocations were made) and the samples of them
 * all (sum of nsamples). */
size_t trie_stack_count(const struct trie *t);
uint64_t trie_sample_count(const struct trie *t);
size_t trie_live_count(const struct trie *t);
/* One past the highest allocation id recorded so far (0 before any): a block allocated later
 * has an id at least this. */
uint64_t trie_next_id(const struct trie *t);
double trie_rate(const struct trie *t);
/* How many blocks of this size one sampled block stands for: 1 / P(sampled), P = 1 - (1 -
 * rate)^words (a block of w words is sampled when any of its words is). */
double trie_object_weight(const struct trie *t, uint64_t bytes);
size_t trie_memory_bytes(const struct trie *t); /* what the tables take */

/* The context of node as codes, outermost first, into codes[0..max). Returns the full depth
 * (which may exceed max; then only the outermost max codes are written). */
size_t trie_node_backtrace(const struct trie *t, uint32_t node, uint64_t *codes, size_t max);

/* Iteration in creation order: a parent always comes before its children. Stops early and
 * returns the callback's value if it returns non-zero. */
typedef int (*trie_node_fn)(void *ctx, uint32_t index, const struct trie_node *node);
int trie_for_each_node(const struct trie *t, trie_node_fn fn, void *ctx);
typedef int (*trie_block_fn)(void *ctx, const struct trie_block *block);
int trie_for_each_live_block(const struct trie *t, trie_block_fn fn, void *ctx);

#endif
