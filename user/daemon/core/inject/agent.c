/* The agent (see agent.h): its code in a cave, its region, the stubs, the jobs. */
#include "agent.h"
#include "door/door.h"

#include <cpuid.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "inject_agent.h"
#include "inject_int.h"

extern const unsigned char inject_agent_blob[], inject_agent_blob_data[], inject_agent_blob_end[];

#define REGION_BYTES 8192
_Static_assert(sizeof(struct inject_agent_region) <= REGION_BYTES, "the region holds its struct");
#define PAGE 4096ULL

struct inject_agent {
	pid_t pid;
	int mem_fd;
	uint64_t cave;    /* where the blob is in the target */
	struct cave_home { uint64_t lo, off; char path[512]; } home; /* the cave's mapping */
	uint64_t region;  /* the mapped region */
	uint64_t seq;     /* the last job's number */
	uint64_t fn_create, fns[5]; /* pthread_create; pthread_self, _detach, dlopen, dlsym, dlerror */
	uint64_t fn_attr[2];        /* pthread_attr_init, pthread_attr_setstacksize */
	uint64_t fp_size; /* XSAVE area size, 0: FXSAVE */
	inject_safe_fn safe;
	void *safe_ctx;
	bool busy;        /* a job's thread may still write the region: never unmap it */
	uint64_t single_flag[2]; /* glibc's __libc_single_threaded, 1 before our first thread: put
	                            back with the TCB's flag when ours are gone (single_mode_back);
	                            a copy in the executable (copy relocation) and libc's own */
	bool single_back;     /* it was */
};

static long ms_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

/* The XSAVE area size for the features the OS enabled (CPUID 0xD), or 0 without XSAVE. */
static uint64_t xsave_size(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0; /* OSXSAVE */
	__cpuid_count(0xd, 0, a, b, c, d);
	return b >= 576 ? b : 0;
}

struct mapping {
	uint64_t lo, hi, off;
	char perms[5];
	char path[512];
};

/* /proc/PID/maps, at most max mappings. */
static int read_maps(pid_t pid, struct mapping *m, int max)
{
	char line[1024];
	FILE *f = door_proc_fopen(pid, "maps");
	if (!f) return -1;
	int n = 0;
	while (n < max && fgets(line, sizeof line, f)) {
		int pos = 0;
		if (sscanf(line, "%lx-%lx %4s %lx %*s %*s %n", &m[n].lo, &m[n].hi, m[n].perms, &m[n].off,
			   &pos) < 4)
			continue;
		m[n].path[0] = 0;
		if (pos > 0) {
			line[strcspn(line, "\n")] = 0;
			snprintf(m[n].path, sizeof m[n].path, "%s", line + pos);
		}
		n++;
	}
	fclose(f);
	return n;
}

#define MAX_MAPS 4096

/* A cave for the blob: the tail of an executable PT_LOAD's last page, past its end, inside the
 * mapping, holding only zeros or our blob already (an earlier memtraced's). */
static int find_cave(struct inject_agent *a, struct mapping *m, int n, size_t need)
{
	unsigned char buf[4096];
	for (int i = 0; i < n; i++) {
		if (m[i].perms[2] != 'x' || m[i].path[0] != '/') continue;
		uint64_t base = 0;
		for (int j = 0; j < n; j++)
			if (m[j].off == 0 && strcmp(m[j].path, m[i].path) == 0) { base = m[j].lo; break; }
		Elf64_Ehdr eh;
		if (!base || inject_mem_read(a->mem_fd, base, &eh, sizeof eh) != 0 ||
		    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
		    eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > 64)
			continue;
		Elf64_Phdr ph[64];
		if (inject_mem_read(a->mem_fd, base + eh.e_phoff, ph, eh.e_phnum * sizeof ph[0]) != 0)
			continue;
		uint64_t first = UINT64_MAX;
		for (int k = 0; k < eh.e_phnum; k++)
			if (ph[k].p_type == PT_LOAD && ph[k].p_vaddr < first) first = ph[k].p_vaddr;
		if (first == UINT64_MAX) continue;
		uint64_t bias = eh.e_type == ET_DYN ? base - (first & ~(PAGE - 1)) : 0;
		for (int k = 0; k < eh.e_phnum; k++) {
			if (ph[k].p_type != PT_LOAD || !(ph[k].p_flags & PF_X)) continue;
			uint64_t end = bias + ph[k].p_vaddr + ph[k].p_memsz;
			uint64_t lo = (end + 63) & ~63ULL, hi = (end + PAGE - 1) & ~(PAGE - 1);
			if (hi < lo + need || lo < m[i].lo || hi > m[i].hi) continue;
			if (inject_mem_read(a->mem_fd, lo, buf, need) != 0) continue;
			size_t code = inject_agent_blob_data - inject_agent_blob;
			bool zero = true;
			for (size_t b = 0; b < need && zero; b++) zero = buf[b] == 0;
			if (!zero && memcmp(buf, inject_agent_blob, code) != 0) continue;
			a->cave = lo;
			a->home.lo = m[i].lo;
			a->home.off = m[i].off;
			snprintf(a->home.path, sizeof a->home.path, "%s", m[i].path);
			return 0;
		}
	}
	return -1;
}

