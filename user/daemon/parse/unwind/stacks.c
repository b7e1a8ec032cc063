/* Unwinding samples with libdw and interning their frames as location codes.
 *
 * One Dwfl per process, set up once (dwfl_linux_proc_report + dwfl_attach_state). Its thread
 * callbacks serve "the current sample": the registers of the sample as the initial state, and
 * memory reads from the stack copy. Reads outside the copy are served from /proc/PID/mem only
 * for addresses inside a mapped object (constant text/data); the live stack beyond the copy is
 * never read (the target has moved on since the sample), but its existence tells that the
 * copy was too short: the stack is then marked truncated (also when the target has exited
 * since: the unwinder asking for more stack than the copy holds is the sign).
 *
 * A target in another mount namespace or chroot (a container) names its objects with its own
 * paths: they are opened under its root, /proc/PID/root, held open from stacks_open on so that
 * objects can still be loaded after the target has exited.
 *
 * Frames -> codes: a pc cache (pc -> code, cleared when the mappings are re-read) in front of
 * the code table (code -> object hash, ELF address, location list). A code is a hash of the
 * object's build-id and path and the ELF address; the rare collision of two different frames
 * on one code is resolved by rehashing, checked against the code table. */
#include "stacks.h"

#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "maps.h"
#include "perfmap.h"
#include "symbolize.h"
#include "stacks_sampler.h"
#include "symcache.h"
#include "u64map.h"

#include "python/pyproc.h"
#include "stacks_int.h"

/* Caps on the work one target's files can cause (see struct stacks_limits). */
static const struct stacks_limits default_limits = {
	.max_frames = MAX_FRAMES,
	.max_debug_bytes = UINT64_C(1) << 30,
	.max_symbols = 1u << 22,
	.max_symbolize_ns = UINT64_C(10) * 1000000000u,
	.max_symbolized = STACKS_CODES_PER_PROCESS,
};


static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}



/* Distinct codes of all processes of the parser together (its threads share it): past
 * STACKS_ALL_CODES_CAP every process's new frames are the cap marker. */
static _Atomic uint64_t all_codes;

/* No new distinct code for this process (issue 35: JIT pcs, unknown pcs and Python frames
 * went past the cap and grew the location caches and the trie without bound)? Past
 * max_symbolized an object's frames are object+0xOFFSET (cheap, and as many as its code has
 * instructions), past 4x that every new frame is the marker; any other kind of frame (JIT,
 * unknown, Python, markers) is the marker past max_symbolized itself. */
static bool over_code_cap(const struct stacks *s, bool native)
{
	uint64_t cap = s->limits.max_symbolized;
	if (native) cap = cap > UINT64_MAX / 4 ? UINT64_MAX : cap * 4;
	return s->stats.codes >= cap || atomic_load(&all_codes) >= STACKS_ALL_CODES_CAP;
}

#define CAP_KIND "overcap"

static struct code_entry *entry_of(const struct stacks *s, uint64_t code)
{
	uint64_t ix = u64map_get(&s->code_index, code);
	return ix ? &s->entries[ix - 1] : NULL;
}

/* The code of (object, offset); symbolizes it (mod, pc: with symbolize_pc; mod NULL: a marker
 * with file/defname) the first time, unless the list is given (given, ngiven: taken over).
 * With share, a list symbolized here is kept for the other processes (symcache.h). 0 only
 * when out of memory. */
