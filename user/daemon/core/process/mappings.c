/* Live sampled mappings by address (see mappings.h). A sorted array: a process has few live
 * sampled mappings (each is at least a page, sampled at the allocation rate). */
#include "mappings.h"

#include <stdlib.h>
#include <string.h>

/* The first mapping that ends after addr. */
static size_t first_after(const struct mappings *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->v[mid].addr + m->v[mid].len <= addr) lo = mid + 1;
		else hi = mid;
	}
	return lo;
}

static int insert_at(struct mappings *m, size_t i, const struct mapping *mp)
{
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 16;
		struct mapping *v = realloc(m->v, cap * sizeof *v);
		if (!v) return -1;
		m->v = v;
		m->cap = cap;
	}
	memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof *m->v);
	m->v[i] = *mp;
	m->n++;
	return 0;
}

int mappings_add(struct mappings *m, const struct mapping *add)
{
	return insert_at(m, first_after(m, add->addr), add);
}

void mappings_unmap(struct mappings *m, uint64_t addr, uint64_t len,
		    void (*gone)(void *ctx, const struct mapping *mp),
		    void (*keep)(void *ctx, const struct mapping *was, struct mapping *piece), void *ctx)
{
	uint64_t end = addr + len < addr ? UINT64_MAX : addr + len;
	size_t i = first_after(m, addr);
	while (i < m->n && m->v[i].addr < end) {
		struct mapping mp = m->v[i];
		memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof *m->v);
		m->n--;
		gone(ctx, &mp);
		uint64_t mp_end = mp.addr + mp.len;
		struct mapping pieces[2];
		int np = 0;
		if (mp.addr < addr) pieces[np++] = (struct mapping){.addr = mp.addr, .len = addr - mp.addr};
		if (mp_end > end) pieces[np++] = (struct mapping){.addr = end, .len = mp_end - end};
		for (int k = 0; k < np; k++) {
			pieces[k].key = mp.key;
			pieces[k].node = mp.node;
			pieces[k].nsamples = mp.nsamples; /* the callback draws its share */
			keep(ctx, &mp, &pieces[k]);
			if (pieces[k].nsamples && insert_at(m, i, &pieces[k]) == 0) i++;
		}
	}
}

uint64_t mappings_piece_samples(uint64_t nsamples, uint64_t piece_len, uint64_t len,
				double (*uniform)(void *ctx), void *ctx)
{
	if (!len || piece_len >= len) return nsamples;
	double p = (double)piece_len / (double)len;
	uint64_t k = 0;
	if (nsamples <= 64) {
		for (uint64_t i = 0; i < nsamples; i++) k += uniform(ctx) < p;
		return k;
	}
	/* many points: their expectation, the fraction drawn */
	double e = (double)nsamples * p;
	k = (uint64_t)e;
	return k + (uniform(ctx) < e - (double)k);
}

void mappings_free(struct mappings *m)
{
	free(m->v);
	memset(m, 0, sizeof *m);
}
