/* The memtrace trace reader (docs/memtrace-format.md, sec. 11): streaming, one 32 KiB
 * packet buffer, behaves like the real memtrace 0.2.3 reader. It raises an error where
 * 0.2.3 raises one and skips a packet with a warning where 0.2.3 skips one. Where 0.2.3
 * would crash, loop or return garbage (references to empty MTF slots, a negative common
 * prefix, a packet_size smaller than its header, ...), we stop with an error instead.
 *
 * Error messages: "malformed trace: <what 0.2.3 says> (packet N at byte B: <details>)",
 * N counting packets from 0 (the trace-info packet), B a file offset. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec.h"
#include "memtrace.h"
#include "reader_loctab.h"

/* Backtraces can grow without bound through common prefixes; real ones stay far below
 * this (the deepest reference trace has 9999 frames). */
#define MTR_MAX_BACKTRACE (1u << 20)
#define MTR_MTF_SLOTS 31
#define MTR_MTF_NEW 31
/* 0.2.3 makes sure this much is buffered before parsing a packet header. */
#define MTR_HEADER_READAHEAD 200

struct mtr_header {
	uint32_t magic;
	int32_t packet_size; /* bits */
	int64_t time_begin, time_end;
	uint16_t version;
	uint64_t pid;
	uint16_t verify_ix, verify_pred;
	uint64_t verify_val;
	int64_t alloc_id_begin, alloc_id_end;
	int64_t content_size; /* bytes; may be negative in a damaged file */
};

/* A filename slot of the MTF table: the name and the defname table it owns. */
struct mtr_file_slot {
	const char *name; /* NULL = empty */
	int deftab;
};

struct mt_reader {
	int fd;
	mt_warn_fn warn;
	void *warn_ctx;
	char *err;
	int state; /* 0 = reading, 1 = end reached, -1 = failed */

	/* Input buffer: bytes [pos, end) of buf are unread; buf[0] is at file offset buf_off
	 * (offsets count from where the reader started). */
	uint8_t buf[MT_MAX_PACKET];
	size_t pos, end;
	uint64_t buf_off;
	int eof;

	mt_trace_info info;
	uint64_t packet_no;  /* the packet being read */
	uint64_t packet_off; /* its file offset */
	struct mtr_header hdr;
	int in_packet;
	size_t content_end; /* end of the current packet's content in buf */

	int64_t last_time;   /* time of the last event, or the start time */
	int64_t alloc_count; /* allocations decoded so far = the next allocation id */

	/* Backtrace decoder (sec. 6.3) */
	int64_t cache_loc[MT_CACHE_SIZE];
	uint16_t cache_pred[MT_CACHE_SIZE];
	uint64_t *bt;
	size_t bt_len, bt_cap;

	/* Locations (sec. 5.2, 7) */
	mtr_loctab *tab;
	struct mtr_file_slot files[MTR_MTF_SLOTS];
	const char *defnames[MTR_MTF_SLOTS][MTR_MTF_SLOTS]; /* at most 31 tables ever exist */
	int ndeftabs;
	mt_location scratch[255];
};

/* OCaml ints are 63 bits: Int64.to_int drops bit 63 (and sign-extends bit 62). */
static int64_t to_ocaml_int(uint64_t v) { return (int64_t)(v << 1) >> 1; }

static uint64_t file_off(const mt_reader *r, const uint8_t *p) { return r->buf_off + (uint64_t)(p - r->buf); }

static void set_error(mt_reader *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *msg = NULL;
	if (vasprintf(&msg, fmt, ap) < 0) msg = NULL;
	va_end(ap);
	free(r->err);
	r->err = msg;
	r->state = -1;
}

/* "malformed trace: WHAT (packet N at byte B[: DETAILS])"; returns -1. */
__attribute__((format(printf, 4, 5)))
static int fail_at(mt_reader *r, uint64_t off, const char *what, const char *fmt, ...)
{
	char details[512] = "";
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(details, sizeof(details), fmt, ap);
		va_end(ap);
	}
	set_error(r, "malformed trace: %s (packet %" PRIu64 " at byte %" PRIu64 "%s%s)", what,
		  r->packet_no, off, details[0] ? ": " : "", details);
	return -1;
}

