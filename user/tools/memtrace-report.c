/* memtrace-report: the top allocation sites of a trace, by estimated bytes allocated, by bytes
 * live at the peak (the moment the live estimate was highest) and by bytes still live at the end
 * (of the trace or of a --from/--to window), with call stacks. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heapview_cli.h"
#include "heapview_timeline.h"

#define PROG "memtrace-report"

static void usage(FILE *f)
{
	fputs("usage: memtrace-report [options] TRACE.ctf\n"
	      "  --top N            rows per table (default 10; 0 = all)\n"
	      "  --by alloc|peak|live  one table: by bytes allocated, live at the peak (the moment\n"
	      "                     the live estimate was highest), or live at the end (default:\n"
	      "                     the three)\n"
	      "  --group function|line|stack\n"
	      "                     a row per allocating function, per file:line (default), or\n"
	      "                     per whole call stack\n"
	      "  --from SEC, --to SEC\n"
	      "                     only allocations in this window (seconds since trace start);\n"
	      "                     \"live\" then means live at the end of the window\n"
	      "  --frames N         frames printed per stack (default 16; 0 = all)\n"
	      "  --raw              exact byte counts instead of KiB/MiB\n"
	      "  --wrapper NAME     a function (shell pattern) that only wraps the allocator: the\n"
	      "                     frame calling it is the site (repeatable; xmalloc, g_malloc,\n"
	      "                     zmalloc, PyMem_Malloc, operator new... are by default)\n"
	      "  --keep-wrappers    every frame may be a site, wrappers too\n"
	      "  --timeline         a text chart of the live bytes over time, the peak marked\n"
	      "  --lenient          skip packets the reader skips (with a warning) instead of failing\n",
	      f);
}

static int by_live_g;

static int cmp_rows(const void *a, const void *b)
{
	const hv_row *x = a, *y = b;
	double vx = by_live_g ? x->counts.live_bytes : x->counts.alloc_bytes;
	double vy = by_live_g ? y->counts.live_bytes : y->counts.alloc_bytes;
	if (vx != vy) return vx < vy ? 1 : -1;
	return strcmp(x->key, y->key);
}

static void print_table(const hv_heap *h, hv_rows *rows, int by_live, const char *when,
			size_t top, int frames, int raw, const char *group_name)
{
	int by_stack = strcmp(group_name, "stack") == 0;
	by_live_g = by_live;
	hv_rows_sort(rows, cmp_rows);
	const hv_counts *total = hv_total(h);
	double denom = by_live ? total->live_bytes : total->alloc_bytes;
	printf("\nTop %s by %s%s (grouped by %s):\n", "allocation sites",
	       by_live ? "bytes live at " : "bytes allocated", by_live ? when : "", group_name);
	size_t shown = 0;
	for (size_t i = 0; i < rows->n && (top == 0 || shown < top); i++) {
		hv_row *r = &rows->rows[i];
		double v = by_live ? r->counts.live_bytes : r->counts.alloc_bytes;
		if (by_live && v <= 0) break; /* nothing live left in the rest */
		char a[32], l[32], v_s[32], key[512];
		printf("%3zu. %s  %5.1f%%  allocated %s  live %s  objects ~%.0f (%llu samples)  %s\n",
		       ++shown, hv_cli_bytes(v, raw, v_s), denom > 0 ? 100.0 * v / denom : 0.0,
		       hv_cli_bytes(r->counts.alloc_bytes, raw, l), hv_cli_bytes(r->counts.live_bytes, raw, a),
		       by_live ? r->counts.live_objects : r->counts.alloc_objects,
		       (unsigned long long)(by_live ? r->counts.live_samples : r->counts.alloc_samples),
		       hv_cli_row_title(r->key, by_stack, key, sizeof key));
		if (r->ncontexts > 1)
			printf("     heaviest of %u stacks:\n", r->ncontexts);
		hv_print_stack(stdout, h, r->heaviest_ctx, "       ", frames);
	}
	if (!shown) printf("     (none)\n");
}

/* Live bytes over time as a text chart: COLS columns (one per time bucket) of ROWS lines, '#'
 * up to each bucket's live bytes, the peak's column marked below. */
