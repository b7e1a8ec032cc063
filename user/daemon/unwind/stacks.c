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
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "symbolize.h"
#include "u64map.h"

#define CODE_MASK ((UINT64_C(1) << 62) - 1)
/* Automatic re-reads of the mappings (a pc in no known object) at most this often. */
#define AUTO_REFRESH_INTERVAL_NS 200000000ull
#define EARLY_REFRESHES 4
/* A failed read this far above the stack copy is "the stack goes on" (truncation). */
#define STACK_SPAN (64ull << 20)
/* Frames collected per unwind before giving up (recursion gone wild, a CFI loop). */
#define MAX_FRAMES 2048

/* Caps on the work one target's files can cause (see struct stacks_limits). */
static const struct stacks_limits default_limits = {
	.max_frames = MAX_FRAMES,
	.max_debug_bytes = UINT64_C(1) << 30,
	.max_symbols = 1u << 22,
	.max_symbolize_ns = UINT64_C(10) * 1000000000u,
	.max_symbolized = 1u << 20,
};

/* ---- objects and codes ---- */
struct object {          /* one per Dwfl_Module, hung on the module's userdata */
	uint64_t hash;       /* of the build-id, or of the path when there is none */
	Dwarf_Addr bias;     /* load address - ELF address */
	enum symbolize_depth depth; /* lowered when the object goes over a cap */
	uint64_t symbolize_ns;      /* time spent symbolizing its frames */
	struct object *next; /* all objects, for stacks_close */
};

struct code_entry {
	uint64_t code, obj_hash, offset;
	mt_location *locs;
	int nlocs;
};

struct frame_pc {
	Dwarf_Addr pc; /* already the call site (return address - 1) for non-activation frames */
};

struct stacks {
	pid_t pid;
	Dwfl *dwfl;
	int mem_fd;  /* /proc/PID/mem, -1 if it could not be opened */
	int root_fd; /* the target's root when it is not ours (O_PATH), else -1 */
	char root_path[32]; /* "/proc/PID/root": how libdw names files opened under root_fd */
	char *object_path;  /* stacks_open_object: the one ELF file, loaded at object_base */
	uint64_t object_base;
	uint64_t last_refresh_ns;

	/* the sample being unwound */
	pid_t tid;
	const uint64_t *regs;
	const uint8_t *stack;
	size_t stack_len;
	uint64_t sp;
	bool truncated;
	uint64_t max_read;        /* past the highest copied byte the unwinder read */
	uint64_t last_end;        /* of the last sample unwound to its end, else 0 */
	bool frames_capped; /* the unwinder gave up at limits.max_frames */
	int frame_index;
	enum stacks_start start;  /* what frame 0 is */
	Dwfl_Module *hidden;      /* that object, while its frames are being left out */
	struct frame_pc frames[MAX_FRAMES];
	int nframes;

	struct u64map pc_codes;   /* pc -> code */
	struct u64map code_index; /* code -> index in entries + 1 */
	struct code_entry *entries;
	size_t nentries, entries_cap;
	struct object *objects;

	struct stacks_stats stats;
	struct stacks_limits limits;
	Dwfl_Module *last_refused; /* the module whose debug file was last refused (counted once) */
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t hash_bytes(uint64_t seed, const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = UINT64_C(0xcbf29ce484222325) ^ seed; /* FNV-1a, then mixed */
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= UINT64_C(0x100000001b3);
	}
	return u64_mix(h);
}

/* Bytes of DWARF in an object's own sections (uncompressed size when compressed). */
static uint64_t debug_bytes(Elf *elf)
{
	size_t shstrndx;
	uint64_t total = 0;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return 0;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
		GElf_Shdr sh;
		const char *name;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
		    !(name = elf_strptr(elf, shstrndx, sh.sh_name)) ||
		    (strncmp(name, ".debug_", 7) != 0 && strncmp(name, ".zdebug_", 8) != 0))
			continue;
		GElf_Chdr ch;
		uint64_t size = (sh.sh_flags & SHF_COMPRESSED) && gelf_getchdr(scn, &ch) ? ch.ch_size : sh.sh_size;
		total += size < (UINT64_C(1) << 48) ? size : (UINT64_C(1) << 48);
	}
	return total;
}

