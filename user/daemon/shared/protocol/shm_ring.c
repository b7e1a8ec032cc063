/* Messages through shared memory (see shm_ring.h). */
#include "shm_ring.h"

#include <errno.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ALIGN8(x) (((x) + 7u) & ~(uint64_t)7u)

size_t shm_ring_bytes(uint64_t data_size) { return 4096 + data_size; }

void shm_ring_attach(struct shm_ring *r, void *mem, uint64_t data_size)
{
	r->h = mem;
	r->data = (uint8_t *)mem + 4096;
	r->size = data_size;
	r->trimmed_at = 0;
	r->trimmed_ns = 0;
}

#define TRIM_BYTES (256u << 10) /* consumed between two trims */
#define TRIM_EVERY_NS 1000000000ull /* and at most one trim a second: a page given back is
				     * faulted in again when the producer comes round to it, and a
				     * ring streaming at full speed goes round hundreds of times a
				     * second (a trim each 256 KiB cost ~3 page faults a sample) */
#define TRIM_GUARD (64u << 10)  /* kept after head: the next messages' pages */
#define PAGE 4096u

/* Gives back the pages of [head + guard, tail + size): free space that only the producer (the
 * caller) writes, and not before it has produced past the guard. The consumer reads only
 * [tail, head); a tail that moves on meanwhile only makes the free space larger. */
static void trim(struct shm_ring *r, uint64_t head, uint64_t tail)
{
	uint64_t from = (head + TRIM_GUARD + PAGE - 1) / PAGE * PAGE;
	uint64_t to = (tail + r->size) / PAGE * PAGE;
	if (to <= from) return;
	uint64_t at = from & (r->size - 1), len = to - from;
	uint64_t first = len < r->size - at ? len : r->size - at;
	madvise(r->data + at, first, MADV_REMOVE);
	if (len > first) madvise(r->data, len - first, MADV_REMOVE);
}

