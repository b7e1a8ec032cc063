/* The trace reader (user/format/reader.c): decoding of a small hand-built trace, API
 * behaviours, and robustness: truncation at every byte, damaged headers, MTF references to
 * empty slots, unterminated strings, negative or too long common prefixes, backtraces that
 * grow without bound, random byte flips. Traces are built here with the codec primitives. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "codec.h"
#include "memtrace.h"
#include "trace_build.h"

/* The small trace: info; locations of 0x100 (a.ml A.f), 0x200 (no location), 0x300
 * (b.ml B.g & a.ml A.f); an events packet with 3 allocations, a promote and a collect. */
static struct bytes small_trace(size_t *packet_ends, int *npackets)
{
	struct bytes t = { 0 }, c = { 0 };
	int n = 0;
	info_packet(&t);
	packet_ends[n++] = t.len;

	ev_header(&c, MT_EV_ID_LOCATION, T0);
	put64(&c, 0x100);
	put8(&c, 1);
	put_loc(&c, 3, 31, 31, "a.ml", "A.f");
	ev_header(&c, MT_EV_ID_LOCATION, T0);
	put64(&c, 0x200);
	put8(&c, 0);
	ev_header(&c, MT_EV_ID_LOCATION, T0);
	put64(&c, 0x300);
	put8(&c, 2);
	put_loc(&c, 7, 31, 31, "b.ml", "B.g");
	put_loc(&c, 3, 1, 0, NULL, NULL); /* a.ml (slot 1), A.f (slot 0 of a.ml) */
	packet(&t, (struct hdr){ .tb = T0, .te = T0 }, &c);
	packet_ends[n++] = t.len;

	c.len = 0;
	ev_header(&c, MT_EV_ID_ALLOC, T0 + 10); /* long form, 3 misses */
	putvint(&c, 300);
	putvint(&c, 2);
	put8(&c, MT_SOURCE_MAJOR);
	putvint(&c, 0);
	put16(&c, 3);
	put16(&c, 5 << 2 | 3), put64(&c, 0x100);
	put16(&c, 9 << 2 | 3), put64(&c, 0x200);
	put16(&c, 11 << 2 | 3), put64(&c, 0x300);
	ev_header(&c, MT_EV_ID_SHORT_ALLOC_BASE + 3, T0 + 20); /* prefix 2 + hit on bucket 11 */
	putvint(&c, 2);
	put8(&c, 1);
	put16(&c, 11 << 2 | 0);
	ev_header(&c, MT_EV_ID_PROMOTE, T0 + 30);
	putvint(&c, 0);
	ev_header(&c, MT_EV_ID_COLLECT, T0 + 40);
	putvint(&c, 1);
	ev_header(&c, MT_EV_ID_SHORT_ALLOC_BASE + 1, T0 + 50); /* hit bucket 5 + 2 predictions */
	putvint(&c, 0);
	put8(&c, 1);
	put16(&c, 5 << 2 | 2);
	put8(&c, 2);
	packet(&t, (struct hdr){ .tb = T0 + 10, .te = T0 + 50, .aid_b = 0, .aid_e = 3 }, &c);
	packet_ends[n++] = t.len;
	*npackets = n;
	free(c.p);
	return t;
}


