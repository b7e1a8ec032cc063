/* The library the injector tests place into running targets (tests/unit/test_inject.c).
 * Its constructor counts its runs and reports them in $INJECT_PROBE_MARK: "ctor pid=P".
 * With $INJECT_PROBE_COUNTERS ("ADDRESS N", set by the multi-threaded target) it samples
 * the target's N worker counters, sleeps 200 ms on the injected thread and samples them
 * again: the other threads must have kept counting ("workers B1 B2... -> A1 A2..."). Both
 * it and inject_probe_value scribble over the vector registers and MXCSR, so that a restore
 * that misses them is seen. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int inject_probe_ctor_runs;

static void scribble(void)
{
	unsigned int mxcsr = 0x1f80; /* the default: not the target's round-toward-zero */
	__asm__ volatile("ldmxcsr %0\n\t"
	                 "pcmpeqd %%xmm0, %%xmm0\n\tpcmpeqd %%xmm7, %%xmm7\n\t"
	                 "pcmpeqd %%xmm8, %%xmm8\n\tpcmpeqd %%xmm15, %%xmm15\n\t"
	                 : : "m"(mxcsr) : "xmm0", "xmm7", "xmm8", "xmm15");
}

static void mark(const char *fmt, long a, long b)
{
	const char *path = getenv("INJECT_PROBE_MARK");
	if (!path) return;
	char line[256];
	int n = snprintf(line, sizeof(line), fmt, a, b);
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) return;
	if (write(fd, line, n) != n) {}
	close(fd);
}

__attribute__((constructor)) static void probe_init(void)
{
	inject_probe_ctor_runs++;
	scribble();
	mark("ctor pid=%ld runs=%ld\n", (long)getpid(), inject_probe_ctor_runs);
	const char *ctr = getenv("INJECT_PROBE_COUNTERS");
	if (!ctr) return;
	unsigned long addr;
	int n;
	if (sscanf(ctr, "%lx %d", &addr, &n) != 2 || n < 1 || n > 8) return;
	volatile unsigned long *c = (volatile unsigned long *)addr;
	unsigned long before[8], after[8];
	for (int i = 0; i < n; i++) before[i] = c[i];
	struct timespec t = { 0, 200 * 1000 * 1000 };
	nanosleep(&t, NULL);
	for (int i = 0; i < n; i++) after[i] = c[i];
	int advanced = 0;
	for (int i = 0; i < n; i++) advanced += after[i] > before[i];
	mark("workers advanced=%ld of %ld\n", advanced, n);
}

long inject_probe_value(long x)
{
	scribble();
	return x * 3 + 7;
}
