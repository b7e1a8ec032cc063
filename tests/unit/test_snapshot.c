/* Unit tests of the heap-snapshot writer (user/daemon/core/output/snapshot.c): a trie built by hand, a fake
 * locations callback, snapshots read back with the format library's reader. */
#include "check.h"
#include "memtrace.h"
#include "output/snapshot.h"
#include "model/trie.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PID 4242
#define RATE 1e-3

static char base[64];

/* Fake symbolizer: code c is function "f<c>"; codes divisible by 3 also have an inlined
 * callee "inl<c>" (outermost first). Code 99 has no location at all. */
static int fake_locs(void *ctx, uint64_t code, const mt_location **locs)
{
	static char names[2][32];
	static mt_location l[2];
	(void)ctx;
	if (code == 99) return -1;
	snprintf(names[0], sizeof names[0], "f%llu", (unsigned long long)code);
	snprintf(names[1], sizeof names[1], "inl%llu", (unsigned long long)code);
	l[0] = (mt_location){.line = (uint32_t)code, .filename = "a.c", .defname = names[0]};
	l[1] = (mt_location){.line = 1, .filename = "b.h", .defname = names[1]};
	*locs = l;
	return code % 3 == 0 ? 2 : 1;
}

static void path_in(char *buf, size_t n, const char *dir, const char *name)
{
	snprintf(buf, n, "%s/%s", dir, name);
}

static int exists_nofollow(const char *p)
{
	struct stat st;
	return lstat(p, &st) == 0;
}

static char *read_all(const char *p)
{
	FILE *f = fopen(p, "r");
	if (!f) return NULL;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	size_t got;
	while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
		n += got;
		if (cap - n < 2) buf = realloc(buf, cap *= 2);
	}
	fclose(f);
	if (buf) buf[n] = 0;
	return buf;
}

/* Entries of dir, '.' and '..' excluded. */
static int count_entries(const char *dir)
{
	char cmd[256];
	snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
	FILE *p = popen(cmd, "r");
	int n = -1;
	if (p) {
		if (fscanf(p, "%d", &n) != 1) n = -1;
		pclose(p);
	}
	return n;
}

static void run(const char *cmd)
{
	if (system(cmd) != 0) fprintf(stderr, "command failed: %s\n", cmd);
}

/* ---- the expected content ---------------------------------------------------------- */

struct expect {
	uint64_t key, time_us, bytes, nsamples;
	const uint64_t *stack;
	size_t depth;
	int freed;
};

static const uint64_t st_a[] = {1, 2, 4}, st_b[] = {1, 2, 5}, st_c[] = {1, 7},
		      st_d[] = {6}, st_e[] = {1, 99};
static struct expect blocks[] = {
	{10, 5000300, 100, 2, st_a, 3, 0},
	{11, 5000100, 8, 1, st_b, 3, 0},
	{12, 5000200, 17, 3, st_a, 3, 1}, /* freed: not in the snapshot */
	{13, 5000100, 4096, 5, st_c, 2, 0},
	{14, 5000900, 1, 1, st_d, 1, 0},
	{15, 5000050, 64, 4, st_e, 2, 0},
	{16, 5000700, 0, 1, NULL, 0, 0}, /* no stack: the root context */
	{17, 0, 24, 1, st_b, 3, 0},      /* time never set: written at now */
};
#define NBLOCKS (sizeof blocks / sizeof blocks[0])
#define NOW_US 6000000ULL

static struct trie *make_trie(void)
{
	struct trie *t = trie_new(RATE);
	for (size_t i = 0; i < NBLOCKS; i++) {
		uint32_t node = trie_intern(t, blocks[i].stack, blocks[i].depth);
		trie_block_alloc(t, blocks[i].key, 100 + i, node, blocks[i].bytes, blocks[i].nsamples);
		if (blocks[i].time_us) trie_block_set_time(t, blocks[i].key, blocks[i].time_us);
	}
	for (size_t i = 0; i < NBLOCKS; i++)
		if (blocks[i].freed) trie_block_free(t, blocks[i].key, NULL);
	return t;
}

