/* memtrace-dump: prints a memtrace trace (.ctf) in the canonical text dump described in
 * tests/data/memtrace/README.md (one line per event, frames caller first). A v3 trace is
 * printed as the newest real reader prints it: an "info initial_domain=" line, and the
 * domain of every event ("dom=" after the source of an allocation, after the id of a
 * promote or collect); v1/v2 traces as 0.2.3 prints them, without domains.
 *
 *   memtrace-dump [--summary-only] FILE
 *
 * Exit status: 0 = the trace was read to its end (skipped packets are warnings on stderr),
 * 1 = malformed trace (the events decoded so far are printed first, then an "error:" line),
 * a backtrace slot whose code was not described by an earlier location event, an unreadable
 * file or bad options. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heapview_cli.h"
#include "memtrace.h"

static const char *progname = "memtrace-dump";

struct summary {
	uint64_t events, alloc, by_source[3], promote, collect, samples, words, max_bt;
	uint64_t unknown_codes, noloc_codes;
};

/* ---- fast output: stdout is fully buffered; numbers are formatted by hand ---------- */

static void out_str(const char *s) { fputs_unlocked(s, stdout); }
static void out_char(char c) { putc_unlocked(c, stdout); }

static void out_u64(uint64_t v)
{
	char buf[24];
	int i = sizeof(buf);
	do {
		buf[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	fwrite_unlocked(buf + i, 1, sizeof(buf) - i, stdout);
}

static void out_i64(int64_t v)
{
	if (v < 0) {
		out_char('-');
		out_u64(-(uint64_t)v);
	} else {
		out_u64((uint64_t)v);
	}
}

/* The event time: microseconds since the start, zero-padded to 10 digits. */
static void out_time(uint64_t t)
{
	char buf[24];
	int i = sizeof(buf), n = 0;
	do {
		buf[--i] = (char)('0' + t % 10);
		t /= 10;
		n++;
	} while (t || n < 10);
	fwrite_unlocked(buf + i, 1, sizeof(buf) - i, stdout);
}

/* A string escaped like OCaml's String.escaped, in double quotes. */
static void out_escaped(const char *s)
{
	out_char('"');
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"': out_str("\\\""); break;
		case '\\': out_str("\\\\"); break;
		case '\n': out_str("\\n"); break;
		case '\t': out_str("\\t"); break;
		case '\r': out_str("\\r"); break;
		case '\b': out_str("\\b"); break;
		default:
			if (*p >= 32 && *p <= 126) out_char((char)*p);
			else printf("\\%03u", *p);
		}
	}
	out_char('"');
}

static void print_info(const mt_trace_info *info)
{
	printf("info sample_rate=%.17g\n", info->sample_rate);
	printf("info word_size=%u\n", info->word_size);
	out_str("info executable_name=");
	out_escaped(info->executable_name);
	out_str("\ninfo host_name=");
	out_escaped(info->host_name);
	out_str("\ninfo ocaml_runtime_params=");
	out_escaped(info->ocaml_runtime_params);
	out_str("\ninfo pid=");
	out_i64((int64_t)info->pid);
	out_str("\ninfo start_time_us=");
	out_i64((int64_t)info->start_time_us);
	out_str("\ninfo context=");
	if (info->context[0]) out_escaped(info->context);
	else out_str("<none>");
	out_char('\n');
	if (info->format_version >= 3) {
		out_str("info initial_domain=");
		out_u64(info->initial_domain);
		out_char('\n');
	}
}

static void out_domain(const mt_event *ev)
{
	out_str(" dom=");
	out_u64(ev->domain);
}

/* ---- backtraces ------------------------------------------------------------------- */

struct slot {
	int n; /* -1 = code never described */
	const mt_location *locs;
};

static void print_slot(struct slot s)
{
	if (s.n < 0) {
		out_str("<unknown>");
		return;
	}
	if (s.n == 0) {
		out_str("<noloc>");
		return;
	}
	for (int i = 0; i < s.n; i++) {
		const mt_location *l = &s.locs[i];
		if (i) out_str(" & ");
		out_str(l->filename);
		out_char(':');
		out_u64(l->line);
		out_char(':');
		out_u64(l->start_char);
		out_char('-');
		out_u64(l->end_char);
		out_char(' ');
		out_str(l->defname);
	}
}

/* Prints " <frame> | <frame> *k | ..." (unless quiet) and counts unknown/noloc slots. */
static void print_backtrace(const mt_reader *r, const mt_event *ev, int quiet,
			    struct summary *sum)
{
	/* A run is a sequence of equal codes (two codes with equal location lists are two
	 * frames, as in the reference dumps). */
	size_t run_len = 0;
	for (size_t i = 0; i < ev->backtrace_len; i++) {
		struct slot s;
		s.n = mt_reader_lookup(r, ev->backtrace[i], &s.locs);
		if (s.n < 0) {
			s.locs = NULL;
			sum->unknown_codes++;
		} else if (s.n == 0) {
			sum->noloc_codes++;
		}
		if (quiet) continue;
		if (run_len && ev->backtrace[i] == ev->backtrace[i - 1]) {
			run_len++;
			continue;
		}
		if (run_len > 1) {
			out_str(" *");
			out_u64(run_len);
		}
		out_str(run_len ? " | " : " ");
		print_slot(s);
		run_len = 1;
	}
	if (!quiet && run_len > 1) {
		out_str(" *");
		out_u64(run_len);
	}
}

