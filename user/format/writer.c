/* The memtrace writer, v2 by default, v3 when asked: packets and the flush rules of the
 * reference writers (docs/memtrace-format.md sections 5, 8, 10.2), on top of the backtrace
 * encoder (bt_encoder.c) and the location encoder (loc_encoder.c). A v3 trace is what the
 * newest memtrace writes for one domain: 68-byte headers holding the domain, and ids taken
 * in chunks of 10,000 (an events packet ends when its chunk is used up, trace.ml's
 * Obj_id.Allocator).
 *
 * Memory: one 32 KiB events packet, one 32 KiB scratch packet for location packets, the
 * codec state, and a queue of pre-encoded location events that grows to its high-water mark
 * once. Nothing is allocated per event in the steady state.
 *
 * Failures: a failed write (after retrying EINTR and completing short writes) or an
 * allocation failure makes the writer "failed": the message stays in mt_writer_error, every
 * later call returns < 0 and writes nothing. A packet that fails partway (a full disk takes
 * part of it) is cut off again when the fd is a regular file, so the file holds only the
 * whole packets written before the failure; a pipe or socket keeps what it took. Bad
 * arguments (unknown id, bad source...) fail only that call. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bt_encoder.h"
#include "codec.h"
#include "loc_encoder.h"
#include "memtrace.h"

#define EVENT_ROOM (100 + MT_BT_MAX_BYTES) /* flush when less than this is left (10.2) */
#define MAX_PENDING_LOCATIONS 128           /* flush when more codes wait for locations */
#define MAX_PACKET_SPAN_US 30000000ull      /* flush when a packet would span more */
#define INFO_STRING_MAX 8000                /* packet 0 must fit in 32 KiB (5.1) */
#define MAX_VALUE (1ull << 62)              /* lengths, samples: OCaml 63-bit ints */
#define V3_IDS_PER_CHUNK 10000              /* the newest writer's Obj_id chunk */

struct mt_writer {
	int fd;
	int regular_file; /* a packet that fails partway can be cut off (ftruncate) */
	int failed;
	char err[256];
	mt_locations_fn locations;
	void *ctx;
	uint64_t pid;
	unsigned version;   /* 2 or 3 */
	uint16_t domain;    /* v3: written in every header */
	size_t header_size; /* 66, or 68 in v3 */
	uint64_t next_id;
	uint64_t chunk_end; /* v3: the events packet ends before the id reaches it */
	uint64_t last_time; /* clamp baseline: no event is written before it */
	uint64_t bytes_written;
	/* Where packet 0's context string is in the file (-1: not seekable), and its length: for
	 * mt_writer_set_context. */
	int64_t context_off;
	size_t context_len;

	/* The current events packet. */
	uint64_t pkt_begin, pkt_end, pkt_id_begin;
	uint16_t v_ix, v_pred;
	uint64_t v_val;
	size_t pkt_len;

	/* Location events waiting for the next flush, already encoded (the MTF state advances
	 * in queue order either way). lq_ends[i] = end offset of event i in lq. */
	uint8_t *lq;
	size_t lq_len, lq_cap;
	size_t *lq_ends;
	size_t lq_n, lq_ncap;

	const uint64_t *miss_codes; /* the codes being encoded, for the miss callback */

	mt_loc_encoder locs;
	mt_bt_encoder bt;
	uint8_t pkt[MT_MAX_PACKET];
	uint8_t scratch[MT_MAX_PACKET];
};

/* Sets the message of mt_writer_error (printf-style: the compiler checks the format). */
#define set_error(w, ...) snprintf((w)->err, sizeof (w)->err, __VA_ARGS__)

/* Sets the error and makes the writer failed (sticky); returns -1. */
#define fail(w, ...) (set_error(w, __VA_ARGS__), (w)->failed = 1, -1)

/* Cuts a regular file back to where the packet that failed partway began: the file offset
 * is past the `partial` bytes written of it (O_APPEND or not). */
