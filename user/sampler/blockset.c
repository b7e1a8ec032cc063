/* The set of sampled blocks: a lock-free hash set of addresses in mmap'ed memory, so blocks carry
 * no header (pointers and malloc_usable_size stay exactly as the allocator returns them) and a
 * pointer can never be sent to the wrong free.
 *
 * Buckets of 8 addresses, one cache line each: an address lives only in its own bucket, so a
 * lookup reads one line and needs no tombstones (a removal writes 0 back). An address is in the
 * set at most once: the allocator hands out a live address once, and a removal comes before the
 * real free or resize that could hand it out again. A full bucket drops the sample (counted).
 * With 64k buckets (512k slots) and a Poisson load of a few per bucket, a full one is rare
 * even at rate 1 for a heap of 100k live blocks; at the default rate a 10 GB heap holds ~13k.
 * The size and weight of each block sit in a parallel array, read only on slow paths. */
#include <sys/mman.h>
#include "internal.h"
#include "blockset.h"

#define BUCKET_BITS 16
#define BUCKET_SLOTS 8
#define NSLOTS ((size_t)BUCKET_SLOTS << BUCKET_BITS)

struct block_meta {
	uint64_t size, weight;
};

static uint64_t *keys;            /* NSLOTS addresses, 0: free */
static struct block_meta *metas;  /* NSLOTS */
volatile long mts_set_live;

int blockset_init(void)
{
	if (__atomic_load_n(&keys, __ATOMIC_ACQUIRE))
		return 0;
	/* MAP_NORESERVE: pages are touched only where blocks land. */
	void *k = mmap(NULL, NSLOTS * sizeof(uint64_t), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (k == MAP_FAILED)
		return -1;
	void *m = mmap(NULL, NSLOTS * sizeof(struct block_meta), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		munmap(k, NSLOTS * sizeof(uint64_t));
		return -1;
	}
	metas = m;
	__atomic_store_n(&keys, (uint64_t *)k, __ATOMIC_RELEASE);
	return 0;
}

static inline uint64_t *bucket_of(uint64_t addr)
{
	uint64_t h = (addr * 0x9e3779b97f4a7c15ULL) >> (64 - BUCKET_BITS);
	return keys + h * BUCKET_SLOTS;
}

bool blockset_put(void *p, uint64_t size, uint64_t weight)
{
	uint64_t addr = (uintptr_t)p;
	if (!keys || !addr)
		return false;
	uint64_t *b = bucket_of(addr);
	for (int i = 0; i < BUCKET_SLOTS; i++) {
		if (__atomic_load_n(&b[i], __ATOMIC_RELAXED) == addr) {
			/* freed behind our back (a path we do not wrap): reuse the entry */
			STAT_ADD(set_stale, 1);
			metas[&b[i] - keys] = (struct block_meta){ size, weight };
			return true;
		}
	}
	for (int i = 0; i < BUCKET_SLOTS; i++) {
		uint64_t expected = 0;
		if (__atomic_load_n(&b[i], __ATOMIC_RELAXED) == 0 &&
		    __atomic_compare_exchange_n(&b[i], &expected, addr, false, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED)) {
			/* Only the thread that frees this block reads its meta, after the allocation
			 * returned: ordered by the program's own hand-over of the pointer. */
			metas[&b[i] - keys] = (struct block_meta){ size, weight };
			__atomic_fetch_add(&mts_set_live, 1, __ATOMIC_RELAXED);
			return true;
		}
	}
	STAT_ADD(set_full, 1);
	return false;
}

bool blockset_take(void *p, uint64_t *size, uint64_t *weight)
{
	uint64_t addr = (uintptr_t)p;
	uint64_t *k = __atomic_load_n(&keys, __ATOMIC_ACQUIRE);
	if (!k || !addr)
		return false;
	uint64_t *b = bucket_of(addr);
	for (int i = 0; i < BUCKET_SLOTS; i++) {
		if (__atomic_load_n(&b[i], __ATOMIC_RELAXED) != addr)
			continue;
		/* the meta is read before the slot is given up: afterwards another block may own it */
		struct block_meta m = metas[&b[i] - keys];
		uint64_t expected = addr;
		if (!__atomic_compare_exchange_n(&b[i], &expected, 0, false, __ATOMIC_ACQ_REL,
						 __ATOMIC_RELAXED))
			return false; /* cleared under us by a stop */
		__atomic_fetch_sub(&mts_set_live, 1, __ATOMIC_RELAXED);
		if (size)
			*size = m.size;
		if (weight)
			*weight = m.weight;
		return true;
	}
	return false;
}

bool blockset_contains(void *p)
{
	uint64_t addr = (uintptr_t)p;
	uint64_t *k = __atomic_load_n(&keys, __ATOMIC_ACQUIRE);
	if (!k || !addr)
		return false;
	uint64_t *b = bucket_of(addr);
	for (int i = 0; i < BUCKET_SLOTS; i++)
		if (__atomic_load_n(&b[i], __ATOMIC_RELAXED) == addr)
			return true;
	return false;
}

void blockset_clear(void)
{
	if (!keys)
		return;
	/* Private anonymous memory: MADV_DONTNEED gives zero pages back; a racing reader sees the
	 * old line or zeros, never anything else. */
	madvise(keys, NSLOTS * sizeof(uint64_t), MADV_DONTNEED);
	madvise(metas, NSLOTS * sizeof(struct block_meta), MADV_DONTNEED);
	__atomic_store_n(&mts_set_live, 0, __ATOMIC_RELAXED);
}
