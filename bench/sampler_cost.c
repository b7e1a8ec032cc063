/* sampler_cost: what libmemtraced_sampler.so costs a malloc(32)+free pair in this process.
 *
 *   sampler_cost [--iters N] [--rounds R] [--lib PATH]
 *
 * Interleaved rounds (pinned to CPU 0) of: untouched (the library stopped: every GOT slot holds
 * its old value again, as before it was loaded), then with the library started: semaphores 0 (loaded, no tracer: pass-through), semaphores 1 at the
 * default rate (1e-5 per word: mean gap 800000 bytes) and at 1e-4 (80000). The semaphores are
 * raised by hand: the USDT sites stay nops, so this is the sampler's own cost, not a tracer's.
 * Prints one "key=value" line per mode: the median ns per pair over the rounds. */
#include <dlfcn.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline void escape(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double pairs(long iters)
{
	double t0 = now_ns();
	for (long i = 0; i < iters; i++) {
		void *p = malloc(32);
		escape(p);
		free(p);
	}
	return (now_ns() - t0) / iters;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

#define MODES 4
#define MAX_ROUNDS 64
static const char *mode_key[MODES] = { "none_ns_per_pair", "sampler_sem0_ns_per_pair",
				       "sampler_rate1e-5_ns_per_pair", "sampler_rate1e-4_ns_per_pair" };
static const unsigned long mode_gap[MODES] = { 0, 800000, 800000, 80000 };

int main(int argc, char **argv)
{
	long iters = 20000000;
	int rounds = 5;
	char lib[PATH_MAX];
	const char *build = getenv("BUILD");
	snprintf(lib, sizeof lib, "%s/lib/libmemtraced_sampler.so", build && *build ? build : "build");
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--iters")) iters = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--lib")) snprintf(lib, sizeof lib, "%s", argv[i + 1]);
	}
	if (rounds < 1 || rounds > MAX_ROUNDS || iters < 1) {
		fprintf(stderr, "usage: sampler_cost [--iters N] [--rounds 1..%d] [--lib PATH]\n", MAX_ROUNDS);
		return 2;
	}
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	sched_setaffinity(0, sizeof set, &set);
	double t[MODES][MAX_ROUNDS];
	pairs(iters / 4); /* warm up the allocator */
	char real[PATH_MAX];
	void *h = realpath(lib, real) ? dlopen(real, RTLD_NOW) : NULL;
	long (*start)(unsigned long, unsigned long) = h ? dlsym(h, "memtraced_sampler_start") : NULL;
	long (*stop)(void) = h ? dlsym(h, "memtraced_sampler_stop") : NULL;
	volatile unsigned short *sa = h ? dlsym(h, "otel_memory_alloc_semaphore") : NULL;
	volatile unsigned short *sf = h ? dlsym(h, "otel_memory_free_semaphore") : NULL;
	if (!start || !stop || !sa || !sf) {
		fprintf(stderr, "sampler_cost: cannot load %s\n", lib);
		return 1;
	}
	for (int r = 0; r < rounds; r++) {
		for (int m = 0; m < MODES; m++) {
			*sa = *sf = m > 1;
			if (m == 0)
				stop();
			else
				start(mode_gap[m], 0);
			t[m][r] = pairs(iters);
		}
	}
	long restored = stop();
	for (int m = 0; m < MODES; m++) {
		qsort(t[m], rounds, sizeof(double), cmp_double);
		printf("%s=%.2f\n", mode_key[m], t[m][rounds / 2]);
	}
	printf("sampler_slots_restored=%ld\n", restored);
	return 0;
}