static int cmp_expect(const void *a, const void *b)
{
	const struct expect *x = *(const struct expect *const *)a, *y = *(const struct expect *const *)b;
	uint64_t tx = x->time_us ? x->time_us : NOW_US, ty = y->time_us ? y->time_us : NOW_US;
	if (tx != ty) return tx < ty ? -1 : 1;
	return x->key < y->key ? -1 : x->key > y->key; /* ids follow the keys here */
}

/* Reads a snapshot trace back and compares it with the live blocks of `blocks`. */
static void check_trace(const char *path)
{
	int fd = open(path, O_RDONLY);
	char *err = NULL;
	mt_reader *r = fd >= 0 ? mt_reader_open(fd, NULL, NULL, &err) : NULL;
	CHECKF("snapshot_trace_readable", r != NULL, "%s: %s", path, err ? err : strerror(errno));
	free(err);
	if (!r) {
		if (fd >= 0) close(fd);
		return;
	}
	const struct expect *exp[NBLOCKS];
	size_t n = 0;
	for (size_t i = 0; i < NBLOCKS; i++)
		if (!blocks[i].freed) exp[n++] = &blocks[i];
	qsort(exp, n, sizeof *exp, cmp_expect);

	const mt_trace_info *info = mt_reader_info(r);
	CHECKF("snapshot_trace_info", info->pid == PID && info->sample_rate == RATE &&
					      info->start_time_us == 5000050 &&
					      strstr(info->context, "heap snapshot") != NULL,
	       "pid %llu rate %g start %llu context '%s'", (unsigned long long)info->pid,
	       info->sample_rate, (unsigned long long)info->start_time_us, info->context);

	mt_event ev;
	size_t got = 0, bad = 0, others = 0, unordered = 0;
	uint64_t last = 0;
	char why[256] = "";
	int rc;
	while ((rc = mt_reader_next(r, &ev)) == 1) {
		if (ev.type != MT_EV_ALLOC) {
			others++;
			continue;
		}
		if (ev.time_us < last) unordered++;
		last = ev.time_us;
		if (got < n) {
			const struct expect *x = exp[got];
			uint64_t t = x->time_us ? x->time_us : NOW_US;
			int ok = ev.time_us == t && ev.length == (x->bytes + 7) / 8 &&
				 ev.nsamples == x->nsamples && ev.source == MT_SOURCE_EXTERNAL &&
				 ev.backtrace_len == x->depth;
			for (size_t k = 0; ok && k < x->depth; k++) ok = ev.backtrace[k] == x->stack[k];
			if (!ok) {
				bad++;
				snprintf(why, sizeof why,
					 "event %zu: time %llu len %llu ns %llu depth %zu, want key %llu",
					 got, (unsigned long long)ev.time_us, (unsigned long long)ev.length,
					 (unsigned long long)ev.nsamples, ev.backtrace_len,
					 (unsigned long long)x->key);
			}
		}
		got++;
	}
	CHECKF("snapshot_trace_reads_to_end", rc == 0, "%s", mt_reader_error(r));
	CHECKF("snapshot_one_alloc_per_live_block", got == n && others == 0,
	       "%zu allocs (want %zu), %zu other events", got, n, others);
	CHECKF("snapshot_alloc_fields", bad == 0, "%s", why);
	CHECK("snapshot_time_order", unordered == 0);
	const mt_location *l;
	int nl = mt_reader_lookup(r, 6, &l);
	CHECK("snapshot_trace_locations", nl == 2 && !strcmp(l[0].defname, "f6") &&
						  !strcmp(l[1].defname, "inl6"));
	mt_reader_close(r);
	close(fd);
}

static uint64_t expected_live_total(const struct trie *t)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < trie_node_count(t); i++)
		sum += (uint64_t)llround((double)trie_node(t, (uint32_t)i)->c.live_nsamples / RATE * 8);
	return sum;
}

