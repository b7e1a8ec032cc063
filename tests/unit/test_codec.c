/* Codec edges of the writer side: vints, MTF tables, the backtrace encoder (cache, predictions,
 * truncation, truthful prefix), location events (saturation, "<unknown>" fallback), the
 * verifier sequence; the hash functions and the slot index the tables of the library use. */
#include <stdlib.h>
#include <string.h>

#include "bt_encoder.h"
#include "check.h"
#include "codec.h"
#include "hash.h"
#include "loc_encoder.h"
#include "slot_index.h"

static void test_vint(void)
{
	static const struct { int64_t v; size_t size; } cases[] = {
		{0, 1}, {252, 1}, {253, 3}, {65535, 3}, {65536, 5},
		{2147483647, 5}, {2147483648ll, 9}, {4294967296ll, 9}, {3000000000ll, 9},
		{(1ll << 62) - 1, 9}, {-1, 5},
	};
	char name[80];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint8_t buf[9];
		int64_t back = -12345;
		size_t n = mt_put_vint(buf, cases[i].v);
		size_t m = mt_get_vint(buf, buf + n, &back);
		snprintf(name, sizeof name, "vint_%lld_size", (long long)cases[i].v);
		CHECKF(name, n == cases[i].size && mt_vint_size(cases[i].v) == n,
		       "size %zu, expected %zu", n, cases[i].size);
		snprintf(name, sizeof name, "vint_%lld_roundtrip", (long long)cases[i].v);
		CHECKF(name, m == n && back == cases[i].v, "read %zu bytes, value %lld", m,
		       (long long)back);
		if (n > 1) {
			snprintf(name, sizeof name, "vint_%lld_truncated", (long long)cases[i].v);
			CHECK(name, mt_get_vint(buf, buf + n - 1, &back) == 0);
		}
	}
	uint8_t b[9];
	mt_put_vint(b, 2147483648ll);
	CHECK("vint_2^31_uses_tag_255", b[0] == 255);
	mt_put_vint(b, 253);
	CHECK("vint_253_uses_tag_253", b[0] == 253 && b[1] == 253 && b[2] == 0);
}

static void test_mtf(void)
{
	mt_loc_encoder enc; /* its filename table is an ordinary MTF table */
	mt_loc_encoder_init(&enc);
	mt_mtf_table *t = &enc.files;
	mt_mtf_slot *s;
	char key[16];
	int ok = 1;
	for (int i = 0; i < 32; i++) {
		snprintf(key, sizeof key, "f%d", i);
		ok &= mt_mtf_encode(t, key, strlen(key), &s) == MT_MTF_NEW;
	}
	CHECK("mtf_32_distinct_are_new", ok);
	/* Table is now f31 f30 ... f1; f0 was evicted past slot 30. */
	CHECK("mtf_oldest_evicted", mt_mtf_encode(t, "f0", 2, &s) == MT_MTF_NEW);
	/* Now f0 f31 ... f2; f1 was evicted, f2 is in slot 30. */
	CHECK("mtf_slot30_found", mt_mtf_encode(t, "f2", 2, &s) == 30);
	CHECK("mtf_moved_to_front", mt_mtf_encode(t, "f2", 2, &s) == 0);
	CHECK("mtf_index_before_move", mt_mtf_encode(t, "f0", 2, &s) == 1);
	CHECK("mtf_evicted_is_new", mt_mtf_encode(t, "f1", 2, &s) == MT_MTF_NEW);
	CHECK("mtf_prefix_is_not_equal", mt_mtf_encode(t, "f", 1, &s) == MT_MTF_NEW);
	mt_loc_encoder_free(&enc);
}

static uint64_t packed_at(const uint8_t *p) { return mt_get_u32(p) | (uint64_t)mt_get_u16(p + 4) << 32; }

