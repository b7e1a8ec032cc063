/* The u64 -> u64 hash map of the unwinder's pc and code tables. */
#include "u64map.h"

#include <stdlib.h>
#include <string.h>

uint64_t u64_mix(uint64_t x) /* splitmix64 finalizer */
{
	x ^= x >> 30;
	x *= UINT64_C(0xbf58476d1ce4e5b9);
	x ^= x >> 27;
	x *= UINT64_C(0x94d049bb133111eb);
	x ^= x >> 31;
	return x;
}

uint64_t u64map_get(const struct u64map *m, uint64_t key)
{
	if (!m->cap)
		return 0;
	for (size_t i = u64_mix(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key)
			return m->vals[i];
		if (!m->keys[i])
			return 0;
	}
}

static int u64map_grow(struct u64map *m)
{
	size_t cap = m->cap ? m->cap * 2 : 1024;
	uint64_t *keys = calloc(cap, sizeof(*keys)), *vals = calloc(cap, sizeof(*vals));
	if (!keys || !vals) {
		free(keys);
		free(vals);
		return -1;
	}
	for (size_t j = 0; j < m->cap; j++) {
		if (!m->keys[j])
			continue;
		size_t i = u64_mix(m->keys[j]) & (cap - 1);
		while (keys[i])
			i = (i + 1) & (cap - 1);
		keys[i] = m->keys[j];
		vals[i] = m->vals[j];
	}
	free(m->keys);
	free(m->vals);
	m->keys = keys;
	m->vals = vals;
	m->cap = cap;
	return 0;
}

int u64map_put(struct u64map *m, uint64_t key, uint64_t val)
{
	if ((m->n + 1) * 2 > m->cap && u64map_grow(m) < 0)
		return -1;
	size_t i = u64_mix(key) & (m->cap - 1);
	while (m->keys[i] && m->keys[i] != key)
		i = (i + 1) & (m->cap - 1);
	if (!m->keys[i])
		m->n++;
	m->keys[i] = key;
	m->vals[i] = val;
	return 0;
}

void u64map_clear(struct u64map *m)
{
	if (m->cap) {
		memset(m->keys, 0, m->cap * sizeof(*m->keys));
		memset(m->vals, 0, m->cap * sizeof(*m->vals));
	}
	m->n = 0;
}

void u64map_free(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}