/* 0.2.3 reports reads past the end of a packet as "Buffer underflow at position N". */
static int underflow(mt_reader *r, uint64_t off, const char *field)
{
	char what[64];
	snprintf(what, sizeof(what), "buffer underflow at position %" PRIu64, off - r->packet_off);
	return fail_at(r, off, what, "%s", field);
}

static void warn(mt_reader *r, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (r->warn) r->warn(r->warn_ctx, msg);
	else fprintf(stderr, "warning: %s\n", msg);
}

/* Moves the unread bytes to the front of the buffer and reads until it is full or the
 * input ends. Returns 0, or -1 on a read error. */
static int refill(mt_reader *r)
{
	size_t avail = r->end - r->pos;
	memmove(r->buf, r->buf + r->pos, avail);
	r->buf_off += r->pos;
	r->pos = 0;
	r->end = avail;
	while (!r->eof && r->end < sizeof(r->buf)) {
		ssize_t n = read(r->fd, r->buf + r->end, sizeof(r->buf) - r->end);
		if (n < 0 && errno == EINTR) continue;
		if (n < 0) {
			set_error(r, "read error at byte %" PRIu64 ": %s", r->buf_off + r->end,
				  strerror(errno));
			return -1;
		}
		if (n == 0) r->eof = 1;
		r->end += (size_t)n;
	}
	return 0;
}

/* ---- bounded little readers over [p, end) ------------------------------------------ */

struct cursor {
	const uint8_t *p, *end;
};

static int need(mt_reader *r, const struct cursor *c, size_t n, const char *field)
{
	if ((size_t)(c->end - c->p) >= n) return 0;
	return underflow(r, file_off(r, c->p), field);
}

static int get_u8(mt_reader *r, struct cursor *c, const char *field, uint8_t *v)
{
	if (need(r, c, 1, field)) return -1;
	*v = *c->p++;
	return 0;
}

static int get_u16(mt_reader *r, struct cursor *c, const char *field, uint16_t *v)
{
	if (need(r, c, 2, field)) return -1;
	*v = mt_get_u16(c->p);
	c->p += 2;
	return 0;
}

static int get_u32(mt_reader *r, struct cursor *c, const char *field, uint32_t *v)
{
	if (need(r, c, 4, field)) return -1;
	*v = mt_get_u32(c->p);
	c->p += 4;
	return 0;
}

static int get_u64(mt_reader *r, struct cursor *c, const char *field, uint64_t *v)
{
	if (need(r, c, 8, field)) return -1;
	*v = mt_get_u64(c->p);
	c->p += 8;
	return 0;
}

/* A vint as an OCaml int (sec. 2). */
static int get_vint(mt_reader *r, struct cursor *c, const char *field, int64_t *v)
{
	size_t n = mt_get_vint(c->p, c->end, v);
	if (n == 0) return underflow(r, file_off(r, c->p), field);
	if (n == 9) *v = to_ocaml_int((uint64_t)*v);
	c->p += n;
	return 0;
}

/* A NUL-terminated string, interned. */
static int get_string(mt_reader *r, struct cursor *c, const char *field, const char **s)
{
	const uint8_t *nul = memchr(c->p, 0, (size_t)(c->end - c->p));
	if (!nul) {
		char what[96];
		snprintf(what, sizeof(what), "%s is not NUL-terminated before the end of the packet",
			 field);
		return underflow(r, file_off(r, c->end), what);
	}
	*s = mtr_intern(r->tab, (const char *)c->p, (size_t)(nul - c->p));
	if (!*s) {
		set_error(r, "out of memory reading a trace");
		return -1;
	}
	c->p = nul + 1;
	return 0;
}

/* ---- packet headers (sec. 3, 8) --------------------------------------------------- */

