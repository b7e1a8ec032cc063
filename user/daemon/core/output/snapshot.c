/* Heap snapshots: the live sampled blocks of the trie as a memtrace trace and as collapsed
 * stacks (see snapshot.h and docs/snapshots.md).
 *
 * Safety of the files: DIR is opened once with O_NOFOLLOW|O_DIRECTORY and every file operation
 * is relative to that descriptor (openat/renameat2/unlinkat), so a symlink swapped in for DIR or
 * for a file name is never followed. A file is written under a temporary dot-name created with
 * O_EXCL|O_NOFOLLOW, fsync'd, and renamed with RENAME_NOREPLACE (link + unlink where the file
 * system lacks it): it appears whole or not at all and never replaces an existing file.
 *
 * Before each snapshot DIR is looked up again by its path: if it vanished the snapshot fails
 * with -ENOENT; if a new directory took its place (the old one was removed and recreated) the
 * new one is used; a symlink in its place is refused. */
#include "snapshot.h"
#include "out_file.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define NAME_MAX_LEN 96
#define FOLDED_BUF_BYTES (64 * 1024)

struct snapshotter {
	char *path;
	int dirfd;
	dev_t dev;
	ino_t ino;
	pid_t pid;
	unsigned keep;
	mode_t mode;
	uint64_t next_seq;
	uint64_t written, failures;
};

/* One live block, as written to the snapshot trace. */
struct live_block {
	uint64_t time_us;
	uint64_t id;
	uint64_t bytes;
	uint64_t nsamples;
	uint32_t node;
};

static int set_err(char *err, size_t errlen, int e, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -e;
}

/* Opens path as a directory without following a symlink at its last component. Returns the
 * fd, or -errno with a message. */
static int open_dir(const char *path, char *err, size_t errlen)
{
	struct stat st;
	if (lstat(path, &st) < 0) {
		int e = errno;
		if (e == ENOENT)
			return set_err(err, errlen, e, "snapshot directory %s does not exist", path);
		return set_err(err, errlen, e, "snapshot directory %s: %s", path, strerror(e));
	}
	if (S_ISLNK(st.st_mode))
		return set_err(err, errlen, ELOOP,
			       "snapshot directory %s is a symbolic link; refusing it (give the real directory)",
			       path);
	if (!S_ISDIR(st.st_mode))
		return set_err(err, errlen, ENOTDIR, "snapshot directory %s is not a directory", path);
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		if (e == ELOOP)
			return set_err(err, errlen, e,
				       "snapshot directory %s is a symbolic link; refusing it", path);
		return set_err(err, errlen, e, "cannot open snapshot directory %s: %s", path,
			       strerror(e));
	}
	/* Another user who can write in DIR could plant or swap names in it: refuse a directory
	 * owned by someone else (not root, not us) that others may write in, unless it is sticky
	 * (like /tmp: then nobody can rename or remove our files). */
	struct stat dst;
	if (fstat(fd, &dst) == 0 && dst.st_uid != 0 && dst.st_uid != geteuid() &&
	    (dst.st_mode & (S_IWGRP | S_IWOTH)) && !(dst.st_mode & S_ISVTX)) {
		close(fd);
		return set_err(err, errlen, EPERM,
			       "snapshot directory %s is unsafe: owned by uid %u and writable by %s "
			       "without the sticky bit; use a directory owned by root or by us",
			       path, (unsigned)dst.st_uid,
			       dst.st_mode & S_IWOTH ? "everyone" : "its group");
	}
	struct statvfs vfs;
	if (fstatvfs(fd, &vfs) == 0 && (vfs.f_flag & ST_RDONLY)) {
		close(fd);
		return set_err(err, errlen, EROFS, "snapshot directory %s is on a read-only file system",
			       path);
	}
	if (faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) < 0) {
		int e = errno;
		close(fd);
		return set_err(err, errlen, e, "snapshot directory %s is not writable: %s", path,
			       strerror(e));
	}
	return fd;
}

/* Parses "memtrace-PID-SEQ.ctf" / "memtrace-PID-SEQ.folded" (SEQ canonical decimal). Returns
 * 1 and *seq if name is one of ours. */
