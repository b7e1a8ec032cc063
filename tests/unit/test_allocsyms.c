/* allocsyms: which allocation functions a process binds to, where their probes go.
 *
 * The reference for every resolution is the target itself: the attach_* workloads print where
 * dlsym(RTLD_DEFAULT) (the dynamic linker's own binding) put each function, and the test turns
 * those addresses into (file, offset) through the target's /proc/PID/maps, independently of
 * allocsyms' ELF arithmetic. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sites/allocsyms.h"
#include "sites/alloc_defs.h"
#include "sites/forwarder.h"
#include "sites/allocname.h"
#include "sites/probesite.h"
#include "elf/ldso.h"
#include "common/notes.h"
#include "check.h"

static const char *build_dir(void)
{
	const char *b = getenv("BUILD");
	return b && b[0] ? b : "build";
}

static void target_path(const char *name, char *out, size_t len)
{
	snprintf(out, len, "%s/tests/targets/%s", build_dir(), name);
	char real[PATH_MAX];
	if (realpath(out, real)) snprintf(out, len, "%s", real);
}

/* Where the target bound each function: file and file offset, from an address. */
struct binding {
	bool present;
	char path[PATH_MAX];
	uint64_t offset;
};

static int addr_to_file(pid_t pid, uint64_t addr, struct binding *b)
{
	char path[64], line[PATH_MAX + 128];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f) return -1;
	int rc = -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off;
		int pos = 0;
		if (sscanf(line, "%llx-%llx %*s %llx %*s %*s %n", &start, &end, &off, &pos) < 3) continue;
		if (addr < start || addr >= end) continue;
		line[strcspn(line, "\n")] = 0;
		snprintf(b->path, sizeof(b->path), "%s", line + pos);
		b->offset = addr - start + off;
		b->present = true;
		rc = 0;
		break;
	}
	fclose(f);
	return rc;
}

struct child {
	pid_t pid;
	int stdin_fd;
	struct binding bound[AF_COUNT];
};

/* Starts a workload (env: an extra "NAME=value" or NULL) and reads its report. */
static int child_start_in(struct child *c, const char *prog, const char *env, bool new_mnt_ns)
{
	int in[2], out[2];
	memset(c, 0, sizeof(*c));
	if (pipe(in) != 0 || pipe(out) != 0) return -1;
	c->pid = fork();
	if (c->pid < 0) return -1;
	if (c->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		if (env) putenv((char *)env);
		if (new_mnt_ns) execl("/usr/bin/unshare", "unshare", "--mount", prog, (char *)NULL);
		else execl(prog, prog, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->stdin_fd = in[1];
	FILE *f = fdopen(out[0], "r");
	char line[256];
	bool ready = false;
	uint64_t addrs[AF_COUNT] = { 0 };
	while (f && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "READY", 5) == 0) { ready = true; break; }
		char name[64];
		void *a;
		if (sscanf(line, "%63s %p", name, &a) != 2) continue;
		for (int fn = 0; fn < AF_COUNT; fn++)
			if (strcmp(name, alloc_fn_name(fn)) == 0) addrs[fn] = (uint64_t)(uintptr_t)a;
	}
	if (f) fclose(f);
	if (!ready) return -1;
	for (int fn = 0; fn < AF_COUNT; fn++)
		if (addrs[fn]) addr_to_file(c->pid, addrs[fn], &c->bound[fn]);
	return 0;
}

static int child_start(struct child *c, const char *prog, const char *env)
{
	return child_start_in(c, prog, env, false);
}

static void child_stop(struct child *c)
{
	if (c->pid <= 0) return;
	close(c->stdin_fd);
	int status;
	waitpid(c->pid, &status, 0);
	c->pid = 0;
}

static const struct probe_site *site_at(const struct alloc_sites *s, const char *path,
                                        uint64_t entry)
{
	for (int i = 0; i < s->n; i++)
		if (s->sites[i].entry_offset == entry && strcmp(s->sites[i].path, path) == 0)
			return &s->sites[i];
	return NULL;
}

static const struct probe_site *site_of(const struct alloc_sites *s, enum alloc_fn fn)
{
	for (int i = 0; i < s->n; i++)
		if (s->sites[i].fn == fn) return &s->sites[i];
	return NULL;
}

/* Every function the target bound is a site at the same (file, offset), and every site is
 * the target's binding of its function. */
