/* Open-addressing index over a caller's array (see slot_index.h). */
#include "slot_index.h"

#include <stdlib.h>

int mt_slot_grow(mt_slot_index *x, size_t first_cap, mt_slot_hash_fn hash, const void *ctx)
{
	size_t cap = x->cap ? x->cap * 2 : first_cap;
	uint32_t *slots = calloc(cap, sizeof *slots);
	if (!slots) return -1;
	for (size_t i = 0; i < x->cap; i++) {
		uint32_t v = x->slots[i];
		if (!v) continue;
		size_t j = hash(ctx, v - 1) & (cap - 1);
		while (slots[j]) j = (j + 1) & (cap - 1);
		slots[j] = v;
	}
	free(x->slots);
	x->slots = slots;
	x->cap = cap;
	return 0;
}

void mt_slot_free(mt_slot_index *x)
{
	free(x->slots);
	x->slots = NULL;
	x->cap = 0;
}
