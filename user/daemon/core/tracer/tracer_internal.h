/* The tracer's state, shared by tracer.c (load, attach, stats) and intake.c (records,
 * reconciliation). Not part of the interface. */
#ifndef MEMTRACED_TRACER_INTERNAL_H
#define MEMTRACED_TRACER_INTERNAL_H
#include "tracer.h"
#include "seq_table.h"

struct memtraced_bpf;
struct ring_buffer;
struct bpf_link;

#define TRACER_MAX_LINKS (2 * MAX_PROBE_SITES + 14) /* + the mapping probes (10), USDT (2) */

struct tracer {
	pid_t pid;
	enum tracer_mode mode;
	bool floor;
	struct memtraced_bpf *skel;
	int link_fds[TRACER_MAX_LINKS];            /* session mode: uprobe_multi links */
	int nlink_fds;
	struct bpf_link *links[TRACER_MAX_LINKS];  /* fallback: perf-event uprobes */
	int nlinks;
	struct ring_buffer *rb;
	const volatile unsigned long *ring_pos[2]; /* the ring's consumer and producer positions,
	                                              mapped read-only (tracer_ring_fill) */

	/* intake */
	const struct tracer_callbacks *cb;         /* during tracer_poll/reconcile */
	void *cb_ctx;
	struct seq_table visible;                  /* seqs reported allocated and not freed */
	uint64_t epoch;                            /* reconcile epoch */
	/* read by tracer_get_stats, possibly from another thread: atomic (relaxed) */
	uint64_t reconciled_frees;
	uint64_t bad_records;
	uint64_t record_bytes, max_record_bytes;   /* of the allocation records read */
	uint64_t live_count;                       /* visible.count */
};

/* The BPF live map's fd (white-box tests). */
int tracer_live_map_fd(struct tracer *t);

/* libbpf ring_buffer sample callback (ctx: struct tracer). */
int intake_record(void *ctx, void *data, size_t len);
#endif