static uint64_t intern(struct stacks *s, uint64_t obj_hash, uint64_t offset, Dwfl_Module *mod,
		       const struct symindex *syms, Dwarf_Addr pc, enum symbolize_depth depth,
		       const char *file, const char *defname, mt_location *given, int ngiven,
		       bool share)
{
	uint64_t h = u64_mix(obj_hash ^ u64_mix(offset + UINT64_C(0x9e3779b97f4a7c15)));
	for (int tries = 0; tries < 64; tries++, h = u64_mix(h + 1)) {
		uint64_t code = h & CODE_MASK;
		if (!code)
			continue;
		struct code_entry *e = entry_of(s, code);
		if (e) {
			if (e->obj_hash == obj_hash && e->offset == offset) {
				symbolize_free(given, ngiven);
				return code;
			}
			continue; /* collision: another frame has this code, try the next one */
		}
		if (obj_hash != hash_bytes('M', CAP_KIND, strlen(CAP_KIND)) &&
		    over_code_cap(s, mod != NULL)) {
			symbolize_free(given, ngiven);
			s->stats.over_cap_frames++;
			if (!s->cap_code)
				s->cap_code = intern(s, hash_bytes('M', CAP_KIND, strlen(CAP_KIND)), 0, NULL,
						     NULL, 0, SYMBOLIZE_FULL, STACKS_TRUNCATED_FILE,
						     "[over the cap of distinct frames]", NULL, 0, false);
			return s->cap_code;
		}
		if (s->nentries == s->entries_cap) {
			size_t cap = s->entries_cap ? s->entries_cap * 2 : 256;
			struct code_entry *ne = realloc(s->entries, cap * sizeof(*ne));
			if (!ne) {
				symbolize_free(given, ngiven);
				return 0;
			}
			s->entries = ne;
			s->entries_cap = cap;
		}
		e = &s->entries[s->nentries];
		memset(e, 0, sizeof(*e));
		e->code = code;
		e->obj_hash = obj_hash;
		e->offset = offset;
		int n;
		if (given) {
			e->locs = given;
			n = ngiven;
		} else {
			n = mod ? symbolize_pc(mod, pc, depth, syms, &e->locs)
				: symbolize_marker(file, defname, &e->locs);
			if (share && mod && n > 0)
				symcache_put(obj_hash, offset, depth, e->locs, n);
		}
		if (mod && depth != SYMBOLIZE_FULL)
			s->stats.capped_codes++;
		e->nlocs = n > 0 ? n : 0;
		if (mod && depth == SYMBOLIZE_FULL && e->nlocs && e->locs[e->nlocs - 1].line == 0 && e->locs[e->nlocs - 1].defname &&
		    strstr(e->locs[e->nlocs - 1].defname, "+0x"))
			s->stats.unnamed_codes++;
		if (u64map_put(&s->code_index, code, s->nentries + 1) < 0) {
			symbolize_free(e->locs, e->nlocs);
			return 0;
		}
		s->nentries++;
		s->stats.codes++;
		atomic_fetch_add(&all_codes, 1);
		return code;
	}
	return 0;
}

static uint64_t marker_code(struct stacks *s, const char *kind, uint64_t offset, const char *file,
			    const char *defname)
{
	return intern(s, hash_bytes('M', kind, strlen(kind)), offset, NULL, NULL, 0, SYMBOLIZE_FULL,
		      file, defname, NULL, 0, false);
}

static uint64_t truncated_code(struct stacks *s, size_t stack_len)
{
	char defname[64];
	snprintf(defname, sizeof defname, "[stack truncated at %zu bytes]", stack_len);
	return marker_code(s, "truncated", stack_len, STACKS_TRUNCATED_FILE, defname);
}

static uint64_t capped_code(struct stacks *s, int frames)
{
	char defname[64];
	snprintf(defname, sizeof defname, "[stack cut at %d frames]", frames);
	return marker_code(s, "capped", (uint64_t)frames, STACKS_TRUNCATED_FILE, defname);
}

static uint64_t sampler_code(struct stacks *s, Dwarf_Addr frame) /* stacks_sampler.h */
{
	const char *name = sampler_new_name((int)(frame & ~STACKS_SAMPLER_FRAME));
	return name ? marker_code(s, "sampler", frame & ~STACKS_SAMPLER_FRAME, "<operator new, through the sampler>", name) : 0;
}

static uint64_t unknown_code(struct stacks *s, Dwarf_Addr pc)
{
	char defname[64];
	snprintf(defname, sizeof defname, "0x%" PRIx64, (uint64_t)pc);
	return marker_code(s, "unknown", pc, STACKS_UNKNOWN_FILE, defname);
}

