/* memtrace-pprof: a trace as a gzipped pprof profile (google/pprof's profile.proto), with
 * sample types alloc_objects/count, alloc_space/bytes, inuse_objects/count and
 * inuse_space/bytes (inuse = live at the end of the trace or of --to), estimated from the
 * samples as heapview.h describes. One pprof Location per location code; its inlined source
 * locations are several Lines of that Location, innermost first. The trace carries no
 * build ids or addresses, so there is one mapping: the traced executable. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heapview_cli.h"
#include "pprof_build.h"

#define PROG "memtrace-pprof"

static int lookup(void *ctx, uint64_t code, const mt_location **locs)
{
	return hv_lookup(ctx, code, locs);
}

/* The profile: every sample is a context with allocations of its own. NULL when out of memory. */
static pp_profile *build(const hv_heap *h, const char *path)
{
	const mt_trace_info *info = hv_info(h);
	char comment[512];
	snprintf(comment, sizeof comment, "memtrace trace %s, pid %llu, sample rate %g per word; "
		 "values estimated from samples", path, (unsigned long long)info->pid, info->sample_rate);
	pp_head head = {
		.default_type = "inuse_space", /* like Go heap profiles */
		.period = hv_sample_bytes(info, 1),
		.time_nanos = (int64_t)(info->start_time_us * 1000),
		.duration_nanos = (int64_t)((hv_end_time_us(h) - info->start_time_us) * 1000),
		.comment = comment,
	};
	pp_profile *p = pp_new(&head);
	if (!p) return NULL;
	uint32_t m = pp_mapping(p, info->executable_name, lookup, (void *)h);
	uint32_t nctx = hv_context_count(h), max_depth = 0;
	for (uint32_t c = 0; c < nctx; c++)
		if (hv_context_depth(h, c) > max_depth) max_depth = hv_context_depth(h, c);
	uint64_t *codes = calloc(max_depth + 1, sizeof *codes);
	int rc = codes ? 0 : -1;
	for (uint32_t c = 0; c < nctx && rc == 0; c++) {
		const hv_counts *cc = hv_context_counts(h, c);
		if (!cc->alloc_events) continue;
		uint32_t depth = hv_context_stack(h, c, codes);
		double v[PP_NVALUES] = {cc->alloc_objects, cc->alloc_bytes, cc->live_objects, cc->live_bytes};
		rc = pp_sample(p, m, codes, depth, v, NULL, 0);
	}
	free(codes);
	if (rc < 0) {
		pp_free(p);
		return NULL;
	}
	return p;
}

static int write_all(const char *output, const uint8_t *buf, size_t len)
{
	FILE *f = strcmp(output, "-") ? hv_cli_create(PROG, output, "wb") : stdout;
	if (!f) return -1;
	size_t done = fwrite(buf, 1, len, f);
	int rc = f == stdout ? fflush(f) : fclose(f);
	if (done != len || rc != 0) {
		fprintf(stderr, PROG ": writing %s failed\n", output);
		return -1;
	}
	return 0;
}

static void usage(FILE *f)
{
	fputs("usage: memtrace-pprof [options] TRACE.ctf -o OUT.pb.gz\n"
	      "  -o, --output FILE  the gzipped profile (\"-\" = standard output)\n"
	      "  --from SEC, --to SEC  time window in seconds since trace start (inuse = live at\n"
	      "                     the end of the window)\n"
	      "  --at peak|SEC      inuse = live at that moment: the peak (the moment the live\n"
	      "                     estimate was highest) or SEC seconds since the start\n"
	      "  --lenient          skip packets the reader skips (with a warning) instead of failing\n"
	      "  --wrapper NAME, --keep-wrappers  allocation wrappers: named in the profile's\n"
	      "                     drop_frames, so pprof's top names their callers (see memtrace-report)\n"
	      "Read it with: go tool pprof -top -sample_index=alloc_space OUT.pb.gz\n",
	      f);
}

/* The drop_frames regex: the wrapper patterns and the frames without a name taken as ones. */
static int wrapper_regex(pp_profile *p, const hv_heap *h, const hv_cli_wrappers *w)
{
	char *re = NULL;
	size_t len = 0, cap = 0;
	int rc = 0;
	for (int i = 0; hv_default_wrappers[i] && rc == 0; i++) rc = pp_regex_add(&re, &len, &cap, hv_default_wrappers[i]);
	for (int i = 0; i < w->n && rc == 0; i++) rc = pp_regex_add(&re, &len, &cap, w->extra[i]);
	for (uint32_t c = 1; c < hv_context_count(h) && rc == 0; c++) {
		const mt_location *locs;
		int n = hv_lookup(h, hv_context_code(h, c), &locs);
		const char *name = n > 0 ? hv_defname(&locs[n - 1]) : NULL;
		if (name && hv_context_skipped(h, c) && !hv_is_wrapper_name(name, w->extra, w->n))
			rc = pp_regex_add(&re, &len, &cap, name);
	}
	if (rc == 0) rc = pp_drop_frames(p, re ? re : "");
	free(re);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, 0, 'o' }, { "from", required_argument, 0, 'f' },
		{ "to", required_argument, 0, 't' },     { "lenient", no_argument, 0, 'L' },
		{ "help", no_argument, 0, 'h' },         { "wrapper", required_argument, 0, 'W' },
		{ "keep-wrappers", no_argument, 0, 'K' }, { "at", required_argument, 0, 'A' },
		{ 0, 0, 0, 0 },
	};
	static hv_cli_wrappers wrappers;
	hv_options opt = { .from_s = 0, .to_s = -1 };
	hv_cli_at at = { 0 };
	const char *output = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'o': output = optarg; break;
		case 'f': if (hv_cli_number(PROG, "--from", optarg, &opt.from_s)) return 2; break;
		case 't': if (hv_cli_number(PROG, "--to", optarg, &opt.to_s)) return 2; break;
		case 'A': if (hv_cli_parse_at(PROG, optarg, &at)) return 2; break;
		case 'L': opt.lenient = 1; break;
		case 'W': if (hv_cli_add_wrapper(PROG, &wrappers, optarg)) return 2; break;
		case 'K': wrappers.keep = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (hv_cli_operands(PROG, argc - optind, 1, "one trace file", usage) < 0 ||
	    hv_cli_window(PROG, &opt) < 0)
		return 2;
	if (!output) {
		fprintf(stderr, PROG ": say where the profile goes: -o OUT.pb.gz (or -o - for stdout)\n");
		return 2;
	}
	hv_heap *h = hv_cli_load_at(PROG, argv[optind], &opt, &at);
	if (!h) return 1;
	if (hv_cli_apply_wrappers(PROG, h, &wrappers, stderr) < 0) {
		hv_free(h);
		return 1;
	}
	pp_profile *p = build(h, argv[optind]);
	uint8_t *buf = NULL;
	size_t len = 0;
	/* pprof's own way: frames matching drop_frames (and what they call) leave the samples
	 * when a tool reads the profile, so `top` names the caller of a wrapper; the profile's
	 * stacks keep every frame */
	if (!p || (!wrappers.keep && wrapper_regex(p, h, &wrappers) < 0) || pp_gzip(p, 9, &buf, &len) < 0) {
		fprintf(stderr, PROG ": out of memory\n");
		pp_free(p);
		hv_free(h);
		return 1;
	}
	int rc = write_all(output, buf, len);
	free(buf);
	pp_free(p);
	hv_free(h);
	return rc < 0 ? 1 : 0;
}