static struct object *module_object(struct stacks *s, Dwfl_Module *mod)
{
	void **userdata = NULL;
	const char *path = dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
	if (userdata && *userdata)
		return *userdata;
	struct object *o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	Dwarf_Addr bias = 0;
	if (!dwfl_module_getelf(mod, &bias))
		dwfl_module_info(mod, NULL, &bias, NULL, NULL, NULL, NULL, NULL); /* no ELF: start */
	o->bias = bias;
	const unsigned char *bits = NULL;
	GElf_Addr vaddr;
	int len = dwfl_module_build_id(mod, &bits, &vaddr);
	/* build-id and path: a stripped copy of an object (same build-id, other symbols) at
	 * another path keeps codes of its own */
	if (!path)
		path = "?";
	o->hash = hash_bytes('P', path, strlen(path));
	if (len > 0)
		o->hash = hash_bytes(o->hash, bits, (size_t)len);
	o->depth = SYMBOLIZE_FULL;
	/* Caps before libdw parses the object's DWARF or searches its symbols (a separate debug
	 * file is checked when found: cb_find_debuginfo). Loading the symbol table is linear; each
	 * lookup in it is too (libdwfl 0.188 scans it), hence the cap on its size. */
	Elf *elf = dwfl_module_getelf(mod, &bias);
	int nsyms = dwfl_module_getsymtab(mod);
	if (elf && debug_bytes(elf) > s->limits.max_debug_bytes)
		o->depth = SYMBOLIZE_NAMES;
	if (nsyms > 0 && (uint64_t)nsyms > s->limits.max_symbols)
		o->depth = SYMBOLIZE_OFFSET;
	if (o->depth != SYMBOLIZE_FULL)
		s->stats.capped_objects++;
	o->next = s->objects;
	s->objects = o;
	if (userdata)
		*userdata = o;
	return o;
}

static struct code_entry *entry_of(const struct stacks *s, uint64_t code)
{
	uint64_t ix = u64map_get(&s->code_index, code);
	return ix ? &s->entries[ix - 1] : NULL;
}

/* The code of (object, offset); symbolizes it (mod, pc: with symbolize_pc; mod NULL: a marker
 * with file/defname) the first time. 0 only when out of memory. */
static uint64_t intern(struct stacks *s, uint64_t obj_hash, uint64_t offset, Dwfl_Module *mod,
		       Dwarf_Addr pc, enum symbolize_depth depth, const char *file,
		       const char *defname)
{
	uint64_t h = u64_mix(obj_hash ^ u64_mix(offset + UINT64_C(0x9e3779b97f4a7c15)));
	for (int tries = 0; tries < 64; tries++, h = u64_mix(h + 1)) {
		uint64_t code = h & CODE_MASK;
		if (!code)
			continue;
		struct code_entry *e = entry_of(s, code);
		if (e) {
			if (e->obj_hash == obj_hash && e->offset == offset)
				return code;
			continue; /* collision: another frame has this code, try the next one */
		}
		if (s->nentries == s->entries_cap) {
			size_t cap = s->entries_cap ? s->entries_cap * 2 : 256;
			struct code_entry *ne = realloc(s->entries, cap * sizeof(*ne));
			if (!ne)
				return 0;
			s->entries = ne;
			s->entries_cap = cap;
		}
		e = &s->entries[s->nentries];
		memset(e, 0, sizeof(*e));
		e->code = code;
		e->obj_hash = obj_hash;
		e->offset = offset;
		int n = mod ? symbolize_pc(mod, pc, depth, &e->locs)
			    : symbolize_marker(file, defname, &e->locs);
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
		return code;
	}
	return 0;
}