/* An address for the region: below the lowest mapping of the mmap area (where the kernel
 * would put a new mapping: its libraries, at 0x7e.. to 0x7f.. with ASLR), with a gap on both
 * sides, shifted down by skip regions (a retry); never right below the stack (the kernel keeps
 * a guard gap of 1 MiB there, where a mapping is refused: such a pick once failed three times
 * over); else the largest gap above 4 GiB. */
static uint64_t pick_region(struct mapping *m, int n, size_t len, int skip)
{
	const uint64_t margin = 1 << 16, floor = 1ULL << 40, top = 0x7ffffffff000ULL;
	uint64_t best = 0, best_gap = 0, step = (uint64_t)skip * (len + margin);
	for (int i = 1; i < n; i++) {
		uint64_t gap_lo = m[i - 1].hi, gap_hi = m[i].lo;
		bool special = m[i].path[0] == '[' && strcmp(m[i].path, "[heap]") != 0;
		if (special || gap_hi > top || gap_hi <= gap_lo ||
		    gap_hi - gap_lo < len + 2 * margin + step)
			continue;
		uint64_t at = (gap_hi - margin - len - step) & ~(PAGE - 1);
		if (gap_hi >= floor) return at;
		if (gap_lo >= (1ULL << 32) && gap_hi - gap_lo > best_gap) {
			best_gap = gap_hi - gap_lo;
			best = at;
		}
	}
	return best;
}

struct stub_job {
	struct inject_agent *a;
	uint64_t op, a0, a1, a2, fn;
	bool single_back; /* glibc's single-thread mode put back first, if one thread is left */
};

/* ---- glibc's single-thread mode (issue 47) ----
 * glibc leaves its single-thread mode for good at the first pthread_create:
 * __libc_single_threaded goes to 0 and the creator's TCB says multiple_threads = 1. From then
 * on malloc takes its arena lock, stdio its locks, libstdc++'s reference counts go atomic,
 * and a program whose signal handler mallocs (unsafe, yet reliable while single-threaded)
 * deadlocks. Our agent's threads did that to programs that never had a thread, after a clean
 * detach too. So the flag's address is kept when the process has one thread and the flag is
 * 1 (a program that had threads has 0: left alone), and when ours are gone and the process
 * has one thread again, both are put back while that thread is stopped at a safe moment
 * (outside libc's allocator and loader, where a lock taken in the other mode could be held).
 * With one thread, stopped, nothing else of the program runs meanwhile. */
#define TCB_MULTIPLE_THREADS 0x18 /* x86-64 glibc: tcbhead_t's int multiple_threads */

static int thread_count(pid_t pid)
{
	char line[256];
	int n = -1;
	FILE *f = door_proc_fopen(pid, "status");
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "Threads: %d", &n) == 1) break;
	if (f) fclose(f);
	return n;
}

/* Both of glibc's flags (pthread_create clears its own and the one programs read, which a
 * copy relocation may have put in the executable): kept only when each is 1 now. */
static void single_flags_of(struct inject_agent *a)
{
	uint64_t addr[2] = {0, 0};
	char e[256];
	if (thread_count(a->pid) != 1) return;
	int n = inject_find_definitions(a->pid, "__libc_single_threaded", addr, 2, e, sizeof e);
	for (int i = 0; i < n; i++) {
		uint8_t v = 0;
		if (inject_mem_read(a->mem_fd, addr[i], &v, 1) != 0 || v != 1) return;
	}
	if (n > 0) memcpy(a->single_flag, addr, sizeof addr);
}

