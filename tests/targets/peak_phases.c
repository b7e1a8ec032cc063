/* A known peak (issue 22): build_peak() allocates 64 MiB in 64-byte blocks and holds them for
 * 0.4 s, then frees them; small_phase() then allocates 8 MiB in 4 KiB blocks kept to the end.
 * Prints the truth with wall-clock times (CLOCK_REALTIME, microseconds, as a trace's start):
 *   truth peak_bytes=B peak_us=T end_us=E
 * where T is when the last block of the peak was allocated and E the end of the run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#define MIB (1024 * 1024)
#define NOINLINE __attribute__((noinline))

static unsigned long long now_us(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (unsigned long long)tv.tv_sec * 1000000ull + (unsigned long long)tv.tv_usec;
}

static void **peak_blocks;
static unsigned long long peak_us;

NOINLINE void build_peak(void)
{
	size_t n = 64 * MIB / 64;
	peak_blocks = malloc(n * sizeof *peak_blocks);
	for (size_t i = 0; i < n; i++) {
		peak_blocks[i] = malloc(64);
		memset(peak_blocks[i], 1, 64);
	}
	peak_us = now_us();
}

NOINLINE void release_peak(void)
{
	for (size_t i = 0; i < 64 * MIB / 64; i++) free(peak_blocks[i]);
	free(peak_blocks);
}

NOINLINE void **small_phase(void)
{
	void **v = malloc(2048 * sizeof *v);
	for (int i = 0; i < 2048; i++) {
		v[i] = malloc(4096);
		memset(v[i], 2, 4096);
	}
	return v;
}

int main(void)
{
	usleep(200000);
	build_peak();
	usleep(400000);
	release_peak();
	usleep(200000);
	void **keep = small_phase();
	usleep(600000);
	printf("truth peak_bytes=%lu peak_us=%llu end_us=%llu\n",
	       (unsigned long)(64 * MIB + 64 * MIB / 64 * sizeof(void *)), peak_us, now_us());
	fflush(stdout);
	free(keep[0]); /* the rest stays live to the end */
	return 0;
}
