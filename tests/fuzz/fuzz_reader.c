/* libFuzzer target of the trace reader: the input is a trace file. It is opened through
 * mt_reader_open on a memfd, every event is read and every backtrace code looked up, as a
 * consumer (memtrace-dump) does. Any crash, sanitizer report, hang or broken API
 * invariant is a finding. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memtrace.h"

static void quiet(void *ctx, const char *msg)
{
	(void)msg;
	++*(unsigned *)ctx;
}

/* A broken invariant: report it the way libFuzzer reports crashes. */
static void broken(const char *what)
{
	fprintf(stderr, "fuzz_reader: API invariant broken: %s\n", what);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("trace", MFD_CLOEXEC);
	if (fd < 0) return 0;
	if (write(fd, data, size) != (ssize_t)size || lseek(fd, 0, SEEK_SET) != 0) {
		close(fd);
		return 0;
	}
	unsigned warnings = 0;
	char *err = NULL;
	mt_reader *r = mt_reader_open(fd, quiet, &warnings, &err);
	if (!r) {
		if (!err || !err[0]) broken("open failed without a message");
		free(err);
		close(fd);
		return 0;
	}
	if (err) broken("open succeeded but left a message");
	const mt_trace_info *info = mt_reader_info(r);
	volatile size_t sink = 0;
	for (const char *s = info->executable_name; *s; s++) sink += (unsigned char)*s;
	for (const char *s = info->context; *s; s++) sink += (unsigned char)*s;

	uint64_t allocs = 0;
	mt_event ev;
	int rc;
	while ((rc = mt_reader_next(r, &ev)) > 0) {
		/* timestamps are signed 64-bit numbers in the format (G25) */
		if ((int64_t)ev.time_us < (int64_t)info->start_time_us)
			broken("event before the trace start");
		/* v1/v2: ids 0, 1, 2, ... in stream order; v3 counts them per packet from its
		 * alloc_id_begin (several domains), and a collect may refer forward. */
		int v3 = info->format_version >= 3;
		if (!v3 && ev.domain != 0) broken("a domain in a v1/v2 trace");
		if (ev.type == MT_EV_ALLOC) {
			if (!v3 && ev.id != allocs) broken("allocation ids not 0, 1, 2, ...");
			if ((int64_t)ev.id < 0) broken("negative allocation id");
			allocs++;
			if (ev.source > MT_SOURCE_EXTERNAL) broken("bad source");
			/* Codes are looked up where they can have changed (after the common
			 * prefix, not repeating the previous slot): looking up all slots of the
			 * deep reference traces makes a run take seconds. The first and last
			 * slots are always read. */
			size_t from = ev.common_prefix < ev.backtrace_len ? ev.common_prefix
									   : ev.backtrace_len;
			if (ev.backtrace_len)
				sink += ev.backtrace[0] + ev.backtrace[ev.backtrace_len - 1];
			for (size_t i = from; i < ev.backtrace_len; i++) {
				if (i > from && ev.backtrace[i] == ev.backtrace[i - 1]) continue;
				const mt_location *locs;
				int n = mt_reader_lookup(r, ev.backtrace[i], &locs);
				if (n > 255) broken("more than 255 locations");
				for (int k = 0; k < n; k++)
					sink += locs[k].line + (unsigned char)locs[k].filename[0] +
						(unsigned char)locs[k].defname[0];
			}
		} else if (ev.type == MT_EV_PROMOTE || ev.type == MT_EV_COLLECT) {
			if (!v3 && ev.id >= allocs) broken("promote/collect of an id not allocated yet");
			if ((int64_t)ev.id < 0) broken("negative promote/collect id");
		} else {
			broken("unknown event type");
		}
	}
	if (rc < 0 && !mt_reader_error(r)[0]) broken("error without a message");
	/* Once finished, the reader stays finished. */
	if (mt_reader_next(r, &ev) != rc) broken("mt_reader_next changed its verdict");
	if (mt_reader_lookup(r, 0x3FFFFFFFFFFFFFFFull, NULL) > 255) broken("lookup");
	mt_reader_close(r);
	close(fd);
	return 0;
}
