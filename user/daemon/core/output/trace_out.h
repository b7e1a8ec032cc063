/* The continuous trace of one process, written through the format library's writer:
 * the trace info, kernel monotonic time -> wall-clock microseconds, allocations as external
 * blocks of ceil(bytes/8) words, collects, and a flush at least once a second. */
#ifndef MEMTRACED_TRACE_OUT_H
#define MEMTRACED_TRACE_OUT_H

#include <stdint.h>
#include <sys/types.h>

#include "memtrace.h"

struct trace_out_info {
	pid_t pid;
	double rate;
	const char *executable;  /* the target's executable (its file) */
	const char *started_as;  /* the name it was started by when not the file's (clang++), or NULL */
	const char *allocator;   /* alloc_sites.allocator */
	uint64_t drops;          /* drops counted so far, for the context string */
	int format_version;      /* of the continuous trace: 2 (0 means 2) or 3; snapshots are v2 */
};

struct trace_out;

/* The trace info of the continuous trace (and of heap snapshots) for info: executable, host,
 * pid, rate, and a context string naming memtraced, the allocator and the drops. host and
 * context are the caller's buffers (256 and 512 bytes are plenty); start time = start_us. */
void trace_out_fill_info(const struct trace_out_info *info, uint64_t start_us, mt_trace_info *ti,
			 char *host, size_t hostlen, char *context, size_t contextlen);

/* Writes packet 0 to fd (not closed by us) at once. NULL with a message on error. */
struct trace_out *trace_out_open(int fd, const struct trace_out_info *info,
				 mt_locations_fn locations, void *loc_ctx, char *err, size_t errlen);
/* The trace time of a CLOCK_MONOTONIC timestamp: wall-clock us, never before the last one. */
uint64_t trace_out_time_us(struct trace_out *o, uint64_t mono_ns);
/* An allocation of `bytes` with its backtrace (OUTERMOST FIRST): its id (>= 0), or < 0. */
int64_t trace_out_alloc(struct trace_out *o, uint64_t mono_ns, uint64_t bytes, uint64_t nsamples,
			const uint64_t *backtrace, size_t n);
int trace_out_collect(struct trace_out *o, uint64_t mono_ns, uint64_t id);
/* Writes the drops counted up to now over the context string's drops field in packet 0, so the
 * file says how many samples were lost as of its end (a regular file only). 0, or -1. */
int trace_out_set_drops(struct trace_out *o, uint64_t drops);
/* Flushes if the last flush is a second old or more (call it often). < 0 on a write error. */
int trace_out_tick(struct trace_out *o);
/* Final flush; frees o. < 0 if any write failed (message in err): then the file is cut back
 * to the last whole packet written (a full disk may have taken part of one), so it reads
 * cleanly up to there. */
int trace_out_close(struct trace_out *o, char *err, size_t errlen);
/* Tracing ended at mono_ns (CLOCK_MONOTONIC): the trace's last, empty packet says so when it is
 * closed (readers end its window there); without it, the time of the close. The first call wins. */
void trace_out_mark_end(struct trace_out *o, uint64_t mono_ns);
const char *trace_out_error(const struct trace_out *o);
uint64_t trace_out_allocs(const struct trace_out *o);   /* ids handed out */
uint64_t trace_out_collects(const struct trace_out *o);
uint64_t trace_out_bytes(const struct trace_out *o);    /* bytes written so far */

/* The monotonic clock in ns, the clock of the BPF timestamps. */
uint64_t trace_out_mono_now_ns(void);

#endif
