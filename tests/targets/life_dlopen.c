/* Lifecycle workload: allocations through an allocator loaded with dlopen
 * (tests/test_lifecycle.sh).
 *
 *   life_dlopen DIR LIB N
 *
 * Allocates N blocks of 48 bytes with libc's malloc at libc_site, then dlopen(LIB,
 * RTLD_NOW | RTLD_LOCAL) (Debian's libjemalloc.so.2), creates DIR/opened, waits for DIR/go
 * (memtraced has probed the library), then allocates N blocks of 88 bytes through
 * dlsym(lib, "malloc") at dl_site, frees half through dlsym(lib, "free"), prints
 * "truth dl_site N" and "truth libc_site N", exits 0. */
#include <dlfcn.h>

#include "life_common.h"

static void *kept[100000];

static NOINLINE void *libc_site(size_t n)
{
	void *p = malloc(n);
	memset(p, 5, n);
	return p;
}

static void *(*dl_malloc)(size_t);
static void (*dl_free)(void *);

static NOINLINE void *dl_site(size_t n)
{
	void *p = dl_malloc(n);
	memset(p, 6, n);
	return p;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: life_dlopen DIR LIB N\n");
		return 2;
	}
	const char *dir = argv[1];
	int n = atoi(argv[3]);
	if (n > 100000) n = 100000;
	for (int i = 0; i < n; i++) kept[i] = libc_site(48);
	void *lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "life_dlopen: %s\n", dlerror());
		return 1;
	}
	dl_malloc = (void *(*)(size_t))dlsym(lib, "malloc");
	dl_free = (void (*)(void *))dlsym(lib, "free");
	if (!dl_malloc || !dl_free) {
		fprintf(stderr, "life_dlopen: %s has no malloc/free\n", argv[2]);
		return 1;
	}
	char go[4096];
	snprintf(go, sizeof go, "%s/go", dir);
	touch(dir, "opened", -1);
	wait_for(go, NULL);
	for (int i = 0; i < n; i++) kept[i] = dl_site(88);
	for (int i = 0; i < n; i += 2) dl_free(kept[i]);
	printf("truth dl_site %d\n", n);
	printf("truth libc_site %d\n", n);
	return 0;
}
