/* Hash functions for the open-addressing tables of the format library, the trace tools and
 * the daemon's context trie. Header-only: they are small and sit in hot loops. */
#ifndef MEMTRACE_HASH_H
#define MEMTRACE_HASH_H

#include <stddef.h>
#include <stdint.h>

/* MurmurHash3's 64-bit finalizer: every input bit moves every output bit, so consecutive ids
 * and codes spread over a power-of-two table indexed by the low bits. */
static inline uint64_t mt_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* 64-bit FNV-1a of a byte string and of a NUL-terminated string (equal for equal bytes). */
#define MT_FNV1A_BASIS 0xcbf29ce484222325ULL
#define MT_FNV1A_PRIME 0x100000001b3ULL

static inline uint64_t mt_fnv1a(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = MT_FNV1A_BASIS;
	for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * MT_FNV1A_PRIME;
	return h;
}

static inline uint64_t mt_fnv1a_str(const char *s)
{
	uint64_t h = MT_FNV1A_BASIS;
	for (; *s; s++) h = (h ^ (unsigned char)*s) * MT_FNV1A_PRIME;
	return h;
}

#endif
