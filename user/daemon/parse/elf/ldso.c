/* What ld.so will load for a program that has not started yet (memtraced -- CMD): its load
 * order, from DT_NEEDED, DT_RPATH/DT_RUNPATH ($ORIGIN), LD_LIBRARY_PATH, LD_PRELOAD,
 * /etc/ld.so.preload and /etc/ld.so.cache, following glibc's elf/dl-load.c search rules.
 *
 * Simplifications (none of them changes which malloc a Debian program binds to): glibc-hwcaps
 * subdirectories and hwcap-specific cache entries are ignored, secure-execution (setuid) rules
 * are not applied, and only the new ld.so.cache format (glibc >= 2.32 writes nothing else) is
 * read; without a usable cache the standard directories are searched. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elfobj.h"
#include "ldso.h"
#include "common/notes.h"

int objlist_add(struct objlist *l, const char *path)
{
	if (l->n == l->cap) {
		int cap = l->cap ? l->cap * 2 : 16;
		void *grown = realloc(l->paths, cap * sizeof(*l->paths));
		if (!grown) return -1;
		l->paths = grown;
		l->cap = cap;
	}
	snprintf(l->paths[l->n++], PATH_MAX, "%s", path);
	return 0;
}

void objlist_free(struct objlist *l)
{
	free(l->paths);
	memset(l, 0, sizeof(*l));
}

/* ---- /etc/ld.so.cache ("glibc-ld.so.cache1.1") ---- */

struct cache_header {        /* glibc's struct cache_file_new */
	char magic[17];           /* "glibc-ld.so.cache" */
	char version[3];          /* "1.1" */
	uint32_t nlibs, len_strings;
	uint8_t flags, pad[3];
	uint32_t extension_offset, unused[3];
};
struct cache_entry {         /* struct file_entry_new */
	int32_t flags;
	uint32_t key, value;      /* string offsets from the start of the header */
	uint32_t osversion;
	uint64_t hwcap;
};
#define CACHE_FLAG_TYPE_MASK 0x00ff
#define CACHE_FLAG_ELF_LIBC6 0x0003
#define CACHE_FLAG_ARCH_MASK 0xff00
#define CACHE_FLAG_X8664_LIB64 0x0300

int ldso_cache_lookup(const char *root, const char *name, char *out, size_t outlen)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/etc/ld.so.cache", root);
	int fd = open_regular(path);
	if (fd < 0) return -1;
	struct stat st;
	int rc = -1;
	if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(struct cache_header) ||
	    st.st_size > (256 << 20)) {
		close(fd);
		return -1;
	}
	size_t size = st.st_size;
	const char *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED) return -1;
	const struct cache_header *h = (const void *)map;
	if (memcmp(h->magic, "glibc-ld.so.cache", 17) != 0 || memcmp(h->version, "1.1", 3) != 0)
		goto out;
	if (h->nlibs > (size - sizeof(*h)) / sizeof(struct cache_entry)) goto out;
	const struct cache_entry *e = (const void *)(map + sizeof(*h));
	for (uint32_t i = 0; i < h->nlibs; i++) {
		if ((e[i].flags & CACHE_FLAG_TYPE_MASK) != CACHE_FLAG_ELF_LIBC6 ||
		    (e[i].flags & CACHE_FLAG_ARCH_MASK) != CACHE_FLAG_X8664_LIB64 || e[i].hwcap != 0)
			continue;
		if (e[i].key >= size || e[i].value >= size) continue;
		const char *key = map + e[i].key, *value = map + e[i].value;
		if (!memchr(key, 0, size - e[i].key) || !memchr(value, 0, size - e[i].value)) continue;
		if (strcmp(key, name) == 0 && strlen(value) < outlen) {
			strcpy(out, value);
			rc = 0;
			break;
		}
	}
out:
	munmap((void *)map, size);
	return rc;
}

/* ---- the search ---- */

struct lobj {
	char tpath[PATH_MAX];     /* path in the target's file system */
	char *loaded_as;          /* the name it was asked for (DT_NEEDED or LD_PRELOAD word) */
	int loader;               /* index of the object whose DT_NEEDED brought it, -1 */
	dev_t dev;
	ino_t ino;
	struct elf_dynamic dyn;
};

struct search {
	const char *root;
	struct lobj *objs;
	int n, cap;
	char *notes;
	size_t noteslen;
};