static void test_small_trace(void)
{
	size_t ends[8];
	int np;
	struct bytes t = small_trace(ends, &np);
	int fd = mem_fd(t.p, t.len);
	char *err = NULL;
	int warnings = 0;
	mt_reader *r = mt_reader_open(fd, count_warning, &warnings, &err);
	CHECKF("reader-small-open", r && !err, "%s", err ? err : "no reader");
	if (!r) return;
	const mt_trace_info *info = mt_reader_info(r);
	CHECK("reader-small-info", info->pid == PID && info->start_time_us == T0 &&
					   info->sample_rate == 1e-3 && info->word_size == 64 &&
					   !strcmp(info->executable_name, "exe") &&
					   !strcmp(info->host_name, "host") &&
					   !strcmp(info->ocaml_runtime_params, "") &&
					   !strcmp(info->context, "ctx"));
	mt_event ev;
	int rc = mt_reader_next(r, &ev);
	CHECK("reader-small-alloc-long", rc == 1 && ev.type == MT_EV_ALLOC && ev.id == 0 &&
						 ev.time_us == T0 + 10 && ev.length == 300 &&
						 ev.nsamples == 2 && ev.source == MT_SOURCE_MAJOR &&
						 ev.backtrace_len == 3 && ev.backtrace[0] == 0x100 &&
						 ev.backtrace[1] == 0x200 && ev.backtrace[2] == 0x300);
	rc = mt_reader_next(r, &ev);
	CHECK("reader-small-alloc-short-prefix", rc == 1 && ev.type == MT_EV_ALLOC && ev.id == 1 &&
							 ev.length == 3 && ev.nsamples == 1 &&
							 ev.source == MT_SOURCE_MINOR && ev.common_prefix == 2 &&
							 ev.backtrace_len == 3 && ev.backtrace[2] == 0x300);
	rc = mt_reader_next(r, &ev);
	CHECK("reader-small-promote", rc == 1 && ev.type == MT_EV_PROMOTE && ev.id == 1 &&
					      ev.time_us == T0 + 30);
	rc = mt_reader_next(r, &ev);
	CHECK("reader-small-collect", rc == 1 && ev.type == MT_EV_COLLECT && ev.id == 0);
	rc = mt_reader_next(r, &ev);
	CHECK("reader-small-predictions", rc == 1 && ev.id == 2 && ev.backtrace_len == 3 &&
						  ev.backtrace[0] == 0x100 && ev.backtrace[1] == 0x200 &&
						  ev.backtrace[2] == 0x300);
	CHECK("reader-small-end", mt_reader_next(r, &ev) == 0 && mt_reader_next(r, &ev) == 0 &&
					  warnings == 0);

	const mt_location *locs;
	int n = mt_reader_lookup(r, 0x300, &locs);
	CHECK("reader-lookup-inlined", n == 2 && !strcmp(locs[0].filename, "b.ml") &&
					       !strcmp(locs[0].defname, "B.g") && locs[0].line == 7 &&
					       locs[0].start_char == 1 && locs[0].end_char == 2 &&
					       !strcmp(locs[1].filename, "a.ml") &&
					       !strcmp(locs[1].defname, "A.f") && locs[1].line == 3);
	CHECK("reader-lookup-noloc", mt_reader_lookup(r, 0x200, &locs) == 0);
	CHECK("reader-lookup-undescribed", mt_reader_lookup(r, 0x999, &locs) == -1 &&
						   mt_reader_lookup(r, 0, NULL) == -1);
	mt_reader_close(r);
	close(fd);

	/* Truncation at every byte: never a crash; at a packet boundary a valid (shorter)
	 * trace, elsewhere an error or a warning. */
	int bad = 0;
	for (size_t cut = 0; cut < t.len; cut++) {
		struct outcome o = read_all(t.p, cut);
		int boundary = 0;
		for (int i = 0; i < np; i++) boundary |= cut == ends[i];
		int ok = boundary ? (o.rc == 0 && o.warnings == 0)
				  : ((o.rc < 0 && o.msg[0] && strstr(o.msg, "packet ")) ||
				     (o.rc == 0 && o.warnings > 0));
		if (!ok && bad++ < 3)
			printf("  cut at %zu of %zu: rc %d, %d warnings, '%s'\n", cut, t.len, o.rc,
			       o.warnings, o.msg);
	}
	CHECKF("reader-truncated-every-byte", bad == 0, "%d of %zu cuts misjudged", bad, t.len);

	/* Random byte flips: always a verdict (end or an error with a message). */
	srand(1234);
	bad = 0;
	for (int i = 0; i < 3000; i++) {
		uint8_t *copy = malloc(t.len);
		memcpy(copy, t.p, t.len);
		int flips = 1 + rand() % 4;
		for (int k = 0; k < flips; k++) copy[rand() % t.len] ^= (uint8_t)(1 + rand() % 255);
		struct outcome o = read_all(copy, t.len);
		if (!(o.rc == 0 || (o.rc < 0 && o.msg[0]))) bad++;
		free(copy);
	}
	CHECKF("reader-random-flips", bad == 0, "%d damaged traces without a verdict", bad);
	free(t.p);
}