/* ---- public API ---- */
/* Has pid still got mappings to read? An exiting process's /proc/PID/maps is empty: reading
 * it would drop every module the unwinder knows, and the records still queued of its life
 * would lose their stacks. */
static bool has_mappings(pid_t pid)
{
	char path[64], c;
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool some = read(fd, &c, 1) == 1;
	close(fd);
	return some;
}

/* The mappings to report: the live ones, or those at the target's exit. NULL if unreadable. */
static char *maps_text(struct stacks *s)
{
	if (s->final_maps && !has_mappings(s->pid)) /* gone: its mappings at its exit */
		return strdup(s->final_maps);
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/maps", (int)s->pid);
	return maps_read_file(path, MAPS_TEXT_MAX);
}

/* Reports the target's objects to libdw, minus what maps.c keeps out of its sight (copies of
 * an object mapped again elsewhere, which would stretch its module over the JIT code). */
static int report_process(struct stacks *s)
{
	char *text = maps_text(s);
	if (!text)
		return errno ? errno : EIO;
	struct maps_view view;
	char *seen = maps_view_build(text, &view);
	free(text);
	if (!seen)
		return ENOMEM;
	int rc = 0;
	if (seen[0]) {
		FILE *f = fmemopen(seen, strlen(seen), "r");
		rc = f ? dwfl_linux_proc_maps_report(s->dwfl, f) : errno;
		if (f)
			fclose(f);
	}
	free(seen);
	maps_view_free(&s->view);
	s->view = view;
	return rc;
}

static int report_maps(struct stacks *s, char *err, size_t errlen)
{
	dwfl_report_begin(s->dwfl);
	int rc;
	if (s->object_path) /* no process: one object, mapped whole at its base */
		rc = dwfl_report_elf(s->dwfl, s->object_path, s->object_path, -1, s->object_base,
				     false) ? 0 : -1;
	else
		rc = report_process(s);
	dwfl_report_end(s->dwfl, NULL, NULL);
	if (rc != 0 && s->object_path) {
		if (err)
			snprintf(err, errlen, "cannot load %s: %s", s->object_path, dwfl_errmsg(-1));
		return -1;
	}
	if (rc != 0) {
		if (err)
			snprintf(err, errlen, "cannot read the mappings of pid %d (/proc/%d/maps): %s",
				 (int)s->pid, (int)s->pid, rc > 0 ? strerror(rc) : dwfl_errmsg(-1));
		return -1;
	}
	s->last_refresh_ns = now_ns();
	return 0;
}

/* A bare ELF header saying x86-64, 64-bit, little-endian: all dwfl_attach_state needs. */
static Elf *backend_elf(void)
{
	static Elf64_Ehdr eh = {
		.e_ident = {ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3, ELFCLASS64, ELFDATA2LSB, EV_CURRENT},
		.e_type = ET_EXEC,
		.e_machine = EM_X86_64,
		.e_version = EV_CURRENT,
		.e_ehsize = sizeof(Elf64_Ehdr),
	};
	elf_version(EV_CURRENT);
	return elf_memory((char *)&eh, sizeof eh);
}

