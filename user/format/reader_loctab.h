/* Reader-side storage for location information (internal to the format library):
 *  - interned strings (each distinct filename/defname stored once, compared by pointer),
 *  - the global "location code -> location list" table of the reader (sec. 5.2).
 * Everything lives in chunked arenas that never move, so pointers handed out stay valid
 * until mtr_loctab_free(). */
#ifndef MEMTRACE_READER_LOCTAB_H
#define MEMTRACE_READER_LOCTAB_H

#include <stddef.h>
#include <stdint.h>

#include "memtrace.h"

typedef struct mtr_loctab mtr_loctab;

mtr_loctab *mtr_loctab_new(void);
void mtr_loctab_free(mtr_loctab *t);

/* Returns the interned copy of s[0..len) (len bytes, no NUL inside), or NULL if out of
 * memory. Equal strings give the same pointer. */
const char *mtr_intern(mtr_loctab *t, const char *s, size_t len);

/* The stored list of `code`: n >= 0 and *locs set, or -1 if the code is not in the table. */
int mtr_loctab_find(const mtr_loctab *t, uint64_t code, const mt_location **locs);

/* Stores a copy of locs[0..n) for `code` (not yet in the table; strings must be interned).
 * Returns 0, or -1 if out of memory. */
int mtr_loctab_add(mtr_loctab *t, uint64_t code, const mt_location *locs, int n);

/* 1 if the two lists are equal (strings compared by pointer: both lists hold interned
 * strings of the same table). */
int mtr_locs_equal(const mt_location *a, int na, const mt_location *b, int nb);

#endif
