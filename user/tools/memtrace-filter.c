/* memtrace-filter [--from SEC] [--to SEC] [--format v2|v3] IN OUT
 *
 * Rewrites a memtrace trace through our writer, keeping the allocations made in the time
 * window [from, to) (seconds since the trace start) with their promote and collect events;
 * allocation ids are renumbered. The output is format v2 (what every released memtrace
 * reads) unless --format v3 asks for the newest memtrace's format. Without a window every
 * event is kept, and a trace written by the real memtrace library comes out byte-identical
 * when written in its own format (v2 by 0.2.3, v3 by the newest writer for one domain; the
 * events of other domains are written in the initial domain, with a warning). On
 * a malformed input the events read so far are written as a valid trace, the reader's
 * message is printed, exit 1. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "heapview_cli.h"
#include "memtrace.h"
#include "out_file.h"

#define PROG "memtrace-filter"
#define DROPPED UINT64_MAX

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [--from SEC] [--to SEC] [--format v2|v3] IN OUT\n"
		"  Copies the trace IN to OUT keeping only the allocations made in [SEC_from, SEC_to)\n"
		"  (seconds since the trace start, fractions allowed) with their promote and collect\n"
		"  events; ids are renumbered. IN or OUT may be '-' (stdin, stdout).\n"
		"  --format: the format of OUT: v2 (the default; every memtrace release reads it) or\n"
		"  v3 (the newest memtrace's format, with domains), whatever the format of IN.\n");
}

/* Seconds (>= 0, finite) to microseconds, rounded to the nearest microsecond. */
static int parse_seconds(const char *opt, const char *s, uint64_t *us)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end || errno || !isfinite(v) || v < 0) {
		fprintf(stderr, PROG ": %s: '%s' is not a number of seconds >= 0\n", opt, s);
		return -1;
	}
	*us = v * 1e6 >= 1.8e19 ? UINT64_MAX : (uint64_t)llround(v * 1e6);
	return 0;
}

static void on_warning(void *ctx, const char *msg)
{
	fprintf(stderr, PROG ": %s: warning: %s\n", (const char *)ctx, msg);
}

/* The writer asks for the locations of a code on a cache miss: the reader has them. */
static int lookup(void *ctx, uint64_t code, const mt_location **locs)
{
	return mt_reader_lookup(ctx, code, locs);
}

/* old id -> new id (or DROPPED); old ids are dense from 0. */
struct idmap { uint64_t *v; size_t n, cap; };

static int idmap_set(struct idmap *m, uint64_t old, uint64_t new_id)
{
	if (old >= SIZE_MAX / 16) return -1;
	if (old >= m->cap) {
		size_t cap = m->cap ? m->cap : 4096;
		while (cap <= old) cap *= 2;
		uint64_t *v = realloc(m->v, cap * sizeof *v);
		if (!v) return -1;
		m->v = v;
		m->cap = cap;
	}
	while (m->n < old) m->v[m->n++] = DROPPED;
	m->v[old] = new_id;
	if (old >= m->n) m->n = old + 1;
	return 0;
}

