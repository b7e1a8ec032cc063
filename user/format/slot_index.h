/* An open-addressing hash index over the entries of an array the caller owns (nodes, rows):
 * each slot holds an entry's index + 1, 0 = empty; linear probing; the capacity is a power
 * of two and at most half of it is used. The caller hashes and compares its entries, so a
 * lookup costs no callback:
 *
 *     size_t j = mt_slot_first(&ix, hash);
 *     for (; ix.slots[j]; j = mt_slot_next(&ix, j))
 *             if (matches(entries[ix.slots[j] - 1])) return ix.slots[j] - 1;
 *     ix.slots[j] = new_index + 1;   (after mt_slot_reserve, before the probe)
 */
#ifndef MEMTRACE_SLOT_INDEX_H
#define MEMTRACE_SLOT_INDEX_H

#include <stddef.h>
#include <stdint.h>

typedef struct mt_slot_index {
	uint32_t *slots;
	size_t cap;
} mt_slot_index;

/* The hash of entry i (the one the caller probes with), for rehashing. */
typedef uint64_t (*mt_slot_hash_fn)(const void *ctx, uint32_t i);

/* Doubles the table (first size: first_cap, a power of two) and rehashes every entry.
 * 0, or -1 if out of memory (the index is unchanged). */
int mt_slot_grow(mt_slot_index *x, size_t first_cap, mt_slot_hash_fn hash, const void *ctx);
void mt_slot_free(mt_slot_index *x);

/* Makes room for one more entry when `used` entries are indexed: grows the table when it
 * would be more than half full. 0, or -1 if out of memory. */
static inline int mt_slot_reserve(mt_slot_index *x, size_t used, size_t first_cap,
				  mt_slot_hash_fn hash, const void *ctx)
{
	return (used + 1) * 2 <= x->cap ? 0 : mt_slot_grow(x, first_cap, hash, ctx);
}

static inline size_t mt_slot_first(const mt_slot_index *x, uint64_t hash)
{
	return (size_t)hash & (x->cap - 1);
}
static inline size_t mt_slot_next(const mt_slot_index *x, size_t j)
{
	return (j + 1) & (x->cap - 1);
}

#endif
