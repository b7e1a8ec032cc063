/* Names of JIT code from the perf map a program writes: /tmp/perf-PID.map, one line per piece
 * of code, "START SIZE NAME" in hex (V8 with --perf-basic-prof, the JVM with perf-map-agent,
 * LuaJIT, .NET with DOTNET_PerfMapEnabled, CPython 3.12's -X perf). The file lies in the
 * target's /tmp, under its root, numbered with the PID its own namespace gives it. /tmp is
 * anyone's: a map is used only when the process's own user (or root) owns it, and the text is
 * bounded (MAX_BYTES, MAX_ENTRIES) and read by the unwinder alone (the parser, unprivileged). */
#include "perfmap.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "by_start.h"
#include "maps.h"

#define MAX_BYTES (64u << 20)
#define MAX_ENTRIES (2u << 20)
#define MAX_NAME 256

static int by_start(const void *a, const void *b)
{
	const struct perfmap_entry *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

bool perfmap_parse(struct perfmap *m, const char *text)
{
	size_t cap = 0, ncap = 0, nlen = 0, n = 0;
	struct perfmap_entry *e = NULL;
	char *names = NULL;
	uint32_t seq = 0;
	for (const char *s = text; *s && n < MAX_ENTRIES; seq++) {
		const char *nl = strchr(s, '\n');
		size_t len = nl ? (size_t)(nl - s) : strlen(s);
		const char *next = nl ? nl + 1 : s + len;
		char *end;
		/* (strtoull skips blanks, newlines too: every end is checked against the line's) */
		uint64_t start = strtoull(s, &end, 16), size;
		if (end == s || end >= s + len || *end != ' ')
			goto skip;
		const char *p = end;
		size = strtoull(p, &end, 16);
		if (end == p || end >= s + len || *end != ' ' || size == 0 || start + size < start)
			goto skip;
		const char *name = end + 1;
		size_t name_len = (size_t)(s + len - name);
		if (name_len > MAX_NAME)
			name_len = MAX_NAME;
		if (n == cap) {
			size_t c = cap ? cap * 2 : 1024;
			struct perfmap_entry *g = realloc(e, c * sizeof(*g));
			if (!g)
				goto oom;
			e = g;
			cap = c;
		}
		if (nlen + name_len + 1 > ncap) {
			size_t c = ncap ? ncap * 2 : 65536;
			while (c < nlen + name_len + 1)
				c *= 2;
			char *g = realloc(names, c);
			if (!g)
				goto oom;
			names = g;
			ncap = c;
		}
		memcpy(names + nlen, name, name_len);
		names[nlen + name_len] = '\0';
		e[n++] = (struct perfmap_entry){start, start + size, seq, (uint32_t)nlen};
		nlen += name_len + 1;
	skip:
		s = next;
	}
	if (n > 1) /* (no array to sort when empty) */
		qsort(e, n, sizeof(*e), by_start);
	free(m->e);
	free(m->names);
	m->e = e;
	m->n = n;
	m->names = names;
	return true;
oom:
	free(e);
	free(names);
	return false;
}

const char *perfmap_find(const struct perfmap *m, uint64_t pc, uint64_t *start)
{
	size_t lo = starting_at_or_below(m->e, m->n, sizeof *m->e, offsetof(struct perfmap_entry, start), pc);
	/* code is moved and its space reused: of the entries holding pc, the last written */
	const struct perfmap_entry *best = NULL;
	for (size_t i = lo, k = 0; i-- > 0 && k < 64; k++)
		if (pc < m->e[i].end && (!best || m->e[i].seq > best->seq))
			best = &m->e[i];
	if (!best)
		return NULL;
	if (start)
		*start = best->start;
	return m->names + best->name;
}

/* The PID the target's own namespace gives it (the last NSpid), its effective uid; false if gone. */
static bool status_of(pid_t pid, long *nspid, long *uid)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	*nspid = pid;
	*uid = -1;
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, "Uid:", 4) == 0) {
			char *e; /* the effective uid: the owner of the files it writes */
			strtol(line + 4, &e, 10);
			*uid = strtol(e, NULL, 10);
		}
		else if (strncmp(line, "NSpid:", 6) == 0) {
			char *p = line + 6, *end;
			for (long v; (v = strtol(p, &end, 10)), end != p; p = end)
				*nspid = v;
		}
	}
	fclose(f);
	return *uid >= 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void perfmap_init(struct perfmap *m, pid_t pid, bool same_root)
{
	memset(m, 0, sizeof(*m));
	m->same_root = same_root;
	m->known = status_of(pid, &m->nspid, &m->uid);
}

bool perfmap_load(struct perfmap *m, pid_t pid)
{
	m->read_ns = now_ns();
	if (!m->known)
		return false;
	/* in our root: read from there (the process may be gone since, its root with it) */
	char path[96];
	struct stat st;
	if (m->same_root)
		snprintf(path, sizeof path, "/tmp/perf-%ld.map", m->nspid);
	else
		snprintf(path, sizeof path, "/proc/%d/root/tmp/perf-%ld.map", (int)pid, m->nspid);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	m->absent = fd < 0;
	if (fd < 0)
		return false;
	/* the broker opens only a regular file owned by the process's user (issue 35) */
	bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == (uid_t)m->uid;
	char *text = ok ? maps_read_fd(fd, MAX_BYTES) : NULL;
	close(fd);
	ok = text && perfmap_parse(m, text);
	free(text);
	return ok;
}

void perfmap_free(struct perfmap *m)
{
	free(m->e);
	free(m->names);
	m->e = NULL;
	m->names = NULL;
	m->n = 0;
}
