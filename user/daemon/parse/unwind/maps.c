/* The target's mappings as the unwinder should see them.
 *
 * libdw (dwfl_linux_proc_maps_report) makes one module of consecutive lines of one file, and
 * skips anonymous lines without ending the module. A program that maps part of an object a
 * second time far from the first (node 20: V8 maps its builtins out of /usr/bin/node again
 * next to its JIT code, for short calls) then gets one module from 0x400000 up to that copy:
 * every pc in between (the heap, the JIT code) became "node+0x7f...". A copy is a line of a
 * file met in an earlier group (another file's lines came between), or one that maps bytes of
 * the file its group maps already (beyond the page two segments may share). It is left
 * out of what libdw sees and kept here with where its bytes lie in the object's own mapping
 * (a pc in it is named as that pc: the same code). Anonymous executable memory (JIT code) is
 * kept here too, with the name the program gave it ([anon:NAME]), so that its frames are named
 * as JIT code and not taken for a library loaded since the mappings were read. */
#include "maps.h"
#include "by_start.h"
#include "u64map.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct line {
	uint64_t start, end, offset, inode;
	char perms[5];
	const char *path; /* into the line; "" for none */
	size_t path_len;
};

/* One line of /proc/PID/maps ("start-end perms offset dev inode   path"); false if malformed. */
static bool parse_line(const char *s, size_t len, struct line *l)
{
	char buf[160];
	size_t n = len < sizeof buf - 1 ? len : sizeof buf - 1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	int used = 0;
	if (sscanf(buf, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %*x:%*x %" SCNu64 "%n", &l->start,
		   &l->end, l->perms, &l->offset, &l->inode, &used) != 5 || l->end <= l->start)
		return false;
	size_t i = (size_t)used;
	while (i < len && (s[i] == ' ' || s[i] == '\t'))
		i++;
	l->path = s + i;
	l->path_len = len - i;
	return true;
}

struct seen { /* the file lines kept, for copies to find their bytes in */
	uint64_t start, end, offset;
	const char *path;
	size_t path_len;
};

static bool same_path(const char *a, size_t an, const char *b, size_t bn)
{
	return an == bn && memcmp(a, b, an) == 0;
}

static uint64_t path_key(const char *p, size_t n)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * UINT64_C(0x100000001b3);
	h = u64_mix(h);
	return h ? h : 1;
}

static int push_region(struct maps_view *v, size_t *cap, const struct maps_region *r)
{
	if (v->n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct maps_region *g = realloc(v->r, nc * sizeof(*g));
		if (!g)
			return -1;
		v->r = g;
		*cap = nc;
	}
	v->r[v->n++] = *r;
	return 0;
}