static void cut_partial_packet(mt_writer *w, size_t partial)
{
	if (!w->regular_file || !partial) return;
	off_t end = lseek(w->fd, 0, SEEK_CUR);
	if (end < (off_t)partial) return;
	off_t start = end - (off_t)partial;
	if (ftruncate(w->fd, start) < 0) return; /* the error already reported says enough */
	lseek(w->fd, start, SEEK_SET);
	w->bytes_written -= partial;
}

/* One write() for the whole packet; retries EINTR and completes short writes. */
static int write_all(mt_writer *w, const uint8_t *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(w->fd, buf + done, len - done);
		if (n < 0 && errno == EINTR) continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;
			cut_partial_packet(w, done);
			errno = e; /* for mt_writer_open's caller */
			return fail(w, "write to trace failed: %s", n < 0 ? strerror(e) : "no progress");
		}
		done += (size_t)n;
		w->bytes_written += (size_t)n;
	}
	return 0;
}

static void put_header(const mt_writer *w, uint8_t *p, size_t size, uint64_t t_begin,
		       uint64_t t_end, uint16_t v_ix, uint16_t v_pred, uint64_t v_val,
		       uint64_t id_begin, uint64_t id_end)
{
	unsigned v = w->version;
	mt_put_u32(p + MT_H_MAGIC, MT_MAGIC);
	mt_put_u32(p + MT_H_PACKET_SIZE, (uint32_t)(size * 8));
	mt_put_u64(p + MT_H_TIME_BEGIN, t_begin);
	mt_put_u64(p + MT_H_TIME_END, t_end);
	mt_put_u32(p + MT_H_FLUSH_DURATION, 0);
	mt_put_u16(p + MT_H_VERSION, (uint16_t)v);
	mt_put_u64(p + MT_H_PID, w->pid);
	if (v >= 3) mt_put_u16(p + MT_H_DOMAIN, w->domain);
	mt_put_u16(p + mt_h_off(v, MT_H_VERIFY_IX), v_ix);
	mt_put_u16(p + mt_h_off(v, MT_H_VERIFY_PRED), v_pred);
	mt_put_u64(p + mt_h_off(v, MT_H_VERIFY_VAL), v_val);
	mt_put_u64(p + mt_h_off(v, MT_H_ALLOC_BEGIN), id_begin);
	mt_put_u64(p + mt_h_off(v, MT_H_ALLOC_END), id_end);
}

static size_t put_event_header(uint8_t *p, unsigned id, uint64_t time_us)
{
	mt_put_u32(p, (uint32_t)id << 25 | ((uint32_t)time_us & MT_TIME_MASK));
	return 4;
}

static size_t put_cstr(uint8_t *p, const char *s, size_t max)
{
	size_t n = s ? strnlen(s, max) : 0;
	memcpy(p, s ? s : "", n);
	p[n] = 0;
	return n + 1;
}

/* Writes the queued location events as location packets (10.2 step 4a). */
static int write_location_packets(mt_writer *w)
{
	size_t i = 0, start = 0;
	while (i < w->lq_n) {
		size_t pos = w->header_size;
		while (i < w->lq_n && MT_MAX_PACKET - pos > MT_BT_MAX_BYTES) {
			size_t len = w->lq_ends[i] - start;
			if (len > MT_MAX_PACKET - pos) break; /* never overflow a packet */
			memcpy(w->scratch + pos, w->lq + start, len);
			pos += len;
			start = w->lq_ends[i++];
		}
		put_header(w, w->scratch, pos, w->pkt_begin, w->pkt_begin, MT_VERIFY_NONE, 0, 0,
			   w->pkt_id_begin, w->pkt_id_begin);
		if (write_all(w, w->scratch, pos) < 0) return -1;
	}
	w->lq_n = 0;
	w->lq_len = 0;
	return 0;
}

