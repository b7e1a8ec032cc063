/* Primitive encodings of the memtrace format shared by the writer and the reader
 * (docs/memtrace-format.md sections 2-4): little-endian integers, vints, the packet header
 * layout, event ids. Header-only: everything here is small and hot. */
#ifndef MEMTRACE_CODEC_H
#define MEMTRACE_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MT_MAGIC 0xC1FC1FC1u
#define MT_HEADER_SIZE_V2 66 /* v1 and v2; v3 inserts a u16 domain after the pid (68) */
#define MT_HEADER_SIZE_V3 68
#define MT_HEADER_SIZE_MAX MT_HEADER_SIZE_V3
#define MT_VERIFY_NONE 0xFFFFu
#define MT_TIME_BITS 25
#define MT_TIME_MASK ((1u << MT_TIME_BITS) - 1)
#define MT_CACHE_BITS 14
#define MT_CACHE_SIZE (1u << MT_CACHE_BITS)

/* Offsets of the v1/v2 packet header fields (sec. 3). In v3 the fields from
 * MT_H_VERIFY_IX on are 2 bytes further (mt_h_off), after the u16 domain at MT_H_DOMAIN. */
enum {
	MT_H_MAGIC = 0,
	MT_H_PACKET_SIZE = 4, /* bits, header included */
	MT_H_TIME_BEGIN = 8,
	MT_H_TIME_END = 16,
	MT_H_FLUSH_DURATION = 24,
	MT_H_VERSION = 28,
	MT_H_PID = 30,
	MT_H_VERIFY_IX = 38,
	MT_H_VERIFY_PRED = 40,
	MT_H_VERIFY_VAL = 42,
	MT_H_ALLOC_BEGIN = 50,
	MT_H_ALLOC_END = 58,
	MT_H_DOMAIN = 38, /* v3 only */
};

/* The header size of a packet of the given version, and where a field (named by its v1/v2
 * offset) is in such a header. */
static inline size_t mt_header_size(unsigned version)
{
	return version >= 3 ? MT_HEADER_SIZE_V3 : MT_HEADER_SIZE_V2;
}
static inline size_t mt_h_off(unsigned version, size_t v2_offset)
{
	return version >= 3 && v2_offset >= MT_H_VERIFY_IX ? v2_offset + 2 : v2_offset;
}

/* Event ids (sec. 4). Short allocs of 1..16 words are ids 101..116. */
enum {
	MT_EV_ID_TRACE_INFO = 0,
	MT_EV_ID_LOCATION = 1,
	MT_EV_ID_ALLOC = 2,
	MT_EV_ID_PROMOTE = 3,
	MT_EV_ID_COLLECT = 4,
	MT_EV_ID_SHORT_ALLOC_BASE = 100,
};

static inline void mt_put_u16(uint8_t *p, uint16_t v) { p[0] = v; p[1] = v >> 8; }
static inline void mt_put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++) p[i] = v >> (8 * i);
}
static inline void mt_put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++) p[i] = v >> (8 * i);
}
static inline uint16_t mt_get_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t mt_get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t mt_get_u64(const uint8_t *p)
{
	return (uint64_t)mt_get_u32(p) | (uint64_t)mt_get_u32(p + 4) << 32;
}

/* Canonical vint (what OCaml writes): 0..252 in 1 byte; 253 + u16 up to 0xFFFF; 254 + signed
 * i32; 255 + i64. Values are taken as signed 64-bit. Returns the bytes written (1, 3, 5, 9). */
static inline size_t mt_vint_size(int64_t v)
{
	if (v >= 0 && v <= 252) return 1;
	if (v >= 0 && v <= 0xFFFF) return 3;
	if (v >= INT32_MIN && v <= INT32_MAX) return 5;
	return 9;
}
static inline size_t mt_put_vint(uint8_t *p, int64_t v)
{
	if (v >= 0 && v <= 252) { p[0] = (uint8_t)v; return 1; }
	if (v >= 0 && v <= 0xFFFF) { p[0] = 253; mt_put_u16(p + 1, (uint16_t)v); return 3; }
	if (v >= INT32_MIN && v <= INT32_MAX) { p[0] = 254; mt_put_u32(p + 1, (uint32_t)v); return 5; }
	p[0] = 255;
	mt_put_u64(p + 1, (uint64_t)v);
	return 9;
}
/* Decodes a vint from [p, end). Returns bytes consumed, or 0 if it runs past end. */
static inline size_t mt_get_vint(const uint8_t *p, const uint8_t *end, int64_t *v)
{
	if (p >= end) return 0;
	switch (p[0]) {
	case 253:
		if (end - p < 3) return 0;
		*v = mt_get_u16(p + 1);
		return 3;
	case 254:
		if (end - p < 5) return 0;
		*v = (int32_t)mt_get_u32(p + 1);
		return 5;
	case 255:
		if (end - p < 9) return 0;
		*v = (int64_t)mt_get_u64(p + 1);
		return 9;
	default: *v = p[0]; return 1;
	}
}

/* The two backtrace-cache hash functions of the reference encoder (sec. 6.4, G33). */
static inline uint32_t mt_hash1(uint64_t code) { return (uint32_t)((code * 0x4983723u) >> 11) & (MT_CACHE_SIZE - 1); }
static inline uint32_t mt_hash2(uint64_t code) { return (uint32_t)((code * 0xFDEA731u) >> 21) & (MT_CACHE_SIZE - 1); }

#endif
