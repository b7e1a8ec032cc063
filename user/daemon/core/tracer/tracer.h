/* Loading the BPF program, attaching it to a process's allocator, draining its samples.
 * The BPF side is bpf/memtraced.bpf.c, the records include/memtraced_events.h.
 *
 * Usage: tracer_open() (load + attach), then tracer_poll() in a loop (each call sleeps up to
 * timeout_ms, then delivers every record that arrived), tracer_reconcile() now and then and at
 * the end, tracer_close(). One thread drives a tracer (poll, reconcile); tracer_get_stats may
 * be called from another thread meanwhile.
 *
 * What is delivered:
 * - alloc: successful sampled allocations only (a NULL result, a failed posix_memalign, a
 *   calloc/reallocarray whose size overflows produce nothing; size 0 is never sampled).
 *   realloc(p, n) of a sampled p: a free of p, then (if sampled) the new block, even in place.
 *   A call nested in another probed call (glibc's realloc(NULL, n) -> malloc, reallocarray ->
 *   realloc, an interposer calling the real malloc) is counted once, as the outer function.
 * - free: only for blocks delivered as alloc, at most once per seq (from a FREE record, or
 *   from tracer_reconcile when that record was lost).
 * - Drops (tracer_stats): drop_ringbuf (ring full: the sample is not delivered and not
 *   tracked; a lost FREE is repaired by reconciling), drop_map_full (live or in-flight map
 *   full: the sample is not delivered), drop_stack_copy (the sample IS delivered, with
 *   stack_len 0: the stack could not be read).
 * - Tracers of the same options share one BPF object (tracer_host.c): its programs, one ring
 *   buffer, the maps. A thread of its own reads the ring every 20 ms (sooner when it is 1/8
 *   full) and hands each record to its tracer's inbox, which tracer_poll delivers; a tracer
 *   whose thread stops polling loses its records beyond 64 MiB, counted as drop_ringbuf.
 *   drop_ringbuf also counts, and drop_queue and drop_busy tell apart, a record its session's
 *   queue had no room for and a sample whose CPU's record buffer a preempted program held.
 *   Per tracer the kernel keeps only its links (one uprobe_multi link per object and kind).
 */
#ifndef MEMTRACED_TRACER_H
#define MEMTRACED_TRACER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "protocol/sites.h"

struct tracer_opts {
	double rate;             /* memtrace rate: probability per 8-byte word (1.0 = everything) */
	unsigned stack_bytes;    /* user stack copied per sample (0: MT_STACK_BYTES_DEFAULT, at most
	                            MT_STACK_BYTES_LIMIT, in pieces past MT_STACK_BYTES_MAX);
	                            less when the stack's mapping ends sooner */
	unsigned ringbuf_bytes;  /* 0: default 4 MiB; a power of two */
	bool floor;              /* benchmark floor: empty probes on exactly the same sites */
	enum tracer_attach {     /* how allocator probes attach (--attach-mode, kernel_probe.h) */
		TRACER_ATTACH_AUTO,  /* the fastest mode the kernel has */
		TRACER_ATTACH_SESSION, TRACER_ATTACH_MULTI, TRACER_ATTACH_PERF, /* that one, or an
		                        error naming the kernel feature it lacks */
	} attach;
	bool usdt;               /* no allocator probes: an in-process sampler's USDT probes
	                            (tracer_attach_usdt) */
	bool no_mappings;        /* anonymous mmap/munmap/mremap are not traced (--no-mmap) */
};