static int print_timeline(const char *path, const hv_options *opt)
{
	enum { COLS = 64, ROWS = 8 };
	char *err = NULL;
	hv_timeline *t = hv_timeline_load(path, opt, COLS, HV_GROUP_FUNCTION, 0, NULL, 0, 0, &err);
	if (!t) {
		fprintf(stderr, PROG ": %s\n", err ? err : "cannot read trace");
		free(err);
		return -1;
	}
	double max = t->peak.bytes;
	for (int i = 0; i < COLS; i++)
		if (t->total[i] > max) max = t->total[i];
	char a[32];
	double t0 = (double)(t->t0_us - hv_info(t->h)->start_time_us) / 1e6;
	double t1 = (double)(t->t1_us - hv_info(t->h)->start_time_us) / 1e6;
	printf("\nLive bytes over time (%.3f s .. %.3f s, %.3f s a column):\n", t0, t1,
	       (t1 - t0) / COLS);
	for (int r = ROWS; r >= 1; r--) {
		printf("%10s |", r == ROWS ? hv_human_bytes(max, a) : r == 1 ? "" : "");
		for (int i = 0; i < COLS; i++)
			putchar(max > 0 && t->total[i] >= max * (r - 0.5) / ROWS ? '#' : ' ');
		putchar('\n');
	}
	printf("%10s +", "0 B");
	for (int i = 0; i < COLS; i++) putchar('-');
	int pc = t->t1_us > t->t0_us && t->peak.time_us > t->t0_us
		 ? (int)((t->peak.time_us - t->t0_us) * COLS / (t->t1_us - t->t0_us)) : 0;
	if (pc >= COLS) pc = COLS - 1;
	printf("\n%10s  %*s^ peak %s at %.3f s\n", "", pc, "", hv_human_bytes(t->peak.bytes, a),
	       (double)(t->peak.time_us - hv_info(t->h)->start_time_us) / 1e6);
	hv_timeline_free(t);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "top", required_argument, 0, 'n' },   { "by", required_argument, 0, 'b' },
		{ "group", required_argument, 0, 'g' }, { "from", required_argument, 0, 'f' },
		{ "to", required_argument, 0, 't' },    { "frames", required_argument, 0, 'F' },
		{ "raw", no_argument, 0, 'r' },         { "lenient", no_argument, 0, 'L' },
		{ "help", no_argument, 0, 'h' },        { "wrapper", required_argument, 0, 'W' },
		{ "keep-wrappers", no_argument, 0, 'K' }, { "timeline", no_argument, 0, 'l' },
		{ 0, 0, 0, 0 },
	};
	static hv_cli_wrappers wrappers;
	hv_options opt = { .from_s = 0, .to_s = -1 };
	enum hv_group group = HV_GROUP_LINE;
	const char *group_name = "line";
	int which = 0; /* 0 the three, 1 alloc, 2 live, 3 peak */
	double top = 10, frames = 16;
	int raw = 0, timeline = 0, c;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'n': if (hv_cli_number(PROG, "--top", optarg, &top)) return 2; break;
		case 'F': if (hv_cli_number(PROG, "--frames", optarg, &frames)) return 2; break;
		case 'f': if (hv_cli_number(PROG, "--from", optarg, &opt.from_s)) return 2; break;
		case 't': if (hv_cli_number(PROG, "--to", optarg, &opt.to_s)) return 2; break;
		case 'b':
			if (!strcmp(optarg, "alloc")) which = 1;
			else if (!strcmp(optarg, "live")) which = 2;
			else if (!strcmp(optarg, "peak")) which = 3;
			else { fprintf(stderr, PROG ": --by wants alloc, peak or live, not \"%s\"\n", optarg); return 2; }
			break;
		case 'g':
			if (hv_cli_group(PROG, optarg, &group)) return 2;
			group_name = optarg;
			break;
		case 'r': raw = 1; break;
		case 'l': timeline = 1; break;
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
	hv_heap *h = hv_cli_load(PROG, argv[optind], &opt);
	if (!h) return 1;
	if (hv_cli_apply_wrappers(PROG, h, &wrappers, stdout) < 0) {
		hv_free(h);
		return 1;
	}
	const mt_trace_info *info = hv_info(h);
	const hv_counts *t = hv_total(h);
	char a[32], l[32];
	/* memtraced puts the name a program was started by in the context ("started as clang++") */
	const char *as = info->context ? strstr(info->context, "started as ") : NULL;
	int as_len = as ? (int)strcspn(as + 11, ";") : 0;
	printf("trace %s: executable %s%s%.*s%s, pid %llu, sample rate %g per word, %u-bit words\n",
	       argv[optind], info->executable_name ? info->executable_name : "?",
	       as ? " (started as " : "", as_len, as ? as + 11 : "", as ? ")" : "",
	       (unsigned long long)info->pid, info->sample_rate, info->word_size);
	printf("window: %.3f s .. %.3f s since start", opt.from_s,
	       (double)(hv_end_time_us(h) - info->start_time_us) / 1e6);
	printf("; allocated %s (~%.0f objects, %llu samples), live at the end %s (~%.0f objects)\n",
	       hv_cli_bytes(t->alloc_bytes, raw, a), t->alloc_objects,
	       (unsigned long long)t->alloc_samples, hv_cli_bytes(t->live_bytes, raw, l),
	       t->live_objects);
	hv_peak peak = hv_get_peak(h);
	double peak_s = (double)(peak.time_us - info->start_time_us) / 1e6;
	printf("peak: live %s at %.3f s since start (~%.0f objects)\n",
	       hv_cli_bytes(peak.bytes, raw, a), peak_s, peak.objects);

	int rc = timeline && print_timeline(argv[optind], &opt) < 0 ? 1 : 0;
	static const int order[] = {1, 3, 2}; /* allocated, at the peak, at the end */
	for (int i = 0; i < 3 && rc == 0; i++) {
		int pass = order[i];
		if (which && which != pass) continue;
		hv_heap *src = h;
		char when[64] = "the end";
		if (pass == 3) { /* a second pass, stopping at the peak */
			char *err = NULL;
			src = hv_load_at(argv[optind], &opt, peak.time_us, &err);
			if (!src) fprintf(stderr, PROG ": %s\n", err ? err : "cannot read trace");
			free(err);
			if (!src || hv_cli_apply_wrappers(PROG, src, &wrappers, NULL) < 0) {
				hv_free(src);
				rc = 1;
				break;
			}
			snprintf(when, sizeof when, "the peak (%.3f s)", peak_s);
		}
		hv_rows rows;
		if (hv_group_rows(src, group, pass != 1, &rows) < 0) {
			fprintf(stderr, PROG ": out of memory\n");
			rc = 1;
		} else {
			print_table(src, &rows, pass != 1, when, (size_t)top, (int)frames, raw, group_name);
			hv_rows_free(&rows);
		}
		if (src != h) hv_free(src);
	}
	hv_free(h);
	return rc;
}
