/* The processes memtraced traces (the entry's table): for each one its allocation sites,
 * trace file, snapshotter and session, from the outputs prepared before anything is attached
 * to the final summary. Grows with forks and execs; a struct target never moves (its session
 * points into it). One thread (the main loop) uses it. */
#ifndef MEMTRACED_TARGETS_H
#define MEMTRACED_TARGETS_H
#include <stdbool.h>
#include <sys/types.h>

#include "options/cli.h"
#include "exec_prep.h"
#include "inject_mode.h"
#include "process/hold.h"
#include "process/lifecycle.h"
#include "process/session.h"
#include "process/target.h"
#include "protocol/sites.h"

struct target {
	pid_t pid;
	char exe[4096];
	char name[4096];      /* the program as it was started (target_program_name) */
	struct alloc_sites sites; /* the session points into it: lives as long as the session */
	char out_path[4096];
	int out_fd;
	bool out_regular;     /* out_path is a regular file of ours (not /dev/null or a FIFO): it
				 may be renamed or removed */
	struct snapshotter *snap;
	bool snap_failing;    /* its last snapshot failed: said once, until one is written again */
	struct session *s;
	int pidfd;
	bool exit_seen;           /* the main loop's wait saw pidfd readable */
	bool active;    /* session open and not finished */
	bool ok;        /* trace (if any) written completely */
	bool our_child; /* -- CMD: reaped through the exit watch or waitpid */
	unsigned execs; /* programs exec'd since tracing began (the N of .execN) */
	char base_path[4096]; /* the trace path of the first program (before .execN) */
	bool dlopen_pending;  /* the link map changed: look for new allocators */
	struct hold *hold;    /* the ptrace hold this process is under (-- CMD, --hold-exec), or
				 NULL; borrowed from struct targets */
	bool initial;         /* one of the processes named on the command line */
	bool forked;          /* followed at its fork (--follow-forks) */
	bool inject_failed;   /* the sampler could not start: traced with uprobes instead */
	bool selected;        /* found by --match or --cgroup (now or at an exec): detached when it
				 execs a program that is not selected */
	struct session *begun; /* begun already (an exec prepared while held): its trace starts */
	struct sampler_ctl *sampler; /* --inject: our sampler in it, started (inject_mode.h) */
	bool at_entry; /* -- CMD: the hold calls target_at_entry at its entry point */
	struct tracer *attached; /* a spare attached to its sites already (a fork's child), or NULL */
	char inherited_sampler[4096]; /* a forked child of a process with our sampler started: the
					 library, whose probes trace it (it inherited the GOT) */
};

/* A trace file of a chain of programs (exec), for the final list. */
struct trace_record {
	pid_t pid;
	char path[4096];
	char program[256];
	uint64_t records, samples; /* allocation records, and the samples they hold */
};

struct targets {
	struct target **t;
	int n, cap;
	const struct cli_opts *o;
	struct lifecycle *lc;            /* exec, fork, dlopen watcher; NULL in the probe floor */
	struct hold *holds[CLI_MAX_PIDS]; /* -- CMD (one) or -p --hold-exec (one per PID): owned */
	pid_t hold_pids[CLI_MAX_PIDS];    /* the process each one was started on */
	int nholds;
	int stop_signal;                 /* the signal that ends tracing, for the message */
	uint64_t start_ns;               /* CLOCK_MONOTONIC at memtraced's start (attach time) */
	struct exec_prep *prep;          /* execs prepared on the holds' threads (exec_prep.h) */
	struct trace_record *traces;     /* the trace files written, for the final list */
	int ntraces, traces_cap;
	uint64_t attach_failures;        /* selected processes that could not be traced (--listen) */
	uint64_t selected_traced;        /* selected processes traced (--match, --cgroup) */
	uint64_t snapshot_failures;      /* snapshots not written, of every process (--listen) */
	uint64_t refused_max_processes;  /* selected processes not traced: --max-processes reached */
	uint64_t parser_restarts;        /* the parser died and was started again (--match, --cgroup) */
	uint64_t forks_not_followed;     /* --follow-forks: children not traced (gone, the cap...) */
	uint64_t nf_window_ns, nf_said, nf_unsaid; /* ... said at a bounded rate (follow.c) */
	char nf_last[256];
};

