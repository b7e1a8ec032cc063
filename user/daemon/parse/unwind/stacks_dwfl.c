/* The callbacks libdw calls while it unwinds a sample (see stacks.c): the objects (their hash
 * and their caps) and their debug files, found under the target's root; the thread state (the
 * sample's registers); the memory reads (the stack copy, constant mappings); each frame found. */
#include "stacks_int.h"
#include "debug_copy.h"
#include "stacks_sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

__thread struct stacks *stacks_current;

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

struct object *stacks_module_object(struct stacks *s, Dwfl_Module *mod)
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
	o->shared = len > 0;
	o->depth = SYMBOLIZE_FULL;
	/* Caps before libdw parses the object's DWARF or searches its symbols (a separate debug
	 * file is checked when found: cb_find_debuginfo). Loading the symbol table is linear; each
	 * lookup in it is too (libdwfl 0.188 scans it), hence the cap on its size. */
	Elf *elf = dwfl_module_getelf(mod, &bias);
	int nsyms = dwfl_module_getsymtab(mod);
	o->next = s->objects;
	s->objects = o;
	if (userdata)
		*userdata = o;
	if (elf && debug_bytes(elf) > s->limits.max_debug_bytes) {
		o->depth = SYMBOLIZE_NAMES;
		stacks_note_cap(s, mod, "debug info");
	}
	if (nsyms > 0 && (uint64_t)nsyms > s->limits.max_symbols) {
		o->depth = SYMBOLIZE_OFFSET;
		stacks_note_cap(s, mod, "symbols");
	}
	return o;
}

void stacks_note_cap(struct stacks *s, Dwfl_Module *mod, const char *cap)
{
	void **userdata = NULL;
	const char *path = dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
	struct object *o = userdata ? *userdata : NULL;
	if (o && o->capped)
		return;
	if (o)
		o->capped = true;
	s->stats.capped_objects++;
	const char *base = path && strrchr(path, '/') ? strrchr(path, '/') + 1 : path ? path : "?";
	char *note = s->stats.capped_note;
	size_t len = strlen(note), room = sizeof s->stats.capped_note - len;
	int n = snprintf(note + len, room, "%s%s (%s)", len ? ", " : "", base, cap);
	if (n < 0 || (size_t)n >= room) /* no room: the count says there are more */
		note[len] = '\0';
}

/* ---- libdw callbacks ---- */


/* Opens path (absolute, as the target sees it) under the target's root; -1 if absent. Asked
 * by its /proc/PID/root/ path: the broker resolves it inside that root (RESOLVE_IN_ROOT) with
 * that process's credentials, which a directory fd would not name (issue 35). */
static int open_in_root(const char *root_path, const char *path)
{
	char full[PATH_MAX];
	if (snprintf(full, sizeof full, "%s%s", root_path, path) >= (int)sizeof full)
		return -1;
	int fd = open(full, O_RDONLY | O_CLOEXEC);
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
	struct stacks *s = stacks_current;
	if (s && s->root_fd >= 0 && module_name[0] == '/') {
		int fd = open_in_root(s->root_path, module_name);
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

static const char *debuginfo_prefix;

void stacks_fetch_debuginfo_from(const char *prefix) { debuginfo_prefix = prefix; }

/* libdw's search for a separate debug file (build-id and .gnu_debuglink files, debuginfod),
 * refusing one larger than the debug-info cap: the object is then named from its symbols. */
static int cb_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
			     GElf_Addr base, const char *file_name, const char *debuglink_file,
			     GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	struct stacks *s = stacks_current;
	const unsigned char *id;
	GElf_Addr id_vaddr;
	int id_len = dwfl_module_build_id(mod, &id, &id_vaddr);
	/* The build-id file first, opened here: libdw's own search for it keeps its own handle
	 * of the file (and its own decompressed copy) whatever fd this returns. */
	int fd = -1;
	if (id_len > 1 && id_len <= 64) {
		char path[256];
		int k = snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%02x/", id[0]);
		for (int i = 1; i < id_len && k < (int)sizeof path - 3; i++)
			k += snprintf(path + k, sizeof path - (size_t)k, "%02x", id[i]);
		snprintf(path + k, sizeof path - (size_t)k, ".debug");
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0 && !(*debuginfo_file_name = strdup(path))) {
			close(fd);
			fd = -1;
		}
	}
	if (fd < 0)
		fd = dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name,
						  debuglink_file, debuglink_crc, debuginfo_file_name);
	if (fd < 0 && debuginfo_prefix && id_len > 0 && id_len <= 64) {
		char path[256];
		int k = snprintf(path, sizeof path, "%s", debuginfo_prefix);
		for (int i = 0; i < id_len && k < (int)sizeof path - 3; i++)
			k += snprintf(path + k, sizeof path - (size_t)k, "%02x", id[i]);
		fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	struct stat sb;
	if (fd >= 0 && s && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size > s->limits.max_debug_bytes) {
		close(fd);
		free(*debuginfo_file_name);
		*debuginfo_file_name = NULL;
		stacks_note_cap(s, mod, "debug info");
		return -1;
	}
	return debug_copy_uncompressed(fd);
}

