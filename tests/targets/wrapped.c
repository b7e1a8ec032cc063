/* Allocations through an xmalloc-style wrapper called from two functions
 * (tests/test_wrappers.sh): parse_request allocates 3x what build_reply does, both through
 * xmalloc; a third function, keep_log, calls malloc directly.
 *
 *   wrapped N    N rounds; prints "done" and exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))

static void *volatile sink;

NOINLINE void *xmalloc(size_t n)
{
	void *p = malloc(n);
	if (!p) abort();
	memset(p, 0, n);
	return p;
}

static NOINLINE void parse_request(void) { sink = xmalloc(3 * 4096); free(sink); }
static NOINLINE void build_reply(void) { sink = xmalloc(4096); free(sink); }
static NOINLINE void keep_log(void) { sink = malloc(512); free(sink); }

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	for (int i = 0; i < n; i++) {
		parse_request();
		build_reply();
		keep_log();
	}
	puts("done");
	return 0;
}