/* On the one thread left, stopped: its TCB's flag to 0, then __libc_single_threaded to 1. */
static void single_mode_back(struct inject_agent *a, const struct user_regs_struct *r)
{
	uint8_t one = 1;
	int32_t zero = 0, was = 0;
	if (!a->single_flag[0] || !r->fs_base || thread_count(a->pid) != 1) return;
	uint64_t tcb = r->fs_base + TCB_MULTIPLE_THREADS;
	if (inject_mem_read(a->mem_fd, tcb, &was, sizeof was) != 0 || (was != 0 && was != 1)) return;
	if (inject_mem_write(a->mem_fd, tcb, &zero, sizeof zero) != 0) return;
	bool ok = true;
	for (int i = 0; i < 2 && a->single_flag[i]; i++)
		ok &= inject_mem_write(a->mem_fd, a->single_flag[i], &one, 1) == 0;
	a->single_back = ok;
}

static int write_stub_data(void *ctx, uint64_t resume_rip, const struct user_regs_struct *stopped,
			   char *err, size_t errlen)
{
	struct stub_job *j = ctx;
	if (j->single_back) single_mode_back(j->a, stopped);
	uint64_t d[AGENT_DATA_BYTES / 8] = {resume_rip, j->op, j->a0, j->a1, j->a2, j->fn,
					    j->a->fp_size};
	uint64_t at = j->a->cave + (uint64_t)(inject_agent_blob_data - inject_agent_blob);
	if (inject_mem_write(j->a->mem_fd, at, d, sizeof d) != 0) {
		inject_err(err, errlen, "cannot write the stub's data into pid %d: %s", (int)j->a->pid,
			   strerror(errno));
		return -1;
	}
	return 0;
}

/* Puts the blob's code into a cave (find_cave) and writes it there. */
static int place_code(struct inject_agent *a, struct mapping *m, int n, char *err, size_t errlen)
{
	size_t need = inject_agent_blob_end - inject_agent_blob;
	if (find_cave(a, m, n, need) != 0) {
		inject_err(err, errlen, "pid %d: no room for the agent's %zu bytes at the end of an "
			   "executable segment", (int)a->pid, need);
		return -1;
	}
	size_t code = inject_agent_blob_data - inject_agent_blob;
	if (inject_mem_write(a->mem_fd, a->cave, inject_agent_blob, code) != 0) {
		inject_err(err, errlen, "cannot write the agent's code into pid %d: %s", (int)a->pid,
			   strerror(errno));
		return -1;
	}
	return 0;
}

/* The cave is checked before every stub (issue 34): it may lie in a plugin that was unloaded
 * since, and another object mapped at the same address, whose bytes a jump there would run.
 * Same mapping (start, file offset, path) and our code still there, or a new cave is found. */
static int check_cave(struct inject_agent *a, char *err, size_t errlen)
{
	struct mapping *m = malloc(MAX_MAPS * sizeof *m);
	if (!m) {
		inject_err(err, errlen, "out of memory");
		return -1;
	}
	int n = read_maps(a->pid, m, MAX_MAPS), rc = 0;
	size_t code = inject_agent_blob_data - inject_agent_blob;
	unsigned char buf[4096];
	bool same = false;
	for (int i = 0; i < n && !same; i++)
		same = a->cave >= m[i].lo && a->cave < m[i].hi && m[i].lo == a->home.lo &&
		       m[i].off == a->home.off && strcmp(m[i].path, a->home.path) == 0;
	if (same && inject_mem_read(a->mem_fd, a->cave, buf, code) == 0 &&
	    memcmp(buf, inject_agent_blob, code) == 0)
		goto out;
	if (n <= 0) {
		inject_err(err, errlen, "cannot read the mappings of pid %d", (int)a->pid);
		rc = -1;
		goto out;
	}
	rc = place_code(a, m, n, err, errlen);
out:
	free(m);
	return rc;
}

static int run_stub(struct inject_agent *a, struct stub_job *j, inject_safe_fn safe, long wait_ms,
		    pid_t *tid, char *err, size_t errlen)
{
	if (check_cave(a, err, errlen) != 0) return -1;
	j->a = a;
	return inject_redirect(a->pid, a->cave, safe, a->safe_ctx, write_stub_data, j, wait_ms, tid,
			       err, errlen);
}

/* Polls an 8-byte word of the target until it equals want (or the process is gone). */
static int wait_word(struct inject_agent *a, uint64_t addr, uint64_t want, long timeout_ms)
{
	long until = ms_now() + timeout_ms;
	for (int i = 0;; i++) {
		uint64_t v = 0;
		if (inject_mem_read(a->mem_fd, addr, &v, 8) == 0 && v == want) return 0;
		if (kill(a->pid, 0) != 0 || ms_now() >= until) return -1;
		usleep(i < 50 ? 200 : 2000);
	}
}

