/* Preparing the tracing of a program that a held process exec'd (process/hold.h), on the hold's
 * thread while the process is stopped at the exec: the allocator found the way its ld.so will
 * bind it (sites/), the BPF program attached (tracer/); then the process goes on at once,
 * traced from its first allocation. A BPF program loaded ahead of time for the process (a
 * spare, loaded by the main loop: loading is the slow part) leaves only the attach to do while
 * it waits. The main loop takes the prepared programs over in exec order (follow.c).
 * Thread-safe. */
#ifndef MEMTRACED_EXEC_PREP_H
#define MEMTRACED_EXEC_PREP_H
#include <stdint.h>
#include <sys/types.h>

#include "protocol/sites.h"
#include "process/session.h"
#include "tracer/tracer.h"

struct exec_prepared {
	struct exec_prepared *next;
	struct exec_prep *owner;
	bool taken;
	pid_t pid;
	uint64_t stop_ns;        /* CLOCK_MONOTONIC of the exec-stop */
	char exe[4096];
	char name[4096];         /* as it was started (target_program_name) */
	struct alloc_sites sites;
	struct session *s;       /* begun (process/session.h): probes attached, records queued;
				    NULL when it could not be: err says why */
	char err[512];
};

struct exec_prep;

/* opts: rate and stack_bytes of the sessions to begin. */
struct exec_prep *exec_prep_new(const struct tracer_opts *opts);
/* The hold's exec function (hold_set_exec_fn): prepares the program pid runs now. */
void exec_prep_on_exec(void *prep, pid_t pid, uint64_t stop_ns);
/* The oldest program prepared for pid and not taken yet, or NULL. It stays listed (see
 * exec_prep_pending) until exec_prepared_free, which closes the session unless the caller took
 * it (setting it to NULL): free it once its trace is started. */
/* (The lifecycle watcher may announce the exec before the hold's thread is done preparing
 * it: wait up to timeout_ms for it.) */
struct exec_prepared *exec_prep_take(struct exec_prep *p, pid_t pid, int timeout_ms);
void exec_prepared_free(struct exec_prepared *e);
/* An exit gate for the hold (hold_set_exit_gate): is a program prepared for pid not freed yet? */
bool exec_prep_pending(void *prep, pid_t pid);
/* The session tracing pid now (main loop): muted at pid's next exec, from the hold's thread.
 * exec_prep_unwatch before the session is finished or closed. */
void exec_prep_watch(struct exec_prep *p, pid_t pid, struct session *s);
void exec_prep_unwatch(struct exec_prep *p, struct session *s);
/* Keeps n spare BPF programs loaded for no process yet, on a thread of its own: a new process
 * (a fork's child) takes one, at its start or at its exec, and waits only for the attach. */
void exec_prep_keep_spares(struct exec_prep *p, int n);
/* pid's spare, else one loaded for no process (given to pid), else NULL: for tracer_attach. */
struct tracer *exec_prep_take_spare(struct exec_prep *p, pid_t pid);
/* Loads a spare BPF program for pid if it has none (tens of ms of our time, none of pid's). */
void exec_prep_refill(struct exec_prep *p, pid_t pid);
/* The same as a hold's after-exec function (hold_set_exec_fn). */
void exec_prep_after_exec(void *prep, pid_t pid);
/* pid is no longer traced: its spare and what was prepared for it are closed. */
void exec_prep_forget(struct exec_prep *p, pid_t pid);
void exec_prep_free(struct exec_prep *p);

#endif
