/* The writer end to end: packet structure (sizes, one write() per packet, time spans, ids,
 * verifiers), flush rules, clamping, truthful prefixes, "<unknown>" locations, write errors,
 * and a round trip of a synthetic stream through our reader. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "check.h"
#include "codec.h"
#include "memtrace.h"

#define START 1700000000000000ull
#define PID 4242

static mt_trace_info info = {
	.sample_rate = 1e-4, .word_size = 64, .executable_name = "/usr/bin/demo",
	.host_name = "host", .ocaml_runtime_params = "", .pid = PID, .context = "test ctx",
	.start_time_us = START,
};

/* Locations: code c -> one location "file<c%7>.c" line c, function "fn<c>". Codes 900000+
 * have 300 locations (-> "<unknown>"); code 777 is unknown to the callback. */
static mt_location big_list[300];
static int locations(void *ctx, uint64_t code, const mt_location **locs)
{
	static __thread mt_location one;
	static __thread char file[32], fn[32];
	if (code == 777) return -1;
	if (code >= 900000) {
		for (int i = 0; i < 300; i++)
			big_list[i] = (mt_location){.line = i, .filename = "x.c", .defname = "x"};
		*locs = big_list;
		return 300;
	}
	snprintf(file, sizeof file, "file%d.c", (int)(code % 7));
	snprintf(fn, sizeof fn, "fn%llu", (unsigned long long)code);
	one = (mt_location){.line = (uint32_t)code, .start_char = 3, .end_char = 9,
			    .filename = file, .defname = fn};
	*locs = &one;
	return 1;
}

static int memfd(void) { return memfd_create("trace", 0); }

static uint8_t *slurp(int fd, size_t *len)
{
	off_t n = lseek(fd, 0, SEEK_END);
	uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
	*len = n > 0 && pread(fd, b, (size_t)n, 0) == n ? (size_t)n : 0;
	lseek(fd, 0, SEEK_SET);
	return b;
}

/* Walks the packets of a trace: checks the header invariants of sec. 3 and 10.3, collects
 * the verifier ix of every events packet. Returns the number of packets, or -1 (why in msg). */
struct walk {
	int packets, events_packets, max_size;
	uint16_t vix[64];
	int nvix;
	uint64_t max_span;
	char msg[200];
};

static int walk(const uint8_t *b, size_t len, struct walk *w)
{
	memset(w, 0, sizeof *w);
	size_t off = 0;
	uint64_t ids = 0, last_t = 0;
	while (off < len) {
		const uint8_t *h = b + off;
		if (len - off < MT_HEADER_SIZE_V2) return snprintf(w->msg, 200, "short header"), -1;
		size_t size = mt_get_u32(h + MT_H_PACKET_SIZE) / 8;
		uint64_t tb = mt_get_u64(h + MT_H_TIME_BEGIN), te = mt_get_u64(h + MT_H_TIME_END);
		uint64_t ib = mt_get_u64(h + MT_H_ALLOC_BEGIN), ie = mt_get_u64(h + MT_H_ALLOC_END);
		if (mt_get_u32(h) != MT_MAGIC || mt_get_u16(h + MT_H_VERSION) != 2 ||
		    mt_get_u64(h + MT_H_PID) != PID)
			return snprintf(w->msg, 200, "packet %d: bad magic/version/pid", w->packets), -1;
		if (size < MT_HEADER_SIZE_V2 || size > MT_MAX_PACKET || size > len - off)
			return snprintf(w->msg, 200, "packet %d: size %zu", w->packets, size), -1;
		if (tb > te || tb < last_t || te - tb >= (1u << 25))
			return snprintf(w->msg, 200, "packet %d: times %llu..%llu", w->packets,
					(unsigned long long)tb, (unsigned long long)te), -1;
		if (ib != ids || ie < ib)
			return snprintf(w->msg, 200, "packet %d: ids %llu..%llu, expected from %llu",
					w->packets, (unsigned long long)ib,
					(unsigned long long)ie, (unsigned long long)ids), -1;
		/* Events packets: first content event is not a location (or empty, not packet 0). */
		int is_events = w->packets > 0 &&
				(size == MT_HEADER_SIZE_V2 || (mt_get_u32(h + 66) >> 25) != 1);
		if (is_events) {
			w->events_packets++;
			if (w->nvix < 64) w->vix[w->nvix++] = mt_get_u16(h + MT_H_VERIFY_IX);
		}
		if ((int)size > w->max_size) w->max_size = (int)size;
		if (te - tb > w->max_span) w->max_span = te - tb;
		ids = ie;
		last_t = tb;
		off += size;
		w->packets++;
	}
	return w->packets;
}

