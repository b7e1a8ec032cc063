/* Writer side of the backtrace codec (docs/memtrace-format.md section 6.4): the 2^14-entry
 * cache with two hash functions and age-based eviction, prediction runs, and the truthful
 * previous backtrace used for common prefixes (G28). Used by writer.c. */
#ifndef MEMTRACE_BT_ENCODER_H
#define MEMTRACE_BT_ENCODER_H

#include <stddef.h>
#include <stdint.h>

#include "codec.h"

#define MT_BT_MAX_BYTES 4096 /* codeword bytes per allocation */

typedef struct mt_bt_encoder {
	uint64_t cache[MT_CACHE_SIZE]; /* code held by each bucket (mirror of the reader's loc[]) */
	uint64_t date[MT_CACHE_SIZE];  /* allocation id that last used the bucket */
	uint16_t next[MT_CACHE_SIZE];  /* bucket that followed (mirror of the reader's pred[]) */
	uint32_t verify_ix;            /* next cache-verifier bucket (sec. 8) */
	/* What the reader decoded for the previous allocation (prefix + encoded frames). */
	uint64_t *prev;
	size_t prev_len, prev_cap;
} mt_bt_encoder;

/* Called for every cache miss with the index (into the codes given to mt_bt_encode) of the
 * missed code. Returns 0, or < 0 to report a failure (encoding goes on regardless). */
typedef int (*mt_bt_miss_fn)(void *ctx, size_t index);

void mt_bt_encoder_init(mt_bt_encoder *e);
void mt_bt_encoder_free(mt_bt_encoder *e);

/* Length of the common prefix of bt[0..len) with the previous backtrace. */
size_t mt_bt_common_prefix(const mt_bt_encoder *e, const uint64_t *bt, size_t len);

/* Encodes codes[0..k) (the frames after the common prefix, outermost first) for allocation
 * `id` into out (room for MT_BT_MAX_BYTES). Stops before MT_BT_MAX_BYTES bytes; the frames
 * left out are the innermost ones. Returns the number of codewords; *out_len = bytes written,
 * *encoded = frames encoded (<= k). */
size_t mt_bt_encode(mt_bt_encoder *e, uint64_t id, const uint64_t *codes, size_t k,
		    uint8_t *out, size_t *out_len, size_t *encoded, mt_bt_miss_fn miss, void *ctx);

/* Records bt[0..len) as what the reader decoded for this allocation; bt[0..same) is known to
 * equal the previous backtrace already (the common prefix), so only the rest is copied.
 * Returns 0 or -1 (OOM: the previous backtrace is then forgotten, which keeps later prefixes
 * truthful). */
int mt_bt_set_prev(mt_bt_encoder *e, const uint64_t *bt, size_t same, size_t len);

/* The verifier of the next events packet (sec. 8): advances verify_ix. */
void mt_bt_next_verifier(mt_bt_encoder *e, uint16_t *ix, uint16_t *pred, uint64_t *val);

#endif
