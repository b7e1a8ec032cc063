/* Where injection cannot work, or would not be safe: refused with the reason. And which
 * thread to stop. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "door/door.h"
#include "protocol/facts.h"
#include "inject_int.h"
#include "parser/parser.h"
#include "process/target.h"

/* Does the file at path start with "#!"? (read through the door: a target's file) */
static bool is_script(const char *path)
{
	int fd = door_open_file(path, 0, true);
	char b[2] = "";
	bool yes = fd >= 0 && pread(fd, b, 2, 0) == 2 && b[0] == '#' && b[1] == '!';
	if (fd >= 0) close(fd);
	return yes;
}

/* Is the executable the dynamic linker itself (a program started as `ld.so PROG`)? path may
 * be /proc/PID/exe: named by the file it leads to. */
static bool is_dynamic_linker(pid_t pid, const char *path)
{
	char name[4096];
	ssize_t n = strncmp(path, "/proc/", 6) == 0 ? door_proc_readlink(pid, "exe", name, sizeof name - 1)
						    : -1;
	if (n > 0) name[n] = 0;
	return target_is_ldso(n > 0 ? name : path);
}

int inject_check_exe(pid_t pid, const char *path, bool running, char *err, size_t errlen)
{
	struct elf_facts f;
	char oerr[512];
	/* read by the parser: only a 64-bit x86-64 ELF file has facts */
	if (pfacts_of(pid, path, NULL, &f, oerr, sizeof(oerr)) != 0 || !f.elf_x86_64) {
		/* a shim (start.sh, pyenv's python3, Debian's chromium) read as "an architecture
		 * problem" before (issue 47) */
		if (is_script(path))
			inject_err(err, errlen, "%s is a script (#!): the sampler goes into a program, "
				   "and the program the script runs is traced with uprobes", path);
		else
			inject_err(err, errlen, "%s is not an x86-64 ELF program (%s): the sampler's "
				   "code is x86-64", path, oerr);
		return -1;
	}
	if (!f.has_interp && is_dynamic_linker(pid, path)) {
		/* `ld.so PROG` (issue 47), said as what it is (it was "statically linked"). Started
		 * by us, the entry point where the sampler would go is ld.so's own, before any
		 * library is there; running, the agent finds the link map through the executable's
		 * DT_DEBUG, which ld.so's own dynamic section lacks (its _r_debug: not done yet) */
		inject_err(err, errlen, "%s is the dynamic linker itself (a program started as `ld.so "
			   "PROG`): the sampler cannot be placed %s; the program is traced with uprobes",
			   path, running ? "into it yet" : "at ld.so's entry point, before the program "
			   "and its libraries are loaded");
		return -1;
	}
	if (!f.has_interp) {
		inject_err(err, errlen, "%s is statically linked: no dynamic linker, no dlopen to load "
		           "a library with", path);
		return -1;
	}
	return 0;
}

/* The value of "Key:" in /proc/PID/status, or -1. */
static long status_field(pid_t pid, const char *key, char *text, size_t textlen)
{
	char line[512];
	FILE *f = door_proc_fopen(pid, "status");
	if (!f) return -1;
	long v = -1;
	size_t kl = strlen(key);
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, kl) != 0 || line[kl] != ':') continue;
		char *p = line + kl + 1;
		p += strspn(p, " \t");
		p[strcspn(p, "\n")] = 0;
		if (text) snprintf(text, textlen, "%s", p);
		v = strtol(p, NULL, 10);
		break;
	}
	fclose(f);
	return v;
}

/* The soft RLIMIT_AS of pid in bytes (/proc/PID/limits), 0 when unlimited or unknown. */
static unsigned long long address_space_limit(pid_t pid)
{
	char line[256];
	FILE *f = door_proc_fopen(pid, "limits");
	if (!f) return 0;
	unsigned long long v = 0;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, "Max address space", 17) == 0) {
			v = strtoull(line + 17, NULL, 10); /* "unlimited": 0 */
			break;
		}
	fclose(f);
	return v;
}

int inject_check_address_space(pid_t pid, char *err, size_t errlen)
{
	unsigned long long limit = address_space_limit(pid);
	long vm_kb = status_field(pid, "VmSize", NULL, 0);
	if (!limit || vm_kb < 0) return 0;
	unsigned long long used = (unsigned long long)vm_kb << 10, need = INJECT_ADDRESS_SPACE_NEED;
	if (used + need + INJECT_ADDRESS_SPACE_KEEP <= limit) return 0;
	inject_err(err, errlen, "pid %d uses %llu MiB of its %llu MiB address space (RLIMIT_AS): the "
	           "sampler takes up to %llu MiB and the program must keep %d MiB for itself", (int)pid,
	           used >> 20, limit >> 20, need >> 20, INJECT_ADDRESS_SPACE_KEEP >> 20);
	return -1;
}

