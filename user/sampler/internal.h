/* What the sampler's files share: the real functions, the per-thread state, the slow paths.
 * Everything here is hidden (the library exports only sampler.h). */
#ifndef MEMTRACED_SAMPLER_INTERNAL_H
#define MEMTRACED_SAMPLER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "sampler.h"

#define HIDDEN __attribute__((visibility("hidden")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* The real functions, resolved once (dlsym(RTLD_DEFAULT): the first definition in the global
 * scope). A GOT slot's old value is never called: it may be a lazy-binding stub. */
struct real_fns {
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*reallocarray)(void *, size_t, size_t);
	void (*free)(void *);
	void (*cfree)(void *);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	void *new_[8];     /* operator new, MTS_NEW.. in enum order (wrap_ext.c casts) */
	void *delete_[12]; /* operator delete, MTS_DELETE.. */
	void *(*mallocx)(size_t, int);
	void *(*rallocx)(void *, size_t, int);
	size_t (*xallocx)(void *, size_t, size_t, int);
	void (*dallocx)(void *, int);
	void (*sdallocx)(void *, size_t, int);
	void *(*reallocf)(void *, size_t);
	void *(*dlopen)(const char *, int);
};
extern struct real_fns mts_real HIDDEN;
/* Where a non-PIE program takes a function's address, its PLT entry becomes that function's
 * address for the whole process (dlsym returns it, other objects' GLOB_DAT slots hold it):
 * mts_canonical[fn] is that address, and mts_real the definition it leads to (calling through
 * it would come back to the wrapper once the program's own slot is redirected). 0: none. */
extern uintptr_t mts_canonical[MTS_FN_COUNT] HIDDEN;

/* One entry per wrapped name: the wrapper stored into GOT slots, where its real function goes. */
struct wrap_entry {
	const char *name;
	void *wrapper;
	void **real;
	int fn; /* enum memtraced_sampler_fn */
};
extern const struct wrap_entry mts_wraps[MTS_FN_COUNT] HIDDEN;
const struct wrap_entry *mts_wrap_by_name(const char *name) HIDDEN;
const struct wrap_entry *mts_wrap_by_addr(uintptr_t wrapper) HIDDEN;

/* Per thread, in initial-exec TLS (glibc's static TLS surplus: first touch never allocates). */
struct sampler_thread {
	int64_t countdown;   /* bytes before the next sample point; <= 0: take the slow path */
	uintptr_t outer_sp;  /* rsp of the outermost wrapper call under way (0: none) */
	uint64_t rng;        /* xorshift state (0: not seeded) */
	uint32_t gen;        /* the rate generation the countdown was drawn for */
	uint32_t thin_left;  /* memtraced_sampler_thin: samples left in the block, */
	uint32_t thin_k, thin_pick; /* its k, the one it keeps */
	int32_t idle_calls;  /* pass-through calls before the next look at the tracer (sampler.c) */
	unsigned long allocs, frees, nsamples; /* memtraced_sampler_thread_counts */
};
extern __thread struct sampler_thread mts_thread HIDDEN __attribute__((tls_model("initial-exec")));

/* The rate, written by start. */
struct sampler_config {
	volatile int active;        /* started and not stopped */
	volatile int all_words;     /* rate 1 */
	volatile uint64_t mean_gap; /* bytes */
	volatile uint32_t gen;      /* bumped by each start: countdowns are redrawn */
	volatile int leased;        /* started by memtraced: lapses without a tracer (sampler.c) */
	volatile int pending_walk;  /* objects may have been loaded unpatched: walk at the next
	                             * slow path that can take the patch lock */
};
extern struct sampler_config mts_config HIDDEN;
/* A 64-bit random number of the thread's generator (countdown.c). */
uint64_t mts_random(struct sampler_thread *t) HIDDEN;

/* fork (usdt.c, got.c): from fork's prepare to its handlers no probe fires; the child's handler
 * puts the probe sites' nops back where the kernel made them calls into a page the child does
 * not have. */
extern volatile int mts_usdt_held HIDDEN;
void mts_usdt_fork_child(void) HIDDEN;

/* Hidden aliases of the semaphores: read without a GOT load. */
extern volatile unsigned short mts_alloc_sem HIDDEN, mts_free_sem HIDDEN;

