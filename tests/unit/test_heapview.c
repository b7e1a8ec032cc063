/* heapview (user/format/heapview*.c): estimates per context, grouping, time windows and the
 * rejection of malformed traces, on synthetic traces with known sites and bytes.
 *
 * `test_heapview --write DIR` only writes the synthetic traces (main.ctf, snapA.ctf,
 * snapB.ctf) into DIR: tests/test_tools.sh and tests/test_flamegraph.sh use them. The
 * numbers they expect are documented here, next to the code that makes them.
 *
 * Sample rate 1/1024 per word, 64-bit words: one sample stands for 1024 words = 8192 bytes.
 * main.ctf (start + ...):
 *   BIG   main > work > alloc_big (big.c:30)      0-0.3 s: 30 allocs x 10 samples, all freed
 *   LEAK  main > work > leak_site (leak.c:40)     2-3 s: 100 allocs x 1 sample, never freed
 *   SMALL main > helper (helper.c:50) with small_site (small.c:60) inlined into it,
 *                                                 2-3 s: 50 allocs x 1 sample, 25 freed
 *   LEAK2 main > other_path > leak_site           4 s: 20 allocs x 1 sample, never freed
 * => allocated: BIG 2457600, LEAK 819200, SMALL 409600, LEAK2 163840 bytes;
 *    live at end: LEAK 819200, SMALL 204800, LEAK2 163840, BIG 0.
 * snapA.ctf: live BIG 200 samples, LEAK 100 samples (no frees: a snapshot).
 * snapB.ctf: live BIG 150 samples, LEAK 400 samples, SMALL 10 samples.
 * snapC.ctf: snapB with SMALL 13 samples (a change memtrace-diff calls noise).
 * => diff B - A: LEAK +2457600, SMALL +81920, BIG -409600. */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "heapview.h"
#include "memtrace.h"

#define START_US 1700000000000000ull
#define SEC 1000000ull
#define RATE (1.0 / 1024)
#define SAMPLE_BYTES 8192.0

enum { C_MAIN = 1, C_WORK, C_BIG, C_LEAK, C_HELPER, C_OTHER, C_NODBG_SYM, C_NODBG_ADDR,
       C_MALLOC, C_CALLER1, C_CALLER2, C_CALLER3, C_UNNAMED_WRAP, C_UNNAMED_ONE };

static const mt_location L_MAIN[] = { { 10, 0, 0, "main.c", "main" } };
static const mt_location L_WORK[] = { { 20, 0, 0, "work.c", "work" } };
static const mt_location L_BIG[] = { { 30, 0, 0, "big.c", "alloc_big" } };
static const mt_location L_LEAK[] = { { 40, 0, 0, "leak.c", "leak_site" } };
/* outermost first: helper, into which small_site was inlined */
static const mt_location L_HELPER[] = { { 50, 0, 0, "helper.c", "helper" },
					{ 60, 0, 0, "small.c", "small_site" } };
static const mt_location L_OTHER[] = { { 70, 0, 0, "other.c", "other_path" } };
/* a binary without debug info: the object as file, line 0 (a symbol, or object+offset) */
static const mt_location L_NODBG_SYM[] = { { 0, 0, 0, "/usr/bin/prog", "parse_request" } };
static const mt_location L_NODBG_ADDR[] = { { 0, 0, 0, "/usr/bin/prog", "prog+0x1234" } };
static const mt_location L_MALLOC[] = { { 0, 0, 0, "/lib/libc.so.6", "malloc" } };
static const mt_location L_CALLER1[] = { { 0, 0, 0, "/usr/bin/prog", "caller1" } };
static const mt_location L_CALLER2[] = { { 0, 0, 0, "/usr/bin/prog", "caller2" } };
static const mt_location L_CALLER3[] = { { 0, 0, 0, "/usr/bin/prog", "caller3" } };
static const mt_location L_UNNAMED_WRAP[] = { { 0, 0, 0, "/usr/bin/prog", "prog+0x100" } };
static const mt_location L_UNNAMED_ONE[] = { { 0, 0, 0, "/usr/bin/prog", "prog+0x200" } };

