/* Location table and string interning of the trace reader (see reader_loctab.h). */
#include "reader_loctab.h"
#include "hash.h"

#include <stdlib.h>
#include <string.h>

/* A chunked arena: memory handed out never moves and is freed all at once. */
struct arena_chunk {
	struct arena_chunk *next;
	size_t used, cap;
	_Alignas(16) unsigned char data[];
};

#define ARENA_CHUNK_SIZE (64 * 1024)

static void *arena_alloc(struct arena_chunk **head, size_t size)
{
	size = (size + 15) & ~(size_t)15;
	struct arena_chunk *c = *head;
	if (!c || c->cap - c->used < size) {
		size_t cap = size > ARENA_CHUNK_SIZE ? size : ARENA_CHUNK_SIZE;
		c = malloc(sizeof(*c) + cap);
		if (!c) return NULL;
		c->next = *head;
		c->used = 0;
		c->cap = cap;
		*head = c;
	}
	void *p = c->data + c->used;
	c->used += size;
	return p;
}

static void arena_free(struct arena_chunk *c)
{
	while (c) {
		struct arena_chunk *next = c->next;
		free(c);
		c = next;
	}
}

struct interned {
	const char *s; /* NULL = free slot */
	size_t len;
	uint64_t hash;
};

struct code_entry {
	uint64_t code;
	const mt_location *locs;
	int n; /* -1 = free slot */
};

struct mtr_loctab {
	struct arena_chunk *arena;
	struct interned *strings;
	size_t nstrings, strings_cap; /* cap: power of two */
	struct code_entry *codes;
	size_t ncodes, codes_cap;
};

static uint64_t hash_bytes(const char *s, size_t len)
{
	return mt_mix64(mt_fnv1a(s, len) ^ len);
}

mtr_loctab *mtr_loctab_new(void)
{
	mtr_loctab *t = calloc(1, sizeof(*t));
	if (!t) return NULL;
	t->strings_cap = 256;
	t->codes_cap = 256;
	t->strings = calloc(t->strings_cap, sizeof(*t->strings));
	t->codes = malloc(t->codes_cap * sizeof(*t->codes));
	if (!t->strings || !t->codes) {
		mtr_loctab_free(t);
		return NULL;
	}
	for (size_t i = 0; i < t->codes_cap; i++) t->codes[i].n = -1;
	return t;
}

void mtr_loctab_free(mtr_loctab *t)
{
	if (!t) return;
	arena_free(t->arena);
	free(t->strings);
	free(t->codes);
	free(t);
}

static int grow_strings(mtr_loctab *t)
{
	size_t cap = t->strings_cap * 2;
	struct interned *s = calloc(cap, sizeof(*s));
	if (!s) return -1;
	for (size_t i = 0; i < t->strings_cap; i++) {
		if (!t->strings[i].s) continue;
		size_t j = t->strings[i].hash & (cap - 1);
		while (s[j].s) j = (j + 1) & (cap - 1);
		s[j] = t->strings[i];
	}
	free(t->strings);
	t->strings = s;
	t->strings_cap = cap;
	return 0;
}

const char *mtr_intern(mtr_loctab *t, const char *s, size_t len)
{
	if ((t->nstrings + 1) * 2 > t->strings_cap && grow_strings(t) < 0) return NULL;
	uint64_t h = hash_bytes(s, len);
	size_t j = h & (t->strings_cap - 1);
	for (; t->strings[j].s; j = (j + 1) & (t->strings_cap - 1)) {
		const struct interned *e = &t->strings[j];
		if (e->hash == h && e->len == len && memcmp(e->s, s, len) == 0) return e->s;
	}
	char *copy = arena_alloc(&t->arena, len + 1);
	if (!copy) return NULL;
	memcpy(copy, s, len);
	copy[len] = 0;
	t->strings[j] = (struct interned){ copy, len, h };
	t->nstrings++;
	return copy;
}

static size_t code_slot(const struct code_entry *codes, size_t cap, uint64_t code)
{
	size_t j = mt_mix64(code) & (cap - 1);
	while (codes[j].n >= 0 && codes[j].code != code) j = (j + 1) & (cap - 1);
	return j;
}

int mtr_loctab_find(const mtr_loctab *t, uint64_t code, const mt_location **locs)
{
	const struct code_entry *e = &t->codes[code_slot(t->codes, t->codes_cap, code)];
	if (e->n < 0) return -1;
	if (locs) *locs = e->locs;
	return e->n;
}

static int grow_codes(mtr_loctab *t)
{
	size_t cap = t->codes_cap * 2;
	struct code_entry *c = malloc(cap * sizeof(*c));
	if (!c) return -1;
	for (size_t i = 0; i < cap; i++) c[i].n = -1;
	for (size_t i = 0; i < t->codes_cap; i++)
		if (t->codes[i].n >= 0) c[code_slot(c, cap, t->codes[i].code)] = t->codes[i];
	free(t->codes);
	t->codes = c;
	t->codes_cap = cap;
	return 0;
}

int mtr_loctab_add(mtr_loctab *t, uint64_t code, const mt_location *locs, int n)
{
	if ((t->ncodes + 1) * 2 > t->codes_cap && grow_codes(t) < 0) return -1;
	mt_location *copy = NULL;
	if (n > 0) {
		copy = arena_alloc(&t->arena, (size_t)n * sizeof(*copy));
		if (!copy) return -1;
		memcpy(copy, locs, (size_t)n * sizeof(*copy));
	}
	struct code_entry *e = &t->codes[code_slot(t->codes, t->codes_cap, code)];
	*e = (struct code_entry){ code, copy, n };
	t->ncodes++;
	return 0;
}

int mtr_locs_equal(const mt_location *a, int na, const mt_location *b, int nb)
{
	if (na != nb) return 0;
	if (a == b) return 1;
	for (int i = 0; i < na; i++) {
		if (a[i].line != b[i].line || a[i].start_char != b[i].start_char ||
		    a[i].end_char != b[i].end_char || a[i].filename != b[i].filename ||
		    a[i].defname != b[i].defname)
			return 0;
	}
	return 1;
}
