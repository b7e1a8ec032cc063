/* Allocations through pointers a program looks up with dlsym once it runs (issue 47: a plugin
 * loader or an FFI does this; 0 of 1000 such calls were seen while "GOT check passed").
 *
 *   dlsym_alloc DIR [N]    creates DIR/ready, waits for DIR/go (a tracer attaches first), then
 *                          looks the functions up and runs each operation N times (default
 *                          1000), prints the truth (tests/lib/exact.sh), creates DIR/done and
 *                          waits for DIR/stop.
 *
 * op_dlsym_malloc: malloc and free from dlsym(RTLD_DEFAULT); op_handle_calloc: calloc from
 * dlsym(libc's handle); op_dlvsym_malloc: malloc from dlvsym(RTLD_DEFAULT, GLIBC_2.2.5). Every
 * block freed through the looked-up free. Sizes differ per operation. */
#define _GNU_SOURCE /* dlvsym, RTLD_DEFAULT */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

static void *volatile sink;
static void (*dl_free)(void *);

static void wait_for(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	while (access(path, F_OK) != 0) usleep(10000);
}

static void touch(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	if (f) fclose(f);
}

NOINLINE void op_dlsym_malloc(void *(*m)(size_t))
{
	void *p = m(100);
	sink = p;
	dl_free(p);
}

NOINLINE void op_handle_calloc(void *(*c)(size_t, size_t))
{
	void *p = c(3, 40);
	sink = p;
	dl_free(p);
}

NOINLINE void op_dlvsym_malloc(void *(*m)(size_t))
{
	void *p = m(200);
	sink = p;
	dl_free(p);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: dlsym_alloc DIR [N]\n");
		return 2;
	}
	unsigned long n = argc > 2 ? strtoul(argv[2], NULL, 10) : 1000;
	touch(argv[1], "ready");
	wait_for(argv[1], "go");
	void *(*m)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "malloc");
	dl_free = (void (*)(void *))dlsym(RTLD_DEFAULT, "free");
	void *libc = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
	void *(*c)(size_t, size_t) = libc ? (void *(*)(size_t, size_t))dlsym(libc, "calloc") : NULL;
	void *(*vm)(size_t) = (void *(*)(size_t))dlvsym(RTLD_DEFAULT, "malloc", "GLIBC_2.2.5");
	if (!m || !dl_free || !c || !vm) {
		fprintf(stderr, "dlsym_alloc: a lookup failed: %s\n", dlerror());
		return 1;
	}
	for (unsigned long i = 0; i < n; i++) {
		op_dlsym_malloc(m);
		op_handle_calloc(c);
		op_dlvsym_malloc(vm);
	}
	printf("truth op_dlsym_malloc %lu %lu 0\n", n, n * 13);
	printf("truth op_handle_calloc %lu %lu 0\n", n, n * 15);
	printf("truth op_dlvsym_malloc %lu %lu 0\n", n, n * 25);
	fflush(stdout);
	touch(argv[1], "done");
	wait_for(argv[1], "stop");
	return 0;
}