static bool sites_match(const struct alloc_sites *s, const struct binding *bound, char *why,
                        size_t len)
{
	for (int fn = 0; fn < AF_COUNT; fn++) {
		if (!bound[fn].present) continue;
		/* a C++ operator or extension that forwards to another allocation function is left
		 * out on purpose (the notes say so) */
		if (alloc_fn_is_extension(fn) && !site_at(s, bound[fn].path, bound[fn].offset) &&
		    strstr(s->notes, "only forward to another allocation function"))
			continue;
		if (!site_at(s, bound[fn].path, bound[fn].offset)) {
			snprintf(why, len, "%s bound to %s+0x%llx, no such site", alloc_fn_name(fn),
			         bound[fn].path, (unsigned long long)bound[fn].offset);
			return false;
		}
	}
	for (int i = 0; i < s->n; i++) {
		const struct probe_site *p = &s->sites[i];
		const struct binding *b = &bound[p->fn];
		if (!b->present || strcmp(b->path, p->path) != 0 || b->offset != p->entry_offset) {
			snprintf(why, len, "site %s at %s+0x%llx is not what the target bound",
			         alloc_fn_name(p->fn), p->path, (unsigned long long)p->entry_offset);
			return false;
		}
		if (p->probe_offset < p->entry_offset || p->probe_offset > p->entry_offset + 128) {
			snprintf(why, len, "site %s: probe offset 0x%llx far from entry 0x%llx",
			         alloc_fn_name(p->fn), (unsigned long long)p->probe_offset,
			         (unsigned long long)p->entry_offset);
			return false;
		}
		/* an allocating function leaves its entry only for a site the kernel emulates */
		if (!alloc_fn_is_free(p->fn) && p->probe_offset != p->entry_offset && !p->emulated) {
			snprintf(why, len, "%s is probed after its entry at a single-stepped site",
			         alloc_fn_name(p->fn));
			return false;
		}
	}
	return true;
}

static bool same_sites(const struct alloc_sites *a, const struct alloc_sites *b)
{
	if (a->n != b->n) return false;
	for (int i = 0; i < a->n; i++) {
		const struct probe_site *o = site_at(b, a->sites[i].path, a->sites[i].entry_offset);
		if (!o || o->fn != a->sites[i].fn || o->probe_offset != a->sites[i].probe_offset)
			return false;
	}
	return true;
}

/* ---- probe site choice ---- */

static void test_insn_table(void)
{
	static const struct { const char *name; uint8_t bytes[8]; size_t len; bool emulated; } t[] = {
		{ "push %rbp", { 0x55 }, 1, true },
		{ "push %r12", { 0x41, 0x54 }, 2, true },
		{ "push %rbp with REX.W", { 0x48, 0x55 }, 2, false },
		{ "test %rdi,%rdi", { 0x48, 0x85, 0xff }, 3, false },
		{ "call rel32", { 0xe8, 1, 2, 3, 4 }, 5, true },
		{ "call rel32 with 0x66", { 0x66, 0xe8, 1, 2 }, 4, false },
		{ "jmp rel8", { 0xeb, 0x10 }, 2, true },
		{ "je rel8", { 0x74, 0x05 }, 2, true },
		{ "je rel32", { 0x0f, 0x84, 1, 2, 3, 4 }, 6, true },
		{ "nop", { 0x90 }, 1, true },
		{ "pause", { 0xf3, 0x90 }, 2, false },
		{ "xchg %eax,%r8d", { 0x41, 0x90 }, 2, false },
		{ "nopl 0(%rax,%rax)", { 0x0f, 0x1f, 0x44, 0, 0 }, 5, false },
		{ "notrack jmp *%rax", { 0x3e, 0xff, 0xe0 }, 3, false },
		{ "endbr64", { 0xf3, 0x0f, 0x1e, 0xfa }, 4, false },
		{ "sub $0x18,%rsp", { 0x48, 0x83, 0xec, 0x18 }, 4, false },
	};
	int bad = 0;
	char why[256] = "";
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (probe_insn_emulated(t[i].bytes, t[i].len) != t[i].emulated) {
			bad++;
			snprintf(why, sizeof(why), "%s: expected %s", t[i].name,
			         t[i].emulated ? "emulated" : "single-stepped");
		}
	CHECKF("insn_emulation_table", bad == 0, "%s", why);
}