static int parse_name(const char *name, pid_t pid, uint64_t *seq)
{
	char prefix[48];
	int n = snprintf(prefix, sizeof prefix, "memtrace-%d-", (int)pid);
	if (strncmp(name, prefix, (size_t)n) != 0) return 0;
	const char *p = name + n, *digits = p;
	uint64_t v = 0;
	while (isdigit((unsigned char)*p)) {
		if (p - digits >= 19) return 0;
		v = v * 10 + (uint64_t)(*p - '0');
		p++;
	}
	if (p == digits || (digits[0] == '0' && p - digits > 1)) return 0;
	if (strcmp(p, ".ctf") != 0 && strcmp(p, ".folded") != 0) return 0;
	*seq = v;
	return 1;
}

/* The SEQs of the names of our pattern in DIR, sorted descending, duplicates removed; with
 * regular_only, only those of regular files (a symlink or anything else is never ours to
 * delete). Returns the count, or -1 (errno set). */
static int cmp_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

static long list_seqs(int dirfd, pid_t pid, int regular_only, uint64_t **out)
{
	*out = NULL;
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) return -1;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	uint64_t *seqs = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		uint64_t seq;
		if (!parse_name(de->d_name, pid, &seq)) continue;
		struct stat st;
		if (regular_only &&
		    (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)))
			continue;
		if (n == cap) {
			size_t nc = cap ? 2 * cap : 16;
			uint64_t *ns = realloc(seqs, nc * sizeof *ns);
			if (!ns) {
				free(seqs);
				closedir(d);
				errno = ENOMEM;
				return -1;
			}
			seqs = ns;
			cap = nc;
		}
		seqs[n++] = seq;
	}
	closedir(d);
	if (n) qsort(seqs, n, sizeof *seqs, cmp_desc);
	size_t u = 0;
	for (size_t i = 0; i < n; i++)
		if (u == 0 || seqs[u - 1] != seqs[i]) seqs[u++] = seqs[i];
	*out = seqs;
	return (long)u;
}

/* DIR does not exist: made with mode 0700 in its parent, which must exist and pass the checks
 * of open_dir (no symbolic link, not writable by others without the sticky bit...). Returns
 * DIR opened as open_dir does, or a negative errno with a message. */
static int create_dir(const char *path, char *err, size_t errlen)
{
	char parent[4096];
	snprintf(parent, sizeof parent, "%s", path);
	size_t len = strlen(parent);
	while (len > 1 && parent[len - 1] == '/') parent[--len] = '\0'; /* "dir/" */
	char *slash = strrchr(parent, '/');
	const char *name = slash ? slash + 1 : parent;
	if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
		return set_err(err, errlen, EINVAL, "snapshot directory %s: not a name to create", path);
	char base[4096];
	snprintf(base, sizeof base, "%s", name);
	if (slash == parent) parent[1] = '\0';   /* "/name" */
	else if (slash) *slash = '\0';
	else snprintf(parent, sizeof parent, ".");
	char e[512];
	int pfd = open_dir(parent, e, sizeof e);
	if (pfd < 0)
		return set_err(err, errlen, -pfd, "snapshot directory %s does not exist and cannot be "
			       "made: its parent: %s", path, e);
	if (mkdirat(pfd, base, 0700) < 0 && errno != EEXIST) {
		int en = errno;
		close(pfd);
		return set_err(err, errlen, en, "cannot make snapshot directory %s: %s", path,
			       strerror(en));
	}
	close(pfd);
	return open_dir(path, err, errlen);
}

