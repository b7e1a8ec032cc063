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

/* Contexts too small to be seen in a 1100-pixel flame graph at any moment (their subtree's
 * allocated bytes and an upper bound of its live bytes under 1/PRUNE of the totals) are folded
 * into their nearest ancestor that is not: a big trace's page stays a few MB. */
#define PRUNE 4000

struct pruned {
	uint32_t *id;      /* per context: its number in the page, or that of the ancestor it is folded into */
	uint32_t *keep;    /* the contexts kept, in order (parents first) */
	uint32_t nkeep;
	double *alloc;     /* per kept context: its allocated bytes with what was folded into it */
	hv_change *changes; /* by kept context, then bucket */
	size_t nchanges;
};

static int by_ctx_bucket(const void *a, const void *b)
{
	const hv_change *x = a, *y = b;
	if (x->ctx != y->ctx) return x->ctx < y->ctx ? -1 : 1;
	return x->bucket < y->bucket ? -1 : x->bucket > y->bucket;
}

static int prune(const hv_timeline *t, struct pruned *p)
{
	const hv_heap *h = t->h;
	uint32_t n = hv_context_count(h);
	double *asub = calloc(n, sizeof *asub), *lsub = calloc(n, sizeof *lsub);
	p->id = malloc(n * sizeof *p->id);
	p->keep = malloc(n * sizeof *p->keep);
	p->alloc = calloc(n, sizeof *p->alloc);
	p->changes = malloc((t->nchanges ? t->nchanges : 1) * sizeof *p->changes);
	if (!asub || !lsub || !p->id || !p->keep || !p->alloc || !p->changes) {
		free(asub);
		free(lsub);
		return -1;
	}
	for (uint32_t c = 0; c < n; c++) asub[c] = hv_context_counts(h, c)->alloc_bytes;
	for (size_t i = 0; i < t->nchanges;) { /* each context's highest live bytes */
		uint32_t ctx = t->changes[i].ctx;
		double live = 0, max = 0;
		for (; i < t->nchanges && t->changes[i].ctx == ctx; i++) {
			live += t->changes[i].bytes;
			if (live > max) max = live;
		}
		if (ctx < n) lsub[ctx] = max;
	}
	for (uint32_t c = n; c-- > 1;) { /* (a context comes after its parent) */
		uint32_t parent = hv_context_parent(h, c);
		asub[parent] += asub[c];
		lsub[parent] += lsub[c];
	}
	double ta = asub[0] / PRUNE, tl = (t->peak.bytes > 0 ? t->peak.bytes : lsub[0]) / PRUNE;
	p->nkeep = 0;
	for (uint32_t c = 0; c < n; c++) {
		if (c == 0 || asub[c] >= ta || lsub[c] >= tl) {
			p->id[c] = p->nkeep;
			p->keep[p->nkeep++] = c;
		} else p->id[c] = p->id[hv_context_parent(h, c)];
		p->alloc[p->id[c]] += hv_context_counts(h, c)->alloc_bytes;
	}
	free(asub);
	free(lsub);
	/* the changes of folded contexts summed into their kept ancestor's */
	for (size_t i = 0; i < t->nchanges; i++) {
		p->changes[i] = t->changes[i];
		p->changes[i].ctx = t->changes[i].ctx < n ? p->id[t->changes[i].ctx] : 0;
	}
	qsort(p->changes, t->nchanges, sizeof *p->changes, by_ctx_bucket);
	size_t m = 0;
	for (size_t i = 0; i < t->nchanges; i++) {
		if (m && p->changes[m - 1].ctx == p->changes[i].ctx &&
		    p->changes[m - 1].bucket == p->changes[i].bucket)
			p->changes[m - 1].bytes += p->changes[i].bytes;
		else p->changes[m++] = p->changes[i];
	}
	p->nchanges = m;
	return 0;
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
	/* the call-context trie, small contexts folded: [parent, name, where, allocated, site] */
	struct pruned p = {0};
	if (prune(t, &p) < 0) { /* out of memory: no flame graphs, the rest is there */
		fputs("],\"nodes\":[[-1,\"all\",\"\",0,0]],\"live\":[]}", o);
		goto out;
	}
	fputs("],\"nodes\":[", o);
	for (uint32_t k = 0; k < p.nkeep; k++) {
		uint32_t c = p.keep[k];
		const char *name;
		frame_names(h, c, &name, where, sizeof where);
		fprintf(o, "%s[%d,", k ? "," : "", k ? (int)p.id[hv_context_parent(h, c)] : -1);
		js(o, name);
		fputc(',', o);
		js(o, where);
		fprintf(o, ",%.0f,%u]", p.alloc[k], p.id[hv_site_context(h, c)]);
	}
	/* per context: [ctx, bucket, live after it, bucket, live after it...] */
	fputs("],\"live\":[", o);
	int first = 1;
	for (size_t i = 0; i < p.nchanges;) {
		uint32_t ctx = p.changes[i].ctx;
		double live = 0;
		fprintf(o, "%s[%u", first ? "" : ",", ctx);
		first = 0;
		for (; i < p.nchanges && p.changes[i].ctx == ctx; i++) {
			live += p.changes[i].bytes;
			fprintf(o, ",%u,%.0f", p.changes[i].bucket, live < 0.5 ? 0 : live);
		}
		fputc(']', o);
	}
	fputs("]}", o);
out:
	free(p.id);
	free(p.keep);
	free(p.alloc);
	free(p.changes);
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
	FILE *o = hv_cli_open_output(PROG, output, "-o REPORT.html");
	if (!o) {
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
	return hv_cli_close_output(PROG, o, output) < 0 ? 1 : 0;
}