static void test_choice_synthetic(void)
{
	bool em;
	/* test %rdi,%rdi; je +0x10; push %rbp; mov %rdi,%rax; ret */
	static const uint8_t glibc_like[] = { 0x48, 0x85, 0xff, 0x74, 0x10, 0x55, 0x48, 0x89, 0xf8, 0xc3 };
	uint64_t d = probe_site_choose(AF_FREE, glibc_like, sizeof(glibc_like), 0x1000, 0, &em);
	CHECKF("choice_free_after_null_test", d == 5 && em, "delta %llu emulated %d",
	       (unsigned long long)d, em);
	/* an allocating function: the first emulated instruction, the je (every call reaches it) */
	d = probe_site_choose(AF_MALLOC, glibc_like, sizeof(glibc_like), 0x1000, 0, &em);
	CHECKF("choice_malloc_first_emulated", d == 3 && em, "delta %llu", (unsigned long long)d);
	/* jemalloc 5.3's malloc: cmp $0x1000,%rdi; ja +0x20; push %r12 -> the ja */
	static const uint8_t je_malloc[] = { 0x48, 0x81, 0xff, 0x00, 0x10, 0x00, 0x00, 0x77, 0x20,
	                                     0x41, 0x54, 0xc3 };
	d = probe_site_choose(AF_MALLOC, je_malloc, sizeof(je_malloc), 0x1000, 0, &em);
	CHECKF("choice_jemalloc_malloc_ja", d == 7 && em, "delta %llu", (unsigned long long)d);
	/* %rsp moves first (sub $8,%rsp; jne): the return address is no longer at [rsp]: the entry */
	static const uint8_t rsp_moved[] = { 0x48, 0x83, 0xec, 0x08, 0x75, 0x10, 0xc3 };
	d = probe_site_choose(AF_MALLOC, rsp_moved, sizeof(rsp_moved), 0x1000, 0, &em);
	CHECKF("choice_malloc_rsp_moved_entry", d == 0 && !em, "delta %llu", (unsigned long long)d);
	/* an argument register written first (calloc's %rsi: imul %rdi,%rsi; jo): the entry */
	static const uint8_t arg_written[] = { 0x48, 0x0f, 0xaf, 0xf7, 0x70, 0x10, 0xc3 };
	d = probe_site_choose(AF_CALLOC, arg_written, sizeof(arg_written), 0x1000, 0, &em);
	CHECKF("choice_calloc_arg_written_entry", d == 0 && !em, "delta %llu", (unsigned long long)d);

	static const uint8_t cet[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x85, 0xff, 0x0f, 0x84, 0x20,
	                               0, 0, 0, 0x41, 0x54, 0xc3 };
	d = probe_site_choose(AF_FREE, cet, sizeof(cet), 0x2000, 0, &em);
	CHECKF("choice_free_endbr64_je32", d == 13 && em, "delta %llu", (unsigned long long)d);

	/* the instruction after the branch is single-stepped: the je itself (emulated, every
	 * call reaches it with %rdi intact) */
	static const uint8_t next_stepped[] = { 0x48, 0x85, 0xff, 0x74, 0x10, 0x48, 0x85, 0xf6, 0xc3 };
	d = probe_site_choose(AF_FREE, next_stepped, sizeof(next_stepped), 0x1000, 0, &em);
	CHECKF("choice_je_when_next_not_emulated", d == 3 && em, "delta %llu", (unsigned long long)d);

	/* jemalloc-like free: no NULL test first */
	static const uint8_t no_test[] = { 0x48, 0x89, 0xf8, 0x48, 0x8b, 0x15, 1, 2, 3, 4, 0xc3 };
	d = probe_site_choose(AF_FREE, no_test, sizeof(no_test), 0x1000, 0, &em);
	CHECKF("fallback_unknown_entry", d == 0 && !em, "delta %llu", (unsigned long long)d);

	/* bytes that are no x86-64 instruction at all (0x06 is invalid in 64-bit mode) */
	static const uint8_t garbage[] = { 0x06, 0x07, 0x06, 0x07 };
	d = probe_site_choose(AF_FREE, garbage, sizeof(garbage), 0x1000, 0, &em);
	CHECKF("fallback_undecodable", d == 0 && !em, "delta %llu", (unsigned long long)d);

	/* test; je; push %rbp; ...; jmp back to the push: the push is reached twice -> the je */
	static const uint8_t loops[] = { 0x48, 0x85, 0xff, 0x74, 0x06, 0x55, 0x90, 0x90, 0xeb, 0xfb, 0xc3 };
	d = probe_site_choose(AF_FREE, loops, sizeof(loops), 0x1000, sizeof(loops), &em);
	CHECKF("fallback_site_is_branch_target", d == 3, "delta %llu", (unsigned long long)d);
	/* ... and when the loop goes back to the je, which falls through to the push: the entry */
	static const uint8_t loops_je[] = { 0x48, 0x85, 0xff, 0x74, 0x06, 0x55, 0x90, 0x90, 0xeb, 0xf9, 0xc3 };
	d = probe_site_choose(AF_FREE, loops_je, sizeof(loops_je), 0x1000, sizeof(loops_je), &em);
	CHECKF("fallback_every_site_is_branch_target", d == 0 && !em, "delta %llu", (unsigned long long)d);

	/* test %edi,%edi only looks at 32 bits: not a NULL test of a pointer, so not skipped;
	 * the je after it is still the first emulated instruction */
	static const uint8_t test32[] = { 0x85, 0xff, 0x74, 0x10, 0x55, 0xc3 };
	d = probe_site_choose(AF_FREE, test32, sizeof(test32), 0x1000, 0, &em);
	CHECKF("choice_test_edi_not_a_null_test", d == 2, "delta %llu", (unsigned long long)d);

	/* jemalloc-like free: loads and arithmetic, none writing %rdi, then the first branch:
	 * mov %rdi,%rax; mov %rdi,%rcx; shr $0x1a,%rax; cmp %rcx,%rax; jne +0x10; ret */
	static const uint8_t je_like[] = { 0x48, 0x89, 0xf8, 0x48, 0x89, 0xf9, 0x48, 0xc1, 0xe8, 0x1a,
	                                   0x48, 0x39, 0xc8, 0x75, 0x10, 0xc3 };
	d = probe_site_choose(AF_FREE, je_like, sizeof(je_like), 0x1000, 0, &em);
	CHECKF("choice_free_first_branch", d == 13 && em, "delta %llu", (unsigned long long)d);
	d = probe_site_choose(AF_DELETE_SIZED, je_like, sizeof(je_like), 0x1000, 0, &em);
	CHECKF("choice_delete_first_branch", d == 13 && em, "delta %llu", (unsigned long long)d);
	d = probe_site_choose(AF_NEW, je_like, sizeof(je_like), 0x1000, 0, &em);
	CHECKF("choice_new_at_entry", d == 0 && !em, "delta %llu", (unsigned long long)d);
	/* the same, but %rdi is overwritten before the branch (lea -1(%rdi),%rdi): the entry */
	static const uint8_t rdi_written[] = { 0x48, 0x89, 0xf8, 0x48, 0x8d, 0x7f, 0xff, 0x75, 0x10, 0xc3 };
	d = probe_site_choose(AF_FREE, rdi_written, sizeof(rdi_written), 0x1000, 0, &em);
	CHECKF("fallback_rdi_written", d == 0 && !em, "delta %llu", (unsigned long long)d);
	/* %edi written (zero-extends into %rdi): the entry */
	static const uint8_t edi_written[] = { 0x48, 0x89, 0xf8, 0x31, 0xff, 0x75, 0x10, 0xc3 };
	d = probe_site_choose(AF_FREE, edi_written, sizeof(edi_written), 0x1000, 0, &em);
	CHECKF("fallback_edi_written", d == 0 && !em, "delta %llu", (unsigned long long)d);
	/* an indirect jump (not emulated) before anything emulated: the entry */
	static const uint8_t indirect[] = { 0x48, 0x89, 0xf8, 0xff, 0xe0, 0x75, 0x10, 0xc3 };
	d = probe_site_choose(AF_FREE, indirect, sizeof(indirect), 0x1000, 0, &em);
	CHECKF("fallback_indirect_jump_first", d == 0 && !em, "delta %llu", (unsigned long long)d);
	/* an emulated entry (jemalloc's operator delete is `jmp free@plt`): the entry */
	static const uint8_t jmp_entry[] = { 0xe9, 1, 2, 3, 4, 0xc3 };
	d = probe_site_choose(AF_DELETE, jmp_entry, sizeof(jmp_entry), 0x1000, 0, &em);
	CHECKF("choice_emulated_entry_kept", d == 0 && em, "delta %llu", (unsigned long long)d);
}