struct snapshotter *snapshot_open(const struct snapshot_opts *opts, pid_t pid, char *err,
				  size_t errlen)
{
	if (!opts || !opts->dir || !*opts->dir) {
		set_err(err, errlen, EINVAL, "no snapshot directory given");
		return NULL;
	}
	if (pid <= 0) {
		set_err(err, errlen, EINVAL, "bad pid %d for snapshots", (int)pid);
		return NULL;
	}
	if (opts->file_mode & ~(mode_t)0777) {
		set_err(err, errlen, EINVAL, "bad snapshot file mode %#o (only permission bits)",
			(unsigned)opts->file_mode);
		return NULL;
	}
	int fd = open_dir(opts->dir, err, errlen);
	if (fd == -ENOENT && opts->create) fd = create_dir(opts->dir, err, errlen);
	if (fd < 0) return NULL;
	struct snapshotter *s = calloc(1, sizeof *s);
	struct stat st;
	if (!s || !(s->path = strdup(opts->dir)) || fstat(fd, &st) < 0) {
		set_err(err, errlen, ENOMEM, "out of memory");
		close(fd);
		if (s) free(s->path);
		free(s);
		return NULL;
	}
	s->dirfd = fd;
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	s->pid = pid;
	s->keep = opts->keep;
	s->mode = opts->file_mode ? opts->file_mode : 0600;
	uint64_t *seqs;
	long n = list_seqs(fd, pid, 0, &seqs);
	if (n < 0) {
		set_err(err, errlen, errno, "cannot list snapshot directory %s: %s", s->path,
			strerror(errno));
		snapshot_close(s);
		return NULL;
	}
	s->next_seq = n > 0 ? seqs[0] + 1 : 0;
	free(seqs);
	return s;
}

/* Looks DIR up again by its path (see the header comment). */
static int refresh_dir(struct snapshotter *s, char *err, size_t errlen)
{
	char e[512];
	int fd = open_dir(s->path, e, sizeof e);
	if (fd == -ENOENT)
		return set_err(err, errlen, ENOENT,
			       "snapshot directory %s has vanished; will look for it again at the next snapshot",
			       s->path);
	if (fd < 0) return set_err(err, errlen, -fd, "%s", e);
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int en = errno;
		close(fd);
		return set_err(err, errlen, en, "snapshot directory %s: %s", s->path, strerror(en));
	}
	if (st.st_dev == s->dev && st.st_ino == s->ino) {
		close(fd);
		return 0;
	}
	close(s->dirfd);
	s->dirfd = fd;
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	return 0;
}

/* A fresh temporary file for final name `name`: a dot-name our pattern never matches. */
static int create_temp(struct snapshotter *s, const char *name, char *tmp, size_t tmplen)
{
	return mt_out_create_temp(s->dirfd, name, s->mode, tmp, tmplen);
}

/* Gives tmp its final name without replacing anything. */
static int publish(struct snapshotter *s, const char *tmp, const char *name)
{
	if (renameat2(s->dirfd, tmp, s->dirfd, name, RENAME_NOREPLACE) == 0) return 0;
	if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) return -1;
	/* no RENAME_NOREPLACE on this file system: link() does not replace either */
	if (linkat(s->dirfd, tmp, s->dirfd, name, 0) < 0) return -1;
	unlinkat(s->dirfd, tmp, 0);
	return 0;
}

static int cmp_block_time(const void *a, const void *b)
{
	const struct live_block *x = a, *y = b;
	if (x->time_us != y->time_us) return x->time_us < y->time_us ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

struct collect_ctx {
	struct live_block *v;
	size_t n, cap;
	uint64_t now_us;
};

static int collect_block(void *ctx, const struct trie_block *b)
{
	struct collect_ctx *c = ctx;
	if (c->n == c->cap) return 1; /* the count changed under us: cannot happen single-threaded */
	c->v[c->n++] = (struct live_block){
		.time_us = b->time_us ? b->time_us : c->now_us,
		.id = b->id,
		.bytes = b->bytes,
		.nsamples = b->nsamples ? b->nsamples : 1, /* the format wants nsamples >= 1 */
		.node = b->node,
	};
	return 0;
}

/* Writes the snapshot trace to fd. Returns 0 or -errno with a message. */
static int write_trace(int fd, const struct trie *t, const struct live_block *v, size_t n,
		       const mt_trace_info *info, mt_locations_fn locs, void *locs_ctx, char *err,
		       size_t errlen)
{
	uint32_t max_depth = 1;
	for (size_t i = 0; i < n; i++) {
		const struct trie_node *nd = trie_node(t, v[i].node);
		if (nd && nd->depth > max_depth) max_depth = nd->depth;
	}
	uint64_t *bt = malloc((size_t)max_depth * sizeof *bt);
	if (!bt) return set_err(err, errlen, ENOMEM, "out of memory for a backtrace");
	errno = 0;
	mt_writer *w = mt_writer_open(fd, info, locs, locs_ctx);
	if (!w) {
		int e = errno ? errno : EIO;
		free(bt);
		return set_err(err, errlen, e, "cannot write the trace header: %s", strerror(e));
	}
	int rc = 0;
	uint32_t bt_node = TRIE_NONE;
	size_t bt_len = 0;
	uint64_t last_us = info->start_time_us;
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (v[i].node != bt_node) { /* blocks of one context often come together */
			bt_node = v[i].node;
			bt_len = trie_node_backtrace(t, bt_node, bt, max_depth);
			if (bt_len > max_depth) bt_len = max_depth;
		}
		uint64_t words = v[i].bytes / 8 + (v[i].bytes % 8 != 0);
		errno = 0;
		if (mt_writer_alloc(w, v[i].time_us, words, v[i].nsamples, MT_SOURCE_EXTERNAL, bt,
				    bt_len) < 0) {
			int e = errno ? errno : EIO;
			rc = set_err(err, errlen, e, "%s", mt_writer_error(w));
		}
		if (v[i].time_us > last_us) last_us = v[i].time_us;
	}
	if (rc == 0) {
		errno = 0;
		if (mt_writer_flush(w, last_us) < 0) {
			int e = errno ? errno : EIO;
			rc = set_err(err, errlen, e, "%s", mt_writer_error(w));
		}
	}
	if (mt_writer_close(w) < 0 && rc == 0)
		rc = set_err(err, errlen, EIO, "writing the snapshot trace failed");
	free(bt);
	return rc;
}

