/* A bounded FIFO of copied tracer records (see record_queue.h). */
#include "record_queue.h"
#include "loop_wake.h"
#include "python_frames.h"
#include "common/deadline.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct record_queue {
	pthread_mutex_t lock;
	pthread_cond_t not_empty, not_full;
	struct rq_item *head, *tail;
	size_t bytes, max_bytes, high_water;
	bool closed;
	bool never_wait;              /* rq_never_wait */
	bool kicked;                  /* rq_kick_all: the waiting consumer returns now */
	struct rq_item *spare_small, *spare_large; /* rq_recycle: items for the next pushes */
	size_t spare_bytes;
	bool pushed;                  /* since the consumer last found the queue empty */
	struct timespec empty_since;  /* when it did (spares freed after a second of it) */
	struct record_queue *next_q;  /* in the list of live queues */
};

/* Every live queue, for rq_kick_all. */
static pthread_mutex_t queues_lock = PTHREAD_MUTEX_INITIALIZER;
static struct record_queue *queues;

struct record_queue *rq_new(size_t max_bytes)
{
	struct record_queue *q = calloc(1, sizeof *q);
	if (!q) return NULL;
	pthread_mutex_init(&q->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&q->not_empty, &ca);
	pthread_cond_init(&q->not_full, &ca);
	pthread_condattr_destroy(&ca);
	q->max_bytes = max_bytes;
	pthread_mutex_lock(&queues_lock);
	q->next_q = queues;
	queues = q;
	pthread_mutex_unlock(&queues_lock);
	return q;
}

void rq_kick_all(void)
{
	pthread_mutex_lock(&queues_lock);
	for (struct record_queue *q = queues; q; q = q->next_q) {
		pthread_mutex_lock(&q->lock);
		q->kicked = true;
		pthread_cond_broadcast(&q->not_empty);
		pthread_mutex_unlock(&q->lock);
	}
	pthread_mutex_unlock(&queues_lock);
	loop_wake();
}

void rq_free_items(struct rq_item *list)
{
	while (list) {
		struct rq_item *next = list->next;
		free(list);
		list = next;
	}
}

#define RQ_SPARE_BYTES (8u << 20)
#define RQ_SMALL 1024u /* a free, or an allocation without a stack */
_Static_assert(sizeof(struct rq_item) <= RQ_SMALL, "a free's item is a small one");

/* An item of at least size bytes: a spare one, or a new one. */
static struct rq_item *get_item(struct record_queue *q, size_t size)
{
	bool small = size <= RQ_SMALL;
	struct rq_item *it = NULL, *too_small = NULL;
	pthread_mutex_lock(&q->lock);
	struct rq_item **list = small ? &q->spare_small : &q->spare_large;
	if (*list) {
		it = *list;
		*list = it->next;
		q->spare_bytes -= it->cap;
		if (it->cap < size) too_small = it, it = NULL;
	}
	pthread_mutex_unlock(&q->lock);
	free(too_small);
	if (it) return it;
	size_t cap = small ? RQ_SMALL : (size + 4095) & ~(size_t)4095;
	it = malloc(cap);
	if (it) it->cap = cap;
	return it;
}

static void spares_free(struct record_queue *q)
{
	rq_free_items(q->spare_small);
	rq_free_items(q->spare_large);
	q->spare_small = q->spare_large = NULL;
	q->spare_bytes = 0;
}

void rq_recycle(struct record_queue *q, struct rq_item *list)
{
	struct rq_item *rest = NULL;
	pthread_mutex_lock(&q->lock);
	while (list) {
		struct rq_item *next = list->next;
		if (q->spare_bytes + list->cap <= RQ_SPARE_BYTES) {
			struct rq_item **to = list->cap <= RQ_SMALL ? &q->spare_small : &q->spare_large;
			list->next = *to;
			*to = list;
			q->spare_bytes += list->cap;
		} else {
			list->next = rest;
			rest = list;
		}
		list = next;
	}
	pthread_mutex_unlock(&q->lock);
	rq_free_items(rest);
}

