/* memtrace-flamegraph: estimated bytes per call context of a trace, as a self-contained
 * interactive SVG flame graph (hover, click to zoom, search), or as collapsed stacks
 * ("frame;frame;frame bytes") for flamegraph.pl, inferno and speedscope. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "heapview_cli.h"
#include "slot_index.h"

#define PROG "memtrace-flamegraph"

/* One frame of the flame graph: contexts merged by their frame labels from the root. Inlined
 * source locations are frames of their own, marked inlined. */
typedef struct fnode {
	uint32_t parent, depth;
	char *label;
	const char *file; /* of the first location merged here; line 0 = several lines */
	uint32_t line;
	int inlined;
	double self, total, x;
	uint32_t first_child, nchildren; /* into the sorted children array */
} fnode;

typedef struct flame {
	fnode *n;
	uint32_t len, cap;
	mt_slot_index by_label; /* (parent, label, inlined) -> node */
	uint32_t *children;
	uint32_t max_depth;
} flame;

static void die_oom(void)
{
	fprintf(stderr, PROG ": out of memory\n");
	exit(1);
}

static uint64_t label_hash(uint32_t parent, const char *s, int inlined)
{
	return mt_mix64(mt_fnv1a_str(s) ^ (parent * 0x9E3779B97F4A7C15ULL) ^ (uint64_t)inlined);
}

static uint64_t fnode_hash(const void *ctx, uint32_t i)
{
	const fnode *n = &((const flame *)ctx)->n[i];
	return label_hash(n->parent, n->label, n->inlined);
}

static uint32_t flame_add(flame *f, uint32_t parent, const char *label, int inlined)
{
	if (f->len == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 1024;
		f->n = realloc(f->n, f->cap * sizeof *f->n);
		if (!f->n) die_oom();
	}
	fnode *n = &f->n[f->len];
	memset(n, 0, sizeof *n);
	n->parent = parent;
	n->depth = parent == UINT32_MAX ? 0 : f->n[parent].depth + 1;
	n->label = strdup(label);
	n->inlined = inlined;
	if (!n->label) die_oom();
	if (n->depth > f->max_depth) f->max_depth = n->depth;
	return f->len++;
}

static uint32_t flame_child(flame *f, uint32_t parent, const char *label, int inlined)
{
	mt_slot_index *ix = &f->by_label;
	if (mt_slot_reserve(ix, f->len, 1024, fnode_hash, f) < 0) die_oom();
	size_t j = mt_slot_first(ix, label_hash(parent, label, inlined));
	for (; ix->slots[j]; j = mt_slot_next(ix, j)) {
		const fnode *n = &f->n[ix->slots[j] - 1];
		if (n->parent == parent && n->inlined == inlined && !strcmp(n->label, label))
			return ix->slots[j] - 1;
	}
	uint32_t i = flame_add(f, parent, label, inlined);
	ix->slots[j] = i + 1;
	return i;
}

/* Frame label: the function; with --lines also its file:line. Characters that would break
 * the collapsed format (';' separates frames, newline ends the record) are replaced. */
static char *frame_label(const mt_location *loc, int with_lines, char *buf, size_t size)
{
	if (with_lines) snprintf(buf, size, "%s (%s:%u)", hv_defname(loc), hv_filename(loc), loc->line);
	else snprintf(buf, size, "%s", hv_defname(loc));
	for (char *p = buf; *p; p++)
		if (*p == ';') *p = ',';
		else if (*p == '\n' || *p == '\r') *p = ' ';
	return buf;
}

static flame *sort_flame_g;
static int cmp_child(const void *a, const void *b)
{
	const fnode *x = &sort_flame_g->n[*(const uint32_t *)a], *y = &sort_flame_g->n[*(const uint32_t *)b];
	int c = strcmp(x->label, y->label);
	return c ? c : x->inlined - y->inlined;
}