/* A frame name as flame-graph tools read it: ';' separates frames, newline ends a record. */
static void put_frame(FILE *f, const char *name, int first)
{
	if (!first) putc_unlocked(';', f);
	if (!strpbrk(name, ";\n\r")) {
		fputs_unlocked(name, f);
		return;
	}
	for (const char *p = name; *p; p++)
		putc_unlocked(*p == ';' ? ',' : (*p == '\n' || *p == '\r') ? ' ' : *p, f);
}

struct folded_ctx {
	const struct trie *t;
	FILE *f;
	mt_locations_fn locs;
	void *locs_ctx;
	uint64_t *bt;
	size_t bt_cap;
	double rate;
	int oom;
};

static int folded_node(void *ctx, uint32_t index, const struct trie_node *node)
{
	struct folded_ctx *c = ctx;
	if (node->c.live_nsamples == 0) return 0;
	uint64_t bytes = (uint64_t)llround((double)node->c.live_nsamples / c->rate * 8.0);
	if (bytes == 0) return 0;
	if (node->depth > c->bt_cap) {
		uint64_t *nb = realloc(c->bt, node->depth * sizeof *nb);
		if (!nb) {
			c->oom = 1;
			return 1;
		}
		c->bt = nb;
		c->bt_cap = node->depth;
	}
	size_t n = trie_node_backtrace(c->t, index, c->bt, c->bt_cap);
	int first = 1;
	if (n == 0) {
		put_frame(c->f, "<no stack>", first);
		first = 0;
	}
	for (size_t i = 0; i < n; i++) {
		const mt_location *l = NULL;
		int nl = c->locs ? c->locs(c->locs_ctx, c->bt[i], &l) : -1;
		if (nl <= 0 || !l) {
			char buf[40];
			snprintf(buf, sizeof buf, "<noloc %#llx>", (unsigned long long)c->bt[i]);
			put_frame(c->f, buf, first);
			first = 0;
			continue;
		}
		for (int k = 0; k < nl; k++) { /* outermost first: inlined frames follow their caller */
			put_frame(c->f, l[k].defname && *l[k].defname ? l[k].defname : "??", first);
			first = 0;
		}
	}
	fprintf(c->f, " %llu\n", (unsigned long long)bytes);
	return 0;
}

