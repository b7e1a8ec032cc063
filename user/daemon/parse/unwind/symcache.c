/* The shared location lists (symcache.h): one open-addressing table under a lock. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "symcache.h"
#include "u64map.h"

#define MAX_ENTRIES (1u << 20) /* as many as one unwinder symbolizes at most */

struct entry {
	uint64_t obj_hash, offset; /* obj_hash 0: empty */
	uint32_t depth;
	int n;
	mt_location *locs;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry *table;
static size_t cap, count; /* cap: a power of two */

static size_t slot_of(uint64_t obj_hash, uint64_t offset, uint32_t depth)
{
	return (size_t)u64_mix(obj_hash ^ u64_mix(offset * 4 + depth)) & (cap - 1);
}

static struct entry *find(uint64_t obj_hash, uint64_t offset, uint32_t depth)
{
	if (!cap) return NULL;
	for (size_t i = slot_of(obj_hash, offset, depth);; i = (i + 1) & (cap - 1)) {
		struct entry *e = &table[i];
		if (!e->obj_hash) return NULL;
		if (e->obj_hash == obj_hash && e->offset == offset && e->depth == depth) return e;
	}
}

/* A deep copy (strings included), or NULL. */
static mt_location *copy(const mt_location *locs, int n)
{
	mt_location *c = calloc((size_t)n, sizeof(*c));
	if (!c) return NULL;
	for (int i = 0; i < n; i++) {
		c[i] = locs[i];
		c[i].filename = locs[i].filename ? strdup(locs[i].filename) : NULL;
		c[i].defname = locs[i].defname ? strdup(locs[i].defname) : NULL;
		if ((locs[i].filename && !c[i].filename) || (locs[i].defname && !c[i].defname)) {
			symbolize_free(c, i + 1);
			return NULL;
		}
	}
	return c;
}

int symcache_get(uint64_t obj_hash, uint64_t offset, enum symbolize_depth depth, mt_location **out)
{
	if (!obj_hash) return 0;
	pthread_mutex_lock(&lock);
	struct entry *e = find(obj_hash, offset, (uint32_t)depth);
	int n = 0;
	if (e && (*out = copy(e->locs, e->n))) n = e->n;
	pthread_mutex_unlock(&lock);
	return n;
}

static int grow(void)
{
	size_t ncap = cap ? 2 * cap : 4096;
	struct entry *nt = calloc(ncap, sizeof(*nt));
	if (!nt) return -1;
	struct entry *old = table;
	size_t ocap = cap;
	table = nt;
	cap = ncap;
	for (size_t i = 0; i < ocap; i++) {
		if (!old[i].obj_hash) continue;
		size_t j = slot_of(old[i].obj_hash, old[i].offset, old[i].depth);
		while (table[j].obj_hash) j = (j + 1) & (cap - 1);
		table[j] = old[i];
	}
	free(old);
	return 0;
}

void symcache_put(uint64_t obj_hash, uint64_t offset, enum symbolize_depth depth,
		  const mt_location *locs, int n)
{
	if (!obj_hash || n < 1) return;
	pthread_mutex_lock(&lock);
	if (count < MAX_ENTRIES && !find(obj_hash, offset, (uint32_t)depth) &&
	    (2 * (count + 1) <= cap || grow() == 0)) {
		mt_location *c = copy(locs, n);
		if (c) {
			size_t j = slot_of(obj_hash, offset, (uint32_t)depth);
			while (table[j].obj_hash) j = (j + 1) & (cap - 1);
			table[j] = (struct entry){.obj_hash = obj_hash, .offset = offset,
						  .depth = (uint32_t)depth, .n = n, .locs = c};
			count++;
		}
	}
	pthread_mutex_unlock(&lock);
}
