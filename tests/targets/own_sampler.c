/* A program that carries an in-process sampler of its own (as one linked with libdatadog's
 * heap sampler would): it links libownsampler.so (memtraced's sampler built under another
 * name, see the Makefile) and starts it itself at every word, so that plain `memtraced -p`
 * finds the otel_memory probes and traces through them (tests/test_inject_trace.sh).
 *
 *   own_sampler DIR    waits for DIR/go, runs op_own (100 x malloc(40), freed) and op_own_kept
 *                      (10 x calloc(3, 8), kept), prints the truth as alloc_workload does,
 *                      creates DIR/done, waits for DIR/stop. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

long memtraced_sampler_start(unsigned long mean_gap_bytes, unsigned long flags);

#define NOINLINE __attribute__((noinline, noclone))
static void *volatile sink;
static void *kept[10];

NOINLINE void op_own(void) { void *p = malloc(40); sink = p; free(p); }
NOINLINE void *op_own_kept(void) { void *p = calloc(3, 8); sink = p; return p; }

static int exists(const char *dir, const char *name)
{
	char p[4200];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) return 2;
	if (memtraced_sampler_start(8, 1) < 0) { /* every word: exact at memtraced --rate 1 */
		fprintf(stderr, "own_sampler: the sampler did not start\n");
		return 2;
	}
	while (!exists(argv[1], "go")) usleep(20000);
	for (int i = 0; i < 100; i++) op_own();
	for (int i = 0; i < 10; i++) kept[i] = op_own_kept();
	printf("truth op_own 100 500 0\ntruth op_own_kept 10 30 30\n");
	fflush(stdout);
	char done[4200];
	snprintf(done, sizeof done, "%s/done", argv[1]);
	FILE *f = fopen(done, "w");
	if (f) fclose(f);
	while (!exists(argv[1], "stop")) usleep(20000);
	return 0;
}
