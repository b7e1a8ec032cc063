/* What traced processes do besides allocating: exec, fork, dlopen.
 *
 * The BPF watcher (bpf/lifecycle.bpf.c): BTF tracepoints sched_process_exec and
 * sched_process_fork filtered on the watched processes, and a uprobe on each watched
 * process's ld.so _dl_debug_state (called around every dlopen/dlclose). Where the BPF watcher
 * cannot load, a fallback polls /proc: a change of /proc/PID/exe's identity is an exec, a
 * change of the set of mapped files a dlopen; forks are not seen then.
 *
 * Events are queued in arrival order; lifecycle_exec_time lets a session cut its records at an
 * exec (everything the old image allocated was submitted before the exec record). One thread
 * uses a struct lifecycle. */
#ifndef MEMTRACED_LIFECYCLE_H
#define MEMTRACED_LIFECYCLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "protocol/sites.h"
#include "lifecycle_events.h"

struct lifecycle_event {
	enum lc_kind kind;
	pid_t pid;        /* the watched process */
	pid_t child;      /* LC_FORK: the new process */
	uint64_t time_ns; /* CLOCK_MONOTONIC; the fallback's detection time */
};

struct lifecycle;

/* Loads the BPF watcher; on failure the /proc fallback (*note says why, else ""). NULL only
 * when out of memory. env MEMTRACED_LIFECYCLE=proc forces the fallback (tests). all_execs:
 * the exec of every process is an event (--match, --cgroup; the BPF watcher only). */
struct lifecycle *lifecycle_open(bool follow_forks, bool all_execs, char *note, size_t notelen);
bool lifecycle_uses_bpf(const struct lifecycle *lc);
/* Readable when BPF events wait (for the main loop's one wait), or -1 (/proc fallback). */
int lifecycle_fd(const struct lifecycle *lc);
/* Starts (or after an exec, renews) watching pid. A process without ld.so (static) gets no
 * dlopen probe: *note says so. Returns 0, or -1 with a message. */
int lifecycle_watch(struct lifecycle *lc, pid_t pid, char *note, size_t notelen);
void lifecycle_unwatch(struct lifecycle *lc, pid_t pid);
/* Reads what arrived into the queue (non-blocking). */
void lifecycle_drain(struct lifecycle *lc);
/* Drains, then: the time of the first queued exec of pid, or 0. */
uint64_t lifecycle_exec_time(struct lifecycle *lc, pid_t pid);
/* Drains, then removes the first queued exec of pid and returns its time, or 0 when none is
 * queued. A chain of execs (a #!/usr/bin/env script execs env, which execs the interpreter...)
 * is over before its first event is handled: the programs exec'd meanwhile are gone. */
uint64_t lifecycle_take_exec(struct lifecycle *lc, pid_t pid);
/* Takes the oldest queued event. false when there is none. */
bool lifecycle_next(struct lifecycle *lc, struct lifecycle_event *ev);
/* Events lost: the BPF ring was full, or more than the queue holds came between two drains. */
uint64_t lifecycle_lost(const struct lifecycle *lc);
void lifecycle_close(struct lifecycle *lc);

#endif
