/* memtrace-timeline: the live heap over time as an SVG stacked area chart of its top sites (the
 * rest as "other"), the peak marked, both axes with units, a legend naming each site's function
 * and file:line. From a trace (hv_timeline_load: two passes), or from a directory of heap
 * snapshots (memtraced --snapshot-dir: one point per snapshot, at its time). */
#include <dirent.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "heapview_cli.h"
#include "heapview_timeline.h"

#define PROG "memtrace-timeline"
#define MAX_SNAPSHOTS 100000

static void usage(FILE *f)
{
	fputs("usage: memtrace-timeline [options] TRACE.ctf|SNAPSHOT_DIR -o OUT.svg\n"
	      "  -o, --output FILE  the SVG (\"-\" = standard output)\n"
	      "  --top N            sites drawn (default 8; the rest is \"other\")\n"
	      "  --group function|line  a site per function or per file:line (default)\n"
	      "  --from SEC, --to SEC  time window in seconds since trace start (a trace only)\n"
	      "  --width PX, --height PX  the chart's size (default 1200 x 500)\n"
	      "  --title TEXT       title of the chart\n"
	      "  --lenient          skip packets the reader skips (with a warning) instead of failing\n",
	      f);
}

/* One chart: n points at t[i] seconds, series values v[k][i] (stacked in order). */
struct chart {
	int n;
	double *t;
	int nseries;
	char **label;  /* "function" or "other" */
	char **where;  /* "file:line" or "" */
	double **v;
	double peak_t, peak_bytes;
	int have_peak;
};

static void chart_free(struct chart *c)
{
	for (int k = 0; k < c->nseries; k++) {
		if (c->label) free(c->label[k]);
		if (c->where) free(c->where[k]);
		if (c->v) free(c->v[k]);
	}
	free(c->label);
	free(c->where);
	free(c->v);
	free(c->t);
}

static void xml(FILE *o, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", o); break;
		case '>': fputs("&gt;", o); break;
		case '&': fputs("&amp;", o); break;
		case '"': fputs("&quot;", o); break;
		default: fputc(*s, o);
		}
	}
}

/* A "nice" step (1, 2 or 5 x 10^k, or powers of 1024 for bytes) for about want ticks. */
static double nice_step(double span, int want, int bytes)
{
	if (span <= 0) return 1;
	double raw = span / want;
	if (bytes) {
		double unit = 1;
		while (unit * 1024 <= raw) unit *= 1024;
		double r = raw / unit;
		double m = r <= 1 ? 1 : r <= 2 ? 2 : r <= 4 ? 4 : r <= 8 ? 8 : r <= 16 ? 16 : r <= 32 ? 32
			 : r <= 64 ? 64 : r <= 128 ? 128 : r <= 256 ? 256 : 512;
		return m * unit;
	}
	double p = pow(10, floor(log10(raw)));
	double r = raw / p;
	return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * p;
}

static const char *const colors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
				     "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

