/* Finding the allocation functions a target really calls and where to probe them.
 *
 * Symbols are bound the way ld.so binds them: the global scope is searched in load order (the
 * executable, LD_PRELOAD, then the DT_NEEDED libraries breadth first) and the first exported
 * definition wins, for each function on its own. A running process's load order is read
 * from its own link map (r_debug, found through the executable's DT_DEBUG); see
 * maps_order() for the fallback. */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "allocsyms.h"
#include "alloc_defs.h"
#include "allocname.h"
#include "forwarder.h"
#include "probesite.h"
#include "common/notes.h"
#include "elf/elfobj.h"
#include "elf/ldso.h"


/* The prefix that makes the target's paths openable from here: "" when it shares our mount
 * namespace and root, else /proc/PID/root (uprobes attach fine through that path too). */
static void target_root(pid_t pid, char *root, size_t len)
{
	root[0] = 0;
	if (pid <= 0 || pid == getpid()) return;
	char path[64], link[PATH_MAX];
	struct stat ours, theirs;
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
	bool same_ns = stat("/proc/self/ns/mnt", &ours) == 0 && stat(path, &theirs) == 0 &&
	               ours.st_ino == theirs.st_ino && ours.st_dev == theirs.st_dev;
	snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	bool same_root = n == 1 && link[0] == '/';
	if (!same_ns || !same_root) snprintf(root, len, "/proc/%d/root", (int)pid);
}

/* ---- choosing sites from an ordered list of objects ---- */

static int add_site(struct alloc_sites *out, const struct elfobj *o, enum alloc_fn fn,
                    const struct fn_def *def)
{
	for (int i = 0; i < out->n; i++)
		if (out->sites[i].entry_offset == def->offset && strcmp(out->sites[i].path, o->path) == 0)
			return 0;   /* an alias of a function already listed (memalign = aligned_alloc) */
	if (out->n >= MAX_PROBE_SITES) return -1;
	struct probe_site *site = &out->sites[out->n];
	memset(site, 0, sizeof(*site));
	site->fn = fn;
	snprintf(site->path, sizeof(site->path), "%s", o->path);
	site->entry_offset = def->offset;
	/* Decode from the file: the whole function when small, so that probe_site_choose can
	 * check that nothing jumps back to the site it picks. */
	size_t want = def->size > 64 && def->size < 65536 ? def->size : def->size ? 65536 : 64;
	uint8_t *code = malloc(want);
	ssize_t got = code ? pread(o->fd, code, want, def->offset) : -1;
	uint64_t delta = 0;
	bool emulated = false;
	if (got > 0) delta = probe_site_choose(fn, code, got, def->vaddr, def->size, &emulated);
	free(code);
	site->probe_offset = def->offset + delta;
	site->emulated = emulated;
	out->n++;
	return 0;
}

/* objs: openable paths in load order, objs->paths[0] the executable. */
static int resolve(const struct objlist *objs, bool static_exe, const char *what,
                   struct alloc_sites *out, char *err, size_t errlen)
{
	bool bound[AF_COUNT] = { 0 };
	int provider = -1, provider_fn = -1;
	char first_error[512] = "";
	int readable = 0;

