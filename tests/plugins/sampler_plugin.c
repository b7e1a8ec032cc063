/* A library test_sampler dlopens after starting the sampler: its allocations go through its own
 * GOT, which the sampler's dlopen wrapper must have redirected. */
#include <stdlib.h>

void *sampler_plugin_alloc(size_t size)
{
	return malloc(size);
}

void sampler_plugin_free(void *p)
{
	free(p);
}
