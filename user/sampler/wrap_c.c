/* The wrappers of the C allocation functions and of dlopen. GOT slots point here while the
 * sampler is started.
 *
 * Fast paths: with the alloc semaphore 0 a call only passes through; otherwise an unsampled
 * call subtracts its size from the thread's countdown and calls the real function (the
 * non-leaf functions also mark the thread's outermost call, so the malloc they may call through
 * a GOT is not counted again). A free tests whether the sampled set is empty, else looks the
 * pointer up in one cache line. Frees drop a sampled block from the set even with no tracer
 * (no probe then), so a later tracer never sees stale blocks. */
#include <string.h>
#include <errno.h>
#include "internal.h"

/* A wrapped allocation that returns its block. call is evaluated once on every path. A
 * nested call that fails clears the marker (see nested_failed). */
#define ALLOC_BODY(fn, size_expr, call)                                                   \
	do {                                                                              \
		struct sampler_thread *t = &mts_thread;                                   \
		if (passing_through(t))                                               \
			return call;                                                      \
		if (nested_call(t)) {                                                     \
			void *r_ = call;                                                  \
			if (unlikely(!r_)) nested_failed(t);                              \
			return r_;                                                        \
		}                                                                         \
		uint64_t size_ = (size_expr);                                             \
		uint64_t n_ = take_samples(t, size_);                                     \
		t->outer_sp = current_sp();                                               \
		void *r_ = call;                                                          \
		t->outer_sp = 0;                                                          \
		if (unlikely(n_ != 0) && r_)                                              \
			mts_record_alloc(t, fn, r_, size_, n_);                           \
		return r_;                                                                \
	} while (0)

static __attribute__((noinline)) void *malloc_slow(struct sampler_thread *t, size_t size)
{
	uint64_t n = mts_slow_samples(t, size);
	t->outer_sp = current_sp();
	void *p = mts_real.malloc(size);
	t->outer_sp = 0;
	if (n && p)
		mts_record_alloc(t, MTS_MALLOC, p, size, n);
	return p;
}

static __attribute__((noinline)) void *malloc_nested(struct sampler_thread *t, size_t size)
{
	void *p = mts_real.malloc(size);
	if (unlikely(!p)) nested_failed(t);
	return p;
}

/* The hottest path: semaphore, nesting marker, countdown, then a tail call. */
HIDDEN void *mts_malloc(size_t size)
{
	struct sampler_thread *t = &mts_thread;
	if (passing_through(t))
		return mts_real.malloc(size);
	if (nested_call(t))
		return malloc_nested(t, size);
	if (likely(!countdown_expires(t, size)))
		return mts_real.malloc(size);
	return malloc_slow(t, size);
}

HIDDEN void *mts_calloc(size_t n, size_t elem)
{
	size_t size;
	if (__builtin_mul_overflow(n, elem, &size))
		return mts_real.calloc(n, elem); /* fails: nothing to sample */
	ALLOC_BODY(MTS_CALLOC, size, mts_real.calloc(n, elem));
}

HIDDEN void *mts_aligned_alloc(size_t align, size_t size)
{
	ALLOC_BODY(MTS_ALIGNED_ALLOC, size, mts_real.aligned_alloc(align, size));
}

HIDDEN void *mts_memalign(size_t align, size_t size)
{
	ALLOC_BODY(MTS_MEMALIGN, size, mts_real.memalign(align, size));
}

HIDDEN void *mts_valloc(size_t size)
{
	ALLOC_BODY(MTS_VALLOC, size, mts_real.valloc(size));
}

HIDDEN void *mts_pvalloc(size_t size)
{
	ALLOC_BODY(MTS_PVALLOC, size, mts_real.pvalloc(size));
}