static mt_reader *reopen(int fd)
{
	char *err = NULL;
	lseek(fd, 0, SEEK_SET);
	mt_reader *r = mt_reader_open(fd, NULL, NULL, &err);
	if (!r) {
		printf("# reader: %s\n", err ? err : "?");
		free(err);
	}
	return r;
}

static void test_empty_trace(void)
{
	int fd = memfd();
	mt_writer *w = mt_writer_open(fd, &info, locations, NULL);
	CHECK("empty_open", w != NULL);
	CHECK("empty_close", mt_writer_close(w) == 0);
	size_t len;
	uint8_t *b = slurp(fd, &len);
	struct walk wk;
	CHECKF("empty_two_packets", walk(b, len, &wk) == 2 && wk.events_packets == 1,
	       "%d packets %s", wk.packets, wk.msg);
	mt_reader *r = reopen(fd);
	mt_event ev;
	const mt_trace_info *ri = r ? mt_reader_info(r) : NULL;
	CHECK("empty_info_roundtrip",
	      ri && ri->pid == PID && ri->start_time_us == START && ri->sample_rate == 1e-4 &&
		      ri->word_size == 64 && !strcmp(ri->executable_name, "/usr/bin/demo") &&
		      !strcmp(ri->host_name, "host") && !strcmp(ri->context, "test ctx"));
	CHECK("empty_no_events", r && mt_reader_next(r, &ev) == 0);
	if (r) mt_reader_close(r);
	free(b);
	close(fd);
}

/* A synthetic stream: 300 stacks of 30 frames sharing outer frames, odd lengths, every
 * source, promotes and collects, a few explicit flushes. Read back and compared event by
 * event. */
#define NSTACKS 300
#define DEPTH 30
#define NALLOC 20000
struct expect { int type; uint64_t t, id, len, ns; int src, stack; };

static void stack_of(int s, uint64_t *bt)
{
	for (int i = 0; i < DEPTH; i++)
		bt[i] = i < 10 ? 1 + i : i < 20 ? 100 + (s % 17) * 10 + i : 5000 + s * 40 + i;
}

