/* Throughput of the memtrace format library: write and read, in events per second, and
 * bytes per event.
 *   (a) the real traces in tests/data/memtrace (or the directory given as argv[1]):
 *       decoded once into memory, then re-encoded through the writer (to /dev/null) and
 *       read again, several times;
 *   (b) a synthetic tracer-like stream: allocations with 30-frame backtraces drawn from a
 *       few hundred distinct stacks, most of them freed later.
 * Prints a table, then key=value lines for bench/run.sh. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "memtrace.h"

#define MIN_SECONDS 0.3 /* repeat each measurement at least this long */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (!p) {
		fprintf(stderr, "format_bench: out of memory\n");
		exit(1);
	}
	return p;
}

/* An event stream in memory. Backtraces are stored as their tail after the common prefix
 * (as in the file), rebuilt while replaying: cheap, and small enough for deep traces. */
struct rec { uint8_t type, source; uint64_t time, id, length, nsamples, prefix, tail_off, tail_len; };
struct stream {
	mt_trace_info info;
	struct rec *ev;
	size_t n, cap;
	uint64_t *codes;
	size_t ncodes, codes_cap;
	mt_reader *locs_from; /* real traces: locations come from the reader */
};

static void add_event(struct stream *s, struct rec r, const uint64_t *tail)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 4096;
		s->ev = xrealloc(s->ev, s->cap * sizeof *s->ev);
	}
	if (s->ncodes + r.tail_len > s->codes_cap) {
		while (s->ncodes + r.tail_len > s->codes_cap) s->codes_cap = s->codes_cap ? 2 * s->codes_cap : 65536;
		s->codes = xrealloc(s->codes, s->codes_cap * sizeof *s->codes);
	}
	r.tail_off = s->ncodes;
	if (r.tail_len) memcpy(s->codes + s->ncodes, tail, r.tail_len * sizeof *tail);
	s->ncodes += r.tail_len;
	s->ev[s->n++] = r;
}

static int reader_locs(void *ctx, uint64_t code, const mt_location **locs)
{
	return mt_reader_lookup(ctx, code, locs);
}

/* Writes the stream to fd. */
static void replay(const struct stream *s, int fd, mt_locations_fn fn, void *ctx)
{
	static uint64_t *bt;
	static size_t bt_cap;
	mt_writer *w = mt_writer_open(fd, &s->info, fn, ctx);
	if (!w) {
		perror("format_bench: mt_writer_open");
		exit(1);
	}
	for (size_t i = 0; i < s->n; i++) {
		const struct rec *r = &s->ev[i];
		int rc = 0;
		if (r->type == MT_EV_ALLOC) {
			if (r->prefix + r->tail_len > bt_cap) {
				bt_cap = (r->prefix + r->tail_len) * 2;
				bt = xrealloc(bt, bt_cap * sizeof *bt);
			}
			memcpy(bt + r->prefix, s->codes + r->tail_off, r->tail_len * sizeof *bt);
			rc = mt_writer_alloc(w, r->time, r->length, r->nsamples, r->source, bt,
					     r->prefix + r->tail_len) < 0;
		} else if (r->type == MT_EV_PROMOTE) {
			rc = mt_writer_promote(w, r->time, r->id);
		} else {
			rc = mt_writer_collect(w, r->time, r->id);
		}
		if (rc) {
			fprintf(stderr, "format_bench: write: %s\n", mt_writer_error(w));
			exit(1);
		}
	}
	if (mt_writer_close(w) < 0) {
		fprintf(stderr, "format_bench: close failed\n");
		exit(1);
	}
}

/* Reads the whole trace in fd; returns the number of events (or -1). */
static long read_all(int fd, struct stream *keep)
{
	char *err = NULL;
	lseek(fd, 0, SEEK_SET);
	mt_reader *r = mt_reader_open(fd, NULL, NULL, &err);
	if (!r) {
		fprintf(stderr, "format_bench: %s\n", err);
		free(err);
		return -1;
	}
	mt_event ev;
	long n = 0;
	int rc;
	while ((rc = mt_reader_next(r, &ev)) == 1) {
		n++;
		if (keep) {
			struct rec rr = {.type = ev.type, .source = ev.source, .time = ev.time_us,
					 .id = ev.id, .length = ev.length, .nsamples = ev.nsamples};
			size_t pre = ev.type == MT_EV_ALLOC ? ev.common_prefix : 0;
			if (pre > ev.backtrace_len) pre = ev.backtrace_len;
			rr.prefix = pre;
			rr.tail_len = ev.type == MT_EV_ALLOC ? ev.backtrace_len - pre : 0;
			add_event(keep, rr, ev.backtrace + pre);
		}
	}
	if (rc < 0) fprintf(stderr, "format_bench: %s\n", mt_reader_error(r));
	if (keep) {
		keep->info = *mt_reader_info(r);
		keep->locs_from = r; /* kept open: its strings and location table */
	} else {
		mt_reader_close(r);
	}
	return rc < 0 ? -1 : n;
}

struct result { double write_eps, read_eps, bytes_per_event; long events; uint64_t bytes; };

static struct result measure(const struct stream *s, mt_locations_fn fn, void *ctx)
{
	struct result res = {.events = (long)s->n};
	int devnull = open("/dev/null", O_WRONLY);
	double t0 = now_s(), t;
	long reps = 0;
	do {
		replay(s, devnull, fn, ctx);
		reps++;
	} while ((t = now_s() - t0) < MIN_SECONDS || reps < 3);
	res.write_eps = s->n * reps / t;
	close(devnull);

