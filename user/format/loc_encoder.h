/* Writer side of location events (docs/memtrace-format.md sections 5.2 and 7): the two-level
 * move-to-front tables (filenames, then one defname table per filename) and the encoding of
 * one location event. Used by writer.c; the MTF state persists for the whole trace. */
#ifndef MEMTRACE_LOC_ENCODER_H
#define MEMTRACE_LOC_ENCODER_H

#include <stddef.h>
#include <stdint.h>

#include "memtrace.h"

#define MT_MTF_SLOTS 31
#define MT_MTF_NEW 31             /* the code that means "new string follows" */
#define MT_LOC_MAX_LIST 255       /* more locations than this -> "<unknown>" */
#define MT_LOC_MAX_BYTES 4096     /* worst-case encoded size limit (sec. 5.2) */
/* Largest location event: header + a list whose worst-case size is MT_LOC_MAX_BYTES. */
#define MT_LOC_EVENT_MAX (4 + MT_LOC_MAX_BYTES)

/* One MTF slot. Slot storage (the key buffer, and for filenames the defname table) is
 * recycled when an entry falls off the end, so steady-state encoding does not allocate. */
typedef struct mt_mtf_slot {
	char *key;  /* NUL-terminated; NULL or len==SIZE_MAX when the slot is empty */
	size_t len; /* SIZE_MAX = empty slot */
	size_t cap;
	struct mt_mtf_table *defnames; /* filename table only: this file's defname table */
} mt_mtf_slot;

typedef struct mt_mtf_table {
	mt_mtf_slot slot[MT_MTF_SLOTS];
} mt_mtf_table;

typedef struct mt_loc_encoder {
	mt_mtf_table files;
} mt_loc_encoder;

/* Returns 0, or -1 if out of memory. */
int mt_loc_encoder_init(mt_loc_encoder *e);
void mt_loc_encoder_free(mt_loc_encoder *e);

/* Encodes one complete location event (event header with time_us, code, list) into out, which
 * must hold MT_LOC_EVENT_MAX bytes. Lists of more than 255 locations or of a worst-case size
 * over 4096 bytes are replaced by "<unknown>". n < 0 is written as an empty list. Location
 * fields are saturated. Returns the bytes written, or 0 if out of memory. */
size_t mt_loc_encode_event(mt_loc_encoder *e, uint8_t *out, uint64_t time_us, uint64_t code,
			   const mt_location *locs, int n);

/* MTF primitive, exposed for tests: returns the slot index of key (moving it to the front),
 * or MT_MTF_NEW after pushing it; -1 if out of memory. *slot_out receives slot 0. */
int mt_mtf_encode(mt_mtf_table *t, const char *key, size_t len, mt_mtf_slot **slot_out);

#endif