static void test_roundtrip(void)
{
	static struct expect ex[3 * NALLOC];
	static const uint64_t lens[] = {0, 1, 2, 16, 17, 252, 253, 300, 65535, 65536, 70000,
					2147483648ull, 3000000000ull};
	int nex = 0;
	uint64_t bt[DEPTH], t = START;
	int fd = memfd();
	mt_writer *w = mt_writer_open(fd, &info, locations, NULL);
	int ok = w != NULL;
	unsigned seed = 1;
	for (int i = 0; i < NALLOC && ok; i++) {
		seed = seed * 1103515245 + 12345;
		int s = (seed >> 8) % NSTACKS;
		stack_of(s, bt);
		t += (seed >> 4) % 300;
		uint64_t len = i % 5 ? 1 + (seed >> 3) % 16 : lens[(seed >> 5) % 13];
		uint64_t ns = i % 7 ? 1 : 1 + (seed >> 9) % 5000;
		int src = i % 11 ? 0 : (seed >> 6) % 3;
		int64_t id = mt_writer_alloc(w, t, len, ns, src, bt, DEPTH);
		ok &= id == i;
		ex[nex++] = (struct expect){MT_EV_ALLOC, t, (uint64_t)id, len, ns, src, s};
		if (i % 3 == 0) {
			ok &= mt_writer_promote(w, t, (uint64_t)i) == 0;
			ex[nex++] = (struct expect){.type = MT_EV_PROMOTE, .t = t, .id = (uint64_t)i};
		}
		if (i >= 50 && i % 4) {
			ok &= mt_writer_collect(w, t, (uint64_t)i - 50) == 0;
			ex[nex++] = (struct expect){.type = MT_EV_COLLECT, .t = t, .id = (uint64_t)i - 50};
		}
		if (i % 5000 == 4999) ok &= mt_writer_flush(w, t) == 0;
	}
	CHECK("roundtrip_write", ok);
	CHECK("roundtrip_next_id", mt_writer_next_id(w) == NALLOC);
	uint64_t written = mt_writer_bytes_written(w);
	CHECK("roundtrip_close", mt_writer_close(w) == 0);
	size_t flen;
	uint8_t *b = slurp(fd, &flen);
	CHECKF("roundtrip_bytes_written", written < flen && flen - written < MT_MAX_PACKET,
	       "%llu before close, %zu in file", (unsigned long long)written, flen);
	struct walk wk;
	CHECKF("roundtrip_packets_valid", walk(b, flen, &wk) > 3, "%s", wk.msg);
	CHECKF("roundtrip_packets_le_32k", wk.max_size <= MT_MAX_PACKET && wk.max_size > 28000,
	       "largest %d", wk.max_size);
	static const uint16_t seq[] = {MT_VERIFY_NONE, 4242, 9655, 15068, 4097, 9510};
	CHECKF("roundtrip_verifier_sequence",
	       wk.nvix >= 6 && !memcmp(wk.vix, seq, sizeof seq), "%d events packets, ix %u %u %u",
	       wk.nvix, wk.vix[0], wk.vix[1], wk.vix[2]);
	printf("# %d allocs: %zu bytes, %.2f bytes/event, %d packets\n", NALLOC, flen,
	       (double)flen / nex, wk.packets);

	mt_reader *r = reopen(fd);
	mt_event ev;
	int n = 0, same = r != NULL, locs_ok = 1, rc;
	char why[200] = "";
	while (same && (rc = mt_reader_next(r, &ev)) == 1) {
		struct expect *e = &ex[n];
		if (n >= nex || ev.type != e->type || ev.time_us != e->t || ev.id != e->id) {
			snprintf(why, sizeof why, "event %d: type %d time %llu id %llu", n, ev.type,
				 (unsigned long long)ev.time_us, (unsigned long long)ev.id);
			same = 0;
			break;
		}
		if (ev.type == MT_EV_ALLOC) {
			stack_of(e->stack, bt);
			if (ev.length != e->len || ev.nsamples != e->ns || (int)ev.source != e->src ||
			    ev.backtrace_len != DEPTH || memcmp(ev.backtrace, bt, sizeof bt)) {
				snprintf(why, sizeof why, "alloc %d: len %llu ns %llu src %d bt %zu", n,
					 (unsigned long long)ev.length,
					 (unsigned long long)ev.nsamples, ev.source,
					 ev.backtrace_len);
				same = 0;
			}
			/* Every code is described before the event that uses it (G18). */
			for (size_t i = 0; i < ev.backtrace_len; i++) {
				const mt_location *l;
				char fn[32];
				snprintf(fn, sizeof fn, "fn%llu", (unsigned long long)ev.backtrace[i]);
				locs_ok &= mt_reader_lookup(r, ev.backtrace[i], &l) == 1 &&
					   l[0].line == ev.backtrace[i] && l[0].end_char == 9 &&
					   !strcmp(l[0].defname, fn);
			}
		}
		n++;
	}
	if (same && rc != 0) snprintf(why, sizeof why, "reader: %s", mt_reader_error(r));
	CHECKF("roundtrip_events_identical", same && rc == 0 && n == nex, "%s (%d of %d)", why, n,
	       nex);
	CHECK("roundtrip_locations_before_use", locs_ok);
	if (r) mt_reader_close(r);
	free(b);
	close(fd);
}