static int find_fns(struct inject_agent *a, char *err, size_t errlen)
{
	static const char *const names[] = {"pthread_create", "pthread_self", "pthread_detach",
					    "dlopen", "dlsym", "dlerror", "pthread_attr_init",
					    "pthread_attr_setstacksize"};
	for (int i = 0; i < 8; i++) {
		uint64_t *out = i == 0 ? &a->fn_create : i < 6 ? &a->fns[i - 1] : &a->fn_attr[i - 6];
		char e[512];
		if (inject_find_symbol(a->pid, names[i], out, NULL, 0, e, sizeof e) != 0) {
			inject_err(err, errlen, "no %s in pid %d: %s", names[i], (int)a->pid, e);
			return -1;
		}
	}
	return 0;
}

int inject_agent_open(pid_t pid, inject_safe_fn safe, void *safe_ctx, struct inject_agent **out,
		      char *err, size_t errlen)
{
	*out = NULL;
	if (inject_check_target(pid, err, errlen) != 0) return -1;
	struct inject_agent *a = calloc(1, sizeof *a);
	struct mapping *m = malloc(MAX_MAPS * sizeof *m);
	if (!a || !m) {
		free(a);
		free(m);
		inject_err(err, errlen, "out of memory");
		return -1;
	}
	a->pid = pid;
	a->safe = safe;
	a->safe_ctx = safe_ctx;
	a->fp_size = xsave_size();
	a->mem_fd = inject_mem_open(pid, true);
	int n = a->mem_fd >= 0 ? read_maps(pid, m, MAX_MAPS) : -1;
	if (n <= 0) {
		inject_err(err, errlen, "cannot read the memory or mappings of pid %d: %s", (int)pid,
			   strerror(errno));
		goto fail;
	}
	if (find_fns(a, err, errlen) != 0 || place_code(a, m, n, err, errlen) != 0) goto fail;
	single_flags_of(a); /* before any thread of ours */
	uint64_t nonce;
	if (getrandom(&nonce, sizeof nonce, 0) != sizeof nonce) nonce = (uint64_t)ms_now() * 2654435761u;
	nonce |= 1;
	char e[512] = "";
	for (int tries = 0; tries < 3 && !a->region; tries++) {
		if (tries) n = read_maps(pid, m, MAX_MAPS);
		uint64_t at = pick_region(m, n, REGION_BYTES, tries);
		if (!at) {
			inject_err(e, sizeof e, "no free address range for %d bytes", REGION_BYTES);
			break;
		}
		struct stub_job j = {.op = AGENT_STUB_MMAP, .a0 = at, .a1 = REGION_BYTES, .a2 = nonce};
		pid_t tid = 0;
		if (run_stub(a, &j, NULL, 2000, &tid, e, sizeof e) != 0) break;
		if (wait_word(a, at, nonce, 5000) == 0) a->region = at;
		else {
			/* what the thread and the address look like now: for the report */
			char st[64] = "?", line[512];
			FILE *f = door_proc_fopen(pid, "task/%d/stat", (int)tid);
			if (f && fgets(line, sizeof line, f)) {
				char *c = strrchr(line, ')');
				if (c) snprintf(st, sizeof st, "%.20s", c + 2);
			}
			if (f) fclose(f);
			int now = read_maps(pid, m, MAX_MAPS);
			bool mapped = false;
			for (int k = 0; k < now; k++) mapped |= at >= m[k].lo && at < m[k].hi;
			inject_err(e, sizeof e, "the region was not mapped at 0x%llx by thread %d (state "
				   "now: %s; the address is %s)", (unsigned long long)at, (int)tid, st,
				   mapped ? "mapped, by another" : "free");
		}
	}
	if (!a->region) {
		inject_err(err, errlen, "pid %d: cannot map the agent's region: %s", (int)pid, e);
		goto fail;
	}
	free(m);
	*out = a;
	return 0;
fail:
	if (a->mem_fd >= 0) close(a->mem_fd);
	free(a);
	free(m);
	return -1;
}

