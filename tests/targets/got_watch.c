/* Where does this program's malloc lead now? (issue 47: a killed memtraced must not leave the
 * sampler's wrappers in its GOT).
 *
 *   got_watch DIR
 *
 * Every 50 ms: 20000 malloc/free pairs, then the object that the GOT's malloc address lies in
 * (dladdr of &malloc, read from the GOT at each turn) written to DIR/malloc_in ("libc.so.6",
 * "libmemtraced_sampler.so"). Creates DIR/ready; runs until DIR/stop exists. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile sink;

/* &malloc from the GOT each time it is called (not hoisted out of the loop) */
static __attribute__((noinline)) void *malloc_address(void)
{
	void *(*volatile m)(size_t) = malloc;
	return (void *)m;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: got_watch DIR\n");
		return 2;
	}
	char path[4096], tmp[4200], stop[4096];
	snprintf(stop, sizeof stop, "%s/stop", argv[1]);
	snprintf(path, sizeof path, "%s/ready", argv[1]);
	FILE *f = fopen(path, "w");
	if (f) fclose(f);
	snprintf(path, sizeof path, "%s/malloc_in", argv[1]);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	while (access(stop, F_OK) != 0) {
		for (int i = 0; i < 20000; i++) {
			sink = malloc(32 + (size_t)(i & 63));
			free(sink);
		}
		Dl_info di;
		const char *where = dladdr(malloc_address(), &di) && di.dli_fname ? di.dli_fname : "?";
		const char *base = strrchr(where, '/');
		f = fopen(tmp, "w");
		if (f) {
			fprintf(f, "%s\n", base ? base + 1 : where);
			fclose(f);
			rename(tmp, path);
		}
		usleep(50000);
	}
	return 0;
}
