/* A safe moment to call pthread_create on a stopped thread (see safe_moment.h). */
#include "safe_moment.h"
#include "door/door.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parser/rstacks.h"

#define STACK_COPY (64 * 1024)
#define MAX_FRAMES 256

struct safe_moment {
	pid_t pid;
	struct rstacks *r;
	bool open_failed;
	uint8_t stack[STACK_COPY];
};

struct safe_moment *safe_moment_open(pid_t pid)
{
	struct safe_moment *m = calloc(1, sizeof *m);
	if (m) m->pid = pid;
	return m;
}

void safe_moment_close(struct safe_moment *m)
{
	if (!m) return;
	if (m->r) rstacks_close(m->r);
	free(m);
}

/* Names (prefixes) of functions that hold, or may take while holding another, a lock that
 * pthread_create needs (the allocator's arena locks, ld.so's TLS and load locks, the stack
 * cache lock): a thread stopped in one of them must not call it. Conservative: a false alarm
 * only means another thread, or the same one a little later. */
static const char *const unsafe_prefixes[] = {
	"malloc", "__libc_malloc", "__malloc", "_int_", "sysmalloc", "systrim", "calloc",
	"__libc_calloc", "realloc", "__libc_realloc", "free", "__libc_free", "cfree", "memalign",
	"__libc_memalign", "_mid_memalign", "posix_memalign", "aligned_alloc", "valloc", "pvalloc",
	"__libc_valloc", "__libc_pvalloc", "tcache", "arena_", "ptmalloc", "mtrim", "__malloc_",
	"_dl_", "dl_", "__dl", "_dlerror", "dlopen", "dlclose", "dlsym", "dlvsym", "dlmopen",
	"dlerror", "dladdr", "dlinfo", "__libc_dl", "_dlfo_", "_dlfo",
	"pthread_create", "__pthread_create", "allocate_stack", "__nptl_", "start_thread_setup",
	"__libc_fork", "fork", "_Fork", "__run_fork_handlers", "__libc_pthread_init",
	"je_", "tcmalloc", "TCMalloc", "mi_", "_mi_", "operator new", "operator delete",
	"_Znw", "_Zna", "_Zdl", "_Zda", "__cxa_thread_atexit", "__call_tls_dtors",
};

bool safe_moment_unsafe_name(const char *name)
{
	if (!name || !name[0]) return false;
	if (strncmp(name, "__GI_", 5) == 0) name += 5;
	for (size_t i = 0; i < sizeof unsafe_prefixes / sizeof unsafe_prefixes[0]; i++)
		if (strncmp(name, unsafe_prefixes[i], strlen(unsafe_prefixes[i])) == 0) return true;
	/* a frame without a name in the loader: "ld-linux-x86-64.so.2+0x1234" */
	return strstr(name, "ld-linux") != NULL || strstr(name, "/ld-") != NULL;
}

/* The stack from rsp, as much of it as is readable (up to STACK_COPY). */
static size_t copy_stack(pid_t pid, uint64_t rsp, uint8_t *buf)
{
	int fd = door_proc_open(pid, "mem", false);
	if (fd < 0) return 0;
	size_t got = 0;
	while (got < STACK_COPY) {
		size_t want = 4096 - ((rsp + got) & 4095);
		if (want > STACK_COPY - got) want = STACK_COPY - got;
		ssize_t n = pread(fd, buf + got, want, (off_t)(rsp + got));
		if (n <= 0) break;
		got += (size_t)n;
	}
	close(fd);
	return got;
}

bool safe_moment_check(void *ctx, pid_t pid, pid_t tid, const struct user_regs_struct *r,
		       char *why, size_t whylen)
{
	struct safe_moment *m = ctx;
	if (!m || m->open_failed) {
		snprintf(why, whylen, "its stack cannot be unwound");
		return false;
	}
	if (!m->r) {
		char e[256];
		m->r = rstacks_open(pid, e, sizeof e);
		if (!m->r) {
			m->open_failed = true;
			snprintf(why, whylen, "no unwinder: %s", e);
			return false;
		}
	} else {
		rstacks_refresh(m->r); /* libraries loaded since */
	}
	/* DWARF register order: rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip */
	uint64_t regs[STACKS_NREGS] = {r->rax, r->rdx, r->rcx, r->rbx, r->rsi, r->rdi, r->rbp,
				       r->rsp, r->r8, r->r9, r->r10, r->r11, r->r12, r->r13,
				       r->r14, r->r15, r->rip};
	size_t len = copy_stack(pid, r->rsp, m->stack);
	uint64_t codes[MAX_FRAMES];
	int n = rstacks_unwind_from(m->r, NULL, tid, regs, m->stack, len, NULL, STACKS_AT_SYSCALL, false,
				    codes, MAX_FRAMES);
	rstacks_drop_ahead(m->r);
	if (n <= 0) {
		snprintf(why, whylen, "thread %d: its stack cannot be unwound", (int)tid);
		return false;
	}
	for (int i = 0; i < n; i++) {
		const mt_location *locs;
		int k = rstacks_locations(m->r, codes[i], &locs);
		for (int j = 0; j < k; j++) {
			if (!safe_moment_unsafe_name(locs[j].defname) &&
			    !safe_moment_unsafe_name(locs[j].filename))
				continue;
			snprintf(why, whylen, "thread %d is in %s (frame %d)", (int)tid,
				 locs[j].defname && locs[j].defname[0] ? locs[j].defname : locs[j].filename, i);
			return false;
		}
	}
	return true;
}
