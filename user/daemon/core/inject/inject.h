/* The injector: run a function, or place a library, inside a running process, without gdb.
 *
 * One thread of the target is stopped with ptrace (PTRACE_SEIZE + PTRACE_INTERRUPT); the
 * others keep running. Its registers, FP/SSE/AVX state and rseq critical-section pointer are
 * saved, calls are made on it, and everything is put back before it is let go, so that a
 * system call it was blocked in resumes as if nothing happened (no EINTR reaches the
 * program) and a signal that arrived meanwhile is delivered afterwards, unchanged.
 * docs/inject.md explains how (syscall restart, signals, the return trap, refusals).
 *
 * All functions return 0, or -1 with a message saying why in err. x86-64 Linux only; needs
 * CAP_SYS_PTRACE (root). A target is refused when injection cannot work or would be unsafe:
 * statically linked (no dynamic linker), no dlopen in its libraries, seccomp-confined,
 * already ptraced, stopped (SIGSTOP), not an x86-64 ELF program, ourselves. */
#ifndef MEMTRACED_INJECT_H
#define MEMTRACED_INJECT_H
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <sys/types.h>
#include <sys/user.h>

#define INJECT_MAX_ARGS 6   /* integer/pointer arguments, in rdi rsi rdx rcx r8 r9 */

/* ---- one-shot helpers: each stops the target once, does its work, lets it go ---- */

/* Calls func(args[0..nargs-1]) on a thread of pid; *ret is its rax. */
int inject_call(pid_t pid, uint64_t func, const uint64_t *args, int nargs, uint64_t *ret,
                char *err, size_t errlen);
/* dlopen(lib_path, RTLD_NOW) in pid; *handle is the handle (the same one again if the
 * library is already loaded). A failed dlopen reports the target's dlerror() text. lib_path
 * is a path in the target's file system (mount namespace). */
int inject_dlopen(pid_t pid, const char *lib_path, uint64_t *handle, char *err, size_t errlen);
/* dlsym(handle, name) in pid: the address of an exported symbol of a library it loaded. */
int inject_dlsym(pid_t pid, uint64_t handle, const char *name, uint64_t *addr, char *err,
                 size_t errlen);

/* ---- sessions: several calls during one stop (dlopen, dlsym, then an install call) ---- */

struct inject_session;
/* Checks pid (inject_check_target), chooses a thread and stops it. */
int inject_attach(pid_t pid, struct inject_session **out, char *err, size_t errlen);
/* For a caller that is already the ptracer of thread tid of pid (PTRACE_SEIZE'd, with
 * ptrace_options) and has it in a ptrace-stop outside any system call (a breakpoint): the same
 * session, without the checks, the seize and the detach: inject_detach puts its state and
 * options back and leaves it stopped, for the caller to resume. */
int inject_adopt(pid_t pid, pid_t tid, long ptrace_options, struct inject_session **out,
                 char *err, size_t errlen);
/* Calls func on the stopped thread (see inject_call; ret may be NULL). After a failed call
 * the session can only be detached (the thread's state is restored then). */
int inject_session_call(struct inject_session *s, uint64_t func, const uint64_t *args, int nargs,
                        uint64_t *ret, char *err, size_t errlen);
/* Copies len bytes onto the stopped thread's stack, below the red zone and below what the
 * session pushed before; *addr is where they are in the target. Valid until detach. */
int inject_push(struct inject_session *s, const void *data, size_t len, uint64_t *addr,
                char *err, size_t errlen);
int inject_session_dlopen(struct inject_session *s, const char *lib_path, uint64_t *handle,
                          char *err, size_t errlen);
int inject_session_dlsym(struct inject_session *s, uint64_t handle, const char *name,
                         uint64_t *addr, char *err, size_t errlen);
/* Puts the thread's state back and lets it go; frees s (NULL is allowed). Returns -1 if the
 * thread could not be restored (it or the process died meanwhile). */
int inject_detach(struct inject_session *s, char *err, size_t errlen);
/* The process, and the thread the session stopped. */
pid_t inject_session_pid(const struct inject_session *s);
pid_t inject_session_tid(const struct inject_session *s);

/* ---- a thread sent into code that needs no tracer (the agent, agent.h) ---- */

/* Is this stopped thread at a moment where it may call pthread_create (it holds no allocator
 * or loader lock)? why says what it is in when not. */
typedef bool (*inject_safe_fn)(void *ctx, pid_t pid, pid_t tid, const struct user_regs_struct *r,
                               char *why, size_t whylen);
/* Called once the thread is chosen, still stopped (stopped: its registers), with the address
 * it must resume at: writes the stub's data. 0, or -1 with a message (the thread is let go
 * unchanged). */
typedef int (*inject_before_fn)(void *ctx, uint64_t resume_rip,
                                const struct user_regs_struct *stopped, char *err, size_t errlen);
/* Stops threads of pid one at a time (the candidates in order, again and again for up to
 * wait_ms) until one has no seccomp filter, is outside any rseq critical section and, with
 * safe, is at a safe moment; then calls before and lets that thread go at entry, with every
 * register as it was but rip, and rax = the value its program must see at the resume address
 * (a system call it was blocked in is restarted from there: no EINTR). *tid_out: the thread. */
int inject_redirect(pid_t pid, uint64_t entry, inject_safe_fn safe, void *safe_ctx,
                    inject_before_fn before, void *before_ctx, long wait_ms, pid_t *tid_out,
                    char *err, size_t errlen);

/* ---- lower level, also used by the tests ---- */

/* Can a library be injected into pid? 0, or -1 and why: not a live process, ourselves,
 * already traced (TracerPid), seccomp (Seccomp: 1 or 2), stopped, a static or non-x86-64
 * executable. */
int inject_check_target(pid_t pid, char *err, size_t errlen);
/* Is the ELF file at path an x86-64 program with a dynamic linker (PT_INTERP)? (running: pid
 * runs it already, else it is about to) */
int inject_check_exe(pid_t pid, const char *path, bool running, char *err, size_t errlen);
/* Would an attach leave pid enough of its RLIMIT_AS (inject_int.h: what it takes)? 0 if so
 * or unlimited; -1 with the numbers in err. */
int inject_check_address_space(pid_t pid, char *err, size_t errlen);
/* The address in pid of a symbol exported by its loaded objects, bound as ld.so binds it
 * (link map order, first default-version definition wins); where names the object. */
int inject_find_symbol(pid_t pid, const char *name, uint64_t *addr, char *where,
                       size_t wherelen, char *err, size_t errlen);
/* Every definition of name (a function or a variable) in pid's loaded objects, in link map
 * order, up to max: their count (0 for none), or -1 with err. A variable of a library that
 * the executable copied (a copy relocation) has two: the executable's, then the library's. */
int inject_find_definitions(pid_t pid, const char *name, uint64_t *addrs, int max, char *err,
                            size_t errlen);

#endif