static void draw(FILE *o, const struct chart *c, int width, int height, const char *title)
{
	const int ml = 90, mr = 30, mt = 50, mb = 50, row = 20;
	int legend = (c->nseries + 1) * row + 10;
	double pw = width - ml - mr, ph = height - mt - mb;
	double tmax = c->n ? c->t[c->n - 1] : 1, ymax = 0;
	if (tmax <= 0) tmax = 1;
	for (int i = 0; i < c->n; i++) {
		double s = 0;
		for (int k = 0; k < c->nseries; k++) s += c->v[k][i];
		if (s > ymax) ymax = s;
	}
	if (c->have_peak && c->peak_bytes > ymax) ymax = c->peak_bytes;
	if (ymax <= 0) ymax = 1;
	double ystep = nice_step(ymax, 5, 1), tstep = nice_step(tmax, 10, 0);
	ymax = ceil(ymax / ystep) * ystep;
#define X(t) (ml + (t) / tmax * pw)
#define Y(b) (mt + ph - (b) / ymax * ph)
	fprintf(o, "<?xml version=\"1.0\" standalone=\"no\"?>\n"
		   "<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		   "xmlns=\"http://www.w3.org/2000/svg\" font-family=\"Verdana, sans-serif\" "
		   "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
		width, height + legend, width, height + legend);
	fprintf(o, "<text x=\"%d\" y=\"24\" font-size=\"16\" text-anchor=\"middle\">", width / 2);
	xml(o, title);
	fputs("</text>\n", o);
	/* stacked areas, bottom first */
	double *base = calloc((size_t)(c->n ? c->n : 1), sizeof *base);
	for (int k = 0; base && k < c->nseries; k++) {
		fprintf(o, "<path class=\"series\" data-series=\"%d\" fill=\"%s\" fill-opacity=\"0.85\" "
			   "stroke=\"none\" d=\"", k, colors[k % 10]);
		for (int i = 0; i < c->n; i++)
			fprintf(o, "%s%.1f,%.1f ", i ? "L" : "M", X(c->t[i]), Y(base[i] + c->v[k][i]));
		for (int i = c->n - 1; i >= 0; i--) fprintf(o, "L%.1f,%.1f ", X(c->t[i]), Y(base[i]));
		fputs("Z\"/>\n", o);
		for (int i = 0; i < c->n; i++) base[i] += c->v[k][i];
	}
	free(base);
	/* axes, ticks and their units */
	fprintf(o, "<g stroke=\"#333\"><line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
		   "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%.1f\"/></g>\n",
		ml, mt + ph, ml + pw, mt + ph, ml, mt, ml, mt + ph);
	char buf[32];
	for (double y = 0; y <= ymax + ystep / 2; y += ystep)
		fprintf(o, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
			   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
			ml, Y(y), ml + pw, Y(y), ml - 6, Y(y) + 4, hv_human_bytes(y, buf));
	for (double t = 0; t <= tmax + tstep / 2; t += tstep)
		fprintf(o, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>"
			   "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g s</text>\n",
			X(t), mt + ph, X(t), mt + ph + 5, X(t), mt + ph + 20, t);
	fprintf(o, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">time since start (s)</text>\n",
		ml + pw / 2, height - 8);
	fprintf(o, "<text x=\"16\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 16 %.1f)\">"
		   "live bytes (estimated)</text>\n", mt + ph / 2, mt + ph / 2);
	if (c->have_peak) {
		fprintf(o, "<g class=\"peak\"><line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%.1f\" "
			   "stroke=\"#c00\" stroke-dasharray=\"4,3\"/><circle cx=\"%.1f\" cy=\"%.1f\" "
			   "r=\"4\" fill=\"#c00\"/><text x=\"%.1f\" y=\"%d\" fill=\"#c00\" "
			   "text-anchor=\"%s\">peak %s at %.3f s</text></g>\n",
			X(c->peak_t), mt, X(c->peak_t), mt + ph, X(c->peak_t), Y(c->peak_bytes),
			X(c->peak_t) + (X(c->peak_t) > ml + pw * 0.7 ? -6 : 6), mt + 12,
			X(c->peak_t) > ml + pw * 0.7 ? "end" : "start",
			hv_human_bytes(c->peak_bytes, buf), c->peak_t);
	}
	/* the legend: the top of the stack first */
	for (int k = c->nseries - 1, r = 0; k >= 0; k--, r++) {
		double y = height + r * row;
		fprintf(o, "<g class=\"legend\"><rect x=\"%d\" y=\"%.1f\" width=\"14\" height=\"14\" "
			   "fill=\"%s\"/><text x=\"%d\" y=\"%.1f\">", ml, y, colors[k % 10], ml + 20, y + 12);
		xml(o, c->label[k]);
		if (c->where[k][0]) {
			fputs(" (", o);
			xml(o, c->where[k]);
			fputc(')', o);
		}
		fputs("</text></g>\n", o);
	}
	fputs("</svg>\n", o);
#undef X
#undef Y
}