HIDDEN int mts_posix_memalign(void **memptr, size_t align, size_t size)
{
	struct sampler_thread *t = &mts_thread;
	if (passing_through(t))
		return mts_real.posix_memalign(memptr, align, size);
	if (nested_call(t)) {
		int rc = mts_real.posix_memalign(memptr, align, size);
		if (unlikely(rc != 0)) nested_failed(t);
		return rc;
	}
	uint64_t n = take_samples(t, size);
	t->outer_sp = current_sp();
	int rc = mts_real.posix_memalign(memptr, align, size);
	t->outer_sp = 0;
	if (unlikely(n != 0) && rc == 0)
		mts_record_alloc(t, MTS_POSIX_MEMALIGN, *memptr, size, n);
	return rc;
}

/* free-like: drop the block from the set (and fire free) BEFORE the real call: once freed, the
 * address may come back from another thread's malloc at once. The slow part is a separate
 * function so that the fast path is a load, a test and a tail jump. */
static __attribute__((noinline)) void free_slow(int fn, void *p)
{
	if (p)
		mts_forget_block(fn, p, NULL, NULL);
	if (fn == MTS_FREE)
		mts_real.free(p);
	else
		mts_real.cfree(p);
}

HIDDEN void mts_free(void *p)
{
	if (unlikely(mts_set_live != 0))
		return free_slow(MTS_FREE, p);
	mts_real.free(p);
}

HIDDEN void mts_cfree(void *p)
{
	if (unlikely(mts_set_live != 0))
		return free_slow(MTS_CFREE, p);
	mts_real.cfree(p);
}

/* The resizing functions share one path (rallocx is in wrap_ext.c, through it too). */
HIDDEN void *mts_resize_call(int fn, void *p, size_t size, size_t n, size_t elem, int flags)
{
	switch (fn) {
	case MTS_REALLOC: return mts_real.realloc(p, size);
	case MTS_REALLOCARRAY: return mts_real.reallocarray(p, n, elem);
	case MTS_REALLOCF: return mts_real.reallocf(p, size);
	default: return mts_real.rallocx(p, size, flags);
	}
}

/* A sampled old block leaves the set (free fired) before the call; when the call fails and the
 * old block is still valid it goes back (alloc fired again). The result is then counted like a
 * new allocation of the new size. */
HIDDEN void *mts_resize(int fn, void *p, size_t size, size_t n, size_t elem, int flags)
{
	struct sampler_thread *t = &mts_thread;
	bool sem = mts_alloc_sem != 0;
	if (nested_call(t) || (!sem && (!p || !mts_set_live)))
		return mts_resize_call(fn, p, size, n, elem, flags);
	uint64_t old_size = 0, old_weight = 0;
	bool was_sampled = p && mts_set_live && mts_forget_block(fn, p, &old_size, &old_weight);
	uint64_t samples = sem ? take_samples(t, size) : 0;
	t->outer_sp = current_sp();
	void *r = mts_resize_call(fn, p, size, n, elem, flags);
	t->outer_sp = 0;
	if (!r) {
		/* realloc(p, 0) returning NULL freed p; reallocf frees p when it fails */
		bool old_valid = size != 0 && fn != MTS_REALLOCF;
		if (was_sampled && old_valid)
			mts_restore_block(p, old_size, old_weight);
	} else if (samples) {
		mts_record_alloc(t, fn, r, size, samples);
	}
	return r;
}

HIDDEN void *mts_realloc(void *p, size_t size)
{
	return mts_resize(MTS_REALLOC, p, size, 0, 0, 0);
}

HIDDEN void *mts_reallocf(void *p, size_t size)
{
	return mts_resize(MTS_REALLOCF, p, size, 0, 0, 0);
}

HIDDEN void *mts_reallocarray(void *p, size_t n, size_t elem)
{
	size_t size;
	if (__builtin_mul_overflow(n, elem, &size))
		return mts_real.reallocarray(p, n, elem); /* ENOMEM, the old block stays */
	return mts_resize(MTS_REALLOCARRAY, p, size, n, elem, 0);
}