static struct stacks *open_common(pid_t pid, const char *object_path, uint64_t base, char *err,
				  size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	if (pid <= 0) {
		if (err)
			snprintf(err, errlen, "stacks_open: invalid pid %d", (int)pid);
		return NULL;
	}
	struct stacks *s = calloc(1, sizeof(*s));
	if (!s || (object_path && !(s->object_path = strdup(object_path)))) {
		free(s);
		if (err)
			snprintf(err, errlen, "stacks_open: out of memory");
		return NULL;
	}
	s->pid = pid;
	s->mem_fd = -1;
	s->root_fd = -1;
	s->object_base = base;
	s->limits = default_limits;
	const char *cap = getenv("MEMTRACED_TEST_MAX_SYMBOLIZED"); /* tests: the cap reached soon */
	if (cap && strtoull(cap, NULL, 10) > 0)
		s->limits.max_symbolized = strtoull(cap, NULL, 10);
	stacks_current = s;
	if (!object_path) {
		stacks_open_target_root(s);
		perfmap_init(&s->perfmap, pid, s->root_fd < 0);
	}
	s->dwfl = dwfl_begin(&stacks_proc_callbacks);
	if (!s->dwfl) {
		if (err)
			snprintf(err, errlen, "dwfl_begin: %s", dwfl_errmsg(-1));
		stacks_close(s);
		return NULL;
	}
	if (report_maps(s, err, errlen) < 0) {
		stacks_close(s);
		return NULL;
	}
	/* An Elf of our own for the unwinder's backend: with NULL, dwfl_attach_state borrows the
	 * backend of the first module, which a later report of the mappings may free (node 20
	 * maps part of its own binary again for V8's short builtin calls: the borrowed handle
	 * dangled and the unwinder crashed in dwfl_thread_state_registers). */
	s->backend_elf = backend_elf();
	if (!s->backend_elf ||
	    !dwfl_attach_state(s->dwfl, s->backend_elf, pid, &stacks_thread_callbacks, s)) {
		if (err)
			snprintf(err, errlen, "cannot set up unwinding for pid %d: %s", (int)pid,
				 dwfl_errmsg(-1));
		stacks_close(s);
		return NULL;
	}
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
	if (!object_path) /* optional: -1 only loses truncation marks */
		s->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
	return s;
}


struct stacks *stacks_open(pid_t pid, char *err, size_t errlen)
{
	return open_common(pid, NULL, 0, err, errlen);
}

struct stacks *stacks_open_object(const char *path, uint64_t base, char *err, size_t errlen)
{
	/* the pid only names the one thread the callbacks serve: no process is read */
	return open_common(1, path, base, err, errlen);
}

void stacks_set_final_maps(struct stacks *s, const char *maps)
{
	if (!s || s->final_maps || !maps) return;
	s->final_maps = strdup(maps);
}

void stacks_refresh(struct stacks *s)
{
	if (!s || (!has_mappings(s->pid) && !s->final_maps))
		return;
	stacks_current = s;
	report_maps(s, NULL, 0);
	u64map_clear(&s->pc_codes); /* a pc may now belong to another object */
	memo_clear(&s->memo);       /* and a frame to another unwind */
	u64map_clear(&s->cfa_kinds);
	s->stats.refreshes++;
}

/* In no reported module, nor in memory known to hold no object (JIT code, a copy)? */
static bool pc_unknown(struct stacks *s, Dwarf_Addr pc)
{
	return !dwfl_addrmodule(s->dwfl, pc) && !maps_view_find(&s->view, pc);
}

/* True when some frame's pc lies in no known mapping. */
static bool has_unknown_pc(struct stacks *s)
{
	for (int i = 0; i < s->nframes; i++)
		if (!(s->frames[i].pc & STACKS_SAMPLER_FRAME) &&
		    !u64map_get(&s->pc_codes, s->frames[i].pc) && pc_unknown(s, s->frames[i].pc))
			return true;
	return false;
}

/* A frame in JIT code: named by the program's perf map (re-read at most once a second when
 * it lacks a pc), else by its region's name and the pc ("[anon:jit] 0x7f..."). */
