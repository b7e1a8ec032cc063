/* A service-like workload for the service-mode tests (tests/test_service.sh): one slowly
 * leaking site among steady churn.
 *
 *   service_leak DIR SECONDS LEAK_BYTES_PER_SEC [TICK_MS]
 *
 * Prefills a bounded cache, creates DIR/ready, then waits for DIR/go (so that a tracer can
 * attach first; DIR/stop ends the wait too) and runs SECONDS (or until DIR/stop appears, or SIGTERM/SIGINT) in 10 ms ticks (TICK_MS: a quieter service, the same work per tick):
 *   leak_site       LEAK_BYTES_PER_SEC / 100 bytes per tick in 256..1791-byte blocks, never freed
 *   handle_request  60 temporary buffers of 32..4127 bytes per tick, freed in the same tick
 *   cache_refresh   a cache of 256 entries of 1 KiB, 16 entries replaced per tick (steady)
 * Prints its truth on exit and on SIGUSR2: "truth leak LIVE_BYTES BLOCKS" (the leak since DIR/go),
 * "truth cache LIVE_BYTES", "truth ticks N" and "truth requests BYTES" (what handle_request
 * allocated). Exits 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))
#define CACHE_ENTRIES 256
#define CACHE_ENTRY_BYTES 1024

static volatile sig_atomic_t stop, print_truth;
static void on_stop(int sig) { stop = 1; }
static void on_truth(int sig) { print_truth = 1; }

static unsigned long long leak_bytes, leak_blocks, ticks, request_bytes;
static void *cache[CACHE_ENTRIES];
static unsigned cache_next;
static unsigned rng = 12345;
static volatile unsigned char sink;

static unsigned next_rand(void)
{
	rng = rng * 1103515245u + 12345u;
	return rng >> 8;
}

static NOINLINE void leak_site(size_t bytes)
{
	char *p = malloc(bytes);
	if (!p) return;
	p[0] = 1; /* never freed: the leak */
	leak_bytes += bytes;
	leak_blocks++;
}

static NOINLINE void handle_request(void)
{
	size_t n = 32 + next_rand() % 4096;
	char *buf = malloc(n);
	if (!buf) return;
	request_bytes += n;
	memset(buf, 7, n < 64 ? n : 64);
	sink = buf[n / 2 < 64 ? n / 2 : 0];
	free(buf);
}

static NOINLINE void cache_refresh(void)
{
	unsigned i = cache_next++ % CACHE_ENTRIES;
	free(cache[i]);
	cache[i] = malloc(CACHE_ENTRY_BYTES);
	if (cache[i]) memset(cache[i], (int)i, 16);
}

static void truth(void)
{
	unsigned long long cache_live = 0;
	for (unsigned i = 0; i < CACHE_ENTRIES; i++) cache_live += cache[i] ? CACHE_ENTRY_BYTES : 0;
	printf("truth leak %llu %llu\ntruth cache %llu\ntruth ticks %llu\ntruth requests %llu\n",
	       leak_bytes, leak_blocks, cache_live, ticks, request_bytes);
	fflush(stdout);
}

static int exists(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

int main(int argc, char **argv)
{
	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: %s DIR SECONDS LEAK_BYTES_PER_SEC [TICK_MS]\n", argv[0]);
		return 2;
	}
	unsigned tick_us = argc == 5 ? (unsigned)(atof(argv[4]) * 1000) : 10000;
	const char *dir = argv[1];
	double seconds = atof(argv[2]);
	double leak_rate = atof(argv[3]);
	struct sigaction sa = {.sa_handler = on_stop};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = on_truth;
	sigaction(SIGUSR2, &sa, NULL);

	for (unsigned i = 0; i < CACHE_ENTRIES; i++) cache_refresh();
	char path[4096];
	snprintf(path, sizeof path, "%s/ready", dir);
	FILE *f = fopen(path, "w");
	if (f) fclose(f);
	while (!stop && !exists(dir, "go") && !exists(dir, "stop")) usleep(10000);

	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	double leak_per_tick = leak_rate / 100, owed = 0;
	while (!stop) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 >= seconds) break;
		if (ticks % 10 == 0 && exists(dir, "stop")) break;
		for (owed += leak_per_tick; owed >= 256;) {
			size_t n = 256 + next_rand() % 1536;
			leak_site(n);
			owed -= (double)n;
		}
		for (int i = 0; i < 60; i++) handle_request();
		for (int i = 0; i < 16; i++) cache_refresh();
		ticks++;
		if (print_truth) {
			print_truth = 0;
			truth();
		}
		usleep(tick_us);
	}
	truth();
	return 0;
}