static void copy_name(char *dst, size_t size, const char *src, size_t len)
{
	size_t n = len < size - 1 ? len : size - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* Does l map file bytes that the current group (the last lines kept, of l's file) already
 * maps, beyond the one page two segments may share? Then it is a copy. */
static bool maps_again(const struct seen *kept, size_t nkept, const struct line *l)
{
	for (size_t i = nkept; i-- > 0;) {
		const struct seen *k = &kept[i];
		if (!same_path(k->path, k->path_len, l->path, l->path_len))
			break;
		uint64_t lo = l->offset > k->offset ? l->offset : k->offset;
		uint64_t kend = k->offset + (k->end - k->start), lend = l->offset + (l->end - l->start);
		uint64_t hi = lend < kend ? lend : kend;
		if (hi > lo && hi - lo > 4096)
			return true;
	}
	return false;
}

/* Where the copy's first byte lies in a kept mapping of the same file, or 0. */
static uint64_t alias_of(const struct seen *kept, size_t nkept, const struct line *l)
{
	for (size_t i = 0; i < nkept; i++) {
		const struct seen *k = &kept[i];
		if (same_path(k->path, k->path_len, l->path, l->path_len) &&
		    l->offset >= k->offset && l->offset - k->offset < k->end - k->start)
			return k->start + (l->offset - k->offset);
	}
	return 0;
}

static int by_start(const void *a, const void *b)
{
	const struct maps_region *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

char *maps_view_build(const char *text, struct maps_view *v)
{
	memset(v, 0, sizeof(*v));
	size_t tlen = strlen(text), cap = 0, nkept = 0, kept_cap = 0, out_len = 0;
	char *out = malloc(tlen + 1);
	struct seen *kept = NULL;
	struct u64map paths = {0}; /* files met in an earlier group */
	if (!out)
		return NULL;
	const char *cur = NULL; /* the file whose lines libdw is grouping now */
	size_t cur_len = 0;
	bool oom = false;
	/* Files with code: a file mapped without any executable mapping (a data file) is out of
	 * libdw's sight: no pc lies in it, and libdw's reporting is quadratic in the modules (a
	 * process with 60,000 mapped data files took minutes: issue 35, finding 9). */
	struct u64map code_files = {0};
	for (const char *s = text; *s && !oom;) {
		const char *nl = strchr(s, '\n');
		size_t len = nl ? (size_t)(nl - s) : strlen(s);
		struct line l;
		if (parse_line(s, len, &l) && l.inode != 0 && l.path_len && l.path[0] == '/' &&
		    strchr(l.perms, 'x'))
			oom = u64map_put(&code_files, path_key(l.path, l.path_len), 1) < 0;
		s = nl ? nl + 1 : s + len;
	}
	for (const char *s = text; *s && !oom;) {
		const char *nl = strchr(s, '\n');
		size_t len = nl ? (size_t)(nl - s) : strlen(s);
		const char *next = nl ? nl + 1 : s + len;
		struct line l;
		bool keep = true;
		if (parse_line(s, len, &l)) {
			struct maps_region r = {.start = l.start, .end = l.end};
			if (l.inode != 0 && l.path_len && l.path[0] == '/' &&
			    !u64map_get(&code_files, path_key(l.path, l.path_len))) {
				keep = false; /* a data file */
			} else if (l.inode != 0 && l.path_len && l.path[0] == '/') {
				bool in_group = cur && same_path(cur, cur_len, l.path, l.path_len);
				uint64_t key = path_key(l.path, l.path_len);
				bool earlier = in_group ? maps_again(kept, nkept, &l)
							: u64map_get(&paths, key) != 0;
				if (earlier) { /* a copy: out of libdw's sight */
					keep = false;
					r.kind = MAPS_COPY;
					r.alias = alias_of(kept, nkept, &l);
					const char *base = memrchr(l.path, '/', l.path_len);
					copy_name(r.name, sizeof r.name, base + 1,
						  l.path_len - (size_t)(base + 1 - l.path));
					oom = push_region(v, &cap, &r) < 0;
				} else {
					if (nkept == kept_cap) {
						size_t nc = kept_cap ? kept_cap * 2 : 64;
						struct seen *g = realloc(kept, nc * sizeof(*g));
						if (!g) {
							oom = true;
							break;
						}
						kept = g;
						kept_cap = nc;
					}
					kept[nkept++] = (struct seen){l.start, l.end, l.offset, l.path,
								      l.path_len};
					oom = u64map_put(&paths, key, 1) < 0;
					cur = l.path;
					cur_len = l.path_len;
				}
			} else if (l.inode == 0 && strchr(l.perms, 'x') &&
				   (l.path_len == 0 || strncmp(l.path, "[anon:", 6) == 0)) {
				r.kind = MAPS_ANON_EXEC;
				if (l.path_len)
					copy_name(r.name, sizeof r.name, l.path, l.path_len);
				else
					snprintf(r.name, sizeof r.name, "[anon:jit]");
				oom = push_region(v, &cap, &r) < 0;
			}
		}
		if (keep) {
			memcpy(out + out_len, s, (size_t)(next - s));
			out_len += (size_t)(next - s);
		}
		s = next;
	}
	free(kept);
	u64map_free(&paths);
	u64map_free(&code_files);
	out[out_len] = '\0';
	if (oom) {
		free(out);
		maps_view_free(v);
		return NULL;
	}
	/* the kernel's lines come sorted by address; other text (a test's, a fuzzer's) need not */
	if (v->n > 1) qsort(v->r, v->n, sizeof *v->r, by_start);
	return out;
}

const struct maps_region *maps_view_find(const struct maps_view *v, uint64_t pc)
{
	size_t lo = starting_at_or_below(v->r, v->n, sizeof *v->r, offsetof(struct maps_region, start), pc);
	return lo > 0 && pc < v->r[lo - 1].end ? &v->r[lo - 1] : NULL;
}

void maps_view_free(struct maps_view *v)
{
	free(v->r);
	v->r = NULL;
	v->n = 0;
}

char *maps_read_file(const char *path, size_t max)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	char *text = maps_read_fd(fd, max);
	close(fd);
	return text;
}

char *maps_read_fd(int fd, size_t max)
{
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap + 1);
	while (buf) {
		if (len == cap) {
			if (cap >= max)
				break; /* the rest is left out: the lines read are still right */
			cap = cap * 2 < max ? cap * 2 : max;
			char *g = realloc(buf, cap + 1);
			if (!g) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = g;
		}
		ssize_t got = read(fd, buf + len, cap - len);
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	if (buf && len == max) { /* cut: the last whole line ends it */
		char *nl = memrchr(buf, '\n', len);
		len = nl ? (size_t)(nl + 1 - buf) : 0;
	}
	if (buf)
		buf[len] = '\0';
	return buf;
}
