/* capture_workload: known allocations for tests/unit/test_tracer.c.
 *
 *   capture_workload SCENARIO
 *
 * Prints "ready pid=PID malloc=ADDR" and waits for a line on stdin (the tracer attaches
 * meanwhile), runs the scenario, prints "done", waits for another line, exits 0.
 * Scenarios (what the test expects is written next to each):
 *   basic    100 mallocs of 24 + 8*i bytes, the even ones freed; calloc(10, 100); a realloc
 *            chain realloc(NULL,100) -> 200 -> 5000 -> 300000 (mmap) -> free; posix_memalign
 *            (64, 1000) freed; aligned_alloc(64, 512) kept; failed malloc(1 << 62).
 *   threads  8 threads x 1000 malloc(64), then each frees its blocks.
 *   fork     the child mallocs 500 x 777 bytes and exits; the parent then mallocs 10 x 555.
 *   large    50000 blocks cycling 16..8192 bytes (204,808,000 bytes in total), each freed.
 *   churn    2000 x malloc(100)/free pairs.
 *   reallocnull  20000 x realloc(NULL, 4096) (glibc tail-jumps to malloc) + free: 81,920,000
 *            bytes, to be counted once at low rates too.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Keeps the compiler from eliding an allocation whose block is never used. */
static inline void escape(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

static void wait_line(void)
{
	char buf[64];
	if (!fgets(buf, sizeof(buf), stdin))
		exit(0);
}

static void basic(void)
{
	static void *blocks[100];
	for (int i = 0; i < 100; i++) {
		blocks[i] = malloc(24 + 8 * i);
		escape(blocks[i]);
	}
	for (int i = 0; i < 100; i += 2)
		free(blocks[i]);
	void *c = calloc(10, 100);
	escape(c);
	void *volatile null = NULL; /* or gcc turns realloc(NULL, n) into malloc(n) */
	void *r = realloc(null, 100);
	r = realloc(r, 200);
	r = realloc(r, 5000);
	r = realloc(r, 300000);
	escape(r);
	free(r);
	void *m = NULL;
	if (posix_memalign(&m, 64, 1000) == 0)
		free(m);
	void *a = aligned_alloc(64, 512);
	escape(a);
	void *volatile huge = malloc((size_t)1 << 62); /* fails: no record */
	escape(huge);
}

static void *thread_main(void *arg)
{
	void *blocks[1000];
	for (int i = 0; i < 1000; i++) {
		blocks[i] = malloc(64);
		escape(blocks[i]);
	}
	for (int i = 0; i < 1000; i++)
		free(blocks[i]);
	return arg;
}

static void threads(void)
{
	pthread_t th[8];
	for (int i = 0; i < 8; i++)
		pthread_create(&th[i], NULL, thread_main, NULL);
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
}

static void forked(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		for (int i = 0; i < 500; i++)
			escape(malloc(777));
		_exit(0);
	}
	waitpid(pid, NULL, 0);
	for (int i = 0; i < 10; i++)
		escape(malloc(555));
}

static void large(void)
{
	for (int i = 0; i < 50000; i++) {
		void *p = malloc(16 + (size_t)(i % 512) * 16);
		escape(p);
		free(p);
	}
}

static void churn(void)
{
	for (int i = 0; i < 2000; i++) {
		void *p = malloc(100);
		escape(p);
		free(p);
	}
}

static void reallocnull(void)
{
	void *volatile null = NULL;
	for (int i = 0; i < 20000; i++) {
		void *p = realloc(null, 4096);
		escape(p);
		free(p);
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: capture_workload basic|threads|fork|large|churn|reallocnull\n");
		return 2;
	}
	printf("ready pid=%d malloc=%p\n", (int)getpid(), (void *)malloc);
	fflush(stdout);
	wait_line();
	const char *s = argv[1];
	if (!strcmp(s, "basic")) basic();
	else if (!strcmp(s, "threads")) threads();
	else if (!strcmp(s, "fork")) forked();
	else if (!strcmp(s, "large")) large();
	else if (!strcmp(s, "churn")) churn();
	else if (!strcmp(s, "reallocnull")) reallocnull();
	else {
		fprintf(stderr, "capture_workload: unknown scenario %s\n", s);
		return 2;
	}
	printf("done\n");
	fflush(stdout);
	wait_line();
	return 0;
}