/* Shared (not private) futexes: the two sides are two processes. */
static void futex_wait(_Atomic uint32_t *addr, uint32_t val, int timeout_ms)
{
	struct timespec ts = {.tv_sec = timeout_ms / 1000, .tv_nsec = (timeout_ms % 1000) * 1000000L};
	syscall(SYS_futex, addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *addr) { syscall(SYS_futex, addr, FUTEX_WAKE, 1 << 30, NULL, NULL, 0); }

static void bump(struct shm_ring *r)
{
	atomic_fetch_add(&r->h->futex, 1);
	futex_wake(&r->h->futex);
}

/* Half the ring: a deep stack's request (up to MT_STACK_BYTES_LIMIT) fits a 4 MiB ring. */
uint32_t shm_ring_max_payload(const struct shm_ring *r) { return (uint32_t)(r->size / 2 - sizeof(struct shm_msg)); }

struct shm_msg *shm_ring_reserve(struct shm_ring *r, uint32_t type, uint32_t len)
{
	uint64_t need = ALIGN8(sizeof(struct shm_msg) + len);
	if (len > shm_ring_max_payload(r)) return NULL;
	uint64_t head = atomic_load_explicit(&r->h->head, memory_order_relaxed);
	uint64_t tail = atomic_load_explicit(&r->h->tail, memory_order_acquire);
	uint64_t off = head & (r->size - 1);
	uint64_t to_end = r->size - off;
	uint64_t skip = to_end < need ? to_end : 0; /* never split: fill the end, start at 0 */
	if (head + skip + need - tail > r->size) return NULL;
	if (skip) {
		if (to_end >= sizeof(struct shm_msg)) {
			struct shm_msg *m = (struct shm_msg *)(r->data + off);
			m->type = 0;
			m->len = (uint32_t)(to_end - sizeof(struct shm_msg));
		}
		/* the consumer knows an end shorter than a header is skipped too */
		atomic_store_explicit(&r->h->head, head + skip, memory_order_release);
		off = 0;
	}
	struct shm_msg *m = (struct shm_msg *)(r->data + off);
	m->type = type;
	m->len = len;
	return m;
}

static void commit(struct shm_ring *r, struct shm_msg *m, bool wake)
{
	uint64_t head = atomic_load_explicit(&r->h->head, memory_order_relaxed);
	head += ALIGN8(sizeof *m + m->len);
	atomic_store_explicit(&r->h->head, head, memory_order_release);
	uint64_t tail = atomic_load_explicit(&r->h->tail, memory_order_acquire);
	if (tail - r->trimmed_at >= TRIM_BYTES && r->size > 2 * TRIM_GUARD) {
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		uint64_t ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
		if (!r->trimmed_ns || ns - r->trimmed_ns >= TRIM_EVERY_NS) {
			r->trimmed_at = tail;
			r->trimmed_ns = ns;
			trim(r, head, tail);
		}
	}
	uint64_t unread = atomic_fetch_add(&r->h->unread, 1) + 1;
	if (!wake) return;
	uint32_t want = atomic_load(&r->h->cons_waiting);
	if (want && unread >= want) bump(r);
}

void shm_ring_commit(struct shm_ring *r, struct shm_msg *m) { commit(r, m, true); }

void shm_ring_commit_quiet(struct shm_ring *r, struct shm_msg *m) { commit(r, m, false); }

void shm_ring_flush(struct shm_ring *r)
{
	if (atomic_load(&r->h->cons_waiting)) bump(r);
}

void shm_ring_close(struct shm_ring *r)
{
	atomic_store(&r->h->closed, 1);
	bump(r);
}

bool shm_ring_is_closed(const struct shm_ring *r) { return atomic_load(&r->h->closed) != 0; }

bool shm_ring_wait_space(struct shm_ring *r, uint32_t len, int timeout_ms)
{
	uint64_t need = 2 * ALIGN8(sizeof(struct shm_msg) + len); /* a skip may come first */
	for (;;) {
		uint32_t seq = atomic_load(&r->h->futex);
		uint64_t used = atomic_load(&r->h->head) - atomic_load(&r->h->tail);
		if (used + need <= r->size) return true;
		atomic_store(&r->h->prod_waiting, 1);
		used = atomic_load(&r->h->head) - atomic_load(&r->h->tail);
		if (used + need <= r->size) {
			atomic_store(&r->h->prod_waiting, 0);
			return true;
		}
		futex_wait(&r->h->futex, seq, timeout_ms);
		atomic_store(&r->h->prod_waiting, 0);
		used = atomic_load(&r->h->head) - atomic_load(&r->h->tail);
		if (used + need <= r->size) return true;
		return false;
	}
}

struct shm_msg *shm_ring_peek(struct shm_ring *r)
{
	for (;;) {
		uint64_t tail = atomic_load_explicit(&r->h->tail, memory_order_relaxed);
		uint64_t head = atomic_load_explicit(&r->h->head, memory_order_acquire);
		if (tail == head) return NULL;
		uint64_t off = tail & (r->size - 1);
		uint64_t to_end = r->size - off;
		if (to_end < sizeof(struct shm_msg)) { /* a skipped end too short for a header */
			atomic_store_explicit(&r->h->tail, tail + to_end, memory_order_release);
			continue;
		}
		struct shm_msg *m = (struct shm_msg *)(r->data + off);
		if (m->type == 0) {
			atomic_store_explicit(&r->h->tail, tail + to_end, memory_order_release);
			continue;
		}
		return m;
	}
}

void shm_ring_release(struct shm_ring *r, struct shm_msg *m)
{
	uint64_t tail = atomic_load_explicit(&r->h->tail, memory_order_relaxed);
	atomic_store_explicit(&r->h->tail, tail + ALIGN8(sizeof *m + m->len), memory_order_release);
	atomic_fetch_sub(&r->h->unread, 1);
	if (atomic_load(&r->h->prod_waiting)) bump(r);
}

bool shm_ring_wait_msg(struct shm_ring *r, uint32_t want, int timeout_ms)
{
	if (!want) want = 1;
	uint32_t seq = atomic_load(&r->h->futex);
	if (shm_ring_peek(r) && atomic_load(&r->h->unread) >= want) return true;
	atomic_store(&r->h->cons_waiting, want);
	if (shm_ring_peek(r) && atomic_load(&r->h->unread) >= want) {
		atomic_store(&r->h->cons_waiting, 0);
		return true;
	}
	if (!shm_ring_is_closed(r)) futex_wait(&r->h->futex, seq, timeout_ms);
	atomic_store(&r->h->cons_waiting, 0);
	return shm_ring_peek(r) != NULL;
}