static int locations(void *ctx, uint64_t code, const mt_location **locs)
{
	switch (code) {
	case C_MAIN: *locs = L_MAIN; return 1;
	case C_WORK: *locs = L_WORK; return 1;
	case C_BIG: *locs = L_BIG; return 1;
	case C_LEAK: *locs = L_LEAK; return 1;
	case C_HELPER: *locs = L_HELPER; return 2;
	case C_OTHER: *locs = L_OTHER; return 1;
	case C_NODBG_SYM: *locs = L_NODBG_SYM; return 1;
	case C_NODBG_ADDR: *locs = L_NODBG_ADDR; return 1;
	case C_MALLOC: *locs = L_MALLOC; return 1;
	case C_CALLER1: *locs = L_CALLER1; return 1;
	case C_CALLER2: *locs = L_CALLER2; return 1;
	case C_CALLER3: *locs = L_CALLER3; return 1;
	case C_UNNAMED_WRAP: *locs = L_UNNAMED_WRAP; return 1;
	case C_UNNAMED_ONE: *locs = L_UNNAMED_ONE; return 1;
	}
	return -1;
}

static const uint64_t BT_BIG[] = { C_MAIN, C_WORK, C_BIG };
static const uint64_t BT_LEAK[] = { C_MAIN, C_WORK, C_LEAK };
static const uint64_t BT_SMALL[] = { C_MAIN, C_HELPER };
static const uint64_t BT_LEAK2[] = { C_MAIN, C_OTHER, C_LEAK };

static mt_writer *open_trace(const char *dir, const char *name, FILE **keep)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) { perror(path); return NULL; }
	mt_trace_info info = {
		.sample_rate = RATE, .word_size = 64, .executable_name = "synthetic",
		.host_name = "test", .ocaml_runtime_params = "", .pid = 4242, .context = "",
		.start_time_us = START_US,
	};
	mt_writer *w = mt_writer_open(fd, &info, locations, NULL);
	if (!w) { close(fd); return NULL; }
	*keep = fdopen(fd, "w"); /* closed after the writer */
	return w;
}

static int close_trace(mt_writer *w, FILE *f)
{
	int rc = mt_writer_close(w);
	if (rc < 0) fprintf(stderr, "writer: %s\n", mt_writer_error(w));
	return (fclose(f) || rc < 0) ? -1 : 0;
}

#define ALLOC(w, t, len, n, bt) \
	mt_writer_alloc(w, t, len, n, MT_SOURCE_EXTERNAL, bt, sizeof bt / sizeof bt[0])

static int write_main(const char *dir)
{
	FILE *f;
	mt_writer *w = open_trace(dir, "main.ctf", &f);
	if (!w) return -1;
	for (int i = 0; i < 30; i++) {
		uint64_t t = START_US + i * 10000;
		int64_t id = ALLOC(w, t, 10240, 10, BT_BIG);
		if (id < 0 || mt_writer_collect(w, t + 5000, id) < 0) return -1;
	}
	for (int i = 0; i < 100; i++) {
		uint64_t t = START_US + 2 * SEC + i * 10000;
		if (ALLOC(w, t, 1024, 1, BT_LEAK) < 0) return -1;
		if (i < 50) {
			int64_t id = ALLOC(w, t + 1000, 1024, 1, BT_SMALL);
			if (id < 0) return -1;
			if (i % 2 && mt_writer_collect(w, t + 2000, id) < 0) return -1;
		}
	}
	for (int i = 0; i < 20; i++)
		if (ALLOC(w, START_US + 4 * SEC + i * 1000, 1024, 1, BT_LEAK2) < 0) return -1;
	return close_trace(w, f);
}