/* The cache verifier check of 0.2.3, made while parsing the header. */
static int check_verifier(mt_reader *r, const struct mtr_header *h, uint64_t off)
{
	if (h->verify_ix == MT_VERIFY_NONE) return 0;
	if (h->verify_ix >= MT_CACHE_SIZE)
		return fail_at(r, off, "cache verification failed",
			       "bucket %u does not exist (the cache has %u buckets)", h->verify_ix,
			       MT_CACHE_SIZE);
	int64_t val = to_ocaml_int(h->verify_val);
	if (r->cache_pred[h->verify_ix] != h->verify_pred || r->cache_loc[h->verify_ix] != val)
		return fail_at(r, off, "cache verification failed",
			       "bucket %u holds prediction %u and code 0x%" PRIx64
			       ", the header expects prediction %u and code 0x%" PRIx64,
			       h->verify_ix, r->cache_pred[h->verify_ix],
			       (uint64_t)r->cache_loc[h->verify_ix], h->verify_pred, (uint64_t)val);
	return 0;
}

/* Parses and checks the v1/v2 header at buf[pos]; with_verifier: also the verifier
 * check (every packet but packet 0). Does not consume anything. */
static int parse_header(mt_reader *r, struct mtr_header *h, int with_verifier)
{
	static const struct { size_t end; const char *field; } fields[] = {
		{ 4, "magic" }, { 8, "packet_size" }, { 16, "timestamp_begin" },
		{ 24, "timestamp_end" }, { 28, "flush_duration" }, { 30, "version" },
		{ 38, "pid" }, { 40, "cache_verify_ix" }, { 42, "cache_verify_pred" },
		{ 50, "cache_verify_val" }, { 58, "alloc_id_begin" }, { 66, "alloc_id_end" },
	};
	const uint8_t *p = r->buf + r->pos;
	size_t avail = r->end - r->pos;
	if (avail < MT_HEADER_SIZE_V2) {
		size_t i = 0, start = 0;
		while (fields[i].end <= avail) start = fields[i++].end;
		char what[128];
		snprintf(what, sizeof(what), "the input ends inside the packet header (%s)",
			 fields[i].field);
		return underflow(r, r->packet_off + start, what);
	}
	h->magic = mt_get_u32(p + MT_H_MAGIC);
	h->packet_size = (int32_t)mt_get_u32(p + MT_H_PACKET_SIZE);
	h->time_begin = (int64_t)mt_get_u64(p + MT_H_TIME_BEGIN);
	h->time_end = (int64_t)mt_get_u64(p + MT_H_TIME_END);
	h->version = mt_get_u16(p + MT_H_VERSION);
	h->pid = mt_get_u64(p + MT_H_PID);
	h->verify_ix = mt_get_u16(p + MT_H_VERIFY_IX);
	h->verify_pred = mt_get_u16(p + MT_H_VERIFY_PRED);
	h->verify_val = mt_get_u64(p + MT_H_VERIFY_VAL);
	h->alloc_id_begin = (int64_t)mt_get_u64(p + MT_H_ALLOC_BEGIN);
	h->alloc_id_end = (int64_t)mt_get_u64(p + MT_H_ALLOC_END);
	uint64_t off = r->packet_off;

	/* Same order as 0.2.3: verifier, magic, version, size, timestamps, ids. */
	if (with_verifier && check_verifier(r, h, off + MT_H_VERIFY_IX) < 0) return -1;
	if (h->magic != MT_MAGIC)
		return fail_at(r, off, "Not a CTF packet", "magic is 0x%08" PRIx32 ", expected 0x%08x",
			       h->magic, MT_MAGIC);
	if (h->version != 1 && h->version != 2) {
		char what[64];
		snprintf(what, sizeof(what), "trace format v%03u, but expected v002", h->version);
		return fail_at(r, off + MT_H_VERSION, what, "this reader reads format v1 and v2");
	}
	if (h->packet_size < 0)
		return fail_at(r, off + MT_H_PACKET_SIZE, "Bad packet size",
			       "packet_size is %" PRId32 " bits", h->packet_size);
	if (h->time_begin > h->time_end)
		return fail_at(r, off + MT_H_TIME_BEGIN, "Monotone packet timestamps",
			       "timestamp_begin %" PRId64 " > timestamp_end %" PRId64, h->time_begin,
			       h->time_end);
	if (h->alloc_id_begin > h->alloc_id_end)
		return fail_at(r, off + MT_H_ALLOC_BEGIN, "Monotone alloc IDs",
			       "alloc_id_begin %" PRId64 " > alloc_id_end %" PRId64,
			       h->alloc_id_begin, h->alloc_id_end);
	h->content_size = (int64_t)(h->packet_size / 8) - MT_HEADER_SIZE_V2;
	/* 0.2.3 would step backwards in the file (and can loop forever) on these. */
	if (h->content_size < 0)
		return fail_at(r, off + MT_H_PACKET_SIZE, "Bad packet size",
			       "packet_size %" PRId32 " bits is smaller than the %d-byte header",
			       h->packet_size, MT_HEADER_SIZE_V2);
	/* 0.2.3 reads a packet through a 32 KiB buffer: a larger one is cut, reported as
	 * "skipping truncated packet", and the reader loses track of packet boundaries. */
	if (h->content_size + MT_HEADER_SIZE_V2 > MT_MAX_PACKET)
		return fail_at(r, off + MT_H_PACKET_SIZE,
			       r->packet_no == 0 ? "trace info packet size" : "Bad packet size",
			       "packet_size %" PRId32 " bits = %" PRId64
			       " bytes is larger than the %d-byte limit",
			       h->packet_size, (int64_t)(h->packet_size / 8), MT_MAX_PACKET);
	return 0;
}

