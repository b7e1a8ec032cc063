/* Location events and their move-to-front string tables (sec. 5.2 and 7). */
#include "loc_encoder.h"

#include <stdlib.h>
#include <string.h>

#include "codec.h"

#define EMPTY SIZE_MAX

static void mtf_clear(mt_mtf_table *t)
{
	for (int i = 0; i < MT_MTF_SLOTS; i++) t->slot[i].len = EMPTY;
}

static void mtf_init(mt_mtf_table *t)
{
	memset(t, 0, sizeof *t);
	mtf_clear(t);
}

static void mtf_free(mt_mtf_table *t)
{
	for (int i = 0; i < MT_MTF_SLOTS; i++) {
		free(t->slot[i].key);
		if (t->slot[i].defnames) {
			mtf_free(t->slot[i].defnames);
			free(t->slot[i].defnames);
		}
	}
}

int mt_mtf_encode(mt_mtf_table *t, const char *key, size_t len, mt_mtf_slot **slot_out)
{
	mt_mtf_slot tmp;
	int i;
	for (i = 0; i < MT_MTF_SLOTS && t->slot[i].len != EMPTY; i++) {
		if (t->slot[i].len == len && memcmp(t->slot[i].key, key, len) == 0) {
			tmp = t->slot[i];
			memmove(&t->slot[1], &t->slot[0], (size_t)i * sizeof tmp);
			t->slot[0] = tmp;
			*slot_out = &t->slot[0];
			return i;
		}
	}
	/* Push: the last slot's storage is recycled for the new entry. */
	tmp = t->slot[MT_MTF_SLOTS - 1];
	if (tmp.cap < len + 1) {
		char *k = realloc(tmp.key, len + 1);
		if (!k) return -1;
		tmp.key = k;
		tmp.cap = len + 1;
	}
	memcpy(tmp.key, key, len);
	tmp.key[len] = 0;
	tmp.len = len;
	memmove(&t->slot[1], &t->slot[0], (MT_MTF_SLOTS - 1) * sizeof tmp);
	t->slot[0] = tmp;
	*slot_out = &t->slot[0];
	return MT_MTF_NEW;
}

int mt_loc_encoder_init(mt_loc_encoder *e)
{
	mtf_init(&e->files);
	return 0;
}

void mt_loc_encoder_free(mt_loc_encoder *e) { mtf_free(&e->files); }

static uint64_t saturate(uint32_t v, uint32_t max) { return v > max ? max : v; }

/* Encodes one packed location (48 bits + the new strings) at p; returns bytes written or 0. */
static size_t put_location(mt_loc_encoder *e, uint8_t *p, uint32_t line, uint32_t start,
			   uint32_t end, const char *file, const char *def)
{
	size_t flen = strlen(file), dlen = strlen(def);
	mt_mtf_slot *fslot, *dslot;
	int fcode = mt_mtf_encode(&e->files, file, flen, &fslot);
	if (fcode < 0) return 0;
	if (fcode == MT_MTF_NEW) {
		/* A new filename gets a fresh (or recycled, cleared) defname table. */
		if (!fslot->defnames) {
			fslot->defnames = malloc(sizeof *fslot->defnames);
			if (!fslot->defnames) {
				fslot->len = EMPTY; /* keep the table consistent: forget the entry */
				return 0;
			}
			mtf_init(fslot->defnames);
		} else {
			mtf_clear(fslot->defnames);
		}
	}
	int dcode = mt_mtf_encode(fslot->defnames, def, dlen, &dslot);
	if (dcode < 0) return 0;
	uint64_t bits = saturate(line, 0xFFFFF) | saturate(start, 0xFF) << 20 |
			saturate(end, 0x3FF) << 28 | (uint64_t)fcode << 38 | (uint64_t)dcode << 43;
	mt_put_u32(p, (uint32_t)bits);
	mt_put_u16(p + 4, (uint16_t)(bits >> 32));
	size_t n = 6;
	if (fcode == MT_MTF_NEW) {
		memcpy(p + n, file, flen + 1);
		n += flen + 1;
	}
	if (dcode == MT_MTF_NEW) {
		memcpy(p + n, def, dlen + 1);
		n += dlen + 1;
	}
	return n;
}

static const char *str_or_empty(const char *s) { return s ? s : ""; }

size_t mt_loc_encode_event(mt_loc_encoder *e, uint8_t *out, uint64_t time_us, uint64_t code,
			   const mt_location *locs, int n)
{
	if (n < 0) n = 0;
	int unknown = n > MT_LOC_MAX_LIST;
	if (!unknown) {
		size_t worst = 9;
		for (int i = 0; i < n && !unknown; i++) {
			worst += 6 + strlen(str_or_empty(locs[i].filename)) + 1 +
				 strlen(str_or_empty(locs[i].defname)) + 1;
			unknown = worst > MT_LOC_MAX_BYTES;
		}
	}
	mt_put_u32(out, (uint32_t)MT_EV_ID_LOCATION << 25 | ((uint32_t)time_us & MT_TIME_MASK));
	mt_put_u64(out + 4, code);
	size_t pos = 13;
	if (unknown) {
		out[12] = 1;
		size_t k = put_location(e, out + pos, 1, 1, 1, "<unknown>", "??");
		return k ? pos + k : 0;
	}
	out[12] = (uint8_t)n;
	for (int i = 0; i < n; i++) {
		size_t k = put_location(e, out + pos, locs[i].line, locs[i].start_char,
					locs[i].end_char, str_or_empty(locs[i].filename),
					str_or_empty(locs[i].defname));
		if (!k) return 0;
		pos += k;
	}
	return pos;
}