/* with_domain: the trace is v3 (its events name their domain). */
static void print_event(const mt_reader *r, const mt_event *ev, uint64_t start, int quiet,
			int with_domain, struct summary *sum)
{
	static const char *const sources[] = { "minor", "major", "external" };
	sum->events++;
	/* The reader guarantees time >= start as signed 64-bit numbers (timestamps are
	 * compared signed), so the unsigned difference is exact even for odd start times. */
	if (!quiet) out_time(ev->time_us - start);
	switch (ev->type) {
	case MT_EV_ALLOC:
		sum->alloc++;
		sum->by_source[ev->source]++;
		sum->samples += ev->nsamples;
		sum->words += ev->length;
		if (ev->backtrace_len > sum->max_bt) sum->max_bt = ev->backtrace_len;
		if (!quiet) {
			out_str(" alloc id=");
			out_u64(ev->id);
			out_str(" len=");
			out_u64(ev->length);
			out_str(" nsamples=");
			out_u64(ev->nsamples);
			out_str(" source=");
			out_str(sources[ev->source]);
			if (with_domain) out_domain(ev);
			out_str(" bt=");
			out_u64(ev->backtrace_len);
			out_char(':');
		}
		print_backtrace(r, ev, quiet, sum);
		break;
	case MT_EV_PROMOTE:
		sum->promote++;
		if (!quiet) {
			out_str(" promote id=");
			out_u64(ev->id);
			if (with_domain) out_domain(ev);
		}
		break;
	case MT_EV_COLLECT:
		sum->collect++;
		if (!quiet) {
			out_str(" collect id=");
			out_u64(ev->id);
			if (with_domain) out_domain(ev);
		}
		break;
	}
	if (!quiet) out_char('\n');
}

static void print_summary(const struct summary *s)
{
	printf("summary events=%" PRIu64 " alloc=%" PRIu64 " minor=%" PRIu64 " major=%" PRIu64
	       " external=%" PRIu64 " promote=%" PRIu64 " collect=%" PRIu64 " samples=%" PRIu64
	       " words=%" PRIu64 " max_bt=%" PRIu64 " unknown_codes=%" PRIu64
	       " noloc_codes=%" PRIu64 "\n",
	       s->events, s->alloc, s->by_source[0], s->by_source[1], s->by_source[2], s->promote,
	       s->collect, s->samples, s->words, s->max_bt, s->unknown_codes, s->noloc_codes);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [--summary-only] FILE\n"
		"Prints a memtrace trace (.ctf) as text: the trace info, one line per event, and a\n"
		"summary line. --summary-only prints only the info lines and the summary.\n",
		progname);
}

int main(int argc, char **argv)
{
	const char *path = NULL;
	int summary_only = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--summary-only")) {
			summary_only = 1;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "%s: unknown option '%s'\n", progname, argv[i]);
			usage(stderr);
			return 1;
		} else if (path) {
			fprintf(stderr, "%s: more than one file given ('%s' and '%s')\n", progname,
				path, argv[i]);
			usage(stderr);
			return 1;
		} else {
			path = argv[i];
		}
	}
	if (!path) {
		fprintf(stderr, "%s: no trace file given\n", progname);
		usage(stderr);
		return 1;
	}
	int fd = !strcmp(path, "-") ? 0 : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "%s: cannot open %s: %s\n", progname, path, strerror(errno));
		return 1;
	}
	static char outbuf[1 << 20];
	setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));

	char *err = NULL;
	mt_reader *r = mt_reader_open(fd, NULL, NULL, &err);
	if (!r) {
		printf("# memtrace-dump: memtraced reader\n");
		printf("error: %s\n", err ? err : "cannot read the trace");
		fflush(stdout);
		fprintf(stderr, "%s: %s: %s\n", progname, path, err ? err : "cannot read the trace");
		free(err);
		return 1;
	}
	const mt_trace_info *info = mt_reader_info(r);
	printf("# memtrace-dump: memtraced reader\n");
	print_info(info);

	struct summary sum = { 0 };
	mt_event ev;
	int rc;
	while ((rc = mt_reader_next(r, &ev)) > 0)
		print_event(r, &ev, info->start_time_us, summary_only, info->format_version >= 3,
			    &sum);

	int status = 0;
	if (rc < 0) {
		printf("error: %s\n", mt_reader_error(r));
		fflush(stdout);
		fprintf(stderr, "%s: %s: %s\n", progname, path, mt_reader_error(r));
		status = 1;
	} else {
		print_summary(&sum);
		hv_cli_warn_drops(progname, info, sum.alloc);
		if (sum.unknown_codes) {
			printf("error: %" PRIu64 " backtrace slots use location codes that no earlier "
			       "location event describes\n", sum.unknown_codes);
			fflush(stdout);
			fprintf(stderr, "%s: %s: %" PRIu64 " backtrace slots use location codes that "
				"no earlier location event describes\n", progname, path,
				sum.unknown_codes);
			status = 1;
		}
	}
	mt_reader_close(r);
	if (fd > 0) close(fd);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "%s: error writing the output: %s\n", progname, strerror(errno));
		return 1;
	}
	return status;
}
