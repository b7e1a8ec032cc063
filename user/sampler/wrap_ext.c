/* The wrappers of C++ operator new/delete (every form) and of jemalloc's *allocx API.
 *
 * Every form of a family shares one wrapper body taking three integer arguments: the unused
 * ones are whatever the caller left in rsi/rdx, passed on untouched, which the callee ignores
 * (SysV x86-64). operator new may throw bad_alloc through its wrapper: the malloc that failed
 * under it has cleared the outermost-call marker already (nested_failed). */
#include "internal.h"

typedef void *(*new_fn)(size_t, uintptr_t, uintptr_t);
typedef void (*delete_fn)(void *, uintptr_t, uintptr_t);

static inline void *new_body(int fn, size_t size, uintptr_t a2, uintptr_t a3)
{
	new_fn real = (new_fn)mts_real.new_[fn - MTS_NEW];
	struct sampler_thread *t = &mts_thread;
	if (passing_through(t) || nested_call(t))
		return real(size, a2, a3);
	uint64_t n = take_samples(t, size);
	t->outer_sp = current_sp(); /* libstdc++'s new calls malloc through its GOT: not again */
	void *p = real(size, a2, a3);
	t->outer_sp = 0;
	if (unlikely(n != 0) && p)
		mts_record_alloc(t, fn, p, size, n);
	return p;
}

static __attribute__((noinline)) void delete_slow(int fn, void *p, uintptr_t a2, uintptr_t a3)
{
	if (p)
		mts_forget_block(fn, p, NULL, NULL);
	((delete_fn)mts_real.delete_[fn - MTS_DELETE])(p, a2, a3);
}

static inline void delete_body(int fn, void *p, uintptr_t a2, uintptr_t a3)
{
	if (unlikely(mts_set_live != 0))
		return delete_slow(fn, p, a2, a3);
	((delete_fn)mts_real.delete_[fn - MTS_DELETE])(p, a2, a3);
}

#define NEW_WRAPPER(name, fn)                                                      \
	HIDDEN void *name(size_t size, uintptr_t a2, uintptr_t a3)                 \
	{                                                                          \
		return new_body(fn, size, a2, a3);                                 \
	}
#define DELETE_WRAPPER(name, fn)                                                   \
	HIDDEN void name(void *p, uintptr_t a2, uintptr_t a3)                      \
	{                                                                          \
		delete_body(fn, p, a2, a3);                                        \
	}

NEW_WRAPPER(mts_new, MTS_NEW)
NEW_WRAPPER(mts_new_array, MTS_NEW_ARRAY)
NEW_WRAPPER(mts_new_nothrow, MTS_NEW_NOTHROW)
NEW_WRAPPER(mts_new_array_nothrow, MTS_NEW_ARRAY_NOTHROW)
NEW_WRAPPER(mts_new_aligned, MTS_NEW_ALIGNED)
NEW_WRAPPER(mts_new_array_aligned, MTS_NEW_ARRAY_ALIGNED)
NEW_WRAPPER(mts_new_aligned_nothrow, MTS_NEW_ALIGNED_NOTHROW)
NEW_WRAPPER(mts_new_array_aligned_nothrow, MTS_NEW_ARRAY_ALIGNED_NOTHROW)
DELETE_WRAPPER(mts_delete, MTS_DELETE)
DELETE_WRAPPER(mts_delete_array, MTS_DELETE_ARRAY)
DELETE_WRAPPER(mts_delete_sized, MTS_DELETE_SIZED)
DELETE_WRAPPER(mts_delete_array_sized, MTS_DELETE_ARRAY_SIZED)
DELETE_WRAPPER(mts_delete_nothrow, MTS_DELETE_NOTHROW)
DELETE_WRAPPER(mts_delete_array_nothrow, MTS_DELETE_ARRAY_NOTHROW)
DELETE_WRAPPER(mts_delete_aligned, MTS_DELETE_ALIGNED)
DELETE_WRAPPER(mts_delete_array_aligned, MTS_DELETE_ARRAY_ALIGNED)
DELETE_WRAPPER(mts_delete_sized_aligned, MTS_DELETE_SIZED_ALIGNED)
DELETE_WRAPPER(mts_delete_array_sized_aligned, MTS_DELETE_ARRAY_SIZED_ALIGNED)
DELETE_WRAPPER(mts_delete_aligned_nothrow, MTS_DELETE_ALIGNED_NOTHROW)
DELETE_WRAPPER(mts_delete_array_aligned_nothrow, MTS_DELETE_ARRAY_ALIGNED_NOTHROW)

/* jemalloc */
HIDDEN void *mts_mallocx(size_t size, int flags)
{
	struct sampler_thread *t = &mts_thread;
	if (passing_through(t) || nested_call(t))
		return mts_real.mallocx(size, flags);
	uint64_t n = take_samples(t, size);
	t->outer_sp = current_sp();
	void *p = mts_real.mallocx(size, flags);
	t->outer_sp = 0;
	if (unlikely(n != 0) && p)
		mts_record_alloc(t, MTS_MALLOCX, p, size, n);
	return p;
}

void *mts_resize(int fn, void *p, size_t size, size_t n, size_t elem, int flags) HIDDEN;

HIDDEN void *mts_rallocx(void *p, size_t size, int flags)
{
	return mts_resize(MTS_RALLOCX, p, size, 0, 0, flags);
}

/* Resizes in place or not at all, returning the usable size: resized when that is >= size.
 * Then it is a free (if the block was sampled) plus a new allocation of size at the same
 * address (if that is sampled); otherwise nothing happened. */
HIDDEN size_t mts_xallocx(void *p, size_t size, size_t extra, int flags)
{
	struct sampler_thread *t = &mts_thread;
	if (passing_through(t) || nested_call(t))
		return mts_real.xallocx(p, size, extra, flags);
	uint64_t n = take_samples(t, size);
	t->outer_sp = current_sp();
	size_t usable = mts_real.xallocx(p, size, extra, flags);
	t->outer_sp = 0;
	if (usable >= size && p) {
		if (mts_set_live)
			mts_forget_block(MTS_XALLOCX, p, NULL, NULL);
		if (n)
			mts_record_alloc(t, MTS_XALLOCX, p, size, n);
	}
	return usable;
}

static __attribute__((noinline)) void dallocx_slow(int fn, void *p, size_t size, int flags)
{
	if (p)
		mts_forget_block(fn, p, NULL, NULL);
	if (fn == MTS_DALLOCX)
		mts_real.dallocx(p, flags);
	else
		mts_real.sdallocx(p, size, flags);
}

HIDDEN void mts_dallocx(void *p, int flags)
{
	if (unlikely(mts_set_live != 0))
		return dallocx_slow(MTS_DALLOCX, p, 0, flags);
	mts_real.dallocx(p, flags);
}

HIDDEN void mts_sdallocx(void *p, size_t size, int flags)
{
	if (unlikely(mts_set_live != 0))
		return dallocx_slow(MTS_SDALLOCX, p, size, flags);
	mts_real.sdallocx(p, size, flags);
}
