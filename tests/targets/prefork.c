/* A prefork server, as nginx, postgres or gunicorn run (issue 36): the parent forks N workers
 * that never exec; each allocates at worker_site every millisecond until DIR/stop exists.
 * SIGHUP reloads: the workers are stopped and N new ones forked. The parent writes the
 * workers' pids to DIR/workers (one a line, rewritten at each reload) and then DIR/ready (or
 * DIR/reloaded). "prefork DIR N". */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_WORKERS 64

static volatile sig_atomic_t reload;
static void *volatile sink;

static __attribute__((noinline)) void *worker_site(size_t n)
{
	void *p = malloc(n);
	sink = p;
	return p;
}

static void worker(const char *stop)
{
	while (access(stop, F_OK) != 0) {
		for (int i = 0; i < 10; i++) free(worker_site(64 + i));
		usleep(1000);
	}
	_exit(0);
}

static void on_hup(int sig) { (void)sig; reload = 1; }

static int start(pid_t *w, int n, const char *dir, const char *stop, const char *tag)
{
	char path[4096], tmp[4200];
	for (int i = 0; i < n; i++) {
		w[i] = fork();
		if (w[i] == 0) worker(stop);
		if (w[i] < 0) return -1;
	}
	snprintf(path, sizeof path, "%s/workers", dir);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f) return -1;
	for (int i = 0; i < n; i++) fprintf(f, "%d\n", (int)w[i]);
	fclose(f);
	rename(tmp, path);
	snprintf(path, sizeof path, "%s/%s", dir, tag);
	f = fopen(path, "w");
	if (f) fclose(f);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: prefork DIR N\n");
		return 2;
	}
	int n = atoi(argv[2]);
	if (n < 1 || n > MAX_WORKERS) return 2;
	char stop[4096];
	snprintf(stop, sizeof stop, "%s/stop", argv[1]);
	signal(SIGHUP, on_hup);
	pid_t w[MAX_WORKERS];
	if (start(w, n, argv[1], stop, "ready") < 0) return 1;
	while (access(stop, F_OK) != 0) {
		if (reload) {
			reload = 0;
			for (int i = 0; i < n; i++) kill(w[i], SIGTERM);
			for (int i = 0; i < n; i++) waitpid(w[i], NULL, 0);
			if (start(w, n, argv[1], stop, "reloaded") < 0) return 1;
		}
		usleep(10000);
	}
	for (int i = 0; i < n; i++) waitpid(w[i], NULL, 0);
	return 0;
}
