/* Known allocation sites, for memtraced's end-to-end tests (tests/test_memtraced.sh).
 *
 *   sites run N          each site allocates a known number of bytes (N calls per site, more
 *                        for the small-block site); prints the truth (see below) on stdout
 *   sites threads T N    T threads each allocate and free N blocks, all freed at the end
 *   sites wait DIR       allocates and frees in a loop until DIR/stop exists (DIR/ready is
 *                        created once it runs); prints a fixed checksum and exits with 3
 *
 * Built like a distro binary (-O2, no frame pointers). Every allocation sits in its own
 * noinline function that does work after the call (no tail call, so the frame stays), one
 * path goes through an always_inline helper. Lines are recorded with __LINE__ on the very line
 * of each call, and printed as the truth the checker compares the trace with:
 *
 *   truth SITE FUNC LINE TOTAL_BYTES LIVE_BYTES CALLS TOTAL_WORDS LIVE_WORDS
 *   chain SITE FRAME FRAME ...          outermost first; FRAME is func@line, an inlined
 *                                       frame is outer@line&inner@line
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))
#define MAX_BLOCKS (1 << 20)

static void *volatile sink; /* keeps the compiler from dropping or merging allocations */
static void **kept;          /* blocks live until exit */
static size_t n_kept;

enum { S_SMALL, S_KEPT, S_CALLOC, S_INLINE, S_DEEP, S_REALLOC_FROM, S_REALLOC_TO, S_COUNT };
static const char *site_name[S_COUNT] = {"small_freed", "kept", "calloc_half", "inlined_freed",
					  "deep_half", "realloc_from", "realloc_to"};
static const char *site_func[S_COUNT] = {"site_small", "site_kept", "site_calloc", "helper_inline",
					  "deep3", "site_realloc", "site_realloc"};
static int site_line[S_COUNT];
static uint64_t total[S_COUNT], words[S_COUNT], live[S_COUNT], live_words[S_COUNT], calls[S_COUNT];
/* lines of the calls on each chain */
static int l_main_run, l_run_small, l_run_kept, l_run_calloc, l_run_inline, l_run_deep,
	l_run_realloc, l_inline_call, l_deep1_call, l_deep2_call;

static void keep(void *p)
{
	if (n_kept < MAX_BLOCKS) kept[n_kept++] = p;
}

static void account(int site, size_t bytes, int kept_live)
{
	total[site] += bytes;
	words[site] += (bytes + 7) / 8;
	calls[site]++;
	if (kept_live) {
		live[site] += bytes;
		live_words[site] += (bytes + 7) / 8;
	}
}

static NOINLINE void site_small(size_t n)
{
	char *p = malloc(n); site_line[S_SMALL] = __LINE__;
	p[0] = 1;
	sink = p;
	account(S_SMALL, n, 0);
	free(p);
}

static NOINLINE void site_kept(size_t n)
{
	char *p = malloc(n); site_line[S_KEPT] = __LINE__;
	memset(p, 2, 64);
	keep(p);
	account(S_KEPT, n, 1);
}

static NOINLINE void site_calloc(size_t count, int keep_it)
{
	char *p = calloc(count, 16); site_line[S_CALLOC] = __LINE__;
	p[1] = 3;
	account(S_CALLOC, count * 16, keep_it);
	if (keep_it) keep(p);
	else { sink = p; free(p); }
}

static inline __attribute__((always_inline)) char *helper_inline(size_t n)
{
	char *p = malloc(n); site_line[S_INLINE] = __LINE__;
	p[0] = 4;
	return p;
}

static NOINLINE void site_inline(size_t n)
{
	char *p = helper_inline(n); l_inline_call = __LINE__;
	sink = p;
	account(S_INLINE, n, 0);
	free(p);
}

static NOINLINE void deep3(size_t n, int keep_it)
{
	char *p = malloc(n); site_line[S_DEEP] = __LINE__;
	p[0] = 5;
	account(S_DEEP, n, keep_it);
	if (keep_it) keep(p);
	else { sink = p; free(p); }
}

static NOINLINE void deep2(size_t n, int keep_it)
{
	deep3(n, keep_it); l_deep2_call = __LINE__;
	sink = NULL;
}

static NOINLINE void deep1(size_t n, int keep_it)
{
	deep2(n + 0, keep_it); l_deep1_call = __LINE__;
	sink = NULL;
}

static NOINLINE void site_realloc(size_t from, size_t n, int keep_it)
{
	char *p = malloc(from); site_line[S_REALLOC_FROM] = __LINE__;
	p[0] = 6;
	account(S_REALLOC_FROM, from, 0); /* realloc ends it (moved, or collect + alloc in place) */
	char *q = realloc(p, n); site_line[S_REALLOC_TO] = __LINE__;
	q[n - 1] = 7;
	account(S_REALLOC_TO, n, keep_it);
	if (keep_it) keep(q);
	else { sink = q; free(q); }
}

/* Deterministic sizes: a simple LCG, so every run allocates the same. */
static uint32_t lcg = 12345;
static size_t rnd(size_t lo, size_t hi)
{
	lcg = lcg * 1103515245u + 12345u;
	return lo + (lcg >> 8) % (hi - lo + 1);
}

