/* The reader on format v3 traces (the newest memtrace, trace.ml): decoder state per domain
 * (backtrace cache, MTF tables, previous backtrace, last time), allocation ids counted per
 * packet from alloc_id_begin, collects that refer forward, the verifier checked against the
 * packet's domain and only on packets that are decoded; damaged v3 traces; the v3
 * reference traces decode to the same events as the v2 traces they were written from. */
#include "check.h"
#include "trace_build.h"

struct v3opts {
	uint16_t pkt4_version;   /* 0 = 3 */
	int64_t pkt4_aid_b;      /* 0 = 2 */
	uint64_t pkt3_pid;       /* 0 = PID */
	int64_t promote_delta;   /* packet 3's promote */
	int64_t collect_delta;   /* packet 4's collect; the default refers forward to 10000 */
	int pkt4_verify_wrong;
};

/* Packet 0 (domain 0); packet 1: locations of 0x100 and 0x300 (domain 0); packet 2: two
 * allocations of domain 0; packet 3: domain 1, earlier times, its own MTF tables (0x600
 * refers to its slot 0, c.ml C.h), an allocation 10000 whose literal goes to bucket 5, a
 * promote; packet 4: domain 0 again, a hit on bucket 5 (domain 0's 0x100), a verifier that
 * holds only for domain 0's cache, a collect of 10000. */
static struct bytes v3_trace(struct v3opts o)
{
	struct bytes t = { 0 }, c = { 0 };
	info_packet_v(&t, 3, 0);

	ev_header(&c, MT_EV_ID_LOCATION, T0);
	put64(&c, 0x100), put8(&c, 1), put_loc(&c, 3, 31, 31, "a.ml", "A.f");
	ev_header(&c, MT_EV_ID_LOCATION, T0);
	put64(&c, 0x300), put8(&c, 1), put_loc(&c, 7, 31, 31, "b.ml", "B.g");
	packet(&t, (struct hdr){ .tb = T0, .te = T0, .version = 3 }, &c);

	c.len = 0;
	ev_header(&c, MT_EV_ID_ALLOC, T0 + 10);
	putvint(&c, 300), putvint(&c, 2), put8(&c, MT_SOURCE_MAJOR), putvint(&c, 0), put16(&c, 2);
	put16(&c, 5 << 2 | 3), put64(&c, 0x100);
	put16(&c, 9 << 2 | 3), put64(&c, 0x300);
	ev_header(&c, MT_EV_ID_SHORT_ALLOC_BASE + 3, T0 + 20);
	putvint(&c, 2), put8(&c, 0);
	packet(&t, (struct hdr){ .tb = T0 + 10, .te = T0 + 20, .aid_b = 0, .aid_e = 2, .version = 3 }, &c);

	c.len = 0;
	ev_header(&c, MT_EV_ID_LOCATION, T0 + 5);
	put64(&c, 0x500), put8(&c, 1), put_loc(&c, 11, 31, 31, "c.ml", "C.h");
	ev_header(&c, MT_EV_ID_LOCATION, T0 + 5);
	put64(&c, 0x600), put8(&c, 1), put_loc(&c, 12, 0, 0, NULL, NULL);
	ev_header(&c, MT_EV_ID_SHORT_ALLOC_BASE + 1, T0 + 5);
	putvint(&c, 0), put8(&c, 1), put16(&c, 5 << 2 | 3), put64(&c, 0x500);
	ev_header(&c, MT_EV_ID_PROMOTE, T0 + 5);
	putvint(&c, o.promote_delta);
	packet(&t, (struct hdr){ .tb = T0 + 5, .te = T0 + 5, .aid_b = 10000, .aid_e = 10001,
				 .version = 3, .domain = 1, .pid = o.pkt3_pid, .verify = !!o.pkt3_pid,
				 .verify_ix = 77, .verify_val = 0xBAD }, &c);