/* Why tracing of a target ends (the message and the summary follow from it). */
enum finish_why { FINISH_EXIT, FINISH_SIGNAL, FINISH_DURATION, FINISH_QUIT, FINISH_EXEC,
		  FINISH_ERROR, FINISH_PARSER_DIED, FINISH_RELOAD };

/* A new target for pid (-1: not known yet), NULL when out of memory. */
struct target *targets_add(struct targets *ts, pid_t pid);
/* Takes t, which never became active (its outputs released), out of ts and frees it at once:
 * a fork loop's children that cannot be followed must not pile up until the loop's next turn. */
void targets_forget(struct targets *ts, struct target *t);
int targets_count_active(const struct targets *ts);
struct target *targets_find_active(const struct targets *ts, pid_t pid);
/* Frees the finished targets; *all_ok collects whether their traces were written completely. */
void targets_drop_finished(struct targets *ts, bool *all_ok);

/* Prepares the trace file and snapshots of t. Returns 0, or an exit status (message printed). */
int target_prepare_outputs(struct targets *ts, struct target *t);
/* Opens t's session (sites and outputs ready) and says so. before_exec: t is a program that has
 * not run yet (its unwinder is prepared at its first record). 0, or -1 with a message in err. */
int target_start_session(struct targets *ts, struct target *t, bool before_exec, char *err,
			 size_t errlen);
/* The lifecycle watcher opened after t's session: t's session asks it for exec times now. */
void target_use_lifecycle(struct targets *ts, struct target *t);
/* Has t exited? Our child is reaped, its status stored in *wstatus. */
bool target_has_exited(const struct targets *ts, const struct target *t, int *wstatus);
/* One snapshot of t; a failure is reported here and tracing goes on. */
void target_snapshot(struct targets *ts, struct target *t, bool say_it);
/* Tracing of t ends: the last drain and reconcile, the final snapshot, the trace closed, the
 * summary. keep_snap (exec): the snapshotter is handed over there instead of closed. */
void target_finish(struct targets *ts, struct target *t, enum finish_why why,
		   struct snapshotter **keep_snap);
/* Frees what was prepared for t (nothing attached, or the session finished already);
 * remove_output: the trace file is deleted (nothing was traced into it). */
void target_release_outputs(struct targets *ts, struct target *t, bool remove_output);

/* The final list of trace files, with each one's program and samples (when a process exec'd:
 * several programs, several traces). */
void targets_print_traces(const struct targets *ts);

/* follow.c: the forks still queued when tracing ends, counted and said (issue 47: they were
 * dropped without a word). */
void targets_forks_left_at_end(struct targets *ts);
/* follow.c: the forked children not followed that were not said yet, in one line. */
void targets_say_not_followed(struct targets *ts);
/* follow.c: acts on what the traced processes did since the last call (exec, fork, dlopen). */
void targets_follow_lifecycle(struct targets *ts);
/* --match, --cgroup: attaches to the selected processes that run now (up to --max-processes). */
void targets_select_running(struct targets *ts);
/* --listen: publishes /metrics and / for the parser's HTTP server (serving.c). */
void targets_publish(struct targets *ts);
/* --listen: answers the profile requests the parser's server holds (serving.c); call it
 * often (each turn of the main loop): a request waits for it. */
void targets_serve_profiles(struct targets *ts);
/* --listen [ADDR:]PORT: the listening socket (opened here, as root, then handed to the parser),
 * or -2 for a spec that is refused (not loopback without allow_public), -1 when it cannot
 * listen, with a message. */
int targets_listen(const char *spec, bool allow_public, char *err, size_t errlen);
/* --listen-root-profiles: profiles cover root's processes without the token. */
void targets_serve_root_profiles(bool yes);
/* A new parser (its death, a reload): the profile windows the old one asked for are dropped
 * (their ids are the old server's; its clients are gone with it). */
void targets_forget_wants(void);
/* --listen-token FILE: the token, its first line (16 .. len-1 printable characters, no
 * space), from a regular file that only its owner may read and that root or we own: 0, or -1
 * with a message. */
int targets_read_token(const char *path, char *token, size_t len, char *err, size_t errlen);

#endif