static uint64_t idmap_get(const struct idmap *m, uint64_t old) { return old < m->n ? m->v[old] : DROPPED; }

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"from", required_argument, NULL, 'f'},
		{"to", required_argument, NULL, 't'},
		{"format", required_argument, NULL, 'F'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	uint64_t from = 0, to = UINT64_MAX;
	int c, format = MT_FORMAT_VERSION;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'f': if (parse_seconds("--from", optarg, &from) < 0) return 1; break;
		case 't': if (parse_seconds("--to", optarg, &to) < 0) return 1; break;
		case 'F':
			if (!strcmp(optarg, "v2") || !strcmp(optarg, "2")) format = 2;
			else if (!strcmp(optarg, "v3") || !strcmp(optarg, "3")) format = 3;
			else {
				fprintf(stderr, PROG ": --format: '%s' is not v2 or v3\n", optarg);
				return 1;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 1;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, PROG ": expected two arguments, IN and OUT, got %d\n", argc - optind);
		usage(stderr);
		return 1;
	}
	if (from >= to) {
		fprintf(stderr, PROG ": empty window: --from must be less than --to\n");
		return 1;
	}
	const char *in = argv[optind], *out = argv[optind + 1];

	int ifd = strcmp(in, "-") ? open(in, O_RDONLY) : 0;
	if (ifd < 0) {
		fprintf(stderr, PROG ": cannot open %s: %s\n", in, strerror(errno));
		return 1;
	}
	struct stat ist, ost;
	if (strcmp(out, "-") && fstat(ifd, &ist) == 0 && stat(out, &ost) == 0 &&
	    ist.st_dev == ost.st_dev && ist.st_ino == ost.st_ino) {
		fprintf(stderr, PROG ": %s and %s are the same file\n", in, out);
		return 1;
	}
	char *err = NULL;
	mt_reader *r = mt_reader_open(ifd, on_warning, (void *)in, &err);
	if (!r) {
		fprintf(stderr, PROG ": %s: %s\n", in, err ? err : "cannot read the trace");
		free(err);
		return 1;
	}
	char oerr[4400];
	int ofd = strcmp(out, "-") ? mt_out_create(out, 0644, "output", oerr, sizeof oerr) : 1;
	if (ofd < 0) {
		fprintf(stderr, PROG ": %s\n", oerr);
		mt_reader_close(r);
		return 1;
	}
	mt_writer *w = mt_writer_open_format(ofd, mt_reader_info(r), format, lookup, r);
	if (!w) {
		fprintf(stderr, PROG ": cannot write %s: %s\n", out, strerror(errno));
		mt_reader_close(r);
		return 1;
	}

	const uint64_t start = mt_reader_info(r)->start_time_us;
	struct idmap ids = {0};
	mt_event ev;
	int rc, status = 0;
	uint64_t allocs = 0;
	const uint16_t out_domain = mt_reader_info(r)->initial_domain;
	int warned_domains = 0;
	while ((rc = mt_reader_next(r, &ev)) == 1) {
		int wrc = 0;
		/* Our writer writes one domain: a v3 output holds every event in the initial one. */
		if (format >= 3 && ev.domain != out_domain && !warned_domains) {
			warned_domains = 1;
			fprintf(stderr, PROG ": %s: warning: events of domain %u (and perhaps others) are "
				"written as domain %u: this writer writes one domain\n", in, ev.domain,
				out_domain);
		}
		if (ev.type == MT_EV_ALLOC) {
			allocs++;
			uint64_t dt = ev.time_us - start, new_id = DROPPED;
			if (dt >= from && dt < to) {
				int64_t id = mt_writer_alloc(w, ev.time_us, ev.length, ev.nsamples,
							     ev.source, ev.backtrace,
							     ev.backtrace_len);
				if (id < 0) wrc = -1;
				else new_id = (uint64_t)id;
			}
			if (wrc == 0 && idmap_set(&ids, ev.id, new_id) < 0) {
				fprintf(stderr, PROG ": out of memory for the id map\n");
				status = 1;
				break;
			}
		} else {
			uint64_t id = idmap_get(&ids, ev.id);
			if (id != DROPPED)
				wrc = ev.type == MT_EV_PROMOTE ? mt_writer_promote(w, ev.time_us, id)
							       : mt_writer_collect(w, ev.time_us, id);
		}
		if (wrc < 0) {
			fprintf(stderr, PROG ": %s: %s\n", out, mt_writer_error(w));
			status = 1;
			break;
		}
	}
	if (rc < 0) {
		fprintf(stderr, PROG ": %s: %s\n", in, mt_reader_error(r));
		status = 1;
	} else {
		hv_cli_warn_drops(PROG, mt_reader_info(r), allocs);
	}
	/* Close the writer in every case: what was read so far becomes a valid trace. */
	if (mt_writer_close(w) < 0 && status == 0) {
		fprintf(stderr, PROG ": %s: write failed\n", out);
		status = 1;
	}
	if (ofd != 1 && close(ofd) < 0 && status == 0) {
		fprintf(stderr, PROG ": %s: %s\n", out, strerror(errno));
		status = 1;
	}
	mt_reader_close(r);
	free(ids.v);
	return status;
}