	c.len = 0;
	int64_t aid_b = o.pkt4_aid_b ? o.pkt4_aid_b : 2;
	ev_header(&c, MT_EV_ID_SHORT_ALLOC_BASE + 2, T0 + 30);
	putvint(&c, 1), put8(&c, 1), put16(&c, 5 << 2 | 0);
	ev_header(&c, MT_EV_ID_COLLECT, T0 + 40);
	putvint(&c, o.collect_delta ? o.collect_delta : -9998);
	packet(&t, (struct hdr){ .tb = T0 + 30, .te = T0 + 40, .aid_b = aid_b, .aid_e = aid_b + 1,
				 .version = o.pkt4_version ? o.pkt4_version : 3, .verify = 1,
				 .verify_ix = 5, .verify_pred = 9,
				 .verify_val = o.pkt4_verify_wrong ? 0x500 : 0x100 }, &c);
	free(c.p);
	return t;
}

struct expect {
	enum mt_event_type type;
	uint64_t id, time;
	uint16_t domain;
	size_t bt_len;
	uint64_t bt0, bt1;
};

static void test_domains(void)
{
	struct bytes t = v3_trace((struct v3opts){ 0 });
	int fd = mem_fd(t.p, t.len), warnings = 0;
	char *err = NULL;
	mt_reader *r = mt_reader_open(fd, count_warning, &warnings, &err);
	CHECKF("v3-open", r && !err, "%s", err ? err : "no reader");
	if (!r) return;
	const mt_trace_info *info = mt_reader_info(r);
	CHECK("v3-info", info->format_version == 3 && info->initial_domain == 0 &&
				 info->pid == PID && !strcmp(info->context, "ctx"));
	static const struct expect want[] = {
		{ MT_EV_ALLOC, 0, T0 + 10, 0, 2, 0x100, 0x300 },
		{ MT_EV_ALLOC, 1, T0 + 20, 0, 2, 0x100, 0x300 },
		{ MT_EV_ALLOC, 10000, T0 + 5, 1, 1, 0x500, 0 },  /* own cache, own prefix */
		{ MT_EV_PROMOTE, 10000, T0 + 5, 1, 0, 0, 0 },
		{ MT_EV_ALLOC, 2, T0 + 30, 0, 2, 0x100, 0x100 }, /* bucket 5 of domain 0 */
		{ MT_EV_COLLECT, 10000, T0 + 40, 0, 0, 0, 0 },   /* refers forward */
	};
	mt_event ev;
	size_t i = 0, prev_len = 0;
	uint64_t prev[2];
	int rc, bad = 0, untruthful = 0;
	while ((rc = mt_reader_next(r, &ev)) > 0 && i < 6) {
		const struct expect *w = &want[i++];
		/* common_prefix is relative to the previous allocation returned (the file's is
		 * relative to the domain's previous one). */
		if (ev.type == MT_EV_ALLOC) {
			for (size_t k = 0; k < ev.common_prefix && k < ev.backtrace_len; k++)
				if (k >= prev_len || ev.backtrace[k] != prev[k]) untruthful++;
			prev_len = ev.backtrace_len < 2 ? ev.backtrace_len : 2;
			memcpy(prev, ev.backtrace, prev_len * sizeof(prev[0]));
		}
		int ok = ev.type == w->type && ev.id == w->id && ev.time_us == w->time &&
			 ev.domain == w->domain;
		if (ok && w->type == MT_EV_ALLOC)
			ok = ev.backtrace_len == w->bt_len && ev.backtrace[0] == w->bt0 &&
			     (w->bt_len < 2 || ev.backtrace[1] == w->bt1);
		if (!ok && bad++ < 2)
			printf("  event %zu: type %d id %llu time +%llu dom %u bt %zu\n", i - 1,
			       ev.type, (unsigned long long)ev.id,
			       (unsigned long long)(ev.time_us - T0), ev.domain, ev.backtrace_len);
	}
	CHECKF("v3-common-prefix-across-domains", untruthful == 0, "%d frames", untruthful);
	CHECKF("v3-events-per-domain", bad == 0 && i == 6 && rc == 0 && warnings == 0,
	       "%d wrong, %zu read, rc %d (%s), %d warnings", bad, i, rc, mt_reader_error(r), warnings);
	const mt_location *locs;
	CHECK("v3-mtf-per-domain", mt_reader_lookup(r, 0x600, &locs) == 1 &&
					   !strcmp(locs[0].filename, "c.ml") &&
					   !strcmp(locs[0].defname, "C.h") && locs[0].line == 12);
	mt_reader_close(r);
	close(fd);

	/* Truncation at every byte and random flips: always a verdict, never a crash. */
	int misjudged = 0;
	for (size_t cut = 0; cut < t.len; cut++) {
		struct outcome o = read_all(t.p, cut);
		if (!(o.rc == 0 || (o.rc < 0 && strstr(o.msg, "packet ")))) misjudged++;
	}
	CHECKF("v3-truncated-every-byte", misjudged == 0, "%d cuts without a verdict", misjudged);
	struct outcome o;
	srand(4321);
	misjudged = 0;
	for (int k = 0; k < 3000; k++) {
		uint8_t *copy = malloc(t.len);
		memcpy(copy, t.p, t.len);
		for (int f = 1 + rand() % 4; f > 0; f--) copy[rand() % t.len] ^= (uint8_t)(1 + rand() % 255);
		o = read_all(copy, t.len);
		if (!(o.rc == 0 || (o.rc < 0 && o.msg[0]))) misjudged++;
		free(copy);
	}
	CHECKF("v3-random-flips", misjudged == 0, "%d damaged traces without a verdict", misjudged);
	free(t.p);
}