/* The real glibc free on this machine: the probe goes after `test %rdi,%rdi; je`. */
static void test_glibc_free(void)
{
	void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	void *libc_free = h ? dlsym(h, "free") : NULL;
	Dl_info info;
	if (!libc_free || !dladdr(libc_free, &info) || !info.dli_fname) {
		CHECK("glibc_free_site", 0);
		return;
	}
	char real[PATH_MAX];
	if (!realpath(info.dli_fname, real)) snprintf(real, sizeof(real), "%s", info.dli_fname);
	struct elfobj o;
	char err[512];
	if (elfobj_open(&o, real, err, sizeof(err)) != 0) {
		CHECKF("glibc_free_site", 0, "%s", err);
		return;
	}
	struct fn_def defs[AF_COUNT];
	alloc_defs_of(&o, false, defs);
	uint8_t code[4096];
	ssize_t got = defs[AF_FREE].found ? pread(o.fd, code, sizeof(code), defs[AF_FREE].offset) : -1;
	elfobj_close(&o);
	if (got < 32) {
		CHECKF("glibc_free_site", 0, "cannot read free from %s", real);
		return;
	}
	bool em;
	uint64_t d = probe_site_choose(AF_FREE, code, got, defs[AF_FREE].vaddr, defs[AF_FREE].size, &em);
	size_t t = code[0] == 0xf3 ? 4 : 0;   /* endbr64 */
	bool test_first = code[t] == 0x48 && code[t + 1] == 0x85 && code[t + 2] == 0xff;
	bool after_branch = (d == t + 5 && code[t + 3] == 0x74) ||
	                    (d == t + 9 && code[t + 3] == 0x0f && code[t + 4] == 0x84);
	printf("# glibc free in %s at 0x%llx: probe at +%llu (byte 0x%02x)\n", real,
	       (unsigned long long)defs[AF_FREE].offset, (unsigned long long)d, code[d]);
	CHECKF("glibc_free_starts_with_null_test", test_first, "first bytes %02x %02x %02x",
	       code[t], code[t + 1], code[t + 2]);
	CHECKF("glibc_free_site_after_test_and_branch", test_first && after_branch && em,
	       "delta %llu emulated %d", (unsigned long long)d, em);

	/* and a whole resolution of this process puts the free probe there too, when libc's free
	 * is the one bound (not under a sanitizer, which interposes its own) */
	struct alloc_sites *s = calloc(1, sizeof(*s));
	if (s && alloc_sites_for_pid(getpid(), s, err, sizeof(err)) == 0) {
		const struct probe_site *f = site_of(s, AF_FREE);
		if (f && strcmp(f->path, real) == 0)
			CHECKF("glibc_free_site_in_resolution",
			       f->entry_offset == defs[AF_FREE].offset && f->probe_offset == f->entry_offset + d,
			       "entry 0x%llx probe 0x%llx", (unsigned long long)f->entry_offset,
			       (unsigned long long)f->probe_offset);
	}
	free(s);
}