/* A usable candidate: an ELF64 x86-64 object (ld.so skips other classes in its search). */
static bool usable(const struct search *s, const char *tpath)
{
	char open_path[PATH_MAX];
	char err[256];
	struct elfobj o;
	snprintf(open_path, sizeof(open_path), "%s%s", s->root, tpath);
	if (elfobj_open(&o, open_path, err, sizeof(err)) != 0) return false;
	elfobj_close(&o);
	return true;
}

/* $ORIGIN is the directory of the object holding the path list; $LIB and $PLATFORM as
 * Debian's x86-64 ld.so expands them. */
static void expand_tokens(const char *in, size_t inlen, const char *origin_of, char *out,
                          size_t outlen)
{
	size_t o = 0;
	for (size_t i = 0; i < inlen && o + 1 < outlen;) {
		const char *val = NULL;
		size_t skip = 0;
		static const struct { const char *tok; } toks[] = { { "ORIGIN" }, { "LIB" }, { "PLATFORM" } };
		if (in[i] == '$') {
			for (size_t t = 0; t < 3 && !val; t++) {
				size_t tl = strlen(toks[t].tok);
				bool braced = i + 1 < inlen && in[i + 1] == '{';
				size_t start = i + 1 + braced;
				if (start + tl <= inlen && memcmp(in + start, toks[t].tok, tl) == 0 &&
				    (!braced || (start + tl < inlen && in[start + tl] == '}'))) {
					skip = 1 + braced + tl + braced;
					val = t == 1 ? "lib/x86_64-linux-gnu" : t == 2 ? "x86_64" : NULL;
					if (t == 0) {
						static char origin[PATH_MAX];
						snprintf(origin, sizeof(origin), "%s", origin_of);
						char *slash = strrchr(origin, '/');
						if (slash && slash != origin) *slash = 0;
						else if (slash) slash[1] = 0;
						else strcpy(origin, ".");
						val = origin;
					}
				}
			}
		}
		if (val) {
			o += snprintf(out + o, outlen - o, "%s", val);
			if (o >= outlen) o = outlen - 1;
			i += skip;
		} else {
			out[o++] = in[i++];
		}
	}
	out[o] = 0;
}

/* Tries each directory of a ':'-separated list; 0 and tpath when name is found. */
static int search_list(const struct search *s, const char *list, const char *origin_of,
                       const char *name, char *tpath)
{
	if (!list) return -1;
	const char *p = list;
	while (*p) {
		size_t len = strcspn(p, ":;");
		if (len > 0) {
			char dir[PATH_MAX];
			expand_tokens(p, len, origin_of, dir, sizeof(dir));
			char cand[PATH_MAX];
			if ((size_t)snprintf(cand, sizeof(cand), "%s/%s", dir, name) < sizeof(cand) &&
			    usable(s, cand)) {
				strcpy(tpath, cand);
				return 0;
			}
		}
		p += len;
		if (*p) p++;
	}
	return -1;
}

/* dl-load.c _dl_map_object: RPATHs of the loader chain (unless the loader has a RUNPATH),
 * LD_LIBRARY_PATH, the loader's RUNPATH, ld.so.cache, the default directories. */
static int search_library(const struct search *s, int loader, const char *name, char *tpath)
{
	if (strchr(name, '/')) {
		if (!usable(s, name)) return -1;
		snprintf(tpath, PATH_MAX, "%s", name);
		return 0;
	}
	const struct lobj *ld = loader >= 0 ? &s->objs[loader] : NULL;
	if (!ld || !ld->dyn.runpath) {
		for (int l = loader; l >= 0; l = s->objs[l].loader)
			if (search_list(s, s->objs[l].dyn.rpath, s->objs[l].tpath, name, tpath) == 0)
				return 0;
		/* (the chain ends at the executable, so its RPATH is always searched last) */
	}
	const char *llp = getenv("LD_LIBRARY_PATH");
	if (search_list(s, llp, s->objs[0].tpath, name, tpath) == 0) return 0;
	if (ld && search_list(s, ld->dyn.runpath, ld->tpath, name, tpath) == 0) return 0;
	if (ldso_cache_lookup(s->root, name, tpath, PATH_MAX) == 0 && usable(s, tpath)) return 0;
	static const char *defaults =
		"/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:/lib64:/usr/lib64:/lib:/usr/lib";
	return search_list(s, defaults, "", name, tpath);
}