static int write_snapshot(const char *dir, const char *name, int big, int leak, int small)
{
	FILE *f;
	mt_writer *w = open_trace(dir, name, &f);
	if (!w) return -1;
	uint64_t t = START_US + SEC;
	for (int i = 0; i < big; i++) if (ALLOC(w, t, 1024, 1, BT_BIG) < 0) return -1;
	for (int i = 0; i < leak; i++) if (ALLOC(w, t, 1024, 1, BT_LEAK) < 0) return -1;
	for (int i = 0; i < small; i++) if (ALLOC(w, t, 1024, 1, BT_SMALL) < 0) return -1;
	return close_trace(w, f);
}

static const uint64_t BT_NODBG_SYM[] = { C_MAIN, C_NODBG_SYM };
static const uint64_t BT_NODBG_ADDR[] = { C_MAIN, C_NODBG_ADDR };

/* Sites of a binary without debug info. */
static int write_nodebug(const char *dir)
{
	FILE *f;
	mt_writer *w = open_trace(dir, "nodebug.ctf", &f);
	if (!w) return -1;
	for (int i = 0; i < 10; i++)
		if (ALLOC(w, START_US + i, 1024, 1, BT_NODBG_SYM) < 0 ||
		    ALLOC(w, START_US + i, 1024, 3, BT_NODBG_ADDR) < 0) return -1;
	return close_trace(w, f);
}

/* A stripped binary: an unnamed wrapper of malloc called from two functions, and an unnamed
 * function calling malloc from one place only (not a wrapper by the rule). */
static const uint64_t BT_W1[] = { C_MAIN, C_CALLER1, C_UNNAMED_WRAP, C_MALLOC };
static const uint64_t BT_W2[] = { C_MAIN, C_CALLER2, C_UNNAMED_WRAP, C_MALLOC };
static const uint64_t BT_W3[] = { C_MAIN, C_CALLER3, C_UNNAMED_ONE, C_MALLOC };

static int write_unnamed(const char *dir)
{
	FILE *f;
	mt_writer *w = open_trace(dir, "unnamed.ctf", &f);
	if (!w) return -1;
	for (int i = 0; i < 10; i++)
		if (ALLOC(w, START_US + i, 1024, 3, BT_W1) < 0 || ALLOC(w, START_US + i, 1024, 2, BT_W2) < 0 ||
		    ALLOC(w, START_US + i, 1024, 1, BT_W3) < 0) return -1;
	return close_trace(w, f);
}

static int write_all(const char *dir)
{
	mkdir(dir, 0755);
	if (write_main(dir) < 0 || write_nodebug(dir) < 0 || write_unnamed(dir) < 0 ||
	    write_snapshot(dir, "snapA.ctf", 200, 100, 0) < 0 ||
	    write_snapshot(dir, "snapB.ctf", 150, 400, 10) < 0 ||
	    write_snapshot(dir, "snapC.ctf", 150, 400, 13) < 0) {
		fprintf(stderr, "test_heapview: writing the synthetic traces into %s failed\n", dir);
		return -1;
	}
	return 0;
}

static int near(double a, double b) { return fabs(a - b) <= 1e-6 * (fabs(b) + 1); }

static const hv_row *row(const hv_rows *r, const char *key)
{
	const hv_row *x = hv_rows_find(r, key);
	static hv_row zero;
	return x ? x : &zero;
}

