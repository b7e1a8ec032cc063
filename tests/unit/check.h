/* A minimal C test harness for the tests/run.sh protocol: one "PASS name" or
 * "FAIL name: why" line per check; CHECK_DONE() returns non-zero when anything failed. */
#ifndef MEMTRACED_TESTS_CHECK_H
#define MEMTRACED_TESTS_CHECK_H
#include <stdio.h>

static int check_failures;

#define CHECK(name, cond)                                                              \
	do {                                                                               \
		if (cond) printf("PASS %s\n", (name));                                         \
		else { printf("FAIL %s: %s (%s:%d)\n", (name), #cond, __FILE__, __LINE__);     \
		       check_failures++; }                                                     \
		fflush(stdout);                                                                \
	} while (0)

#define CHECKF(name, cond, ...)                                                        \
	do {                                                                               \
		if (cond) printf("PASS %s\n", (name));                                         \
		else { printf("FAIL %s: ", (name)); printf(__VA_ARGS__); printf("\n");         \
		       check_failures++; }                                                     \
		fflush(stdout);                                                                \
	} while (0)

#define CHECK_DONE() (check_failures ? 1 : 0)
#endif