static void build_flame(const hv_heap *h, flame *f, int live, int with_lines)
{
	uint32_t nctx = hv_context_count(h);
	uint32_t *flame_of = malloc((size_t)nctx * sizeof *flame_of);
	if (!flame_of) die_oom();
	flame_add(f, UINT32_MAX, "all", 0);
	char buf[1024];
	/* trie parents come before their children, so one pass in index order suffices */
	for (uint32_t c = 0; c < nctx; c++) {
		uint32_t at = 0;
		if (c > 0) {
			at = flame_of[hv_context_parent(h, c)];
			const mt_location *locs;
			int n = hv_lookup(h, hv_context_code(h, c), &locs);
			if (n <= 0) {
				snprintf(buf, sizeof buf, "<noloc %#llx>", (unsigned long long)hv_context_code(h, c));
				at = flame_child(f, at, buf, 0);
			}
			for (int i = 0; i < n; i++) {
				uint32_t before = f->len;
				at = flame_child(f, at, frame_label(&locs[i], with_lines, buf, sizeof buf), i > 0);
				fnode *fn = &f->n[at];
				if (f->len != before) {
					fn->file = hv_filename(&locs[i]);
					fn->line = locs[i].line;
				} else if (fn->line != locs[i].line || strcmp(fn->file, hv_filename(&locs[i]))) {
					fn->line = 0;
				}
			}
		}
		flame_of[c] = at;
		const hv_counts *cc = hv_context_counts(h, c);
		f->n[at].self += live ? cc->live_bytes : cc->alloc_bytes;
	}
	free(flame_of);
	for (uint32_t i = 0; i < f->len; i++) f->n[i].total = f->n[i].self > 0 ? f->n[i].self : 0;
	for (uint32_t i = f->len; i-- > 1;) f->n[f->n[i].parent].total += f->n[i].total;

	/* children, sorted by label, laid out left to right from their parent's x */
	f->children = malloc((size_t)f->len * sizeof *f->children);
	if (!f->children) die_oom();
	for (uint32_t i = 1; i < f->len; i++) f->n[f->n[i].parent].nchildren++;
	uint32_t pos = 0;
	for (uint32_t i = 0; i < f->len; i++) {
		f->n[i].first_child = pos;
		pos += f->n[i].nchildren;
		f->n[i].nchildren = 0;
	}
	for (uint32_t i = 1; i < f->len; i++) {
		fnode *p = &f->n[f->n[i].parent];
		f->children[p->first_child + p->nchildren++] = i;
	}
	sort_flame_g = f;
	for (uint32_t i = 0; i < f->len; i++) {
		fnode *p = &f->n[i];
		qsort(f->children + p->first_child, p->nchildren, sizeof *f->children, cmp_child);
		double x = p->x;
		for (uint32_t k = 0; k < p->nchildren; k++) {
			fnode *ch = &f->n[f->children[p->first_child + k]];
			ch->x = x;
			x += ch->total;
		}
	}
}

static void flame_free(flame *f)
{
	for (uint32_t i = 0; i < f->len; i++) free(f->n[i].label);
	free(f->n);
	mt_slot_free(&f->by_label);
	free(f->children);
}

/* ---------------------------------------------------------------- collapsed stacks */

static int write_folded(FILE *out, const flame *f)
{
	uint32_t *path = malloc((size_t)(f->max_depth + 1) * sizeof *path);
	if (!path) die_oom();
	for (uint32_t i = 1; i < f->len; i++) {
		long long v = llround(f->n[i].self);
		if (v <= 0) continue;
		uint32_t d = 0;
		for (uint32_t c = i; c != 0; c = f->n[c].parent) path[d++] = c;
		for (uint32_t k = d; k-- > 0;) {
			fputs(f->n[path[k]].label, out);
			fputc(k ? ';' : ' ', out);
		}
		fprintf(out, "%lld\n", v);
	}
	free(path);
	return ferror(out) ? -1 : 0;
}

/* ---------------------------------------------------------------- SVG */

#define SVG_WIDTH 1200
#define FRAME_H 16
#define PAD_TOP 44
#define PAD_BOTTOM 28
#define PAD_SIDE 10
#define MIN_FRAME_PX 0.1 /* narrower frames (and their children) are left out */

