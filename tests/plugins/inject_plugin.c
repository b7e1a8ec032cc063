/* A library tests/targets/inject_workload dlopens after the injection: its allocations go
 * through its own GOT, which the sampler must redirect when it is loaded. */
#include <stdlib.h>

static void *volatile sink;

/* 20 allocations of 56 bytes, freed; returns their words (ceil(size / 8) each). */
__attribute__((noinline)) unsigned long op_plugin_work(void)
{
	for (int i = 0; i < 20; i++) {
		sink = malloc(56);
		free(sink);
	}
	return 20 * 7;
}