/* Writes the collapsed stacks of the live heap to fd (consumed: closed here). */
static int write_folded(int fd, const struct trie *t, mt_locations_fn locs, void *locs_ctx,
			char *err, size_t errlen)
{
	FILE *f = fdopen(fd, "w");
	if (!f) {
		int e = errno;
		close(fd);
		return set_err(err, errlen, e, "cannot write the folded stacks: %s", strerror(e));
	}
	setvbuf(f, NULL, _IOFBF, FOLDED_BUF_BYTES);
	struct folded_ctx c = {.t = t, .f = f, .locs = locs, .locs_ctx = locs_ctx,
			       .rate = trie_rate(t) > 0 ? trie_rate(t) : 1.0};
	trie_for_each_node(t, folded_node, &c);
	free(c.bt);
	int rc = 0;
	errno = 0;
	if (c.oom) rc = set_err(err, errlen, ENOMEM, "out of memory writing the folded stacks");
	else if (fflush(f) != 0 || ferror(f)) {
		int e = errno ? errno : EIO;
		rc = set_err(err, errlen, e, "writing the folded stacks failed: %s", strerror(e));
	} else if (fsync(fileno(f)) < 0) {
		int e = errno;
		rc = set_err(err, errlen, e, "writing the folded stacks failed (fsync): %s", strerror(e));
	}
	if (fclose(f) != 0 && rc == 0) {
		int e = errno ? errno : EIO;
		rc = set_err(err, errlen, e, "writing the folded stacks failed: %s", strerror(e));
	}
	return rc;
}