	for (int i = 0; i < objs->n; i++) {
		struct elfobj o;
		char oerr[512];
		if (elfobj_open(&o, objs->paths[i], oerr, sizeof(oerr)) != 0) {
			/* maps also holds data files (locale archives, fonts): only failures to
			 * open, not "not ELF", are worth a note */
			if (access(objs->paths[i], R_OK) != 0) {
				notes_add(out->notes, sizeof(out->notes), "%s", oerr);
				if (!first_error[0]) snprintf(first_error, sizeof(first_error), "%s", oerr);
			} else if (i == 0) {
				snprintf(err, errlen, "%s", oerr);
				return -1;
			}
			continue;
		}
		readable++;
		struct fn_def defs[AF_COUNT];
		/* The executable's own calls bind to its own definitions at link time, exported or
		 * not (an allocator compiled in: mallocx is not in .dynsym), so its .symtab counts. */
		alloc_defs_of(&o, i == 0, defs);
		if (elfobj_symbols_capped(&o, i == 0))
			notes_add(out->notes, sizeof(out->notes), "symbol table of %s read up to its %u "
				  "first entries (the cap)", o.path, ELFOBJ_MAX_SYMBOLS);
		int forwarders = 0, forward_example = -1, forward_target = -1;
		for (int fn = 0; fn < AF_COUNT; fn++) {
			if (bound[fn] || !defs[fn].found) continue;
			bound[fn] = true;
			if (defs[fn].ifunc) {
				/* ld.so binds to whatever the resolver returns: unknown to us */
				notes_add(out->notes, sizeof(out->notes),
				          "%s in %s is an ifunc, not probed", alloc_fn_name(fn), o.path);
				continue;
			}
			int target = alloc_fn_is_extension(fn) ? alloc_forwarding_target(&o, defs, fn) : -1;
			if (target >= 0) {
				/* libstdc++'s operator new calls malloc: malloc's probe sees the call */
				if (!forwarders++) {
					forward_example = fn;
					forward_target = target;
				}
				continue;
			}
			if (add_site(out, &o, fn, &defs[fn]) != 0) {
				elfobj_close(&o);
				snprintf(err, errlen, "more than %d probe sites", MAX_PROBE_SITES);
				return -1;
			}
			if ((fn == AF_MALLOC || (fn == AF_FREE && provider_fn != AF_MALLOC))) {
				provider = i;
				provider_fn = fn;
			}
		}
		if (forwarders)
			notes_add(out->notes, sizeof(out->notes),
			          "%d function%s in %s only forward to another allocation function, not "
			          "probed (e.g. %s -> %s)", forwarders, forwarders > 1 ? "s" : "", o.path,
			          alloc_fn_name(forward_example), alloc_fn_name(forward_target));
		elfobj_close(&o);
	}
	if (out->n == 0 || provider < 0) {
		snprintf(err, errlen, "no allocator found in %s: no object of %d exports malloc or free%s%s",
		         what, objs->n, first_error[0] ? "; " : "", first_error);
		return -1;
	}
	(void)readable;
	allocator_describe(objs->paths[provider], provider == 0, out->allocator, sizeof(out->allocator));
	return 0;
}

/* ---- running process ---- */

struct mapping {
	uint64_t start, end;
	char *path;   /* NULL for anonymous and [special] mappings */
	bool deleted;
	bool host_path; /* path is openable as is (no root prefix): /proc/PID/exe */
};
struct maps {
	struct mapping *m;
	int n;
};

static void maps_free(struct maps *mp)
{
	for (int i = 0; i < mp->n; i++) free(mp->m[i].path);
	free(mp->m);
	mp->m = NULL;
	mp->n = 0;
}

static int maps_read(pid_t pid, struct maps *mp, char *err, size_t errlen)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	char *line = NULL;
	size_t cap = 0;
	int alloc = 0;
	memset(mp, 0, sizeof(*mp));
	while (getline(&line, &cap, f) > 0) {
		unsigned long long start, end;
		int pos = 0;
		if (sscanf(line, "%llx-%llx %*s %*s %*s %*s %n", &start, &end, &pos) < 2 || pos == 0)
			continue;
		char *p = line + pos;
		p[strcspn(p, "\n")] = 0;
		if (mp->n == alloc) {
			alloc = alloc ? alloc * 2 : 64;
			struct mapping *grown = realloc(mp->m, alloc * sizeof(*grown));
			if (!grown) break;
			mp->m = grown;
		}
		struct mapping *m = &mp->m[mp->n++];
		m->start = start;
		m->end = end;
		m->path = NULL;
		m->deleted = false;
		m->host_path = false;
		if (p[0] == '/') {
			size_t len = strlen(p);
			static const char del[] = " (deleted)";
			if (len > sizeof(del) - 1 && strcmp(p + len - (sizeof(del) - 1), del) == 0) {
				m->deleted = true;
				p[len - (sizeof(del) - 1)] = 0;
			}
			m->path = strdup(p);
		}
	}
	free(line);
	fclose(f);
	return 0;
}

static const struct mapping *maps_find(const struct maps *mp, uint64_t addr)
{
	for (int i = 0; i < mp->n; i++)
		if (addr >= mp->m[i].start && addr < mp->m[i].end) return &mp->m[i];
	return NULL;
}