static uint64_t marker_code(struct stacks *s, const char *kind, uint64_t offset, const char *file,
			    const char *defname)
{
	return intern(s, hash_bytes('M', kind, strlen(kind)), offset, NULL, 0, SYMBOLIZE_FULL, file,
		      defname);
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

static uint64_t unknown_code(struct stacks *s, Dwarf_Addr pc)
{
	char defname[64];
	snprintf(defname, sizeof defname, "0x%" PRIx64, (uint64_t)pc);
	return marker_code(s, "unknown", pc, STACKS_UNKNOWN_FILE, defname);
}

/* ---- libdw callbacks ---- */

/* The struct stacks whose Dwfl the calling thread is using: libdw's find_elf callback gets no
 * argument of ours (and 0.188 has no module -> Dwfl accessor). Set by every public function
 * that may make libdw load an object; one struct stacks is used by one thread at a time. */
static __thread struct stacks *current;

/* Opens path (absolute, as the target sees it) under the target's root; -1 if absent. */
static int open_in_root(int root_fd, const char *path)
{
	struct open_how how = {.flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT};
	int fd = (int)syscall(SYS_openat2, root_fd, path, &how, sizeof how);
	if (fd < 0)
		return -1;
	struct stat sb;
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) { /* never a device or a directory */
		close(fd);
		return -1;
	}
	return fd;
}

static int cb_find_elf(Dwfl_Module *mod, void **userdata, const char *module_name,
		       Dwarf_Addr base, char **file_name, Elf **elfp)
{
	struct stacks *s = current;
	if (s && s->root_fd >= 0 && module_name[0] == '/') {
		int fd = open_in_root(s->root_fd, module_name);
		if (fd >= 0) {
			/* the name libdw searches .gnu_debuglink files next to: the target's view */
			if (asprintf(file_name, "%s%s", s->root_path, module_name) < 0)
				*file_name = NULL;
			*elfp = NULL;
			return fd;
		}
	}
	return dwfl_linux_proc_find_elf(mod, userdata, module_name, base, file_name, elfp);
}

/* libdw's search for a separate debug file (build-id and .gnu_debuglink files, debuginfod),
 * refusing one larger than the debug-info cap: the object is then named from its symbols. */
static int cb_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
			     GElf_Addr base, const char *file_name, const char *debuglink_file,
			     GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	struct stacks *s = current;
	int fd = dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name,
					      debuglink_file, debuglink_crc, debuginfo_file_name);
	struct stat sb;
	if (fd >= 0 && s && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size > s->limits.max_debug_bytes) {
		close(fd);
		free(*debuginfo_file_name);
		*debuginfo_file_name = NULL;
		if (s->last_refused != mod)
			s->stats.capped_objects++;
		s->last_refused = mod;
		return -1;
	}
	return fd;
}

static const Dwfl_Callbacks proc_callbacks = {
	.find_elf = cb_find_elf,
	.find_debuginfo = cb_find_debuginfo,
};

/* Same file (namespace or directory) for us and the target? */
static bool same_inode(const char *ours, const char *theirs)
{
	struct stat a, b;
	if (stat(ours, &a) != 0 || stat(theirs, &b) != 0)
		return true; /* cannot tell: our own paths are the best guess */
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* root_fd when the target's mount namespace or root is not ours. */
static void open_target_root(struct stacks *s)
{
	char ns[64];
	snprintf(s->root_path, sizeof s->root_path, "/proc/%d/root", (int)s->pid);
	snprintf(ns, sizeof ns, "/proc/%d/ns/mnt", (int)s->pid);
	if (same_inode("/proc/self/ns/mnt", ns) && same_inode("/", s->root_path))
		return;
	s->root_fd = open(s->root_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

static pid_t cb_next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	struct stacks *s = arg;
	if (*thread_argp)
		return 0;
	*thread_argp = s;
	return s->tid;
}

static bool cb_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	struct stacks *s = arg;
	*thread_argp = s;
	return tid == s->tid;
}

static bool cb_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct stacks *s = arg;
	if (addr >= s->sp && addr - s->sp <= s->stack_len && s->stack_len - (addr - s->sp) >= 8) {
		memcpy(result, s->stack + (addr - s->sp), sizeof(*result));
		if (addr + 8 > s->max_read) s->max_read = addr + 8;
		return true;
	}
	if (s->mem_fd < 0 || addr > INT64_MAX - 8)
		return false;
	if (addr >= s->sp && addr - s->sp < STACK_SPAN) {
		/* The live stack above the copy: not used (stale), only probed for existence. A
		 * read of 0 bytes: the target has exited (no memory any more), so its stack cannot
		 * be probed; the unwinder asking for more than the copy says the stack went on. */
		Dwarf_Word probe;
		ssize_t got = pread(s->mem_fd, &probe, sizeof probe, (off_t)addr);
		if (got == (ssize_t)sizeof probe || (got == 0 && s->stack_len > 0))
			s->truncated = true;
		return false;
	}
	if (dwfl_addrmodule(dwfl, addr) &&
	    pread(s->mem_fd, result, sizeof(*result), (off_t)addr) == (ssize_t)sizeof(*result))
		return true;
	return false;
}

