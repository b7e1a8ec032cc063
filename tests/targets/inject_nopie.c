/* A program linked -no-pie (Makefile) that takes the addresses of malloc and free: their PLT
 * entries in the program become the functions' addresses for the whole process (canonical PLT
 * entries), as in Debian's node and cc1. --inject must redirect the program's own PLT slots too,
 * or the calls made through them are never seen (tests/test_inject_safety.sh).
 * Usage: inject_nopie DIR: prints "ready PID", waits for DIR/go, makes N allocations through
 * direct calls and N through the pointers (each freed the other way), writes DIR/done, waits
 * for DIR/stop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 1000

/* set in code, not by a data relocation: the program's code takes the addresses */
void *(*volatile malloc_ptr)(size_t);
void (*volatile free_ptr)(void *);

static void wait_for(const char *dir, const char *name)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	while (access(p, F_OK) != 0) usleep(10000);
}

int main(int argc, char **argv)
{
	if (argc < 2) return 2;
	malloc_ptr = malloc;
	free_ptr = free;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	wait_for(argv[1], "go");
	static void *blocks[2 * N];
	for (int i = 0; i < N; i++) blocks[i] = malloc(64 + i % 32);
	for (int i = 0; i < N; i++) blocks[N + i] = malloc_ptr(64 + i % 32);
	for (int i = 0; i < N; i++) free_ptr(blocks[i]);
	for (int i = 0; i < N; i++) free(blocks[N + i]);
	char p[4096];
	snprintf(p, sizeof p, "%s/done", argv[1]);
	fclose(fopen(p, "w"));
	wait_for(argv[1], "stop");
	printf("result nopie ok\n");
	return 0;
}