static void test_locations(void)
{
	mt_loc_encoder e;
	mt_loc_encoder_init(&e);
	uint8_t *buf = malloc(MT_LOC_EVENT_MAX);
	mt_location l[300];
	for (int i = 0; i < 300; i++)
		l[i] = (mt_location){.line = 7, .start_char = 1, .end_char = 2, .filename = "a.c",
				     .defname = "f"};

	/* Saturation (G15) and two-level MTF. */
	mt_location big = {.line = 0x200000, .start_char = 300, .end_char = 5000,
			   .filename = "a.c", .defname = "main"};
	size_t n = mt_loc_encode_event(&e, buf, 0x3000001, 42, &big, 1);
	uint64_t bits = packed_at(buf + 13);
	CHECK("loc_event_header", mt_get_u32(buf) == (1u << 25 | 0x1000001) && mt_get_u64(buf + 4) == 42 &&
					  buf[12] == 1);
	CHECK("loc_saturate_line", (bits & 0xFFFFF) == 0xFFFFF);
	CHECK("loc_saturate_start", (bits >> 20 & 0xFF) == 0xFF);
	CHECK("loc_saturate_end", (bits >> 28 & 0x3FF) == 0x3FF);
	CHECK("loc_new_file_new_def", (bits >> 38 & 31) == 31 && (bits >> 43 & 31) == 31 &&
					      n == 13 + 6 + 4 + 5);
	n = mt_loc_encode_event(&e, buf, 0, 43, &l[0], 1);
	bits = packed_at(buf + 13);
	CHECK("loc_known_file_fresh_defs", (bits >> 38 & 31) == 0 && (bits >> 43 & 31) == 31 &&
						   n == 13 + 6 + 2);

	/* Over 255 locations: replaced by "<unknown>" line 1 cols 1-1, defname "??". */
	n = mt_loc_encode_event(&e, buf, 0, 44, l, 256);
	bits = packed_at(buf + 13);
	CHECK("loc_256_entries_unknown", buf[12] == 1 && (bits & 0xFFFFF) == 1 &&
						 (bits >> 20 & 0xFF) == 1 && (bits >> 28 & 0x3FF) == 1 &&
						 n == 13 + 6 + 10 + 3 &&
						 memcmp(buf + 19, "<unknown>\0??", 13) == 0);
	n = mt_loc_encode_event(&e, buf, 0, 45, l, 255);
	CHECK("loc_255_entries_kept", buf[12] == 255);
	/* The second "<unknown>" finds both strings in the MTF tables. */
	mt_loc_encode_event(&e, buf, 0, 44, l, 300);
	bits = packed_at(buf + 13);
	CHECK("loc_unknown_goes_through_mtf", (bits >> 38 & 31) != 31 && (bits >> 43 & 31) == 0);

	/* Worst-case size: 9 + sum(6 + len(file)+1 + len(def)+1) must not exceed 4096. */
	static char longname[5000];
	memset(longname, 'x', sizeof longname - 1);
	mt_location one = {.line = 1, .filename = longname, .defname = "d"};
	longname[4096 - 9 - 6 - 1 - 2] = 0; /* exactly 4096 bytes worst case */
	n = mt_loc_encode_event(&e, buf, 0, 46, &one, 1);
	CHECKF("loc_4096_bytes_kept", n == 4 + 4096 && buf[12] == 1, "size %zu", n);
	longname[4096 - 9 - 6 - 1 - 2] = 'x'; /* one byte more */
	mt_loc_encoder fresh;
	mt_loc_encoder_init(&fresh);
	n = mt_loc_encode_event(&fresh, buf, 0, 47, &one, 1);
	CHECKF("loc_4097_bytes_unknown", n == 13 + 6 + 10 + 3 &&
					     memcmp(buf + 19, "<unknown>\0??", 13) == 0 &&
					     (packed_at(buf + 13) & 0xFFFFF) == 1,
	       "size %zu", n);
	mt_loc_encoder_free(&fresh);
	/* A negative count (unknown code) and no debug info both give an empty list. */
	n = mt_loc_encode_event(&e, buf, 0, 48, NULL, -1);
	CHECK("loc_unknown_code_empty_list", n == 13 && buf[12] == 0);
	free(buf);
	mt_loc_encoder_free(&e);
}