void rq_destroy(struct record_queue *q)
{
	if (!q) return;
	pthread_mutex_lock(&queues_lock);
	for (struct record_queue **p = &queues; *p; p = &(*p)->next_q)
		if (*p == q) {
			*p = q->next_q;
			break;
		}
	pthread_mutex_unlock(&queues_lock);
	rq_free_items(q->head);
	spares_free(q);
	pthread_cond_destroy(&q->not_empty);
	pthread_cond_destroy(&q->not_full);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

void rq_never_wait(struct record_queue *q)
{
	pthread_mutex_lock(&q->lock);
	q->never_wait = true;
	pthread_mutex_unlock(&q->lock);
}

static int push(struct record_queue *q, struct rq_item *it, size_t size, bool over)
{
	pthread_mutex_lock(&q->lock);
	/* past the bound (rq_push_alloc_over, frees) where a push never waits: up to twice it,
	 * then refused as well; a queue whose producer may wait keeps its bound */
	size_t bound = over && q->never_wait ? 2 * q->max_bytes : q->max_bytes;
	if (q->never_wait && !q->closed && q->bytes > 0 && q->bytes + size > bound) {
		pthread_mutex_unlock(&q->lock);
		it->next = NULL; /* a list of one: its next is a spare's old link, or unset */
		rq_recycle(q, it);
		return -1;
	}
	while (!q->closed && q->bytes > 0 && q->bytes + size > bound)
		pthread_cond_wait(&q->not_full, &q->lock);
	it->next = NULL;
	bool was_empty = !q->head;
	if (q->tail) q->tail->next = it;
	else q->head = it;
	q->tail = it;
	q->bytes += size;
	q->pushed = true;
	if (q->bytes > q->high_water) q->high_water = q->bytes;
	pthread_cond_signal(&q->not_empty);
	pthread_mutex_unlock(&q->lock);
	/* the main loop takes every queue empty before it waits: one wake per batch */
	if (was_empty) loop_wake();
	return 0;
}

static int push_alloc(struct record_queue *q, const struct tracer_alloc *a, bool over)
{
	size_t stack_len = a->stack ? a->stack_len : 0;
	size_t py_at = (stack_len + 7) & ~(size_t)7;
	size_t py_len = a->py ? (size_t)a->py_n * sizeof(struct mt_py_frame) : 0;
	size_t codes_len = py_len && a->py_codes ? (size_t)a->py_ncodes * sizeof(struct mt_py_code) : 0;
	size_t size = sizeof(struct rq_item) + py_at + py_len + codes_len;
	struct rq_item *it = get_item(q, size);
	if (!it) return -1;
	it->is_free = false;
	it->a = *a;
	if (a->regs) memcpy(it->regs, a->regs, sizeof it->regs);
	else memset(it->regs, 0, sizeof it->regs);
	if (stack_len) memcpy(it->stack, a->stack, stack_len);
	if (py_len) memcpy(it->stack + py_at, a->py, py_len); /* a->py may be unaligned */
	if (codes_len) memcpy(it->stack + py_at + py_len, a->py_codes, codes_len);
	it->a.regs = it->regs;
	it->a.stack = it->stack;
	it->a.stack_len = stack_len;
	it->a.py = py_len ? (const struct mt_py_frame *)(it->stack + py_at) : NULL;
	it->a.py_n = py_len ? a->py_n : 0;
	it->a.py_codes = codes_len ? (const struct mt_py_code *)(it->stack + py_at + py_len) : NULL;
	it->a.py_ncodes = codes_len ? a->py_ncodes : 0;
	return push(q, it, size, over);
}

int rq_push_alloc(struct record_queue *q, const struct tracer_alloc *a)
{
	return push_alloc(q, a, false);
}

int rq_push_alloc_over(struct record_queue *q, const struct tracer_alloc *a)
{
	return push_alloc(q, a, true);
}

int rq_push_free(struct record_queue *q, const struct tracer_free *f)
{
	struct rq_item *it = get_item(q, sizeof *it);
	if (!it) return -1;
	it->is_free = true;
	it->f = *f;
	return push(q, it, sizeof *it, true); /* small, no unwind: past the bound as well */
}

void rq_close(struct record_queue *q)
{
	pthread_mutex_lock(&q->lock);
	q->closed = true;
	pthread_cond_broadcast(&q->not_empty);
	pthread_cond_broadcast(&q->not_full);
	pthread_mutex_unlock(&q->lock);
	loop_wake();
}

struct rq_item *rq_take_all(struct record_queue *q, int timeout_ms, bool *closed)
{
	struct timespec until = deadline_after_ms(timeout_ms);
	pthread_mutex_lock(&q->lock);
	while (!q->head && !q->closed && !q->kicked && timeout_ms > 0)
		if (pthread_cond_timedwait(&q->not_empty, &q->lock, &until) == ETIMEDOUT) break;
	q->kicked = false;
	struct rq_item *list = q->head;
	q->head = q->tail = NULL;
	q->bytes = 0;
	*closed = q->closed && !list;
	if (!list && q->spare_bytes) { /* idle for a second: the spares go */
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (q->pushed) q->empty_since = now, q->pushed = false;
		else if (now.tv_sec - q->empty_since.tv_sec >= 2) spares_free(q);
	}
	pthread_cond_broadcast(&q->not_full);
	pthread_mutex_unlock(&q->lock);
	return list;
}

unsigned rq_fill_permille(const struct record_queue *q)
{
	size_t bytes = __atomic_load_n(&q->bytes, __ATOMIC_RELAXED); /* a glance, see .h */
	return q->max_bytes ? (unsigned)(bytes * 1000 / q->max_bytes) : 0;
}

size_t rq_high_water(struct record_queue *q)
{
	pthread_mutex_lock(&q->lock);
	size_t hw = q->high_water;
	pthread_mutex_unlock(&q->lock);
	return hw;
}
