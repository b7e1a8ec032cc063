/* Calls of each allocation function, counted by the program itself (tests/test_counts.sh): the
 * summary's "N allocations and M frees seen" must count each call once, as heaptrack does,
 * however the allocator reaches its other entry points inside (realloc(NULL, n) and
 * posix_memalign reaching malloc, reallocarray reaching realloc, operator new reaching malloc).
 *
 *   count_calls [FUNCTION]   FUNCTION: all (the default), none, or one of the names below
 *
 * Every run does the same set-up (libstdc++ dlopen'ed for operator new and delete, the output
 * buffer), so that a run's counts less those of "none" are the function's own. Prints
 * "truth allocs=A frees=F" for the calls of the function(s) made. */
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 5000

static void *volatile sink;
static unsigned long allocs, frees;

static void *(*op_new)(size_t), *(*op_new_array)(size_t), *(*op_new_aligned)(size_t, size_t);
static void (*op_delete)(void *), (*op_delete_array)(void *), (*op_delete_sized)(void *, size_t);
static void (*op_delete_aligned)(void *, size_t);

static void run_malloc(void) { for (int i = 0; i < N; i++) { sink = malloc(24 + i % 64); allocs++; free(sink); frees++; } }
static void run_calloc(void) { for (int i = 0; i < N; i++) { sink = calloc(3, 8 + i % 16); allocs++; free(sink); frees++; } }
static void run_realloc_null(void) /* realloc(NULL, n): an allocation */
{
	for (int i = 0; i < N; i++) { sink = realloc(NULL, 16 + i % 64); allocs++; free(sink); frees++; }
}
static void run_realloc_resize(void) /* a resize: an allocation and a free */
{
	for (int i = 0; i < N; i++) {
		sink = malloc(32);
		sink = realloc(sink, 4096 + i % 64);
		free(sink);
		allocs += 2, frees += 2;
	}
}
static void run_realloc_zero(void) /* realloc(p, 0): only a free (glibc returns NULL) */
{
	for (int i = 0; i < N; i++) { sink = malloc(40); allocs++; sink = realloc(sink, 0); frees++; free(sink); }
}
static void run_reallocarray(void) /* realloc inside */
{
	for (int i = 0; i < N; i++) {
		sink = reallocarray(NULL, 4, 8);
		sink = reallocarray(sink, 512, 8);
		free(sink);
		allocs += 2, frees += 2;
	}
}
static void run_posix_memalign_small(void) /* alignment <= 16: glibc calls malloc */
{
	for (int i = 0; i < N; i++) {
		void *p = NULL;
		if (posix_memalign(&p, 16, 32) == 0) allocs++;
		free(p);
		frees++;
	}
}
static void run_posix_memalign_large(void)
{
	for (int i = 0; i < N; i++) {
		void *p = NULL;
		if (posix_memalign(&p, 4096, 100) == 0) allocs++;
		free(p);
		frees++;
	}
}
static void run_aligned_alloc(void) { for (int i = 0; i < N; i++) { sink = aligned_alloc(64, 128); allocs++; free(sink); frees++; } }
static void run_memalign(void) { for (int i = 0; i < N; i++) { sink = memalign(256, 300); allocs++; free(sink); frees++; } }
static void run_valloc(void) { for (int i = 0; i < N; i++) { sink = valloc(100); allocs++; free(sink); frees++; } }
static void run_pvalloc(void) { for (int i = 0; i < N; i++) { sink = pvalloc(100); allocs++; free(sink); frees++; } }
static void run_new(void) { for (int i = 0; i < N; i++) { sink = op_new(48); allocs++; op_delete(sink); frees++; } }
static void run_new_array(void) { for (int i = 0; i < N; i++) { sink = op_new_array(96); allocs++; op_delete_array(sink); frees++; } }
static void run_delete_sized(void) { for (int i = 0; i < N; i++) { sink = op_new(48); allocs++; op_delete_sized(sink, 48); frees++; } }
static void run_new_aligned(void)
{
	for (int i = 0; i < N; i++) { sink = op_new_aligned(64, 128); allocs++; op_delete_aligned(sink, 64); frees++; }
}

static const struct { const char *name; void (*run)(void); } fns[] = {
	{"malloc", run_malloc}, {"calloc", run_calloc}, {"realloc_null", run_realloc_null},
	{"realloc_resize", run_realloc_resize}, {"realloc_zero", run_realloc_zero},
	{"reallocarray", run_reallocarray}, {"posix_memalign_small", run_posix_memalign_small},
	{"posix_memalign_large", run_posix_memalign_large}, {"aligned_alloc", run_aligned_alloc},
	{"memalign", run_memalign}, {"valloc", run_valloc}, {"pvalloc", run_pvalloc},
	{"new", run_new}, {"new_array", run_new_array}, {"delete_sized", run_delete_sized},
	{"new_aligned", run_new_aligned},
};

int main(int argc, char **argv)
{
	const char *want = argc > 1 ? argv[1] : "all";
	void *cxx = dlopen("libstdc++.so.6", RTLD_NOW);
	if (!cxx) {
		fprintf(stderr, "count_calls: %s\n", dlerror());
		return 2;
	}
	op_new = (void *(*)(size_t))dlsym(cxx, "_Znwm");
	op_new_array = (void *(*)(size_t))dlsym(cxx, "_Znam");
	op_new_aligned = (void *(*)(size_t, size_t))dlsym(cxx, "_ZnwmSt11align_val_t");
	op_delete = (void (*)(void *))dlsym(cxx, "_ZdlPv");
	op_delete_array = (void (*)(void *))dlsym(cxx, "_ZdaPv");
	op_delete_sized = (void (*)(void *, size_t))dlsym(cxx, "_ZdlPvm");
	op_delete_aligned = (void (*)(void *, size_t))dlsym(cxx, "_ZdlPvSt11align_val_t");
	if (!op_new || !op_new_array || !op_new_aligned || !op_delete || !op_delete_array ||
	    !op_delete_sized || !op_delete_aligned)
		return 2;
	printf("start\n"); /* stdout's buffer is made here, in every run */
	int found = strcmp(want, "none") == 0;
	for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
		if (strcmp(want, "all") == 0 || strcmp(want, fns[i].name) == 0) {
			fns[i].run();
			found = 1;
		}
	if (!found) {
		fprintf(stderr, "count_calls: unknown function %s\n", want);
		return 2;
	}
	printf("truth allocs=%lu frees=%lu\n", allocs, frees);
	return 0;
}
