/* A fork loop, as a hostile user's traced process could run under --follow-forks (issue 46):
 * memtraced must stay bounded in memory and in what it prints.
 *
 *   fork_loop DIR PER_SECOND LIFE_MS
 *
 * Creates DIR/ready, then until DIR/stop exists forks PER_SECOND children a second (paced in
 * 10 ms steps); each allocates 64 blocks of 100 bytes at child_site, lives LIFE_MS and exits 0.
 * The parent reaps them as they end, and writes how many it forked to DIR/forked at the end. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void *volatile sink;

static __attribute__((noinline)) void *child_site(size_t n)
{
	void *p = malloc(n);
	sink = p;
	return p;
}

static void child(int life_ms)
{
	for (int i = 0; i < 64; i++) child_site(100);
	usleep((useconds_t)life_ms * 1000);
	_exit(0);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: fork_loop DIR PER_SECOND LIFE_MS\n");
		return 2;
	}
	char stop[4096], path[4096];
	snprintf(stop, sizeof stop, "%s/stop", argv[1]);
	int per_s = atoi(argv[2]), life = atoi(argv[3]);
	snprintf(path, sizeof path, "%s/ready", argv[1]);
	FILE *f = fopen(path, "w");
	if (f) fclose(f);
	unsigned long forked = 0;
	int per_step = per_s / 100 > 0 ? per_s / 100 : 1;
	while (access(stop, F_OK) != 0) {
		for (int i = 0; i < per_step; i++) {
			pid_t p = fork();
			if (p == 0) child(life);
			if (p > 0) forked++;
		}
		while (waitpid(-1, NULL, WNOHANG) > 0) {}
		usleep(10000);
	}
	while (waitpid(-1, NULL, 0) > 0) {}
	snprintf(path, sizeof path, "%s/forked", argv[1]);
	f = fopen(path, "w");
	if (f) {
		fprintf(f, "%lu\n", forked);
		fclose(f);
	}
	return 0;
}