struct tracer_alloc {        /* one sampled allocation */
	uint64_t seq;            /* unique per tracer, what the free record refers to */
	uint32_t pid, tid;
	uint64_t time_ns;        /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	uint64_t addr, size, nsamples;
	const uint64_t *regs;    /* 17 registers in DWARF order: rax rdx rcx rbx rsi rdi rbp rsp
	                            r8..r15 rip, as at the allocation function's ENTRY */
	const uint8_t *stack;    /* copy of user stack starting at regs[7] (rsp) */
	size_t stack_len;
	enum alloc_fn fn;        /* the function called (added field) */
	const struct mt_py_frame *py; /* the thread's Python frames, innermost first
	                                 (include/python_frames.h), py_n of them */
	uint16_t py_n, py_status;     /* enum mt_py_status */
	const struct mt_py_code *py_codes; /* names of code objects not shown before, right
	                                      after the frames */
	uint16_t py_ncodes;
	enum tracer_origin {
		TRACER_FROM_PROBE,   /* an allocator's probe: regs as at its entry */
		TRACER_FROM_SAMPLER, /* an in-process sampler's probe: regs and stack at the probe
		                        site inside the sampler, whose frames the unwinder hides;
		                        fn is unknown (AF_MALLOC) */
		TRACER_FROM_MAPPING, /* an anonymous mmap/mremap: regs at the system call (the
		                        innermost frame is the mmap function); fn unknown; freed
		                        through unmaps, never by tracer_reconcile */
	} origin;
};

struct tracer_free {
	uint64_t seq; uint64_t addr; uint64_t time_ns; uint32_t pid, tid;
	bool unmap;              /* not a free: [addr, addr + len) was unmapped (munmap, mremap's
	                            old range, a MAP_FIXED mapping over it); seq is 0: every sampled
	                            mapping in the range is freed or trimmed by the receiver */
	uint64_t len;
};

struct tracer_callbacks {    /* pointers valid during the call; return 0, or -1 when the
                                record could not be kept (counted as a ring-buffer drop; a
                                lost free is repaired by the next reconciliation); alloc
                                returns 1 for a sample thinned on purpose (backpressure: the
                                kept ones carry its weight; not a drop, its free is ignored) */
	int (*alloc)(void *ctx, const struct tracer_alloc *a);
	int (*free)(void *ctx, const struct tracer_free *f);
};

struct tracer_stats {
	uint64_t alloc_calls, free_calls;  /* every call seen by the probes (cheap per-CPU counters) */
	uint64_t samples;                  /* sampled allocations submitted */
	uint64_t drop_ringbuf, drop_map_full, drop_stack_copy;  /* counted per CPU, summed */
	uint64_t reconciled_frees;         /* frees repaired from the live map */
	/* added fields */
	uint64_t nested_skipped;           /* calls inside another probed call, counted once */
	uint64_t bad_records;              /* malformed ring-buffer records ignored (never expected) */
	uint64_t live_reported;            /* sampled blocks reported live and not freed yet */
	uint64_t map_calls;                /* successful anonymous mmap/mremap calls seen */
	uint64_t drop_queue, drop_busy;    /* of drop_ringbuf: the session's queue was full;
	                                      the CPU's record buffer was busy */
	uint64_t record_bytes;             /* ring-buffer bytes of the allocation records read */
	uint64_t max_record_bytes;         /* the largest one */
	uint64_t thinned;                  /* samples left out under backpressure (not drops:
	                                      the kept ones carry their weight) */
	uint64_t stack_recopied;           /* samples whose stack was copied in pieces: the
	                                      kernel's long copy read zeros (bpf: long_copy_wrong) */
};

enum tracer_mode {              /* kernel_probe.h: which kernel has which */
	TRACER_MODE_SESSION,         /* session uprobes: return probe only for sampled calls */
	TRACER_MODE_MULTI,           /* uprobe_multi links: every allocation call also takes a
	                                return probe */
	TRACER_MODE_PERF,            /* perf-event uprobes + uretprobes, a link per site */
	TRACER_MODE_USDT             /* an in-process sampler's otel_memory:alloc/free probes */
};

/* The USDT contract of the OpenTelemetry eBPF profiler's memory design: an in-process sampler
 * fires otel_memory:alloc(ptr, size, weight) for sampled blocks (weight = nsamples * mean gap
 * bytes) and otel_memory:free(ptr) for their frees. */
#define TRACER_USDT_PROVIDER "otel_memory"

/* Load + attach; pid may be a stopped child (before its exec). NULL on error, with a message. */
struct tracer *tracer_open(pid_t pid, const struct alloc_sites *sites, const struct tracer_opts *opts,
                           char *err, size_t errlen);
/* The two halves of tracer_open: a slot in the BPF object for pid (loading it, the slow part:
 * the verifier's tens of ms, is done by the first tracer of these options only) and attaching
 * to the sites. A tracer loaded ahead of time lets an exec be
 * followed at once. tracer_attach once per tracer; -1 with a message (then tracer_close). */