static void check_main(const char *dir)
{
	char path[4096], *err = NULL;
	snprintf(path, sizeof path, "%s/main.ctf", dir);
	hv_heap *h = hv_load(path, NULL, &err);
	CHECKF("heapview_load_main", h != NULL, "%s", err ? err : "?");
	if (!h) { free(err); return; }
	const hv_counts *t = hv_total(h);
	CHECKF("heapview_total_alloc", near(t->alloc_bytes, (300 + 100 + 50 + 20) * SAMPLE_BYTES),
	       "got %.0f", t->alloc_bytes);
	CHECKF("heapview_total_live", near(t->live_bytes, (100 + 25 + 20) * SAMPLE_BYTES), "got %.0f",
	       t->live_bytes);
	CHECK("heapview_total_events", t->alloc_events == 200 && t->live_events == 145);

	hv_rows r;
	CHECK("heapview_group_function", hv_group_rows(h, HV_GROUP_FUNCTION, 0, &r) == 0);
	CHECKF("heapview_function_rows", r.n == 3, "got %zu rows", r.n);
	CHECKF("heapview_function_leak_merged", near(row(&r, "leak_site")->counts.live_bytes, 120 * SAMPLE_BYTES)
	       && row(&r, "leak_site")->ncontexts == 2, "live %.0f", row(&r, "leak_site")->counts.live_bytes);
	CHECK("heapview_function_inlined_site", near(row(&r, "small_site")->counts.alloc_bytes, 50 * SAMPLE_BYTES));
	CHECK("heapview_function_big_freed", near(row(&r, "alloc_big")->counts.alloc_bytes, 300 * SAMPLE_BYTES)
	      && row(&r, "alloc_big")->counts.live_bytes == 0);
	hv_rows_free(&r);

	CHECK("heapview_group_line", hv_group_rows(h, HV_GROUP_LINE, 0, &r) == 0);
	CHECK("heapview_line_key", near(row(&r, "small.c:60")->counts.live_bytes, 25 * SAMPLE_BYTES));
	hv_rows_free(&r);

	CHECK("heapview_group_stack", hv_group_rows(h, HV_GROUP_STACK, 0, &r) == 0);
	CHECKF("heapview_stack_rows", r.n == 4, "got %zu rows", r.n);
	const char *small_key = "small.c:60 small_site & helper.c:50 helper <- main.c:10 main";
	CHECKF("heapview_stack_key_inlined", hv_rows_find(&r, small_key) != NULL, "no row \"%s\" (first: %s)",
	       small_key, r.n ? r.rows[0].key : "-");
	hv_rows_free(&r);

	/* objects: at rate 1/1024 a 1024-word block is sampled with p = 1-(1-1/1024)^1024 */
	double p = 1 - pow(1 - RATE, 1024);
	CHECKF("heapview_objects_estimate", fabs(t->live_objects - 145 / p) < 1e-6 * t->live_objects,
	       "got %.3f want %.3f", t->live_objects, 145 / p);
	/* the peak: LEAK 100 + SMALL 25 + LEAK2 20 samples live after the last LEAK2 at 4.019 s */
	hv_peak pk = hv_get_peak(h);
	CHECKF("heapview_peak", near(pk.bytes, 145 * SAMPLE_BYTES) && pk.time_us == START_US + 4 * SEC + 19000
	       && near(pk.objects, 145 / p), "%.0f bytes at %+lld us", pk.bytes,
	       (long long)(pk.time_us - START_US));
	hv_free(h);
	/* live at the peak's moment: what the peak says, by site */
	h = hv_load_at(path, &(hv_options){.to_s = -1}, pk.time_us, &err);
	CHECK("heapview_load_at_peak", h && near(hv_total(h)->live_bytes, 145 * SAMPLE_BYTES));
	hv_free(h);
	/* a window's peak: in 1.5 .. 3.5 s, after the last LEAK at 2.99 s (LEAK 100 + SMALL 25);
	 * ties (the first BIG blocks, each freed before the next) go to the earliest moment */
	h = hv_load(path, &(hv_options){.from_s = 1.5, .to_s = 3.5}, &err);
	pk = h ? hv_get_peak(h) : (hv_peak){0};
	CHECKF("heapview_window_peak", near(pk.bytes, 125 * SAMPLE_BYTES) &&
	       pk.time_us == START_US + 2 * SEC + 990000, "%.0f bytes at %+lld us", pk.bytes,
	       (long long)(pk.time_us - START_US));
	hv_free(h);
	h = hv_load(path, &(hv_options){.to_s = 1}, &err);
	pk = h ? hv_get_peak(h) : (hv_peak){0};
	CHECKF("heapview_peak_earliest_on_ties", near(pk.bytes, 10 * SAMPLE_BYTES) && pk.time_us == START_US,
	       "%.0f bytes at %+lld us", pk.bytes, (long long)(pk.time_us - START_US));
	hv_free(h);

	hv_options win = { .from_s = 1.5, .to_s = 3.5 };
	h = hv_load(path, &win, &err);
	CHECKF("heapview_window_load", h != NULL, "%s", err ? err : "?");
	if (h) {
		CHECKF("heapview_window_alloc", near(hv_total(h)->alloc_bytes, 150 * SAMPLE_BYTES), "got %.0f",
		       hv_total(h)->alloc_bytes);
		CHECKF("heapview_window_live", near(hv_total(h)->live_bytes, 125 * SAMPLE_BYTES), "got %.0f",
		       hv_total(h)->live_bytes);
		hv_free(h);
	}
	/* live at 0.2 s: BIG allocations at 0.00 .. 0.20 s, each freed 5 ms later: only the one
	 * allocated at 0.2 s is still live. */
	hv_options early = { .from_s = 0, .to_s = 0.2 };
	h = hv_load(path, &early, &err);
	CHECKF("heapview_live_at_time", h && near(hv_total(h)->live_bytes, 10 * SAMPLE_BYTES)
	       && near(hv_total(h)->alloc_bytes, 21 * 10 * SAMPLE_BYTES),
	       "live %.0f alloc %.0f", h ? hv_total(h)->live_bytes : -1, h ? hv_total(h)->alloc_bytes : -1);
	hv_free(h);
}

