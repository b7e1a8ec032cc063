/* Holding traced processes with ptrace, so that nothing they allocate escapes the probes:
 *  - at their exit (PTRACE_EVENT_EXIT), while memory and mappings are still there, until an
 *    exit hook has read what it needs (a command of a few ms still gets its stacks);
 *  - at each exec (PTRACE_EVENT_EXEC), until the caller has found the new program's allocator
 *    and attached its probes (hold_release): the new program starts traced;
 *  - with forks, each new process at its first stop, until its probes are in place.
 *
 * PTRACE_SEIZE: no stop at the attach, no SIGTRAP at exec; every signal is passed on unchanged
 * and group-stops stay stops (PTRACE_LISTEN), so the program's behaviour is the same (only
 * /proc/PID/status shows a TracerPid, and a debugger cannot attach meanwhile). A thread of our
 * own is the tracer: ptrace requests must come from it, and it must answer every stop at once.
 * If memtraced dies, the kernel detaches and the processes run on. */
#ifndef MEMTRACED_PROCESS_HOLD_H
#define MEMTRACED_PROCESS_HOLD_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct hold_opts {
	bool exit;    /* hold pid's processes at their exit while an exit hook is set for them */
	bool exec;    /* hold at each exec (not the first exec of a spawned child: that is CMD) */
	bool forks;   /* follow forks: each new process is held at its start, then like its parent */
	bool running; /* pid runs already (-p): seize every thread of it; else a child held before
			 its exec (-- CMD), whose first exec is its own */
};

enum hold_kind { HOLD_EXEC, HOLD_START };

struct hold_event {
	pid_t pid;
	enum hold_kind kind;
	uint64_t since_ns;  /* CLOCK_MONOTONIC when it stopped */
};

struct hold;

/* Seizes pid. NULL with a message if ptrace is refused (another tracer, seccomp, Yama...). */
struct hold *hold_start(pid_t pid, const struct hold_opts *o, char *err, size_t errlen);
/* The exit hook of process pid runs on the hold's thread at its exit-stop; it must return soon. */
void hold_set_exit_hook(struct hold *h, pid_t pid, void (*fn)(void *ctx), void *ctx);
/* Removes the hooks whose ctx is ctx; waits for one to return if it runs now. */
void hold_clear_exit_hook(struct hold *h, void *ctx);
/* Has the first process exited (waits up to timeout_ms)? Its waitpid status in *wstatus. Only
 * for a spawned child (not opts.running). */
bool hold_exited(struct hold *h, int *wstatus, int timeout_ms);
/* With an exec function, a held exec does not wait for hold_release: fn runs on the hold's
 * thread at the exec-stop (the new image is mapped, its ld.so has not run) to put the new
 * program's probes in place, and the process goes on when it returns. It must be quick. Then
 * after (may be NULL) runs, the process running: the time to get ready for its next exec. */
void hold_set_exec_fn(struct hold *h, void (*fn)(void *ctx, pid_t pid, uint64_t stop_ns),
		      void (*after)(void *ctx, pid_t pid), void *ctx);
/* A spawned child (-- CMD) stops at its program's entry point (its libraries loaded and
 * initialized, its own code not run yet) and fn runs there on the hold's thread, the caller
 * being its ptracer with ptrace_options (see inject_adopt); then it goes on. Set it before
 * the child execs. */
void hold_set_entry_fn(struct hold *h, void (*fn)(void *ctx, pid_t pid, long ptrace_options),
		       void *ctx);
/* At an exit-stop, before the exit hook: waits (up to a few seconds) while busy(ctx, pid) is
 * true: the program pid runs was prepared at its exec but the main loop has not taken it over
 * yet (its session and exit hook do not exist yet). */
void hold_set_exit_gate(struct hold *h, bool (*busy)(void *ctx, pid_t pid), void *ctx);
/* The process held now, if any (at most one at a time): true and *ev. */
bool hold_pending(struct hold *h, struct hold_event *ev);
/* Lets a held process go on (its probes are in place, or it will not be traced). */
void hold_release(struct hold *h, pid_t pid);
/* Milliseconds the processes were held at exec or start, in all, and how often. */
void hold_stats(struct hold *h, double *held_ms, double *max_held_ms, unsigned *holds);
/* Stops holding: every thread is detached and runs on (a spawned child's exit is still
 * awaited with hold_exited). */
void hold_detach(struct hold *h);
/* After the child exited, or after hold_detach. NULL is allowed. */
void hold_free(struct hold *h);

#endif
