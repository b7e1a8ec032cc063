/* The trace reader's state and byte-level helpers, shared by reader.c (events, packets) and
 * reader_bytes.c (buffering, errors, field readers, packet headers). Not part of the API. */
#ifndef MEMTRACE_READER_INT_H
#define MEMTRACE_READER_INT_H
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
	uint16_t domain;      /* v3; 0 before */
	size_t header_size;   /* 66, or 68 for a v3 packet */
	int64_t content_size; /* bytes; may be negative in a damaged file */
};

/* A filename slot of the MTF table: the name and the defname table it owns. */
struct mtr_file_slot {
	const char *name; /* NULL = empty */
	int deftab;
};

/* A v3 trace holds at most this many domains (OCaml 5 runs at most 128 by default, 4096 when
 * raised): each costs ~170 KiB of decoder state, so a damaged file cannot ask for more. */
#define MTR_MAX_DOMAINS 1024

/* The decoder state of one domain (sec. 6.3, 7): the newest reader keeps one per domain, a
 * v1/v2 trace has only domain 0. */
struct mtr_domain {
	uint16_t id;
	int64_t last_time; /* time of the domain's last event, or the start time */

	/* Backtrace decoder (sec. 6.3) */
	int64_t cache_loc[MT_CACHE_SIZE];
	uint16_t cache_pred[MT_CACHE_SIZE];
	uint64_t *bt;
	size_t bt_len, bt_cap;

	/* Location MTF tables (sec. 7) */
	struct mtr_file_slot files[MTR_MTF_SLOTS];
	const char *defnames[MTR_MTF_SLOTS][MTR_MTF_SLOTS]; /* at most 31 tables ever exist */
	int ndeftabs;
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
	int v3;              /* packet 0 says version 3: read as the newest reader does */
	uint64_t packet_no;  /* the packet being read */
	uint64_t packet_off; /* its file offset */
	struct mtr_header hdr;
	int in_packet;
	uint64_t last_packet_end; /* the latest timestamp_end of a packet read (0: none yet) */
	size_t content_end; /* end of the current packet's content in buf */

	/* Allocations decoded so far = the next allocation id (v1/v2); in v3 the count starts
	 * at each packet's alloc_id_begin. */
	int64_t alloc_count;

	struct mtr_domain **doms; /* created at a domain's first packet */
	size_t ndoms;
	struct mtr_domain *dom; /* the current packet's */
	const struct mtr_domain *last_alloc_dom; /* the domain of the last allocation returned */

	mtr_loctab *tab; /* location codes, shared by every domain */
	mt_location scratch[255];
};

/* OCaml ints are 63 bits: Int64.to_int drops bit 63 (and sign-extends bit 62). */
static inline int64_t to_ocaml_int(uint64_t v) { return (int64_t)(v << 1) >> 1; }

static inline uint64_t file_off(const mt_reader *r, const uint8_t *p) { return r->buf_off + (uint64_t)(p - r->buf); }

/* Errors and warnings (the message says where: packet N at byte B). */
void mtr_set_error(mt_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int mtr_fail_at(mt_reader *r, uint64_t off, const char *what, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int mtr_underflow(mt_reader *r, uint64_t off, const char *field);
void mtr_warn(mt_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Reads more of the file into the buffer (keeps [pos, end)). */
int mtr_refill(mt_reader *r);

/* Bounded little readers over [p, end): -1 with the reader's error when the field does not
 * fit. */
struct cursor {
	const uint8_t *p, *end;
};
int mtr_need(mt_reader *r, const struct cursor *c, size_t n, const char *field);
int mtr_get_u8(mt_reader *r, struct cursor *c, const char *field, uint8_t *v);
int mtr_get_u16(mt_reader *r, struct cursor *c, const char *field, uint16_t *v);
int mtr_get_u32(mt_reader *r, struct cursor *c, const char *field, uint32_t *v);
int mtr_get_u64(mt_reader *r, struct cursor *c, const char *field, uint64_t *v);
int mtr_get_vint(mt_reader *r, struct cursor *c, const char *field, int64_t *v);
int mtr_get_string(mt_reader *r, struct cursor *c, const char *field, const char **s);

/* A packet header at the reader's position (sec. 3, 8); with_verifier: check its verifier
 * against the current domain's cache (0.2.3 does so while parsing the header). */
int mtr_parse_header(mt_reader *r, struct mtr_header *h, int with_verifier);
/* The cache verifier of a header against the current domain's cache. */
int mtr_check_verifier(mt_reader *r, const struct mtr_header *h);
/* Makes the domain of the current packet current, creating its state at its first packet.
 * -1 with the reader's error past MTR_MAX_DOMAINS or out of memory. */
int mtr_select_domain(mt_reader *r, uint16_t id);
void mtr_free_domains(mt_reader *r);

#endif