static void check_folded(const char *path, const struct trie *t)
{
	char *text = read_all(path);
	CHECK("folded_readable", text != NULL);
	if (!text) return;
	uint64_t sum = 0;
	int lines = 0, malformed = 0, seen_a = 0, seen_inl = 0, seen_noloc = 0, seen_root = 0;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		lines++;
		char *sp = strrchr(line, ' ');
		if (!sp || sp == line) {
			malformed++;
			continue;
		}
		*sp = 0;
		char *end;
		unsigned long long v = strtoull(sp + 1, &end, 10);
		if (*end) malformed++;
		sum += v;
		/* block 10 alone at st_a: 2 samples / 1e-3 * 8 = 16000 bytes */
		if (!strcmp(line, "f1;f2;f4") && v == 16000) seen_a = 1;
		if (!strcmp(line, "f6;inl6") && v == 8000) seen_inl = 1;
		if (!strcmp(line, "f1;<noloc 0x63>") && v == 32000) seen_noloc = 1;
		if (!strcmp(line, "<no stack>") && v == 8000) seen_root = 1;
	}
	uint64_t want = expected_live_total(t);
	CHECKF("folded_sum_equals_live_estimate", malformed == 0 && sum == want,
	       "%d malformed lines, sum %llu, want %llu", malformed, (unsigned long long)sum,
	       (unsigned long long)want);
	CHECK("folded_stack_outermost_first", seen_a);
	CHECK("folded_inlined_frames_separate", seen_inl);
	CHECK("folded_unknown_code_and_root", seen_noloc && seen_root);
	CHECKF("folded_one_line_per_live_context", lines == 6, "%d lines", lines);
	free(text);
}

/* The project's own reader tool sees the same live heap in the .ctf as the .folded says. */
static void check_with_flamegraph(const char *ctf, const struct trie *t)
{
	const char *top = getenv("TOP"), *build = getenv("BUILD");
	char tool[512], cmd[1024];
	snprintf(tool, sizeof tool, "%s/%s/bin/memtrace-flamegraph", top ? top : ".",
		 build ? build : "build");
	if (access(tool, X_OK) != 0) {
		printf("SKIP snapshot_flamegraph_live_matches: %s not built\n", tool);
		return;
	}
	snprintf(cmd, sizeof cmd, "'%s' --live --folded '%s'", tool, ctf);
	FILE *p = popen(cmd, "r");
	uint64_t sum = 0;
	char line[4096];
	while (p && fgets(line, sizeof line, p)) {
		char *sp = strrchr(line, ' ');
		if (sp) sum += strtoull(sp + 1, NULL, 10);
	}
	int rc = p ? pclose(p) : -1;
	/* memtrace-flamegraph leaves out blocks with an empty backtrace (our "<no stack>" line) */
	uint64_t want = expected_live_total(t) -
			(uint64_t)llround((double)trie_node(t, TRIE_ROOT)->c.live_nsamples / RATE * 8);
	CHECKF("snapshot_flamegraph_live_matches", rc == 0 && sum == want && want > 0,
	       "memtrace-flamegraph --live: status %d, %llu bytes, want %llu", rc,
	       (unsigned long long)sum, (unsigned long long)want);
}

/* ---- tests --------------------------------------------------------------------------- */

