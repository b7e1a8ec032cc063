/* Finding an in-process sampler a target carries (see carried_sampler.h). */
#include "carried_sampler.h"
#include "door/door.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "protocol/facts.h"
#include "parser/parser.h"
#include "sampler_ctl.h"

#define MAX_OBJECTS 512

static bool is_ours(const char *path)
{
	const char *base = strrchr(path, '/');
	return strcmp(base ? base + 1 : path, SAMPLER_LIB_NAME) == 0;
}

int carried_sampler_find(pid_t pid, char *path, size_t pathlen)
{
	char line[4608];
	FILE *f = door_proc_fopen(pid, "maps");
	if (!f) return -1;
	static char seen[MAX_OBJECTS][256];
	int nseen = 0, found = -1;
	while (found < 0 && fgets(line, sizeof line, f)) {
		char *file = strchr(line, '/');
		if (!file) continue;
		file[strcspn(file, "\n")] = '\0';
		if (strstr(file, " (deleted)") || is_ours(file)) continue;
		bool dup = false; /* each object once (its mappings are consecutive lines) */
		for (int i = 0; i < nseen && !dup; i++) dup = strncmp(seen[i], file, 255) == 0;
		if (dup) continue;
		if (nseen < MAX_OBJECTS) snprintf(seen[nseen++], sizeof seen[0], "%.255s", file);
		char in_root[4700];
		snprintf(in_root, sizeof in_root, "/proc/%d/root%s", (int)pid, file);
		struct elf_facts facts;
		char err[256];
		/* its notes are read by the parser */
		if (pfacts_of(pid, in_root, NULL, &facts, err, sizeof err) != 0) continue;
		if (facts.has_otel_usdt && strlen(in_root) < pathlen) {
			snprintf(path, pathlen, "%s", in_root);
			found = 0;
		}
	}
	fclose(f);
	return found;
}
