/* Lifecycle workload: the program life_exec execs (tests/test_lifecycle.sh).
 *
 *   life_exec_after DIR M
 *
 * Creates DIR/execd, waits for DIR/go-after (memtraced follows the exec), then allocates M
 * blocks of 72 bytes at after_exec_site, frees half of them, prints
 * "truth after_exec_site M" and exits 0. */
#include "life_common.h"

static void *kept[100000];

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
	wait_for(go, NULL);
	for (int i = 0; i < m && i < 100000; i++) kept[i] = after_exec_site(72);
	for (int i = 0; i < m && i < 100000; i += 2) free(kept[i]);
	printf("truth after_exec_site %d\n", m);
	return 0;
}