/* Deletes our snapshots older than the newest s->keep (only regular files of our pattern). */
static void prune(struct snapshotter *s)
{
	if (!s->keep) return;
	uint64_t *seqs;
	long n = list_seqs(s->dirfd, s->pid, 1, &seqs);
	for (long i = s->keep; i < n; i++) {
		static const char *const ext[] = {"ctf", "folded"};
		for (int k = 0; k < 2; k++) {
			char name[NAME_MAX_LEN];
			snprintf(name, sizeof name, "memtrace-%d-%llu.%s", (int)s->pid,
				 (unsigned long long)seqs[i], ext[k]);
			struct stat st;
			if (fstatat(s->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
				unlinkat(s->dirfd, name, 0);
		}
	}
	free(seqs);
}

int snapshot_write(struct snapshotter *s, const struct trie *t, const mt_trace_info *info_template,
		   mt_locations_fn locs, void *locs_ctx, uint64_t now_us, char *err, size_t errlen)
{
	if (!s || !t) return set_err(err, errlen, EINVAL, "snapshot_write: no snapshotter or trie");
	char e[512] = "";
	int rc = refresh_dir(s, e, sizeof e);
	if (rc < 0) {
		s->failures++;
		return set_err(err, errlen, -rc, "snapshot %llu: %s", (unsigned long long)s->next_seq, e);
	}

	/* The live blocks in time order (ties: allocation order). */
	struct collect_ctx cc = {.cap = trie_live_count(t), .now_us = now_us};
	cc.v = malloc((cc.cap ? cc.cap : 1) * sizeof *cc.v);
	if (!cc.v) {
		s->failures++;
		return set_err(err, errlen, ENOMEM, "snapshot %llu: out of memory for %zu live blocks",
			       (unsigned long long)s->next_seq, cc.cap);
	}
	trie_for_each_live_block(t, collect_block, &cc);
	qsort(cc.v, cc.n, sizeof *cc.v, cmp_block_time);

	char context[1024];
	mt_trace_info info = {.word_size = 64, .executable_name = "", .host_name = "",
			      .ocaml_runtime_params = "", .context = ""};
	if (info_template) info = *info_template;
	if (info.sample_rate <= 0) info.sample_rate = trie_rate(t);
	if (!info.word_size) info.word_size = 64;
	if (!info.pid) info.pid = (uint64_t)s->pid;
	info.start_time_us = cc.n ? cc.v[0].time_us : now_us;
	snprintf(context, sizeof context, "%s%sheap snapshot %llu at %llu us: %zu live sampled blocks",
		 info.context ? info.context : "", info.context && *info.context ? "; " : "",
		 (unsigned long long)s->next_seq, (unsigned long long)now_us, cc.n);
	info.context = context;

	char name_ctf[NAME_MAX_LEN], name_folded[NAME_MAX_LEN];
	char tmp_ctf[NAME_MAX_LEN + 32] = "", tmp_folded[NAME_MAX_LEN + 32] = "";
	snprintf(name_ctf, sizeof name_ctf, "memtrace-%d-%llu.ctf", (int)s->pid,
		 (unsigned long long)s->next_seq);
	snprintf(name_folded, sizeof name_folded, "memtrace-%d-%llu.folded", (int)s->pid,
		 (unsigned long long)s->next_seq);
	int published = 0;

	/* A name already taken (by anything, even a dangling symlink): skip this SEQ before
	 * writing. renameat2(RENAME_NOREPLACE) below still guards against a file appearing later. */
	const char *const final_names[2] = {name_ctf, name_folded};
	for (int i = 0; i < 2; i++) {
		struct stat st;
		if (fstatat(s->dirfd, final_names[i], &st, AT_SYMLINK_NOFOLLOW) == 0) {
			rc = -EEXIST;
			snprintf(e, sizeof e, "%s already exists in %s; left alone, snapshot %llu skipped",
				 final_names[i], s->path, (unsigned long long)s->next_seq);
			published = 1; /* the SEQ is used up */
			goto out;
		}
	}

	int fd = create_temp(s, name_ctf, tmp_ctf, sizeof tmp_ctf);
	if (fd < 0) {
		rc = -errno;
		snprintf(e, sizeof e, "cannot create a file in %s: %s", s->path, strerror(errno));
		tmp_ctf[0] = '\0';
		goto out;
	}
	rc = write_trace(fd, t, cc.v, cc.n, &info, locs, locs_ctx, e, sizeof e);
	if (rc == 0 && fsync(fd) < 0) {
		rc = -errno;
		snprintf(e, sizeof e, "writing the snapshot trace failed (fsync): %s", strerror(errno));
	}
	if (close(fd) < 0 && rc == 0) {
		rc = -errno;
		snprintf(e, sizeof e, "writing the snapshot trace failed (close): %s", strerror(errno));
	}
	if (rc < 0) goto out;

	fd = create_temp(s, name_folded, tmp_folded, sizeof tmp_folded);
	if (fd < 0) {
		rc = -errno;
		snprintf(e, sizeof e, "cannot create a file in %s: %s", s->path, strerror(errno));
		tmp_folded[0] = '\0';
		goto out;
	}
	rc = write_folded(fd, t, locs, locs_ctx, e, sizeof e);
	if (rc < 0) goto out;

	/* The .folded first: when the .ctf appears, the snapshot is complete. */
	const char *names[2] = {name_folded, name_ctf};
	char *tmps[2] = {tmp_folded, tmp_ctf};
	for (int i = 0; i < 2; i++) {
		if (publish(s, tmps[i], names[i]) < 0) {
			rc = -errno;
			if (errno == EEXIST)
				snprintf(e, sizeof e, "%s already exists in %s; left alone, snapshot %llu skipped",
					 names[i], s->path, (unsigned long long)s->next_seq);
			else
				snprintf(e, sizeof e, "cannot rename to %s in %s: %s", names[i], s->path,
					 strerror(errno));
			/* the name is taken, or half of this snapshot is out: its SEQ is used up */
			published = 1;
			goto out;
		}
		tmps[i][0] = '\0';
		published = 1;
	}
	fsync(s->dirfd); /* make the renames durable */

out:
	if (tmp_ctf[0]) unlinkat(s->dirfd, tmp_ctf, 0);
	if (tmp_folded[0]) unlinkat(s->dirfd, tmp_folded, 0);
	free(cc.v);
	if (published) s->next_seq++;
	if (rc < 0) {
		s->failures++;
		struct stat st; /* a removed directory has no links left */
		if (rc == -ENOENT && fstat(s->dirfd, &st) == 0 && st.st_nlink == 0)
			snprintf(e, sizeof e, "snapshot directory %s has vanished", s->path);
		return set_err(err, errlen, -rc, "snapshot %s: %s", name_ctf, e);
	}
	s->written++;
	prune(s);
	return 0;
}

uint64_t snapshot_next_seq(const struct snapshotter *s) { return s ? s->next_seq : 0; }
uint64_t snapshot_written(const struct snapshotter *s) { return s ? s->written : 0; }
uint64_t snapshot_failures(const struct snapshotter *s) { return s ? s->failures : 0; }
const char *snapshot_dir(const struct snapshotter *s) { return s ? s->path : ""; }

void snapshot_close(struct snapshotter *s)
{
	if (!s) return;
	if (s->dirfd >= 0) close(s->dirfd);
	free(s->path);
	free(s);
}