static bool objlist_has(const struct objlist *l, const char *path)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->paths[i], path) == 0) return true;
	return false;
}

/* Adds the object mapped at m (a target path) unless it is deleted or already listed. */
static int add_mapped(struct objlist *l, const struct mapping *m, const char *root,
                      struct alloc_sites *out)
{
	char path[PATH_MAX];
	if (!m || !m->path) return 0;
	snprintf(path, sizeof(path), "%s%s", m->host_path ? "" : root, m->path);
	if (objlist_has(l, path)) return 0;
	if (m->deleted) {
		notes_add(out->notes, sizeof(out->notes),
		          "skipped %s: deleted since it was mapped (replaced on disk?)", m->path);
		return 0;
	}
	return objlist_add(l, path);
}

static int read_mem(int fd, uint64_t addr, void *buf, size_t len)
{
	return pread(fd, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -1;
}

/* The link map: r_debug.r_map, reached through the executable's DT_DEBUG, lists every loaded
 * object in load order (which is the global lookup scope's order for everything loaded at
 * start-up; RTLD_LOCAL dlopen'ed libraries are listed too although they do not take part in
 * global binding). Names are taken from maps (the mapping holding each l_ld), not l_name,
 * which may be relative to the target's cwd. Returns -1 if ld.so has not filled it in. */
static int link_map_order(pid_t pid, const struct maps *mp, const char *root,
                          struct objlist *l, struct alloc_sites *out)
{
	char path[64];
	uint64_t at_phdr = 0, at_phnum = 0, auxv[2];
	snprintf(path, sizeof(path), "/proc/%d/auxv", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f) return -1;
	while (fread(auxv, sizeof(auxv), 1, f) == 1 && auxv[0] != AT_NULL) {
		if (auxv[0] == AT_PHDR) at_phdr = auxv[1];
		if (auxv[0] == AT_PHNUM) at_phnum = auxv[1];
	}
	fclose(f);
	if (!at_phdr || !at_phnum || at_phnum > 256) return -1;

	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) return -1;
	int rc = -1;
	Elf64_Phdr ph[256];
	if (read_mem(fd, at_phdr, ph, at_phnum * sizeof(ph[0])) != 0) goto out;
	uint64_t bias = 0, dyn_vaddr = 0, dyn_size = 0;
	bool have_phdr = false;
	for (uint64_t i = 0; i < at_phnum; i++) {
		if (ph[i].p_type == PT_PHDR) { bias = at_phdr - ph[i].p_vaddr; have_phdr = true; }
		if (ph[i].p_type == PT_DYNAMIC) { dyn_vaddr = ph[i].p_vaddr; dyn_size = ph[i].p_memsz; }
	}
	if (!have_phdr || !dyn_vaddr) goto out;   /* static executable: no link map */
	uint64_t r_debug = 0;
	for (uint64_t i = 0; i < dyn_size / sizeof(Elf64_Dyn) && i < 1024; i++) {
		Elf64_Dyn d;
		if (read_mem(fd, bias + dyn_vaddr + i * sizeof(d), &d, sizeof(d)) != 0 || d.d_tag == DT_NULL)
			break;
		if (d.d_tag == DT_DEBUG) r_debug = d.d_un.d_ptr;
	}
	uint64_t lm = 0;
	if (!r_debug || read_mem(fd, r_debug + 8, &lm, sizeof(lm)) != 0 || !lm) goto out;
	for (int n = 0; lm && n < 4096; n++) {
		uint64_t entry[4];   /* l_addr, l_name, l_ld, l_next */
		if (read_mem(fd, lm, entry, sizeof(entry)) != 0) goto out;
		const struct mapping *m = maps_find(mp, entry[2]);
		if (add_mapped(l, m, root, out) != 0) goto out;
		lm = entry[3];
	}
	rc = l->n > 0 ? 0 : -1;
out:
	close(fd);
	return rc;
}