/* A decoder of sec. 6.3, to check what the encoder produces. */
typedef struct {
	uint64_t loc[MT_CACHE_SIZE];
	uint16_t pred[MT_CACHE_SIZE];
} mirror;

static size_t decode(mirror *m, const uint8_t *p, size_t ncw, uint64_t *out)
{
	size_t n = 0;
	uint32_t prev = 0;
	for (size_t i = 0; i < ncw; i++) {
		uint16_t cw = mt_get_u16(p);
		uint32_t b = cw >> 2, tag = cw & 3, k = 0;
		p += 2;
		m->pred[prev] = (uint16_t)b;
		if (tag == 3) {
			m->loc[b] = mt_get_u64(p);
			p += 8;
		} else if (tag == 1) {
			k = 1;
		} else if (tag == 2) {
			k = *p++;
		}
		out[n++] = m->loc[b];
		prev = b;
		while (k--) {
			prev = m->pred[prev];
			out[n++] = m->loc[prev];
		}
	}
	return n;
}

static int misses;
static int count_miss(void *ctx, size_t index) { misses++; return 0; }

static void test_backtraces(void)
{
	mt_bt_encoder *e = malloc(sizeof *e);
	mirror *m = calloc(1, sizeof *m);
	uint8_t *buf = malloc(MT_BT_MAX_BYTES);
	uint64_t *bt = malloc(20000 * sizeof *bt), *out = malloc(20000 * sizeof *out);
	mt_bt_encoder_init(e);
	size_t len, enc, ncw;

	/* A stack of 30 distinct frames: 30 misses; the same again: one prediction run. */
	for (int i = 0; i < 30; i++) bt[i] = 1000 + 7 * i;
	misses = 0;
	ncw = mt_bt_encode(e, 0, bt, 30, buf, &len, &enc, count_miss, NULL);
	CHECK("bt_first_all_miss", ncw == 30 && len == 300 && enc == 30 && misses == 30);
	CHECK("bt_decodes", decode(m, buf, ncw, out) == 30 && memcmp(out, bt, 30 * 8) == 0);
	misses = 0;
	ncw = mt_bt_encode(e, 1, bt, 30, buf, &len, &enc, count_miss, NULL);
	CHECKF("bt_repeat_one_run", ncw == 1 && len == 3 && buf[2] == 29 && misses == 0,
	       "%zu codewords, %zu bytes", ncw, len);
	CHECK("bt_repeat_decodes", decode(m, buf, ncw, out) == 30 && memcmp(out, bt, 30 * 8) == 0);

	/* 10,000 identical frames: runs of 1 + 255 predictions each. */
	for (int i = 0; i < 10000; i++) bt[i] = 555;
	ncw = mt_bt_encode(e, 2, bt, 10000, buf, &len, &enc, count_miss, NULL);
	size_t n = decode(m, buf, ncw, out);
	int same = n == 10000;
	for (size_t i = 0; same && i < n; i++) same = out[i] == 555;
	CHECKF("bt_long_runs_decode", same && enc == 10000, "decoded %zu frames", n);
	CHECKF("bt_long_runs_compact", len < 200, "%zu bytes", len);

	/* 1000 distinct new frames do not fit in 4096 bytes: innermost frames are dropped. */
	for (int i = 0; i < 1000; i++) bt[i] = 100000 + 13 * i;
	ncw = mt_bt_encode(e, 3, bt, 1000, buf, &len, &enc, count_miss, NULL);
	CHECKF("bt_truncated_within_4096", len <= MT_BT_MAX_BYTES && enc < 1000 && enc == ncw &&
						   enc == 409,
	       "%zu bytes, %zu frames", len, enc);
	CHECK("bt_truncated_decodes", decode(m, buf, ncw, out) == enc &&
					      memcmp(out, bt, enc * 8) == 0);

	/* Truthful prefix (G28): the previous backtrace is what was encoded, not what was given. */
	mt_bt_set_prev(e, bt, 0, enc);
	CHECK("bt_prefix_truthful", mt_bt_common_prefix(e, bt, 1000) == enc);
	CHECK("bt_prefix_partial", (bt[5] = 1, mt_bt_common_prefix(e, bt, 1000) == 5));
	CHECK("bt_prefix_empty", mt_bt_common_prefix(e, bt, 0) == 0);

	/* Cache verifier sequence (sec. 8). */
	static const uint16_t seq[] = {4242, 9655, 15068, 4097, 9510};
	mt_bt_encoder_free(e);
	mt_bt_encoder_init(e);
	int ok = 1;
	for (int i = 0; i < 5; i++) {
		uint16_t ix, pred;
		uint64_t val;
		mt_bt_next_verifier(e, &ix, &pred, &val);
		ok &= ix == seq[i];
	}
	CHECK("verifier_ix_sequence", ok);

	mt_bt_encoder_free(e);
	free(e);
	free(m);
	free(buf);
	free(bt);
	free(out);
}