/* Time: 25-bit wrap, the 30 s packet span, a long quiet period, clamping. */
static void test_times(void)
{
	static const uint64_t dt[] = {0, 5, 20000000, 20000001, 33554432 + 7, 33554432 + 8,
				      63554432 + 9, 3600000000ull, 3600000000ull + 29999999,
				      3600000000ull + 30000000, 3600000000ull + 30000001};
	const int n = sizeof dt / sizeof dt[0];
	int fd = memfd();
	mt_writer *w = mt_writer_open(fd, &info, locations, NULL);
	uint64_t bt[1] = {1};
	int ok = 1;
	for (int i = 0; i < n; i++) ok &= mt_writer_alloc(w, START + dt[i], 1, 1, 0, bt, 1) == i;
	/* Going back in time is clamped to the last time written. */
	ok &= mt_writer_collect(w, START + 1000, 0) == 0;
	ok &= mt_writer_flush(w, START) == 0;
	ok &= mt_writer_alloc(w, START + 5, 1, 1, 0, bt, 1) == n;
	ok &= mt_writer_close(w) == 0;
	CHECK("time_write", ok);
	size_t len;
	uint8_t *b = slurp(fd, &len);
	struct walk wk;
	CHECKF("time_packets_valid", walk(b, len, &wk) > 0, "%s", wk.msg);
	CHECKF("time_span_le_30s", wk.max_span <= 30000000, "span %llu",
	       (unsigned long long)wk.max_span);
	mt_reader *r = reopen(fd);
	mt_event ev;
	int k = 0, exact = r != NULL;
	uint64_t last = dt[n - 1];
	while (exact && mt_reader_next(r, &ev) == 1) {
		uint64_t want = k < n ? dt[k] : last; /* the collect and the last alloc: clamped */
		exact &= ev.time_us - START == want;
		k++;
	}
	CHECKF("time_wrap_exact", exact && k == n + 2, "%d events, event %d at %llu", k, k - 1,
	       (unsigned long long)(ev.time_us - START));
	if (r) mt_reader_close(r);
	free(b);
	close(fd);
}

/* One write() per packet: a SOCK_SEQPACKET socket keeps write boundaries. */
struct drain { int fd, msgs, bad, max; size_t total; };
static void *drain_thread(void *arg)
{
	struct drain *d = arg;
	static uint8_t buf[2 * MT_MAX_PACKET];
	ssize_t n;
	while ((n = recv(d->fd, buf, sizeof buf, 0)) > 0) {
		d->msgs++;
		d->total += (size_t)n;
		if (n > d->max) d->max = (int)n;
		if (n < MT_HEADER_SIZE_V2 || mt_get_u32(buf) != MT_MAGIC ||
		    mt_get_u32(buf + MT_H_PACKET_SIZE) != (uint64_t)n * 8)
			d->bad++;
	}
	return NULL;
}

static void test_one_write_per_packet(void)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) < 0) {
		printf("FAIL one_write_per_packet: socketpair: %s\n", strerror(errno));
		check_failures++;
		return;
	}
	struct drain d = {.fd = sv[1]};
	pthread_t th;
	pthread_create(&th, NULL, drain_thread, &d);
	mt_writer *w = mt_writer_open(sv[0], &info, locations, NULL);
	uint64_t bt[2000];
	int ok = w != NULL;
	for (int i = 0; i < 3000 && ok; i++) {
		for (int j = 0; j < 40; j++) bt[j] = 10 + (i * 41 + j) % 3000; /* many misses */
		ok &= mt_writer_alloc(w, START + i, 100, 1, 1, bt, 40) == i;
	}
	/* Large events without misses: shuffled stacks of 400 cached codes, about 800 bytes of
	 * hits each, so packets fill up by size (the 4196-byte room rule), not by locations. */
	unsigned seed = 7;
	for (int i = 0; i < 300 && ok; i++) {
		for (int j = 0; j < 400; j++) bt[j] = 100000 + j;
		for (int j = 399; j > 0 && i > 0; j--) {
			seed = seed * 1103515245 + 12345;
			int k = (int)((seed >> 8) % (unsigned)(j + 1));
			uint64_t tmp = bt[j];
			bt[j] = bt[k];
			bt[k] = tmp;
		}
		ok &= mt_writer_alloc(w, START + 4000, 100, 1, 1, bt, 400) >= 0;
	}
	/* Huge backtraces too (truncated at 4 KiB of codewords each). */
	for (int i = 0; i < 20 && ok; i++) {
		for (int j = 0; j < 2000; j++) bt[j] = 200000 + i * 2000 + j;
		ok &= mt_writer_alloc(w, START + 5000, 100, 1, 1, bt, 2000) >= 0;
	}
	uint64_t written = w ? mt_writer_bytes_written(w) : 0;
	ok &= mt_writer_close(w) == 0;
	close(sv[0]);
	pthread_join(th, NULL);
	close(sv[1]);
	CHECK("one_write_written", ok);
	CHECKF("one_write_per_packet", d.msgs > 10 && d.bad == 0,
	       "%d writes, %d not a whole packet", d.msgs, d.bad);
	CHECKF("one_write_max_32k", d.max <= MT_MAX_PACKET && d.max > 28000, "largest %d", d.max);
	CHECK("one_write_total", d.total >= written);
}