static uint64_t jit_code(struct stacks *s, const struct maps_region *r, Dwarf_Addr pc)
{
	uint64_t start = 0;
	const char *name = s->object_path ? NULL : perfmap_find(&s->perfmap, pc, &start);
	if (!name && !s->object_path && (s->perfmap.read_ns == 0 ||
	    now_ns() - s->perfmap.read_ns >= (s->perfmap.absent ? 10 : 1) * 1000000000ull)) {
		perfmap_load(&s->perfmap, s->pid);
		name = perfmap_find(&s->perfmap, pc, &start);
	}
	uint64_t seen = u64map_get(&s->jit_pcs, pc); /* distinct pcs: a re-read of the maps */
	if (!seen && over_code_cap(s, false)) {       /* no memory per pc past the cap */
		s->stats.over_cap_frames++;
		s->cap_code = marker_code(s, CAP_KIND, 0, STACKS_TRUNCATED_FILE,
					  "[over the cap of distinct frames]");
		return s->cap_code;
	}
	if (!seen || (seen == 2 && name)) {           /* meets them again */
		u64map_put(&s->jit_pcs, pc, name ? 1 : 2);
		if (!seen) s->stats.jit_frames++;
		if (name) s->stats.jit_named++;
	}
	if (name) {
		return marker_code(s, "jitsym", start ^ hash_bytes('J', name, strlen(name)), r->name,
				   name);
	}
	char defname[96];
	snprintf(defname, sizeof defname, "%s 0x%" PRIx64, r->name, (uint64_t)pc);
	return marker_code(s, "jit", pc, r->name, defname);
}

static uint64_t code_of_pc(struct stacks *s, Dwarf_Addr pc)
{
	uint64_t code = u64map_get(&s->pc_codes, pc);
	if (code)
		return code;
	Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, pc);
	const struct maps_region *r = mod ? NULL : maps_view_find(&s->view, pc);
	if (r && r->kind == MAPS_COPY && r->alias && dwfl_addrmodule(s->dwfl, r->alias + (pc - r->start))) {
		/* the same bytes as in the object's own mapping: the same frame */
		code = code_of_pc(s, r->alias + (pc - r->start));
		if (code)
			u64map_put(&s->pc_codes, pc, code);
		return code;
	}
	if (r && r->kind == MAPS_ANON_EXEC) {
		code = jit_code(s, r, pc);
		if (code && code != s->cap_code)
			u64map_put(&s->pc_codes, pc, code);
		return code;
	}
	if (!mod) {
		s->stats.unknown_pcs++;
		return unknown_code(s, pc); /* not cached: a later refresh may find its object */
	}
	struct object *o = stacks_module_object(s, mod);
	if (!o)
		return 0;
	enum symbolize_depth depth = o->depth;
	if (s->stats.codes >= s->limits.max_symbolized)
		depth = SYMBOLIZE_OFFSET;
	uint64_t t0 = now_ns();
	/* known from another process: no DWARF nor symbol table read here */
	mt_location *given = NULL;
	int ngiven = o->shared ? symcache_get(o->hash, pc - o->bias, depth, &given) : 0;
	if (!ngiven && depth != SYMBOLIZE_OFFSET && !o->syms.built)
		symindex_build(&o->syms, mod);
	code = intern(s, o->hash, pc - o->bias, mod, o->syms.failed ? NULL : &o->syms, pc, depth,
		      NULL, NULL, ngiven ? given : NULL, ngiven, o->shared);
	o->symbolize_ns += now_ns() - t0;
	/* Over the time cap, the object is named from its symbols (a lookup costs O(log n)), and
	 * over twice the cap from object+offset only: the names found so far stay. */
	if (o->depth == SYMBOLIZE_FULL && o->symbolize_ns > s->limits.max_symbolize_ns) {
		o->depth = SYMBOLIZE_NAMES;
		stacks_note_cap(s, mod, "time");
	} else if (o->depth == SYMBOLIZE_NAMES && o->symbolize_ns > 2 * s->limits.max_symbolize_ns) {
		o->depth = SYMBOLIZE_OFFSET;
		stacks_note_cap(s, mod, "time");
	}
	if (code && code != s->cap_code)
		u64map_put(&s->pc_codes, pc, code);
	return code;
}