/* ---- events (sec. 4, 5) ----------------------------------------------------------- */

/* Reads an event header: reconstructs the time and checks it as 0.2.3 does. */
static int get_event_header(mt_reader *r, struct cursor *c, int *code, int64_t *time)
{
	const uint8_t *start = c->p;
	uint32_t word;
	if (get_u32(r, c, "event header", &word) < 0) return -1;
	const struct mtr_header *h = &r->hdr;
	uint32_t low = word & MT_TIME_MASK;
	uint32_t begin_low = (uint32_t)h->time_begin & MT_TIME_MASK;
	uint64_t t = ((uint64_t)h->time_begin & ~(uint64_t)MT_TIME_MASK) + low;
	if (low < begin_low) t += (uint64_t)1 << MT_TIME_BITS; /* the 25-bit counter wrapped */
	*time = (int64_t)t;
	if (*time < h->time_begin || *time > h->time_end)
		return fail_at(r, file_off(r, start), "time in packet bounds",
			       "event time %" PRId64 " is outside the packet's %" PRId64 "..%" PRId64,
			       *time, h->time_begin, h->time_end);
	*code = (int)(word >> MT_TIME_BITS);
	int ok = *code <= MT_EV_ID_COLLECT ||
		 (*code > MT_EV_ID_SHORT_ALLOC_BASE && *code <= MT_EV_ID_SHORT_ALLOC_BASE + 16);
	if (!ok) {
		char what[48];
		snprintf(what, sizeof(what), "Unknown event code %d", *code);
		return fail_at(r, file_off(r, start), what, NULL);
	}
	return 0;
}

/* MTF table operations (sec. 7). */
static void mtf_front_files(struct mtr_file_slot *t, int i)
{
	struct mtr_file_slot e = t[i];
	memmove(t + 1, t, (size_t)i * sizeof(*t));
	t[0] = e;
}

static void mtf_front_names(const char **t, int i)
{
	const char *e = t[i];
	memmove(t + 1, t, (size_t)i * sizeof(*t));
	t[0] = e;
}