static bool cb_set_initial_registers(Dwfl_Thread *thread, void *thread_arg)
{
	struct stacks *s = thread_arg;
	return dwfl_thread_state_registers(thread, 0, STACKS_NREGS, (const Dwarf_Word *)s->regs);
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
	.next_thread = cb_next_thread,
	.get_thread = cb_get_thread,
	.memory_read = cb_memory_read,
	.set_initial_registers = cb_set_initial_registers,
};

/* Is m the process's executable (the object mapped from /proc/PID/exe)? */
static bool module_is_executable(struct stacks *s, Dwfl_Module *m)
{
	const char *mainfile = NULL;
	dwfl_module_info(m, NULL, NULL, NULL, NULL, NULL, &mainfile, NULL);
	if (!mainfile)
		return false;
	struct stat a, b;
	char exe[64];
	snprintf(exe, sizeof exe, "/proc/%d/exe", (int)s->pid);
	return stat(mainfile, &a) == 0 && stat(exe, &b) == 0 && a.st_dev == b.st_dev &&
	       a.st_ino == b.st_ino;
}

static int cb_frame(Dwfl_Frame *frame, void *arg)
{
	struct stacks *s = arg;
	Dwarf_Addr pc;
	bool activation;
	if (!dwfl_frame_pc(frame, &pc, &activation))
		return DWARF_CB_ABORT;
	if (s->frame_index++ == 0 && s->start != STACKS_AT_SYSCALL) {
		/* the allocation function itself, at its entry; or the probe site inside an
		 * in-process sampler, whose object's frames are all left out (a sampler inside
		 * the executable itself: only this frame) */
		if (s->start == STACKS_IN_SAMPLER) {
			Dwfl_Module *m = dwfl_addrmodule(s->dwfl, pc);
			s->hidden = m && !module_is_executable(s, m) ? m : NULL;
		}
		return DWARF_CB_OK;
	}
	if (s->hidden) {
		if (dwfl_addrmodule(s->dwfl, pc - 1) == s->hidden)
			return DWARF_CB_OK;
		s->hidden = NULL;
	}
	if (s->nframes >= s->limits.max_frames) {
		s->frames_capped = true;
		return DWARF_CB_ABORT;
	}
	/* A return address points after the call: pc - 1 is in the call instruction, the line
	 * of the call site (activation frames: interrupted by a signal, the pc itself). */
	s->frames[s->nframes++].pc = activation ? pc : pc - 1;
	return DWARF_CB_OK;
}

