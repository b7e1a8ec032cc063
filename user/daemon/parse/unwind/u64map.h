/* A u64 -> u64 open-addressing hash map (unwind/ private): key 0 is "empty" (no pc or code
 * is 0); a get of an absent key returns 0. */
#ifndef MEMTRACED_UNWIND_U64MAP_H
#define MEMTRACED_UNWIND_U64MAP_H
#include <stddef.h>
#include <stdint.h>

struct u64map {
	uint64_t *keys, *vals;
	size_t cap, n; /* cap: power of two */
};

uint64_t u64map_get(const struct u64map *m, uint64_t key);
/* 0, or -1 when out of memory (the map is unchanged) */
int u64map_put(struct u64map *m, uint64_t key, uint64_t val);
void u64map_clear(struct u64map *m);
void u64map_free(struct u64map *m);
/* splitmix64's finalizer: a well-mixed hash of x */
uint64_t u64_mix(uint64_t x);

#endif