/* G28: after a truncated backtrace the next common prefix counts only encoded frames. */
static void test_truthful_prefix(void)
{
	static uint64_t bt[1000];
	for (int i = 0; i < 1000; i++) bt[i] = 300000 + i;
	int fd = memfd();
	mt_writer *w = mt_writer_open(fd, &info, locations, NULL);
	int ok = mt_writer_alloc(w, START, 10, 1, 1, bt, 1000) == 0;
	ok &= mt_writer_alloc(w, START, 10, 1, 1, bt, 1000) == 1;
	bt[0] = 123; /* nothing in common */
	ok &= mt_writer_alloc(w, START, 10, 1, 1, bt, 1) == 2;
	ok &= mt_writer_close(w) == 0;
	mt_reader *r = reopen(fd);
	mt_event e1 = {0}, e2 = {0};
	size_t len1 = 0;
	int okr = r && mt_reader_next(r, &e1) == 1;
	len1 = e1.backtrace_len;
	okr = okr && mt_reader_next(r, &e2) == 1;
	CHECK("prefix_write", ok && okr);
	CHECKF("prefix_first_truncated", len1 == 409, "%zu frames", len1);
	int prefix_ok = e2.common_prefix <= len1 && e2.backtrace_len > len1 &&
			e2.backtrace_len <= 1000;
	for (size_t i = 0; prefix_ok && i < e2.backtrace_len; i++)
		prefix_ok = e2.backtrace[i] == 300000 + i;
	CHECKF("prefix_truthful_after_truncation", prefix_ok && e2.common_prefix == len1,
	       "prefix %zu, %zu frames", e2.common_prefix, e2.backtrace_len);
	mt_event e3;
	CHECK("prefix_reset", r && mt_reader_next(r, &e3) == 1 && e3.common_prefix == 0 &&
				      e3.backtrace_len == 1 && e3.backtrace[0] == 123);
	if (r) mt_reader_close(r);
	close(fd);
}

static void test_locations(void)
{
	int fd = memfd();
	mt_writer *w = mt_writer_open(fd, &info, locations, NULL);
	uint64_t bt[3] = {900001, 777, 5};
	int ok = mt_writer_alloc(w, START, 10, 1, 0, bt, 3) == 0;
	ok &= mt_writer_close(w) == 0;
	mt_reader *r = reopen(fd);
	mt_event ev;
	const mt_location *l = NULL;
	ok = ok && r && mt_reader_next(r, &ev) == 1;
	CHECK("unknown_write", ok);
	CHECK("unknown_over_255_locations",
	      r && mt_reader_lookup(r, 900001, &l) == 1 && !strcmp(l[0].filename, "<unknown>") &&
		      !strcmp(l[0].defname, "??") && l[0].line == 1);
	CHECK("unknown_code_empty_list", r && mt_reader_lookup(r, 777, &l) == 0);
	CHECK("known_code_list", r && mt_reader_lookup(r, 5, &l) == 1 && l[0].line == 5 &&
					 !strcmp(l[0].filename, "file5.c"));
	if (r) mt_reader_close(r);
	close(fd);
}