/* Without a link map (static executable, or ld.so has not run yet): the executable, then
 * every other mapped file by descending address. ld.so maps libraries one after the other
 * with mmap(NULL), which on x86-64 hands out addresses top-down, so a higher address means
 * loaded earlier; an approximation (legacy bottom-up layouts reverse it, gaps get refilled). */
static int maps_order(const struct maps *mp, const char *exe, const char *root,
                      struct objlist *l, struct alloc_sites *out)
{
	for (int i = 0; i < mp->n; i++)
		if (mp->m[i].path && strcmp(mp->m[i].path, exe) == 0 && add_mapped(l, &mp->m[i], root, out))
			return -1;
	int *idx = malloc(mp->n * sizeof(int)), k = 0;
	if (!idx) return -1;
	for (int i = 0; i < mp->n; i++)
		if (mp->m[i].path) idx[k++] = i;
	for (int a = 0; a < k; a++)   /* descending start address, stable enough for a few dozen */
		for (int b = a + 1; b < k; b++)
			if (mp->m[idx[b]].start > mp->m[idx[a]].start) {
				int t = idx[a]; idx[a] = idx[b]; idx[b] = t;
			}
	int rc = 0;
	for (int a = 0; a < k && rc == 0; a++) rc = add_mapped(l, &mp->m[idx[a]], root, out);
	free(idx);
	return rc;
}

