/* libmemtraced_sampler.so: the in-process allocation sampler that `memtraced --inject` places
 * into a running target (dlopen, then memtraced_sampler_start).
 *
 * It redirects the GOT slots of every loaded object (and of objects dlopen'ed later) for the
 * allocation functions memtraced probes to its own wrappers. A wrapper calls the real function;
 * a per-thread Poisson byte countdown (the statistics of sample_points() in
 * bpf/memtraced.bpf.c) picks the sampled allocations, which fire the USDT probe
 * otel_memory:alloc(ptr, size, weight); frees of sampled blocks fire otel_memory:free(ptr)
 * (the OpenTelemetry eBPF profiler's memory contract). With no tracer attached (USDT semaphores
 * 0) the wrappers only pass calls through. Runtime dependency: libc only.
 *
 * This header is the library's whole public face: the functions the injector calls with integer
 * arguments, and the diagnostic counters tests read. */
#ifndef MEMTRACED_SAMPLER_H
#define MEMTRACED_SAMPLER_H

#include "sampler_check.h"
#include "sampler_thin.h"

/* flags of memtraced_sampler_start */
#define MEMTRACED_SAMPLER_ALL_WORDS 1UL /* rate 1: every allocation, nsamples = (size+7)/8 */
#define MEMTRACED_SAMPLER_LEASED 2UL    /* started by memtraced: it lapses (below) when no tracer
                                         * reads it; a program's own start does not */

#define MEMTRACED_SAMPLER_VERSION 6

/* Started by memtraced (MEMTRACED_SAMPLER_LEASED), the sampler lives only while a tracer reads
 * it: with its alloc probe's semaphore 0
 * (no tracer: memtraced was killed, and the kernel dropped its uprobes) for LAPSE_NS, it puts
 * the GOT back by itself and goes inert (memtraced_sampler_stats.lapsed), as stop does. A
 * thread looks every IDLE_CALLS calls that pass through. */
#define MEMTRACED_SAMPLER_LAPSE_NS 2000000000ULL
#define MEMTRACED_SAMPLER_IDLE_CALLS 4096

/* Starts (or, while started, updates the rate of) the sampler: sample points are a Poisson
 * process over allocated bytes with mean gap mean_gap_bytes (= 8 / rate), or every word with
 * MEMTRACED_SAMPLER_ALL_WORDS. Redirects the GOT slots of the loaded objects not redirected yet.
 * Returns how many slots this call redirected (>= 0) or -errno (-EINVAL: mean gap 0 without
 * ALL_WORDS; -ENOMEM: no memory for the sampler's tables). */
long memtraced_sampler_start(unsigned long mean_gap_bytes, unsigned long flags);

/* Puts every redirected GOT slot back to the exact value it held before and empties the set of
 * sampled blocks. Returns the number of slots restored. The library stays loaded and inert. */
long memtraced_sampler_stop(void);

/* MEMTRACED_SAMPLER_VERSION: lets a second memtraced reuse a library already in the target. */
long memtraced_sampler_version(void);

/* The calling thread's own counters: out[0] sampled allocations, out[1] sampled frees,
 * out[2] the sample points (nsamples) of its sampled allocations. For tests. */
void memtraced_sampler_thread_counts(unsigned long out[3]);

