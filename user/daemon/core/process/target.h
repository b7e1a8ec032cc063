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
/* The program as it was started: exe, or "NAME (exe)" when the name it was started by (argv0:
 * the first word of /proc/PID/cmdline when argv0 is NULL) is not exe's file name (a link:
 * Debian's redis-server is redis-check-rdb; an interpreter started as python3). */
void target_program_name(pid_t pid, const char *argv0, const char *exe, char *buf, size_t len);
/* From such a name, "NAME (EXE)": NAME in buf; NULL when it is exe itself. */
const char *target_started_as(const char *name, const char *exe, char *buf, size_t len);

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
/* Is exe (a path) the dynamic linker, by its name as ld.so is named (ld-linux-x86-64.so.2, a
 * bundled ld-2.31.so, ld.so)? */
bool target_is_ldso(const char *exe);
/* `ld.so [OPTIONS] PROGRAM ...`: is exe the dynamic linker? Then the program it will load,
 * argv's first word after ld.so's options, into prog (as given: ld.so opens it from the
 * working directory). false otherwise. */
bool target_ldso_program(const char *exe, char *const argv[], char *prog, size_t len);

/* A pidfd that becomes readable when pid exits (works for non-children), or -1. */
int target_pidfd(pid_t pid);
/* The memtraced-style exit status of a waitpid status: the code, or 128+signal. */
int target_exit_status(int wstatus);

#endif
