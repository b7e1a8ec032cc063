/* A plugin with its own allocator, for the dlopen test (tests/test_lifecycle.sh builds it with
 * cc -shared; tests/targets/life_dlopen loads it with RTLD_LOCAL and calls its malloc and free
 * through dlsym). A bump allocator over a static arena: free does nothing. */
#include <stddef.h>
#include <string.h>

#define ARENA (16 << 20)
static _Alignas(16) char arena[ARENA];
static size_t used;

void *malloc(size_t n)
{
	size_t at = __atomic_fetch_add(&used, (n + 15) & ~(size_t)15, __ATOMIC_RELAXED);
	return at + n <= ARENA ? arena + at : NULL;
}

void free(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory"); /* a real function body, not folded away */
}

void *calloc(size_t count, size_t size)
{
	if (size && count > (size_t)-1 / size) return NULL;
	void *p = malloc(count * size);
	if (p) memset(p, 0, count * size);
	return p;
}

void *realloc(void *p, size_t n)
{
	void *q = malloc(n);
	if (q && p) memcpy(q, p, n); /* the arena is contiguous: reading past p's block is safe */
	return q;
}
