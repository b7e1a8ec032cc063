/* Shared by the lifecycle workloads (tests/test_lifecycle.sh): waiting for the test's go-ahead
 * file (the test creates it once memtraced says its probes are in place), and allocation
 * sites in noinline functions that keep their blocks. */
#ifndef LIFE_COMMON_H
#define LIFE_COMMON_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

/* Waits until one of the files exists (b may be NULL); gives up after 60 s (exit 2). */
static void wait_for(const char *a, const char *b)
{
	for (int i = 0; i < 6000; i++) {
		if (access(a, F_OK) == 0 || (b && access(b, F_OK) == 0)) return;
		usleep(10000);
	}
	fprintf(stderr, "life: nobody created %s\n", a);
	exit(2);
}

static void touch(const char *dir, const char *name, long n)
{
	char path[4096];
	if (n >= 0) snprintf(path, sizeof path, "%s/%s.%ld", dir, name, n);
	else snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	if (f) fclose(f);
}
#endif
