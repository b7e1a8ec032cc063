/* A bounded FIFO of tracer records copied out of the ring buffer, between the thread that
 * reads the BPF ring buffer (promptly, so that a slow unwind or a first symbolization of a
 * large library does not overflow it) and the session thread (unwind, trie, trace). Bounded
 * in bytes: when it is full a push waits, or with rq_never_wait fails (the ring's reader
 * serves every traced process and must not wait for one: the record is counted as dropped). */
#ifndef MEMTRACED_RECORD_QUEUE_H
#define MEMTRACED_RECORD_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tracer/tracer.h"

struct rq_item {
	struct rq_item *next;
	size_t cap;            /* bytes allocated for the item (it is reused: rq_recycle) */
	bool is_free;
	struct tracer_free f;  /* is_free */
	struct tracer_alloc a; /* !is_free: regs, stack and py point into this item */
	uint64_t regs[17];
	uint8_t stack[];       /* then the Python frames, 8-byte aligned */
};

struct record_queue;

struct record_queue *rq_new(size_t max_bytes);
void rq_destroy(struct record_queue *q); /* frees what is still queued */
/* Producer side. Both copy the record; they wait while the queue is full (unless closed or
 * rq_never_wait). Return 0, or -1 if out of memory or full. */
int rq_push_alloc(struct record_queue *q, const struct tracer_alloc *a);
/* rq_push_alloc past the bound (up to twice it, with rq_never_wait): a record kept by thinning
 * carries the weight of those left out, and must not be lost for room (1 in k of them: the
 * bound is exceeded by little). Frees go past the bound too (small, and no unwind). */
int rq_push_alloc_over(struct record_queue *q, const struct tracer_alloc *a);
int rq_push_free(struct record_queue *q, const struct tracer_free *f);
/* From now on a push into a full queue fails (-1) instead of waiting. */
void rq_never_wait(struct record_queue *q);
/* The producer is done: pushes no longer wait, the consumer sees the end. */
void rq_close(struct record_queue *q);
/* Consumer side: takes everything queued, in order, waiting up to timeout_ms for something.
 * NULL if nothing came; *closed tells whether the producer is done and the queue empty. */
struct rq_item *rq_take_all(struct record_queue *q, int timeout_ms, bool *closed);
void rq_free_items(struct rq_item *list);
/* The consumer is done with a list rq_take_all gave: its items go back to q for the next
 * pushes (up to RQ_SPARE_BYTES; the rest, and all of them once q has been idle for a second,
 * are freed). Allocating each record anew cost page faults: malloc gives the pages of a
 * freed batch back and takes them again for the next (~12 KiB a record at full speed). */
void rq_recycle(struct record_queue *q, struct rq_item *list);
/* From any thread: every consumer waiting in rq_take_all returns now (with what is queued):
 * the main loop, which waits there, has something else to do (a process held at its exec). */
void rq_kick_all(void);
size_t rq_high_water(struct record_queue *q); /* most bytes ever queued */
/* How full it is now, in thousandths of its bound (a glance: no lock). */
unsigned rq_fill_permille(const struct record_queue *q);

#endif