static void start_packet(mt_writer *w, uint64_t now, int dummy_verifier)
{
	w->pkt_begin = w->pkt_end = now;
	w->pkt_id_begin = w->next_id;
	w->pkt_len = w->header_size;
	/* v3: a used-up chunk is replaced when a packet starts (Obj_id.Allocator.new_packet). */
	if (w->version >= 3 && w->next_id == w->chunk_end) w->chunk_end += V3_IDS_PER_CHUNK;
	if (dummy_verifier) {
		w->v_ix = MT_VERIFY_NONE;
		w->v_pred = 0;
		w->v_val = 0;
	} else {
		mt_bt_next_verifier(&w->bt, &w->v_ix, &w->v_pred, &w->v_val);
	}
}

/* Flush at time now (10.2 step 4): location packets, the events packet, a new packet. */
static int flush_at(mt_writer *w, uint64_t now)
{
	if (write_location_packets(w) < 0) return -1;
	put_header(w, w->pkt, w->pkt_len, w->pkt_begin, w->pkt_end, w->v_ix, w->v_pred, w->v_val,
		   w->pkt_id_begin, w->next_id);
	if (write_all(w, w->pkt, w->pkt_len) < 0) return -1;
	start_packet(w, now, 0);
	return 0;
}

/* Clamps the time, flushes if the rules of 10.2 say so, writes the event header. */
static int begin_event(mt_writer *w, unsigned id, uint64_t *time_us)
{
	uint64_t now = *time_us < w->last_time ? w->last_time : *time_us;
	/* v3: any event (not only an allocation) ends a packet whose id chunk is used up. */
	if (MT_MAX_PACKET - w->pkt_len < EVENT_ROOM || w->lq_n > MAX_PENDING_LOCATIONS ||
	    now - w->pkt_begin > MAX_PACKET_SPAN_US ||
	    (w->version >= 3 && w->next_id == w->chunk_end)) {
		if (flush_at(w, now) < 0) return -1;
	}
	w->pkt_len += put_event_header(w->pkt + w->pkt_len, id, now);
	w->pkt_end = now;
	w->last_time = now;
	*time_us = now;
	return 0;
}

/* Backtrace-cache miss: queue a location event for the code (10.2 step 3). */
static int on_miss(void *arg, size_t index)
{
	mt_writer *w = arg;
	if (w->failed) return -1;
	uint64_t code = w->miss_codes[index];
	if (w->lq_cap - w->lq_len < MT_LOC_EVENT_MAX) {
		size_t cap = w->lq_cap ? w->lq_cap * 2 : 16 * MT_LOC_EVENT_MAX;
		uint8_t *p = realloc(w->lq, cap);
		if (!p) return fail(w, "out of memory for location events");
		w->lq = p;
		w->lq_cap = cap;
	}
	if (w->lq_n == w->lq_ncap) {
		size_t cap = w->lq_ncap ? w->lq_ncap * 2 : 256;
		size_t *p = realloc(w->lq_ends, cap * sizeof *p);
		if (!p) return fail(w, "out of memory for location events");
		w->lq_ends = p;
		w->lq_ncap = cap;
	}
	const mt_location *locs = NULL;
	int n = w->locations ? w->locations(w->ctx, code, &locs) : -1;
	if (n > 0 && !locs) n = 0;
	size_t len = mt_loc_encode_event(&w->locs, w->lq + w->lq_len, w->pkt_begin, code, locs, n);
	if (!len) return fail(w, "out of memory for location tables");
	w->lq_len += len;
	w->lq_ends[w->lq_n++] = w->lq_len;
	return 0;
}

mt_writer *mt_writer_open(int fd, const mt_trace_info *info, mt_locations_fn locations,
			  void *ctx)
{
	return mt_writer_open_format(fd, info, MT_FORMAT_VERSION, locations, ctx);
}