static NOINLINE void run_sites(long n)
{
	for (long i = 0; i < 8 * n; i++) {
		site_small(rnd(100, 400)); l_run_small = __LINE__;
	}
	for (long i = 0; i < n; i++) {
		site_kept(4000); l_run_kept = __LINE__;
		site_calloc(rnd(64, 256), i % 2); l_run_calloc = __LINE__;
		site_inline(rnd(1024, 4096)); l_run_inline = __LINE__;
		deep1(rnd(1000, 3000), i % 2 == 0); l_run_deep = __LINE__;
		site_realloc(rnd(1000, 3000), rnd(4000, 8000), i % 4 == 0); l_run_realloc = __LINE__;
	}
}

static void print_truth(void)
{
	for (int s = 0; s < S_COUNT; s++)
		printf("truth %s %s %d %llu %llu %llu %llu %llu\n", site_name[s], site_func[s],
		       site_line[s], (unsigned long long)total[s], (unsigned long long)live[s],
		       (unsigned long long)calls[s], (unsigned long long)words[s],
		       (unsigned long long)live_words[s]);
	printf("chain small_freed main@%d run_sites@%d site_small@%d\n", l_main_run, l_run_small,
	       site_line[S_SMALL]);
	printf("chain kept main@%d run_sites@%d site_kept@%d\n", l_main_run, l_run_kept,
	       site_line[S_KEPT]);
	printf("chain calloc_half main@%d run_sites@%d site_calloc@%d\n", l_main_run, l_run_calloc,
	       site_line[S_CALLOC]);
	printf("chain inlined_freed main@%d run_sites@%d site_inline@%d&helper_inline@%d\n",
	       l_main_run, l_run_inline, l_inline_call, site_line[S_INLINE]);
	printf("chain deep_half main@%d run_sites@%d deep1@%d deep2@%d deep3@%d\n", l_main_run,
	       l_run_deep, l_deep1_call, l_deep2_call, site_line[S_DEEP]);
	printf("chain realloc_from main@%d run_sites@%d site_realloc@%d\n", l_main_run,
	       l_run_realloc, site_line[S_REALLOC_FROM]);
	printf("chain realloc_to main@%d run_sites@%d site_realloc@%d\n", l_main_run,
	       l_run_realloc, site_line[S_REALLOC_TO]);
}

static long thread_iters;

static NOINLINE void *thread_alloc(void *arg)
{
	uintptr_t seed = (uintptr_t)arg * 7919 + 1;
	void *batch[64];
	for (long i = 0; i < thread_iters; i += 64) {
		for (int k = 0; k < 64; k++) {
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			batch[k] = malloc(32 + (seed >> 40) % 2000);
			((char *)batch[k])[0] = (char)k;
		}
		for (int k = 0; k < 64; k++) free(batch[k]);
	}
	return NULL;
}

static int run_threads(int nthreads, long iters)
{
	pthread_t th[64];
	if (nthreads < 1 || nthreads > 64) return 2;
	thread_iters = iters;
	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&th[i], NULL, thread_alloc, (void *)(uintptr_t)i)) return 1;
	for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);
	printf("threads %d x %ld allocations done\n", nthreads, iters);
	return 0;
}

static NOINLINE uint64_t wait_round(void)
{
	uint64_t sum = 0;
	char *p[32];
	for (int k = 0; k < 32; k++) {
		p[k] = malloc(64 + 32 * k);
		memset(p[k], k, 64 + 32 * k);
	}
	for (int k = 0; k < 32; k++) {
		for (int j = 0; j < 64 + 32 * k; j++) sum = sum * 31 + (unsigned char)p[k][j];
		free(p[k]);
	}
	return sum;
}

static int run_wait(const char *dir)
{
	char ready[4096], stop[4096];
	snprintf(ready, sizeof ready, "%s/ready", dir);
	snprintf(stop, sizeof stop, "%s/stop", dir);
	uint64_t first = wait_round(), bad = 0;
	FILE *f = fopen(ready, "w");
	if (!f) return 2;
	fclose(f);
	struct stat st;
	while (stat(stop, &st) != 0)
		for (int i = 0; i < 100; i++)
			if (wait_round() != first) bad++;
	printf("wait: checksum %016llx, %llu bad rounds\n", (unsigned long long)first,
	       (unsigned long long)bad);
	return 3;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "run") == 0) {
		kept = malloc(MAX_BLOCKS * sizeof *kept);
		run_sites(atol(argv[2])); l_main_run = __LINE__;
		print_truth();
		fflush(stdout);
		return 0; /* the kept blocks are still live when the process exits */
	}
	if (argc == 4 && strcmp(argv[1], "threads") == 0) return run_threads(atoi(argv[2]), atol(argv[3]));
	if (argc == 3 && strcmp(argv[1], "wait") == 0) return run_wait(argv[2]);
	fprintf(stderr, "usage: sites run N | sites threads T N | sites wait DIR\n");
	return 2;
}
