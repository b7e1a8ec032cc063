/* A library test_sampler dlopens after starting the sampler: its allocations go through its own
 * GOT, which the sampler's dlopen wrapper must have redirected. Built twice: as
 * libsampler_plugin.so (with DT_RUNPATH $ORIGIN) and as libsampler_plugin_leaf.so, which the
 * first dlopens by bare name, found only through the caller's own RUNPATH. The jemalloc calls
 * resolve only when jemalloc is loaded (the test's jemalloc run; lazy binding otherwise). */
#include <dlfcn.h>
#include <stdlib.h>

void *sampler_plugin_alloc(size_t size)
{
	return malloc(size);
}

void sampler_plugin_free(void *p)
{
	free(p);
}

/* Not a tail call: glibc takes the caller from dlopen's return address, which must be here. */
void *sampler_plugin_dlopen(const char *name)
{
	void *h = dlopen(name, RTLD_LAZY);
	__asm__ volatile("" : : "r"(h) : "memory");
	return h;
}

void *mallocx(size_t size, int flags);
void *rallocx(void *p, size_t size, int flags);
size_t xallocx(void *p, size_t size, size_t extra, int flags);
void dallocx(void *p, int flags);
void sdallocx(void *p, size_t size, int flags);

void *sampler_plugin_mallocx(size_t size) { return mallocx(size, 0); }
void *sampler_plugin_rallocx(void *p, size_t size) { return rallocx(p, size, 0); }
size_t sampler_plugin_xallocx(void *p, size_t size) { return xallocx(p, size, 0, 0); }
void sampler_plugin_dallocx(void *p) { dallocx(p, 0); }
void sampler_plugin_sdallocx(void *p, size_t size) { sdallocx(p, size, 0); }
