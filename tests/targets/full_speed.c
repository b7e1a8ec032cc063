/* A program allocating as fast as it can, for tests/test_backpressure.sh: the pipeline must
 * keep up with it under --inject, or thin its samples (never drop them) with estimates that
 * stay true.
 *
 *   full_speed SECONDS
 *
 * Allocates blocks of 16..271 bytes (a fixed pseudo-random sequence) in a ring of 4096 live
 * ones, each replacing the oldest (freed), for SECONDS, on one thread, through one call site;
 * frees the ring, prints "truth bytes B allocs N" (B: the bytes asked of malloc), exits 0. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define RING 4096

static void *ring[RING];

static __attribute__((noinline)) void *churn_site(size_t n)
{
	char *p = malloc(n);
	if (p) p[0] = (char)n; /* used: not optimized away */
	return p;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 3;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	unsigned long long bytes = 0, allocs = 0;
	unsigned x = 2463534242u;
	for (;;) {
		for (int i = 0; i < 4096; i++) {
			x ^= x << 13, x ^= x >> 17, x ^= x << 5;
			size_t n = 16 + (x & 255);
			unsigned slot = (unsigned)(allocs % RING);
			free(ring[slot]);
			ring[slot] = churn_site(n);
			bytes += n;
			allocs++;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 >= seconds) break;
	}
	for (int i = 0; i < RING; i++) free(ring[i]);
	printf("truth bytes %llu allocs %llu\n", bytes, allocs);
	return 0;
}