/* Decodes one packed location (sec. 5.2) into *loc. */
static int get_packed_location(mt_reader *r, struct cursor *c, mt_location *loc)
{
	const uint8_t *start = c->p;
	uint32_t low;
	uint16_t high;
	if (get_u32(r, c, "packed location", &low) < 0 || get_u16(r, c, "packed location", &high) < 0)
		return -1;
	uint64_t packed = (uint64_t)high << 32 | low;
	loc->line = packed & 0xFFFFF;
	loc->start_char = (packed >> 20) & 0xFF;
	loc->end_char = (packed >> 28) & 0x3FF;
	int fcode = (packed >> 38) & 31, dcode = (packed >> 43) & 31;

	if (fcode == MTR_MTF_NEW) {
		const char *name;
		if (get_string(r, c, "filename", &name) < 0) return -1;
		/* 0.2.3 quirk: the new entry inherits the defname table of the entry it pushes
		 * out of slot 30 (a fresh one if slot 30 is empty). */
		int deftab;
		if (r->files[MTR_MTF_SLOTS - 1].name) {
			deftab = r->files[MTR_MTF_SLOTS - 1].deftab;
		} else {
			if (r->ndeftabs >= MTR_MTF_SLOTS) /* cannot happen: slot 30 fills first */
				return fail_at(r, file_off(r, start), "location MTF", "too many tables");
			deftab = r->ndeftabs++;
			memset(r->defnames[deftab], 0, sizeof(r->defnames[deftab]));
		}
		memmove(r->files + 1, r->files, (MTR_MTF_SLOTS - 1) * sizeof(r->files[0]));
		r->files[0] = (struct mtr_file_slot){ name, deftab };
	} else {
		if (!r->files[fcode].name)
			return fail_at(r, file_off(r, start), "location refers to an empty MTF slot",
				       "filename slot %d was never filled", fcode);
		mtf_front_files(r->files, fcode);
	}
	loc->filename = r->files[0].name;

	const char **defs = r->defnames[r->files[0].deftab];
	if (dcode == MTR_MTF_NEW) {
		const char *name;
		if (get_string(r, c, "defname", &name) < 0) return -1;
		memmove(defs + 1, defs, (MTR_MTF_SLOTS - 1) * sizeof(defs[0]));
		defs[0] = name;
	} else {
		if (!defs[dcode])
			return fail_at(r, file_off(r, start), "location refers to an empty MTF slot",
				       "defname slot %d of file \"%.100s\" was never filled", dcode,
				       loc->filename);
		mtf_front_names(defs, dcode);
	}
	loc->defname = defs[0];
	return 0;
}

static int get_location_event(mt_reader *r, struct cursor *c, const uint8_t *ev_start)
{
	uint64_t raw;
	uint8_t nlocs;
	if (get_u64(r, c, "location code", &raw) < 0 || get_u8(r, c, "nlocs", &nlocs) < 0)
		return -1;
	int64_t code = to_ocaml_int(raw);
	for (int i = 0; i < nlocs; i++)
		if (get_packed_location(r, c, &r->scratch[i]) < 0) return -1;

	const mt_location *known;
	int n = mtr_loctab_find(r->tab, (uint64_t)code, &known);
	if (n >= 0) {
		if (!mtr_locs_equal(known, n, r->scratch, nlocs))
			return fail_at(r, file_off(r, ev_start), "consistent location info",
				       "code 0x%" PRIx64 " was described before with a different "
				       "location list", (uint64_t)code);
		return 0;
	}
	if (mtr_loctab_add(r->tab, (uint64_t)code, r->scratch, nlocs) < 0) {
		set_error(r, "out of memory reading a trace");
		return -1;
	}
	return 0;
}

static int bt_push(mt_reader *r, size_t *len, uint64_t code, const uint8_t *ev_start)
{
	if (*len >= r->bt_cap) {
		if (r->bt_cap >= MTR_MAX_BACKTRACE)
			return fail_at(r, file_off(r, ev_start), "backtrace too long",
				       "more than %u frames", MTR_MAX_BACKTRACE);
		size_t cap = r->bt_cap ? r->bt_cap * 2 : 1024;
		uint64_t *bt = realloc(r->bt, cap * sizeof(*bt));
		if (!bt) {
			set_error(r, "out of memory reading a trace");
			return -1;
		}
		r->bt = bt;
		r->bt_cap = cap;
	}
	r->bt[(*len)++] = code;
	return 0;
}