/* nm -D / readelf semantics: symbol value -> file offset through the PT_LOAD holding it,
 * computed here from binutils' output. */
static bool nm_offset(const char *file, const char *sym, bool dynamic, uint64_t *offset)
{
	char cmd[PATH_MAX + 64], line[512];
	uint64_t value = 0;
	bool found = false;
	snprintf(cmd, sizeof(cmd), "nm %s --defined-only '%s' 2>/dev/null", dynamic ? "-D" : "", file);
	FILE *p = popen(cmd, "r");
	if (!p) return false;
	while (fgets(line, sizeof(line), p)) {
		unsigned long long v;
		char type, name[256];
		if (sscanf(line, "%llx %c %255s", &v, &type, name) != 3) continue;
		if (strcmp(name, sym) == 0 || (strncmp(name, sym, strlen(sym)) == 0 &&
		                               strncmp(name + strlen(sym), "@@", 2) == 0)) {
			value = v;
			found = true;
		}
	}
	pclose(p);
	if (!found) return false;
	snprintf(cmd, sizeof(cmd), "readelf -lW '%s' 2>/dev/null", file);
	p = popen(cmd, "r");
	if (!p) return false;
	found = false;
	while (fgets(line, sizeof(line), p)) {
		unsigned long long off, va, pa, filesz;
		if (sscanf(line, " LOAD 0x%llx 0x%llx 0x%llx 0x%llx", &off, &va, &pa, &filesz) != 4) continue;
		if (value >= va && value < va + filesz) {
			*offset = value - va + off;
			found = true;
		}
	}
	pclose(p);
	return found;
}

static void test_self(void)
{
	struct alloc_sites *s = calloc(1, sizeof(*s));
	char err[512] = "";
	int rc = alloc_sites_for_pid(getpid(), s, err, sizeof(err));
	CHECKF("self_resolves", rc == 0, "%s", err);
	if (rc != 0) { free(s); return; }
	struct binding bound[AF_COUNT] = { 0 };
	for (int fn = 0; fn < AF_COUNT; fn++) {
		void *a = dlsym(RTLD_DEFAULT, alloc_fn_name(fn));
		if (a) addr_to_file(getpid(), (uint64_t)(uintptr_t)a, &bound[fn]);
	}
	char why[PATH_MAX + 128] = "";
	CHECKF("self_sites_are_the_bound_functions", sites_match(s, bound, why, sizeof(why)), "%s", why);
	const struct probe_site *m = site_of(s, AF_MALLOC);
	printf("# allocator: %s; %d sites\n", s->allocator, s->n);
	if (m && strstr(m->path, "/libc.so"))
		CHECKF("self_allocator_named_glibc", strncmp(s->allocator, "glibc 2.", 8) == 0 &&
		       strstr(s->allocator, m->path), "allocator \"%s\"", s->allocator);
	uint64_t nm_off;
	if (m && strstr(m->path, "/libc.so") && nm_offset(m->path, "malloc", true, &nm_off))
		CHECKF("self_malloc_offset_matches_nm_D", nm_off == m->entry_offset,
		       "nm/readelf 0x%llx, allocsyms 0x%llx", (unsigned long long)nm_off,
		       (unsigned long long)m->entry_offset);
	/* aligned_alloc and memalign are one function in glibc: listed once */
	int at_memalign = 0;
	for (int i = 0; i < s->n; i++)
		if (bound[AF_MEMALIGN].present && s->sites[i].entry_offset == bound[AF_MEMALIGN].offset &&
		    strcmp(s->sites[i].path, bound[AF_MEMALIGN].path) == 0)
			at_memalign++;
	CHECKF("self_aliases_listed_once", at_memalign <= 1, "%d sites at memalign's entry", at_memalign);
	free(s);
}

