/* Known allocations through every entry point an allocator exports, for
 * tests/test_allocators.sh: malloc/calloc/realloc/free, every C++ operator new/delete form,
 * and jemalloc's *allocx API when the process has it (dlsym: LD_PRELOAD or compiled in).
 *
 *   alloc_workload DIR [N]    waits for DIR/go (so that a tracer can attach first; skipped
 *                             when DIR/go exists already), runs every operation N times
 *                             (default 20), prints the truth, creates DIR/done, then waits
 *                             for DIR/stop (so that the tracer reads its mappings while it
 *                             still runs) and exits 0.
 *
 * Each operation is its own extern "C" noinline function op_NAME, the only op_ frame on the
 * stacks of its allocations. The truth, one line per operation:
 *
 *   truth op_NAME CALLS WORDS LIVE_WORDS     (WORDS = sum of ceil(size / 8), LIVE_WORDS: of
 *                                            the blocks still allocated at the end)
 *   allocator NAME                           "jemalloc-api" when mallocx was found
 *
 * Sizes are distinct per operation, so a trace can be checked per function as well. The
 * aligned forms use multiples of the alignment: libstdc++'s aligned operator new rounds the
 * size up to one (aligned_alloc wants that), and with glibc the probe sees aligned_alloc's. */
#include <dlfcn.h>
#include <new>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static void *volatile sink;

struct truth {
	const char *name;
	unsigned long calls, words, live_words;
};
enum {
	T_MALLOC, T_CALLOC, T_REALLOC_FROM, T_REALLOC_TO, T_MALLOC_KEPT,
	T_NEW, T_NEW_SIZED, T_NEW_ARRAY, T_NEW_ARRAY_SIZED, T_NEW_NOTHROW, T_NEW_ARRAY_NOTHROW,
	T_NEW_ALIGNED, T_NEW_ALIGNED_SIZED, T_NEW_ARRAY_ALIGNED, T_NEW_ARRAY_ALIGNED_SIZED,
	T_NEW_ALIGNED_NOTHROW, T_NEW_ARRAY_ALIGNED_NOTHROW, T_NEW_OBJECT, T_NEW_KEPT,
	T_MALLOCX, T_MALLOCX_SIZED, T_RALLOCX_FROM, T_RALLOCX_TO, T_XALLOCX, T_COUNT
};
static struct truth truth[T_COUNT] = {
	{ "op_malloc" }, { "op_calloc" }, { "op_realloc_from" }, { "op_realloc_to" },
	{ "op_malloc_kept" }, { "op_new" }, { "op_new_sized" }, { "op_new_array" },
	{ "op_new_array_sized" }, { "op_new_nothrow" }, { "op_new_array_nothrow" },
	{ "op_new_aligned" }, { "op_new_aligned_sized" }, { "op_new_array_aligned" },
	{ "op_new_array_aligned_sized" }, { "op_new_aligned_nothrow" },
	{ "op_new_array_aligned_nothrow" }, { "op_new_object" }, { "op_new_kept" },
	{ "op_mallocx" }, { "op_mallocx_sized" }, { "op_rallocx_from" }, { "op_rallocx_to" },
	{ "op_xallocx" },
};

static void account(int t, size_t bytes, bool live)
{
	truth[t].calls++;
	truth[t].words += (bytes + 7) / 8;
	if (live) truth[t].live_words += (bytes + 7) / 8;
}

static const std::align_val_t al64 = std::align_val_t(64);

