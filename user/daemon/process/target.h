/* The traced process: checks on a PID, privileges, and spawning `-- CMD` stopped before exec. */
#ifndef MEMTRACED_TARGET_H
#define MEMTRACED_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Do we have what attaching needs: root, or CAP_BPF + CAP_PERFMON + CAP_SYS_PTRACE? */
int target_check_privileges(char *err, size_t errlen);

/* Is pid a live user-space process other than ourselves (not a kernel thread, not a zombie)? */
int target_check_pid(pid_t pid, char *err, size_t errlen);

/* The executable's path (readlink /proc/PID/exe), or "" if unknown. */
void target_exe_path(pid_t pid, char *buf, size_t len);

/* A command forked and held before its execv until target_release(). */
struct spawned {
	pid_t pid;
	int go_fd;    /* write end: one byte releases the child */
	int err_fd;   /* read end: the child's errno if execv failed, EOF if it succeeded */
	char exe[4096]; /* the program about to be exec'd, resolved through PATH like execvp */
};

/* Resolves argv[0] through PATH, forks; the child waits for target_release then execs it.
 * Returns 0, or -1 with a message (exit status 127/126 in *status_hint as a shell would). */
int target_spawn(char *const argv[], struct spawned *sp, int *status_hint, char *err, size_t errlen);
/* Lets the child run. Returns 0 if the exec succeeded, else -1 with a message (the child has
 * exited then with status 127 or 126). */
int target_release(struct spawned *sp, char *err, size_t errlen);
/* Kills and reaps a child that was never released. */
void target_abort(struct spawned *sp);

/* A pidfd that becomes readable when pid exits (works for non-children), or -1. */
int target_pidfd(pid_t pid);
/* The memtraced-style exit status of a waitpid status: the code, or 128+signal. */
int target_exit_status(int wstatus);

/* -- CMD: the child is held at its exit (ptrace exit-stop, while its memory and mappings are
 * still there) until a hook has read what it needs. A thread of ours ptraces it with
 * PTRACE_SEIZE (no stop at the attach or at exec) and passes every signal on unchanged; stops
 * (SIGSTOP, SIGTSTP...) stay stops. From then on only the watch may wait for the child.
 * Start it before target_release; NULL with a message if ptrace is refused. */
struct exit_watch;
struct exit_watch *exit_watch_start(pid_t pid, char *err, size_t errlen);
/* The hook runs on the watch's thread at the exit-stop; it must return soon (the child waits). */
void exit_watch_set_hook(struct exit_watch *w, void (*fn)(void *ctx), void *ctx);
/* Removes the hook if its ctx is ctx; waits for it to return if it runs now. */
void exit_watch_clear_hook(struct exit_watch *w, void *ctx);
/* Has the child exited (waits up to timeout_ms)? Then its waitpid status is in *wstatus. */
bool exit_watch_exited(struct exit_watch *w, int *wstatus, int timeout_ms);
/* After the child has exited. NULL is allowed. */
void exit_watch_free(struct exit_watch *w);

#endif
