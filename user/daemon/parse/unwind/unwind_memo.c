/* Unwinds remembered (see unwind_memo.h). */
#include "unwind_memo.h"

#include <stdlib.h>
#include <string.h>

struct memo_entry {
	uint64_t pc, sp, fp;
	int start, rc, nreads, nframes;
	bool frames_capped, by_fp;
	uint64_t max_read_off; /* max_read - sp + 1, 0: nothing read */
	uint32_t *read_off;
	uint64_t *read_val;
	uint64_t *pcs;
};

static unsigned slot_of(uint64_t pc, uint64_t sp, int start)
{
	uint64_t h = (pc * 0x9e3779b97f4a7c15ull) ^ (sp >> 4) ^ ((uint64_t)start << 60);
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return (unsigned)(h % MEMO_SLOTS);
}

bool memo_replay(struct unwind_memo *m, int start, uint64_t pc, uint64_t sp, uint64_t fp,
		 const uint8_t *stack, size_t stack_len, struct memo_result *out, int max)
{
	const struct memo_entry *e = m->slot[slot_of(pc, sp, start)];
	if (!e || e->pc != pc || e->sp != sp || (e->by_fp && e->fp != fp) || e->start != start ||
	    e->nframes > max)
		return false;
	for (int i = 0; i < e->nreads; i++) {
		uint64_t off = e->read_off[i], w;
		if (off + 8 > stack_len) return false;
		memcpy(&w, stack + off, 8);
		if (w != e->read_val[i]) return false;
	}
	out->rc = e->rc;
	out->frames_capped = e->frames_capped;
	out->max_read = e->max_read_off ? sp + e->max_read_off - 1 : 0;
	out->nframes = e->nframes;
	memcpy(out->pcs, e->pcs, (size_t)e->nframes * sizeof *e->pcs);
	m->hits++;
	return true;
}

void memo_begin(struct unwind_memo *m)
{
	m->recording = true;
	m->spoiled = false;
	m->nreads = 0;
	m->nvisits = 0;
	m->nra = 0;
}

void memo_return_address(struct unwind_memo *m, bool ok, uint64_t off)
{
	if (!m->recording || m->spoiled) return;
	if (!ok || off > UINT32_MAX || m->nra == MEMO_MAX_FRAMES) {
		m->spoiled = true;
		return;
	}
	m->ra_off[m->nra++] = (uint32_t)off;
}

/* Keeps of the reads only those of return addresses, and the last read (libdw reads the
 * return address last: that of the outermost frame, 0 where the stack ends, is one); false if
 * one was not read. */
static bool only_return_addresses(struct unwind_memo *m)
{
	int n = 0;
	bool last_kept = m->nreads == 0;
	uint32_t last_off = m->nreads ? m->read_off[m->nreads - 1] : 0;
	uint64_t last_val = m->nreads ? m->read_val[m->nreads - 1] : 0;
	for (int i = 0; i < m->nra; i++) {
		int j = 0;
		while (j < m->nreads && m->read_off[j] != m->ra_off[i]) j++;
		if (j == m->nreads) return false;
		uint64_t v = m->read_val[j];
		m->read_off[n] = m->ra_off[i];
		m->read_val[n++] = v;
		if (m->ra_off[i] == last_off) last_kept = true;
	}
	if (!last_kept) {
		m->read_off[n] = last_off;
		m->read_val[n++] = last_val;
	}
	m->nreads = n;
	return true;
}

void memo_visit(struct unwind_memo *m, uint64_t pc)
{
	if (!m->recording || m->spoiled) return;
	if (m->nvisits == MEMO_MAX_FRAMES) {
		m->spoiled = true;
		return;
	}
	m->visit[m->nvisits++] = pc;
}

const uint64_t *memo_visits(const struct unwind_memo *m, int *n)
{
	*n = m->nvisits;
	return m->recording && !m->spoiled ? m->visit : NULL;
}

void memo_read(struct unwind_memo *m, bool in_copy, uint64_t off, uint64_t val)
{
	if (!m->recording || m->spoiled) return;
	if (!in_copy || m->nreads == MEMO_MAX_READS || off > UINT32_MAX) {
		m->spoiled = true;
		return;
	}
	m->read_off[m->nreads] = (uint32_t)off;
	m->read_val[m->nreads++] = val;
}

void memo_end(struct unwind_memo *m, int start, uint64_t pc, uint64_t sp, uint64_t fp,
	      const struct memo_result *r, enum memo_keep how)
{
	bool keep = how != MEMO_DONT && m->recording && !m->spoiled && r->nframes <= MEMO_MAX_FRAMES;
	m->recording = false;
	if (keep && how == MEMO_BY_SP) keep = only_return_addresses(m);
	if (!keep) return;
	size_t nr = (size_t)m->nreads, nf = (size_t)r->nframes;
	struct memo_entry *e = malloc(sizeof *e + nr * (sizeof(uint32_t) + sizeof(uint64_t)) +
				      nf * sizeof(uint64_t));
	if (!e) return;
	e->read_val = (uint64_t *)(e + 1);
	e->pcs = e->read_val + nr;
	e->read_off = (uint32_t *)(e->pcs + nf);
	e->pc = pc;
	e->sp = sp;
	e->fp = fp;
	e->start = start;
	e->rc = r->rc;
	e->nreads = m->nreads;
	e->nframes = r->nframes;
	e->frames_capped = r->frames_capped;
	e->by_fp = how == MEMO_BY_SP_AND_FP;
	e->max_read_off = r->max_read >= sp ? r->max_read - sp + 1 : 0;
	memcpy(e->read_off, m->read_off, nr * sizeof *e->read_off);
	memcpy(e->read_val, m->read_val, nr * sizeof *e->read_val);
	memcpy(e->pcs, r->pcs, nf * sizeof *e->pcs);
	unsigned k = slot_of(pc, sp, start);
	free(m->slot[k]);
	m->slot[k] = e;
	m->stored++;
}

void memo_clear(struct unwind_memo *m)
{
	for (int i = 0; i < MEMO_SLOTS; i++) {
		free(m->slot[i]);
		m->slot[i] = NULL;
	}
	m->recording = false;
}
