/* Building memtrace traces byte by byte for the reader's unit tests (test_reader*.c), with
 * the codec primitives, and reading them back through the API. */
#ifndef MEMTRACED_TESTS_TRACE_BUILD_H
#define MEMTRACED_TESTS_TRACE_BUILD_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "codec.h"
#include "memtrace.h"

#define T0 1000000000ull /* trace start, µs */
#define PID 42

/* ---- building traces -------------------------------------------------------------- */

struct bytes {
	uint8_t *p;
	size_t len, cap;
};

static inline void put(struct bytes *b, const void *data, size_t n)
{
	if (!n) return; /* data may be NULL then */
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 1024;
		b->p = realloc(b->p, b->cap);
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
}
static inline void put8(struct bytes *b, uint8_t v) { put(b, &v, 1); }
static inline void put16(struct bytes *b, uint16_t v) { uint8_t x[2]; mt_put_u16(x, v); put(b, x, 2); }
static inline void put32(struct bytes *b, uint32_t v) { uint8_t x[4]; mt_put_u32(x, v); put(b, x, 4); }
static inline void put64(struct bytes *b, uint64_t v) { uint8_t x[8]; mt_put_u64(x, v); put(b, x, 8); }
static inline void putstr(struct bytes *b, const char *s) { put(b, s, strlen(s) + 1); }
static inline void putvint(struct bytes *b, int64_t v) { uint8_t x[9]; put(b, x, mt_put_vint(x, v)); }
static inline void ev_header(struct bytes *b, int id, uint64_t t) { put32(b, (uint32_t)id << 25 | (t & MT_TIME_MASK)); }

struct hdr {
	uint64_t tb, te, pid;
	int64_t aid_b, aid_e;
	uint16_t version; /* 0 = 2 */
	uint16_t domain;  /* v3 */
	int32_t size_override; /* bits; 0 = the real size */
	int verify;            /* 1 = use the verifier below instead of the dummy one */
	uint16_t verify_ix, verify_pred;
	uint64_t verify_val;
};

/* Appends a packet (dummy verifier unless h.verify) with the given content; a v3 packet
 * (version >= 3) has the 68-byte header with h.domain. */
static inline void packet(struct bytes *out, struct hdr h, const struct bytes *content)
{
	unsigned v = h.version ? h.version : 2;
	size_t hs = mt_header_size(v);
	uint8_t x[MT_HEADER_SIZE_MAX] = { 0 };
	mt_put_u32(x + MT_H_MAGIC, MT_MAGIC);
	mt_put_u32(x + MT_H_PACKET_SIZE,
		   h.size_override ? (uint32_t)h.size_override : (uint32_t)((hs + content->len) * 8));
	mt_put_u64(x + MT_H_TIME_BEGIN, h.tb);
	mt_put_u64(x + MT_H_TIME_END, h.te);
	mt_put_u16(x + MT_H_VERSION, (uint16_t)v);
	mt_put_u64(x + MT_H_PID, h.pid ? h.pid : PID);
	if (v >= 3) mt_put_u16(x + MT_H_DOMAIN, h.domain);
	mt_put_u16(x + mt_h_off(v, MT_H_VERIFY_IX), h.verify ? h.verify_ix : MT_VERIFY_NONE);
	mt_put_u16(x + mt_h_off(v, MT_H_VERIFY_PRED), h.verify ? h.verify_pred : 0);
	mt_put_u64(x + mt_h_off(v, MT_H_VERIFY_VAL), h.verify ? h.verify_val : 0);
	mt_put_u64(x + mt_h_off(v, MT_H_ALLOC_BEGIN), (uint64_t)h.aid_b);
	mt_put_u64(x + mt_h_off(v, MT_H_ALLOC_END), (uint64_t)h.aid_e);
	put(out, x, hs);
	put(out, content->p, content->len);
}

/* Packet 0 in a given version (v3: of the given domain). */
static inline void info_packet_v(struct bytes *out, uint16_t version, uint16_t domain)
{
	struct bytes c = { 0 };
	ev_header(&c, MT_EV_ID_TRACE_INFO, T0);
	double rate = 1e-3;
	put(&c, &rate, 8);
	put8(&c, 64);
	putstr(&c, "exe");
	putstr(&c, "host");
	putstr(&c, "");
	put64(&c, PID);
	putstr(&c, "ctx");
	packet(out, (struct hdr){ .tb = T0, .te = T0, .version = version, .domain = domain }, &c);
	free(c.p);
}
static inline void info_packet(struct bytes *out) { info_packet_v(out, 2, 0); }

/* A packed location word (sec. 5.2) followed by the new strings. */
static inline void put_loc(struct bytes *b, unsigned line, unsigned fcode, unsigned dcode,
			   const char *file, const char *def)
{
	uint64_t w = line | (uint64_t)1 << 20 | (uint64_t)2 << 28 | (uint64_t)fcode << 38 |
		     (uint64_t)dcode << 43;
	put32(b, (uint32_t)w);
	put16(b, (uint16_t)(w >> 32));
	if (fcode == 31 && file) putstr(b, file);
	if (dcode == 31 && def) putstr(b, def);
}

/* ---- reading ---------------------------------------------------------------------- */

static inline int mem_fd(const void *data, size_t len)
{
	int fd = memfd_create("trace", 0);
	if (fd < 0 || write(fd, data, len) != (ssize_t)len || lseek(fd, 0, SEEK_SET) != 0) abort();
	return fd;
}

static inline void count_warning(void *ctx, const char *msg)
{
	(void)msg;
	++*(int *)ctx;
}

struct outcome {
	int opened, rc, warnings, events, allocs;
	char msg[512];
};

/* Reads a whole trace from memory through the API. */
static inline struct outcome read_all(const void *data, size_t len)
{
	struct outcome o = { 0 };
	int fd = mem_fd(data, len);
	char *err = NULL;
	mt_reader *r = mt_reader_open(fd, count_warning, &o.warnings, &err);
	if (!r) {
		o.rc = -1;
		snprintf(o.msg, sizeof(o.msg), "%s", err ? err : "");
		free(err);
		close(fd);
		return o;
	}
	o.opened = 1;
	mt_event ev;
	while ((o.rc = mt_reader_next(r, &ev)) > 0) {
		o.events++;
		if (ev.type == MT_EV_ALLOC) {
			o.allocs++;
			for (size_t i = 0; i < ev.backtrace_len; i++) mt_reader_lookup(r, ev.backtrace[i], NULL);
		}
	}
	if (o.rc < 0) snprintf(o.msg, sizeof(o.msg), "%s", mt_reader_error(r));
	mt_reader_close(r);
	close(fd);
	return o;
}

static inline int has(const struct outcome *o, const char *s) { return strstr(o->msg, s) != NULL; }

#endif
