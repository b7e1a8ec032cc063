/* The live view's table logic (user/daemon/core/entry/status.h): live counters of contexts grouped by
 * their leaf site or function, merged across tries, largest first; byte formatting. */
#include "check.h"
#include "entry/status.h"
#include "model/trie.h"

#include <stdlib.h>
#include <string.h>

/* Codes 1..4: two sites of "leak" (lines 10 and 11 of a.c), one of "temp", one unknown. */
static int fake_locations(void *ctx, uint64_t code, const mt_location **locs)
{
	static const mt_location tab[][2] = {
		{{.line = 5, .filename = "/src/main.c", .defname = "main"},
		 {.line = 10, .filename = "/src/a.c", .defname = "leak"}},
		{{.line = 5, .filename = "/src/main.c", .defname = "main"},
		 {.line = 11, .filename = "/src/a.c", .defname = "leak"}},
		{{.line = 20, .filename = "/src/b.c", .defname = "temp"}},
	};
	static const int n[] = {2, 2, 1};
	(void)ctx;
	if (code < 1 || code > 3) return -1;
	*locs = tab[code - 1];
	return n[code - 1];
}

static uint64_t key;

static void alloc_at(struct trie *t, const uint64_t *codes, size_t n, uint64_t nsamples)
{
	uint32_t node = trie_intern(t, codes, n);
	key++;
	trie_block_alloc(t, key, key, node, nsamples * 8, nsamples);
}

int main(void)
{
	struct trie *t = trie_new(1.0);
	struct trie *u = trie_new(1.0);
	if (!t || !u) return 1;
	/* leaf 1 under two different callers, leaf 2, leaf 3 (freed later), leaf 4 (unknown) */
	alloc_at(t, (uint64_t[]){100, 1}, 2, 40);
	alloc_at(t, (uint64_t[]){200, 1}, 2, 30);
	alloc_at(t, (uint64_t[]){100, 2}, 2, 20);
	alloc_at(t, (uint64_t[]){100, 3}, 2, 500);
	uint64_t freed_key = key;
	alloc_at(t, (uint64_t[]){100, 4}, 2, 5);
	alloc_at(t, NULL, 0, 1); /* no stack: the root */
	trie_block_free(t, freed_key, NULL);
	alloc_at(u, (uint64_t[]){300, 3}, 2, 7); /* another process, same code */

	const struct trie *one[] = {t};
	int dummy;
	void *ctx[] = {&dummy}; /* a NULL context is a finished session: never asked */
	struct status_site *s = NULL;
	uint64_t total = 0;
	long n = status_top_sites(one, ctx, 1, fake_locations, false, &s, &total);
	CHECKF("by_site_count", n == 4, "%ld sites", n);
	CHECKF("by_site_total", total == 40 + 30 + 20 + 5 + 1, "total %llu", (unsigned long long)total);
	CHECKF("by_site_order_and_merge", n >= 1 && s[0].live_nsamples == 70 && s[0].live_blocks == 2 &&
	       strcmp(s[0].name, "leak a.c:10") == 0, "first '%s' %llu", n >= 1 ? s[0].name : "",
	       n >= 1 ? (unsigned long long)s[0].live_nsamples : 0ULL);
	CHECKF("by_site_second", n >= 2 && strcmp(s[1].name, "leak a.c:11") == 0 && s[1].live_nsamples == 20,
	       "second '%s'", n >= 2 ? s[1].name : "");
	CHECKF("freed_site_gone", n >= 0 && !(n > 0 && strstr(s[0].name, "temp")), "temp still listed");
	bool unknown = false, nostack = false;
	for (long i = 0; i < n; i++) {
		if (strncmp(s[i].name, "<unknown code", 13) == 0 && s[i].live_nsamples == 5) unknown = true;
		if (strcmp(s[i].name, "<no stack>") == 0 && s[i].live_nsamples == 1) nostack = true;
	}
	CHECK("unknown_code_named", unknown);
	CHECK("no_stack_named", nostack);
	free(s);

	n = status_top_sites(one, ctx, 1, fake_locations, true, &s, &total);
	CHECKF("by_function_merges_lines", n == 3 && strcmp(s[0].name, "leak a.c") == 0 &&
	       s[0].live_nsamples == 90 && s[0].live_blocks == 3, "%ld sites, first '%s'", n,
	       n > 0 ? s[0].name : "");
	free(s);

	const struct trie *two[] = {t, NULL, u};
	void *ctx3[] = {&dummy, NULL, &dummy};
	n = status_top_sites(two, ctx3, 3, fake_locations, false, &s, &total);
	CHECKF("several_tries_merged", n == 5 && total == 103 && strcmp(s[0].name, "leak a.c:10") == 0,
	       "%ld sites, total %llu", n, (unsigned long long)total);
	bool temp = false;
	for (long i = 0; i < n; i++)
		if (strcmp(s[i].name, "temp b.c:20") == 0 && s[i].live_nsamples == 7) temp = true;
	CHECK("several_tries_site_of_second", temp);
	free(s);

	n = status_top_sites(two, ctx3, 3, NULL, false, &s, &total);
	CHECK("no_names_no_crash", n == 5);
	free(s);
	const struct trie *none[] = {NULL};
	n = status_top_sites(none, ctx3, 1, fake_locations, false, &s, &total);
	CHECK("no_trie_empty", n == 0 && total == 0);
	free(s);

	char b[32];
	CHECK("bytes_b", strcmp(status_format_bytes(512, b, sizeof b), "512 B") == 0);
	CHECK("bytes_kib", strcmp(status_format_bytes(1536, b, sizeof b), "1.50 KiB") == 0);
	CHECK("bytes_mib", strcmp(status_format_bytes(12.3 * 1048576, b, sizeof b), "12.3 MiB") == 0);
	CHECK("bytes_gib", strcmp(status_format_bytes(300.0 * 1073741824, b, sizeof b), "300 GiB") == 0);

	/* no terminal here (run.sh logs to a file): no status line, no view */
	struct status_view *v = (struct status_view *)1;
	char err[256] = "";
	struct status_opts o = {.line = true};
	CHECK("no_view_without_terminal", status_open(&o, &v, err, sizeof err) == 0 && v == NULL);
	CHECK("update_null_view", status_update(NULL, NULL, NULL, 0) == 0);
	status_close(NULL);

	trie_free(t);
	trie_free(u);
	return CHECK_DONE();
}