extern "C" {
NOINLINE void op_malloc(void) { void *p = malloc(48); sink = p; account(T_MALLOC, 48, false); free(p); }
NOINLINE void op_calloc(void) { void *p = calloc(4, 16); sink = p; account(T_CALLOC, 64, false); free(p); }
NOINLINE void *op_realloc_from(void) { void *p = malloc(32); sink = p; account(T_REALLOC_FROM, 32, false); return p; }
NOINLINE void op_realloc_to(void *p)
{
	p = realloc(p, 4000);   /* moves: a free of the old block, a new one */
	sink = p;
	account(T_REALLOC_TO, 4000, false);
	free(p);
}
static void *kept[64];
static int nkept;
NOINLINE void op_malloc_kept(void)
{
	void *p = malloc(56);
	sink = p;
	if (nkept < 64) kept[nkept++] = p;
	account(T_MALLOC_KEPT, 56, true);
}
NOINLINE void op_new(void) { void *p = ::operator new(72); sink = p; account(T_NEW, 72, false); ::operator delete(p); }
NOINLINE void op_new_sized(void) { void *p = ::operator new(80); sink = p; account(T_NEW_SIZED, 80, false); ::operator delete(p, 80); }
NOINLINE void op_new_array(void) { void *p = ::operator new[](88); sink = p; account(T_NEW_ARRAY, 88, false); ::operator delete[](p); }
NOINLINE void op_new_array_sized(void) { void *p = ::operator new[](104); sink = p; account(T_NEW_ARRAY_SIZED, 104, false); ::operator delete[](p, 104); }
NOINLINE void op_new_nothrow(void) { void *p = ::operator new(96, std::nothrow); sink = p; account(T_NEW_NOTHROW, 96, false); ::operator delete(p, std::nothrow); }
NOINLINE void op_new_array_nothrow(void) { void *p = ::operator new[](112, std::nothrow); sink = p; account(T_NEW_ARRAY_NOTHROW, 112, false); ::operator delete[](p, std::nothrow); }
NOINLINE void op_new_aligned(void) { void *p = ::operator new(128, al64); sink = p; account(T_NEW_ALIGNED, 128, false); ::operator delete(p, al64); }
NOINLINE void op_new_aligned_sized(void) { void *p = ::operator new(192, al64); sink = p; account(T_NEW_ALIGNED_SIZED, 192, false); ::operator delete(p, 192, al64); }
NOINLINE void op_new_array_aligned(void) { void *p = ::operator new[](256, al64); sink = p; account(T_NEW_ARRAY_ALIGNED, 256, false); ::operator delete[](p, al64); }
NOINLINE void op_new_array_aligned_sized(void) { void *p = ::operator new[](320, al64); sink = p; account(T_NEW_ARRAY_ALIGNED_SIZED, 320, false); ::operator delete[](p, 320, al64); }
NOINLINE void op_new_aligned_nothrow(void) { void *p = ::operator new(384, al64, std::nothrow); sink = p; account(T_NEW_ALIGNED_NOTHROW, 384, false); ::operator delete(p, al64, std::nothrow); }
NOINLINE void op_new_array_aligned_nothrow(void) { void *p = ::operator new[](448, al64, std::nothrow); sink = p; account(T_NEW_ARRAY_ALIGNED_NOTHROW, 448, false); ::operator delete[](p, al64, std::nothrow); }
}

struct object { char bytes[176]; };
static object *volatile kept_object;
extern "C" {
/* what a C++ program writes: new T (operator new) and delete (sized operator delete) */
NOINLINE void op_new_object(void) { object *o = new object(); sink = o; account(T_NEW_OBJECT, sizeof(object), false); delete o; }
NOINLINE void op_new_kept(void) { object *o = new object(); kept_object = o; account(T_NEW_KEPT, sizeof(object), true); }
}

#ifdef LINKED_JEMALLOC
/* jemalloc compiled in (libjemalloc.a): its API is not exported, so no dlsym */
extern "C" void *mallocx(size_t, int);
extern "C" void *rallocx(void *, size_t, int);
extern "C" size_t xallocx(void *, size_t, size_t, int);
extern "C" void dallocx(void *, int);
extern "C" void sdallocx(void *, size_t, int);
#endif
/* jemalloc's API, found at run time (LD_PRELOAD: the workload is not linked with it) */
static void *(*je_mallocx)(size_t, int);
static void *(*je_rallocx)(void *, size_t, int);
static size_t (*je_xallocx)(void *, size_t, size_t, int);
static void (*je_dallocx)(void *, int);
static void (*je_sdallocx)(void *, size_t, int);
#define MALLOCX_ZERO 0x40
/* Linked with jemalloc: the calls go to it directly (through the GOT when it is a shared
 * library, where memtraced --inject redirects them); else through the pointers found. */
