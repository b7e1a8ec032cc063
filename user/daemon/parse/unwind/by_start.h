/* Arrays of address ranges sorted by their start (maps.c, perfmap.c, symindex.c): how many of
 * the first elements start at or below an address. Inside the unwind room. */
#ifndef MEMTRACED_UNWIND_BY_START_H
#define MEMTRACED_UNWIND_BY_START_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* base: n elements of size bytes, each with a uint64_t start at offset off, sorted by it. */
static inline size_t starting_at_or_below(const void *base, size_t n, size_t size, size_t off,
					  uint64_t addr)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t start;
		memcpy(&start, (const char *)base + mid * size + off, sizeof start);
		if (start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}
#endif