/* Signals interrupting writes into a small, slowly drained pipe: write() returns EINTR or a
 * short count; the writer must retry/complete so that the stream stays byte-exact. */
static volatile sig_atomic_t alarms;
static void on_alarm(int sig) { alarms++; }
struct slow { int fd; uint8_t *buf; size_t len, cap; };
static void *slow_reader(void *arg)
{
	struct slow *s = arg;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	ssize_t n;
	while (s->len < s->cap && (n = read(s->fd, s->buf + s->len, 1000)) > 0) {
		s->len += (size_t)n;
		usleep(50);
	}
	return NULL;
}

static void write_stream(mt_writer *w)
{
	uint64_t bt[40];
	for (int i = 0; i < 4000; i++) {
		for (int j = 0; j < 40; j++) bt[j] = 10 + (i * 37 + j) % 5000;
		mt_writer_alloc(w, START + i, 3, 1, 1, bt, 40);
		if (i > 10) mt_writer_collect(w, START + i, (uint64_t)i - 10);
	}
}

static void test_interrupted_writes(void)
{
	int p[2];
	if (pipe(p) < 0) return;
	fcntl(p[1], F_SETPIPE_SZ, 4096);
	struct slow s = {.fd = p[0], .cap = 8 << 20};
	s.buf = malloc(s.cap);
	pthread_t th;
	pthread_create(&th, NULL, slow_reader, &s);
	struct sigaction sa = {.sa_handler = on_alarm}; /* no SA_RESTART: writes see EINTR */
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = {{0, 200}, {0, 200}};
	setitimer(ITIMER_REAL, &it, NULL);
	mt_writer *w = mt_writer_open(p[1], &info, locations, NULL);
	write_stream(w);
	int rc = mt_writer_close(w);
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	close(p[1]);
	pthread_join(th, NULL);
	close(p[0]);

	int fd = memfd(); /* the same stream, written without interruptions */
	w = mt_writer_open(fd, &info, locations, NULL);
	write_stream(w);
	mt_writer_close(w);
	size_t len;
	uint8_t *b = slurp(fd, &len);
	CHECKF("interrupted_writes_complete", rc == 0 && s.len == len && !memcmp(s.buf, b, len),
	       "rc %d, %zu bytes through the pipe, %zu expected (%d signals)", rc, s.len, len,
	       (int)alarms);
	printf("# %d signals during the writes\n", (int)alarms);
	free(b);
	free(s.buf);
	close(fd);
}

/* Trace-info strings too long for packet 0 are cut so that it fits in 32 KiB (5.1). */
static void test_long_info(void)
{
	static char name[40000];
	memset(name, 'n', sizeof name - 1);
	mt_trace_info li = info;
	li.executable_name = li.host_name = li.ocaml_runtime_params = li.context = name;
	int fd = memfd();
	mt_writer *w = mt_writer_open(fd, &li, locations, NULL);
	int ok = w && mt_writer_close(w) == 0;
	size_t len;
	uint8_t *b = slurp(fd, &len);
	struct walk wk;
	CHECKF("long_info_fits", ok && walk(b, len, &wk) == 2 && wk.max_size <= MT_MAX_PACKET,
	       "%s", wk.msg);
	mt_reader *r = reopen(fd);
	CHECK("long_info_readable", r && strlen(mt_reader_info(r)->executable_name) > 1000 &&
					    mt_reader_info(r)->pid == PID);
	if (r) mt_reader_close(r);
	free(b);
	close(fd);
}

