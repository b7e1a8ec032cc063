/* A code object's qualified name, file and line, read from the target's memory once per code
 * object and kept. The frame copied in BPF carries the code object's co_qualname as it was
 * when the frame ran (its ident): a kept entry whose ident differs, or a code object read now
 * whose co_qualname differs, was freed and its memory reused, and gives no name. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyproc_int.h"

#define MAX_NAME_CHARS 1000        /* a longer name is cut */
#define MAX_LINETABLE (256u << 10) /* a longer table: lines past it are the first line */
#define MAX_CODES (1u << 20)       /* code objects kept per process */

/* ---- the memory budget (pyproc.h) ---- */

static size_t budget_process = PY_BUDGET_PROCESS;
static _Atomic size_t bytes_all; /* of every pyproc of the parser: its threads share it */

void pyproc_set_budget(size_t per_process) { budget_process = per_process; }
uint64_t pyproc_over_budget(const struct pyproc *p) { return p ? p->over_budget : 0; }
size_t pyproc_bytes(const struct pyproc *p) { return p ? p->bytes : 0; }

/* May p keep more bytes? (a code object is at most a few KiB plus its table) */
static bool budget_left(const struct pyproc *p, size_t more)
{
	return p->bytes + more <= budget_process && atomic_load(&bytes_all) + more <= PY_BUDGET_ALL;
}

static void budget_take(struct pyproc *p, size_t n)
{
	p->bytes += n;
	atomic_fetch_add(&bytes_all, n);
}

static void budget_give(struct pyproc *p, size_t n)
{
	p->bytes -= n;
	atomic_fetch_sub(&bytes_all, n);
}

/* ---- the location table (3.11+, Objects/locations.md) ---- */

static unsigned varint(const uint8_t *t, size_t len, size_t *i)
{
	unsigned v = 0, shift = 0;
	while (*i < len) {
		uint8_t b = t[(*i)++];
		v |= (unsigned)(b & 63) << shift;
		shift += 6;
		if (!(b & 64) || shift > 24) break;
	}
	return v;
}

static int signed_varint(const uint8_t *t, size_t len, size_t *i)
{
	unsigned u = varint(t, len, i);
	return u & 1 ? -(int)(u >> 1) : (int)(u >> 1);
}

int py_addr_to_line(const uint8_t *t, size_t len, int firstlineno, int addr)
{
	int line = firstlineno, start = 0;
	size_t i = 0;
	while (i < len) {
		uint8_t b = t[i++];
		if (!(b & 0x80)) continue; /* not an entry's first byte: out of step, resync */
		int code = (b >> 3) & 15, units = (b & 7) + 1;
		bool none = false;
		if (code == 15) { /* no location */
			none = true;
		} else if (code == 14) { /* long form: line delta, end line delta, columns */
			line += signed_varint(t, len, &i);
			varint(t, len, &i);
			varint(t, len, &i);
			varint(t, len, &i);
		} else if (code == 13) { /* no columns */
			line += signed_varint(t, len, &i);
		} else if (code >= 10) { /* one line: delta 0, 1 or 2, then two column bytes */
			line += code - 10;
			i += 2;
		} else { /* short form: same line, one column byte */
			i += 1;
		}
		start += units * 2;
		if (addr < start) return none ? firstlineno : line;
	}
	return firstlineno;
}

/* ---- reading objects ---- */

static void put_utf8(char *out, size_t *n, uint32_t c)
{
	if (c < 0x80) {
		out[(*n)++] = (char)c;
	} else if (c < 0x800) {
		out[(*n)++] = (char)(0xc0 | c >> 6);
		out[(*n)++] = (char)(0x80 | (c & 63));
	} else if (c < 0x10000) {
		out[(*n)++] = (char)(0xe0 | c >> 12);
		out[(*n)++] = (char)(0x80 | (c >> 6 & 63));
		out[(*n)++] = (char)(0x80 | (c & 63));
	} else {
		out[(*n)++] = (char)(0xf0 | (c >> 18 & 7));
		out[(*n)++] = (char)(0x80 | (c >> 12 & 63));
		out[(*n)++] = (char)(0x80 | (c >> 6 & 63));
		out[(*n)++] = (char)(0x80 | (c & 63));
	}
}

