/* The writer in format v3 (mt_writer_open_format): 68-byte headers with version 3 and the
 * initial domain in every packet, an events packet never holding ids of two 10,000-id
 * chunks (the newest writer's Obj_id allocator), and every event read back; v2 stays the
 * default; other versions are refused. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "codec.h"
#include "memtrace.h"

#define START 1700000000000000ull
#define PID 4242
#define NALLOC 25000

static mt_trace_info info = {
	.sample_rate = 1e-4, .word_size = 64, .executable_name = "/usr/bin/demo",
	.host_name = "host", .ocaml_runtime_params = "", .pid = PID, .context = "v3 ctx",
	.start_time_us = START, .initial_domain = 7,
};

static int locations(void *ctx, uint64_t code, const mt_location **locs)
{
	static mt_location one;
	static char fn[32];
	snprintf(fn, sizeof fn, "fn%llu", (unsigned long long)code);
	one = (mt_location){ .line = (uint32_t)code, .filename = "v3.c", .defname = fn };
	*locs = &one;
	return 1;
}

static uint8_t *slurp(int fd, size_t *len)
{
	off_t n = lseek(fd, 0, SEEK_END);
	uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
	*len = n > 0 && pread(fd, b, (size_t)n, 0) == n ? (size_t)n : 0;
	lseek(fd, 0, SEEK_SET);
	return b;
}

/* Writes NALLOC allocations (stacks of 12 frames, 4 shapes), a collect after every third,
 * a promote after every fifth; returns the fd (at offset 0) or -1. */
static int write_trace(int version)
{
	int fd = memfd_create("trace", 0);
	mt_writer *w = mt_writer_open_format(fd, &info, version, locations, NULL);
	if (!w) return -1;
	uint64_t bt[12];
	for (int i = 0; i < NALLOC; i++) {
		for (int k = 0; k < 12; k++) bt[k] = 1 + k + (k > 8 ? 100 * (i % 4) : 0);
		uint64_t t = START + (uint64_t)i * 7;
		int64_t id = mt_writer_alloc(w, t, 1 + i % 20, 1, MT_SOURCE_MINOR, bt, 12);
		if (id != i) return -1;
		if (i % 3 == 2 && mt_writer_collect(w, t + 1, (uint64_t)i - 1) < 0) return -1;
		if (i % 5 == 4 && mt_writer_promote(w, t + 2, (uint64_t)i) < 0) return -1;
	}
	if (mt_writer_close(w) < 0) return -1;
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static void test_packets(void)
{
	int fd = write_trace(3);
	CHECK("v3w_written", fd >= 0);
	if (fd < 0) return;
	size_t len, off = 0;
	uint8_t *b = slurp(fd, &len);
	int packets = 0, bad_header = 0, crossing = 0, ends_at_chunk = 0;
	while (off + MT_HEADER_SIZE_V3 <= len) {
		const uint8_t *h = b + off;
		size_t size = mt_get_u32(h + MT_H_PACKET_SIZE) / 8;
		uint64_t ib = mt_get_u64(h + mt_h_off(3, MT_H_ALLOC_BEGIN));
		uint64_t ie = mt_get_u64(h + mt_h_off(3, MT_H_ALLOC_END));
		if (mt_get_u32(h) != MT_MAGIC || mt_get_u16(h + MT_H_VERSION) != 3 ||
		    mt_get_u16(h + MT_H_DOMAIN) != 7 || mt_get_u64(h + MT_H_PID) != PID ||
		    size < MT_HEADER_SIZE_V3 || size > MT_MAX_PACKET || off + size > len)
			bad_header++;
		if (ie > ib && ib / 10000 != (ie - 1) / 10000) crossing++;
		if (ie == 10000 || ie == 20000) ends_at_chunk++;
		packets++;
		if (size < MT_HEADER_SIZE_V3) break;
		off += size;
	}
	CHECKF("v3w_headers", bad_header == 0 && off == len && packets > 10,
	       "%d bad headers of %d, %zu of %zu bytes walked", bad_header, packets, off, len);
	CHECKF("v3w_id_chunks", crossing == 0 && ends_at_chunk >= 2,
	       "%d packets cross a 10,000-id chunk, %d end at one", crossing, ends_at_chunk);

	mt_reader *r = mt_reader_open(fd, NULL, NULL, NULL);
	const mt_trace_info *ri = r ? mt_reader_info(r) : NULL;
	CHECK("v3w_info", ri && ri->format_version == 3 && ri->initial_domain == 7 &&
				  !strcmp(ri->context, "v3 ctx") && ri->pid == PID);
	mt_event ev;
	int rc = -1;
	long allocs = 0, collects = 0, promotes = 0, wrong = 0;
	while (r && (rc = mt_reader_next(r, &ev)) > 0) {
		if (ev.domain != 7) wrong++;
		if (ev.type == MT_EV_ALLOC) {
			if (ev.id != (uint64_t)allocs || ev.length != 1 + (uint64_t)allocs % 20 ||
			    ev.backtrace_len != 12 || ev.backtrace[11] != 12 + 100 * (allocs % 4))
				wrong++;
			allocs++;
		} else if (ev.type == MT_EV_COLLECT) {
			if (ev.id != (uint64_t)allocs - 2) wrong++;
			collects++;
		} else {
			if (ev.id != (uint64_t)allocs - 1) wrong++;
			promotes++;
		}
	}
	CHECKF("v3w_read_back", rc == 0 && wrong == 0 && allocs == NALLOC &&
					collects == NALLOC / 3 && promotes == NALLOC / 5,
	       "rc %d (%s): %ld wrong, %ld allocs %ld collects %ld promotes", rc,
	       r ? mt_reader_error(r) : "no reader", wrong, allocs, collects, promotes);
	mt_reader_close(r);
	free(b);
	close(fd);
}

static void test_versions(void)
{
	int fd = memfd_create("trace", 0);
	mt_writer *w = mt_writer_open(fd, &info, locations, NULL);
	mt_writer_close(w);
	uint8_t h[MT_HEADER_SIZE_V2];
	CHECK("v3w_default_is_v2", w && pread(fd, h, sizeof h, 0) == (ssize_t)sizeof h &&
					   mt_get_u16(h + MT_H_VERSION) == 2 &&
					   mt_get_u32(h + MT_H_PACKET_SIZE) / 8 != 0);
	errno = 0;
	CHECK("v3w_version_4_refused", !mt_writer_open_format(fd, &info, 4, locations, NULL) &&
					       errno == EINVAL);
	CHECK("v3w_version_1_refused", !mt_writer_open_format(fd, &info, 1, locations, NULL));
	close(fd);
	/* v2 and v3 of the same events: the v3 file is the v2 one with 2 more bytes per
	 * packet (plus the packets the id chunks end). */
	int f2 = write_trace(2), f3 = write_trace(3);
	size_t l2 = 0, l3 = 0;
	free(slurp(f2, &l2));
	free(slurp(f3, &l3));
	CHECKF("v3w_sizes", f2 >= 0 && f3 >= 0 && l3 > l2 && l3 - l2 < l2 / 50,
	       "v2 %zu bytes, v3 %zu bytes", l2, l3);
	close(f2);
	close(f3);
}

int main(void)
{
	test_packets();
	test_versions();
	return CHECK_DONE();
}