static void test_basic(const struct trie *t)
{
	char dir[128], p[256];
	snprintf(dir, sizeof dir, "%s/basic", base);
	mkdir(dir, 0700);
	char err[512] = "";
	mode_t old = umask(077); /* the files get their mode whatever the umask */
	struct snapshotter *s = snapshot_open(&(struct snapshot_opts){.dir = dir}, PID, err, sizeof err);
	CHECKF("snapshot_open", s != NULL, "%s", err);
	if (!s) return;
	mt_trace_info info = {.executable_name = "/bin/demo", .host_name = "h", .context = "memtraced"};
	int rc = snapshot_write(s, t, &info, fake_locs, NULL, NOW_US, err, sizeof err);
	CHECKF("snapshot_write_0", rc == 0, "%d %s", rc, err);
	path_in(p, sizeof p, dir, "memtrace-4242-0.ctf");
	struct stat st;
	CHECKF("snapshot_ctf_mode_0600", stat(p, &st) == 0 && S_ISREG(st.st_mode) &&
						  (st.st_mode & 07777) == 0600,
	       "mode %o", (unsigned)st.st_mode);
	check_trace(p);
	check_with_flamegraph(p, t);
	path_in(p, sizeof p, dir, "memtrace-4242-0.folded");
	CHECKF("snapshot_folded_mode_0600", stat(p, &st) == 0 && (st.st_mode & 07777) == 0600,
	       "mode %o", (unsigned)st.st_mode);
	check_folded(p, t);

	rc = snapshot_write(s, t, &info, fake_locs, NULL, NOW_US + 1, err, sizeof err);
	path_in(p, sizeof p, dir, "memtrace-4242-1.ctf");
	CHECKF("snapshot_seq_increments", rc == 0 && exists_nofollow(p) && snapshot_next_seq(s) == 2 &&
						  snapshot_written(s) == 2 && count_entries(dir) == 4,
	       "rc %d next %llu entries %d: %s", rc, (unsigned long long)snapshot_next_seq(s),
	       count_entries(dir), err);
	snapshot_close(s);

	/* file_mode option (still under umask 077) */
	s = snapshot_open(&(struct snapshot_opts){.dir = dir, .file_mode = 0640}, PID, err, sizeof err);
	CHECKF("snapshot_reopen_continues_seq", s && snapshot_next_seq(s) == 2, "%s", err);
	if (s) {
		rc = snapshot_write(s, t, NULL, fake_locs, NULL, NOW_US, err, sizeof err);
		path_in(p, sizeof p, dir, "memtrace-4242-2.ctf");
		CHECKF("snapshot_file_mode_option", rc == 0 && stat(p, &st) == 0 &&
							    (st.st_mode & 07777) == 0640,
		       "rc %d mode %o %s", rc, (unsigned)st.st_mode, err);
		snapshot_close(s);
	}
	umask(old);

	/* An empty heap: a valid trace with no event, started now. */
	struct trie *empty = trie_new(RATE);
	s = snapshot_open(&(struct snapshot_opts){.dir = dir}, 7, err, sizeof err);
	rc = s ? snapshot_write(s, empty, NULL, fake_locs, NULL, NOW_US, err, sizeof err) : -1;
	path_in(p, sizeof p, dir, "memtrace-7-0.ctf");
	int fd = open(p, O_RDONLY);
	mt_reader *r = fd >= 0 ? mt_reader_open(fd, NULL, NULL, NULL) : NULL;
	mt_event ev;
	CHECKF("snapshot_empty_heap", rc == 0 && r && mt_reader_info(r)->start_time_us == NOW_US &&
					       mt_reader_next(r, &ev) == 0,
	       "rc %d %s", rc, err);
	if (r) mt_reader_close(r);
	if (fd >= 0) close(fd);
	snapshot_close(s);
	trie_free(empty);
}