static void check_malformed(void)
{
	const char *dir = "tests/data/memtrace/malformed";
	DIR *d = opendir(dir);
	if (!d) { printf("FAIL heapview_malformed: cannot open %s\n", dir); check_failures++; return; }
	struct dirent *e;
	int n = 0, rejected = 0;
	char bad[1024] = "";
	while ((e = readdir(d))) {
		if (!strstr(e->d_name, ".ctf")) continue;
		char path[4096], *err = NULL;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		hv_heap *h = hv_load(path, NULL, &err);
		n++;
		if (!h && err && *err) rejected++;
		else snprintf(bad + strlen(bad), sizeof bad - strlen(bad), " %s", e->d_name);
		hv_free(h);
		free(err);
	}
	closedir(d);
	CHECKF("heapview_malformed_rejected", n > 0 && rejected == n, "%d/%d rejected; accepted:%s", rejected, n, bad);
}

/* Allocation wrappers: named ones (malloc) and an unnamed one found by the rule. */
static void check_wrappers(const char *dir)
{
	char path[4200], *err = NULL;
	snprintf(path, sizeof path, "%s/unnamed.ctf", dir);
	hv_options opt = {.to_s = -1};
	hv_heap *h = hv_load(path, &opt, &err);
	free(err);
	hv_wrapper_report rep;
	hv_rows r = {0};
	CHECK("wrappers_applied", h && hv_apply_wrappers(h, NULL, 0, 0, &rep) == 0 &&
	      hv_group_rows(h, HV_GROUP_FUNCTION, 0, &r) == 0);
	CHECKF("wrappers_unnamed_rule", r.n == 3 && hv_rows_find(&r, "caller1") &&
	       hv_rows_find(&r, "caller2") && hv_rows_find(&r, "prog+0x200") &&
	       rep.unnamed_folded == 1 && !strcmp(rep.example, "prog+0x100"),
	       "%zu rows, first '%s', %u folded", r.n, r.n ? r.rows[0].key : "-", rep.unnamed_folded);
	hv_rows_free(&r);
	CHECK("wrappers_keep", h && hv_apply_wrappers(h, NULL, 0, 1, &rep) == 0 &&
	      hv_group_rows(h, HV_GROUP_FUNCTION, 0, &r) == 0 && r.n == 1 && hv_rows_find(&r, "malloc"));
	hv_rows_free(&r);
	hv_free(h);
	/* perl's allocators are wrappers by default (issue 38): its sites are their callers */
	CHECK("wrappers_perl_default", hv_is_wrapper_name("Perl_safesysmalloc", NULL, 0) &&
	      hv_is_wrapper_name("Perl_safesysrealloc", NULL, 0) &&
	      hv_is_wrapper_name("Perl_safesyscalloc", NULL, 0) && !hv_is_wrapper_name("Perl_newSV", NULL, 0));
}

