/* Deep stacks: the bytes of a sample's stack past what its alloc record holds arrive in
 * MT_REC_STACK_MORE records just before it (include/memtraced_events.h); they wait here, per
 * thread, and are joined to the record's own bytes when it comes. Under the tracer's lock. */
#ifndef MEMTRACED_DEEP_STACKS_H
#define MEMTRACED_DEEP_STACKS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DEEP_PENDING 8 /* threads whose pieces wait at once (one sample each) */

struct deep_piece {
	uint32_t tid;      /* 0: free */
	uint64_t seq;
	uint32_t more;     /* bytes past the first piece, in order */
	uint8_t *buf;      /* the whole stack: the record's bytes go at 0 when it comes */
	size_t cap;
};

struct deep_stacks {
	struct deep_piece p[DEEP_PENDING];
	unsigned next; /* the slot to take when all are in use */
	uint64_t joined, lost; /* samples made whole; samples whose pieces were missing */
};

/* One piece (checked by the caller: offset >= first, offset + len within the limit). */
void deep_add(struct deep_stacks *d, uint32_t tid, uint64_t seq, uint32_t offset,
	      const uint8_t *data, uint32_t len, uint32_t first);

/* The whole stack of sample seq of tid, whose record holds first_len bytes and names more
 * bytes in pieces: a buffer valid until the next call, *total its length; or NULL (the pieces
 * did not all come: the record's own bytes stand alone). */
const uint8_t *deep_join(struct deep_stacks *d, uint32_t tid, uint64_t seq, const uint8_t *first,
			 uint32_t first_len, uint32_t more, size_t *total);

void deep_free(struct deep_stacks *d);
#endif
