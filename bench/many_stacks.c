/* many_stacks: N allocations from N distinct call stacks, kept live, for the cost of serving a
 * profile of many stacks (bench/run.sh's serve section, scrape_ms).
 *
 *   many_stacks N        (N <= 65536) prints "ready" once its probes are live (--wait-probes
 *                        as micro_alloc: waits for SIGUSR1), allocates, prints "done", then
 *                        sleeps until killed
 *
 * Allocation k goes down 16 levels; at level i it calls left() or right() by bit i of k, each
 * a distinct frame, so every k has its own stack. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define DEPTH 16
#define NOINLINE __attribute__((noinline, noclone))

static void *volatile sink;
static void **kept;
static volatile int go;
static void on_go(int sig) { (void)sig; go = 1; }

static NOINLINE int down(int level, unsigned k);

static NOINLINE int left(int level, unsigned k) { int r = down(level + 1, k); sink = &r; return r + 1; }
static NOINLINE int right(int level, unsigned k) { int r = down(level + 1, k); sink = &r; return r + 2; }

static NOINLINE int down(int level, unsigned k)
{
	if (level == DEPTH) {
		kept[k] = malloc(64);
		sink = kept[k];
		return 0;
	}
	int r = (k >> level) & 1 ? right(level, k) : left(level, k);
	sink = &r;
	return r;
}

int main(int argc, char **argv)
{
	unsigned n = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 10000;
	if (n == 0 || n > 65536) {
		fprintf(stderr, "usage: many_stacks N (1..65536)\n");
		return 2;
	}
	kept = calloc(n, sizeof *kept);
	signal(SIGUSR1, on_go);
	printf("ready pid=%d\n", (int)getpid());
	fflush(stdout);
	while (!go) usleep(10000);
	for (unsigned k = 0; k < n; k++) down(0, k);
	printf("done\n");
	fflush(stdout);
	for (;;) pause();
}
