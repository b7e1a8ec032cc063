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

/* The C functions first (ATTACH_STATIC lists their addresses in this order), then the C++
 * operators and other allocators' extensions (NULL when nothing defines them). Same spelling
 * as alloc_fn_name() in user/daemon/parse/sites/allocsyms.c. */
static const char *const attach_names[] = { "malloc", "calloc", "realloc", "reallocarray",
	"free", "posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc",
	"_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t",
	"_ZnamSt11align_val_t", "_ZnwmSt11align_val_tRKSt9nothrow_t",
	"_ZnamSt11align_val_tRKSt9nothrow_t", "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm",
	"_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t", "_ZdlPvSt11align_val_t",
	"_ZdaPvSt11align_val_t", "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t",
	"_ZdlPvSt11align_val_tRKSt9nothrow_t", "_ZdaPvSt11align_val_tRKSt9nothrow_t",
	"mallocx", "rallocx", "xallocx", "dallocx", "sdallocx", "cfree", "reallocf" };

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
		if (i >= sizeof(addrs) / sizeof(addrs[0])) break;
		void *a = addrs[i];
#else
		/* dlsym, not &malloc: in a non-PIE program &malloc is the PLT stub */
		void *a = dlsym(RTLD_DEFAULT, attach_names[i]);
		if (!a) continue;
#endif
		printf("%s %p\n", attach_names[i], a);
	}
	printf("READY\n");
	fflush(stdout);
	char buf[64];
	while (read(0, buf, sizeof(buf)) > 0) {}
	return 0;
}
