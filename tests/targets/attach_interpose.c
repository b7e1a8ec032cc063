/* Test workload for allocsyms: defines malloc, free, calloc and realloc itself (a bump
 * allocator over a static arena), so the dynamic linker binds every call, libc's own included,
 * to these; allocsyms must choose them over libc's. */
#include <stdint.h>
#include <string.h>

#define ARENA_BYTES (8u << 20)
static _Alignas(16) unsigned char arena[ARENA_BYTES];
static size_t arena_used;

void *malloc(size_t n)
{
	size_t need = (n + 16 + 15) & ~(size_t)15;
	if (need < n || need > ARENA_BYTES - arena_used) return NULL;
	unsigned char *block = arena + arena_used;
	arena_used += need;
	*(size_t *)block = n;
	return block + 16;
}

void free(void *p)
{
	(void)p;   /* a bump allocator never reuses */
}

void *calloc(size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size) return NULL;
	void *p = malloc(n * size);
	if (p) memset(p, 0, n * size);   /* the arena may hold reused bytes after fork: clear */
	return p;
}

void *realloc(void *old, size_t n)
{
	void *p = malloc(n);
	if (p && old) {
		size_t had = *(size_t *)((unsigned char *)old - 16);
		memcpy(p, old, had < n ? had : n);
	}
	return p;
}

#include "attach_report.h"
