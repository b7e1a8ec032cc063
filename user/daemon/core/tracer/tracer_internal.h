/* The tracer's state, shared by tracer.c (load, attach, stats) and intake.c (records,
 * reconciliation). Not part of the interface. */
#ifndef MEMTRACED_TRACER_INTERNAL_H
#define MEMTRACED_TRACER_INTERNAL_H
#include <pthread.h>

#include "tracer.h"
#include "seq_table.h"
#include "deep_stacks.h"

struct memtraced_bpf;
struct bpf_link;
struct tracer_host;
struct inbox_item;

#define TRACER_MAX_LINKS (2 * MAX_PROBE_SITES + 14) /* + the mapping probes (10), USDT (2) */

struct tracer {
	pid_t pid;
	enum tracer_mode mode;
	bool floor;
	struct tracer_host *host;                  /* the shared BPF object (tracer_host.h) */
	uint32_t owner;                            /* its slot there, and the slot's generation */
	bool started;                              /* host_start done */
	int link_fds[TRACER_MAX_LINKS];            /* session mode: uprobe_multi links */
	int nlink_fds;
	struct bpf_link *links[TRACER_MAX_LINKS];  /* fallback: perf-event uprobes */
	int nlinks;
	/* the records the host's thread read for this tracer, in ring-buffer order */
	pthread_mutex_t inbox_lock;
	pthread_cond_t inbox_cond;
	struct inbox_item *inbox_head, *inbox_tail;
	size_t inbox_bytes;
	uint64_t inbox_dropped;                    /* inbox full (counted as drop_ringbuf) */
	uint64_t thinned;                          /* samples the sink thinned (backpressure) */
	uint64_t inbox_dropped_samples;            /* ... of them allocations: like a sample the
	                                              ring had no room for, not counted as one */

	/* intake: under lock (the host's thread delivers to a sink meanwhile) */
	pthread_mutex_t lock;
	const struct tracer_callbacks *cb;         /* the sink, or during tracer_poll/reconcile */
	void *cb_ctx;
	bool has_sink;
	int (*intake)(void *t, void *data, size_t len); /* intake_record (the host's thread calls
	                                                   it without linking to it) */
	struct seq_table visible;                  /* seqs reported allocated and not freed */
	uint64_t epoch;                            /* reconcile epoch */
	struct deep_stacks deep;                   /* deep stacks' pieces waiting for their record */
	/* read by tracer_get_stats, possibly from another thread: atomic (relaxed) */
	uint64_t reconciled_frees;
	uint64_t bad_records;
	uint64_t record_bytes, max_record_bytes;   /* of the allocation records read */
	uint64_t live_count;                       /* visible.count */
};

/* The BPF live map's fd (white-box tests). */
int tracer_live_map_fd(struct tracer *t);
/* Its owner in the host's maps (the live map's keys carry it). */
uint32_t tracer_owner(const struct tracer *t);

/* One record of t's: checked and delivered through t->cb. Under t->lock. */
int intake_record(void *ctx, void *data, size_t len);
#endif
