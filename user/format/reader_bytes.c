/* The trace reader's input: buffering, errors with their position, bounded field readers and
 * packet headers (see reader_int.h). */
#include "reader_int.h"

void mtr_set_error(mt_reader *r, const char *fmt, ...)
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
int mtr_fail_at(mt_reader *r, uint64_t off, const char *what, const char *fmt, ...)
{
	char details[512] = "";
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(details, sizeof(details), fmt, ap);
		va_end(ap);
	}
	mtr_set_error(r, "malformed trace: %s (packet %" PRIu64 " at byte %" PRIu64 "%s%s)", what,
		  r->packet_no, off, details[0] ? ": " : "", details);
	return -1;
}

/* 0.2.3 reports reads past the end of a packet as "Buffer underflow at position N". */
int mtr_underflow(mt_reader *r, uint64_t off, const char *field)
{
	char what[64];
	snprintf(what, sizeof(what), "buffer underflow at position %" PRIu64, off - r->packet_off);
	return mtr_fail_at(r, off, what, "%s", field);
}

void mtr_warn(mt_reader *r, const char *fmt, ...)
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
int mtr_refill(mt_reader *r)
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
			mtr_set_error(r, "read error at byte %" PRIu64 ": %s", r->buf_off + r->end,
				  strerror(errno));
			return -1;
		}
		if (n == 0) r->eof = 1;
		r->end += (size_t)n;
	}
	return 0;
}

/* ---- bounded little readers over [p, end) ------------------------------------------ */


int mtr_need(mt_reader *r, const struct cursor *c, size_t n, const char *field)
{
	if ((size_t)(c->end - c->p) >= n) return 0;
	return mtr_underflow(r, file_off(r, c->p), field);
}

int mtr_get_u8(mt_reader *r, struct cursor *c, const char *field, uint8_t *v)
{
	if (mtr_need(r, c, 1, field)) return -1;
	*v = *c->p++;
	return 0;
}

int mtr_get_u16(mt_reader *r, struct cursor *c, const char *field, uint16_t *v)
{
	if (mtr_need(r, c, 2, field)) return -1;
	*v = mt_get_u16(c->p);
	c->p += 2;
	return 0;
}

int mtr_get_u32(mt_reader *r, struct cursor *c, const char *field, uint32_t *v)
{
	if (mtr_need(r, c, 4, field)) return -1;
	*v = mt_get_u32(c->p);
	c->p += 4;
	return 0;
}

int mtr_get_u64(mt_reader *r, struct cursor *c, const char *field, uint64_t *v)
{
	if (mtr_need(r, c, 8, field)) return -1;
	*v = mt_get_u64(c->p);
	c->p += 8;
	return 0;
}

/* A vint as an OCaml int (sec. 2). */
int mtr_get_vint(mt_reader *r, struct cursor *c, const char *field, int64_t *v)
{
	size_t n = mt_get_vint(c->p, c->end, v);
	if (n == 0) return mtr_underflow(r, file_off(r, c->p), field);
	if (n == 9) *v = to_ocaml_int((uint64_t)*v);
	c->p += n;
	return 0;
}

/* A NUL-terminated string, interned. */
int mtr_get_string(mt_reader *r, struct cursor *c, const char *field, const char **s)
{
	const uint8_t *nul = memchr(c->p, 0, (size_t)(c->end - c->p));
	if (!nul) {
		char what[96];
		snprintf(what, sizeof(what), "%s is not NUL-terminated before the end of the packet",
			 field);
		return mtr_underflow(r, file_off(r, c->end), what);
	}
	*s = mtr_intern(r->tab, (const char *)c->p, (size_t)(nul - c->p));
	if (!*s) {
		mtr_set_error(r, "out of memory reading a trace");
		return -1;
	}
	c->p = nul + 1;
	return 0;
}

/* ---- packet headers (sec. 3, 8) --------------------------------------------------- */