/* The small trace with its events packet (packet 2) replaced by `c`. */
static struct outcome with_events(const struct bytes *c, struct hdr h)
{
	size_t ends[8];
	int np;
	struct bytes t = small_trace(ends, &np);
	t.len = ends[1];
	if (!h.te) h.tb = T0 + 10, h.te = T0 + 50;
	packet(&t, h, c);
	struct outcome o = read_all(t.p, t.len);
	free(t.p);
	return o;
}

static void test_damage(void)
{
	struct outcome o = read_all("", 0);
	CHECKF("reader-empty-file", !o.opened && has(&o, "empty"), "'%s'", o.msg);

	struct bytes c = { 0 };
	ev_header(&c, MT_EV_ID_PROMOTE, T0 + 10);
	putvint(&c, 0);
	o = with_events(&c, (struct hdr){ .size_override = 40 * 8 });
	CHECKF("reader-packet-smaller-than-header",
	       o.rc < 0 && has(&o, "smaller than the 66-byte header") && has(&o, "packet 2 at byte"),
	       "'%s'", o.msg);
	o = with_events(&c, (struct hdr){ .size_override = (MT_MAX_PACKET + 8) * 8 });
	CHECKF("reader-packet-over-32k", o.rc < 0 && has(&o, "larger than the 32768-byte limit"),
	       "'%s'", o.msg);

	/* A 40,000-byte packet 0 (long host name). */
	struct bytes big = { 0 }, info = { 0 };
	ev_header(&info, MT_EV_ID_TRACE_INFO, T0);
	put64(&info, 0);
	put8(&info, 64);
	for (int i = 0; i < 40000; i++) put8(&info, 'x');
	put8(&info, 0);
	packet(&big, (struct hdr){ .tb = T0, .te = T0 }, &info);
	o = read_all(big.p, big.len);
	CHECKF("reader-info-packet-over-32k", !o.opened && has(&o, "trace info packet size (packet 0"), "'%s'", o.msg);
	free(big.p);
	free(info.p);

	c.len = 0; /* promote before any allocation */
	ev_header(&c, MT_EV_ID_PROMOTE, T0 + 10);
	putvint(&c, 0);
	o = with_events(&c, (struct hdr){ 0 });
	CHECKF("reader-promote-before-alloc", o.rc < 0 && has(&o, "promote id sync"), "'%s'", o.msg);

	c.len = 0;
	ev_header(&c, 77, T0 + 10);
	o = with_events(&c, (struct hdr){ 0 });
	CHECKF("reader-unknown-event-code", o.rc < 0 && has(&o, "Unknown event code 77"), "'%s'", o.msg);

	c.len = 0; /* filename MTF slot 5 was never filled */
	ev_header(&c, MT_EV_ID_LOCATION, T0 + 10);
	put64(&c, 0x400);
	put8(&c, 1);
	put_loc(&c, 1, 5, 31, NULL, "X");
	o = with_events(&c, (struct hdr){ 0 });
	CHECKF("reader-mtf-empty-file-slot", o.rc < 0 && has(&o, "empty MTF slot") && has(&o, "filename slot 5"),
	       "'%s'", o.msg);

	c.len = 0; /* a.ml's defname table has one entry: slot 3 is empty */
	ev_header(&c, MT_EV_ID_LOCATION, T0 + 10);
	put64(&c, 0x400);
	put8(&c, 1);
	put_loc(&c, 1, 1, 3, NULL, NULL);
	o = with_events(&c, (struct hdr){ 0 });
	CHECKF("reader-mtf-empty-defname-slot", o.rc < 0 && has(&o, "defname slot 3"), "'%s'", o.msg);

	c.len = 0; /* the string runs to the end of the packet */
	ev_header(&c, MT_EV_ID_LOCATION, T0 + 10);
	put64(&c, 0x400);
	put8(&c, 1);
	put_loc(&c, 1, 31, 31, NULL, NULL);
	put(&c, "unterminated", 12);
	o = with_events(&c, (struct hdr){ 0 });
	CHECKF("reader-unterminated-string", o.rc < 0 && has(&o, "not NUL-terminated"), "'%s'", o.msg);

	c.len = 0; /* nlocs says 200, the packet holds one */
	ev_header(&c, MT_EV_ID_LOCATION, T0 + 10);
	put64(&c, 0x400);
	put8(&c, 200);
	put_loc(&c, 1, 0, 0, NULL, NULL);
	o = with_events(&c, (struct hdr){ 0 });
	CHECKF("reader-nlocs-too-large", o.rc < 0 && has(&o, "buffer underflow"), "'%s'", o.msg);

	c.len = 0; /* a code described twice differently */
	ev_header(&c, MT_EV_ID_LOCATION, T0 + 10);
	put64(&c, 0x100);
	put8(&c, 0);
	o = with_events(&c, (struct hdr){ 0 });
	CHECKF("reader-inconsistent-location", o.rc < 0 && has(&o, "consistent location info"), "'%s'", o.msg);

	c.len = 0; /* n_encoded larger than the codewords present; a 9-byte vint cut short */
	ev_header(&c, MT_EV_ID_ALLOC, T0 + 10);
	putvint(&c, 1);
	putvint(&c, 1);
	put8(&c, 0);
	putvint(&c, 0);
	put16(&c, 60000);
	put16(&c, 5 << 2 | 0);
	o = with_events(&c, (struct hdr){ .aid_e = 1 });
	CHECKF("reader-n-encoded-too-large", o.rc < 0 && has(&o, "buffer underflow") && has(&o, "codeword"),
	       "'%s'", o.msg);
	c.len = 0;
	ev_header(&c, MT_EV_ID_ALLOC, T0 + 10);
	put8(&c, 255);
	put32(&c, 7);
	o = with_events(&c, (struct hdr){ .aid_e = 1 });
	CHECKF("reader-vint-cut", o.rc < 0 && has(&o, "alloc length"), "'%s'", o.msg);

	c.len = 0; /* source 3 */
	ev_header(&c, MT_EV_ID_ALLOC, T0 + 10);
	putvint(&c, 1);
	putvint(&c, 1);
	put8(&c, 3);
	o = with_events(&c, (struct hdr){ .aid_e = 1 });
	CHECKF("reader-bad-source", o.rc < 0 && has(&o, "source"), "'%s'", o.msg);

	c.len = 0; /* negative common prefix (vint 254 + -5) */
	ev_header(&c, MT_EV_ID_SHORT_ALLOC_BASE + 1, T0 + 10);
	putvint(&c, -5);
	put8(&c, 0);
	o = with_events(&c, (struct hdr){ .aid_e = 1 });
	CHECKF("reader-negative-prefix", o.rc < 0 && has(&o, "negative common prefix"), "'%s'", o.msg);

	/* G28: a prefix longer than the previous backtrace gives the previous backtrace, and
	 * its codewords still fill the cache (bucket 7 then holds 0x300). */
	c.len = 0;
	ev_header(&c, MT_EV_ID_SHORT_ALLOC_BASE + 1, T0 + 10);
	putvint(&c, 0);
	put8(&c, 2);
	put16(&c, 5 << 2 | 3), put64(&c, 0x100);
	put16(&c, 6 << 2 | 3), put64(&c, 0x200);
	ev_header(&c, MT_EV_ID_SHORT_ALLOC_BASE + 1, T0 + 20);
	putvint(&c, 9);
	put8(&c, 1);
	put16(&c, 7 << 2 | 3), put64(&c, 0x300);
	ev_header(&c, MT_EV_ID_SHORT_ALLOC_BASE + 1, T0 + 30);
	putvint(&c, 1);
	put8(&c, 1);
	put16(&c, 7 << 2 | 0);
	{
		size_t ends[8];
		int np;
		struct bytes t = small_trace(ends, &np);
		t.len = ends[1];
		packet(&t, (struct hdr){ .tb = T0 + 10, .te = T0 + 30, .aid_e = 3 }, &c);
		int fd = mem_fd(t.p, t.len);
		mt_reader *r = mt_reader_open(fd, NULL, NULL, NULL);
		mt_event e1, e2, e3;
		int ok = r && mt_reader_next(r, &e1) == 1 && e1.backtrace_len == 2;
		ok = ok && mt_reader_next(r, &e2) == 1 && e2.backtrace_len == 2 &&
		     e2.backtrace[0] == 0x100 && e2.backtrace[1] == 0x200 && e2.common_prefix == 9;
		ok = ok && mt_reader_next(r, &e3) == 1 && e3.backtrace_len == 2 &&
		     e3.backtrace[0] == 0x100 && e3.backtrace[1] == 0x300 &&
		     mt_reader_next(r, &e3) == 0;
		CHECK("reader-prefix-beyond-previous-G28", ok);
		mt_reader_close(r);
		close(fd);
		free(t.p);
	}

	/* A backtrace that grows without bound: each allocation keeps the whole previous one
	 * and adds 1 + 255 * 300 frames; the reader stops with an error at 2^20 frames. */
	{
		size_t ends[8];
		int np;
		struct bytes t = small_trace(ends, &np);
		t.len = ends[1];
		int64_t len = 0;
		for (int pk = 0; pk < 20; pk++) {
			c.len = 0;
			ev_header(&c, MT_EV_ID_ALLOC, T0 + 10);
			putvint(&c, 1), putvint(&c, 1), put8(&c, 0);
			putvint(&c, len);
			put16(&c, 301);
			put16(&c, 5 << 2 | 3), put64(&c, 0x100);
			for (int k = 0; k < 300; k++) put16(&c, 5 << 2 | 2), put8(&c, 255);
			len += 1 + 300 * 256;
			packet(&t, (struct hdr){ .tb = T0 + 10, .te = T0 + 10, .aid_b = pk, .aid_e = pk + 1 }, &c);
		}
		o = read_all(t.p, t.len);
		CHECKF("reader-backtrace-growth-capped", o.rc < 0 && has(&o, "backtrace too long") &&
							     o.allocs == (1 << 20) / (1 + 300 * 256),
		       "allocs %d, '%s'", o.allocs, o.msg);
		free(t.p);
	}

	c.len = 0; /* wrong pid: skipped with a warning */
	ev_header(&c, MT_EV_ID_PROMOTE, T0 + 10);
	putvint(&c, 0);
	o = with_events(&c, (struct hdr){ .pid = 7 });
	CHECKF("reader-wrong-pid-warning", o.rc == 0 && o.warnings == 1 && o.events == 0, "rc %d, %d warnings", o.rc, o.warnings);
	o = with_events(&c, (struct hdr){ .aid_b = 4, .aid_e = 4 });
	CHECKF("reader-bad-alloc-id-begin-warning", o.rc == 0 && o.warnings == 1, "rc %d", o.rc);
	/* A v3 packet in a v2 trace: 0.2.3 reads its header as v2, so its verifier fields are
	 * the domain (0) and the v3 verifier's 0xFFFF: the verifier check fails first. A packet
	 * that only says v3 gets the version error (more in test_reader_v3.c). */
	o = with_events(&c, (struct hdr){ .version = 3 });
	CHECKF("reader-v3-packet-in-v2-trace", o.rc < 0 && has(&o, "cache verification failed") &&
						       has(&o, "expects prediction 65535"), "'%s'", o.msg);

	/* The verifier (sec. 8): the cache is empty before packet 2; 0.2.3 checks it while
	 * parsing the header, so also on a packet it then skips. */
	o = with_events(&c, (struct hdr){ .pid = 7, .verify = 1, .verify_ix = 5, .verify_val = 0x999 });
	CHECKF("reader-verifier-checked-on-skipped-packet",
	       o.rc < 0 && has(&o, "cache verification failed") && has(&o, "bucket 5"), "'%s'", o.msg);
	o = with_events(&c, (struct hdr){ .verify = 1, .verify_ix = 20000 });
	CHECKF("reader-verifier-bucket-out-of-range", o.rc < 0 && has(&o, "bucket 20000 does not exist"),
	       "'%s'", o.msg);
	c.len = 0;
	ev_header(&c, MT_EV_ID_SHORT_ALLOC_BASE + 1, T0 + 10);
	putvint(&c, 0);
	put8(&c, 1);
	put16(&c, 5 << 2 | 3), put64(&c, 0x100);
	{
		size_t ends[8];
		int np;
		struct bytes t = small_trace(ends, &np);
		t.len = ends[1];
		packet(&t, (struct hdr){ .tb = T0 + 10, .te = T0 + 10, .aid_e = 1, .verify = 1, .verify_ix = 9 }, &c);
		struct bytes e = { 0 };
		/* after the miss in bucket 5: pred[0] = 5, loc[5] = 0x100 */
		packet(&t, (struct hdr){ .tb = T0 + 10, .te = T0 + 10, .aid_b = 1, .aid_e = 1, .verify = 1,
					 .verify_ix = 0, .verify_pred = 5, .verify_val = 0 }, &e);
		packet(&t, (struct hdr){ .tb = T0 + 10, .te = T0 + 10, .aid_b = 1, .aid_e = 1, .verify = 1,
					 .verify_ix = 5, .verify_pred = 0, .verify_val = 0x100 }, &e);
		o = read_all(t.p, t.len);
		CHECKF("reader-verifier-matches", o.rc == 0 && o.allocs == 1, "'%s'", o.msg);
		free(t.p);
	}
	free(c.p);
}