static void test_errors(void)
{
	/* ENOSPC on packet 0. */
	int fd = open("/dev/full", O_WRONLY);
	errno = 0;
	mt_writer *w = fd >= 0 ? mt_writer_open(fd, &info, locations, NULL) : NULL;
	CHECKF("error_enospc_open", fd >= 0 && !w && errno == ENOSPC, "errno %d", errno);
	if (fd >= 0) close(fd);

	/* The reader goes away: EPIPE on a flush, then every call fails, close reports it. */
	int p[2];
	signal(SIGPIPE, SIG_IGN);
	if (pipe(p) < 0) return;
	w = mt_writer_open(p[1], &info, locations, NULL);
	close(p[0]);
	uint64_t bt[1] = {1};
	int a = mt_writer_alloc(w, START, 1, 1, 0, bt, 1) == 0;
	int f = mt_writer_flush(w, START + 1);
	CHECKF("error_epipe_flush", w && a && f < 0 && strstr(mt_writer_error(w), "write"),
	       "flush %d: %s", f, mt_writer_error(w));
	CHECK("error_sticky", mt_writer_alloc(w, START + 2, 1, 1, 0, bt, 1) < 0 &&
				      mt_writer_collect(w, START + 2, 0) < 0);
	CHECK("error_close_reports", mt_writer_close(w) < 0);
	close(p[1]);

	/* Bad arguments fail the call only. */
	fd = memfd();
	w = mt_writer_open(fd, &info, locations, NULL);
	CHECKF("error_promote_unknown_id", mt_writer_promote(w, START, 0) < 0 &&
						   strstr(mt_writer_error(w), "promote of id 0"),
	       "%s", mt_writer_error(w));
	CHECK("error_bad_source", mt_writer_alloc(w, START, 1, 1, 7, bt, 1) < 0 &&
					  strstr(mt_writer_error(w), "source"));
	CHECK("error_huge_length", mt_writer_alloc(w, START, 1ull << 63, 1, 0, bt, 1) < 0);
	CHECK("error_then_ok", mt_writer_alloc(w, START, 1, 1, 0, bt, 1) == 0 &&
				       mt_writer_collect(w, START, 0) == 0);
	CHECK("error_close_ok", mt_writer_close(w) == 0);
	close(fd);
}

/* Writes the stream to a regular file that runs out of room: the write that fails takes part
 * of a packet first (short write, then ENOSPC or EPERM). The writer must cut that part off: the
 * file ends with the last whole packet and reads cleanly to its end. */
static void check_full_file(const char *tag, int fd)
{
	char name[64];
	mt_writer *w = mt_writer_open(fd, &info, locations, NULL);
	snprintf(name, sizeof name, "%s_open", tag);
	CHECK(name, w != NULL);
	if (!w) return;
	write_stream(w);
	uint64_t written = mt_writer_bytes_written(w);
	snprintf(name, sizeof name, "%s_write_fails", tag);
	CHECKF(name, strstr(mt_writer_error(w), "write to trace failed"), "%s", mt_writer_error(w));
	int rc = mt_writer_close(w);
	snprintf(name, sizeof name, "%s_close_reports", tag);
	CHECK(name, rc < 0);

	size_t len;
	uint8_t *b = slurp(fd, &len);
	struct walk wk;
	int packets = walk(b, len, &wk);
	snprintf(name, sizeof name, "%s_whole_packets", tag);
	CHECKF(name, len > 0 && len == written && packets > 2, "%zu bytes in the file, %llu written, "
	       "%d packets: %s", len, (unsigned long long)written, packets, wk.msg);
	mt_reader *r = reopen(fd);
	mt_event ev;
	int n = 0, next = -1;
	while (r && (next = mt_reader_next(r, &ev)) > 0) n++;
	snprintf(name, sizeof name, "%s_reads_to_the_end", tag);
	CHECKF(name, r && next == 0 && n > 0, "%d events, then %d: %s", n, next,
	       r ? mt_reader_error(r) : "no reader");
	if (r) mt_reader_close(r);
	free(b);
}