/* Decodes n_encoded codewords (sec. 6.3). The result is r->bt[0 .. r->bt_len). */
static int get_backtrace(mt_reader *r, struct cursor *c, int64_t common_prefix, unsigned nenc,
			 const uint8_t *ev_start)
{
	/* G28: a prefix longer than the previous backtrace returns the previous one; the
	 * codewords still update the cache. */
	int keep = (uint64_t)common_prefix <= r->bt_len;
	size_t len = keep ? (size_t)common_prefix : 0;
	unsigned p = 0; /* predecessor bucket */
	for (unsigned i = 0; i < nenc; i++) {
		uint16_t cw;
		if (get_u16(r, c, "backtrace codeword", &cw) < 0) return -1;
		unsigned b = cw >> 2, tag = cw & 3;
		r->cache_pred[p] = (uint16_t)b;
		p = b;
		if (tag == 3) {
			uint64_t lit;
			if (get_u64(r, c, "backtrace literal", &lit) < 0) return -1;
			r->cache_loc[b] = to_ocaml_int(lit);
			if (keep && bt_push(r, &len, (uint64_t)r->cache_loc[b], ev_start) < 0) return -1;
			continue;
		}
		unsigned npred = tag;
		if (tag == 2) {
			uint8_t n8;
			if (get_u8(r, c, "prediction count", &n8) < 0) return -1;
			npred = n8;
		}
		if (keep && bt_push(r, &len, (uint64_t)r->cache_loc[b], ev_start) < 0) return -1;
		for (unsigned k = 0; k < npred; k++) {
			p = r->cache_pred[p];
			if (keep && bt_push(r, &len, (uint64_t)r->cache_loc[p], ev_start) < 0)
				return -1;
		}
	}
	if (keep) r->bt_len = len;
	return 0;
}

static int get_alloc_event(mt_reader *r, struct cursor *c, int code, mt_event *ev,
			   const uint8_t *ev_start)
{
	int64_t length = 1, nsamples = 1, prefix;
	uint8_t source = MT_SOURCE_MINOR;
	unsigned nenc;
	if (code == MT_EV_ID_ALLOC) {
		if (get_vint(r, c, "alloc length", &length) < 0 ||
		    get_vint(r, c, "alloc nsamples", &nsamples) < 0 ||
		    get_u8(r, c, "alloc source", &source) < 0)
			return -1;
		if (source > MT_SOURCE_EXTERNAL)
			return fail_at(r, file_off(r, ev_start), "source",
				       "allocation source %u is not 0, 1 or 2", source);
		if (length < 0 || nsamples < 0)
			return fail_at(r, file_off(r, ev_start), "negative allocation size",
				       "length %" PRId64 ", nsamples %" PRId64, length, nsamples);
	} else {
		length = code - MT_EV_ID_SHORT_ALLOC_BASE;
	}
	if (get_vint(r, c, "common_prefix", &prefix) < 0) return -1;
	if (code == MT_EV_ID_ALLOC) {
		uint16_t n16;
		if (get_u16(r, c, "n_encoded", &n16) < 0) return -1;
		nenc = n16;
	} else {
		uint8_t n8;
		if (get_u8(r, c, "n_encoded", &n8) < 0) return -1;
		nenc = n8;
	}
	if (prefix < 0)
		return fail_at(r, file_off(r, ev_start), "negative common prefix",
			       "common_prefix is %" PRId64, prefix);
	if (get_backtrace(r, c, prefix, nenc, ev_start) < 0) return -1;

	ev->type = MT_EV_ALLOC;
	ev->id = (uint64_t)r->alloc_count++;
	ev->length = (uint64_t)length;
	ev->nsamples = (uint64_t)nsamples;
	ev->source = (enum mt_source)source;
	ev->backtrace = r->bt;
	ev->backtrace_len = r->bt_len;
	ev->common_prefix = (size_t)prefix;
	return 0;
}

static int get_promote_collect(mt_reader *r, struct cursor *c, int code, mt_event *ev,
			       const uint8_t *ev_start)
{
	const char *what = code == MT_EV_ID_PROMOTE ? "promote id sync" : "collect id sync";
	int64_t delta;
	if (get_vint(r, c, "object id delta", &delta) < 0) return -1;
	if (delta < 0)
		return fail_at(r, file_off(r, ev_start), what, "id delta %" PRId64 " is negative", delta);
	/* 0.2.3 hands out id -1 (or less) here; we refuse. */
	if (delta >= r->alloc_count)
		return fail_at(r, file_off(r, ev_start), what,
			       "id delta %" PRId64 " refers to an allocation before the first "
			       "(%" PRId64 " allocations so far)", delta, r->alloc_count);
	ev->type = code == MT_EV_ID_PROMOTE ? MT_EV_PROMOTE : MT_EV_COLLECT;
	ev->id = (uint64_t)(r->alloc_count - 1 - delta);
	ev->backtrace = NULL;
	ev->backtrace_len = 0;
	ev->common_prefix = 0;
	ev->length = ev->nsamples = 0;
	ev->source = MT_SOURCE_MINOR;
	return 0;
}

