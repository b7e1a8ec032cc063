/* Workload of tests/test_e2e.sh: malloc called from known call chains, traced with BPF.
 *
 *   e2e_chain run N        N rounds of the chain below, then exit 0
 *   e2e_chain wait DIR     create DIR/ready, then a round every millisecond until DIR/stop
 *                          exists (for memtraced -p)
 *   e2e_chain fast DIR     as wait, without the pause; prints "rounds R" at the end
 *   e2e_chain bigframe N   N rounds through a function with a 12 KiB local buffer
 *   e2e_chain alloca N     N rounds through a function with a 32 KiB alloca
 *
 * The chain of a round: main -> chain_outer -> [chain_inline, inlined] -> chain_middle ->
 * chain_leaf -> malloc(CHAIN_SIZE). bigframe: main -> big_frame -> chain_leaf -> malloc;
 * alloca: main -> alloca_frame -> chain_leaf -> malloc. The test reads the expected line of
 * each call site from its "CALL:name" marker comment: keep every marker on its call's line.
 * Built -O2 -g without frame pointers, like stacks_deep.c; the test also builds it -no-pie and
 * with its debug info split off. */
#include <alloca.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOIPA __attribute__((noipa))
#define KEEP(x) __asm__ volatile("" : "+r"(x))

#define CHAIN_SIZE 4040  /* a size no libc internals allocate: the test finds samples by it */
#define BIG_FRAME 12288  /* a frame of 12 KiB: the whole stack still fits a 16 KiB copy */
#define HUGE_ALLOCA 32768 /* deeper than the 16 KiB copy: the unwind ends truncated */

NOIPA void *chain_leaf(size_t size)
{
	void *p = malloc(size); /* CALL:chain_leaf */
	KEEP(p);
	return p;
}

NOIPA void *chain_middle(size_t size)
{
	void *p = chain_leaf(size); /* CALL:chain_middle */
	KEEP(p);
	return p;
}

static inline __attribute__((always_inline)) void *chain_inline(size_t size)
{
	void *p = chain_middle(size); /* CALL:chain_inline */
	KEEP(p);
	return p;
}

NOIPA void *chain_outer(size_t size)
{
	void *p = chain_inline(size); /* CALL:chain_outer */
	KEEP(p);
	return p;
}

/* A large frame on the path: the buffer is written, so its pages are resident (the BPF side
 * copies only resident stack). */
NOIPA void *big_frame(size_t size)
{
	volatile char buf[BIG_FRAME];
	for (size_t i = 0; i < sizeof buf; i += 512)
		buf[i] = (char)i;
	void *p = chain_leaf(size); /* CALL:big_frame */
	KEEP(p);
	return buf[size % sizeof buf] ? p : p;
}

NOIPA void *alloca_frame(size_t size)
{
	char *buf = alloca(HUGE_ALLOCA);
	memset(buf, 1, HUGE_ALLOCA);
	KEEP(buf);
	void *p = chain_leaf(size); /* CALL:alloca_frame */
	KEEP(p);
	return buf[size % HUGE_ALLOCA] ? p : NULL;
}

static int exists(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

static void touch(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	if (f)
		fclose(f);
}

static int usage(void)
{
	fprintf(stderr, "usage: e2e_chain run N | wait DIR | fast DIR | bigframe N | alloca N\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		return usage();
	const char *mode = argv[1];
	if (!strcmp(mode, "wait") || !strcmp(mode, "fast")) {
		int pause = !strcmp(mode, "wait");
		struct timespec ms = {0, 1000000};
		unsigned long rounds = 0;
		touch(argv[2], "ready");
		while (!exists(argv[2], "stop")) {
			for (int i = 0; i < (pause ? 1 : 1000); i++) {
				free(chain_outer(CHAIN_SIZE)); /* CALL:main_wait */
				rounds++;
			}
			if (pause)
				nanosleep(&ms, NULL);
		}
		printf("rounds %lu\n", rounds);
		return 0;
	}
	long n = atol(argv[2]);
	if (n <= 0)
		return usage();
	for (long i = 0; i < n; i++) {
		if (!strcmp(mode, "run"))
			free(chain_outer(CHAIN_SIZE)); /* CALL:main_run */
		else if (!strcmp(mode, "bigframe"))
			free(big_frame(CHAIN_SIZE)); /* CALL:main_bigframe */
		else if (!strcmp(mode, "alloca"))
			free(alloca_frame(CHAIN_SIZE)); /* CALL:main_alloca */
		else
			return usage();
	}
	return 0;
}
