/* Shared body of the attach_* test workloads: prints where each allocation function is bound
 * in this process ("NAME ADDRESS", as the dynamic linker resolved it), then "READY", then
 * waits until stdin is closed. tests/unit/test_allocsyms.c compares that with allocsyms. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#ifndef ATTACH_STATIC
#include <dlfcn.h>
#else
#include <malloc.h>
#endif

static const char *const attach_names[] = { "malloc", "calloc", "realloc", "reallocarray",
	"free", "posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc" };

int main(void)
{
	void *volatile p = malloc(100);
	free(p);
#ifdef ATTACH_STATIC
	/* no dynamic linking: the functions' addresses are the definitions */
	void *addrs[] = { (void *)malloc, (void *)calloc, (void *)realloc, (void *)reallocarray,
	                  (void *)free, (void *)posix_memalign, (void *)aligned_alloc,
	                  (void *)memalign, (void *)valloc, (void *)pvalloc };
#endif
	for (size_t i = 0; i < sizeof(attach_names) / sizeof(attach_names[0]); i++) {
#ifdef ATTACH_STATIC
		void *a = addrs[i];
#else
		/* dlsym, not &malloc: in a non-PIE program &malloc is the PLT stub */
		void *a = dlsym(RTLD_DEFAULT, attach_names[i]);
#endif
		printf("%s %p\n", attach_names[i], a);
	}
	printf("READY\n");
	fflush(stdout);
	char buf[64];
	while (read(0, buf, sizeof(buf)) > 0) {}
	return 0;
}
