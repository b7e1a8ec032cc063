/* Workload of tests/unit/test_stacks.c: reaches a known call chain and stops itself in
 * fake_alloc (see stacks_fake_alloc.h) three times:
 *   1, 2: main -> level1 -> level2 -> [inline_helper, inlined] -> level3 -> recurse x (DEPTH+1)
 *         -> fake_alloc, from the same call sites both times;
 *   3:    main -> via_libc -> qsort (libc) -> ... -> compare -> fake_alloc;
 *   4:    main -> via_dlopen -> deflateInit_ (libz, dlopen'd after the first stop, no DWARF)
 *         -> ... -> zalloc_hook -> fake_alloc.
 * The test finds the expected line of each call site by its "CALL:name" marker comment, so
 * keep every marker on the line of its call. Built -O2 -g without frame pointers. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "stacks_fake_alloc.h"

#define DEPTH 4

NOIPA long recurse(int n, long size)
{
	long r;
	if (n == 0)
		r = fake_alloc(size); /* CALL:fake_alloc */
	else
		r = recurse(n - 1, size); /* CALL:recurse */
	KEEP(r);
	return r + 1;
}

NOIPA long level3(long size)
{
	long r = recurse(DEPTH, size); /* CALL:level3 */
	KEEP(r);
	return r + 3;
}

static inline __attribute__((always_inline)) long inline_helper(long size)
{
	long r = level3(size * 2); /* CALL:inline_helper */
	KEEP(r);
	return r ^ 5;
}

NOIPA long level2(long size)
{
	long r = inline_helper(size + 1); /* CALL:level2 */
	KEEP(r);
	return r - 2;
}

NOIPA long level1(long size)
{
	long r = level2(size); /* CALL:level1 */
	KEEP(r);
	return r + 1;
}

static volatile int stop_in_compare;

NOIPA static int compare(const void *a, const void *b)
{
	if (stop_in_compare) {
		stop_in_compare = 0;
		long r = fake_alloc(8); /* CALL:compare */
		KEEP(r);
	}
	return *(const int *)a - *(const int *)b;
}

NOIPA void via_libc(void)
{
	int v[8] = {5, 3, 7, 1, 2, 8, 6, 4};
	stop_in_compare = 1;
	qsort(v, 8, sizeof v[0], compare); /* CALL:via_libc */
	KEEP(v[0]);
}

static volatile int stop_in_zalloc;

NOIPA static voidpf zalloc_hook(voidpf opaque, uInt items, uInt size)
{
	if (stop_in_zalloc) {
		stop_in_zalloc = 0;
		long r = fake_alloc((long)items * size); /* CALL:zalloc */
		KEEP(r);
	}
	return calloc(items, size);
}

static void zfree_hook(voidpf opaque, voidpf p)
{
	free(p);
}

/* libz is not linked in: it appears in the maps only with this dlopen. */
NOIPA void via_dlopen(void)
{
	void *h = dlopen("libz.so.1", RTLD_NOW);
	int (*init)(z_streamp, int, const char *, int) = h ? dlsym(h, "deflateInit_") : NULL;
	int (*end)(z_streamp) = h ? dlsym(h, "deflateEnd") : NULL;
	if (!init || !end) {
		fake_alloc(-1); /* the test sees a stop here: libz missing */
		return;
	}
	z_stream zs;
	memset(&zs, 0, sizeof zs);
	zs.zalloc = zalloc_hook;
	zs.zfree = zfree_hook;
	stop_in_zalloc = 1;
	if (init(&zs, 6, ZLIB_VERSION, (int)sizeof zs) == Z_OK) /* CALL:via_dlopen */
		end(&zs);
}

/* volatile: the loop must not be unrolled, both samples come from one call instruction */
static volatile int rounds = 2;

int main(void)
{
	long total = 0;
	for (int i = 0; i < rounds; i++) {
		long r = level1(i); /* CALL:main */
		KEEP(r);
		total += r;
	}
	via_libc(); /* CALL:main_libc */
	via_dlopen(); /* CALL:main_dlopen */
	return total == 42; /* any value: keeps total alive */
}
