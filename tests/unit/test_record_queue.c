/* Unit tests of the daemon's record queue (user/daemon/core/process/record_queue.c): copies, order, bound,
 * close, and a producer thread against a consumer. */
#include "check.h"
#include "process/record_queue.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define N_RECORDS 20000

static void *producer(void *arg)
{
	struct record_queue *q = arg;
	uint64_t regs[17] = {0};
	uint8_t stack[300];
	for (uint64_t i = 0; i < N_RECORDS; i++) {
		if (i % 3 == 2) {
			struct tracer_free f = {.seq = i};
			rq_push_free(q, &f);
			continue;
		}
		regs[7] = i;
		memset(stack, (int)(i & 0xff), sizeof stack);
		struct tracer_alloc a = {.seq = i, .regs = regs, .stack = stack, .stack_len = 1 + i % 300};
		rq_push_alloc(q, &a);
	}
	rq_close(q);
	return NULL;
}

int main(void)
{
	struct record_queue *q = rq_new(1 << 20);
	CHECK("rq_new", q != NULL);
	if (!q) return 1;

	uint64_t regs[17] = {1, 2, 3, 4, 5, 6, 7, 8};
	uint8_t stack[64];
	memset(stack, 0xab, sizeof stack);
	struct tracer_alloc a = {.seq = 7, .size = 100, .regs = regs, .stack = stack, .stack_len = 64};
	struct tracer_free f = {.seq = 7, .addr = 0x1000};
	CHECK("push_alloc", rq_push_alloc(q, &a) == 0);
	CHECK("push_free", rq_push_free(q, &f) == 0);
	memset(stack, 0, sizeof stack); /* the queue holds copies */
	regs[0] = 99;
	bool closed = true;
	struct rq_item *list = rq_take_all(q, 0, &closed);
	CHECK("take_all_order", list && !list->is_free && list->a.seq == 7 && list->next &&
				       list->next->is_free && list->next->f.addr == 0x1000 && !list->next->next);
	CHECK("take_all_copies", list && list->a.stack_len == 64 && list->a.stack[63] == 0xab &&
					list->a.regs[0] == 1 && list->a.regs == list->regs);
	CHECK("not_closed", !closed);
	rq_free_items(list);
	CHECK("empty_times_out", rq_take_all(q, 10, &closed) == NULL && !closed);

	/* A producer thread against this consumer: everything arrives once, in order, within
	 * the bound. */
	pthread_t th;
	pthread_create(&th, NULL, producer, q);
	uint64_t next = 0, bad = 0;
	for (closed = false; !closed;) {
		list = rq_take_all(q, 100, &closed);
		for (struct rq_item *it = list; it; it = it->next) {
			uint64_t seq = it->is_free ? it->f.seq : it->a.seq;
			if (seq != next++) bad++;
			if (!it->is_free && (it->a.regs[7] != seq || it->a.stack_len != 1 + seq % 300 ||
					     it->a.stack[it->a.stack_len - 1] != (uint8_t)(seq & 0xff)))
				bad++;
		}
		rq_recycle(q, list); /* as the session does: the next pushes reuse them */
	}
	pthread_join(th, NULL);
	CHECKF("threaded_in_order", next == N_RECORDS && bad == 0, "%llu records, %llu bad",
	       (unsigned long long)next, (unsigned long long)bad);
	CHECKF("bounded", rq_high_water(q) <= (1 << 20) + 400 + sizeof(struct rq_item),
	       "high water %zu", rq_high_water(q));
	rq_destroy(q);

	/* A queue whose producer never waits, filled past its bound round after round: refused
	 * pushes go back to the spares, the taken items are recycled, and every record taken is
	 * whole (a refused item once went back with a stale link: spares listed twice). */
	q = rq_new(64 << 10);
	rq_never_wait(q);
	uint8_t big[4000];
	uint64_t seq = 0, refused = 0, taken = 0;
	bad = 0;
	for (int round = 0; round < 50; round++) {
		for (int i = 0; i < 40; i++, seq++) {
			memset(big, (int)(seq & 0xff), sizeof big);
			struct tracer_alloc b = {.seq = seq, .regs = regs, .stack = big,
						 .stack_len = 1000 + (uint32_t)(seq % 3000)};
			if (rq_push_alloc(q, &b) < 0) refused++;
		}
		list = rq_take_all(q, 0, &closed);
		for (struct rq_item *it = list; it; it = it->next, taken++)
			if (it->a.stack[0] != (uint8_t)(it->a.seq & 0xff) ||
			    it->a.stack[it->a.stack_len - 1] != (uint8_t)(it->a.seq & 0xff))
				bad++;
		rq_recycle(q, list);
	}
	CHECKF("refused_and_recycled_whole", refused > 0 && taken + refused == seq && bad == 0,
	       "%llu pushed, %llu refused, %llu taken, %llu damaged", (unsigned long long)seq,
	       (unsigned long long)refused, (unsigned long long)taken, (unsigned long long)bad);
	rq_destroy(q);
	return CHECK_DONE();
}