/* The site's function and file:line from a context of h. */
static void names_of(const hv_heap *h, uint32_t ctx, const char *key, char **label, char **where)
{
	const mt_location *l;
	int n = hv_lookup(h, hv_context_code(h, hv_site_context(h, ctx)), &l);
	char w[600] = "";
	if (n > 0 && l[n - 1].line)
		snprintf(w, sizeof w, "%s:%u", hv_filename(&l[n - 1]), l[n - 1].line);
	else if (n > 0)
		snprintf(w, sizeof w, "%s", hv_filename(&l[n - 1]));
	*label = strdup(n > 0 ? hv_defname(&l[n - 1]) : key);
	*where = strdup(w);
}

static int chart_from_trace(const char *path, const hv_options *opt, int top, enum hv_group g,
			    int width, struct chart *c)
{
	char *err = NULL;
	hv_timeline *t = hv_timeline_load(path, opt, width > 200 ? width - 120 : 100, g, top, NULL,
					  0, 0, &err);
	if (!t) {
		fprintf(stderr, PROG ": %s\n", err ? err : "cannot read trace");
		free(err);
		return -1;
	}
	double span = (double)(t->t1_us - t->t0_us) / 1e6;
	c->n = t->nbuckets + 1;
	c->t = malloc((size_t)c->n * sizeof *c->t);
	c->nseries = t->nseries;
	c->label = calloc((size_t)t->nseries + 1, sizeof *c->label);
	c->where = calloc((size_t)t->nseries + 1, sizeof *c->where);
	c->v = calloc((size_t)t->nseries + 1, sizeof *c->v);
	if (!c->t || !c->label || !c->where || !c->v) return -1;
	double from = (double)(t->t0_us - hv_info(t->h)->start_time_us) / 1e6;
	c->t[0] = from; /* nothing live before the window */
	for (int i = 0; i < t->nbuckets; i++)
		c->t[i + 1] = (double)(t->ends[i] - hv_info(t->h)->start_time_us) / 1e6;
	(void)span;
	/* the stack: "other" at the bottom, then the sites from the smallest up */
	for (int k = 0; k < t->nseries; k++) {
		int s = t->nseries - 1 - k;
		const hv_series *se = &t->series[s];
		if (se->key) names_of(t->h, se->ctx, se->key, &c->label[k], &c->where[k]);
		else {
			c->label[k] = strdup("other");
			c->where[k] = strdup("");
		}
		c->v[k] = calloc((size_t)c->n, sizeof(double));
		if (!c->v[k]) return -1;
		for (int i = 0; i < t->nbuckets; i++) c->v[k][i + 1] = se->live[i];
	}
	c->have_peak = 1;
	c->peak_t = (double)(t->peak.time_us - hv_info(t->h)->start_time_us) / 1e6;
	c->peak_bytes = t->peak.bytes;
	hv_timeline_free(t);
	return 0;
}

/* A snapshot's time: the context's "heap snapshot N at T us" (memtraced), else its start. */
static uint64_t snapshot_time(const mt_trace_info *info)
{
	const char *at = info->context ? strstr(info->context, "heap snapshot ") : NULL;
	unsigned long long seq, us;
	if (at && sscanf(at, "heap snapshot %llu at %llu us", &seq, &us) == 2) return us;
	return info->start_time_us;
}

struct snap { char *path; uint64_t t; };