mt_writer *mt_writer_open_format(int fd, const mt_trace_info *info, int format_version,
				 mt_locations_fn locations, void *ctx)
{
	if (!info || (format_version != 2 && format_version != 3)) {
		errno = EINVAL;
		return NULL;
	}
	mt_writer *w = calloc(1, sizeof *w);
	if (!w) return NULL;
	w->fd = fd;
	struct stat st;
	w->regular_file = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	off_t start = w->regular_file ? lseek(fd, 0, SEEK_CUR) : -1;
	w->locations = locations;
	w->ctx = ctx;
	w->pid = info->pid;
	w->version = (unsigned)format_version;
	w->domain = format_version >= 3 ? info->initial_domain : 0;
	w->header_size = mt_header_size(w->version);
	w->chunk_end = V3_IDS_PER_CHUNK;
	w->last_time = info->start_time_us;
	mt_loc_encoder_init(&w->locs);
	mt_bt_encoder_init(&w->bt);

	/* Packet 0: the trace-info event alone, at the start time (5.1). */
	uint8_t *p = w->pkt;
	size_t pos = w->header_size;
	uint8_t word_size = info->word_size ? info->word_size : 64;
	pos += put_event_header(p + pos, MT_EV_ID_TRACE_INFO, info->start_time_us);
	memcpy(p + pos, &info->sample_rate, 8); /* f64, little-endian on our targets */
	pos += 8;
	p[pos++] = word_size;
	pos += put_cstr(p + pos, info->executable_name, INFO_STRING_MAX);
	pos += put_cstr(p + pos, info->host_name, INFO_STRING_MAX);
	pos += put_cstr(p + pos, info->ocaml_runtime_params, INFO_STRING_MAX);
	mt_put_u64(p + pos, info->pid);
	pos += 8;
	size_t context_pos = pos;
	pos += put_cstr(p + pos, info->context, INFO_STRING_MAX);
	w->context_len = pos - context_pos - 1; /* without the NUL */
	w->context_off = start >= 0 ? (int64_t)start + (int64_t)context_pos : -1;
	put_header(w, p, pos, info->start_time_us, info->start_time_us, MT_VERIFY_NONE, 0, 0, 0, 0);
	if (write_all(w, p, pos) < 0) {
		int e = errno;
		mt_loc_encoder_free(&w->locs);
		free(w);
		errno = e;
		return NULL;
	}
	start_packet(w, info->start_time_us, 1);
	return w;
}

int mt_writer_set_context(mt_writer *w, const char *context)
{
	if (!w || !context) return -1;
	size_t len = strlen(context);
	if (len != w->context_len) {
		errno = EINVAL;
		return -1;
	}
	if (w->context_off < 0) {
		errno = ESPIPE;
		return -1;
	}
	/* One pwrite at the string's place in packet 0: the file offset of the stream stays. */
	ssize_t n = pwrite(w->fd, context, len, (off_t)w->context_off);
	return n == (ssize_t)len ? 0 : -1;
}

