/* heapview: grouping contexts into rows (by function, by file:line, by stack) and printing
 * symbolized call stacks. */
#include "heapview.h"
#include "hash.h"
#include "slot_index.h"

#include <stdlib.h>
#include <string.h>

int hv_parse_group(const char *s, enum hv_group *g)
{
	if (!strcmp(s, "function")) *g = HV_GROUP_FUNCTION;
	else if (!strcmp(s, "line")) *g = HV_GROUP_LINE;
	else if (!strcmp(s, "stack")) *g = HV_GROUP_STACK;
	else return -1;
	return 0;
}

/* The innermost source location of the allocation site of ctx, or NULL. */
static const mt_location *site_location(const hv_heap *h, uint32_t ctx)
{
	if (hv_context_depth(h, ctx) == 0) return NULL;
	const mt_location *locs;
	int n = hv_lookup(h, hv_context_code(h, ctx), &locs);
	return n > 0 ? &locs[n - 1] : NULL;
}

static void put_location(FILE *f, const mt_location *loc)
{
	fprintf(f, "%s:%u %s", hv_filename(loc), loc->line, hv_defname(loc));
}

char *hv_group_key(const hv_heap *h, uint32_t ctx, enum hv_group g)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f) return NULL;
	if (hv_context_depth(h, ctx) == 0) {
		fputs("<no backtrace>", f);
	} else if (g == HV_GROUP_FUNCTION || g == HV_GROUP_LINE) {
		const mt_location *loc = site_location(h, hv_site_context(h, ctx));
		if (!loc) fprintf(f, "<noloc %#llx>", (unsigned long long)hv_context_code(h, ctx));
		else if (g == HV_GROUP_FUNCTION) fputs(hv_defname(loc), f);
		/* no line (no debug info: the object's path and line 0): the function, or the
		 * object+offset the tracer named it by, never FILE:0 for a whole binary */
		else if (loc->line == 0) fprintf(f, "%s (%s)", hv_defname(loc), hv_filename(loc));
		else fprintf(f, "%s:%u", hv_filename(loc), loc->line);
	} else {
		/* allocation site first; inlined locations of one frame innermost first */
		for (uint32_t c = ctx; hv_context_depth(h, c) > 0; c = hv_context_parent(h, c)) {
			if (c != ctx) fputs(" <- ", f);
			const mt_location *locs;
			int n = hv_lookup(h, hv_context_code(h, c), &locs);
			if (n <= 0) fputs("<noloc>", f);
			for (int i = n - 1; i >= 0; i--) {
				if (i != n - 1) fputs(" & ", f);
				put_location(f, &locs[i]);
			}
		}
	}
	if (fclose(f) != 0) { free(buf); return NULL; }
	return buf;
}

void hv_print_stack(FILE *out, const hv_heap *h, uint32_t ctx, const char *indent, int max_frames)
{
	if (hv_context_depth(h, ctx) == 0) {
		fprintf(out, "%s(no backtrace)\n", indent);
		return;
	}
	int printed = 0;
	for (uint32_t c = ctx; hv_context_depth(h, c) > 0; c = hv_context_parent(h, c)) {
		if (max_frames > 0 && printed >= max_frames) {
			fprintf(out, "%s... %u more frames\n", indent, hv_context_depth(h, c));
			return;
		}
		const mt_location *locs;
		int n = hv_lookup(h, hv_context_code(h, c), &locs);
		if (n <= 0) fprintf(out, "%sat ?? (location code %#llx, no debug info)\n", indent,
				    (unsigned long long)hv_context_code(h, c));
		for (int i = n - 1; i >= 0; i--) {
			/* line 0: no line known (no debug info), the file is the object's */
			if (locs[i].line)
				fprintf(out, "%sat %s (%s:%u)%s\n", indent, hv_defname(&locs[i]),
					hv_filename(&locs[i]), locs[i].line, i > 0 ? " [inlined]" : "");
			else
				fprintf(out, "%sat %s (%s)%s\n", indent, hv_defname(&locs[i]),
					hv_filename(&locs[i]), i > 0 ? " [inlined]" : "");
		}
		printed++;
	}
}

/* ---------------------------------------------------------------- rows */

typedef struct row_table {
	hv_row *rows;
	size_t n, cap;
	mt_slot_index by_key;
} row_table;

static uint64_t row_hash(const void *ctx, uint32_t i)
{
	return mt_fnv1a_str(((const row_table *)ctx)->rows[i].key);
}

/* The row for key (taking ownership of key), created if new; NULL on out of memory. */
static hv_row *table_get(row_table *t, char *key)
{
	mt_slot_index *ix = &t->by_key;
	if (mt_slot_reserve(ix, t->n, 256, row_hash, t) < 0) return NULL;
	size_t j = mt_slot_first(ix, mt_fnv1a_str(key));
	for (; ix->slots[j]; j = mt_slot_next(ix, j)) {
		hv_row *r = &t->rows[ix->slots[j] - 1];
		if (!strcmp(r->key, key)) { free(key); return r; }
	}
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		hv_row *rows = realloc(t->rows, cap * sizeof *rows);
		if (!rows) return NULL;
		t->rows = rows;
		t->cap = cap;
	}
	hv_row *r = &t->rows[t->n];
	memset(r, 0, sizeof *r);
	r->key = key;
	r->heaviest_value = -1;
	ix->slots[j] = ++t->n;
	return r;
}

static void counts_sum(hv_counts *a, const hv_counts *b)
{
	a->alloc_bytes += b->alloc_bytes;
	a->alloc_objects += b->alloc_objects;
	a->live_bytes += b->live_bytes;
	a->live_objects += b->live_objects;
	a->alloc_events += b->alloc_events;
	a->live_events += b->live_events;
	a->alloc_samples += b->alloc_samples;
	a->live_samples += b->live_samples;
}

int hv_group_rows(const hv_heap *h, enum hv_group g, int by_live, hv_rows *out)
{
	row_table t = { 0 };
	for (uint32_t c = 0; c < hv_context_count(h); c++) {
		const hv_counts *cc = hv_context_counts(h, c);
		if (!cc->alloc_events) continue;
		char *key = hv_group_key(h, c, g);
		hv_row *r = key ? table_get(&t, key) : NULL;
		if (!r) {
			free(key);
			out->rows = t.rows;
			out->n = t.n;
			hv_rows_free(out);
			mt_slot_free(&t.by_key);
			return -1;
		}
		counts_sum(&r->counts, cc);
		r->ncontexts++;
		double v = by_live ? cc->live_bytes : cc->alloc_bytes;
		if (v > r->heaviest_value) {
			r->heaviest_value = v;
			r->heaviest_ctx = c;
		}
	}
	mt_slot_free(&t.by_key);
	out->rows = t.rows;
	out->n = t.n;
	return 0;
}

void hv_rows_free(hv_rows *r)
{
	for (size_t i = 0; i < r->n; i++) free(r->rows[i].key);
	free(r->rows);
	r->rows = NULL;
	r->n = 0;
}

void hv_rows_sort(hv_rows *r, int (*cmp)(const void *, const void *))
{
	if (r->n) qsort(r->rows, r->n, sizeof *r->rows, cmp);
}

const hv_row *hv_rows_find(const hv_rows *r, const char *key)
{
	for (size_t i = 0; i < r->n; i++)
		if (!strcmp(r->rows[i].key, key)) return &r->rows[i];
	return NULL;
}