/* The wrapped functions, in the order of the per-function counters below. */
enum memtraced_sampler_fn {
	MTS_MALLOC, MTS_CALLOC, MTS_REALLOC, MTS_REALLOCARRAY, MTS_FREE, MTS_CFREE,
	MTS_POSIX_MEMALIGN, MTS_ALIGNED_ALLOC, MTS_MEMALIGN, MTS_VALLOC, MTS_PVALLOC,
	MTS_NEW, MTS_NEW_ARRAY, MTS_NEW_NOTHROW, MTS_NEW_ARRAY_NOTHROW,
	MTS_NEW_ALIGNED, MTS_NEW_ARRAY_ALIGNED, MTS_NEW_ALIGNED_NOTHROW, MTS_NEW_ARRAY_ALIGNED_NOTHROW,
	MTS_DELETE, MTS_DELETE_ARRAY, MTS_DELETE_SIZED, MTS_DELETE_ARRAY_SIZED,
	MTS_DELETE_NOTHROW, MTS_DELETE_ARRAY_NOTHROW, MTS_DELETE_ALIGNED, MTS_DELETE_ARRAY_ALIGNED,
	MTS_DELETE_SIZED_ALIGNED, MTS_DELETE_ARRAY_SIZED_ALIGNED,
	MTS_DELETE_ALIGNED_NOTHROW, MTS_DELETE_ARRAY_ALIGNED_NOTHROW,
	MTS_MALLOCX, MTS_RALLOCX, MTS_XALLOCX, MTS_DALLOCX, MTS_SDALLOCX, MTS_REALLOCF,
	MTS_DLOPEN, MTS_DLSYM, MTS_DLVSYM, /* not allocation functions: the loader's, wrapped */
	MTS_FN_COUNT
};

/* Diagnostic counters, exported as the data symbol `memtraced_sampler_stats`. Updated with
 * relaxed atomics on slow paths only (a sampled call, a sampled free, a patch walk): an
 * unsampled call touches none of them. Monotonic; never reset. */
struct memtraced_sampler_stats {
	unsigned long starts, stops;
	unsigned long calls;         /* allocation calls that left the fast path (countdown ran out,
	                              * or every call when sampling every word) */
	unsigned long samples;       /* sampled allocations put in the sampled set */
	unsigned long nsamples;      /* their sample points */
	unsigned long sampled_bytes; /* their sizes */
	unsigned long sampled_frees; /* sampled blocks freed (or resized away) */
	unsigned long usdt_allocs, usdt_frees; /* probes fired (semaphore set) */
	unsigned long realloc_failed; /* failed resizes of a sampled block: put back */
	unsigned long set_full;      /* sampled allocations dropped: their bucket was full */
	unsigned long set_stale;     /* an address was already in the set (freed unseen) */
	unsigned long slots_patched, slots_restored;
	unsigned long slots_foreign; /* slots bound to another definition than the global one: left */
	unsigned long slots_lost;    /* slots found holding a wrapper with no record: given the
	                              * real function at stop */
	unsigned long records_full;  /* slots not patched: the record table was full */
	unsigned long patch_errors;  /* mprotect or /proc/self/maps failures */
	unsigned long walks;         /* walks over the loaded objects (start, dlopen, stop) */
	unsigned long allocs_by_fn[MTS_FN_COUNT]; /* sampled allocations per function */
	unsigned long frees_by_fn[MTS_FN_COUNT];  /* sampled frees per function (realloc & co.:
	                                           * the old block) */
	unsigned long thinned;       /* sampled allocations left out by memtraced_sampler_thin */
	unsigned long lapsed;        /* started with no tracer for 2 s (memtraced killed): the GOT
	                              * put back by the sampler itself */
};

extern struct memtraced_sampler_stats memtraced_sampler_stats;
/* memtraced reads `calls` at this offset (at rate 1: every allocation call, issue 47) */
#define MEMTRACED_SAMPLER_STATS_OFF_CALLS 16

/* The check of the GOT redirections after each walk (include/sampler_check.h). */
extern struct memtraced_sampler_check memtraced_sampler_check;

/* Backpressure from memtraced (written into this process's memory when its pipeline falls
 * behind, 1 again when it has caught up; start sets 1): past 1, the sampled allocations go in
 * blocks of k per thread and one of each, drawn at random, is kept with its weight multiplied
 * by k (unbiased estimates, the probes and the tracer's work k-fold less). */
extern struct memtraced_sampler_thin memtraced_sampler_thin; /* include/sampler_thin.h */

/* The USDT semaphores (section .probes): a tracer attached to otel_memory:alloc / :free raises
 * them (the kernel's uprobe ref_ctr); 0 means pass-through. */
extern volatile unsigned short otel_memory_alloc_semaphore, otel_memory_free_semaphore;

#endif