#ifdef LINKED_JEMALLOC
#define JE(f) f
#else
#define JE(f) je_##f
#endif

extern "C" {
NOINLINE void op_mallocx(void) { void *p = JE(mallocx)(184, 0); sink = p; account(T_MALLOCX, 184, false); JE(dallocx)(p, 0); }
NOINLINE void op_mallocx_sized(void) { void *p = JE(mallocx)(192, MALLOCX_ZERO); sink = p; account(T_MALLOCX_SIZED, 192, false); JE(sdallocx)(p, 192, 0); }
NOINLINE void *op_rallocx_from(void) { void *p = JE(mallocx)(64, 0); sink = p; account(T_RALLOCX_FROM, 64, false); return p; }
NOINLINE void *op_rallocx_to(void *p) { p = JE(rallocx)(p, 5000, 0); sink = p; account(T_RALLOCX_TO, 5000, false); return p; }
/* shrinks in place: xallocx returns the usable size, >= the size asked for when resized */
NOINLINE void op_xallocx(void *p)
{
	size_t usable = JE(xallocx)(p, 4096, 0, 0);
	if (usable >= 4096) account(T_XALLOCX, 4096, false);   /* else unchanged */
	JE(dallocx)(p, 0);
}
}

static bool exists(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

static void wait_for(const char *dir, const char *name)
{
	while (!exists(dir, name)) usleep(10000);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: alloc_workload DIR [N]\n");
		return 2;
	}
	const char *dir = argv[1];
	int n = argc > 2 ? atoi(argv[2]) : 20;
	if (n <= 0 || n > 1000000) {
		fprintf(stderr, "alloc_workload: N must be in 1..1000000, not '%s'\n", argv[2]);
		return 2;
	}
	je_mallocx = (void *(*)(size_t, int))dlsym(RTLD_DEFAULT, "mallocx");
	je_rallocx = (void *(*)(void *, size_t, int))dlsym(RTLD_DEFAULT, "rallocx");
	je_xallocx = (size_t(*)(void *, size_t, size_t, int))dlsym(RTLD_DEFAULT, "xallocx");
	je_dallocx = (void (*)(void *, int))dlsym(RTLD_DEFAULT, "dallocx");
	je_sdallocx = (void (*)(void *, size_t, int))dlsym(RTLD_DEFAULT, "sdallocx");
#ifdef LINKED_JEMALLOC
	je_mallocx = mallocx;
	je_rallocx = rallocx;
	je_xallocx = xallocx;
	je_dallocx = dallocx;
	je_sdallocx = sdallocx;
#endif
	bool jemalloc_api = je_mallocx && je_rallocx && je_xallocx && je_dallocx && je_sdallocx;
	wait_for(dir, "go");

	for (int i = 0; i < n; i++) {
		op_malloc();
		op_calloc();
		op_realloc_to(op_realloc_from());
		op_malloc_kept();
		op_new();
		op_new_sized();
		op_new_array();
		op_new_array_sized();
		op_new_nothrow();
		op_new_array_nothrow();
		op_new_aligned();
		op_new_aligned_sized();
		op_new_array_aligned();
		op_new_array_aligned_sized();
		op_new_aligned_nothrow();
		op_new_array_aligned_nothrow();
		op_new_object();
		if (jemalloc_api) {
			op_mallocx();
			op_mallocx_sized();
			op_xallocx(op_rallocx_to(op_rallocx_from()));
		}
	}
	op_new_kept();

	if (jemalloc_api) printf("allocator jemalloc-api\n");
	for (int t = 0; t < T_COUNT; t++)
		if (truth[t].calls)
			printf("truth %s %lu %lu %lu\n", truth[t].name, truth[t].calls, truth[t].words,
			       truth[t].live_words);
	fflush(stdout);
	char path[4096];
	snprintf(path, sizeof(path), "%s/done", dir);
	FILE *f = fopen(path, "w");
	if (f) fclose(f);
	wait_for(dir, "stop");
	return 0;
}
