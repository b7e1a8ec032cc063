/* The session's state, shared by session.c (lifetime, intake, output, summary) and
 * session_records.c (what each record does to the trie and the trace). Not an interface. */
#ifndef MEMTRACED_PROCESS_SESSION_INT_H
#define MEMTRACED_PROCESS_SESSION_INT_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "mappings.h"
#include "record_queue.h"
#include "parser/rstacks.h"
#include "protocol/sites.h"
#include "output/trace_out.h"
#include "tracer/tracer.h"

#define MAX_ALLOCATOR_OBJECTS 8
#define STACK_END_HINTS 1024

#define MAX_CODES 1024
#define TICK_NS 1000000000ULL
#define FINAL_DRAIN_ROUNDS 1000 /* bound on the final drain, in case records keep coming */
#define INTAKE_POLL_MS 20
#define INTAKE_IDLE_MS 1000   /* the intake thread's sleep while records come (a reconciliation
				 a second: RECONCILE_NS) */
#define INTAKE_EARLY_MAX_MS 16 /* a just-started program's first record is looked for after 1,
				  2, 4, 8 and 16 ms (a pass of the host's thread over the ring),
				  then only when it wakes the intake thread */
#define RECONCILE_NS 1000000000ULL
#define RECONCILE_IDLE_NS 10000000000ULL /* ... while no record came since the last one: a
				  free whose record was lost (the ring full of others' records) is
				  repaired within 10 s, and an idle process costs no map scan a second */
#define PY_EXIT_WAIT_MS 5000  /* a Python process held at its exit while its samples are named */
#define QUEUE_MAX_BYTES (96u << 20) /* as much as a 32 MiB ring (rate 1) and the 64 MiB queue
                                       that its reader waited on before it served every process */
/* Backpressure: past half of the queue a sample is kept with probability 1/k and weighs k
 * (k doubling as the room left halves, up to THIN_MAX), so that the queue does not fill and
 * drop (issue 37). */
#define THIN_FROM_PERMILLE 500
#define THIN_MAX 1024u

struct session {
	pid_t pid;
	bool floor;
	struct tracer *tracer;
	const char *probes;     /* how its probes attached (tracer_mode_name), for the summary */
	struct rstacks *stacks;
	struct trie *trie;
	struct trace_out *out;
	bool no_trace;
	bool trace_optional;  /* a failed trace write stops the trace only (snapshots go on) */
	bool trace_lost;      /* ... and it did */
	uint64_t next_id;     /* allocation ids without a trace (-o none) */
	uint64_t wall_us0, mono_ns0, last_us; /* the trace clock without a trace */
	struct trace_out_info info; /* for snapshots' trace info */
	bool finished;
	bool failed;          /* a write to the trace failed: stop handling records */
	uint64_t last_tick_ns;
	int out_fd;
	uint64_t other_pid;
	uint64_t (*exec_time)(void *ctx, pid_t pid);
	void *exec_ctx;
	uint64_t exec_ns;     /* the target exec'd then: later records are not ours (0: not yet) */
	/* A target that had not mapped its libraries when the session opened (-- CMD before its
	 * exec, a program just exec'd): the intake thread prepares the unwinder at the first
	 * record, while the process surely runs (the session thread may handle that record only
	 * after a short-lived process or program is gone), and hands it over through the queue. */
	bool lazy_stacks;
	bool stacks_provisional;
	_Atomic(char *) final_maps;       /* its /proc/PID/maps at its exit (session_target_exiting) */          /* opened by the session thread for an early mapping */
	const void *final_maps_given;     /* the unwinder final_maps was given to */
	bool intake_opens_stacks;         /* set before the intake thread starts */
	bool early_tried;                 /* intake thread only */
	struct rstacks *early_stacks;     /* written before early_done is set */
	char early_error[256];
	atomic_bool early_done;
	atomic_bool early_asked;          /* prepare it now (session_prepare_stacks, at CMD's entry) */
	atomic_bool record_seen;          /* the process's first allocation record came */
	uint64_t after_exec;
	uint64_t written_allocs, written_collects; /* kept when the writer is closed */
	struct tracer_stats final_stats;
	bool calls_uncounted; /* the tracer saw only sampled calls (an in-process sampler) */
	bool src_calls_known; /* session_set_source_calls */
	uint64_t src_calls;
	struct record_queue *queue;
	pthread_t intake;
	bool intake_started;
	atomic_bool intake_stop;
	atomic_bool intake_failed;
	atomic_bool muted;    /* session_mute: no record comes any more */
	atomic_bool gone;     /* session_target_gone: its process has exited */
	/* session_target_exiting (another thread) asks the intake thread for a drain */
	pthread_mutex_t drain_lock;
	pthread_cond_t drain_cond;
	atomic_uint_fast64_t drain_req;
	uint64_t drain_done;  /* under drain_lock */
	bool intake_over;     /* under drain_lock */
	/* the intake thread sleeps on wake_cond while nothing is asked of it (issue 36: an idle
	 * process cost a core while it polled every millisecond for its first record); woken by
	 * the first record, a drain request and the stop */
	pthread_mutex_t wake_lock;
	pthread_cond_t wake_cond;
	bool wake;            /* under wake_lock */
	atomic_uint_fast64_t records_in; /* records the sink queued (allocations and frees) */
	char error[512];
	char stacks_error[256]; /* why the unwinder could not be prepared (lazily, spawn mode) */
	bool py_started;        /* the unwinder said whether it runs CPython (session_python_start) */
	struct py_found py;
	atomic_bool py_active;  /* its samples carry Python frames: named from its memory, so its
	                           exit hold waits until they are (session_target_exiting) */
	atomic_uint_least64_t allocs_queued, allocs_handled;
	/* backpressure (session_intake.c): samples thinned, the largest thinning factor used,
	 * the counter whose hash draws which are kept */
	atomic_uint_least64_t thinned, thin_draws;
	atomic_uint thin_max;
	/* the block of arrivals under way (thin_lock): k, arrivals left in it, the one kept */
	pthread_mutex_t thin_lock;
	bool thin_off;        /* rate 1 asks for every allocation: no thinning (a full queue
				 drops, and says so) */
	unsigned thin_block_k, thin_block_left, thin_pick;
	/* ... and at the source: the in-process sampler's memtraced_sampler_thin in the target
	 * (0: none), the factor written there last (the sink's thread only) and when, the most */
	atomic_uint_least64_t src_thin_addr;
	bool src_bpf;         /* no sampler: the BPF side's countdown thins (tracer_set_thin) */
	atomic_bool src_off;  /* the session ends: the source is left thinning no more */
	atomic_uint src_k;
	uint64_t src_changed_ns, src_calm_ns; /* last change; since when the sink thins nothing */
	unsigned src_fill;    /* the queue's fill (permille) at the last change */
	atomic_uint src_k_max;
	uint64_t codes[MAX_CODES];
	uint64_t bt[MAX_CODES];
	/* anonymous mappings (session_records.c) */
	struct mappings maps;
	uint64_t map_key;                 /* keys of mapping pieces: high bit set, not a seq */
	uint64_t map_rng;                 /* xorshift state for the pieces' sample draws */
	dev_t alloc_dev[MAX_ALLOCATOR_OBJECTS]; /* the allocator's objects: a mapping made from */
	ino_t alloc_ino[MAX_ALLOCATOR_OBJECTS]; /* code in them is the allocator's own */
	int nalloc_objs;
	uint64_t mappings_traced, allocator_mappings;
	uint64_t map_lost;                /* out of memory: a mapping not kept (never freed) */
	uint64_t unmap_time_ns;           /* of the unmap being handled */
	/* the stack ends told to the tracer (session_records.c), direct-mapped by tid */
	struct stack_end_hint { uint32_t tid; uint64_t end; } stack_end_hints[STACK_END_HINTS];
};


uint64_t session_clock_ns(clockid_t id);
/* A write to the trace failed (see session_records.c). */
void session_trace_write_failed(struct session *s);
/* A record of the queue, on the session thread. */
void session_on_alloc(struct session *s, const struct tracer_alloc *a);
/* Once the process's unwinder is there: its samples carry Python frames from then on, when it
 * runs a CPython whose layout the parser found. */
void session_python_start(struct session *s);
void session_on_free(struct session *s, const struct tracer_free *f);
/* Asks the unwinder ahead for the records of a list that session_on_alloc will unwind,
 * from *next on, while there is room (the parser works on them meanwhile). */
void session_unwind_ahead(struct session *s, struct rq_item **next);
/* The allocator's objects, from the probe sites: which mappings are its own. */
void session_note_allocator(struct session *s, const struct alloc_sites *sites);

/* session_intake.c: the intake thread's body, the sink the tracer delivers through (into the
 * queue, on the host's thread), and its wake-up (a drain asked, the stop). */
void *session_intake_main(void *arg);
extern const struct tracer_callbacks session_queue_callbacks;
void session_intake_wake(struct session *s);
void session_source_thin_off(struct session *s); /* the intake stopped: the sampler thins no more */

#endif
