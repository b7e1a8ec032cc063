/* Joining a deep stack's pieces to its record (deep_stacks.h). */
#include <stdlib.h>
#include <string.h>

#include "deep_stacks.h"

static struct deep_piece *slot_of(struct deep_stacks *d, uint32_t tid, bool take)
{
	struct deep_piece *free_one = NULL;
	for (int i = 0; i < DEEP_PENDING; i++) {
		if (d->p[i].tid == tid) return &d->p[i];
		if (!d->p[i].tid && !free_one) free_one = &d->p[i];
	}
	if (!take) return NULL;
	if (!free_one) { /* all in use: a thread's pieces whose record never came go first */
		free_one = &d->p[d->next++ % DEEP_PENDING];
		d->lost++;
	}
	free_one->tid = tid;
	free_one->seq = 0;
	free_one->more = 0;
	return free_one;
}

void deep_add(struct deep_stacks *d, uint32_t tid, uint64_t seq, uint32_t offset,
	      const uint8_t *data, uint32_t len, uint32_t first)
{
	if (!tid) return;
	struct deep_piece *p = slot_of(d, tid, true);
	if (p->seq != seq) { /* a new sample of the thread: an older one's pieces were orphans */
		if (p->seq) d->lost++;
		p->seq = seq;
		p->more = 0;
	}
	if (offset != first + p->more) { /* a piece missing between: the sample is cut there */
		return;
	}
	size_t need = (size_t)offset + len;
	if (need > p->cap) {
		uint8_t *b = realloc(p->buf, need);
		if (!b) return;
		p->buf = b;
		p->cap = need;
	}
	memcpy(p->buf + offset, data, len);
	p->more += len;
}

const uint8_t *deep_join(struct deep_stacks *d, uint32_t tid, uint64_t seq, const uint8_t *first,
			 uint32_t first_len, uint32_t more, size_t *total)
{
	struct deep_piece *p = slot_of(d, tid, false);
	if (!more) return NULL;
	if (!p || p->seq != seq || p->more < more || p->cap < (size_t)first_len + more) {
		d->lost++;
		return NULL;
	}
	p->tid = 0;
	memcpy(p->buf, first, first_len);
	*total = (size_t)first_len + more;
	d->joined++;
	return p->buf;
}

void deep_free(struct deep_stacks *d)
{
	for (int i = 0; i < DEEP_PENDING; i++) free(d->p[i].buf);
	memset(d, 0, sizeof *d);
}