static struct outcome read_v3(struct v3opts opts)
{
	struct bytes t = v3_trace(opts);
	struct outcome o = read_all(t.p, t.len);
	free(t.p);
	return o;
}

static void test_damage(void)
{
	struct outcome o = read_v3((struct v3opts){ .pkt4_version = 4 });
	CHECKF("v3-version4", o.rc < 0 && has(&o, "trace format v004, but expected v003 (packet 4"),
	       "'%s'", o.msg);
	o = read_v3((struct v3opts){ .pkt4_version = 2 });
	CHECKF("v3-v2-packet-is-domain-0", o.rc == 0 && o.events == 6, "rc %d, %d events: %s",
	       o.rc, o.events, o.msg);
	o = read_v3((struct v3opts){ .pkt4_verify_wrong = 1 });
	CHECKF("v3-verifier-of-the-domain", o.rc < 0 && has(&o, "cache verification failed (packet 4") &&
						   has(&o, "in this packet's domain"), "'%s'", o.msg);
	/* The newest reader checks the verifier only on packets it decodes, and skips no packet
	 * for its ids or times. */
	o = read_v3((struct v3opts){ .pkt3_pid = 99 });
	CHECKF("v3-wrong-pid-skipped-unverified", o.rc == 0 && o.warnings == 1 && o.events == 4,
	       "rc %d, %d warnings, %d events: %s", o.rc, o.warnings, o.events, o.msg);
	o = read_v3((struct v3opts){ .pkt4_aid_b = 50 });
	CHECKF("v3-ids-from-alloc-id-begin", o.rc == 0 && o.warnings == 0 && o.events == 6,
	       "rc %d, %d warnings: %s", o.rc, o.warnings, o.msg);
	o = read_v3((struct v3opts){ .promote_delta = -1 });
	CHECKF("v3-promote-negative-delta", o.rc < 0 && has(&o, "promote id sync (packet 3"), "'%s'", o.msg);
	o = read_v3((struct v3opts){ .collect_delta = 5 });
	CHECKF("v3-collect-before-id-0", o.rc < 0 && has(&o, "collect id sync (packet 4") &&
						 has(&o, "gives no valid id"), "'%s'", o.msg);
	o = read_v3((struct v3opts){ .pkt4_aid_b = -3 });
	CHECKF("v3-negative-alloc-id", o.rc < 0 && has(&o, "Monotone alloc IDs") == 0 &&
					       has(&o, "negative alloc id (packet 4"), "'%s'", o.msg);

	/* A header cut inside the domain field names it. */
	struct bytes t = { 0 }, c = { 0 };
	info_packet_v(&t, 3, 0);
	size_t p1 = t.len;
	packet(&t, (struct hdr){ .tb = T0, .te = T0, .version = 3 }, &c);
	o = read_all(t.p, p1 + 39);
	CHECKF("v3-header-cut-in-domain", o.rc < 0 && has(&o, "(domain)"), "'%s'", o.msg);
	/* Packet 0's domain is the initial domain. */
	t.len = 0;
	info_packet_v(&t, 3, 7);
	int fd = mem_fd(t.p, t.len);
	mt_reader *r = mt_reader_open(fd, NULL, NULL, NULL);
	CHECK("v3-initial-domain", r && mt_reader_info(r)->initial_domain == 7 &&
					   mt_reader_info(r)->format_version == 3);
	mt_reader_close(r);
	close(fd);
	/* Domains cost memory: a damaged trace cannot ask for more than the limit. */
	t.len = 0;
	info_packet_v(&t, 3, 0);
	for (unsigned d = 1; d <= 1100; d++)
		packet(&t, (struct hdr){ .tb = T0, .te = T0, .version = 3, .domain = (uint16_t)d }, &c);
	o = read_all(t.p, t.len);
	CHECKF("v3-too-many-domains", o.rc < 0 && has(&o, "too many domains (packet 1025"), "'%s'", o.msg);
	free(t.p);
}

