/* memtrace-html: one self-contained page (no network, no server) to look at a trace: the live
 * heap over time (click a moment; the peak is selected first), a flame graph of what was live
 * at that moment and one of all allocations, the top sites at that moment (sortable), a search
 * box that highlights a function. The C side aggregates (per time bucket, per call context:
 * heapview_timeline.c); the page never replays events. The page's script is ours (html_page.h):
 * no library. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "heapview_cli.h"
#include "heapview_timeline.h"
#include "html_page.h"

#define PROG "memtrace-html"
#define BUCKETS 400

static void usage(FILE *f)
{
	fputs("usage: memtrace-html [options] TRACE.ctf -o REPORT.html\n"
	      "  -o, --output FILE  the page (\"-\" = standard output)\n"
	      "  --from SEC, --to SEC  time window in seconds since trace start\n"
	      "  --title TEXT       the page's title\n"
	      "  --lenient          skip packets the reader skips (with a warning) instead of failing\n",
	      f);
}

/* A JSON string (quotes included); "</" is written "<\/" so that no text ends the script. */
static void js(FILE *o, const char *s)
{
	fputc('"', o);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\') fprintf(o, "\\%c", *p);
		else if (*p == '/' && p > (const unsigned char *)s && p[-1] == '<') fputs("\\/", o);
		else if (*p < 0x20) fprintf(o, "\\u%04x", *p);
		else fputc(*p, o);
	}
	fputc('"', o);
}

/* The frame a context adds: its innermost function and file:line. */
static void frame_names(const hv_heap *h, uint32_t ctx, const char **name, char *where, size_t len)
{
	const mt_location *l;
	int n = ctx ? hv_lookup(h, hv_context_code(h, ctx), &l) : 0;
	*name = n > 0 ? hv_defname(&l[n - 1]) : "all";
	where[0] = '\0';
	if (n > 0 && l[n - 1].line) snprintf(where, len, "%s:%u", hv_filename(&l[n - 1]), l[n - 1].line);
	else if (n > 0) snprintf(where, len, "%s", hv_filename(&l[n - 1]));
}

static void data(FILE *o, const hv_timeline *t, const char *title)
{
	const hv_heap *h = t->h;
	const mt_trace_info *info = hv_info(h);
	double start = (double)info->start_time_us;
	char where[600];
	fputs("{\"title\":", o);
	js(o, title);
	fprintf(o, ",\"t0\":%.6f,\"t1\":%.6f,\"nb\":%d", (t->t0_us - start) / 1e6,
		(t->t1_us - start) / 1e6, t->nbuckets);
	fprintf(o, ",\"peak\":{\"t\":%.6f,\"bytes\":%.0f,\"bucket\":%d}",
		(t->peak.time_us - start) / 1e6, t->peak.bytes, t->peak_bucket);
	fputs(",\"ends\":[", o); /* each bucket's end, s: one ends at the peak */
	for (int b = 0; b < t->nbuckets; b++) fprintf(o, "%s%.6f", b ? "," : "", (t->ends[b] - start) / 1e6);
	fputc(']', o);
	fputs(",\"series\":[", o);
	for (int k = 0; k < t->nseries; k++) {
		const char *name = "other";
		where[0] = '\0';
		if (t->series[k].key)
			frame_names(h, hv_site_context(h, t->series[k].ctx), &name, where, sizeof where);
		fprintf(o, "%s{\"name\":", k ? "," : "");
		js(o, name);
		fputs(",\"where\":", o);
		js(o, where);
		fputs(",\"live\":[", o);
		for (int b = 0; b < t->nbuckets; b++) fprintf(o, "%s%.0f", b ? "," : "", t->series[k].live[b]);
		fputs("]}", o);
	}
	/* the call-context trie: [parent, name, where, allocated bytes, site] per context */
	uint32_t n = hv_context_count(h);
	fputs("],\"nodes\":[", o);
	for (uint32_t c = 0; c < n; c++) {
		const char *name;
		frame_names(h, c, &name, where, sizeof where);
		fprintf(o, "%s[%d,", c ? "," : "", c ? (int)hv_context_parent(h, c) : -1);
		js(o, name);
		fputc(',', o);
		js(o, where);
		fprintf(o, ",%.0f,%u]", hv_context_counts(h, c)->alloc_bytes, hv_site_context(h, c));
	}
	/* per context: [ctx, bucket, live after it, bucket, live after it...] */
	fputs("],\"live\":[", o);
	int first = 1;
	for (size_t i = 0; i < t->nchanges;) {
		uint32_t ctx = t->changes[i].ctx;
		double live = 0;
		fprintf(o, "%s[%u", first ? "" : ",", ctx);
		first = 0;
		for (; i < t->nchanges && t->changes[i].ctx == ctx; i++) {
			live += t->changes[i].bytes;
			fprintf(o, ",%u,%.0f", t->changes[i].bucket, live < 0.5 ? 0 : live);
		}
		fputc(']', o);
	}
	fputs("]}", o);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, 0, 'o' }, { "from", required_argument, 0, 'f' },
		{ "to", required_argument, 0, 't' },     { "title", required_argument, 0, 'T' },
		{ "lenient", no_argument, 0, 'L' },      { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	hv_options opt = { .from_s = 0, .to_s = -1 };
	const char *output = NULL, *title = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'o': output = optarg; break;
		case 'f': if (hv_cli_number(PROG, "--from", optarg, &opt.from_s)) return 2; break;
		case 't': if (hv_cli_number(PROG, "--to", optarg, &opt.to_s)) return 2; break;
		case 'T': title = optarg; break;
		case 'L': opt.lenient = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (hv_cli_operands(PROG, argc - optind, 1, "one trace file", usage) < 0 ||
	    hv_cli_window(PROG, &opt) < 0)
		return 2;
	if (!output && isatty(STDOUT_FILENO)) {
		fprintf(stderr, PROG ": standard output is a terminal: give -o REPORT.html\n");
		return 2;
	}
	char *err = NULL;
	hv_timeline *t = hv_timeline_load_changes(argv[optind], &opt, BUCKETS, HV_GROUP_FUNCTION, 8, &err);
	if (!t) {
		fprintf(stderr, PROG ": %s\n", err ? err : "cannot read trace");
		free(err);
		return 1;
	}
	FILE *o = !output || strcmp(output, "-") == 0 ? stdout : fopen(output, "w");
	if (!o) {
		fprintf(stderr, PROG ": %s: cannot write it\n", output);
		hv_timeline_free(t);
		return 1;
	}
	char def[600];
	snprintf(def, sizeof def, "memtrace: %s", argv[optind]);
	fputs(html_page_head, o);
	fputs("<script id=\"data\" type=\"application/json\">", o);
	data(o, t, title ? title : def);
	fputs("</script>\n", o);
	fputs(html_page_tail, o);
	hv_timeline_free(t);
	if (o != stdout && fclose(o) != 0) {
		fprintf(stderr, PROG ": %s: write failed\n", output);
		return 1;
	}
	return 0;
}