int alloc_sites_for_pid(pid_t pid, struct alloc_sites *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (errlen) err[0] = 0;
	if (pid <= 0) {
		snprintf(err, errlen, "invalid pid %d", (int)pid);
		return -1;
	}
	char path[64], exe[PATH_MAX], root[64];
	struct stat st;
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (stat(path, &st) != 0) {
		snprintf(err, errlen, "no process with pid %d", (int)pid);
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	ssize_t n = readlink(path, exe, sizeof(exe) - 1);
	if (n < 0) {
		if (errno == ENOENT)
			snprintf(err, errlen, "pid %d has no executable: a kernel thread or a zombie",
			         (int)pid);
		else
			snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	exe[n] = 0;
	static const char del[] = " (deleted)";
	bool exe_deleted = false;
	if ((size_t)n > sizeof(del) - 1 && strcmp(exe + n - (sizeof(del) - 1), del) == 0) {
		exe[n - (sizeof(del) - 1)] = 0;
		exe_deleted = true;
	}

	struct maps mp;
	if (maps_read(pid, &mp, err, errlen) != 0) return -1;
	if (exe_deleted) {
		/* A deleted executable stays reachable through /proc/PID/exe, and uprobes attach
		 * through that path too (it resolves to the mapped inode). Deleted libraries are
		 * skipped with a note. */
		char proc_exe[64];
		snprintf(proc_exe, sizeof(proc_exe), "/proc/%d/exe", (int)pid);
		for (int i = 0; i < mp.n; i++) {
			struct mapping *m = &mp.m[i];
			if (!m->path || !m->deleted || strcmp(m->path, exe) != 0) continue;
			char *dup = strdup(proc_exe);
			if (!dup) continue;
			free(m->path);
			m->path = dup;
			m->deleted = false;
			m->host_path = true;
		}
		notes_add(out->notes, sizeof(out->notes),
		          "executable %s was deleted: read through %s", exe, proc_exe);
		snprintf(exe, sizeof(exe), "%s", proc_exe);
	}
	int rc = -1;
	struct objlist objs = { 0 };
	bool any_file = false;
	for (int i = 0; i < mp.n; i++) any_file |= mp.m[i].path != NULL;
	if (!any_file) {
		snprintf(err, errlen, "pid %d maps no files: a kernel thread or an exiting process",
		         (int)pid);
		goto out;
	}
	target_root(pid, root, sizeof(root));

	char exe_open[PATH_MAX];
	snprintf(exe_open, sizeof(exe_open), "%s%s", exe_deleted ? "" : root, exe);
	struct elfobj eo;
	char oerr[512];
	if (elfobj_open(&eo, exe_open, oerr, sizeof(oerr)) != 0) {
		snprintf(err, errlen, "pid %d: %s", (int)pid, oerr);
		goto out;
	}
	bool static_exe = !eo.has_interp;
	elfobj_close(&eo);

	if (static_exe || link_map_order(pid, &mp, root, &objs, out) != 0) {
		objlist_free(&objs);
		if (maps_order(&mp, exe, root, &objs, out) != 0) {
			snprintf(err, errlen, "out of memory reading pid %d's mappings", (int)pid);
			goto out;
		}
		if (!static_exe)
			notes_add(out->notes, sizeof(out->notes),
			          "no link map yet: load order approximated from the address layout");
	}
	char what[64];
	snprintf(what, sizeof(what), "pid %d", (int)pid);
	rc = resolve(&objs, static_exe, what, out, err, errlen);
out:
	objlist_free(&objs);
	maps_free(&mp);
	return rc;
}

/* ---- a program about to be exec'ed ---- */

static int find_in_path(const char *root, const char *name, char *out, size_t outlen)
{
	const char *path = getenv("PATH");
	if (!path) path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *p = path; *p;) {
		size_t len = strcspn(p, ":");
		char cand[PATH_MAX], open_path[PATH_MAX];
		snprintf(cand, sizeof(cand), "%.*s/%s", (int)(len ? len : 1), len ? p : ".", name);
		snprintf(open_path, sizeof(open_path), "%s%s", root, cand);
		if (access(open_path, X_OK) == 0) {
			snprintf(out, outlen, "%s", cand);
			return 0;
		}
		p += len;
		if (*p) p++;
	}
	return -1;
}

/* "#!interp arg" scripts run their interpreter: follow it (a few levels, as the kernel does). */
static int follow_script(const char *root, char *tpath, size_t len)
{
	for (int depth = 0; depth < 4; depth++) {
		char open_path[PATH_MAX], line[PATH_MAX];
		snprintf(open_path, sizeof(open_path), "%s%s", root, tpath);
		ssize_t n = read_regular(open_path, line, sizeof(line));
		if (n < 0) return -1;
		if (n < 2 || line[0] != '#' || line[1] != '!') return 0;
		char *p = line + 2;
		p += strspn(p, " \t");
		size_t w = strcspn(p, " \t\n");
		if (w == 0) return -1;
		p[w] = 0;
		snprintf(tpath, len, "%s", p);
	}
	return -1;
}

int alloc_sites_for_exec(const char *exe_path, pid_t pid, struct alloc_sites *out, char *err,
                         size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (errlen) err[0] = 0;
	if (!exe_path || !exe_path[0]) {
		snprintf(err, errlen, "no program given");
		return -1;
	}
	char root[64], tpath[PATH_MAX], open_path[PATH_MAX];
	target_root(pid, root, sizeof(root));
	if (!strchr(exe_path, '/')) {
		if (find_in_path(root, exe_path, tpath, sizeof(tpath)) != 0) {
			snprintf(err, errlen, "%s: command not found in PATH", exe_path);
			return -1;
		}
	} else {
		snprintf(tpath, sizeof(tpath), "%s", exe_path);
	}
	errno = 0;
	if (follow_script(root, tpath, sizeof(tpath)) != 0) {
		snprintf(open_path, sizeof(open_path), "%s%s", root, tpath);
		snprintf(err, errlen, "cannot read %s: %s", open_path,
		         errno == EINVAL ? "not a regular file" : errno ? strerror(errno) : "bad #! line");
		return -1;
	}
	/* absolute, symlinks resolved: $ORIGIN is relative to the real file */
	char real[PATH_MAX];
	if (!root[0] && realpath(tpath, real)) snprintf(tpath, sizeof(tpath), "%s", real);
	snprintf(open_path, sizeof(open_path), "%s%s", root, tpath);

	struct elfobj eo;
	if (elfobj_open(&eo, open_path, err, errlen) != 0) return -1;
	bool static_exe = !eo.has_interp;
	elfobj_close(&eo);

	struct objlist objs = { 0 };
	int rc = -1;
	if (static_exe) {
		if (objlist_add(&objs, open_path) != 0) goto out;
	} else if (ldso_load_order(root, tpath, &objs, out->notes, sizeof(out->notes), err,
	                           errlen) != 0) {
		goto out;
	}
	rc = resolve(&objs, static_exe, open_path, out, err, errlen);
out:
	objlist_free(&objs);
	return rc;
}
