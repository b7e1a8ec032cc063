/* Internals of the injector (user/daemon/inject/). */
#ifndef MEMTRACED_INJECT_INT_H
#define MEMTRACED_INJECT_INT_H
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "inject.h"

/* snprintf into err (NULL/0 allowed). */
void inject_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The threads that may be stopped, best first: the main thread when it is blocked in a system
 * call, threads blocked in a system call other than futex (unlikely to hold a lock the call
 * needs), in futex, then running ones, and last those in a call that returns a bare EINTR when
 * woken (a socket with a timeout...). A thread with a seccomp filter of its own is never one
 * (*confined counts them), nor a zombie (target_checks.c). */
#define INJECT_MAX_CANDIDATES 256
#define INJECT_RANK_BARE_EINTR 4 /* ranks[i] of a thread in such a call (NULL: not wanted) */
int inject_thread_candidates(pid_t pid, pid_t *out, int *ranks, int max, int *confined);
/* Does system call nr return a bare -EINTR when the thread is merely woken by our interrupt
 * (restarted by us: ptrace_call.c)? */
bool inject_returns_bare_eintr(long nr);
/* The Seccomp: mode of one thread (/proc/PID/task/TID/status), -1 if unknown. */
long inject_thread_seccomp(pid_t pid, pid_t tid);

/* Does the stopped thread's stack have room for the agent's stub below rsp (stack_room.c)?
 * Known only on the main thread's [stack] and above a guard page; why says what is wrong. The
 * stub takes about 3.2 KB (red zone, registers, XSAVE area, pthread_create): the margin is
 * more than twice that. */
#define INJECT_STUB_STACK_NEED 8192
bool inject_stack_room(pid_t pid, pid_t tid, uint64_t rsp, char *why, size_t whylen);

/* The address space an attach may take in the target (docs/inject.md): the region (8 KiB),
 * the agent thread's stack (256 KiB and a guard page, kept in glibc's stack cache), the
 * sampler library (about 0.2 MiB), its set of sampled blocks (12 MiB, MAP_NORESERVE), and the
 * malloc arena glibc gives the agent thread when it has fewer than 8 per core (64 MiB reserved,
 * 128 MiB for a moment while it is aligned). A target whose RLIMIT_AS would leave it less than
 * INJECT_ADDRESS_SPACE_KEEP after that is refused with the numbers (target_checks.c). */
#define INJECT_ADDRESS_SPACE_NEED (141ULL << 20)
#define INJECT_ADDRESS_SPACE_KEEP (64 << 20)

/* Address of a `syscall` instruction (0f 05) in an executable mapping of pid: the return
 * address of injected calls (remote_syms.c). */
int inject_find_syscall_insn(pid_t pid, uint64_t *addr, char *err, size_t errlen);

/* Reads/writes the target's memory through /proc/PID/mem (fd from inject_mem_open). */
int inject_mem_open(pid_t pid, bool writable);
int inject_mem_read(int fd, uint64_t addr, void *buf, size_t len);
int inject_mem_write(int fd, uint64_t addr, const void *buf, size_t len);
/* A NUL-terminated string of at most len-1 bytes from the target. */
int inject_mem_read_str(int fd, uint64_t addr, char *buf, size_t len);

#endif