#define STAT_ADD(field, n) __atomic_fetch_add(&memtraced_sampler_stats.field, (n), __ATOMIC_RELAXED)

static inline uintptr_t current_sp(void)
{
	uintptr_t sp;
	__asm__ volatile("mov %%rsp, %0" : "=r"(sp));
	return sp;
}

/* A sampler that lives only while it is read (issue 47): started, with no tracer on its alloc
 * probe for SAMPLER_LAPSE_NS (memtraced killed: the kernel dropped its uprobes and the
 * semaphore), it puts the GOT back by itself, so that the program runs at its untraced cost
 * (a killed memtraced left malloc/free 1.43-1.60x slower for good). Looked at every
 * IDLE_CHECK_CALLS pass-through calls of a thread; sampler.c. */
#define IDLE_CHECK_CALLS MEMTRACED_SAMPLER_IDLE_CALLS
#define SAMPLER_LAPSE_NS MEMTRACED_SAMPLER_LAPSE_NS
void mts_idle_check(struct sampler_thread *t) HIDDEN;

/* The pass-through test of every allocation wrapper: no tracer, the real function only. */
static inline bool passing_through(struct sampler_thread *t)
{
	if (likely(!mts_alloc_sem)) {
		if (unlikely(--t->idle_calls < 0))
			mts_idle_check(t);
		return true;
	}
	return false;
}

/* Is this call nested in another wrapped call of the same thread (operator new -> malloc
 * through libstdc++'s GOT)? Nested calls run deeper on the stack. */
static inline bool nested_call(const struct sampler_thread *t)
{
	return unlikely(t->outer_sp != 0) && current_sp() < t->outer_sp;
}

/* A nested call failed: the outer call is about to fail too, and operator new fails by
 * throwing bad_alloc through its wrapper, which then never clears its marker. Left set, the
 * marker made every later call from a deeper frame look nested: none was seen (issue 34). So
 * it is cleared now. (A new_handler that frees memory and lets operator new try again makes
 * that retry count as a call of its own.) */
static inline void nested_failed(struct sampler_thread *t)
{
	t->outer_sp = 0;
}

/* Number of sample points in a block of size bytes (size > 0), advancing the countdown: the
 * exact statistics of sample_points() in bpf/memtraced.bpf.c. countdown.c. */
uint64_t mts_sample_points(struct sampler_thread *t, uint64_t size) HIDDEN;

/* The fast test: does this allocation of size bytes need the slow path? Consumes the bytes
 * from the countdown when it does not. */
static inline bool countdown_expires(struct sampler_thread *t, uint64_t size)
{
	int64_t left = t->countdown - (int64_t)size;
	if (likely(left > 0 && size < (1ULL << 62))) {
		t->countdown = left;
		return false;
	}
	return true;
}

/* The slow part of the countdown (countdown.c): counts the call, runs a pending patch walk,
 * returns 0 when stopped or for size 0. */
uint64_t mts_slow_samples(struct sampler_thread *t, uint64_t size) HIDDEN;

/* nsamples of an allocation of size bytes: 0 on the fast path. */
static inline uint64_t take_samples(struct sampler_thread *t, uint64_t size)
{
	if (likely(!countdown_expires(t, size)))
		return 0;
	return mts_slow_samples(t, size);
}

/* Slow paths (record.c). */
void mts_record_alloc(struct sampler_thread *t, int fn, void *p, uint64_t size,
		      uint64_t nsamples) HIDDEN;
/* Drops p from the sampled set; fires the free probe if it was there. Returns whether it was. */
bool mts_forget_block(int fn, void *p, uint64_t *size, uint64_t *weight) HIDDEN;
/* Puts back a block whose resize failed (it is still valid), firing alloc again. */
void mts_restore_block(void *p, uint64_t size, uint64_t weight) HIDDEN;

/* Is the sampled set empty? The free fast path's only test. */
extern volatile long mts_set_live HIDDEN;

/* GOT patching (got.c). */
/* Walks the loaded objects and redirects their slots. wait: block on the patch lock (start);
 * otherwise give up when another thread holds it (returns -EBUSY). */
long mts_patch_all(bool wait) HIDDEN;
long mts_restore_all(void) HIDDEN;

#endif
