/* The continuous trace of one process (see trace_out.h). */
#include "trace_out.h"
#include "common/msg.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FLUSH_INTERVAL_NS 1000000000ULL

struct trace_out {
	mt_writer *w;
	uint64_t wall_us0, mono_ns0; /* one clock pairing, taken at open */
	uint64_t last_us;
	uint64_t last_flush_mono_ns;
	uint64_t end_mono_ns; /* trace_out_mark_end, 0 if not said */
	uint64_t collects;
	int fd;
	uint64_t good_bytes; /* the file's length after the last call that succeeded: whole packets */
	char context[512];   /* packet 0's context string, its drops field at a fixed width */
	char error[256];
};

/* The drops field of the context string: "drops: N" with N left-aligned in this many
 * characters, so that the count as of the end can be written over it in place. */
#define DROPS_WIDTH 20

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t trace_out_mono_now_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

struct trace_out *trace_out_open(int fd, const struct trace_out_info *info,
				 mt_locations_fn locations, void *loc_ctx, char *err, size_t errlen)
{
	struct trace_out *o = calloc(1, sizeof *o);
	if (!o) {
		set_err(err, errlen, "out of memory");
		return NULL;
	}
	o->mono_ns0 = clock_ns(CLOCK_MONOTONIC);
	o->wall_us0 = clock_ns(CLOCK_REALTIME) / 1000;
	o->last_us = o->wall_us0;
	o->last_flush_mono_ns = o->mono_ns0;

	char host[256], context[512];
	mt_trace_info ti;
	trace_out_fill_info(info, o->wall_us0, &ti, host, sizeof host, context, sizeof context);
	snprintf(o->context, sizeof o->context, "%s", context);
	o->fd = fd;
	o->w = mt_writer_open_format(fd, &ti, info->format_version ? info->format_version : 2,
				     locations, loc_ctx);
	if (!o->w) {
		set_err(err, errlen, "cannot write the trace header: %s", strerror(errno));
		free(o);
		return NULL;
	}
	o->good_bytes = mt_writer_bytes_written(o->w);
	return o;
}

void trace_out_fill_info(const struct trace_out_info *info, uint64_t start_us, mt_trace_info *ti,
			 char *host, size_t hostlen, char *context, size_t contextlen)
{
	if (gethostname(host, hostlen - 1) < 0) host[0] = '\0';
	host[hostlen - 1] = '\0';
	/* the name it was started by goes into the context: tools take the executable name for a
	 * path (pprof's "File:" is its base name) */
	snprintf(context, contextlen, "memtraced %s; %s%.200s%sallocator %s; drops: %-*llu",
		 MEMTRACED_VERSION, info->started_as && *info->started_as ? "started as " : "",
		 info->started_as ? info->started_as : "",
		 info->started_as && *info->started_as ? "; " : "",
		 info->allocator && *info->allocator ? info->allocator : "unknown", DROPS_WIDTH,
		 (unsigned long long)info->drops);
	*ti = (mt_trace_info){
		.sample_rate = info->rate,
		.word_size = 64,
		.executable_name = info->executable ? info->executable : "",
		.host_name = host,
		.ocaml_runtime_params = "",
		.pid = (uint64_t)info->pid,
		.context = context,
		.start_time_us = start_us,
	};
}

int trace_out_set_drops(struct trace_out *o, uint64_t drops)
{
	char *field = strstr(o->context, "drops: ");
	if (!field || strlen(field + 7) != DROPS_WIDTH) return -1;
	char num[DROPS_WIDTH + 1];
	snprintf(num, sizeof num, "%-*llu", DROPS_WIDTH, (unsigned long long)drops);
	memcpy(field + 7, num, DROPS_WIDTH);
	return mt_writer_set_context(o->w, o->context);
}

uint64_t trace_out_time_us(struct trace_out *o, uint64_t mono_ns)
{
	/* Records from several CPUs leave the ring buffer slightly out of order, and some may
	 * predate the clock pairing: clamp, so that trace times never go backwards. */
	uint64_t us = mono_ns > o->mono_ns0 ? o->wall_us0 + (mono_ns - o->mono_ns0) / 1000 : o->wall_us0;
	if (us < o->last_us) us = o->last_us;
	o->last_us = us;
	return us;
}

int64_t trace_out_alloc(struct trace_out *o, uint64_t mono_ns, uint64_t bytes, uint64_t nsamples,
			const uint64_t *backtrace, size_t n)
{
	uint64_t words = bytes / 8 + (bytes % 8 != 0);
	if (nsamples == 0) nsamples = 1; /* the format wants nsamples >= 1 */
	int64_t id = mt_writer_alloc(o->w, trace_out_time_us(o, mono_ns), words, nsamples,
				     MT_SOURCE_EXTERNAL, backtrace, n);
	if (id < 0) snprintf(o->error, sizeof o->error, "%s", mt_writer_error(o->w));
	else o->good_bytes = mt_writer_bytes_written(o->w);
	return id;
}

int trace_out_collect(struct trace_out *o, uint64_t mono_ns, uint64_t id)
{
	int rc = mt_writer_collect(o->w, trace_out_time_us(o, mono_ns), id);
	if (rc < 0) snprintf(o->error, sizeof o->error, "%s", mt_writer_error(o->w));
	else {
		o->collects++;
		o->good_bytes = mt_writer_bytes_written(o->w);
	}
	return rc;
}

int trace_out_tick(struct trace_out *o)
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC);
	if (now - o->last_flush_mono_ns < FLUSH_INTERVAL_NS) return 0;
	o->last_flush_mono_ns = now;
	int rc = mt_writer_flush(o->w, trace_out_time_us(o, now));
	if (rc < 0) snprintf(o->error, sizeof o->error, "%s", mt_writer_error(o->w));
	else o->good_bytes = mt_writer_bytes_written(o->w);
	return rc;
}

void trace_out_mark_end(struct trace_out *o, uint64_t mono_ns)
{
	if (o && !o->end_mono_ns) o->end_mono_ns = mono_ns;
}

int trace_out_close(struct trace_out *o, char *err, size_t errlen)
{
	if (!o) return 0;
	/* the last (empty) packet starts now: readers see where tracing ended, not only the last
	 * event (a program idle for its last 20 s) */
	uint64_t end = o->end_mono_ns ? o->end_mono_ns : clock_ns(CLOCK_MONOTONIC);
	int rc = mt_writer_flush(o->w, trace_out_time_us(o, end));
	rc = mt_writer_close(o->w) < 0 || rc < 0 ? -1 : 0;
	if (rc < 0) {
		/* A full disk may have taken part of a packet: cut the file back to its last whole
		 * packet, so that it reads cleanly up to there. */
		set_err(err, errlen, "writing the trace failed%s%s", o->error[0] ? ": " : "", o->error);
		if (ftruncate(o->fd, (off_t)o->good_bytes) < 0) {} /* nothing better to do */
	}
	free(o);
	return rc;
}

const char *trace_out_error(const struct trace_out *o) { return o->error; }
uint64_t trace_out_allocs(const struct trace_out *o) { return mt_writer_next_id(o->w); }
uint64_t trace_out_collects(const struct trace_out *o) { return o->collects; }
uint64_t trace_out_bytes(const struct trace_out *o) { return mt_writer_bytes_written(o->w); }
