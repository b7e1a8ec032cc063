/* A stack deeper than one ring-buffer record (issue 38), for the kernel matrix's checks:
 * DEPTH frames of ~1 KiB (default 200: about 210 KiB of stack, a record holds 64 KiB), then
 * ROUNDS blocks of 4040 bytes from the bottom, freed at the end. Prints "done N".
 *   deep_stack [ROUNDS [DEPTH]] */
#include <stdio.h>
#include <stdlib.h>

#define MAX_KEPT 4096
static void *kept[MAX_KEPT];
static int nkept;

__attribute__((noinline)) static long deep_leaf(int rounds)
{
	for (int i = 0; i < rounds && nkept < MAX_KEPT; i++) kept[nkept++] = malloc(4040);
	return nkept;
}

__attribute__((noinline)) static long descend(int depth, int rounds)
{
	volatile char pad[1000];
	pad[depth % 1000] = (char)depth;
	if (depth == 0) return deep_leaf(rounds);
	long r = descend(depth - 1, rounds);
	return r + pad[depth % 1000]; /* not a tail call: the frame stays */
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 20, depth = argc > 2 ? atoi(argv[2]) : 200;
	long n = descend(depth, rounds);
	printf("done %ld\n", n);
	for (int i = 0; i < nkept; i++) free(kept[i]);
	return 0;
}