/* Decodes the next event of the current packet. Returns 1 = *ev filled, 0 = a location
 * event was consumed, -1 = error. */
static int next_event_in_packet(mt_reader *r, mt_event *ev)
{
	struct cursor c = { r->buf + r->pos, r->buf + r->content_end };
	const uint8_t *start = c.p;
	int code;
	int64_t time;
	if (get_event_header(r, &c, &code, &time) < 0) return -1;
	if (time < r->last_time)
		return fail_at(r, file_off(r, start), "monotone timestamps",
			       "event time %" PRId64 " is before the previous event's %" PRId64, time,
			       r->last_time);
	r->last_time = time;
	int rc;
	switch (code) {
	case MT_EV_ID_TRACE_INFO:
		return fail_at(r, file_off(r, start), "Multiple trace-info events present", NULL);
	case MT_EV_ID_LOCATION: rc = get_location_event(r, &c, start); break;
	case MT_EV_ID_PROMOTE:
	case MT_EV_ID_COLLECT: rc = get_promote_collect(r, &c, code, ev, start); break;
	default: rc = get_alloc_event(r, &c, code, ev, start); break;
	}
	if (rc < 0) return -1;
	r->pos = (size_t)(c.p - r->buf);
	if (code == MT_EV_ID_LOCATION) return 0;
	ev->time_us = (uint64_t)time;
	return 1;
}

/* ---- packets (sec. 11) ------------------------------------------------------------ */

/* Finds the next packet to decode, skipping (with a warning) those 0.2.3 skips.
 * Returns 1 = a packet is ready, 0 = end of trace, -1 = error. */
static int start_packet(mt_reader *r)
{
	for (;;) {
		if (r->end - r->pos < MTR_HEADER_READAHEAD && refill(r) < 0) return -1;
		if (r->pos == r->end) return 0;
		r->packet_no++;
		r->packet_off = file_off(r, r->buf + r->pos);
		struct mtr_header *h = &r->hdr;
		if (parse_header(r, h, 1) < 0) return -1;
		r->pos += MT_HEADER_SIZE_V2;
		size_t want = (size_t)h->content_size;
		if (r->end - r->pos < want && refill(r) < 0) return -1;
		size_t have = r->end - r->pos;
		if (have > want) have = want;

		if (!(r->last_time <= h->time_begin && r->alloc_count == to_ocaml_int((uint64_t)h->alloc_id_begin))) {
			warn(r, "skipping bad packet at id %" PRId64 " %" PRId64 "-%" PRId64
				" (packet %" PRIu64 " at byte %" PRIu64 ")",
			     r->alloc_count, h->alloc_id_begin, h->alloc_id_end, r->packet_no,
			     r->packet_off);
		} else if (h->pid != r->info.pid) {
			warn(r, "skipping bad packet (wrong pid: %" PRId64 ", but tracing %" PRId64
				") (packet %" PRIu64 " at byte %" PRIu64 ")",
			     (int64_t)h->pid, (int64_t)r->info.pid, r->packet_no, r->packet_off);
		} else if (have < want) {
			warn(r, "skipping truncated packet (packet %" PRIu64 " at byte %" PRIu64
				": %zu content bytes declared, the input ends after %zu)",
			     r->packet_no, r->packet_off, want, have);
		} else {
			r->content_end = r->pos + want;
			return 1;
		}
		r->pos += have;
	}
}

int mt_reader_next(mt_reader *r, mt_event *ev)
{
	if (r->state < 0) return -1;
	if (r->state > 0) return 0;
	for (;;) {
		if (!r->in_packet) {
			int rc = start_packet(r);
			if (rc <= 0) {
				if (rc == 0) r->state = 1;
				return rc;
			}
			r->in_packet = 1;
		}
		if (r->pos == r->content_end) {
			r->in_packet = 0;
			if (r->hdr.alloc_id_end != r->alloc_count)
				return fail_at(r, r->packet_off + MT_H_ALLOC_END, "alloc id sync",
					       "alloc_id_end is %" PRId64 " but the packet ends at "
					       "allocation %" PRId64, r->hdr.alloc_id_end, r->alloc_count);
			continue;
		}
		int rc = next_event_in_packet(r, ev);
		if (rc != 0) return rc;
	}
}