int64_t mt_writer_alloc(mt_writer *w, uint64_t time_us, uint64_t length_words,
			uint64_t nsamples, enum mt_source source, const uint64_t *backtrace,
			size_t backtrace_len)
{
	if (!w) return -1;
	if (w->failed) return -1;
	if ((unsigned)source > MT_SOURCE_EXTERNAL) {
		set_error(w, "alloc: bad source %d (0 minor, 1 major, 2 external)", (int)source);
		return -1;
	}
	if (length_words >= MAX_VALUE || nsamples >= MAX_VALUE) {
		set_error(w, "alloc: length %llu or nsamples %llu out of range (< 2^62)",
			  (unsigned long long)length_words, (unsigned long long)nsamples);
		return -1;
	}
	if (!backtrace) backtrace_len = 0;

	size_t prefix = mt_bt_common_prefix(&w->bt, backtrace, backtrace_len);
	size_t rest = backtrace_len - prefix;
	int is_short = length_words >= 1 && length_words <= 16 && source == MT_SOURCE_MINOR &&
		       nsamples == 1 && rest < 256;
	unsigned ev = is_short ? MT_EV_ID_SHORT_ALLOC_BASE + (unsigned)length_words : MT_EV_ID_ALLOC;
	if (begin_event(w, ev, &time_us) < 0) return -1;

	uint8_t *p = w->pkt;
	size_t pos = w->pkt_len;
	if (!is_short) {
		pos += mt_put_vint(p + pos, (int64_t)length_words);
		pos += mt_put_vint(p + pos, (int64_t)nsamples);
		p[pos++] = (uint8_t)source;
	}
	pos += mt_put_vint(p + pos, (int64_t)prefix);
	size_t count_at = pos;
	pos += is_short ? 1 : 2;

	uint64_t id = w->next_id++;
	size_t cw_len, encoded;
	w->miss_codes = backtrace + prefix;
	size_t ncw = mt_bt_encode(&w->bt, id, backtrace + prefix, rest, p + pos, &cw_len, &encoded,
				  on_miss, w);
	pos += cw_len;
	if (is_short) p[count_at] = (uint8_t)ncw;
	else mt_put_u16(p + count_at, (uint16_t)ncw);
	w->pkt_len = pos;
	/* G28: the reader decodes prefix + encoded frames; later prefixes compare with that. */
	if (mt_bt_set_prev(&w->bt, backtrace, prefix, prefix + encoded) < 0)
		return fail(w, "out of memory for the previous backtrace");
	if (w->failed) return -1;
	return (int64_t)id;
}

static int put_id_event(mt_writer *w, unsigned ev, const char *what, uint64_t time_us,
			uint64_t id)
{
	if (!w) return -1;
	if (w->failed) return -1;
	if (id >= w->next_id) {
		set_error(w, "%s of id %llu, but only %llu allocations were written", what,
			  (unsigned long long)id, (unsigned long long)w->next_id);
		return -1;
	}
	if (begin_event(w, ev, &time_us) < 0) return -1;
	w->pkt_len += mt_put_vint(w->pkt + w->pkt_len, (int64_t)(w->next_id - 1 - id));
	return 0;
}

int mt_writer_promote(mt_writer *w, uint64_t time_us, uint64_t id)
{
	return put_id_event(w, MT_EV_ID_PROMOTE, "promote", time_us, id);
}

int mt_writer_collect(mt_writer *w, uint64_t time_us, uint64_t id)
{
	return put_id_event(w, MT_EV_ID_COLLECT, "collect", time_us, id);
}

int mt_writer_flush(mt_writer *w, uint64_t time_us)
{
	if (!w) return -1;
	if (w->failed) return -1;
	uint64_t now = time_us < w->last_time ? w->last_time : time_us;
	if (flush_at(w, now) < 0) return -1;
	w->last_time = now;
	return 0;
}

int mt_writer_close(mt_writer *w)
{
	if (!w) return -1;
	int rc = w->failed ? -1 : flush_at(w, w->pkt_end);
	mt_loc_encoder_free(&w->locs);
	mt_bt_encoder_free(&w->bt);
	free(w->lq);
	free(w->lq_ends);
	free(w);
	return rc;
}

const char *mt_writer_error(const mt_writer *w)
{
	if (!w) return "no writer";
	return w->err[0] ? w->err : "no error";
}

uint64_t mt_writer_next_id(const mt_writer *w) { return w ? w->next_id : 0; }

uint64_t mt_writer_bytes_written(const mt_writer *w) { return w ? w->bytes_written : 0; }

int mt_context_drops(const char *context, uint64_t *drops)
{
	const char *p = context ? strstr(context, "drops: ") : NULL;
	if (!p) return 0;
	p += 7;
	if (*p < '0' || *p > '9') return 0;
	uint64_t v = 0;
	for (; *p >= '0' && *p <= '9'; p++) v = v * 10 + (uint64_t)(*p - '0');
	*drops = v;
	return 1;
}
