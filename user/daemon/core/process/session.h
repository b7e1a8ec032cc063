/* One traced process: its tracer (BPF probes), its unwinder (stacks), its context trie and
 * its trace output. The event loop and the target's lifetime are the caller's (main.c). */
#ifndef MEMTRACED_SESSION_H
#define MEMTRACED_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "protocol/sites.h"
#include "memtrace.h"

struct tracer;

struct session_opts {
	pid_t pid;
	double rate;
	unsigned stack_bytes;
	unsigned ring_bytes;     /* 0: the tracer's default */
	bool floor;              /* empty probes only: no unwinding, no trace (benchmarks) */
	bool spawned;            /* pid is a child held before its exec (-- CMD) */
	bool no_mappings;        /* --no-mmap: anonymous mappings are not traced */
	int format_version;      /* --format: 2 (0 means 2) or 3 */
	int out_fd;              /* the trace file, open for writing (ignored with floor/no_trace) */
	bool no_trace;           /* -o none: no continuous trace; the trie and unwinder still run
	                            (for snapshots), allocation ids come from a counter */
	bool trace_optional;     /* snapshots are on: a failed trace write (disk full) stops the
	                            trace only, not the session (session_finish then returns < 0) */
	const char *executable;  /* the target's executable, for the trace info */
	const char *started_as;  /* the name it was started by, when not its file's, or NULL */
	const struct alloc_sites *sites;
	/* Optional: a tracer loaded and attached to sites already (an exec prepared while the
	 * process was held, see hold.h); the session takes it over, also when it fails. */
	struct tracer *tracer;
	/* Optional: the CLOCK_MONOTONIC time at which pid exec'd a new program, 0 if it has not
	 * (lifecycle_exec_time). Asked after each batch of records is taken and before it is
	 * handled: records stamped after the exec belong to the new program and are ignored
	 * (the exec record is written before the new image can allocate anything). */
	uint64_t (*exec_time)(void *ctx, pid_t pid);
	void *exec_ctx;
};

struct session_totals {
	bool calls_counted;                   /* false: an in-process sampler's probes see only
	                                         sampled calls; alloc_calls and free_calls are 0 */
	uint64_t alloc_calls, free_calls;     /* every call the probes saw */
	bool src_calls_known;                 /* the in-process sampler counted every allocation
	                                         call (rate 1): src_calls */
	uint64_t src_calls;
	uint64_t samples;                     /* sampled allocations submitted by the probes */
	uint64_t written_allocs, written_collects;
	uint64_t live_blocks;                 /* sampled blocks live at the end */
	uint64_t drop_ringbuf, drop_map_full, drop_stack_copy;
	uint64_t drop_queue, drop_busy;       /* of drop_ringbuf: queue full, record buffer busy */
	uint64_t stack_recopied;              /* samples whose stack was copied in pieces */
	uint64_t reconciled_frees;
	uint64_t other_pid;                   /* records of another process, ignored */
	uint64_t after_exec;                  /* records stamped after the target's exec, ignored */
	uint64_t unwind_truncated, unwind_errors;
	uint64_t unwinds, unwinds_remembered; /* samples unwound; of which as an earlier one */
	uint64_t unnamed_frames;              /* distinct frames left without a name */
	char capped_note[160];                /* which objects, which caps (stacks_stats) */
	uint64_t jit_frames, jit_named;       /* pcs in JIT code; of which named by its perf map */
	uint64_t capped_stacks, capped_objects, capped_frames; /* caps hit (struct stacks_limits) */
	uint64_t over_cap_frames, py_over_budget; /* frames named for the parser's memory caps */
	uint64_t thinned;                     /* samples left out under backpressure ... */
	unsigned thin_max;                    /* ... keeping 1 in at most this many */
	unsigned src_thin, src_thin_max;      /* the in-process sampler's thinning now, at most */
	uint64_t contexts;                    /* trie nodes */
	uint64_t stacks;                      /* distinct call stacks sampled */
	uint64_t nsamples;                    /* samples in the records (sum of nsamples) */
	uint64_t trace_bytes;
	uint64_t record_bytes, max_record_bytes; /* ring-buffer bytes of the allocation records */
	uint64_t map_calls;                   /* anonymous mmap/mremap calls made */
	uint64_t mappings_traced;             /* sampled ones in the trace */
	uint64_t allocator_mappings;          /* sampled ones left out: the allocator's own */
};

struct session;
struct snapshotter;

/* Loads and attaches the probes (the target may be a child held before its exec), prepares the
 * unwinder and writes the trace header: session_begin then session_start_trace. NULL with a
 * message on error, nothing left attached. */
