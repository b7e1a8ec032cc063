/* Allocation functions of objects mapped after the probes were placed (dlopen), see
 * alloc_sites_added in allocsyms.h. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "allocsyms.h"
#include "alloc_defs.h"
#include "forwarder.h"
#include "probesite.h"
#include "common/notes.h"


/* "" when pid shares our mount namespace and root, else /proc/PID/root (as allocsyms.c does,
 * so that paths compare equal with the sites it found). */
static void root_prefix(pid_t pid, char *root, size_t len)
{
	char path[64], link[PATH_MAX];
	struct stat ours, theirs;
	root[0] = 0;
	snprintf(path, sizeof path, "/proc/%d/ns/mnt", (int)pid);
	bool same_ns = stat("/proc/self/ns/mnt", &ours) == 0 && stat(path, &theirs) == 0 &&
		       ours.st_ino == theirs.st_ino && ours.st_dev == theirs.st_dev;
	snprintf(path, sizeof path, "/proc/%d/root", (int)pid);
	ssize_t n = readlink(path, link, sizeof link - 1);
	if (!same_ns || n != 1 || link[0] != '/') snprintf(root, len, "/proc/%d/root", (int)pid);
}

/* Is the file at path (compared by identity: /lib and /usr/lib name the same files on a
 * merged-/usr system) one that sites already probes? */
static bool probed(const struct alloc_sites *sites, const char *path)
{
	struct stat st, other;
	bool have_st = stat(path, &st) == 0;
	for (int i = 0; i < sites->n; i++) {
		if (strcmp(sites->sites[i].path, path) == 0) return true;
		if (have_st && stat(sites->sites[i].path, &other) == 0 && other.st_dev == st.st_dev &&
		    other.st_ino == st.st_ino)
			return true;
	}
	return false;
}

static int add_def(struct alloc_sites *out, const struct elfobj *o, enum alloc_fn fn,
		   const struct fn_def *def)
{
	for (int i = 0; i < out->n; i++)
		if (out->sites[i].entry_offset == def->offset && strcmp(out->sites[i].path, o->path) == 0)
			return 0; /* an alias */
	if (out->n >= MAX_PROBE_SITES) return -1;
	struct probe_site *s = &out->sites[out->n++];
	memset(s, 0, sizeof(*s));
	s->fn = fn;
	snprintf(s->path, sizeof s->path, "%s", o->path);
	s->entry_offset = s->probe_offset = def->offset;
	size_t want = def->size > 64 && def->size < 65536 ? def->size : def->size ? 65536 : 64;
	uint8_t *code = malloc(want);
	ssize_t got = code ? pread(o->fd, code, want, def->offset) : -1;
	if (got > 0)
		s->probe_offset += probe_site_choose(fn, code, got, def->vaddr, def->size, &s->emulated);
	free(code);
	return 0;
}

/* Adds the allocation functions object `path` defines itself. */
static int scan_object(const char *path, struct alloc_sites *added, char *err, size_t errlen)
{
	struct elfobj o;
	char oerr[512];
	if (elfobj_open(&o, path, oerr, sizeof oerr) != 0) return 0; /* data file, unreadable */
	struct fn_def defs[AF_COUNT];
	alloc_defs_of(&o, false, defs);
	int rc = 0;
	for (int fn = 0; fn < AF_COUNT && !rc; fn++) {
		if (!defs[fn].found) continue;
		if (defs[fn].ifunc) {
			notes_add(added->notes, sizeof added->notes, "%s in %s is an ifunc, not probed",
				  alloc_fn_name(fn), path);
			continue;
		}
		if (alloc_fn_is_extension(fn) && alloc_forwarding_target(&o, defs, fn) >= 0)
			continue; /* forwards to another allocation function, probed there */
		if (add_def(added, &o, fn, &defs[fn]) < 0) {
			snprintf(err, errlen, "more than %d new probe sites in %s", MAX_PROBE_SITES, path);
			rc = -1;
		}
	}
	elfobj_close(&o);
	return rc;
}

int alloc_sites_added(pid_t pid, const struct alloc_sites *have, struct alloc_sites *added,
		      char *err, size_t errlen)
{
	memset(added, 0, sizeof(*added));
	char path[64], root[64];
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f) {
		snprintf(err, errlen, "cannot read %s: the process is gone", path);
		return -1;
	}
	root_prefix(pid, root, sizeof root);
	char line[4352], last[PATH_MAX] = "";
	int rc = 0;
	while (!rc && fgets(line, sizeof line, f)) {
		char *p = strchr(line, '/');
		if (!p) continue;
		p[strcspn(p, "\n")] = 0;
		if (strstr(p, " (deleted)") || strcmp(p, last) == 0) continue;
		snprintf(last, sizeof last, "%s", p);
		char full[PATH_MAX];
		if ((size_t)snprintf(full, sizeof full, "%s%s", root, p) >= sizeof full) continue;
		if (probed(have, full) || probed(added, full)) continue;
		/* the cheap test first: only ELF shared objects */
		if (!strstr(p, ".so")) continue;
		rc = scan_object(full, added, err, errlen);
	}
	fclose(f);
	if (!rc && added->n)
		snprintf(added->allocator, sizeof added->allocator, "%.120s", added->sites[0].path);
	return rc;
}
