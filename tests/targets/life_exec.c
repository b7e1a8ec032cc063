/* Lifecycle workload: a program that execs another one (tests/test_lifecycle.sh).
 *
 *   life_exec DIR N PROG ARGS...
 *
 * Waits for DIR/go-start (memtraced -p has attached; DIR/no-wait: at once), allocates N blocks of 40 bytes at before_exec_site (kept: live at the exec), prints
 * "truth before_exec_site N", waits for DIR/go-exec (the test sees the blocks in the trace: a
 * program gone within milliseconds leaves nothing to unwind its stacks against), then execs
 * PROG ARGS (life_exec_after). */
#include "life_common.h"

static void *kept[100000];

static NOINLINE void *before_exec_site(size_t n)
{
	void *p = malloc(n);
	memset(p, 1, n);
	return p;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: life_exec DIR N PROG ARGS...\n");
		return 2;
	}
	int n = atoi(argv[2]);
	char start[4096], nowait[4096];
	snprintf(start, sizeof start, "%s/go-start", argv[1]);
	snprintf(nowait, sizeof nowait, "%s/no-wait", argv[1]);
	touch(argv[1], "started", -1);
	wait_for(start, nowait);
	for (int i = 0; i < n && i < 100000; i++) kept[i] = before_exec_site(40);
	printf("truth before_exec_site %d\n", n);
	fflush(stdout);
	char go[4096];
	snprintf(go, sizeof go, "%s/go-exec", argv[1]);
	wait_for(go, NULL);
	execv(argv[3], &argv[3]);
	perror("life_exec: execv");
	return 1;
}
