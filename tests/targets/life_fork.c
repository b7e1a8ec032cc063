/* Lifecycle workload: a process that forks children that allocate (tests/test_lifecycle.sh).
 *
 *   life_fork DIR K P C
 *
 * Allocates P blocks of 24 bytes at parent_site (kept), then forks K children one after the
 * other. Each child creates DIR/child.PID, waits for DIR/go.PID or DIR/go-all (the test
 * creates it once memtraced traces the child, or at once), allocates C blocks of 56 bytes at
 * child_site (kept) and exits 0. A thread is started and joined too (a thread is no new
 * process). The parent waits for each child, then for DIR/go-exit (the test sees its first
 * blocks in its trace: the unwinder is ready), allocates P more blocks at parent_site and
 * exits 0, printing "truth parent_site 2P" and "truth child_site C" (per child). */
#include <pthread.h>
#include <sys/wait.h>

#include "life_common.h"

static void *kept[200000];
static int nkept;

static NOINLINE void *parent_site(size_t n)
{
	void *p = malloc(n);
	memset(p, 3, n);
	return p;
}

static NOINLINE void *child_site(size_t n)
{
	void *p = malloc(n);
	memset(p, 4, n);
	return p;
}

static void *thread_main(void *arg)
{
	return arg;
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: life_fork DIR K P C\n");
		return 2;
	}
	const char *dir = argv[1];
	int k = atoi(argv[2]), p = atoi(argv[3]), c = atoi(argv[4]);
	for (int i = 0; i < p && nkept < 200000; i++) kept[nkept++] = parent_site(24);
	pthread_t th;
	if (pthread_create(&th, NULL, thread_main, NULL) == 0) pthread_join(th, NULL);
	for (int j = 0; j < k; j++) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid < 0) {
			perror("life_fork: fork");
			return 1;
		}
		if (pid == 0) {
			char go[4096], all[4096];
			snprintf(go, sizeof go, "%s/go.%d", dir, (int)getpid());
			snprintf(all, sizeof all, "%s/go-all", dir);
			touch(dir, "child", getpid());
			wait_for(go, all);
			for (int i = 0; i < c && nkept < 200000; i++) kept[nkept++] = child_site(56);
			_exit(0);
		}
		int st;
		while (waitpid(pid, &st, 0) < 0) {}
	}
	char go[4096];
	snprintf(go, sizeof go, "%s/go-exit", dir);
	wait_for(go, NULL);
	for (int i = 0; i < p && nkept < 200000; i++) kept[nkept++] = parent_site(24);
	printf("truth parent_site %d\n", 2 * p);
	printf("truth child_site %d\n", c);
	return 0;
}