static void test_keep(const struct trie *t)
{
	char dir[128], p[256], victim[256];
	snprintf(dir, sizeof dir, "%s/keep", base);
	mkdir(dir, 0700);
	char err[512] = "";
	struct snapshotter *s =
		snapshot_open(&(struct snapshot_opts){.dir = dir, .keep = 2}, PID, err, sizeof err);
	CHECKF("keep_open", s != NULL, "%s", err);
	if (!s) return;
	int ok = 1;
	for (int i = 0; i < 2; i++) ok &= snapshot_write(s, t, NULL, fake_locs, NULL, NOW_US, err, sizeof err) == 0;
	/* Plant things that look like ours but are not ours to delete. */
	path_in(victim, sizeof victim, base, "victim");
	FILE *f = fopen(victim, "w");
	if (f) {
		fputs("precious", f);
		fclose(f);
	}
	path_in(p, sizeof p, dir, "memtrace-4242-0.ctf");
	unlink(p);
	ok &= symlink(victim, p) == 0;
	path_in(p, sizeof p, dir, "memtrace-4242-00.ctf"); /* not our exact pattern */
	ok &= (f = fopen(p, "w")) != NULL;
	if (f) fclose(f);
	path_in(p, sizeof p, dir, "memtrace-4243-0.ctf"); /* another pid */
	ok &= (f = fopen(p, "w")) != NULL;
	if (f) fclose(f);
	for (int i = 0; i < 3; i++) ok &= snapshot_write(s, t, NULL, fake_locs, NULL, NOW_US, err, sizeof err) == 0;
	CHECKF("keep_writes", ok, "%s", err);
	int kept = 1, gone = 1;
	const char *want_kept[] = {"memtrace-4242-3.ctf", "memtrace-4242-3.folded", "memtrace-4242-4.ctf",
				   "memtrace-4242-4.folded", "memtrace-4242-00.ctf", "memtrace-4243-0.ctf",
				   "memtrace-4242-0.ctf"};
	const char *want_gone[] = {"memtrace-4242-0.folded", "memtrace-4242-1.ctf", "memtrace-4242-1.folded",
				   "memtrace-4242-2.ctf", "memtrace-4242-2.folded"};
	for (size_t i = 0; i < sizeof want_kept / sizeof *want_kept; i++) {
		path_in(p, sizeof p, dir, want_kept[i]);
		if (!exists_nofollow(p)) kept = 0, fprintf(stderr, "missing %s\n", p);
	}
	for (size_t i = 0; i < sizeof want_gone / sizeof *want_gone; i++) {
		path_in(p, sizeof p, dir, want_gone[i]);
		if (exists_nofollow(p)) gone = 0, fprintf(stderr, "still there %s\n", p);
	}
	CHECK("keep_deletes_oldest_beyond_n", gone && kept);
	char *v = read_all(victim);
	path_in(p, sizeof p, dir, "memtrace-4242-0.ctf");
	struct stat st;
	CHECK("keep_never_touches_symlinks", v && !strcmp(v, "precious") && lstat(p, &st) == 0 &&
						     S_ISLNK(st.st_mode));
	free(v);
	snapshot_close(s);
}

