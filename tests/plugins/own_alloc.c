/* A plugin with an allocator of its own (tests/targets/inject_hostile.c, mode deepbind): it
 * defines malloc and free, and, loaded with RTLD_DEEPBIND, its own calls bind to them. Its
 * blocks carry a header that its free checks: a block of another allocator, or one of its
 * blocks given to glibc's free, aborts (what a wrong GOT redirection does). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define ARENA (64u << 20)
#define MAGIC 0x6f776e616c6c6f63ULL
#define KEEP 4096

static char *arena, *next;
static long count;
static void *kept[KEEP];
static int nkept;

struct head {
	uint64_t magic, size;
};

void *malloc(size_t size)
{
	if (!arena) {
		arena = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (arena == MAP_FAILED) abort();
		next = arena;
	}
	size = (size + 15) & ~(size_t)15;
	if (next + sizeof(struct head) + size > arena + ARENA) next = arena; /* blocks are short-lived */
	struct head *h = (struct head *)next;
	next += sizeof *h + size;
	h->magic = MAGIC;
	h->size = size;
	count++;
	return h + 1;
}

void free(void *p)
{
	if (!p) return;
	struct head *h = (struct head *)p - 1;
	if ((char *)h < arena || (char *)h >= arena + ARENA || h->magic != MAGIC) {
		static const char msg[] = "own_alloc: free of a block it did not allocate\n";
		fwrite(msg, 1, sizeof msg - 1, stderr);
		abort();
	}
	h->magic = 0;
}

void *own_alloc_keep(size_t size)
{
	if (nkept == KEEP) return NULL;
	void *p = malloc(size);
	if (p) memset(p, 0x5a, size);
	return kept[nkept++] = p;
}

int own_alloc_release(void)
{
	for (int i = 0; i < nkept; i++) free(kept[i]);
	nkept = 0;
	return 0;
}

long own_alloc_count(void)
{
	return count;
}
