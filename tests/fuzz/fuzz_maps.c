/* libFuzzer target of the text the unwinder reads about a target (unwind/maps.c, perfmap.c):
 * its /proc/PID/maps, which a process shapes with its mappings and their names
 * (PR_SET_VMA_ANON_NAME, file names), and the perf map of a JIT (/tmp/perf-PID.map, written by
 * the target). The input, NUL-terminated, is parsed as both; each result is queried. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unwind/maps.h"
#include "unwind/perfmap.h"

static void broken(const char *what)
{
	fprintf(stderr, "fuzz_maps: invariant broken: %s\n", what);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text) return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	struct maps_view v;
	char *seen = maps_view_build(text, &v);
	if (seen) {
		if (strlen(seen) > strlen(text)) broken("libdw's text longer than the maps");
		for (size_t i = 0; i < v.n; i++) {
			if (v.r[i].end <= v.r[i].start) broken("an empty region");
			if (i && v.r[i].start < v.r[i - 1].start) broken("regions out of order");
			if (maps_view_find(&v, v.r[i].start) == NULL) broken("a region's start not found");
			if (strnlen(v.r[i].name, sizeof v.r[i].name) == sizeof v.r[i].name) broken("a name not ended");
		}
		maps_view_find(&v, 0);
		maps_view_find(&v, UINT64_MAX);
		free(seen);
		maps_view_free(&v);
	}
	struct perfmap m = {0};
	if (perfmap_parse(&m, text)) {
		for (size_t i = 0; i < m.n; i++) {
			uint64_t start = 0;
			const char *name = perfmap_find(&m, m.e[i].start, &start);
			if (!name || start > m.e[i].start) broken("an entry's start not found");
			if (strlen(name) > 256) broken("a name over its cap");
		}
		perfmap_find(&m, 0, NULL);
		perfmap_find(&m, UINT64_MAX, NULL);
	}
	perfmap_free(&m);
	free(text);
	return 0;
}