int inject_check_target(pid_t pid, char *err, size_t errlen)
{
	if (pid <= 0) {
		inject_err(err, errlen, "invalid pid %d", (int)pid);
		return -1;
	}
	if (pid == getpid()) {
		inject_err(err, errlen, "pid %d is ourselves", (int)pid);
		return -1;
	}
	char state[64] = "";
	if (status_field(pid, "State", state, sizeof(state)) < 0 && !state[0]) {
		inject_err(err, errlen, "no process with pid %d", (int)pid);
		return -1;
	}
	if (state[0] == 'Z' || state[0] == 'X') {
		inject_err(err, errlen, "pid %d is exiting (%s)", (int)pid, state);
		return -1;
	}
	/* a debugger (or another memtraced) holding it: said before its stop, which is the
	 * tracer's doing, not a SIGSTOP to undo (issue 34) */
	long tracer = status_field(pid, "TracerPid", NULL, 0);
	if (tracer > 0) {
		char comm[64] = "?";
		door_proc_line((pid_t)tracer, "comm", comm, sizeof comm);
		inject_err(err, errlen, "pid %d is already traced by pid %ld (%s): a process has one "
		           "tracer at a time", (int)pid, tracer, comm);
		return -1;
	}
	if (state[0] == 'T' || state[0] == 't') {
		/* its other threads are stopped: our call could wait forever on a lock they hold */
		inject_err(err, errlen, "pid %d is stopped (%s): continue it (SIGCONT) first", (int)pid,
		           state);
		return -1;
	}
	long seccomp = status_field(pid, "Seccomp", NULL, 0);
	if (seccomp > 0) {
		/* a filter may kill the process on a system call dlopen makes (openat, mmap...) */
		inject_err(err, errlen, "pid %d is confined by seccomp (%s mode): the library's "
		           "system calls could kill it", (int)pid, seccomp == 1 ? "strict" : "filter");
		return -1;
	}
	if (inject_check_address_space(pid, err, errlen) != 0) return -1;
	char exe[64];
	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)pid);
	if (access(exe, R_OK) != 0) {
		inject_err(err, errlen, "pid %d: cannot read its executable: %s", (int)pid,
		           strerror(errno));
		return -1;
	}
	return inject_check_exe(pid, exe, true, err, errlen);
}

/* System calls that return a bare -EINTR when the thread is merely woken (signal_pending
 * is true for our PTRACE_INTERRUPT too) instead of an -ERESTART* code the kernel restarts:
 * signal(7)'s calls that are "never restarted" (socket calls on a socket with SO_RCVTIMEO or
 * SO_SNDTIMEO, the reads and writes of such a socket and of an inotify fd, the epoll, poll
 * and select families, System V IPC, sleeps, AIO, sigtimedwait), and io_uring_enter waiting
 * for completions (issue 34). Each returns -EINTR only when
 * it did nothing yet (no byte moved, no connection taken), so starting it again is what the
 * program would have seen without us. close() is not one: its EINTR comes after the fd is
 * gone. */
bool inject_returns_bare_eintr(long nr)
{
	switch (nr) {
	case SYS_read: case SYS_readv: case SYS_write: case SYS_writev:
	case SYS_accept: case SYS_accept4: case SYS_connect:
	case SYS_recvfrom: case SYS_recvmsg: case SYS_recvmmsg:
	case SYS_sendto: case SYS_sendmsg: case SYS_sendmmsg:
	case SYS_epoll_wait: case SYS_epoll_pwait: case SYS_epoll_pwait2:
	case SYS_poll: case SYS_ppoll: case SYS_select: case SYS_pselect6:
	case SYS_msgrcv: case SYS_msgsnd: case SYS_semop: case SYS_semtimedop:
	case SYS_nanosleep: case SYS_clock_nanosleep:
	case SYS_rt_sigtimedwait: case SYS_io_getevents: case SYS_io_pgetevents:
	case SYS_io_uring_enter: /* waiting for completions; -EINTR only when it submitted none */
		return true;
	}
	return false;
}

/* The system call a thread is blocked in, -1 if it runs user code, -2 if unknown. */
static long thread_syscall_arg(pid_t pid, pid_t tid, unsigned long *arg0)
{
	char buf[256] = "";
	FILE *f = door_proc_fopen(pid, "task/%d/syscall", (int)tid);
	if (!f) return -2;
	bool ok = fgets(buf, sizeof(buf), f) != NULL;
	fclose(f);
	if (!ok || strncmp(buf, "running", 7) == 0) return -1;
	char *end;
	long nr = strtol(buf, &end, 10);
	if (arg0) *arg0 = strtoul(end, NULL, 16);
	return end == buf ? -2 : nr;
}

static long thread_syscall(pid_t pid, pid_t tid)
{
	return thread_syscall_arg(pid, tid, NULL);
}

