/* Anonymous memory mappings for tests/test_mmap.sh.
 *
 *   mmap_workload N
 *
 * Keeps one 64 MiB anonymous mapping (map_kept, touched) to the end; maps, touches and
 * unmaps N mappings of 4 MiB (map_temp); maps 8 MiB and unmaps it in three parts, the middle
 * first (map_split); grows a 1 MiB mapping to 3 MiB with mremap, then unmaps it
 * (map_grown); mallocs 1 MiB (glibc serves it with a mapping of its own) and keeps it
 * (malloc_big); reserves 1 GiB with PROT_NONE, makes 2 MiB of it usable with a MAP_FIXED
 * mmap and 3 + 1 MiB with mprotect, flips 1 MiB to read-exec and back, gives 1 MiB back with
 * madvise(MADV_DONTNEED) and puts the last 1 MiB back to PROT_NONE (map_reserved: 6 MiB made,
 * 4 MiB kept). Each in its own noinline function
 * named as above. Prints the truth:
 *
 *   truth FUNC CALLS BYTES LIVE_BYTES
 *
 * then "ready" and waits for a line on stdin (the tracer reads its mappings meanwhile). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define NOINLINE __attribute__((noinline, noclone))
#define MIB (1024UL * 1024)

static void *volatile sink;

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(2);
	}
	memset(p, 1, len);
	return p;
}

NOINLINE void *map_kept(void) { void *p = map(64 * MIB); sink = p; return p; }
NOINLINE void map_temp(void) { void *p = map(4 * MIB); sink = p; munmap(p, 4 * MIB); }
NOINLINE void map_split(void)
{
	char *p = map(8 * MIB);
	sink = p;
	munmap(p + 3 * MIB, 2 * MIB); /* the middle: two pieces stay */
	munmap(p, 3 * MIB);
	munmap(p + 5 * MIB, 3 * MIB);
}
NOINLINE void map_grown(void)
{
	void *p = map(1 * MIB);
	p = mremap(p, 1 * MIB, 3 * MIB, MREMAP_MAYMOVE);
	if (p == MAP_FAILED) {
		perror("mremap");
		exit(2);
	}
	sink = p;
	munmap(p, 3 * MIB);
}
NOINLINE void *map_reserved(void)
{
	char *r = mmap(NULL, 1024 * MIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED || mmap(r + 4 * MIB, 2 * MIB, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED ||
	    mprotect(r + 8 * MIB, 3 * MIB, PROT_READ | PROT_WRITE) != 0 ||
	    mprotect(r + 16 * MIB, 1 * MIB, PROT_READ | PROT_WRITE) != 0) {
		perror("mmap/mprotect");
		exit(2);
	}
	memset(r + 4 * MIB, 1, 2 * MIB);
	memset(r + 8 * MIB, 1, 3 * MIB);
	memset(r + 16 * MIB, 1, 1 * MIB);
	/* a JIT's flip: neither made nor freed */
	mprotect(r + 8 * MIB, 1 * MIB, PROT_READ | PROT_EXEC);
	mprotect(r + 8 * MIB, 1 * MIB, PROT_READ | PROT_WRITE);
	/* given back: freed (the mapping stays usable) */
	madvise(r + 9 * MIB, 1 * MIB, MADV_DONTNEED);
	/* back to a reservation: freed */
	mprotect(r + 16 * MIB, 1 * MIB, PROT_NONE);
	sink = r;
	return r;
}
NOINLINE void *malloc_big(void) { void *p = malloc(1 * MIB); memset(p, 1, MIB); sink = p; return p; }

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100;
	void *kept = map_kept();
	for (int i = 0; i < n; i++) map_temp();
	for (int i = 0; i < n / 10 + 1; i++) map_split();
	for (int i = 0; i < n / 10 + 1; i++) map_grown();
	void *big = malloc_big();
	void *reserved = map_reserved();
	printf("truth map_kept 1 %lu %lu\n", 64 * MIB, 64 * MIB);
	printf("truth map_temp %d %lu 0\n", n, n * 4 * MIB);
	printf("truth map_split %d %lu 0\n", n / 10 + 1, (n / 10 + 1) * 8 * MIB);
	printf("truth map_grown %d %lu 0\n", n / 10 + 1, (n / 10 + 1) * 4 * MIB); /* 1 + 3 MiB */
	printf("truth malloc_big 1 %lu %lu\n", MIB, MIB);
	printf("truth map_reserved 3 %lu %lu\n", 6 * MIB, 4 * MIB);
	printf("ready\n");
	fflush(stdout);
	char line[16];
	if (!fgets(line, sizeof line, stdin)) {}
	sink = kept;
	sink = big;
	sink = reserved;
	return 0;
}
