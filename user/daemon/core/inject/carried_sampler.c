/* Finding an in-process sampler a target carries (see carried_sampler.h). */
#include "carried_sampler.h"
#include "door/door.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "protocol/facts.h"
#include "parser/parser.h"
#include "sampler_ctl.h"

/* Objects asked about per process at most: a process with 60,000 mapped files made one
 * parser round trip each (issue 35, finding 9: 93 s, and other processes' attach delayed). */
#define MAX_ASKED 256

static bool is_ours(const char *path)
{
	const char *base = strrchr(path, '/');
	return strcmp(base ? base + 1 : path, SAMPLER_LIB_NAME) == 0;
}

/* Objects seen, by device and inode (a small open-addressing set: each object once, however
 * many of its mappings or hard links there are). */
struct seen_set {
	uint64_t *keys;
	size_t cap, n;
};

static bool seen_add(struct seen_set *s, uint64_t key)
{
	if (s->n * 2 >= s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 1024;
		uint64_t *k = calloc(cap, sizeof *k);
		if (!k) return false; /* out of memory: taken as new (asked again, at worst) */
		for (size_t i = 0; i < s->cap; i++)
			if (s->keys[i])
				for (size_t j = (s->keys[i] * 0x9e3779b97f4a7c15ull) >> 20;; j++)
					if (!k[j & (cap - 1)]) {
						k[j & (cap - 1)] = s->keys[i];
						break;
					}
		free(s->keys);
		s->keys = k;
		s->cap = cap;
	}
	key |= 1; /* never 0, the empty slot (a collision of two inodes costs one lookup) */
	for (size_t j = (key * 0x9e3779b97f4a7c15ull) >> 20;; j++) {
		uint64_t *slot = &s->keys[j & (s->cap - 1)];
		if (*slot == key) return false;
		if (!*slot) {
			*slot = key;
			s->n++;
			return true;
		}
	}
}

int carried_sampler_find(pid_t pid, char *path, size_t pathlen)
{
	char line[4608];
	FILE *f = door_proc_fopen(pid, "maps");
	if (!f) return -1;
	struct seen_set seen = {0};
	int asked = 0, found = -1;
	while (found < 0 && asked < MAX_ASKED && fgets(line, sizeof line, f)) {
		/* "lo-hi perms offset dev inode path": only an object with executable code can
		 * be a sampler (a data file mapped read-only, however many, is not asked about) */
		char perms[8];
		unsigned maj, min;
		unsigned long long ino;
		int name_at = 0;
		if (sscanf(line, "%*x-%*x %7s %*x %x:%x %llu %n", perms, &maj, &min, &ino, &name_at) != 4 ||
		    !name_at || perms[2] != 'x')
			continue;
		char *file = line + name_at;
		if (*file != '/') continue;
		file[strcspn(file, "\n")] = '\0';
		if (strstr(file, " (deleted)") || is_ours(file)) continue;
		if (!seen_add(&seen, (ino * 0x100000001b3ull) ^ ((uint64_t)maj << 32 | min))) continue;
		char in_root[4700];
		snprintf(in_root, sizeof in_root, "/proc/%d/root%s", (int)pid, file);
		struct elf_facts facts;
		char err[256];
		asked++;
		/* its notes are read by the parser */
		if (pfacts_of(pid, in_root, NULL, &facts, err, sizeof err) != 0) continue;
		if (facts.has_otel_usdt && strlen(in_root) < pathlen) {
			snprintf(path, pathlen, "%s", in_root);
			found = 0;
		}
	}
	fclose(f);
	free(seen.keys);
	return found;
}