static int find_loaded(const struct search *s, const char *name, dev_t dev, ino_t ino)
{
	for (int i = 0; i < s->n; i++) {
		const struct lobj *o = &s->objs[i];
		if (name && ((o->loaded_as && strcmp(o->loaded_as, name) == 0) ||
		             (o->dyn.soname && strcmp(o->dyn.soname, name) == 0)))
			return i;
		if (!name && o->dev == dev && o->ino == ino) return i;
	}
	return -1;
}

/* Loads name (asked for by loader) unless already loaded; a missing library becomes a note
 * (ld.so would refuse to start the program; the exec will then fail on its own). */
static int load(struct search *s, int loader, const char *name, const char *why)
{
	char tpath[PATH_MAX], open_path[PATH_MAX];
	if (find_loaded(s, name, 0, 0) >= 0) return 0;
	if (search_library(s, loader, name, tpath) != 0) {
		notes_add(s->notes, s->noteslen, "%s %s not found", why, name);
		return 0;
	}
	snprintf(open_path, sizeof(open_path), "%s%s", s->root, tpath);
	struct stat st;
	if (stat(open_path, &st) != 0) return 0;
	if (find_loaded(s, NULL, st.st_dev, st.st_ino) >= 0) return 0;
	if (s->n == s->cap) {
		int cap = s->cap ? s->cap * 2 : 32;
		struct lobj *grown = realloc(s->objs, cap * sizeof(*grown));
		if (!grown) return -1;
		s->objs = grown;
		s->cap = cap;
	}
	struct lobj *o = &s->objs[s->n];
	memset(o, 0, sizeof(*o));
	snprintf(o->tpath, sizeof(o->tpath), "%s", tpath);
	o->loaded_as = strdup(name);
	o->loader = loader;
	o->dev = st.st_dev;
	o->ino = st.st_ino;
	struct elfobj eo;
	char err[256];
	if (elfobj_open(&eo, open_path, err, sizeof(err)) == 0) {
		elfobj_dynamic(&eo, &o->dyn);
		elfobj_close(&eo);
	}
	s->n++;
	return 0;
}

static void load_word_list(struct search *s, const char *list, const char *seps, const char *why)
{
	if (!list) return;
	char *copy = strdup(list), *save = NULL;
	if (!copy) return;
	for (char *w = strtok_r(copy, seps, &save); w; w = strtok_r(NULL, seps, &save))
		load(s, 0, w, why);
	free(copy);
}

int ldso_load_order(const char *root, const char *exe, struct objlist *out, char *notes,
                    size_t noteslen, char *err, size_t errlen)
{
	struct search s = { .root = root, .notes = notes, .noteslen = noteslen };
	int rc = -1;
	if (load(&s, -1, exe, "executable") != 0 || s.n != 1) {
		snprintf(err, errlen, "cannot load %s%s as an x86-64 ELF program", root, exe);
		goto out;
	}
	load_word_list(&s, getenv("LD_PRELOAD"), " :", "LD_PRELOAD library");
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/etc/ld.so.preload", root);
	char buf[8192];
	if (read_regular(path, buf, sizeof(buf)) >= 0)
		load_word_list(&s, buf, " \t\n:", "/etc/ld.so.preload library");
	/* Breadth first: each object's DT_NEEDED in order, objects in load order. */
	for (int i = 0; i < s.n; i++)
		for (int k = 0; k < s.objs[i].dyn.n_needed; k++)
			if (load(&s, i, s.objs[i].dyn.needed[k], "needed library") != 0) goto out;
	for (int i = 0; i < s.n; i++) {
		/* canonical names in our own namespace, as the kernel shows them in maps */
		char real[PATH_MAX];
		if (!root[0] && realpath(s.objs[i].tpath, real))
			snprintf(path, sizeof(path), "%s", real);
		else
			snprintf(path, sizeof(path), "%s%s", root, s.objs[i].tpath);
		if (objlist_add(out, path) != 0) goto out;
	}
	rc = 0;
out:
	for (int i = 0; i < s.n; i++) {
		free(s.objs[i].loaded_as);
		elf_dynamic_free(&s.objs[i].dyn);
	}
	free(s.objs);
	if (rc != 0 && !err[0]) snprintf(err, errlen, "out of memory resolving %s", exe);
	return rc;
}
