/* seq -> block hash table (see seq_table.h). */
#include "seq_table.h"

#include <stdlib.h>
#include <string.h>

static size_t slot_of(uint64_t seq, size_t cap)
{
	/* seqs are consecutive integers: mix them so neighbours spread (splitmix64 finalizer) */
	uint64_t x = seq;
	x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27; x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return (size_t)x & (cap - 1);
}

static int grow(struct seq_table *t)
{
	size_t cap = t->cap ? t->cap * 2 : 1024;
	struct seq_entry *slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -1;
	for (size_t i = 0; i < t->cap; i++) {
		if (!t->slots[i].seq)
			continue;
		size_t j = slot_of(t->slots[i].seq, cap);
		while (slots[j].seq)
			j = (j + 1) & (cap - 1);
		slots[j] = t->slots[i];
	}
	free(t->slots);
	t->slots = slots;
	t->cap = cap;
	return 0;
}

int seq_table_put(struct seq_table *t, uint64_t seq, uint64_t addr, uint64_t epoch)
{
	if (!seq)
		return -1;
	if ((t->count + 1) * 4 > t->cap * 3 && grow(t))
		return -1;
	size_t i = slot_of(seq, t->cap);
	while (t->slots[i].seq && t->slots[i].seq != seq)
		i = (i + 1) & (t->cap - 1);
	if (!t->slots[i].seq)
		t->count++;
	t->slots[i] = (struct seq_entry){ .seq = seq, .addr = addr, .epoch = epoch };
	return 0;
}

static ptrdiff_t find(const struct seq_table *t, uint64_t seq)
{
	if (!t->cap || !seq)
		return -1;
	size_t i = slot_of(seq, t->cap);
	while (t->slots[i].seq) {
		if (t->slots[i].seq == seq)
			return (ptrdiff_t)i;
		i = (i + 1) & (t->cap - 1);
	}
	return -1;
}

const struct seq_entry *seq_table_get(const struct seq_table *t, uint64_t seq)
{
	ptrdiff_t i = find(t, seq);
	return i < 0 ? NULL : &t->slots[i];
}

bool seq_table_remove(struct seq_table *t, uint64_t seq, struct seq_entry *out)
{
	ptrdiff_t found = find(t, seq);
	if (found < 0)
		return false;
	size_t i = (size_t)found, mask = t->cap - 1;
	if (out)
		*out = t->slots[i];
	/* Backward shift: move later members of the probe run into the hole when their home
	 * slot is not between the hole and their position. */
	for (size_t j = (i + 1) & mask; t->slots[j].seq; j = (j + 1) & mask) {
		size_t home = slot_of(t->slots[j].seq, t->cap);
		if (((j - home) & mask) >= ((j - i) & mask)) {
			t->slots[i] = t->slots[j];
			i = j;
		}
	}
	t->slots[i].seq = 0;
	t->count--;
	return true;
}

void seq_table_clear(struct seq_table *t)
{
	if (t->slots)
		memset(t->slots, 0, t->cap * sizeof(*t->slots));
	t->count = 0;
}

void seq_table_free(struct seq_table *t)
{
	free(t->slots);
	*t = (struct seq_table){ 0 };
}