static void xml_escape(FILE *out, const char *s)
{
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		switch (ch) {
		case '&': fputs("&amp;", out); break;
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '"': fputs("&quot;", out); break;
		case '\'': fputs("&apos;", out); break;
		default:
			if (ch < 0x20) fputc(' ', out); /* not allowed in XML 1.0 */
			else fputc(ch, out);
		}
	}
}

/* Warm colours for functions, cool ones for inlined frames; stable per name. */
static void frame_colour(const fnode *n, char *buf)
{
	uint32_t hsh = 2166136261u;
	for (const char *s = n->label; *s; s++) hsh = (hsh ^ (unsigned char)*s) * 16777619u;
	unsigned v1 = hsh % 55, v2 = (hsh >> 8) % 80, v3 = (hsh >> 16) % 50;
	if (n->depth == 0) sprintf(buf, "rgb(200,200,200)");
	else if (n->inlined) sprintf(buf, "rgb(%u,%u,%u)", 80 + v3, 160 + v1, 200 + v1);
	else sprintf(buf, "rgb(%u,%u,%u)", 200 + v1, 80 + v2, 40 + v3);
}

static const char *SVG_SCRIPT =
	"<script type=\"text/ecmascript\"><![CDATA[\n"
	"'use strict';\n"
	"(function () {\n"
	"  const svg = document.documentElement;\n"
	"  const W = +svg.dataset.width, side = +svg.dataset.side, total = +svg.dataset.total;\n"
	"  const frames = Array.from(document.querySelectorAll('g.f'));\n"
	"  const details = document.getElementById('details');\n"
	"  const matched = document.getElementById('matched');\n"
	"  const unzoom = document.getElementById('unzoom');\n"
	"  const CHAR_W = 6.6;\n"
	"  let zx = 0, zw = total, searchRe = null;\n"
	"  function human(b) {\n"
	"    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];\n"
	"    let i = 0;\n"
	"    while (Math.abs(b) >= 1024 && i < u.length - 1) { b /= 1024; i++; }\n"
	"    return (i ? b.toFixed(1) : b.toFixed(0)) + ' ' + u[i];\n"
	"  }\n"
	"  function info(g) {\n"
	"    const w = +g.dataset.w;\n"
	"    let s = g.dataset.n;\n"
	"    if (g.dataset.loc) s += ' (' + g.dataset.loc + ')';\n"
	"    if (g.dataset.inl === '1') s += ' [inlined]';\n"
	"    return s + ': ' + human(w) + ', ' + (100 * w / total).toFixed(2) + '%';\n"
	"  }\n"
	"  function fit(g, width) {\n"
	"    const t = g.querySelector('text'), name = g.dataset.n;\n"
	"    const n = Math.floor((width - 6) / CHAR_W);\n"
	"    t.textContent = n < 3 ? '' : (name.length <= n ? name : name.slice(0, n - 2) + '..');\n"
	"  }\n"
	"  function layout() {\n"
	"    const scale = (W - 2 * side) / zw;\n"
	"    for (const g of frames) {\n"
	"      const x0 = +g.dataset.x, x1 = x0 + (+g.dataset.w);\n"
	"      const a = Math.max(x0, zx), b = Math.min(x1, zx + zw);\n"
	"      const r = g.querySelector('rect'), t = g.querySelector('text');\n"
	"      if (b <= a || (b - a) * scale < 0.1) { g.style.display = 'none'; continue; }\n"
	"      g.style.display = '';\n"
	"      const px = side + (a - zx) * scale, pw = (b - a) * scale;\n"
	"      r.setAttribute('x', px.toFixed(2));\n"
	"      r.setAttribute('width', pw.toFixed(2));\n"
	"      t.setAttribute('x', (px + 3).toFixed(2));\n"
	"      fit(g, pw);\n"
	"    }\n"
	"    unzoom.style.opacity = (zx === 0 && zw === total) ? '0.0' : '1.0';\n"
	"  }\n"
	"  function zoom(g) {\n"
	"    zx = +g.dataset.x; zw = +g.dataset.w;\n"
	"    if (zw <= 0) { zx = 0; zw = total; }\n"
	"    layout();\n"
	"  }\n"
	"  function resetZoom() { zx = 0; zw = total; layout(); }\n"
	"  function search(pattern) {\n"
	"    let re;\n"
	"    try { re = pattern ? new RegExp(pattern) : null; }\n"
	"    catch (e) { matched.textContent = 'bad regular expression'; return -1; }\n"
	"    searchRe = re;\n"
	"    const spans = [];\n"
	"    for (const g of frames) {\n"
	"      const r = g.querySelector('rect');\n"
	"      const hit = re && re.test(g.dataset.n);\n"
	"      r.setAttribute('fill', hit ? 'rgb(230,0,230)' : g.dataset.fill);\n"
	"      if (hit) spans.push([+g.dataset.x, +g.dataset.x + (+g.dataset.w)]);\n"
	"    }\n"
	"    spans.sort((p, q) => p[0] - q[0] || q[1] - p[1]);\n"
	"    let sum = 0, end = -Infinity;\n"
	"    for (const [a, b] of spans) {\n"
	"      if (a >= end) { sum += b - a; end = b; }\n"
	"      else if (b > end) { sum += b - end; end = b; }\n"
	"    }\n"
	"    const pct = total > 0 ? 100 * sum / total : 0;\n"
	"    matched.textContent = re ? 'Matched: ' + pct.toFixed(1) + '%' : '';\n"
	"    return pct;\n"
	"  }\n"
	"  for (const g of frames) {\n"
	"    g.addEventListener('mouseover', () => { details.textContent = info(g); });\n"
	"    g.addEventListener('mouseout', () => { details.textContent = ' '; });\n"
	"    g.addEventListener('click', () => zoom(g));\n"
	"  }\n"
	"  unzoom.addEventListener('click', resetZoom);\n"
	"  document.getElementById('search').addEventListener('click', () => {\n"
	"    if (searchRe) { search(''); return; }\n"
	"    const p = window.prompt('Search frames (regular expression):', '');\n"
	"    if (p) search(p);\n"
	"  });\n"
	"  document.addEventListener('keydown', (e) => {\n"
	"    if (e.key === 'Escape') resetZoom();\n"
	"    if ((e.ctrlKey || e.metaKey) && e.key === 'f') {\n"
	"      e.preventDefault();\n"
	"      const p = window.prompt('Search frames (regular expression):', '');\n"
	"      if (p !== null) search(p);\n"
	"    }\n"
	"  });\n"
	"  window.flamegraph = { zoom, resetZoom, search, layout, frames };\n"
	"  layout();\n"
	"})();\n"
	"]]></script>\n";

