/* memtrace-diff: which call contexts hold more (or fewer) live bytes in snapshot B than in
 * snapshot A. A snapshot is a trace whose allocations are the blocks live at one moment; for
 * any other trace, its blocks live at the end are used. Contexts are matched by their
 * symbolic stacks (file:line function of every frame), not by location codes, so traces
 * written by different runs compare. */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heapview_cli.h"

#define PROG "memtrace-diff"
/* A row whose live samples changed by fewer than this is marked as noise. */
#define NOISE_SAMPLES 10

typedef struct delta {
	const hv_row *a, *b; /* either may be NULL */
	double change;       /* live bytes B - A */
} delta;

static int cmp_delta_desc(const void *x, const void *y)
{
	const delta *p = x, *q = y;
	if (p->change != q->change) return p->change < q->change ? 1 : -1;
	const char *kp = p->b ? p->b->key : p->a->key, *kq = q->b ? q->b->key : q->a->key;
	return strcmp(kp, kq);
}

static int cmp_row_key(const void *x, const void *y)
{
	return strcmp(((const hv_row *)x)->key, ((const hv_row *)y)->key);
}

static void usage(FILE *f)
{
	fputs("usage: memtrace-diff [options] A.ctf B.ctf\n"
	      "  --top N            rows per table (default 10; 0 = all)\n"
	      "  --group function|line|stack\n"
	      "                     compare per whole call stack (default), per allocating\n"
	      "                     function, or per file:line\n"
	      "  --frames N         frames printed per stack (default 16; 0 = all)\n"
	      "  --raw              exact byte counts instead of KiB/MiB\n"
	      "  --wrapper NAME, --keep-wrappers  allocation wrappers with --group function|line\n"
	      "                     (see memtrace-report)\n"
	      "  --at peak|SEC      compare what was live at that moment of each trace (its own\n"
	      "                     peak, or SEC seconds since its start); default: at the end\n"
	      "  --lenient          skip packets the reader skips (with a warning) instead of failing\n",
	      f);
}

static const char *fmt_bytes(double b, int raw, char *buf)
{
	if (raw) {
		snprintf(buf, 32, "%+.0f", b);
		return buf;
	}
	char tmp[32];
	hv_human_bytes(b, tmp);
	snprintf(buf, 32, "%s%.28s", b >= 0 ? "+" : "", tmp);
	return buf;
}