	/* The trace itself (its size counts the final flush too), then read it back. */
	int fd = memfd_create("bench", 0);
	replay(s, fd, fn, ctx);
	res.bytes = (uint64_t)lseek(fd, 0, SEEK_END);
	t0 = now_s();
	reps = 0;
	do {
		if (read_all(fd, NULL) != (long)s->n) exit(1);
		reps++;
	} while ((t = now_s() - t0) < MIN_SECONDS || reps < 3);
	res.read_eps = s->n * reps / t;
	close(fd);
	res.bytes_per_event = s->n ? (double)res.bytes / s->n : 0;
	return res;
}

/* Synthetic locations: one per code. */
static int synth_locs(void *ctx, uint64_t code, const mt_location **locs)
{
	static mt_location l;
	static char fn[32], file[32];
	snprintf(file, sizeof file, "src/module%02d.c", (int)(code % 40));
	snprintf(fn, sizeof fn, "function_%llu", (unsigned long long)code);
	l = (mt_location){.line = (uint32_t)(code % 5000), .filename = file, .defname = fn};
	*locs = &l;
	return 1;
}

/* 200,000 allocations over ~60 s of trace time; 400 stacks of 30 frames sharing their outer
 * frames (main loop, dispatch) like a real program; 90% of the blocks freed a little later. */
static void make_synth(struct stream *s)
{
	enum { NALLOC = 200000, NSTACKS = 400, DEPTH = 30, LIVE = 4096 };
	static uint64_t stacks[NSTACKS][DEPTH];
	unsigned seed = 12345;
#define RND() (seed = seed * 1103515245u + 12345u, seed >> 8)
	for (int k = 0; k < NSTACKS; k++)
		for (int i = 0; i < DEPTH; i++)
			stacks[k][i] = i < 8 ? 0x1000 + i
				     : i < 18 ? 0x2000 + (k % 23) * 16 + i
						: 0x10000 + (uint64_t)k * 64 + i;
	memset(s, 0, sizeof *s);
	s->info = (mt_trace_info){.sample_rate = 1e-4, .word_size = 64,
				  .executable_name = "/usr/bin/synthetic", .host_name = "bench",
				  .ocaml_runtime_params = "", .pid = 1234, .context = "",
				  .start_time_us = 1700000000000000ull};
	uint64_t t = s->info.start_time_us, prev = (uint64_t)-1;
	uint64_t live[LIVE];
	int nlive = 0;
	for (uint64_t id = 0; id < NALLOC; id++) {
		t += RND() % 600;
		int k = (int)(RND() % NSTACKS);
		/* Zipf-ish: a few stacks are hot. */
		if (RND() % 4) k %= 20;
		size_t pre = 0;
		if (prev != (uint64_t)-1)
			while (pre < DEPTH && stacks[k][pre] == stacks[prev][pre]) pre++;
		struct rec r = {.type = MT_EV_ALLOC, .source = MT_SOURCE_EXTERNAL, .time = t,
				.length = 1 + RND() % 64, .nsamples = 1, .prefix = pre,
				.tail_len = DEPTH - pre};
		add_event(s, r, stacks[k] + pre);
		prev = (uint64_t)k;
		if (RND() % 10) { /* freed later */
			if (nlive == LIVE || (nlive && RND() % 2)) {
				int j = (int)(RND() % (unsigned)nlive);
				add_event(s, (struct rec){.type = MT_EV_COLLECT, .time = t, .id = live[j]},
					  NULL);
				live[j] = live[--nlive];
			}
			live[nlive++] = id;
		}
	}
#undef RND
}

static void row(const char *name, const struct result *r)
{
	printf("%-26s %9ld %11.0f %11.0f %9.2f\n", name, r->events, r->write_eps, r->read_eps,
	       r->bytes_per_event);
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "tests/data/memtrace";
	printf("%-26s %9s %11s %11s %9s\n", "trace", "events", "write ev/s", "read ev/s",
	       "bytes/ev");

	/* (a) real traces */
	DIR *d = opendir(dir);
	double wtime = 0, rtime = 0;
	long total_events = 0;
	uint64_t total_bytes = 0;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		size_t len = strlen(de->d_name);
		if (len < 5 || strcmp(de->d_name + len - 4, ".ctf")) continue;
		char path[4096];
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		int fd = open(path, O_RDONLY);
		struct stream s = {0};
		if (fd < 0 || read_all(fd, &s) < 0) {
			fprintf(stderr, "format_bench: cannot read %s\n", path);
			return 1;
		}
		struct result r = measure(&s, reader_locs, s.locs_from);
		row(de->d_name, &r);
		wtime += r.events / r.write_eps;
		rtime += r.events / r.read_eps;
		total_events += r.events;
		total_bytes += r.bytes;
		mt_reader_close(s.locs_from);
		free(s.ev);
		free(s.codes);
		close(fd);
	}
	if (d) closedir(d);
	if (!total_events) {
		fprintf(stderr, "format_bench: no .ctf traces in %s\n", dir);
		return 1;
	}
	struct result real = {total_events / wtime, total_events / rtime,
			      (double)total_bytes / total_events, total_events, total_bytes};
	row("all real traces", &real);

	/* (b) synthetic */
	struct stream s;
	make_synth(&s);
	struct result syn = measure(&s, synth_locs, NULL);
	row("synthetic (30 frames)", &syn);
	free(s.ev);
	free(s.codes);

	printf("fmt_write_events_per_s_real=%.0f\n", real.write_eps);
	printf("fmt_read_events_per_s_real=%.0f\n", real.read_eps);
	printf("fmt_bytes_per_event_real=%.2f\n", real.bytes_per_event);
	printf("fmt_write_events_per_s_synth=%.0f\n", syn.write_eps);
	printf("fmt_read_events_per_s_synth=%.0f\n", syn.read_eps);
	printf("fmt_bytes_per_event_synth=%.2f\n", syn.bytes_per_event);
	return 0;
}
