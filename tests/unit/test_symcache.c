/* The location lists shared by every process's unwinder (unwind/symcache.c): a list put is got
 * back whole, as a copy of its own (strings included), for the same object, offset and depth
 * only; threads putting and getting at once lose nothing. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "unwind/symcache.h"

static void *hammer(void *arg)
{
	uint64_t base = (uint64_t)(uintptr_t)arg;
	char name[32];
	for (uint64_t i = 0; i < 20000; i++) {
		snprintf(name, sizeof name, "f%llu", (unsigned long long)i);
		mt_location l = {.line = (uint32_t)i, .filename = "t.c", .defname = name};
		symcache_put(base, i, SYMBOLIZE_FULL, &l, 1);
	}
	return NULL;
}

int main(void)
{
	mt_location two[2] = {{.line = 10, .start_char = 3, .end_char = 9, .filename = "a.c", .defname = "outer"},
			      {.line = 20, .filename = "b.h", .defname = "inner"}};
	symcache_put(0x1234, 0x40, SYMBOLIZE_FULL, two, 2);
	mt_location *got = NULL;
	int n = symcache_get(0x1234, 0x40, SYMBOLIZE_FULL, &got);
	CHECKF("symcache_roundtrip", n == 2 && got[0].line == 10 && got[0].start_char == 3 &&
	       got[0].end_char == 9 && !strcmp(got[0].filename, "a.c") && !strcmp(got[1].defname, "inner") &&
	       got[0].filename != two[0].filename, "n %d", n);
	symbolize_free(got, n);
	mt_location *none = NULL;
	CHECK("symcache_other_offset", symcache_get(0x1234, 0x41, SYMBOLIZE_FULL, &none) == 0);
	CHECK("symcache_other_depth", symcache_get(0x1234, 0x40, SYMBOLIZE_NAMES, &none) == 0);
	CHECK("symcache_other_object", symcache_get(0x1235, 0x40, SYMBOLIZE_FULL, &none) == 0);

	pthread_t t[4];
	for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, hammer, (void *)(uintptr_t)(0x9000 + i));
	for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
	int missing = 0, wrong = 0;
	for (int k = 0; k < 4; k++)
		for (uint64_t i = 0; i < 20000; i++) {
			mt_location *l = NULL;
			char name[32];
			snprintf(name, sizeof name, "f%llu", (unsigned long long)i);
			if (symcache_get(0x9000 + k, i, SYMBOLIZE_FULL, &l) != 1) missing++;
			else if (l[0].line != i || strcmp(l[0].defname, name)) wrong++;
			if (l) symbolize_free(l, 1);
		}
	CHECKF("symcache_threads", !missing && !wrong, "%d missing, %d wrong of 80000", missing, wrong);
	return CHECK_DONE();
}