static void test_refusals(const struct trie *t)
{
	char dir[128], link[128], p[256], err[512] = "";
	snprintf(dir, sizeof dir, "%s/real", base);
	snprintf(link, sizeof link, "%s/link", base);
	mkdir(dir, 0700);
	symlink(dir, link);
	struct snapshotter *s = snapshot_open(&(struct snapshot_opts){.dir = link}, PID, err, sizeof err);
	CHECKF("open_refuses_symlink_dir", !s && strstr(err, "symbolic link"), "%s", err);
	snapshot_close(s);
	snprintf(p, sizeof p, "%s/nonexistent", base);
	s = snapshot_open(&(struct snapshot_opts){.dir = p}, PID, err, sizeof err);
	CHECKF("open_refuses_missing_dir", !s && strstr(err, "does not exist"), "%s", err);
	snapshot_close(s);
	/* with create: made, mode 0700; a missing parent is not */
	s = snapshot_open(&(struct snapshot_opts){.dir = p, .create = true}, PID, err, sizeof err);
	struct stat cst;
	CHECKF("open_creates_missing_dir_0700", s && lstat(p, &cst) == 0 && S_ISDIR(cst.st_mode) &&
	       (cst.st_mode & 07777) == 0700, "%s", s ? "" : err);
	snapshot_close(s);
	char deep[4400];
	snprintf(deep, sizeof deep, "%s/no-parent/sub", base);
	s = snapshot_open(&(struct snapshot_opts){.dir = deep, .create = true}, PID, err, sizeof err);
	CHECKF("open_create_needs_the_parent", !s && strstr(err, "does not exist"), "%s", err);
	snapshot_close(s);
	path_in(p, sizeof p, base, "victim");
	s = snapshot_open(&(struct snapshot_opts){.dir = p}, PID, err, sizeof err);
	CHECKF("open_refuses_file", !s && strstr(err, "not a directory"), "%s", err);
	snapshot_close(s);

	/* A file with the target name is left alone; its SEQ is skipped. */
	s = snapshot_open(&(struct snapshot_opts){.dir = dir}, PID, err, sizeof err);
	CHECKF("open_real_dir", s != NULL, "%s", err);
	if (!s) return;
	path_in(p, sizeof p, dir, "memtrace-4242-0.ctf");
	FILE *f = fopen(p, "w");
	if (f) {
		fputs("precious", f);
		fclose(f);
	}
	int rc = snapshot_write(s, t, NULL, fake_locs, NULL, NOW_US, err, sizeof err);
	char *v = read_all(p);
	CHECKF("existing_file_not_clobbered", rc == -EEXIST && v && !strcmp(v, "precious") &&
						      strstr(err, "already exists") && count_entries(dir) == 1,
	       "rc %d entries %d: %s", rc, count_entries(dir), err);
	free(v);
	rc = snapshot_write(s, t, NULL, fake_locs, NULL, NOW_US, err, sizeof err);
	path_in(p, sizeof p, dir, "memtrace-4242-1.ctf");
	CHECKF("next_seq_after_existing", rc == 0 && exists_nofollow(p), "rc %d: %s", rc, err);

	/* DIR swapped for a symlink between snapshots: refused, nothing written behind it. */
	char moved[128], cmd[512];
	snprintf(moved, sizeof moved, "%s/real-moved", base);
	rename(dir, moved);
	symlink(moved, dir);
	int before = count_entries(moved);
	rc = snapshot_write(s, t, NULL, fake_locs, NULL, NOW_US, err, sizeof err);
	CHECKF("symlinked_dir_refused_later", rc < 0 && strstr(err, "symbolic link") &&
						      count_entries(moved) == before,
	       "rc %d: %s", rc, err);
	unlink(dir);

	/* DIR vanishes: reported; when it reappears, the next snapshot works. */
	mkdir(dir, 0700);
	snapshot_close(s);
	s = snapshot_open(&(struct snapshot_opts){.dir = dir}, PID, err, sizeof err);
	rc = s ? snapshot_write(s, t, NULL, fake_locs, NULL, NOW_US, err, sizeof err) : -1;
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	run(cmd);
	uint64_t seq = snapshot_next_seq(s);
	rc = snapshot_write(s, t, NULL, fake_locs, NULL, NOW_US, err, sizeof err);
	CHECKF("vanished_dir_reported", rc == -ENOENT && strstr(err, "vanished") &&
						snapshot_failures(s) == 1 && snapshot_next_seq(s) == seq,
	       "rc %d failures %llu: %s", rc, (unsigned long long)snapshot_failures(s), err);
	mkdir(dir, 0700);
	rc = snapshot_write(s, t, NULL, fake_locs, NULL, NOW_US, err, sizeof err);
	snprintf(p, sizeof p, "%s/memtrace-4242-%llu.ctf", dir, (unsigned long long)seq);
	CHECKF("reappeared_dir_works", rc == 0 && exists_nofollow(p), "rc %d: %s", rc, err);
	snapshot_close(s);
}