const Dwfl_Callbacks stacks_proc_callbacks = {
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
void stacks_open_target_root(struct stacks *s)
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
		memo_read(&s->memo, true, addr - s->sp, *result);
		return true;
	}
	memo_read(&s->memo, false, 0, 0); /* it depends on more than the copy: not kept */
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

const Dwfl_Thread_Callbacks stacks_thread_callbacks = {
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

/* The symbol pc lies in, or NULL. */
static const char *frame_symbol(struct stacks *s, Dwarf_Addr pc)
{
	Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, pc);
	struct object *o = mod ? stacks_module_object(s, mod) : NULL;
	if (!o || o->depth == SYMBOLIZE_OFFSET) return NULL;
	symindex_build(&o->syms, mod);
	return symindex_find(&o->syms, pc);
}

int stacks_cb_frame(Dwfl_Frame *frame, void *arg)
{
	struct stacks *s = arg;
	Dwarf_Addr pc;
	bool activation;
	if (!dwfl_frame_pc(frame, &pc, &activation))
		return DWARF_CB_ABORT;
	memo_visit(&s->memo, activation ? pc : pc - 1);
	if (s->frame_index > 0) { /* its stack pointer is its callee's CFA, just past the RA */
		Dwarf_Word fsp = 0;
		bool ok = dwfl_frame_reg(frame, 7, &fsp) == 0 && fsp >= s->sp + 8;
		memo_return_address(&s->memo, ok, ok ? fsp - 8 - s->sp : 0);
	}
	if (s->frame_index++ == 0 && s->start != STACKS_AT_SYSCALL) {
		/* the allocation function itself, at its entry; or the probe site inside an
		 * in-process sampler, whose object's frames are all left out (a sampler inside
		 * the executable itself: only this frame) */
		if (s->start == STACKS_IN_SAMPLER) {
			Dwfl_Module *m = dwfl_addrmodule(s->dwfl, pc);
			s->hidden = m && !module_is_executable(s, m) ? m : NULL;
			s->hidden_pc = pc;
		}
		return DWARF_CB_OK;
	}
	if (s->hidden) {
		if (dwfl_addrmodule(s->dwfl, pc - 1) == s->hidden) {
			s->hidden_pc = pc - 1;
			return DWARF_CB_OK;
		}
		s->hidden = NULL;
		/* the wrapper the program called: operator new's frame as uprobes see it, so that
		 * both modes give the same stacks (an allocating wrapper is told the same way) */
		int i = sampler_new_index(frame_symbol(s, s->hidden_pc));
		if (i >= 0 && s->nframes < s->limits.max_frames)
			s->frames[s->nframes++].pc = STACKS_SAMPLER_FRAME | (Dwarf_Addr)i;
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
