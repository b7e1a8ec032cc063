/* Calls of each allocation function, counted by the program itself (tests/test_counts.sh): the
 * summary's "N allocations and M frees seen" must count each call once, as heaptrack does,
 * however the allocator reaches its other entry points inside (realloc(NULL, n) and
 * posix_memalign reaching malloc, reallocarray reaching realloc). Prints
 * "truth allocs=A frees=F" after the calls. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

static void *volatile sink;

int main(void)
{
	unsigned long allocs = 0, frees = 0;
	for (int i = 0; i < 100000; i++) { /* realloc(NULL): an allocation */
		sink = realloc(NULL, 16 + i % 64);
		allocs++;
		free(sink);
		frees++;
	}
	for (int i = 0; i < 10000; i++) { /* alignment <= 16: glibc calls malloc */
		void *p;
		if (posix_memalign(&p, 16, 32) == 0) allocs++;
		free(p);
		frees++;
	}
	for (int i = 0; i < 20000; i++) { /* reallocarray: realloc inside */
		sink = reallocarray(NULL, 4, 8);
		allocs++;
		sink = reallocarray(sink, 8, 8); /* a resize: an allocation and a free */
		allocs++, frees++;
		free(sink);
		frees++;
	}
	for (int i = 0; i < 5000; i++) { /* realloc(p, 0): only a free */
		sink = malloc(40);
		allocs++;
		sink = realloc(sink, 0);
		frees++;
		free(sink); /* NULL after glibc's realloc(p, 0) */
	}
	printf("truth allocs=%lu frees=%lu\n", allocs, frees);
	return 0;
}