struct tracer *tracer_load(pid_t pid, const struct tracer_opts *opts, char *err, size_t errlen);
/* A tracer loaded for pid 0 (a spare for a process not known yet: a fork's child) is given its
 * process before it is attached. 0, or -1 (already has one, or attached). */
int tracer_adopt(struct tracer *t, pid_t pid);
int tracer_attach(struct tracer *t, const struct alloc_sites *sites, char *err, size_t errlen);
/* For a tracer loaded with opts.usdt: attaches to the otel_memory probes of the object at path
 * (as the target sees it, e.g. /proc/PID/root/...) in pid. 0, or -1 with a message. */
int tracer_attach_usdt(struct tracer *t, const char *path, char *err, size_t errlen);
/* Records delivered as the host's thread reads them, on that thread, through cb (thread-safe,
 * never waiting: it holds up every process's records), in ring-buffer order; tracer_poll and
 * tracer_reconcile deliver through it too. Set once, from any thread, after tracer_load: what
 * arrived before is delivered first. */
void tracer_set_sink(struct tracer *t, const struct tracer_callbacks *cb, void *ctx);
/* Sleeps up to timeout_ms or until records arrive, then delivers them through cb. A timeout
 * of 0 or 1 delivers every record written before the call. Returns the number of records, or
 * -1 on error. */
int tracer_poll(struct tracer *t, int timeout_ms, const struct tracer_callbacks *cb, void *ctx);
/* Live-map reconciliation: calls cb->free for every sampled block this tracer reported that is
 * no longer in the BPF live map although its FREE record was lost. Call periodically and at the
 * end. Delivers pending records first (through cb). Returns the number repaired, or -1. */
int tracer_reconcile(struct tracer *t, const struct tracer_callbacks *cb, void *ctx);
/* Probes more sites, not probed yet (a library dlopen'ed since tracer_open). 0, or -1 with a
 * message (links already made stay). Call from the thread that opened the tracer. */
int tracer_attach_sites(struct tracer *t, const struct alloc_sites *sites, char *err, size_t errlen);
/* Where thread tid's stack ends (stacks_last_extent): its stack copies stop there, 0 forgets
 * it (full copies again, e.g. after a copy cut a stack short). From any thread. */
void tracer_set_stack_end(struct tracer *t, uint32_t tid, uint64_t end);
/* The process runs CPython: its samples carry the Python frames of their thread, walked with
 * this layout (include/python_frames.h). 0, or -1. */
struct mt_py_layout;
int tracer_set_python(struct tracer *t, const struct mt_py_layout *layout);
void tracer_get_stats(struct tracer *t, struct tracer_stats *out);
/* How full its ring buffer is now, 0 .. 1 (records written and not yet read), or -1. */
double tracer_ring_fill(struct tracer *t);
enum tracer_mode tracer_mode(const struct tracer *t);
const char *tracer_mode_name(enum tracer_mode mode);
/* From any thread, while t is open: the probes stop recording at once (a process held at its
 * exec: the calls from now on are the new program's, which has a tracer of its own). Cheaper
 * than detaching, which follows later (tracer_detach). */
void tracer_mute(struct tracer *t);
/* From any thread: the BPF side keeps 1 in k of the calls its countdown samples, their sample
 * counts multiplied by k (1: all; backpressure, issue 37). Allocator probes only (a USDT
 * tracer's samples are the in-process sampler's: it thins them itself). */
void tracer_set_thin(struct tracer *t, unsigned k);
/* Removes the probes (the target runs on unharmed) but keeps the maps and the ring buffer:
 * after it no new record or count appears, so a final tracer_poll/tracer_reconcile and
 * tracer_get_stats see everything. Not thread-safe with tracer_attach_sites. NULL is allowed. */
void tracer_detach(struct tracer *t);
/* Detach (if not done) and free everything. NULL is allowed. */
void tracer_close(struct tracer *t);
/* tracer_close on a thread of its own (the detach waits for the kernel): for a muted tracer
 * whose records were all read. tracer_close_wait waits until every such close is done. */
void tracer_close_later(struct tracer *t);
void tracer_close_wait(void);

#endif