/* ---- public API ---- */
static int report_maps(struct stacks *s, char *err, size_t errlen)
{
	dwfl_report_begin(s->dwfl);
	int rc;
	if (s->object_path) /* no process: one object, mapped whole at its base */
		rc = dwfl_report_elf(s->dwfl, s->object_path, s->object_path, -1, s->object_base,
				     false) ? 0 : -1;
	else
		rc = dwfl_linux_proc_report(s->dwfl, s->pid);
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
	current = s;
	if (!object_path)
		open_target_root(s);
	s->dwfl = dwfl_begin(&proc_callbacks);
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
	if (!dwfl_attach_state(s->dwfl, NULL, pid, &thread_callbacks, s)) {
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

struct stacks *stacks_open(pid_t pid, char *err, size_t errlen)
{
	return open_common(pid, NULL, 0, err, errlen);
}

struct stacks *stacks_open_object(const char *path, uint64_t base, char *err, size_t errlen)
{
	/* the pid only names the one thread the callbacks serve: no process is read */
	return open_common(1, path, base, err, errlen);
}

void stacks_refresh(struct stacks *s)
{
	if (!s || !has_mappings(s->pid))
		return;
	current = s;
	report_maps(s, NULL, 0);
	u64map_clear(&s->pc_codes); /* a pc may now belong to another object */
	s->stats.refreshes++;
}

static int unwind_once(struct stacks *s)
{
	s->truncated = false;
	s->frames_capped = false;
	s->frame_index = 0;
	s->nframes = 0;
	s->hidden = NULL;
	s->max_read = 0;
	return dwfl_getthread_frames(s->dwfl, s->tid, cb_frame, s);
}

/* True when some frame's pc lies in no reported module. */
static bool has_unknown_pc(struct stacks *s)
{
	for (int i = 0; i < s->nframes; i++)
		if (!u64map_get(&s->pc_codes, s->frames[i].pc) && !dwfl_addrmodule(s->dwfl, s->frames[i].pc))
			return true;
	return false;
}

static uint64_t code_of_pc(struct stacks *s, Dwarf_Addr pc)
{
	uint64_t code = u64map_get(&s->pc_codes, pc);
	if (code)
		return code;
	Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, pc);
	if (!mod) {
		s->stats.unknown_pcs++;
		return unknown_code(s, pc); /* not cached: a later refresh may find its object */
	}
	struct object *o = module_object(s, mod);
	if (!o)
		return 0;
	enum symbolize_depth depth = o->depth;
	if (s->stats.codes >= s->limits.max_symbolized)
		depth = SYMBOLIZE_OFFSET;
	uint64_t t0 = now_ns();
	code = intern(s, o->hash, pc - o->bias, mod, pc, depth, NULL, NULL);
	o->symbolize_ns += now_ns() - t0;
	if (o->depth != SYMBOLIZE_OFFSET && o->symbolize_ns > s->limits.max_symbolize_ns) {
		if (o->depth == SYMBOLIZE_FULL)
			s->stats.capped_objects++;
		o->depth = SYMBOLIZE_OFFSET;
	}
	if (code)
		u64map_put(&s->pc_codes, pc, code);
	return code;
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
	current = s;
	s->tid = tid > 0 && !s->object_path ? tid : s->pid;
	s->regs = regs;
	s->stack = stack;
	s->stack_len = stack ? stack_len : 0;
	s->sp = regs[7];

	int rc = unwind_once(s);
	/* A pc in no known object: a library dlopen'd since the maps were read. Re-read them
	 * (rate-limited) and unwind again, as the unwinder stopped there for want of CFI. */
	/* (the sample's own pc in no module: the unwinder may have wandered off by frame
	 * pointers and "truncated" means nothing then) */
	if (has_unknown_pc(s) || !dwfl_addrmodule(s->dwfl, regs[16])) {
		uint64_t t = now_ns();
		/* the first few at once: a program just started maps its libraries while its
		 * first samples (ld.so's own mappings) come in */
		if (t - s->last_refresh_ns >= AUTO_REFRESH_INTERVAL_NS ||
		    s->stats.refreshes < EARLY_REFRESHES) {
			stacks_refresh(s);
			rc = unwind_once(s);
		}
	}

	/* unwound to its outermost frame: what it read is all of the stack this thread has */
	s->last_end = rc == 0 && !s->truncated ? s->max_read : 0;
	int n = 0;
	for (int i = 0; i < s->nframes && n < max_codes; i++) {
		uint64_t code = code_of_pc(s, s->frames[i].pc);
		if (code)
			codes[n++] = code;
	}
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
	} else if (rc != 0 && rc != DWARF_CB_ABORT) {
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
	if (s->mem_fd >= 0)
		close(s->mem_fd);
	if (s->root_fd >= 0)
		close(s->root_fd);
	free(s->object_path);
	if (current == s)
		current = NULL;
	for (size_t i = 0; i < s->nentries; i++)
		symbolize_free(s->entries[i].locs, s->entries[i].nlocs);
	free(s->entries);
	u64map_free(&s->pc_codes);
	u64map_free(&s->code_index);
	while (s->objects) {
		struct object *o = s->objects;
		s->objects = o->next;
		free(o);
	}
	free(s);
}