/* A Python frame's code: (file, qualname) and line make it (stacks_python.c). */
static uint64_t python_code(struct stacks *s, bool *last)
{
	struct py_location loc;
	int rc = stacks_py_take(s, &loc, last);
	if (rc == PY_OVER_BUDGET)
		return marker_code(s, "pybudget", 0, "<python>", "[over the Python names' memory budget]");
	if (rc < 0)
		return marker_code(s, "pygone", 0, "<python>", "[code object gone]");
	uint64_t key = u64_mix(loc.hash ^ u64_mix(loc.line + UINT64_C(0x51ed27)));
	uint64_t code = u64map_get(&s->py_codes, key);
	if (code)
		return code;
	mt_location *l = calloc(1, sizeof *l);
	if (!l)
		return 0;
	l->filename = strdup(loc.filename);
	l->defname = strdup(loc.qualname);
	l->line = loc.line;
	if (!l->filename || !l->defname) {
		symbolize_free(l, 1);
		return 0;
	}
	code = intern(s, loc.hash, loc.line, NULL, NULL, 0, SYMBOLIZE_FULL, NULL, NULL, l, 1, false);
	if (code && code != s->cap_code)
		u64map_put(&s->py_codes, key, code);
	return code;
}

/* The frames of the last unwind as codes, innermost first: each eval-loop activation
 * replaced by its Python frames (stacks_python.c), the rest after the native ones. A mapping
 * the interpreter made itself under Python code (a pymalloc arena: the memory of the small
 * objects, which never reach malloc) is charged to the innermost Python line, as tracemalloc
 * charges those objects, not to whichever C line happened to need a new arena (_csv.c:616). */
static int frames_to_codes(struct stacks *s, uint64_t *codes, int max_codes)
{
	int n = 0;
	bool arena = s->start == STACKS_AT_SYSCALL && stacks_py_left(s) && s->nframes > 1 &&
		     (stacks_py_in_interpreter(s, s->frames[0].pc) ||
		      stacks_py_in_interpreter(s, s->frames[1].pc));
	if (arena) s->stats.py_arenas++;
	for (int i = 0; i < s->nframes && n < max_codes; i++) {
		Dwarf_Addr pc = s->frames[i].pc;
		bool splice = stacks_py_splices(s, pc);
		if (arena && !splice) continue; /* the native frames inside the innermost Python one */
		arena = false;
		for (bool last = false; splice && !last && stacks_py_left(s) && n < max_codes;) {
			uint64_t code = python_code(s, &last);
			if (code)
				codes[n++] = code;
		}
		if (splice || stacks_py_hides(s, pc))
			continue;
		uint64_t code = pc & STACKS_SAMPLER_FRAME ? sampler_code(s, pc) : code_of_pc(s, pc);
		if (code)
			codes[n++] = code;
	}
	for (bool last; stacks_py_left(s) && n < max_codes;) {
		uint64_t code = python_code(s, &last);
		if (code)
			codes[n++] = code;
	}
	stacks_py_done(s);
	return n;
}

int stacks_unwind(struct stacks *s, pid_t tid, const uint64_t regs[STACKS_NREGS],
		  const uint8_t *stack, size_t stack_len, uint64_t *codes, int max_codes)
{
	return stacks_unwind_from(s, tid, regs, stack, stack_len, STACKS_AT_ENTRY, codes, max_codes);
}

void stacks_last_extent(const struct stacks *s, uint64_t *end, bool *truncated)
{
	*end = s ? s->last_end : 0;
	*truncated = s && s->truncated;
}

const char *stacks_last_frame_file(struct stacks *s, int i)
{
	if (!s || i < 0 || i >= s->nframes) return NULL;
	Dwfl_Module *m = dwfl_addrmodule(s->dwfl, s->frames[i].pc);
	const char *mainfile = NULL;
	if (m) dwfl_module_info(m, NULL, NULL, NULL, NULL, NULL, &mainfile, NULL);
	return mainfile;
}

