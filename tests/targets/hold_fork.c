/* Forks children that allocate at once and exit within milliseconds (tests/test_exec_hold.sh:
 * memtraced --follow-forks must hold each child at its start until its probes are in place).
 *
 *   hold_fork N K    N children, one after the other; each allocates K blocks of 48 bytes at
 *                    child_site (K/2 freed), then exits 0. Prints "truth child_site K K/2" and
 *                    each child's pid ("child PID"). Exits 0 when every child did. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static void *volatile sink;

static NOINLINE void *child_site(size_t n)
{
	void *p = malloc(n);
	sink = p;
	return p;
}

static void child(int k)
{
	void **kept = calloc((size_t)k, sizeof *kept);
	for (int i = 0; i < k; i++) kept[i] = child_site(48);
	for (int i = 0; i < k; i += 2) free(kept[i]);
	_exit(0);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: hold_fork N K\n");
		return 2;
	}
	int n = atoi(argv[1]), k = atoi(argv[2]);
	printf("truth child_site %d %d\n", k, k / 2);
	fflush(stdout);
	int bad = 0;
	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		if (pid < 0) return 1;
		if (pid == 0) child(k);
		printf("child %d\n", (int)pid);
		fflush(stdout);
		int st;
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) bad++;
	}
	return bad ? 1 : 0;
}