/* The reference traces read to the end with the expected numbers of events; a sampled
 * set of truncations of one of them never crashes and always gives a verdict. */
static void test_reference(void)
{
	static const struct { const char *name; int events, allocs; } refs[] = {
		{ "v2-lists-r1e-4", 1355, 637 }, { "v2-synth", 13700, 13674 },
		{ "v2-deep-r1e-3", 1074, 470 }, { "upstream-ocamlopt-v2", 3499, 1676 },
	};
	for (size_t i = 0; i < sizeof(refs) / sizeof(refs[0]); i++) {
		char path[256], name[128];
		snprintf(path, sizeof(path), "tests/data/memtrace/%s.ctf", refs[i].name);
		snprintf(name, sizeof(name), "reader-reference-%s", refs[i].name);
		FILE *f = fopen(path, "rb");
		if (!f) {
			printf("FAIL %s: cannot open %s (run from the top directory)\n", name, path);
			check_failures++;
			continue;
		}
		struct bytes b = { 0 };
		char chunk[65536];
		size_t n;
		while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) put(&b, chunk, n);
		fclose(f);
		struct outcome o = read_all(b.p, b.len);
		CHECKF(name, o.rc == 0 && o.events == refs[i].events && o.allocs == refs[i].allocs &&
				     o.warnings == 0,
		       "rc %d events %d allocs %d: %s", o.rc, o.events, o.allocs, o.msg);
		if (i == 0) {
			int bad = 0;
			for (size_t cut = 0; cut < b.len; cut += 61) {
				o = read_all(b.p, cut);
				if (!((o.rc < 0 && o.msg[0]) || o.rc == 0)) bad++;
			}
			CHECKF("reader-reference-truncations", bad == 0, "%d cuts without a verdict", bad);
		}
		free(b.p);
	}
}

int main(void)
{
	test_small_trace();
	test_damage();
	test_reference();
	return CHECK_DONE();
}