/* --group line without debug info: the function or object+offset, never FILE:0 for a binary */
static void check_nodebug(const char *dir)
{
	char path[4200], *err = NULL;
	snprintf(path, sizeof path, "%s/nodebug.ctf", dir);
	hv_options opt = {.to_s = -1};
	hv_heap *h = hv_load(path, &opt, &err);
	free(err);
	hv_rows r = {0};
	CHECK("nodebug_group_line", h && hv_group_rows(h, HV_GROUP_LINE, 0, &r) == 0);
	CHECKF("nodebug_line_falls_back_to_function", r.n == 2 &&
	       hv_rows_find(&r, "parse_request (/usr/bin/prog)") &&
	       hv_rows_find(&r, "prog+0x1234 (/usr/bin/prog)") && !hv_rows_find(&r, "/usr/bin/prog:0"),
	       "%zu rows, first '%s'", r.n, r.n ? r.rows[0].key : "-");
	hv_rows_free(&r);
	hv_free(h);
}

/* big.ctf for the benchmarks (`test_heapview --write-big DIR EVENTS`): EVENTS events over 60 s,
 * allocations of thousands of distinct stacks (depth 3 to 8 over the codes above), each freed
 * 4096 allocations later except one in 16 (a slow leak), a burst of 50,000 blocks held from
 * 20 to 25 s (the peak). */
static int write_big(const char *dir, long events)
{
	FILE *f;
	mt_writer *w = open_trace(dir, "big.ctf", &f);
	if (!w) return -1;
	enum { RING = 4096 };
	static int64_t ring[RING];
	static int64_t burst[50000];
	long nb = 0, done = 0, i = 0;
	uint64_t span = 60 * SEC;
	for (; done < events; i++) {
		uint64_t t = START_US + (uint64_t)((double)done / (double)events * (double)span);
		uint64_t bt[8];
		int depth = 3 + (int)(i % 6);
		bt[0] = C_MAIN;
		for (int k = 1; k < depth; k++) bt[k] = 1 + (uint64_t)((i / (k * 7 + 1) * (2 * k + 3)) % 14);
		int64_t id = mt_writer_alloc(w, t, 64 + i % 512, 1, MT_SOURCE_EXTERNAL, bt, (size_t)depth);
		if (id < 0) return -1;
		done++;
		if (t >= START_US + 20 * SEC && t < START_US + 25 * SEC && nb < 50000) {
			burst[nb++] = id; /* held until 25 s */
			continue;
		}
		if (nb == 50000 && t >= START_US + 25 * SEC) {
			for (long k = 0; k < nb && done < events; k++, done++)
				if (mt_writer_collect(w, t, burst[k]) < 0) return -1;
			nb = -1;
		}
		int64_t old = ring[i % RING];
		ring[i % RING] = i % 16 ? id : 0;
		if (old > 0 && done < events) {
			if (mt_writer_collect(w, t, old) < 0) return -1;
			done++;
		}
	}
	return close_trace(w, f);
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--write")) return write_all(argv[2]) < 0 ? 1 : 0;
	if (argc == 4 && !strcmp(argv[1], "--write-big")) return write_big(argv[2], atol(argv[3])) < 0 ? 1 : 0;
	char dir[] = "/tmp/test_heapview.XXXXXX";
	if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
	CHECK("heapview_write_fixtures", write_all(dir) == 0);
	check_main(dir);
	check_nodebug(dir);
	check_wrappers(dir);
	check_malformed();
	CHECK("heapview_objects_rate1", hv_sample_objects(&(mt_trace_info){ .sample_rate = 1 }, 5, MT_SOURCE_MINOR) == 1);
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd)) {}
	return CHECK_DONE();
}
