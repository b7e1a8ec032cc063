/* The sampled anonymous memory mappings of a process that are live (mmap'ed, not unmapped
 * yet), by address, for the session: an unmapped range frees the mappings it covers and trims
 * or splits the ones it cuts (munmap of a part, mremap, MAP_FIXED over it). */
#ifndef MEMTRACED_PROCESS_MAPPINGS_H
#define MEMTRACED_PROCESS_MAPPINGS_H
#include <stddef.h>
#include <stdint.h>

struct mapping {
	uint64_t addr, len;
	uint64_t key;       /* its block in the trie (trie_block_*) */
	uint64_t nsamples;
	uint32_t node;      /* its trie node (the stack) */
};

struct mappings {
	struct mapping *v;  /* sorted by addr, never overlapping */
	size_t n, cap;
};

/* Adds a mapping (a new mmap never overlaps a live one: the kernel unmapped what was there,
 * and that unmap came first). 0, or -1 if out of memory. */
int mappings_add(struct mappings *m, const struct mapping *add);
/* [addr, addr + len) is unmapped. For each live mapping it covers, in address order:
 * gone(ctx, mapping) with the mapping as it was, then keep(ctx, piece) for the parts of it
 * outside the range (0, 1 or 2 pieces: addr and len set, key, node and nsamples as the
 * mapping's; the callback sets the piece's nsamples, 0 to drop it, and its key, and the
 * piece is kept in the table). */
void mappings_unmap(struct mappings *m, uint64_t addr, uint64_t len,
		    void (*gone)(void *ctx, const struct mapping *mp),
		    void (*keep)(void *ctx, const struct mapping *was, struct mapping *piece), void *ctx);
/* The share of a mapping's nsamples a piece of it gets: its sample points are uniform over the
 * mapping, so each is in the piece with probability piece_len / len (a binomial draw, with u
 * a stream of uniform numbers in [0, 1)). */
uint64_t mappings_piece_samples(uint64_t nsamples, uint64_t piece_len, uint64_t len,
				double (*uniform)(void *ctx), void *ctx);
void mappings_free(struct mappings *m);

#endif