int inject_agent_run(struct inject_agent *a, const char *path, uint64_t op, uint64_t arg0,
		     uint64_t arg1, long timeout_ms, struct inject_agent_result *res, char *err,
		     size_t errlen)
{
	memset(res, 0, sizeof *res);
	static struct inject_agent_region r; /* 4.6 KB: not on the stack */
	memset(&r, 0, sizeof r);
	if (strlen(path) >= sizeof r.path) {
		inject_err(err, errlen, "library path too long");
		return -1;
	}
	r.nonce = 0; /* not rewritten: only the fields from stub_done on */
	r.seq = ++a->seq;
	memcpy(&r.fn_pthread_self, a->fns, sizeof a->fns);
	r.fn_attr_init = a->fn_attr[0];
	r.fn_attr_setstacksize = a->fn_attr[1];
	r.stack_size = INJECT_AGENT_STACK_SIZE;
	r.dl_flags = RTLD_NOW;
	r.op = op;
	r.arg0 = arg0;
	r.arg1 = arg1;
	snprintf(r.agent_name, sizeof r.agent_name, "memtraced_sampler_agent");
	snprintf(r.path, sizeof r.path, "%s", path);
	const size_t from = INJECT_AGENT_OFF_STUB_DONE;
	if (inject_mem_write(a->mem_fd, a->region + from, (char *)&r + from, sizeof r - from) != 0) {
		inject_err(err, errlen, "cannot write the agent's region in pid %d: %s", (int)a->pid,
			   strerror(errno));
		return -1;
	}
	struct stub_job j = {.op = AGENT_STUB_THREAD, .a0 = a->region, .a1 = r.seq, .fn = a->fn_create};
	long t0 = ms_now();
	if (run_stub(a, &j, a->safe, 10000, &res->stub_tid, err, errlen) != 0) return -1;
	a->busy = true;
	res->safe_wait_ms = ms_now() - t0;
	if (wait_word(a, a->region + INJECT_AGENT_OFF_STUB_DONE, r.seq, 5000) != 0) {
		inject_err(err, errlen, "pid %d: thread %d did not come back from pthread_create",
			   (int)a->pid, (int)res->stub_tid);
		return -1;
	}
	int64_t created = -1;
	inject_mem_read(a->mem_fd, a->region + INJECT_AGENT_OFF_CREATE_RET, &created, 8);
	if (created != 0) {
		a->busy = false;
		inject_err(err, errlen, "pid %d: pthread_create failed: %s", (int)a->pid,
			   strerror((int)created));
		return -1;
	}
	if (wait_word(a, a->region + INJECT_AGENT_OFF_DONE, r.seq, timeout_ms) != 0) {
		if (kill(a->pid, 0) != 0 && errno == ESRCH)
			inject_err(err, errlen, "pid %d exited while the agent thread ran", (int)a->pid);
		else
			inject_err(err, errlen, "pid %d: the agent thread has not finished in %ld ms (it "
				   "goes on by itself)", (int)a->pid, timeout_ms);
		return -1;
	}
	a->busy = false;
	if (inject_mem_read(a->mem_fd, a->region, &r, sizeof r) != 0) {
		inject_err(err, errlen, "cannot read the agent's region in pid %d", (int)a->pid);
		return -1;
	}
	r.errmsg[sizeof r.errmsg - 1] = 0;
	if (!r.handle || !r.agent) {
		inject_err(err, errlen, "%s failed in pid %d: %s", r.handle ? "dlsym" : "dlopen",
			   (int)a->pid, r.errmsg[0] ? r.errmsg : "no message");
		return -1;
	}
	res->handle = r.handle;
	res->ret = r.ret;
	res->version = r.version;
	res->check_addr = r.check_addr;
	res->thin_addr = r.thin_addr;
	res->stats_addr = r.stats_addr;
	return 0;
}

void inject_agent_close(struct inject_agent *a)
{
	if (!a) return;
	if (a->region && !a->busy && kill(a->pid, 0) == 0) {
		/* our job threads exit right after their last word: gone within a moment (a short
		 * wait: the end of every session waits on this close) */
		for (int i = 0; a->single_flag[0] && i < 100 && thread_count(a->pid) > 1; i++)
			usleep(2000);
		struct stub_job j = {.op = AGENT_STUB_MUNMAP, .a0 = a->region, .a1 = REGION_BYTES,
				     .single_back = a->single_flag[0] && thread_count(a->pid) == 1};
		char e[256];
		/* the single-thread mode only at a safe moment (a thread stopped between calloc's
		 * two looks at it would keep the arena's lock), looked for 300 ms at most: a
		 * process that lives in libc (a fork loop) keeps the mode glibc left; the region
		 * goes in any case */
		if (!j.single_back || run_stub(a, &j, a->safe, 300, NULL, e, sizeof e) != 0) {
			j.single_back = false;
			run_stub(a, &j, NULL, 2000, NULL, e, sizeof e);
		}
	}
	if (a->mem_fd >= 0) close(a->mem_fd);
	free(a);
}

void inject_agent_forget(struct inject_agent *a)
{
	if (!a) return;
	if (a->mem_fd >= 0) close(a->mem_fd);
	free(a);
}
