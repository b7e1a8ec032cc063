/* Forks while --inject attaches (tests/test_inject_safety.sh, issue 34): a child forked while
 * the sampler's walk held ld.so's dl_load_write_lock inherited it held, and its next dlopen or
 * dl_iterate_phdr never returned.
 *
 *   inject_forker DIR LIB...
 *
 * dlopens every LIB (distinct files: many objects make the walk long), prints "ready", then
 * until DIR/stop exists forks children one after the other; each child walks the loaded
 * objects (dl_iterate_phdr), dlopens the first LIB again and exits 0. A child still running
 * after 5 s has hung: it is killed and counted. Prints "result ok forks=N" or
 * "result FAILED hung=H forks=N" and exits 0 or 1. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int count(struct dl_phdr_info *info, size_t size, void *data)
{
	(*(int *)data)++;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) return 2;
	for (int i = 2; i < argc; i++)
		if (!dlopen(argv[i], RTLD_NOW)) {
			printf("result FAILED dlopen %s: %s\n", argv[i], dlerror());
			return 1;
		}
	char stop[4096];
	snprintf(stop, sizeof stop, "%s/stop", argv[1]);
	printf("ready\n");
	fflush(stdout);
	long forks = 0, hung = 0;
	while (access(stop, F_OK) != 0) {
		pid_t c = fork();
		if (c < 0) continue;
		if (c == 0) {
			int n = 0;
			dl_iterate_phdr(count, &n);
			_exit(dlopen(argv[2], RTLD_NOW) && n > argc - 2 ? 0 : 3);
		}
		forks++;
		int st = 0, i;
		for (i = 0; i < 5000 && waitpid(c, &st, WNOHANG) == 0; i++) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
		if (i == 5000) {
			hung++;
			char path[64], what[256] = "";
			snprintf(path, sizeof path, "/proc/%d/syscall", (int)c);
			FILE *f = fopen(path, "r");
			if (f && fgets(what, sizeof what, f)) what[strcspn(what, "\n")] = 0;
			if (f) fclose(f);
			printf("hung child %d: syscall %s\n", (int)c, what);
			fflush(stdout);
			kill(c, SIGKILL);
			waitpid(c, &st, 0);
		}
	}
	if (hung) printf("result FAILED hung=%ld forks=%ld\n", hung, forks);
	else printf("result ok forks=%ld\n", forks);
	return hung ? 1 : 0;
}