static void print_delta(const delta *d, size_t rank, int raw, int frames, const hv_heap *ha,
			const hv_heap *hb, int by_stack)
{
	char c[32], a[32], b[32], key[512];
	const hv_row *r = d->b ? d->b : d->a;
	uint64_t sa = d->a ? d->a->counts.live_samples : 0, sb = d->b ? d->b->counts.live_samples : 0;
	uint64_t moved = sa > sb ? sa - sb : sb - sa;
	/* a change resting on a few samples is what sampling gives by chance, not a leak */
	printf("%3zu. %s  live %s -> %s  samples %llu -> %llu%s  %s\n", rank,
	       fmt_bytes(d->change, raw, c),
	       hv_cli_bytes(d->a ? d->a->counts.live_bytes : 0, raw, a),
	       hv_cli_bytes(d->b ? d->b->counts.live_bytes : 0, raw, b),
	       (unsigned long long)sa, (unsigned long long)sb,
	       moved < NOISE_SAMPLES ? " (noise: under 10 samples)" : "",
	       hv_cli_row_title(r->key, by_stack, key, sizeof key));
	hv_print_stack(stdout, d->b ? hb : ha, r->heaviest_ctx, "       ", frames);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "top", required_argument, 0, 'n' },   { "group", required_argument, 0, 'g' },
		{ "frames", required_argument, 0, 'F' }, { "raw", no_argument, 0, 'r' },
		{ "lenient", no_argument, 0, 'L' },     { "help", no_argument, 0, 'h' },
		{ "wrapper", required_argument, 0, 'W' }, { "keep-wrappers", no_argument, 0, 'K' },
		{ "at", required_argument, 0, 'A' },    { 0, 0, 0, 0 },
	};
	static hv_cli_wrappers wrappers;
	hv_options opt = { .from_s = 0, .to_s = -1 };
	hv_cli_at at = { 0 };
	enum hv_group group = HV_GROUP_STACK;
	double top = 10, frames = 16;
	int raw = 0, c;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'n': if (hv_cli_number(PROG, "--top", optarg, &top)) return 2; break;
		case 'F': if (hv_cli_number(PROG, "--frames", optarg, &frames)) return 2; break;
		case 'g': if (hv_cli_group(PROG, optarg, &group)) return 2; break;
		case 'r': raw = 1; break;
		case 'A': if (hv_cli_parse_at(PROG, optarg, &at)) return 2; break;
		case 'L': opt.lenient = 1; break;
		case 'W': if (hv_cli_add_wrapper(PROG, &wrappers, optarg)) return 2; break;
		case 'K': wrappers.keep = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (hv_cli_operands(PROG, argc - optind, 2, "two trace files, A and B", usage) < 0)
		return 2;
	hv_heap *h[2] = { 0 };
	hv_rows rows[2] = { 0 };
	int rc = 1;
	for (int i = 0; i < 2; i++) {
		h[i] = hv_cli_load_at(PROG, argv[optind + i], &opt, &at); /* (each its own peak) */
		if (!h[i] || hv_cli_apply_wrappers(PROG, h[i], &wrappers, i ? NULL : stdout) < 0) goto out;
		if (hv_group_rows(h[i], group, 1, &rows[i]) < 0) {
			fprintf(stderr, PROG ": out of memory\n");
			goto out;
		}
	}

	/* match rows by key: both sorted by key, then merged */
	hv_rows_sort(&rows[0], cmp_row_key);
	hv_rows_sort(&rows[1], cmp_row_key);
	delta *d = calloc(rows[0].n + rows[1].n + 1, sizeof *d);
	if (!d) { fprintf(stderr, PROG ": out of memory\n"); goto out; }
	size_t n = 0, ia = 0, ib = 0;
	while (ia < rows[0].n || ib < rows[1].n) {
		int cmp = ia == rows[0].n ? 1 : ib == rows[1].n ? -1
			: strcmp(rows[0].rows[ia].key, rows[1].rows[ib].key);
		d[n].a = cmp <= 0 ? &rows[0].rows[ia++] : NULL;
		d[n].b = cmp >= 0 ? &rows[1].rows[ib++] : NULL;
		n++;
	}
	for (size_t i = 0; i < n; i++)
		d[i].change = (d[i].b ? d[i].b->counts.live_bytes : 0) - (d[i].a ? d[i].a->counts.live_bytes : 0);
	qsort(d, n, sizeof *d, cmp_delta_desc);

	char ta[32], tb[32], tc[32];
	double la = hv_total(h[0])->live_bytes, lb = hv_total(h[1])->live_bytes;
	printf("A %s: live %s\nB %s: live %s\nchange: %s\n", argv[optind], hv_cli_bytes(la, raw, ta),
	       argv[optind + 1], hv_cli_bytes(lb, raw, tb), fmt_bytes(lb - la, raw, tc));

	printf("\nGrew (live bytes B - A, largest first):\n");
	size_t shown = 0;
	for (size_t i = 0; i < n && d[i].change > 0 && (top == 0 || shown < top); i++)
		print_delta(&d[i], ++shown, raw, (int)frames, h[0], h[1], group == HV_GROUP_STACK);
	if (!shown) printf("     (none)\n");
	printf("\nShrank (largest first):\n");
	shown = 0;
	for (size_t i = n; i-- > 0 && d[i].change < 0 && (top == 0 || shown < top);)
		print_delta(&d[i], ++shown, raw, (int)frames, h[0], h[1], group == HV_GROUP_STACK);
	if (!shown) printf("     (none)\n");
	free(d);
	rc = 0;
out:
	for (int i = 0; i < 2; i++) {
		hv_rows_free(&rows[i]);
		hv_free(h[i]);
	}
	return rc;
}
