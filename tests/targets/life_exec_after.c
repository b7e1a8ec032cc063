/* Lifecycle workload: the program life_exec execs (tests/test_lifecycle.sh).
 *
 *   life_exec_after DIR M
 *
 * Creates DIR/execd, waits for DIR/go-after (memtraced follows the exec; meanwhile a block is
 * allocated and freed at waiting_site every 10 ms, so that the test can see in the new trace
 * that memtraced follows and unwinds this program), then allocates M
 * blocks of 72 bytes at after_exec_site, frees half of them, prints
 * "truth after_exec_site M" and exits 0. */
#include "life_common.h"

static void *kept[100000];

static NOINLINE void waiting_site(void)
{
	char *volatile p = malloc(16);
	p[0] = 1;
	free(p);
}

static NOINLINE void *after_exec_site(size_t n)
{
	void *p = malloc(n);
	memset(p, 2, n);
	return p;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: life_exec_after DIR M\n");
		return 2;
	}
	const char *dir = argv[1];
	int m = atoi(argv[2]);
	char go[4096];
	snprintf(go, sizeof go, "%s/go-after", dir);
	touch(dir, "execd", -1);
	for (int i = 0; i < 6000 && access(go, F_OK) != 0; i++) {
		waiting_site();
		usleep(10000);
	}
	for (int i = 0; i < m && i < 100000; i++) kept[i] = after_exec_site(72);
	for (int i = 0; i < m && i < 100000; i += 2) free(kept[i]);
	printf("truth after_exec_site %d\n", m);
	return 0;
}