struct session *session_open(const struct session_opts *o, char *err, size_t errlen);
/* The first half, which may run on another thread than the session's (a process held at an
 * exec, see hold.h): the probes (o->tracer, or attached to o->sites), the unwinder, the trie
 * and the intake thread, which queues records from now on. Only pid, rate, stack_bytes, floor,
 * spawned, sites and tracer of o are used. */
struct session *session_begin(const struct session_opts *o, char *err, size_t errlen);
/* The second half, on the session's thread: the output (o's out_fd, no_trace, trace_optional,
 * executable, sites' allocator name, exec_time) and the trace header; queued records are
 * handled from the next session_poll on. 0, or -1 with a message (then session_close). */
int session_start_trace(struct session *s, const struct session_opts *o, char *err, size_t errlen);
/* The exec_time callback of session_opts, given later (the lifecycle watcher opens after the
 * probes are live). */
void session_set_exec_clock(struct session *s, uint64_t (*fn)(void *ctx, pid_t pid), void *ctx);
/* From any thread, while s is open: its probes stop recording (tracer_mute). */
void session_mute(struct session *s);
/* Its process has exited: no record can come after those sent, and session_finish leaves the
 * slow detach of the probes to the background (a fork's child waited 500 ms for it). */
void session_target_gone(struct session *s);
/* The spawned target has exec'd: re-read its mappings. */
void session_target_started(struct session *s);
/* From any thread: the target is held at its exit (its mappings still readable). Waits up to
 * timeout_ms until the intake thread has read every record sent so far (preparing the
 * unwinder of a just-started program at its first record, see session_opts.spawned). */
void session_target_exiting(struct session *s, int timeout_ms);
/* Waits up to timeout_ms for records and handles them; once a second flushes the trace and
 * reconciles lost frees. < 0 on a fatal error (message in session_error). */
int session_poll(struct session *s, int timeout_ms);
/* Probes the sites of a library mapped since (dlopen; they must not be probed yet) and re-reads
 * the mappings for the unwinder. 0, or -1 with a message (tracing goes on). */
int session_add_sites(struct session *s, const struct alloc_sites *added, char *err, size_t errlen);
/* The target exec'd at mono_ns (CLOCK_MONOTONIC): later records are the new program's, ignored
 * (when the exec_time callback did not tell already). */
void session_exec_at(struct session *s, uint64_t mono_ns);
/* The mappings changed (dlopen, dlclose): re-read them for the unwinder. */
void session_refresh_mappings(struct session *s);
/* Drains what is left, reconciles, detaches (the target runs on unharmed) and closes the trace.
 * < 0 if the trace could not be written completely. */
int session_finish(struct session *s);
void session_get_totals(struct session *s, struct session_totals *out);
const char *session_error(const struct session *s);
/* The one-line summary; trace_path NULL = no continuous trace. */
void session_print_summary(struct session *s, FILE *out, const char *trace_path);
/* The location list of a code (an mt_locations_fn; ctx is the session), for the live view and
 * snapshots: -1 for a code never handed out. Session thread only. */
int session_locations(void *session, uint64_t code, const mt_location **locs);
/* Writes a heap snapshot of the blocks live now (see snapshot.h), with the trace info of the
 * continuous trace (drops so far in the context). Call it from the session's thread, also
 * after session_finish (then it shows the heap at the end). 0, or < 0 with a message. */
int session_snapshot(struct session *s, struct snapshotter *snap, char *err, size_t errlen);
/* The context trie (for snapshots); valid until session_close. */
struct trie *session_trie(struct session *s);
/* How full its tracer's ring buffer is, 0 .. 1, or -1 (tracer_ring_fill). */
double session_ring_fill(struct session *s);
void session_close(struct session *s);

/* The in-process sampler's memtraced_sampler_thin in the target, at addr: when the pipeline
 * falls behind, the sampler thins at the source (the probes and the BPF side's work fall
 * too), not only the sink (session_intake.c). 0: none. */
void session_set_source_thin(struct session *s, uint64_t addr);
/* At rate 1, the allocation calls the in-process sampler counted itself (every one): the
 * summary says them beside what reached the trace (issue 47: the counts were 17.6% short after
 * drops, and presented as exact). */
void session_set_source_calls(struct session *s, uint64_t calls);
/* A spawned program held at its entry point (its libraries mapped): its unwinder prepared,
 * and the BPF side told of its Python interpreter, before it runs its first line; waits up to
 * timeout_ms (the intake thread does it). true when done. */
bool session_prepare_stacks(struct session *s, int timeout_ms);

#endif