/* Would stopping the thread make its system call return a bare EINTR (made a restart by us,
 * but only once we have set its registers: a few microseconds in which our death would let
 * the EINTR through)? The reads and writes only on a socket or an inotify fd. */
static bool in_bare_eintr_call(pid_t pid, pid_t tid)
{
	unsigned long fd = 0;
	long nr = thread_syscall_arg(pid, tid, &fd);
	switch (nr) { /* the calls that do return a bare -EINTR when merely woken (checked on
			* this kernel; nanosleep, poll, select and msgrcv give an -ERESTART* code) */
	case SYS_read: case SYS_readv: case SYS_write: case SYS_writev:
	case SYS_accept: case SYS_accept4: case SYS_connect:
	case SYS_recvfrom: case SYS_recvmsg: case SYS_recvmmsg:
	case SYS_sendto: case SYS_sendmsg: case SYS_sendmmsg:
	case SYS_epoll_wait: case SYS_epoll_pwait: case SYS_epoll_pwait2:
	case SYS_rt_sigtimedwait: case SYS_semop: case SYS_semtimedop:
	case SYS_io_getevents: case SYS_io_pgetevents: case SYS_io_uring_enter:
		break;
	default:
		return false;
	}
	if (nr != SYS_read && nr != SYS_readv && nr != SYS_write && nr != SYS_writev) return true;
	char p[96], target[128] = "";
	snprintf(p, sizeof p, "/proc/%d/fd/%lu", (int)pid, fd);
	ssize_t n = readlink(p, target, sizeof target - 1);
	if (n <= 0) return false;
	target[n] = 0;
	return strncmp(target, "socket:", 7) == 0 || strstr(target, "inotify") != NULL;
}

/* A thread's own seccomp mode (/proc/PID/task/TID/status): a filter installed without TSYNC
 * confines only the thread that installed it (and threads it creates later), so the process's
 * status, which shows the main thread, says nothing about the others. -1 if unknown. */
long inject_thread_seccomp(pid_t pid, pid_t tid)
{
	char line[256];
	FILE *f = door_proc_fopen(pid, "task/%d/status", (int)tid);
	if (!f) return -1;
	long v = -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "Seccomp:", 8) == 0) {
			v = strtol(line + 8, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

/* An io_uring worker (iou-wrk-N, iou-sqp-N): a kernel thread in the process's thread list
 * that never runs user code, nor can be ptraced. */
static bool thread_io_worker(pid_t pid, pid_t tid)
{
	char comm[32] = "";
	FILE *f = door_proc_fopen(pid, "task/%d/comm", (int)tid);
	if (!f) return false;
	bool ok = fgets(comm, sizeof comm, f) != NULL;
	fclose(f);
	return ok && strncmp(comm, "iou-", 4) == 0;
}

static bool thread_zombie(pid_t pid, pid_t tid)
{
	char buf[512] = "";
	FILE *f = door_proc_fopen(pid, "task/%d/stat", (int)tid);
	if (!f) return true;
	bool ok = fgets(buf, sizeof(buf), f) != NULL;
	fclose(f);
	const char *p = ok ? strrchr(buf, ')') : NULL;
	return !p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X';
}

/* Rank of a thread as the one to stop (lower is better). */
static int thread_rank(pid_t pid, pid_t tid)
{
	if (in_bare_eintr_call(pid, tid)) return 4; /* last: see in_bare_eintr_call */
	long nr = thread_syscall(pid, tid);
	if (nr >= 0 && tid == pid) return 0;
	if (nr >= 0 && nr != SYS_futex) return 1;
	if (nr >= 0) return 2;
	return 3;
}

int inject_thread_candidates(pid_t pid, pid_t *out, int *ranks, int max, int *confined)
{
	int n = 0, rank[INJECT_MAX_CANDIDATES];
	*confined = 0;
	if (max > INJECT_MAX_CANDIDATES) max = INJECT_MAX_CANDIDATES;
	DIR *d = door_proc_opendir(pid, "task");
	if (!d) return 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < max) {
		pid_t tid = atoi(e->d_name);
		if (tid <= 0 || thread_zombie(pid, tid) || thread_io_worker(pid, tid)) continue;
		if (inject_thread_seccomp(pid, tid) != 0) { /* its filter could kill us: never it */
			(*confined)++;
			continue;
		}
		int r = thread_rank(pid, tid), i = n++;
		for (; i > 0 && (rank[i - 1] > r || (rank[i - 1] == r && out[i - 1] > tid)); i--) {
			out[i] = out[i - 1];
			rank[i] = rank[i - 1];
		}
		out[i] = tid;
		rank[i] = r;
	}
	closedir(d);
	if (ranks) memcpy(ranks, rank, n * sizeof *rank);
	return n;
}