static int write_svg(FILE *out, const flame *f, const char *title, const char *subtitle)
{
	double total = f->n[0].total;
	double scale = total > 0 ? (SVG_WIDTH - 2 * PAD_SIDE) / total : 0;
	/* frames that will be drawn: wide enough, with a drawn parent */
	char *drawn = calloc(f->len ? f->len : 1, 1);
	if (!drawn) die_oom();
	uint32_t depth = 0;
	for (uint32_t i = 0; i < f->len; i++) {
		const fnode *n = &f->n[i];
		int parent_ok = i == 0 || drawn[n->parent];
		drawn[i] = parent_ok && (i == 0 || n->total * scale >= MIN_FRAME_PX);
		if (drawn[i] && n->depth > depth) depth = n->depth;
	}
	int height = PAD_TOP + (depth + 1) * FRAME_H + PAD_BOTTOM;
	fprintf(out,
		"<?xml version=\"1.0\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		"viewBox=\"0 0 %d %d\" data-width=\"%d\" data-side=\"%d\" data-total=\"%.17g\">\n",
		SVG_WIDTH, height, SVG_WIDTH, height, SVG_WIDTH, PAD_SIDE, total);
	fputs("<style>\n"
	      "text { font-family: monospace; font-size: 11px; fill: rgb(0,0,0); }\n"
	      "g.f { cursor: pointer; }\n"
	      "g.f:hover rect { stroke: rgb(0,0,0); stroke-width: 0.5; }\n"
	      "#title { font-size: 16px; text-anchor: middle; }\n"
	      "#unzoom, #search { cursor: pointer; fill: rgb(0,0,160); }\n"
	      "</style>\n",
	      out);
	fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"rgb(250,250,240)\"/>\n",
		SVG_WIDTH, height);
	fprintf(out, "<text id=\"title\" x=\"%d\" y=\"18\">", SVG_WIDTH / 2);
	xml_escape(out, title);
	fprintf(out, "</text>\n<text id=\"subtitle\" x=\"%d\" y=\"34\" text-anchor=\"middle\">", SVG_WIDTH / 2);
	xml_escape(out, subtitle);
	fprintf(out, "</text>\n");
	fprintf(out, "<text id=\"unzoom\" x=\"%d\" y=\"18\" style=\"opacity:0.0\">Reset Zoom</text>\n", PAD_SIDE);
	fprintf(out, "<text id=\"search\" x=\"%d\" y=\"18\" text-anchor=\"end\">Search</text>\n",
		SVG_WIDTH - PAD_SIDE);
	fprintf(out, "<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n", PAD_SIDE, height - 10);
	fprintf(out, "<text id=\"matched\" x=\"%d\" y=\"%d\" text-anchor=\"end\"></text>\n",
		SVG_WIDTH - PAD_SIDE, height - 10);
	fputs("<g id=\"frames\">\n", out);
	for (uint32_t i = 0; i < f->len; i++) {
		if (!drawn[i]) continue;
		const fnode *n = &f->n[i];
		char fill[40];
		frame_colour(n, fill);
		double px = PAD_SIDE + n->x * scale, pw = n->total * scale;
		int y = height - PAD_BOTTOM - (n->depth + 1) * FRAME_H;
		fputs("<g class=\"f\" data-n=\"", out);
		xml_escape(out, n->label);
		fprintf(out, "\" data-x=\"%.17g\" data-w=\"%.17g\" data-d=\"%u\" data-inl=\"%d\" data-fill=\"%s\"",
			n->x, n->total, n->depth, n->inlined, fill);
		if (i > 0 && n->file) {
			fputs(" data-loc=\"", out);
			xml_escape(out, n->file);
			if (n->line) fprintf(out, ":%u", n->line);
			fputc('"', out);
		}
		fputs("><title>", out);
		xml_escape(out, n->label);
		if (i > 0 && n->file) {
			fputs(" (", out);
			xml_escape(out, n->file);
			if (n->line) fprintf(out, ":%u", n->line);
			fputc(')', out);
		}
		char hb[32];
		fprintf(out, "%s: %s, %.2f%%</title>", n->inlined ? " [inlined]" : "",
			hv_human_bytes(n->total, hb), total > 0 ? 100 * n->total / total : 0.0);
		fprintf(out, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" rx=\"2\" fill=\"%s\"/>",
			px, y, pw, FRAME_H - 1, fill);
		fprintf(out, "<text x=\"%.2f\" y=\"%d\"></text></g>\n", px + 3, y + FRAME_H - 4);
	}
	fputs("</g>\n", out);
	fputs(SVG_SCRIPT, out);
	fputs("</svg>\n", out);
	free(drawn);
	return ferror(out) ? -1 : 0;
}