/* A str object as UTF-8 (compact strings: all that code objects hold), or NULL. */
static char *read_str(const struct pyproc *p, uint64_t addr)
{
	const struct py_objlayout *o = &p->o;
	uint8_t head[128];
	if (!addr || o->uni_compact_size > sizeof head || py_read(p, addr, head, o->uni_compact_size) < 0)
		return NULL;
	uint32_t state;
	int64_t length;
	memcpy(&state, head + o->uni_state, sizeof state);
	memcpy(&length, head + o->uni_length, sizeof length);
	unsigned kind = state >> 2 & 7, compact = state >> 5 & 1, ascii = state >> 6 & 1;
	if (!compact || (kind != 1 && kind != 2 && kind != 4) || length < 0) return NULL;
	if (length > MAX_NAME_CHARS) length = MAX_NAME_CHARS;
	size_t bytes = (size_t)length * kind;
	uint8_t *raw = malloc(bytes + 1);
	char *out = malloc((size_t)length * 4 + 1);
	if (!raw || !out ||
	    py_read(p, addr + (ascii ? o->uni_ascii_size : o->uni_compact_size), raw, bytes) < 0) {
		free(raw);
		free(out);
		return NULL;
	}
	size_t n = 0;
	for (int64_t i = 0; i < length; i++) {
		uint32_t c;
		if (kind == 1) c = raw[i];
		else if (kind == 2) c = (uint32_t)raw[2 * i] | (uint32_t)raw[2 * i + 1] << 8;
		else memcpy(&c, raw + 4 * i, 4);
		if (c == 0 || c > 0x10ffff) c = '?';
		put_utf8(out, &n, c);
	}
	out[n] = '\0';
	free(raw);
	return out;
}

static uint8_t *read_bytes(const struct pyproc *p, uint64_t addr, uint32_t *len)
{
	int64_t size;
	*len = 0;
	if (!addr || py_read(p, addr + p->o.bytes_size, &size, sizeof size) < 0 || size < 0)
		return NULL;
	if (size > MAX_LINETABLE) size = MAX_LINETABLE;
	uint8_t *b = malloc((size_t)size + 1);
	if (!b || py_read(p, addr + p->o.bytes_sval, b, (size_t)size) < 0) {
		free(b);
		return NULL;
	}
	*len = (uint32_t)size;
	return b;
}