static void test_full_disk(void)
{
	/* A 64 KiB tmpfs, mounted in a private mount namespace (needs root). */
	char dir[] = "/tmp/mt-full-disk.XXXXXX";
	int mounted = 0;
	if (mkdtemp(dir)) {
		if (unshare(CLONE_NEWNS) == 0) mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
		mounted = mount("tmpfs", dir, "tmpfs", 0, "size=64k") == 0;
	}
	if (mounted) {
		char path[64];
		snprintf(path, sizeof path, "%s/trace.ctf", dir);
		int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		check_full_file("full_disk_tmpfs", fd);
		close(fd);
		unlink(path); /* again, on an fd opened with O_APPEND */
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_APPEND, 0600);
		check_full_file("full_disk_append", fd);
		close(fd);
		umount2(dir, MNT_DETACH);
	} else if (getenv("CI") && !strcmp(getenv("CI"), "true")) {
		printf("FAIL full_disk_tmpfs: cannot mount a tmpfs (in CI this is a failure): %s\n",
		       strerror(errno));
		check_failures++;
	} else {
		printf("SKIP full_disk_tmpfs: cannot mount a tmpfs (root needed): %s\n", strerror(errno));
	}
	rmdir(dir);

	/* The same without a mount: a memfd sealed against growing refuses to go past 48 KiB. */
	int fd = memfd_create("full", MFD_ALLOW_SEALING);
	int sealed = fd >= 0 && ftruncate(fd, 48 << 10) == 0 && fcntl(fd, F_ADD_SEALS, F_SEAL_GROW) == 0;
	CHECK("full_file_sealed_setup", sealed);
	if (sealed) check_full_file("full_file_sealed", fd);
	if (fd >= 0) close(fd);
}

/* The context rewritten in place at the end (memtraced's drops as of the end of the trace). */
static void test_set_context(void)
{
	int fd = memfd();
	mt_trace_info ci = info;
	ci.context = "tracer x; drops: 0       ";
	mt_writer *w = mt_writer_open(fd, &ci, locations, NULL);
	uint64_t bt[2] = {1, 2};
	mt_writer_alloc(w, START + 10, 4, 1, MT_SOURCE_EXTERNAL, bt, 2);
	CHECK("set_context_same_length", mt_writer_set_context(w, "tracer x; drops: 1234    ") == 0);
	errno = 0;
	CHECK("set_context_other_length_refused",
	      mt_writer_set_context(w, "tracer x; drops: 12345678901") < 0 && errno == EINVAL);
	mt_writer_alloc(w, START + 20, 4, 1, MT_SOURCE_EXTERNAL, bt, 2);
	CHECK("set_context_close", mt_writer_close(w) == 0);
	mt_reader *r = reopen(fd);
	const mt_trace_info *ri = r ? mt_reader_info(r) : NULL;
	uint64_t d = 0;
	CHECKF("set_context_read_back", ri && !strcmp(ri->context, "tracer x; drops: 1234    ") &&
	       mt_context_drops(ri->context, &d) == 1 && d == 1234, "context '%s'",
	       ri ? ri->context : "?");
	mt_event ev;
	int n = 0, rc;
	while (r && (rc = mt_reader_next(r, &ev)) > 0) n += ev.type == MT_EV_ALLOC;
	CHECKF("set_context_events_intact", r && n == 2, "%d allocations read", n);
	if (r) mt_reader_close(r);
	close(fd);
	/* a pipe cannot be rewritten: said, not silently done */
	int p[2];
	if (pipe(p) == 0) {
		fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
		w = mt_writer_open(p[1], &ci, locations, NULL);
		errno = 0;
		CHECK("set_context_pipe_espipe", w && mt_writer_set_context(w, ci.context) < 0 &&
		      errno == ESPIPE);
		mt_writer_close(w);
		close(p[0]);
		close(p[1]);
	}
	CHECK("context_drops_absent", mt_context_drops("no such field", &d) == 0 &&
	      mt_context_drops("drops: x", &d) == 0 && mt_context_drops(NULL, &d) == 0);
}

int main(void)
{
	test_empty_trace();
	test_roundtrip();
	test_times();
	test_one_write_per_packet();
	test_truthful_prefix();
	test_locations();
	test_long_info();
	test_interrupted_writes();
	test_errors();
	test_full_disk();
	test_set_context();
	return CHECK_DONE();
}