/* A spawned workload: pid mode must bind like the target; exec mode must predict the same. */
static void test_workload(const char *name, const char *env, const char *expect_malloc_in,
                          const char *expect_allocator_prefix)
{
	char prog[PATH_MAX], check[256], err[1024] = "", why[PATH_MAX + 128] = "";
	target_path(name, prog, sizeof(prog));
	struct child c;
	snprintf(check, sizeof(check), "%s%s_starts", name, env ? "_preload" : "");
	if (access(prog, X_OK) != 0 || child_start(&c, prog, env) != 0) {
		CHECKF(check, 0, "cannot run %s (make all first)", prog);
		return;
	}
	CHECK(check, 1);
	struct alloc_sites *s = calloc(1, sizeof(*s)), *e = calloc(1, sizeof(*e));
	int rc = alloc_sites_for_pid(c.pid, s, err, sizeof(err));
	snprintf(check, sizeof(check), "%s%s_pid_resolves", name, env ? "_preload" : "");
	CHECKF(check, rc == 0, "%s", err);
	if (rc == 0) {
		snprintf(check, sizeof(check), "%s%s_pid_sites_are_the_bound_functions", name,
		         env ? "_preload" : "");
		CHECKF(check, sites_match(s, c.bound, why, sizeof(why)), "%s", why);
		const struct probe_site *m = site_of(s, AF_MALLOC);
		const char *want = strcmp(expect_malloc_in, "EXE") == 0 ? prog : expect_malloc_in;
		snprintf(check, sizeof(check), "%s%s_malloc_in_%s", name, env ? "_preload" : "",
		         strcmp(expect_malloc_in, "EXE") == 0 ? "executable" : "library");
		CHECKF(check, m && strstr(m->path, want), "malloc in %s, expected %s",
		       m ? m->path : "(none)", want);
		snprintf(check, sizeof(check), "%s%s_allocator_name", name, env ? "_preload" : "");
		CHECKF(check, strncmp(s->allocator, expect_allocator_prefix,
		                      strlen(expect_allocator_prefix)) == 0,
		       "allocator \"%s\"", s->allocator);
		printf("# %s: %s; notes: %s\n", name, s->allocator, s->notes);
	}
	/* exec mode, with the same environment */
	char *var = env ? strdup(env) : NULL;
	if (var) putenv(var);
	int erc = alloc_sites_for_exec(prog, 0, e, err, sizeof(err));
	if (var) {
		*strchr(var, '=') = 0;
		unsetenv(var);
	}
	snprintf(check, sizeof(check), "%s%s_exec_mode_predicts_pid_mode", name, env ? "_preload" : "");
	CHECKF(check, erc == 0 && rc == 0 && same_sites(s, e), "exec rc %d (%s), %d vs %d sites",
	       erc, err, e->n, s->n);
	free(var);
	free(s);
	free(e);
	child_stop(&c);
}

static void test_static_nm(void)
{
	char prog[PATH_MAX], err[512];
	target_path("attach_static", prog, sizeof(prog));
	struct alloc_sites *s = calloc(1, sizeof(*s));
	uint64_t nm_off = 0;
	if (alloc_sites_for_exec(prog, 0, s, err, sizeof(err)) != 0 ||
	    !nm_offset(prog, "malloc", false, &nm_off)) {
		CHECKF("static_malloc_offset_matches_nm", 0, "%s", err);
	} else {
		const struct probe_site *m = site_of(s, AF_MALLOC);
		CHECKF("static_malloc_offset_matches_nm", m && m->entry_offset == nm_off &&
		       nm_off < 0x400000, "nm/readelf 0x%llx, allocsyms 0x%llx",
		       (unsigned long long)nm_off, m ? (unsigned long long)m->entry_offset : 0ULL);
	}
	free(s);
}