static int load(const char *path, struct bytes *b)
{
	FILE *f = fopen(path, "rb");
	if (!f) return -1;
	char chunk[65536];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) put(b, chunk, n);
	fclose(f);
	return 0;
}

/* Every event of a v3 reference trace equals the event of the v2 trace it was written from
 * (and is of domain 0). */
static void test_reference(void)
{
	static const char *pairs[][2] = {
		{ "v3/v3-lists-r1e-3", "v2-lists-r1e-3" },
		{ "v3/v3-deep-r1e-3", "v2-deep-r1e-3" },
		{ "v3/v3-upstream-ocamlopt", "upstream-ocamlopt-v2" },
	};
	for (size_t i = 0; i < 3; i++) {
		char p3[256], p2[256], name[128];
		snprintf(p3, sizeof(p3), "tests/data/memtrace/%s.ctf", pairs[i][0]);
		snprintf(p2, sizeof(p2), "tests/data/memtrace/%s.ctf", pairs[i][1]);
		snprintf(name, sizeof(name), "v3-reference-same-events-%s", pairs[i][1]);
		struct bytes b3 = { 0 }, b2 = { 0 };
		if (load(p3, &b3) < 0 || load(p2, &b2) < 0) {
			printf("FAIL %s: cannot open %s or %s (run from the top directory)\n", name, p3, p2);
			check_failures++;
			continue;
		}
		int fd3 = mem_fd(b3.p, b3.len), fd2 = mem_fd(b2.p, b2.len);
		mt_reader *r3 = mt_reader_open(fd3, NULL, NULL, NULL);
		mt_reader *r2 = mt_reader_open(fd2, NULL, NULL, NULL);
		long n = 0, diff = -1;
		int rc3 = -1, rc2 = -1;
		if (r3 && r2) {
			mt_event e3, e2;
			for (;;) {
				rc3 = mt_reader_next(r3, &e3);
				rc2 = mt_reader_next(r2, &e2);
				if (rc3 <= 0 || rc2 <= 0) break;
				int same = e3.type == e2.type && e3.id == e2.id && e3.time_us == e2.time_us &&
					   e3.domain == 0 && e3.length == e2.length &&
					   e3.nsamples == e2.nsamples && e3.source == e2.source &&
					   e3.backtrace_len == e2.backtrace_len &&
					   (!e3.backtrace_len ||
					    !memcmp(e3.backtrace, e2.backtrace, e3.backtrace_len * 8));
				if (!same && diff < 0) diff = n;
				n++;
			}
		}
		CHECKF(name, r3 && r2 && rc3 == 0 && rc2 == 0 && diff < 0 && n > 1000,
		       "rc %d/%d, %ld events, first difference at %ld", rc3, rc2, n, diff);
		mt_reader_close(r3);
		mt_reader_close(r2);
		close(fd3);
		close(fd2);
		free(b3.p);
		free(b2.p);
	}
}

/* test_reader_v3 --write FILE: writes the two-domain trace of test_domains (the v3 seed of
 * the fuzzer's corpus, tests/fuzz/seeds/v3-two-domains.ctf). */
int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--write")) {
		struct bytes t = v3_trace((struct v3opts){ 0 });
		FILE *f = fopen(argv[2], "wb");
		int ok = f && fwrite(t.p, 1, t.len, f) == t.len;
		if (f && fclose(f) != 0) ok = 0;
		free(t.p);
		return ok ? 0 : 1;
	}
	test_domains();
	test_damage();
	test_reference();
	return CHECK_DONE();
}