/* The cache verifier check (sec. 8) against the current domain's cache. */
int mtr_check_verifier(mt_reader *r, const struct mtr_header *h)
{
	if (h->verify_ix == MT_VERIFY_NONE) return 0;
	uint64_t off = r->packet_off + mt_h_off(h->header_size == MT_HEADER_SIZE_V3 ? 3 : 2,
						MT_H_VERIFY_IX);
	if (h->verify_ix >= MT_CACHE_SIZE)
		return mtr_fail_at(r, off, "cache verification failed",
			       "bucket %u does not exist (the cache has %u buckets)", h->verify_ix,
			       MT_CACHE_SIZE);
	const struct mtr_domain *d = r->dom;
	int64_t val = to_ocaml_int(h->verify_val);
	if (d->cache_pred[h->verify_ix] != h->verify_pred || d->cache_loc[h->verify_ix] != val)
		return mtr_fail_at(r, off, "cache verification failed",
			       "bucket %u holds prediction %u and code 0x%" PRIx64
			       ", the header expects prediction %u and code 0x%" PRIx64 "%s",
			       h->verify_ix, d->cache_pred[h->verify_ix],
			       (uint64_t)d->cache_loc[h->verify_ix], h->verify_pred, (uint64_t)val,
			       r->v3 ? " (in this packet's domain)" : "");
	return 0;
}

struct header_field {
	size_t end;
	const char *name;
};
static const struct header_field v2_fields[] = {
	{ 4, "magic" }, { 8, "packet_size" }, { 16, "timestamp_begin" },
	{ 24, "timestamp_end" }, { 28, "flush_duration" }, { 30, "version" },
	{ 38, "pid" }, { 40, "cache_verify_ix" }, { 42, "cache_verify_pred" },
	{ 50, "cache_verify_val" }, { 58, "alloc_id_begin" }, { 66, "alloc_id_end" },
};
static const struct header_field v3_fields[] = {
	{ 4, "magic" }, { 8, "packet_size" }, { 16, "timestamp_begin" },
	{ 24, "timestamp_end" }, { 28, "flush_duration" }, { 30, "version" },
	{ 38, "pid" }, { 40, "domain" }, { 42, "cache_verify_ix" }, { 44, "cache_verify_pred" },
	{ 52, "cache_verify_val" }, { 60, "alloc_id_begin" }, { 68, "alloc_id_end" },
};

/* Parses and checks the header at buf[pos]; with_verifier: also the verifier check (0.2.3
 * makes it for every packet but packet 0, while parsing). Does not consume anything.
 * Layout: in a v1/v2 trace every header is read as v2 (0.2.3 knows no other); in a v3 trace
 * a header whose version is 3 or more has the domain field (the newest reader decides by the
 * version of each packet). */