int stacks_unwind_from(struct stacks *s, pid_t tid, const uint64_t regs[STACKS_NREGS],
		       const uint8_t *stack, size_t stack_len, enum stacks_start start,
		       uint64_t *codes, int max_codes)
{
	if (!s || !regs || !codes || max_codes <= 0)
		return 0;
	s->start = start;
	s->stats.samples++;
	stacks_current = s;
	s->tid = tid > 0 && !s->object_path ? tid : s->pid;
	s->regs = regs;
	s->stack = stack;
	s->stack_len = stack ? stack_len : 0;
	s->sp = regs[7];

	int rc = stacks_walk(s);
	/* A pc in no known object: a library dlopen'd since the maps were read. Re-read them
	 * (rate-limited) and unwind again, as the unwinder stopped there for want of CFI. */
	/* (the sample's own pc in no module: the unwinder may have wandered off by frame
	 * pointers and "truncated" means nothing then) */
	if (has_unknown_pc(s) || pc_unknown(s, regs[16])) {
		uint64_t t = now_ns();
		/* the first few at once: a program just started maps its libraries while its
		 * first samples (ld.so's own mappings) come in */
		if (t - s->last_refresh_ns >= AUTO_REFRESH_INTERVAL_NS ||
		    s->stats.refreshes < EARLY_REFRESHES) {
			stacks_refresh(s);
			rc = stacks_walk(s);
		}
	}

	/* unwound to its outermost frame: what it read is all of the stack this thread has */
	s->last_end = rc == 0 && !s->truncated ? s->max_read : 0;
	int n = frames_to_codes(s, codes, max_codes);
	if (s->frames_capped || s->nframes > max_codes) {
		/* the stack goes on past the cap: its end is a marker that says so */
		s->stats.capped_stacks++;
		uint64_t code = capped_code(s, n < max_codes ? n : max_codes - 1);
		if (code) {
			if (n == max_codes)
				n--;
			codes[n++] = code;
		}
	} else if (s->truncated) {
		s->stats.truncated++;
		uint64_t code = truncated_code(s, s->stack_len);
		if (code) {
			if (n == max_codes)
				n--; /* the marker matters more than one more frame */
			codes[n++] = code;
		}
	} else if (rc != 0 && rc != DWARF_CB_ABORT && !(s->nframes && stacks_at_entry_point(s, s->frames[s->nframes - 1].pc))) {
		s->stats.unwind_errors++;
	}
	s->stats.frames += n;
	s->regs = NULL;
	s->stack = NULL;
	return n;
}

int stacks_locations(void *stacks, uint64_t code, const mt_location **locs)
{
	struct stacks *s = stacks;
	const struct code_entry *e = s ? entry_of(s, code) : NULL;
	if (!e)
		return -1;
	*locs = e->locs;
	return e->nlocs;
}

void stacks_set_limits(struct stacks *s, const struct stacks_limits *limits)
{
	s->limits = *limits;
	memo_clear(&s->memo);
	if (s->limits.max_frames <= 0 || s->limits.max_frames > MAX_FRAMES)
		s->limits.max_frames = MAX_FRAMES;
}

void stacks_get_stats(const struct stacks *s, struct stacks_stats *out)
{
	if (s)
		*out = s->stats;
	else
		memset(out, 0, sizeof(*out));
}

void stacks_close(struct stacks *s)
{
	if (!s)
		return;
	if (s->dwfl)
		dwfl_end(s->dwfl);
	if (s->backend_elf) /* after dwfl_end: its backend was opened from it */
		elf_end(s->backend_elf);
	if (s->mem_fd >= 0)
		close(s->mem_fd);
	if (s->root_fd >= 0)
		close(s->root_fd);
	free(s->object_path);
	free(s->final_maps);
	maps_view_free(&s->view);
	perfmap_free(&s->perfmap);
	if (stacks_current == s)
		stacks_current = NULL;
	for (size_t i = 0; i < s->nentries; i++)
		symbolize_free(s->entries[i].locs, s->entries[i].nlocs);
	atomic_fetch_sub(&all_codes, s->nentries);
	free(s->entries);
	u64map_free(&s->pc_codes);
	u64map_free(&s->cfa_kinds);
	memo_clear(&s->memo);
	u64map_free(&s->jit_pcs);
	u64map_free(&s->py_codes);
	stacks_set_python(s, NULL, PY_MODE_NO);
	u64map_free(&s->code_index);
	while (s->objects) {
		struct object *o = s->objects;
		s->objects = o->next;
		symindex_free(&o->syms);
		free(o);
	}
	free(s);
}
