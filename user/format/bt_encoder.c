/* The reference backtrace encoder (sec. 6.4), reproduced exactly so that our output is
 * byte-identical to memtrace's: the state machine below mirrors the decoder of sec. 6.3. */
#include "bt_encoder.h"

#include <stdlib.h>
#include <string.h>

#define VERIFY_FIRST 4242
#define VERIFY_STEP 5413

void mt_bt_encoder_init(mt_bt_encoder *e)
{
	memset(e->cache, 0, sizeof e->cache);
	memset(e->date, 0, sizeof e->date);
	memset(e->next, 0, sizeof e->next);
	e->verify_ix = VERIFY_FIRST;
	e->prev = NULL;
	e->prev_len = e->prev_cap = 0;
}

void mt_bt_encoder_free(mt_bt_encoder *e)
{
	free(e->prev);
	e->prev = NULL;
	e->prev_len = e->prev_cap = 0;
}

size_t mt_bt_common_prefix(const mt_bt_encoder *e, const uint64_t *bt, size_t len)
{
	size_t n = len < e->prev_len ? len : e->prev_len, i = 0;
	while (i < n && bt[i] == e->prev[i]) i++;
	return i;
}

int mt_bt_set_prev(mt_bt_encoder *e, const uint64_t *bt, size_t same, size_t len)
{
	if (same > len) same = len;
	if (same > e->prev_len) same = 0;
	if (len > e->prev_cap) {
		size_t cap = e->prev_cap ? e->prev_cap : 64;
		while (cap < len) cap *= 2;
		uint64_t *p = realloc(e->prev, cap * sizeof *p);
		if (!p) {
			e->prev_len = 0;
			return -1;
		}
		/* realloc kept the old contents, so prev[0..same) is still valid */
		e->prev = p;
		e->prev_cap = cap;
	}
	if (len > same) memcpy(e->prev + same, bt + same, (len - same) * sizeof *bt);
	e->prev_len = len;
	return 0;
}

static size_t emit_hit(uint8_t *p, uint32_t bucket, unsigned n)
{
	if (n == 0) { mt_put_u16(p, (uint16_t)(bucket << 2)); return 2; }
	if (n == 1) { mt_put_u16(p, (uint16_t)(bucket << 2 | 1)); return 2; }
	mt_put_u16(p, (uint16_t)(bucket << 2 | 2));
	p[2] = (uint8_t)n;
	return 3;
}

size_t mt_bt_encode(mt_bt_encoder *e, uint64_t id, const uint64_t *codes, size_t k,
		    uint8_t *out, size_t *out_len, size_t *encoded, mt_bt_miss_fn miss, void *ctx)
{
	const size_t limit = MT_BT_MAX_BYTES - 10; /* a miss (10 bytes) still fits after it */
	size_t pos = 0, i = 0, ncw = 0;
	uint32_t p = 0; /* predecessor bucket: bucket 0 at the start of every backtrace (G8) */

	while (i < k && pos <= limit) {
		uint64_t c = codes[i];
		uint32_t h1 = mt_hash1(c), h2 = mt_hash2(c), hit;
		if (e->cache[h1] == c) {
			hit = h1;
		} else if (e->cache[h2] == c) {
			hit = h2;
		} else {
			uint32_t b = e->date[h1] < e->date[h2] ? h1 : h2; /* evict the older; ties: h2 */
			e->cache[b] = c;
			e->date[b] = id;
			e->next[p] = (uint16_t)b;
			mt_put_u16(out + pos, (uint16_t)(b << 2 | 3));
			mt_put_u64(out + pos + 2, c);
			pos += 10;
			ncw++;
			if (miss) miss(ctx, i);
			p = b;
			i++;
			continue;
		}
		/* A hit, then follow the prediction chain as far as it matches. */
		for (;;) {
			e->date[hit] = id;
			e->next[p] = (uint16_t)hit;
			uint32_t orig = hit;
			unsigned n = 0;
			p = hit;
			i++;
			int rehit = 0;
			while (i < k && pos + 2 <= limit) {
				uint32_t q = e->next[p];
				if (e->cache[q] != codes[i]) break;
				if (n == 255) { /* run full: the next frame starts a new hit at q */
					rehit = 1;
					hit = q;
					break;
				}
				p = q;
				n++;
				i++;
			}
			pos += emit_hit(out + pos, orig, n);
			ncw++;
			if (!rehit) break;
		}
	}
	*out_len = pos;
	*encoded = i;
	return ncw;
}

void mt_bt_next_verifier(mt_bt_encoder *e, uint16_t *ix, uint16_t *pred, uint64_t *val)
{
	uint32_t b = e->verify_ix;
	*ix = (uint16_t)b;
	*pred = e->next[b];
	*val = e->cache[b];
	e->verify_ix = (b + VERIFY_STEP) & (MT_CACHE_SIZE - 1);
}