int mtr_parse_header(mt_reader *r, struct mtr_header *h, int with_verifier)
{
	const uint8_t *p = r->buf + r->pos;
	size_t avail = r->end - r->pos;
	unsigned layout = r->v3 && avail >= MT_H_VERSION + 2 && mt_get_u16(p + MT_H_VERSION) >= 3 ? 3 : 2;
	h->header_size = mt_header_size(layout);
	if (avail < h->header_size) {
		const struct header_field *fields = layout == 3 ? v3_fields : v2_fields;
		size_t i = 0, start = 0;
		while (fields[i].end <= avail) start = fields[i++].end;
		char what[128];
		snprintf(what, sizeof(what), "the input ends inside the packet header (%s)",
			 fields[i].name);
		return mtr_underflow(r, r->packet_off + start, what);
	}
	h->magic = mt_get_u32(p + MT_H_MAGIC);
	h->packet_size = (int32_t)mt_get_u32(p + MT_H_PACKET_SIZE);
	h->time_begin = (int64_t)mt_get_u64(p + MT_H_TIME_BEGIN);
	h->time_end = (int64_t)mt_get_u64(p + MT_H_TIME_END);
	h->version = mt_get_u16(p + MT_H_VERSION);
	h->pid = mt_get_u64(p + MT_H_PID);
	h->domain = layout == 3 ? mt_get_u16(p + MT_H_DOMAIN) : 0;
	h->verify_ix = mt_get_u16(p + mt_h_off(layout, MT_H_VERIFY_IX));
	h->verify_pred = mt_get_u16(p + mt_h_off(layout, MT_H_VERIFY_PRED));
	h->verify_val = mt_get_u64(p + mt_h_off(layout, MT_H_VERIFY_VAL));
	h->alloc_id_begin = (int64_t)mt_get_u64(p + mt_h_off(layout, MT_H_ALLOC_BEGIN));
	h->alloc_id_end = (int64_t)mt_get_u64(p + mt_h_off(layout, MT_H_ALLOC_END));
	uint64_t off = r->packet_off;

	/* Same order as the real readers: [0.2.3: verifier,] magic, version, size, timestamps,
	 * ids. */
	if (with_verifier && mtr_check_verifier(r, h) < 0) return -1;
	if (h->magic != MT_MAGIC)
		return mtr_fail_at(r, off, "Not a CTF packet", "magic is 0x%08" PRIx32 ", expected 0x%08x",
			       h->magic, MT_MAGIC);
	if (!r->v3 && h->version != 1 && h->version != 2) {
		char what[64];
		snprintf(what, sizeof(what), "trace format v%03u, but expected v002", h->version);
		return mtr_fail_at(r, off + MT_H_VERSION, what,
			       "packet 0 says v%u: the trace is read as memtrace 0.2.3 reads it, "
			       "which knows v1 and v2",
			       r->packet_no ? r->info.format_version : h->version);
	}
	if (r->v3 && h->version > MT_FORMAT_VERSION_MAX) {
		char what[64];
		snprintf(what, sizeof(what), "trace format v%03u, but expected v%03u", h->version,
			 MT_FORMAT_VERSION_MAX);
		return mtr_fail_at(r, off + MT_H_VERSION, what, "this reader reads format v1 to v%u",
			       MT_FORMAT_VERSION_MAX);
	}
	if (h->packet_size < 0)
		return mtr_fail_at(r, off + MT_H_PACKET_SIZE, "Bad packet size",
			       "packet_size is %" PRId32 " bits", h->packet_size);
	if (h->time_begin > h->time_end)
		return mtr_fail_at(r, off + MT_H_TIME_BEGIN, "Monotone packet timestamps",
			       "timestamp_begin %" PRId64 " > timestamp_end %" PRId64, h->time_begin,
			       h->time_end);
	if (h->alloc_id_begin > h->alloc_id_end)
		return mtr_fail_at(r, off + mt_h_off(layout, MT_H_ALLOC_BEGIN), "Monotone alloc IDs",
			       "alloc_id_begin %" PRId64 " > alloc_id_end %" PRId64,
			       h->alloc_id_begin, h->alloc_id_end);
	h->content_size = (int64_t)(h->packet_size / 8) - (int64_t)h->header_size;
	/* The real readers would step backwards in the file (and can loop forever) on these. */
	if (h->content_size < 0)
		return mtr_fail_at(r, off + MT_H_PACKET_SIZE, "Bad packet size",
			       "packet_size %" PRId32 " bits is smaller than the %zu-byte header",
			       h->packet_size, h->header_size);
	/* The real readers read a packet through a 32 KiB buffer: a larger one is cut, reported
	 * as "skipping truncated packet", and the reader loses track of packet boundaries. */
	if (h->content_size + (int64_t)h->header_size > MT_MAX_PACKET)
		return mtr_fail_at(r, off + MT_H_PACKET_SIZE,
			       r->packet_no == 0 ? "trace info packet size" : "Bad packet size",
			       "packet_size %" PRId32 " bits = %" PRId64
			       " bytes is larger than the %d-byte limit",
			       h->packet_size, (int64_t)(h->packet_size / 8), MT_MAX_PACKET);
	return 0;
}

/* ---- domains ------------------------------------------------------------------------ */

int mtr_select_domain(mt_reader *r, uint16_t id)
{
	if (r->dom && r->dom->id == id) return 0;
	for (size_t i = 0; i < r->ndoms; i++) {
		if (r->doms[i]->id == id) {
			r->dom = r->doms[i];
			return 0;
		}
	}
	if (r->ndoms >= MTR_MAX_DOMAINS)
		return mtr_fail_at(r, r->packet_off + MT_H_DOMAIN, "too many domains",
			       "domain %u would be the %zu-th; this reader keeps at most %d", id,
			       r->ndoms + 1, MTR_MAX_DOMAINS);
	struct mtr_domain **doms = realloc(r->doms, (r->ndoms + 1) * sizeof(*doms));
	struct mtr_domain *d = calloc(1, sizeof(*d));
	if (doms) r->doms = doms;
	if (!doms || !d) {
		free(d);
		mtr_set_error(r, "out of memory reading a trace");
		return -1;
	}
	d->id = id;
	d->last_time = (int64_t)r->info.start_time_us;
	r->doms[r->ndoms++] = d;
	r->dom = d;
	return 0;
}

void mtr_free_domains(mt_reader *r)
{
	for (size_t i = 0; i < r->ndoms; i++) {
		free(r->doms[i]->bt);
		free(r->doms[i]);
	}
	free(r->doms);
}