/* ---------------------------------------------------------------- main */

static void usage(FILE *f)
{
	fputs("usage: memtrace-flamegraph [options] TRACE.ctf [-o OUT.svg]\n"
	      "       memtrace-flamegraph [options] TRACE.ctf --folded [-o OUT.txt]\n"
	      "  --alloc            bytes allocated per call context (default)\n"
	      "  --live             bytes still live at the end of the trace (or of --to)\n"
	      "  --at peak|SEC      bytes live at that moment: the peak (the moment the live\n"
	      "                     estimate was highest) or SEC seconds since the start\n"
	      "  -o, --output FILE  where to write (default and \"-\": standard output)\n"
	      "  --folded           collapsed stacks \"frame;frame;frame bytes\" instead of SVG\n"
	      "  --lines            frame labels carry file:line (\"function (file:line)\")\n"
	      "  --from SEC, --to SEC  time window in seconds since trace start\n"
	      "  --title TEXT       title of the SVG\n"
	      "  --lenient          skip packets the reader skips (with a warning) instead of failing\n",
	      f);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "alloc", no_argument, 0, 'a' },      { "live", no_argument, 0, 'l' },
		{ "output", required_argument, 0, 'o' }, { "folded", no_argument, 0, 'F' },
		{ "lines", no_argument, 0, 'n' },      { "from", required_argument, 0, 'f' },
		{ "to", required_argument, 0, 't' },   { "title", required_argument, 0, 'T' },
		{ "lenient", no_argument, 0, 'L' },    { "help", no_argument, 0, 'h' },
		{ "at", required_argument, 0, 'A' },   { 0, 0, 0, 0 },
	};
	hv_options opt = { .from_s = 0, .to_s = -1 };
	hv_cli_at at = { 0 };
	int live = 0, folded = 0, with_lines = 0, c;
	const char *output = NULL, *title = NULL;
	while ((c = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'a': live = 0; break;
		case 'l': live = 1; break;
		case 'o': output = optarg; break;
		case 'F': folded = 1; break;
		case 'n': with_lines = 1; break;
		case 'f': if (hv_cli_number(PROG, "--from", optarg, &opt.from_s)) return 2; break;
		case 't': if (hv_cli_number(PROG, "--to", optarg, &opt.to_s)) return 2; break;
		case 'T': title = optarg; break;
		case 'A':
			if (hv_cli_parse_at(PROG, optarg, &at)) return 2;
			live = 1;
			break;
		case 'L': opt.lenient = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (hv_cli_operands(PROG, argc - optind, 1, "one trace file", usage) < 0 ||
	    hv_cli_window(PROG, &opt) < 0)
		return 2;
	/* without -o the SVG (or the folded stacks) goes to standard output, unless that is a
	 * terminal, where an SVG is of no use */
	if (!output && !folded && isatty(STDOUT_FILENO)) {
		fprintf(stderr, PROG ": standard output is a terminal: redirect it (> OUT.svg) or give "
			"-o OUT.svg\n");
		return 2;
	}
	const char *path = argv[optind];
	hv_heap *h = hv_cli_load_at(PROG, path, &opt, &at);
	if (!h) return 1;
	flame f = { 0 };
	build_flame(h, &f, live, with_lines);

	FILE *out = stdout;
	if (output && strcmp(output, "-")) {
		out = hv_cli_create(PROG, output, "w");
		if (!out) {
			flame_free(&f);
			hv_free(h);
			return 1;
		}
	}
	int rc;
	if (folded) {
		rc = write_folded(out, &f);
	} else {
		const mt_trace_info *info = hv_info(h);
		char deftitle[512], subtitle[512], hb[32], what[64];
		/* --at: the moment shown, not "the end" (issue 38) */
		if (at.set && at.peak) snprintf(what, sizeof what, "Live bytes at the peak");
		else if (at.set) snprintf(what, sizeof what, "Live bytes at %g s", at.sec);
		else snprintf(what, sizeof what, "%s", live ? "Live bytes at the end" : "Allocated bytes");
		snprintf(deftitle, sizeof deftitle, "%s: %s", what,
			 info->executable_name && *info->executable_name ? info->executable_name : path);
		snprintf(subtitle, sizeof subtitle,
			 "%s, pid %llu, sample rate %g, total %s (estimated from samples)", path,
			 (unsigned long long)info->pid, info->sample_rate, hv_human_bytes(f.n[0].total, hb));
		rc = write_svg(out, &f, title ? title : deftitle, subtitle);
	}
	if (out != stdout) {
		if (fclose(out) != 0) rc = -1;
	} else if (fflush(out) != 0) {
		rc = -1;
	}
	if (rc < 0) fprintf(stderr, PROG ": writing %s failed\n", output ? output : "output");
	flame_free(&f);
	hv_free(h);
	return rc < 0 ? 1 : 0;
}