static uint64_t hash_str(uint64_t h, const char *s)
{
	for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

static size_t code_bytes(const struct pycode *c)
{
	return sizeof *c + (c->filename ? strlen(c->filename) + 1 : 0) +
	       (c->qualname ? strlen(c->qualname) + 1 : 0) + c->table_len + 1;
}

static void code_free(struct pycode *c)
{
	free(c->filename);
	free(c->qualname);
	free(c->table);
	free(c);
}

/* The code object at f->code, read now: NULL when it is no code object, or not the one that
 * ran (its co_qualname is not f->ident). */
static struct pycode *read_code(const struct pyproc *p, const struct mt_py_frame *f)
{
	const struct py_objlayout *o = &p->o;
	uint8_t head[512];
	if (o->code_adaptive > sizeof head || py_read(p, f->code, head, o->code_adaptive) < 0)
		return NULL;
	uint64_t type, filename, qualname, table;
	int32_t first;
	memcpy(&type, head + o->ob_type, 8);
	memcpy(&filename, head + o->code_filename, 8);
	memcpy(&qualname, head + o->code_qualname, 8);
	memcpy(&table, head + o->code_linetable, 8);
	memcpy(&first, head + o->code_firstlineno, 4);
	if (type != p->code_type || (f->ident && qualname != f->ident)) return NULL;
	struct pycode *c = calloc(1, sizeof *c);
	if (!c) return NULL;
	c->code = f->code;
	c->ident = qualname;
	c->firstlineno = first;
	c->filename = read_str(p, filename);
	c->qualname = read_str(p, qualname);
	c->table = read_bytes(p, table, &c->table_len);
	if (!c->filename || !c->qualname) {
		code_free(c);
		return NULL;
	}
	c->hash = hash_str(hash_str(0xcbf29ce484222325ull, c->filename) * 31, c->qualname);
	return c;
}

static size_t bucket_of(const struct pyproc *p, uint64_t code)
{
	code ^= code >> 29;
	code *= 0xbf58476d1ce4e5b9ull;
	return (size_t)(code >> 32) & (p->nbuckets - 1);
}

static void grow(struct pyproc *p)
{
	size_t n = p->nbuckets * 4;
	struct pycode **b = calloc(n, sizeof *b);
	if (!b) return;
	struct pycode **old = p->buckets;
	size_t oldn = p->nbuckets;
	p->buckets = b;
	p->nbuckets = n;
	for (size_t i = 0; i < oldn; i++)
		for (struct pycode *c = old[i], *next; c; c = next) {
			next = c->next;
			size_t k = bucket_of(p, c->code);
			c->next = b[k];
			b[k] = c;
		}
	free(old);
}

/* Keeps c, or frees it and returns false when the budget is spent. */
static bool insert(struct pyproc *p, struct pycode *c)
{
	size_t n = code_bytes(c);
	if (!budget_left(p, n)) {
		p->over_budget++;
		code_free(c);
		return false;
	}
	budget_take(p, n);
	if (p->ncodes >= 2 * p->nbuckets) grow(p);
	struct pycode **slot = &p->buckets[bucket_of(p, c->code)];
	c->next = *slot;
	*slot = c;
	p->ncodes++;
	return true;
}

/* The entry of (code, ident); with ident 0, any of code. An entry of code with another
 * ident is dropped (another object lives there now). */
static struct pycode *lookup(struct pyproc *p, uint64_t code, uint64_t ident)
{
	for (struct pycode **pc = &p->buckets[bucket_of(p, code)]; *pc; pc = &(*pc)->next) {
		struct pycode *c = *pc;
		if (c->code != code) continue;
		if (!ident || c->ident == ident) return c;
		*pc = c->next;
		budget_give(p, code_bytes(c));
		code_free(c);
		p->ncodes--;
		break;
	}
	return NULL;
}

static char *copy_name(const char *s, uint16_t len, size_t cap)
{
	if (len == MT_PY_NOT_ASCII || len > cap) return NULL;
	char *out = malloc((size_t)len + 1);
	if (!out) return NULL;
	for (uint16_t i = 0; i < len; i++)
		out[i] = s[i] && (unsigned char)s[i] < 0x80 ? s[i] : '?';
	out[len] = '\0';
	return out;
}

void pyproc_learn(struct pyproc *p, const struct mt_py_code *k)
{
	if (!k->code || !k->ident || lookup(p, k->code, k->ident) || p->ncodes >= MAX_CODES) return;
	struct pycode *c = calloc(1, sizeof *c);
	if (!c) return;
	c->code = k->code;
	c->ident = k->ident;
	c->firstlineno = k->firstlineno;
	c->qualname = copy_name(k->qualname, k->qualname_len, MT_PY_NAME_BYTES);
	c->filename = copy_name(k->filename, k->filename_len, MT_PY_FILE_BYTES);
	uint32_t n = k->table_len <= MT_PY_TABLE_BYTES ? k->table_len : 0;
	c->table = malloc(n + 1);
	if (!c->qualname || !c->filename || !c->table) {
		code_free(c);
		return;
	}
	memcpy(c->table, k->table, n);
	c->table_len = n;
	c->table_cut = k->table_size > n;
	c->hash = hash_str(hash_str(0xcbf29ce484222325ull, c->filename) * 31, c->qualname);
	insert(p, c);
}

struct pyproc *pyproc_for_test(void)
{
	struct pyproc *p = calloc(1, sizeof *p);
	if (!p) return NULL;
	p->mem_fd = -1;
	p->code_type = 1; /* no code object read from memory is taken */
	p->nbuckets = 16;
	p->buckets = calloc(p->nbuckets, sizeof *p->buckets);
	if (!p->buckets) {
		free(p);
		return NULL;
	}
	return p;
}

/* The entry of f's code object, read now if need be; NULL with *over when the budget (or
 * MAX_CODES) is spent: a code object is not even read then. */
static struct pycode *code_of(struct pyproc *p, const struct mt_py_frame *f, bool *over)
{
	struct pycode *c = lookup(p, f->code, f->ident);
	*over = false;
	if (c) return c;
	if (p->ncodes >= MAX_CODES || !budget_left(p, sizeof *c + 2 * MAX_NAME_CHARS)) {
		p->over_budget++;
		*over = true;
		return NULL;
	}
	c = read_code(p, f);
	if (c && !insert(p, c)) {
		*over = true;
		return NULL;
	}
	return c;
}

/* A sample's copy of the line table was cut: the whole one from the process, once (while
 * the code object is the same). */
static void whole_table(struct pyproc *p, struct pycode *c, const struct mt_py_frame *f)
{
	c->table_cut = false;
	struct pycode *now = read_code(p, f);
	if (!now) return;
	if (now->table && now->table_len > c->table_len &&
	    budget_left(p, now->table_len - c->table_len)) {
		budget_take(p, now->table_len - c->table_len);
		free(c->table);
		c->table = now->table;
		c->table_len = now->table_len;
		now->table = NULL;
	}
	code_free(now);
}

int pyproc_locate(struct pyproc *p, const struct mt_py_frame *f, struct py_location *out)
{
	bool over = false;
	struct pycode *c = p ? code_of(p, f, &over) : NULL;
	if (!c) return over ? PY_OVER_BUDGET : -1;
	if (c->table_cut) whole_table(p, c, f);
	int line = c->firstlineno;
	if (f->instr != UINT32_MAX && f->instr >= p->o.code_adaptive && c->table)
		line = py_addr_to_line(c->table, c->table_len, c->firstlineno,
				       (int)(f->instr - p->o.code_adaptive));
	out->filename = c->filename;
	out->qualname = c->qualname;
	out->line = line > 0 ? (uint32_t)line : 0;
	out->hash = c->hash;
	return 0;
}

void pyproc_close(struct pyproc *p)
{
	if (!p) return;
	for (size_t i = 0; p->buckets && i < p->nbuckets; i++)
		for (struct pycode *c = p->buckets[i], *next; c; c = next) {
			next = c->next;
			code_free(c);
		}
	free(p->buckets);
	atomic_fetch_sub(&bytes_all, p->bytes);
	free(p);
}
