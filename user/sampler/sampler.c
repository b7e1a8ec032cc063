/* The exported entry points: start, stop, version. */
#include <dlfcn.h>
#include <errno.h>
#include <time.h>
#include "internal.h"
#include "blockset.h"
#include "got.h"
#include "walker.h"

#include <stddef.h>
_Static_assert(offsetof(struct memtraced_sampler_stats, calls) == MEMTRACED_SAMPLER_STATS_OFF_CALLS,
	       "memtraced reads calls at this offset");

struct sampler_config mts_config;
static bool resolved;
static uint64_t idle_since_ns; /* started, its alloc probe seen without a tracer since (0: not) */

/* The real functions, once: dlsym(RTLD_DEFAULT) gives the first definition in the global scope
 * (jemalloc's malloc for a program linked with libjemalloc). Only the first start asks, before
 * any slot is redirected: a failed dlsym (no jemalloc) allocates its error message. */
static void resolve_reals(void)
{
	if (resolved)
		return;
	for (int i = 0; i < MTS_FN_COUNT; i++)
		*mts_wraps[i].real = dlsym(RTLD_DEFAULT, mts_wraps[i].name);
	got_resolve_canonical();
	resolved = true;
}

__attribute__((visibility("default")))
long memtraced_sampler_start(unsigned long mean_gap_bytes, unsigned long flags)
{
	bool all = flags & MEMTRACED_SAMPLER_ALL_WORDS;
	if (!all && mean_gap_bytes == 0)
		return -EINVAL;
	if (blockset_init() != 0 || got_init() != 0)
		return -ENOMEM;
	got_guard_forks();
	/* before any slot leads to us: pthread_create allocates (the thread's TLS vector), which
	 * must not be traced as the program's. Without it, the slow path walks after a dlopen. */
	mts_walker_start();
	got_lock(true);
	resolve_reals();
	if (!mts_real.malloc || !mts_real.free) {
		got_unlock();
		return -ENOENT;
	}
	if (!mts_config.active)
		blockset_clear(); /* blocks left by a stopped session */
	memtraced_sampler_thin.k = 1; /* a memtraced killed while it thinned left its k */
	mts_config.all_words = all;
	mts_config.mean_gap = all ? 8 : mean_gap_bytes;
	mts_config.gen++;
	__atomic_store_n(&idle_since_ns, 0, __ATOMIC_RELAXED);
	mts_config.leased = (flags & MEMTRACED_SAMPLER_LEASED) != 0;
	mts_config.active = 1;
	mts_config.pending_walk = 0;
	long n = got_patch_locked();
	got_unlock();
	STAT_ADD(starts, 1);
	return n;
}

__attribute__((visibility("default")))
long memtraced_sampler_stop(void)
{
	if (got_init() != 0)
		return -ENOMEM;
	mts_walker_stop(); /* before the lock: its walk may wait for it */
	got_lock(true);
	mts_config.active = 0;
	long n = got_restore_locked();
	blockset_clear();
	got_unlock();
	STAT_ADD(stops, 1);
	return n;
}

__attribute__((visibility("default")))
long memtraced_sampler_version(void)
{
	return MEMTRACED_SAMPLER_VERSION;
}

/* The lapse (internal.h): on a pass-through call of any thread, maybe in a signal handler, so
 * nothing here waits: the patch lock is tried, the walker told to quit without a join. */
static void let_go(void)
{
	if (!got_lock(false))
		return; /* a walk under way: a later call */
	bool gone = mts_config.active && !mts_alloc_sem;
	if (gone) {
		mts_config.active = 0;
		got_restore_locked();
		blockset_clear();
	}
	got_unlock();
	if (gone) {
		mts_walker_quit();
		STAT_ADD(lapsed, 1);
	}
}

void mts_idle_check(struct sampler_thread *t)
{
	t->idle_calls = IDLE_CHECK_CALLS;
	if (!mts_config.active || !mts_config.leased || mts_alloc_sem)
		return; /* a program's own sampler waits for its tracer as long as it likes */
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	uint64_t since = __atomic_load_n(&idle_since_ns, __ATOMIC_RELAXED);
	if (!since) {
		__atomic_compare_exchange_n(&idle_since_ns, &since, now, false, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED);
		return;
	}
	if (now - since >= SAMPLER_LAPSE_NS)
		let_go();
}