static void test_exec_true(void)
{
	struct alloc_sites *s = calloc(1, sizeof(*s));
	char err[512] = "";
	int rc = alloc_sites_for_exec("true", 0, s, err, sizeof(err));   /* through $PATH */
	const struct probe_site *m = rc == 0 ? site_of(s, AF_MALLOC) : NULL;
	const struct probe_site *f = rc == 0 ? site_of(s, AF_FREE) : NULL;
	CHECKF("exec_true_binds_libc", m && f && strstr(m->path, "/libc.so.6") &&
	       strncmp(s->allocator, "glibc", 5) == 0, "rc %d %s: %s", rc, err,
	       m ? m->path : "(no malloc)");
	CHECKF("exec_true_free_probe_after_null_test", f && f->probe_offset > f->entry_offset &&
	       f->emulated, "free entry 0x%llx probe 0x%llx", f ? (unsigned long long)f->entry_offset : 0ULL,
	       f ? (unsigned long long)f->probe_offset : 0ULL);
	free(s);
}

/* A library found through DT_RUNPATH=$ORIGIN/lib that defines malloc and free: built here. */
static void test_exec_runpath(void)
{
	char dir[] = "/tmp/allocsyms-rpath.XXXXXX";
	if (!mkdtemp(dir)) { CHECK("exec_runpath_origin", 0); return; }
	char cmd[2048], path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/lib", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/a.c", dir);
	FILE *f = fopen(path, "w");
	fputs("#include <stddef.h>\nstatic char a[1<<20]; static size_t u;\n"
	      "void *malloc(size_t n){void*p=a+u;u+=(n+15)&~15ul;return p;}\nvoid free(void*p){}\n", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/m.c", dir);
	f = fopen(path, "w");
	fputs("#include <stdlib.h>\nint main(void){free(malloc(1));return 0;}\n", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/n.c", dir);
	f = fopen(path, "w");
	fputs("void _start(void){for(;;);}\n", f);
	fclose(f);
	snprintf(cmd, sizeof(cmd),
	         "cd %s && cc -shared -fPIC -o lib/libmyalloc.so a.c && "
	         "cc -o prog m.c -Llib -lmyalloc '-Wl,-rpath,$ORIGIN/lib' -Wl,--enable-new-dtags && "
	         "cc -static -nostdlib -o nomalloc n.c", dir);
	if (system(cmd) != 0) {
		CHECKF("exec_runpath_origin", 0, "cannot build with cc: %s", cmd);
		goto out;
	}
	struct alloc_sites *s = calloc(1, sizeof(*s));
	char err[512] = "";
	snprintf(path, sizeof(path), "%s/prog", dir);
	int rc = alloc_sites_for_exec(path, 0, s, err, sizeof(err));
	const struct probe_site *m = rc == 0 ? site_of(s, AF_MALLOC) : NULL;
	const struct probe_site *c = rc == 0 ? site_of(s, AF_CALLOC) : NULL;
	CHECKF("exec_runpath_origin_interposer", m && strstr(m->path, "/lib/libmyalloc.so") &&
	       c && strstr(c->path, "libc.so.6"), "rc %d %s: malloc %s, calloc %s", rc, err,
	       m ? m->path : "-", c ? c->path : "-");
	snprintf(path, sizeof(path), "%s/nomalloc", dir);
	rc = alloc_sites_for_exec(path, 0, s, err, sizeof(err));
	CHECKF("error_no_allocator", rc == -1 && strstr(err, "no allocator found"), "rc %d: %s", rc, err);
	free(s);
out:
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

/* A target in another mount namespace: its objects are opened through /proc/PID/root. */
static void test_other_mount_ns(void)
{
	char prog[PATH_MAX], err[512] = "", why[PATH_MAX + 128] = "";
	target_path("attach_pie", prog, sizeof(prog));
	struct child c;
	if (access("/usr/bin/unshare", X_OK) != 0 || child_start_in(&c, prog, NULL, true) != 0) {
		printf("%s other_mount_ns: cannot run unshare --mount\n",
		       getenv("CI") && strcmp(getenv("CI"), "true") == 0 ? "FAIL" : "SKIP");
		return;
	}
	struct alloc_sites *s = calloc(1, sizeof(*s));
	int rc = alloc_sites_for_pid(c.pid, s, err, sizeof(err));
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "/proc/%d/root/", (int)c.pid);
	bool prefixed = rc == 0 && s->n > 0;
	for (int i = 0; i < s->n; i++) {
		struct probe_site *p = &s->sites[i];
		if (strncmp(p->path, prefix, strlen(prefix)) != 0) { prefixed = false; break; }
		/* compare the rest with what the target's maps show */
		memmove(p->path, p->path + strlen(prefix) - 1, strlen(p->path) - strlen(prefix) + 2);
	}
	CHECKF("other_mount_ns_paths_through_proc_root", prefixed, "rc %d %s: %s", rc, err,
	       s->n ? s->sites[0].path : "(no sites)");
	CHECKF("other_mount_ns_sites_are_the_bound_functions",
	       prefixed && sites_match(s, c.bound, why, sizeof(why)), "%s", why);
	free(s);
	child_stop(&c);
}

/* A running program whose executable was deleted (replaced on disk): read via /proc/PID/exe. */
static void test_deleted_exe(void)
{
	char prog[PATH_MAX], copy[] = "/tmp/allocsyms-deleted.XXXXXX", cmd[2 * PATH_MAX], err[512] = "";
	target_path("attach_interpose", prog, sizeof(prog));
	int fd = mkstemp(copy);
	if (fd < 0) { CHECK("deleted_exe_through_proc_exe", 0); return; }
	close(fd);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && chmod +x '%s'", prog, copy, copy);
	struct child c;
	if (system(cmd) != 0 || child_start(&c, copy, NULL) != 0) {
		CHECKF("deleted_exe_through_proc_exe", 0, "cannot run a copy of %s", prog);
		unlink(copy);
		return;
	}
	unlink(copy);
	struct alloc_sites *s = calloc(1, sizeof(*s));
	int rc = alloc_sites_for_pid(c.pid, s, err, sizeof(err));
	char proc_exe[64];
	snprintf(proc_exe, sizeof(proc_exe), "/proc/%d/exe", (int)c.pid);
	const struct probe_site *m = rc == 0 ? site_of(s, AF_MALLOC) : NULL;
	CHECKF("deleted_exe_through_proc_exe", m && strcmp(m->path, proc_exe) == 0 &&
	       c.bound[AF_MALLOC].present && m->entry_offset == c.bound[AF_MALLOC].offset &&
	       strstr(s->notes, "deleted"), "rc %d %s: malloc %s, notes \"%s\"", rc, err,
	       m ? m->path : "-", s->notes);
	free(s);
	child_stop(&c);
}

static void test_errors(void)
{
	struct alloc_sites *s = calloc(1, sizeof(*s));
	char err[512] = "";
	long pid_max = 4194304;
	FILE *f = fopen("/proc/sys/kernel/pid_max", "r");
	if (f) { if (fscanf(f, "%ld", &pid_max) != 1) pid_max = 4194304; fclose(f); }
	int rc = alloc_sites_for_pid((pid_t)pid_max + 1, s, err, sizeof(err));
	CHECKF("error_no_such_pid", rc == -1 && strstr(err, "no process"), "rc %d: %s", rc, err);
	err[0] = 0;
	rc = alloc_sites_for_pid(2, s, err, sizeof(err));   /* kthreadd */
	CHECKF("error_kernel_thread", rc == -1 && strstr(err, "kernel thread"), "rc %d: %s", rc, err);
	err[0] = 0;
	rc = alloc_sites_for_exec("/nonexistent/prog", 0, s, err, sizeof(err));
	CHECKF("error_exec_missing", rc == -1 && strstr(err, "/nonexistent/prog"), "rc %d: %s", rc, err);
	err[0] = 0;
	rc = alloc_sites_for_exec("/etc/passwd", 0, s, err, sizeof(err));
	CHECKF("error_exec_not_elf", rc == -1 && strstr(err, "not an ELF"), "rc %d: %s", rc, err);
	err[0] = 0;
	rc = alloc_sites_for_exec("no-such-command-memtraced", 0, s, err, sizeof(err));
	CHECKF("error_exec_not_in_path", rc == -1 && strstr(err, "not found"), "rc %d: %s", rc, err);
	free(s);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_insn_table();
	test_choice_synthetic();
	test_glibc_free();
	test_self();
	test_workload("attach_pie", NULL, "/libc.so.6", "glibc 2.");
	test_workload("attach_nopie", NULL, "/libc.so.6", "glibc 2.");
	test_workload("attach_static", NULL, "EXE", "glibc compiled into the executable");
	test_workload("attach_interpose", NULL, "EXE", "the executable's own allocator");
	if (access("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", R_OK) == 0)
		test_workload("attach_pie", "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
		              "libjemalloc.so.2", "jemalloc");
	else
		printf("%s jemalloc_preload: libjemalloc2 is not installed (make deps)\n",
		       getenv("CI") && strcmp(getenv("CI"), "true") == 0 ? "FAIL" : "SKIP");
	test_static_nm();
	test_exec_true();
	test_exec_runpath();
	test_other_mount_ns();
	test_deleted_exe();
	test_errors();
	return CHECK_DONE();
}
