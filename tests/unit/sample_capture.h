/* Capturing an allocation-entry sample from a workload that stops itself in fake_alloc
 * (tests/targets/stacks_fake_alloc.h): its registers (ptrace) and STACK_COPY bytes of its stack
 * (process_vm_readv), as the BPF side captures them. Shared by the unwinding unit tests. */
#ifndef MEMTRACED_TESTS_SAMPLE_CAPTURE_H
#define MEMTRACED_TESTS_SAMPLE_CAPTURE_H
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unwind/stacks.h"

#define STACK_COPY 16384
struct sample {
	uint64_t regs[STACKS_NREGS];
	uint8_t stack[STACK_COPY];
	size_t stack_len;
};

static char build_dir[PATH_MAX]; /* .../build (from /proc/self/exe) */
static char src_dir[PATH_MAX];   /* the source tree: build_dir/.. */

static inline void find_dirs(void)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[n > 0 ? n : 0] = '\0';
	/* exe = BUILD/tests/unit/test_stacks */
	for (int i = 0; i < 3; i++) {
		char *slash = strrchr(exe, '/');
		if (slash)
			*slash = '\0';
	}
	snprintf(build_dir, sizeof build_dir, "%s", exe);
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = '\0';
	snprintf(src_dir, sizeof src_dir, "%s", exe);
}

static inline pid_t spawn_path(const char *path)
{
	if (access(path, X_OK) != 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static inline pid_t spawn(const char *name)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/tests/targets/%s", build_dir, name);
	return spawn_path(path);
}

/* Waits for the workload's next self-stop. */
static inline int wait_stop(pid_t pid)
{
	int st;
	if (waitpid(pid, &st, WUNTRACED) != pid)
		return -1;
	return WIFSTOPPED(st) ? 0 : -1;
}

/* Registers (DWARF order) of thread tid and the stack from its rsp, as the BPF side captures
 * them. */
static inline int capture_thread(pid_t pid, pid_t tid, struct sample *s)
{
	if (ptrace(PTRACE_SEIZE, tid, 0, 0) != 0)
		return -1;
	ptrace(PTRACE_INTERRUPT, tid, 0, 0);
	int st;
	do {
		if (waitpid(tid, &st, __WALL) != tid) {
			ptrace(PTRACE_DETACH, tid, 0, 0);
			return -1;
		}
	} while (!WIFSTOPPED(st));
	struct user_regs_struct r;
	int rc = ptrace(PTRACE_GETREGS, tid, 0, &r);
	ptrace(PTRACE_DETACH, tid, 0, 0);
	if (rc != 0)
		return -1;
	const uint64_t dwarf_order[STACKS_NREGS] = {r.rax, r.rdx, r.rcx, r.rbx, r.rsi, r.rdi,
						    r.rbp, r.rsp, r.r8,  r.r9,  r.r10, r.r11,
						    r.r12, r.r13, r.r14, r.r15, r.rip};
	memcpy(s->regs, dwarf_order, sizeof dwarf_order);
	struct iovec local = {s->stack, STACK_COPY}, remote = {(void *)(uintptr_t)r.rsp, STACK_COPY};
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (n <= 0)
		return -1;
	s->stack_len = (size_t)n;
	return 0;
}

static inline int capture(pid_t pid, struct sample *s)
{
	return capture_thread(pid, pid, s);
}

static inline void resume(pid_t pid)
{
	kill(pid, SIGCONT);
}
#endif