/* ---- packet 0: trace info (sec. 5.1) ---------------------------------------------- */

static int read_trace_info(mt_reader *r)
{
	if (refill(r) < 0) return -1;
	r->packet_no = 0;
	r->packet_off = 0;
	if (r->end == 0) return fail_at(r, 0, "buffer underflow at position 0", "the input is empty");
	struct mtr_header *h = &r->hdr;
	if (parse_header(r, h, 0) < 0) return -1;
	size_t have = r->end - MT_HEADER_SIZE_V2;
	if ((size_t)h->content_size > have)
		return fail_at(r, MT_H_PACKET_SIZE, "trace info packet size",
			       "the packet declares %" PRId64 " content bytes, the input has %zu",
			       h->content_size, have);
	struct cursor c = { r->buf + MT_HEADER_SIZE_V2, r->buf + MT_HEADER_SIZE_V2 + h->content_size };
	int code;
	int64_t time;
	if (get_event_header(r, &c, &code, &time) < 0) return -1;
	if (code != MT_EV_ID_TRACE_INFO)
		return fail_at(r, MT_HEADER_SIZE_V2, "trace info packet code",
			       "the first event has code %d, not 0", code);
	if (time != h->time_begin)
		return fail_at(r, MT_HEADER_SIZE_V2, "trace info packet time",
			       "event time %" PRId64 " differs from timestamp_begin %" PRId64, time,
			       h->time_begin);
	mt_trace_info *info = &r->info;
	uint64_t rate_bits;
	uint8_t word_size;
	if (get_u64(r, &c, "sample_rate", &rate_bits) < 0 ||
	    get_u8(r, &c, "word_size", &word_size) < 0 ||
	    get_string(r, &c, "executable_name", &info->executable_name) < 0 ||
	    get_string(r, &c, "host_name", &info->host_name) < 0 ||
	    get_string(r, &c, "ocaml_runtime_params", &info->ocaml_runtime_params) < 0 ||
	    get_u64(r, &c, "pid", &info->pid) < 0)
		return -1;
	memcpy(&info->sample_rate, &rate_bits, sizeof(rate_bits));
	info->word_size = word_size;
	info->context = "";
	if (h->version >= 2 && get_string(r, &c, "context", &info->context) < 0) return -1;
	if (c.p != c.end)
		return fail_at(r, file_off(r, c.p), "trace info packet done",
			       "%zu bytes follow the trace-info event", (size_t)(c.end - c.p));
	info->start_time_us = (uint64_t)h->time_begin;
	r->last_time = h->time_begin;
	r->pos = MT_HEADER_SIZE_V2 + (size_t)h->content_size;
	return 0;
}

mt_reader *mt_reader_open(int fd, mt_warn_fn warn_fn, void *warn_ctx, char **err)
{
	if (err) *err = NULL;
	mt_reader *r = calloc(1, sizeof(*r));
	if (!r || !(r->tab = mtr_loctab_new())) {
		if (err) *err = strdup("out of memory opening a trace");
		free(r);
		return NULL;
	}
	r->fd = fd;
	r->warn = warn_fn;
	r->warn_ctx = warn_ctx;
	if (read_trace_info(r) < 0) {
		if (err) *err = r->err ? strdup(r->err) : strdup("cannot read the trace");
		mt_reader_close(r);
		return NULL;
	}
	return r;
}

const mt_trace_info *mt_reader_info(const mt_reader *r) { return &r->info; }

int mt_reader_lookup(const mt_reader *r, uint64_t code, const mt_location **locs)
{
	return mtr_loctab_find(r->tab, code, locs);
}

const char *mt_reader_error(const mt_reader *r) { return r->err ? r->err : "no error"; }

void mt_reader_close(mt_reader *r)
{
	if (!r) return;
	mtr_loctab_free(r->tab);
	free(r->bt);
	free(r->err);
	free(r);
}
