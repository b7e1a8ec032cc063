/* Allocations below a frame whose pages were never touched (tests/vm/core_checks.sh): the BPF
 * copy of the stack then meets pages the kernel has not mapped in, and copies the longest
 * readable prefix by a search (bpf/memtraced.bpf.c: copy_stack). The frames in that prefix
 * must come out whole: gap_alloc under with_gap, the stack marked cut after them.
 *   stack_gap [ROUNDS]   prints "done N" */
#include <stdio.h>
#include <stdlib.h>

#define GAP (192 * 1024) /* well below what ld.so and libc's start-up touched */

static void *kept[64];

__attribute__((noinline)) static void *gap_alloc(size_t n)
{
	void *p = malloc(n);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

__attribute__((noinline)) static int with_gap(int rounds)
{
	volatile char gap[GAP]; /* only its lowest byte written: the pages above it stay unmapped */
	gap[0] = 1;
	int n = 0;
	for (int i = 0; i < rounds && i < 64; i++) kept[n++] = gap_alloc(1000 + (size_t)i);
	return n + gap[0] - 1;
}

int main(int argc, char **argv)
{
	int n = with_gap(argc > 1 ? atoi(argv[1]) : 20);
	printf("done %d\n", n);
	for (int i = 0; i < n; i++) free(kept[i]);
	return 0;
}