static void test_hashes(void)
{
	/* published FNV-1a 64 test vectors */
	CHECK("fnv1a_vectors", mt_fnv1a("", 0) == 0xcbf29ce484222325ULL &&
				       mt_fnv1a("a", 1) == 0xaf63dc4c8601ec8cULL &&
				       mt_fnv1a("foobar", 6) == 0x85944171f73967e8ULL);
	CHECK("fnv1a_str_same", mt_fnv1a_str("foobar") == mt_fnv1a("foobar", 6));
	/* consecutive keys land in different low bits */
	int distinct = 0;
	unsigned seen[64] = { 0 };
	for (uint64_t k = 0; k < 64; k++) seen[mt_mix64(k) & 63]++;
	for (int i = 0; i < 64; i++) distinct += seen[i] > 0;
	CHECKF("mix64_spreads", mt_mix64(0) == 0 && distinct > 32, "%d of 64 buckets", distinct);
}

/* The slot index over an array of keys, with a hash that collides a lot (8 distinct values). */
static uint64_t bad_hash(uint64_t key) { return key % 8; }
static uint64_t key_hash(const void *ctx, uint32_t i) { return bad_hash(((const uint64_t *)ctx)[i]); }

static void test_slot_index(void)
{
	enum { N = 5000 };
	uint64_t *keys = malloc(N * sizeof *keys);
	mt_slot_index ix = { 0 };
	int ok = 1;
	for (uint32_t n = 0; n < N && ok; n++) {
		ok &= mt_slot_reserve(&ix, n, 16, key_hash, keys) == 0;
		keys[n] = 1000003ull * n;
		size_t j = mt_slot_first(&ix, bad_hash(keys[n]));
		for (; ix.slots[j]; j = mt_slot_next(&ix, j)) ok &= keys[ix.slots[j] - 1] != keys[n];
		ix.slots[j] = n + 1;
	}
	CHECKF("slot_index_half_full", ok && ix.cap >= 2 * N && ix.cap < 4 * N &&
					       !(ix.cap & (ix.cap - 1)), "cap %zu", ix.cap);
	int found = 0;
	for (uint32_t n = 0; n < N; n++) {
		size_t j = mt_slot_first(&ix, bad_hash(keys[n]));
		while (ix.slots[j] && keys[ix.slots[j] - 1] != keys[n]) j = mt_slot_next(&ix, j);
		found += ix.slots[j] == n + 1;
	}
	CHECKF("slot_index_finds_all", found == N, "%d of %d", found, N);
	size_t j = mt_slot_first(&ix, bad_hash(7));
	while (ix.slots[j] && keys[ix.slots[j] - 1] != 7) j = mt_slot_next(&ix, j);
	CHECK("slot_index_missing_key", ix.slots[j] == 0);
	mt_slot_free(&ix);
	CHECK("slot_index_free", !ix.slots && !ix.cap);
	free(keys);
}

int main(void)
{
	test_hashes();
	test_slot_index();
	test_vint();
	test_mtf();
	test_locations();
	test_backtraces();
	return CHECK_DONE();
}
