/* A process under a tight RLIMIT_AS while memtraced --inject attaches (issue 34).
 *   inject_aslimit DIR HEADROOM_MIB BUDGET_MIB
 * Sets its RLIMIT_AS to its address space now plus HEADROOM_MIB, prints "ready", then until
 * DIR/stop appears allocates, touches and frees BUDGET_MIB in 1 MiB blocks, over and over; a
 * NULL from its own malloc is a failure. Prints "result ok ROUNDS" and exits 0 otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static long vm_size_kb(void)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, "VmSize:", 7) == 0) v = atol(line + 7);
	if (f) fclose(f);
	return v;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: inject_aslimit DIR HEADROOM_MIB BUDGET_MIB\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	char stop[4096];
	snprintf(stop, sizeof stop, "%s/stop", argv[1]);
	long budget = atol(argv[3]);
	void **blocks = calloc(budget, sizeof *blocks);
	struct rlimit rl;
	rl.rlim_cur = rl.rlim_max = ((unsigned long)vm_size_kb() << 10) + ((unsigned long)atol(argv[2]) << 20);
	if (!blocks || setrlimit(RLIMIT_AS, &rl) != 0) {
		printf("result FAILED setup\n");
		return 1;
	}
	printf("ready\n");
	unsigned long rounds = 0;
	while (access(stop, F_OK) != 0) {
		for (long i = 0; i < budget; i++) {
			blocks[i] = malloc(1 << 20);
			if (!blocks[i]) {
				printf("result FAILED malloc returned NULL at %ld MiB in round %lu\n", i, rounds);
				return 1;
			}
			memset(blocks[i], 1, 1 << 20);
		}
		for (long i = 0; i < budget; i++) free(blocks[i]);
		rounds++;
		usleep(20000);
	}
	printf("result ok %lu\n", rounds);
	return 0;
}