static int chart_from_dir(const char *dir, const hv_options *opt, int top, enum hv_group g,
			  struct chart *c)
{
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, PROG ": %s: cannot list it\n", dir);
		return -1;
	}
	struct snap *s = NULL;
	size_t n = 0, cap = 0;
	for (struct dirent *e; (e = readdir(d)) && n < MAX_SNAPSHOTS;) {
		size_t len = strlen(e->d_name);
		if (len < 5 || strcmp(e->d_name + len - 4, ".ctf") != 0) continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			struct snap *g2 = realloc(s, cap * sizeof *s);
			if (!g2) break;
			s = g2;
		}
		if (asprintf(&s[n].path, "%s/%s", dir, e->d_name) < 0) break;
		s[n++].t = 0;
	}
	closedir(d);
	/* every snapshot: its live bytes per key */
	char **keys = NULL, **labels = NULL, **wheres = NULL;
	double **vals = NULL, *maxv = NULL;
	size_t nkeys = 0, kcap = 0, good = 0;
	for (size_t i = 0; i < n; i++) {
		char *err = NULL;
		hv_heap *h = hv_load(s[i].path, opt, &err);
		if (!h) {
			fprintf(stderr, PROG ": %s (left out)\n", err ? err : s[i].path);
			free(err);
			continue;
		}
		hv_apply_wrappers(h, NULL, 0, 0, NULL);
		s[good].t = snapshot_time(hv_info(h));
		hv_rows rows;
		if (hv_group_rows(h, g, 1, &rows) == 0) {
			for (size_t r = 0; r < rows.n; r++) {
				size_t k = 0;
				while (k < nkeys && strcmp(keys[k], rows.rows[r].key)) k++;
				if (k == nkeys) {
					if (nkeys == kcap) {
						kcap = kcap ? 2 * kcap : 64;
						keys = realloc(keys, kcap * sizeof *keys);
						labels = realloc(labels, kcap * sizeof *labels);
						wheres = realloc(wheres, kcap * sizeof *wheres);
						vals = realloc(vals, kcap * sizeof *vals);
						maxv = realloc(maxv, kcap * sizeof *maxv);
						if (!keys || !labels || !wheres || !vals || !maxv) return -1;
					}
					keys[k] = strdup(rows.rows[r].key);
					names_of(h, rows.rows[r].heaviest_ctx, keys[k], &labels[k], &wheres[k]);
					vals[k] = calloc(n, sizeof(double));
					maxv[k] = 0;
					nkeys++;
				}
				vals[k][good] = rows.rows[r].counts.live_bytes;
				if (vals[k][good] > maxv[k]) maxv[k] = vals[k][good];
			}
			hv_rows_free(&rows);
		}
		hv_free(h);
		good++;
	}
	if (!good) {
		fprintf(stderr, PROG ": %s: no snapshot (*.ctf) could be read\n", dir);
		return -1;
	}
	/* points by time; keys by their highest value; the rest as "other" */
	size_t *order = malloc(good * sizeof *order);
	for (size_t i = 0; i < good; i++) order[i] = i;
	for (size_t i = 1; i < good; i++) /* insertion sort by time (few points) */
		for (size_t j = i; j > 0 && s[order[j]].t < s[order[j - 1]].t; j--) {
			size_t x = order[j];
			order[j] = order[j - 1];
			order[j - 1] = x;
		}
	size_t *korder = malloc((nkeys ? nkeys : 1) * sizeof *korder);
	for (size_t k = 0; k < nkeys; k++) korder[k] = k;
	for (size_t i = 1; i < nkeys; i++)
		for (size_t j = i; j > 0 && maxv[korder[j]] > maxv[korder[j - 1]]; j--) {
			size_t x = korder[j];
			korder[j] = korder[j - 1];
			korder[j - 1] = x;
		}
	int shown = (int)nkeys < top ? (int)nkeys : top;
	int other = (int)nkeys > top;
	c->n = (int)good;
	c->nseries = shown + other;
	c->t = malloc(good * sizeof *c->t);
	c->label = calloc((size_t)c->nseries + 1, sizeof *c->label);
	c->where = calloc((size_t)c->nseries + 1, sizeof *c->where);
	c->v = calloc((size_t)c->nseries + 1, sizeof *c->v);
	uint64_t t0 = s[order[0]].t;
	for (size_t i = 0; i < good; i++) c->t[i] = (double)(s[order[i]].t - t0) / 1e6;
	int k = 0;
	if (other) {
		c->label[k] = strdup("other");
		c->where[k] = strdup("");
		c->v[k] = calloc(good, sizeof(double));
		for (size_t q = (size_t)top; q < nkeys; q++)
			for (size_t i = 0; i < good; i++) c->v[k][i] += vals[korder[q]][order[i]];
		k++;
	}
	for (int q = shown - 1; q >= 0; q--, k++) {
		c->label[k] = labels[korder[q]];
		c->where[k] = wheres[korder[q]];
		c->v[k] = calloc(good, sizeof(double));
		for (size_t i = 0; i < good; i++) c->v[k][i] = vals[korder[q]][order[i]];
	}
	/* the peak: the snapshot with the most live bytes */
	for (size_t i = 0; i < good; i++) {
		double tot = 0;
		for (int q = 0; q < c->nseries; q++) tot += c->v[q][i];
		if (tot > c->peak_bytes) {
			c->peak_bytes = tot;
			c->peak_t = c->t[i];
			c->have_peak = 1;
		}
	}
	/* the names of the sites shown went to the chart; the rest goes */
	for (size_t q = 0; q < nkeys; q++) {
		int shown_q = 0;
		for (int r = 0; r < shown; r++) shown_q |= korder[r] == q;
		if (!shown_q) {
			free(labels[q]);
			free(wheres[q]);
		}
		free(keys[q]);
		free(vals[q]);
	}
	for (size_t i = 0; i < n; i++) free(s[i].path);
	free(keys);
	free(labels);
	free(wheres);
	free(vals);
	free(maxv);
	free(order);
	free(korder);
	free(s);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, 0, 'o' }, { "top", required_argument, 0, 'n' },
		{ "group", required_argument, 0, 'g' },  { "from", required_argument, 0, 'f' },
		{ "to", required_argument, 0, 't' },     { "width", required_argument, 0, 'W' },
		{ "height", required_argument, 0, 'H' }, { "title", required_argument, 0, 'T' },
		{ "lenient", no_argument, 0, 'L' },      { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	hv_options opt = { .from_s = 0, .to_s = -1 };
	enum hv_group group = HV_GROUP_LINE;
	double top = 8, width = 1200, height = 500;
	const char *output = NULL, *title = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'o': output = optarg; break;
		case 'n': if (hv_cli_number(PROG, "--top", optarg, &top)) return 2; break;
		case 'g':
			if (hv_cli_group(PROG, optarg, &group)) return 2;
			if (group == HV_GROUP_STACK) {
				fprintf(stderr, PROG ": --group wants function or line\n");
				return 2;
			}
			break;
		case 'f': if (hv_cli_number(PROG, "--from", optarg, &opt.from_s)) return 2; break;
		case 't': if (hv_cli_number(PROG, "--to", optarg, &opt.to_s)) return 2; break;
		case 'W': if (hv_cli_number(PROG, "--width", optarg, &width)) return 2; break;
		case 'H': if (hv_cli_number(PROG, "--height", optarg, &height)) return 2; break;
		case 'T': title = optarg; break;
		case 'L': opt.lenient = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (hv_cli_operands(PROG, argc - optind, 1, "one trace file or snapshot directory", usage) < 0 ||
	    hv_cli_window(PROG, &opt) < 0)
		return 2;
	if (width < 300 || height < 200 || width > 20000 || height > 20000 || top > 100) {
		fprintf(stderr, PROG ": --width 300..20000, --height 200..20000 and --top up to 100\n");
		return 2;
	}
	if (!output && isatty(STDOUT_FILENO)) {
		fprintf(stderr, PROG ": standard output is a terminal: give -o OUT.svg\n");
		return 2;
	}
	const char *path = argv[optind];
	struct stat st;
	if (stat(path, &st) != 0) {
		fprintf(stderr, PROG ": %s: no such file or directory\n", path);
		return 1;
	}
	struct chart ch = { 0 };
	int dir = S_ISDIR(st.st_mode);
	if ((dir ? chart_from_dir(path, &opt, (int)top, group, &ch)
		 : chart_from_trace(path, &opt, (int)top, group, (int)width, &ch)) < 0)
		return 1;
	FILE *o = hv_cli_open_output(PROG, output, "-o OUT.svg");
	if (!o) return 1;
	char def[600];
	snprintf(def, sizeof def, "live heap over time: %s", path);
	draw(o, &ch, (int)width, (int)height, title ? title : def);
	chart_free(&ch);
	return hv_cli_close_output(PROG, o, output) < 0 ? 1 : 0;
}
