/* micro_alloc: the micro-benchmark workload. A malloc/free loop that times itself.
 *
 *   micro_alloc [--mode 32|mix] [--iters N] [--cpu C] [--warmup-ms MS] [--wait-probes] [--timeout S]
 *
 * Pins itself to CPU C (default 0), then with --wait-probes prints "ready pid=PID" and waits
 * until a tracer has attached (a uprobe rewrites the first bytes of malloc and of free in this
 * process's copy of libc, which we can see) or SIGUSR1 arrives, then runs N malloc/free pairs
 * and prints "ns_per_pair=X" (CLOCK_MONOTONIC around the loop).
 * --warmup-ms runs the loop untimed for that long first (heaptrack, preloaded, is slow for its
 * first second or two while its interpreter process starts; attached tracers are not).
 * Modes: "32" = malloc(32)+free; "mix" = a ring of 256 live blocks, each iteration frees the
 * oldest and allocates a new one with a size from a fixed mix (16 B .. 4 KiB).
 * Exit status: 0 ok, 2 bad usage, 3 no tracer seen within the timeout. */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WATCH_BYTES 16 /* memtraced probes free a few bytes after its entry (after the NULL test) */

static volatile sig_atomic_t go_signal;
static void on_usr1(int sig) { (void)sig; go_signal = 1; }

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Keeps the compiler from eliding a malloc/free pair whose block is never used. */
static inline void escape(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

static int wait_for_probes(double timeout_s)
{
	const unsigned char *fn[2] = { dlsym(RTLD_DEFAULT, "malloc"), dlsym(RTLD_DEFAULT, "free") };
	unsigned char before[2][WATCH_BYTES];
	if (!fn[0] || !fn[1]) {
		fprintf(stderr, "micro_alloc: cannot find malloc/free with dlsym: %s\n", dlerror());
		return -1;
	}
	for (int i = 0; i < 2; i++) memcpy(before[i], fn[i], WATCH_BYTES);
	printf("ready pid=%d\n", (int)getpid());
	fflush(stdout);
	double start = now_ns();
	while (!go_signal) {
		if (memcmp(before[0], fn[0], WATCH_BYTES) && memcmp(before[1], fn[1], WATCH_BYTES)) {
			/* Both probed; let a tracer attaching several sites finish. */
			usleep(300 * 1000);
			break;
		}
		if (now_ns() - start > timeout_s * 1e9) {
			fprintf(stderr, "micro_alloc: no probe on malloc and free after %.0f s\n", timeout_s);
			return -1;
		}
		usleep(10 * 1000);
	}
	printf("attached_after_ms=%.0f\n", (now_ns() - start) / 1e6);
	return 0;
}

static double run_32(long iters)
{
	double t0 = now_ns();
	for (long i = 0; i < iters; i++) {
		void *p = malloc(32);
		escape(p);
		free(p);
	}
	return (now_ns() - t0) / iters;
}

static double run_mix(long iters)
{
	static const size_t sizes[] = { 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 4096, 40 };
	enum { RING = 256 };
	void *ring[RING] = { 0 };
	double t0 = now_ns();
	for (long i = 0; i < iters; i++) {
		unsigned slot = i % RING;
		free(ring[slot]);
		ring[slot] = malloc(sizes[i % (sizeof sizes / sizeof sizes[0])]);
		escape(ring[slot]);
	}
	double per = (now_ns() - t0) / iters;
	for (int i = 0; i < RING; i++) free(ring[i]);
	return per;
}

int main(int argc, char **argv)
{
	const char *mode = "32";
	long iters = 100000;
	int cpu = 0, wait = 0;
	double timeout_s = 120, warmup_ms = 0;
	static const struct option opts[] = {
		{ "mode", required_argument, 0, 'm' },  { "iters", required_argument, 0, 'n' },
		{ "cpu", required_argument, 0, 'c' },   { "wait-probes", no_argument, 0, 'w' },
		{ "timeout", required_argument, 0, 't' }, { "warmup-ms", required_argument, 0, 'W' },
		{ 0, 0, 0, 0 },
	};
	for (int c; (c = getopt_long(argc, argv, "m:n:c:wt:W:", opts, NULL)) != -1;) {
		switch (c) {
		case 'm': mode = optarg; break;
		case 'n': iters = strtol(optarg, NULL, 10); break;
		case 'c': cpu = atoi(optarg); break;
		case 'w': wait = 1; break;
		case 't': timeout_s = atof(optarg); break;
		case 'W': warmup_ms = atof(optarg); break;
		default: fprintf(stderr, "usage: micro_alloc [--mode 32|mix] [--iters N] [--cpu C] [--warmup-ms MS] [--wait-probes] [--timeout S]\n"); return 2;
		}
	}
	if (iters <= 0 || (strcmp(mode, "32") && strcmp(mode, "mix"))) {
		fprintf(stderr, "micro_alloc: --iters must be > 0 and --mode 32 or mix (got %ld, %s)\n", iters, mode);
		return 2;
	}
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set))
		fprintf(stderr, "micro_alloc: cannot pin to CPU %d: %s (running unpinned)\n", cpu, strerror(errno));
	signal(SIGUSR1, on_usr1);
	/* Warm the allocator (first-touch page faults) before anything is timed. */
	double (*run)(long) = strcmp(mode, "32") ? run_mix : run_32;
	double warm_start = now_ns();
	do run(1000);
	while (now_ns() - warm_start < warmup_ms * 1e6);
	if (wait && wait_for_probes(timeout_s)) return 3;
	double per = run(iters);
	printf("ns_per_pair=%.1f\n", per);
	return 0;
}