static void test_enospc(const struct trie *small)
{
	char dir[128], cmd[256], err[512] = "";
	snprintf(dir, sizeof dir, "%s/tiny", base);
	mkdir(dir, 0700);
	if (mount("tmpfs", dir, "tmpfs", 0, "size=64k") != 0) {
		const char *ci = getenv("CI");
		if (ci && !strcmp(ci, "true")) {
			printf("FAIL enospc: cannot mount a small tmpfs (in CI this is a failure): %s\n",
			       strerror(errno));
			check_failures++;
		} else
			printf("SKIP enospc: cannot mount a small tmpfs: %s\n", strerror(errno));
		return;
	}
	/* A heap whose snapshot takes far more than 64 KiB: 20000 blocks of distinct stacks. */
	struct trie *big = trie_new(RATE);
	for (uint64_t i = 0; i < 20000; i++) {
		uint64_t stack[3] = {1000 + i, 50000 + i * 7, 900000 + i};
		trie_block_alloc(big, i, i, trie_intern(big, stack, 3), 4096 + i, 1 + i % 5);
		trie_block_set_time(big, i, 1000000 + i);
	}
	size_t live = trie_live_count(big);
	struct snapshotter *s = snapshot_open(&(struct snapshot_opts){.dir = dir}, PID, err, sizeof err);
	int rc = s ? snapshot_write(s, big, NULL, fake_locs, NULL, NOW_US, err, sizeof err) : -1;
	CHECKF("enospc_reported", (rc == -ENOSPC || rc == -EDQUOT) && strstr(err, "No space left"),
	       "rc %d: %s", rc, err);
	CHECKF("enospc_temp_removed", count_entries(dir) == 0, "%d entries left", count_entries(dir));
	CHECK("enospc_trie_untouched", trie_live_count(big) == live && snapshot_next_seq(s) == 0);
	rc = s ? snapshot_write(s, small, NULL, fake_locs, NULL, NOW_US, err, sizeof err) : -1;
	char p[256];
	path_in(p, sizeof p, dir, "memtrace-4242-0.ctf");
	CHECKF("enospc_next_snapshot_works", rc == 0 && exists_nofollow(p), "rc %d: %s", rc, err);
	snapshot_close(s);
	trie_free(big);
	if (umount(dir) != 0) fprintf(stderr, "umount %s: %s\n", dir, strerror(errno));
	snprintf(cmd, sizeof cmd, "rmdir '%s'", dir);
	run(cmd);
}

/* 100k live blocks: written and read back whole (the time is printed, not asserted). */
static void test_large(void)
{
	char dir[128], p[256], err[512] = "";
	snprintf(dir, sizeof dir, "%s/large", base);
	mkdir(dir, 0700);
	struct trie *t = trie_new(RATE);
	for (uint64_t i = 0; i < 100000; i++) {
		uint64_t stack[12];
		for (int k = 0; k < 12; k++) stack[k] = 1 + k * 1000 + (k >= 8 ? i % (1000 + k) : k);
		trie_block_alloc(t, i, i, trie_intern(t, stack, 12), 16 + i % 1000, 1);
		trie_block_set_time(t, i, 2000000 + (i * 7919) % 100000); /* scrambled times */
	}
	struct snapshotter *s = snapshot_open(&(struct snapshot_opts){.dir = dir}, PID, err, sizeof err);
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	int rc = s ? snapshot_write(s, t, NULL, fake_locs, NULL, NOW_US, err, sizeof err) : -1;
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("info: 100000 live blocks, %zu contexts: snapshot in %.3f s\n", trie_node_count(t),
	       (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9);
	path_in(p, sizeof p, dir, "memtrace-4242-0.ctf");
	int fd = open(p, O_RDONLY);
	mt_reader *r = fd >= 0 ? mt_reader_open(fd, NULL, NULL, NULL) : NULL;
	mt_event ev;
	size_t n = 0, unordered = 0;
	uint64_t last = 0;
	while (r && mt_reader_next(r, &ev) == 1) {
		if (ev.time_us < last) unordered++;
		last = ev.time_us;
		n += ev.type == MT_EV_ALLOC;
	}
	CHECKF("large_snapshot_100k", rc == 0 && n == 100000 && unordered == 0,
	       "rc %d, %zu allocs, %zu out of order: %s", rc, n, unordered, err);
	if (r) mt_reader_close(r);
	if (fd >= 0) close(fd);
	snapshot_close(s);
	trie_free(t);
}

int main(void)
{
	snprintf(base, sizeof base, "/tmp/test_snapshot.XXXXXX");
	if (!mkdtemp(base)) {
		printf("FAIL setup: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	struct trie *t = make_trie();
	CHECK("trie_block_set_time", trie_block_set_time(t, 10, 5000300) == 0 &&
					     trie_block_set_time(t, 12, 1) == -1);
	test_basic(t);
	test_keep(t);
	test_refusals(t);
	test_enospc(t);
	test_large();
	trie_free(t);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
	run(cmd);
	return CHECK_DONE();
}
