/* The traced process (see target.h). */
#include "target.h"
#include "door/door.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define PF_KTHREAD 0x00200000u /* task flag of kernel threads (include/linux/sched.h) */
#define CAP_SYS_PTRACE_BIT 19
#define CAP_PERFMON_BIT 38
#define CAP_BPF_BIT 39

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int target_check_privileges(char *err, size_t errlen)
{
	if (geteuid() == 0) return 0;
	FILE *f = door_proc_fopen(getpid(), "status");
	uint64_t eff = 0;
	char line[256];
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "CapEff: %llx", (unsigned long long *)&eff) == 1) break;
	if (f) fclose(f);
	uint64_t need = 1ULL << CAP_BPF_BIT | 1ULL << CAP_PERFMON_BIT | 1ULL << CAP_SYS_PTRACE_BIT;
	if ((eff & need) == need) return 0;
	set_err(err, errlen, "not enough privileges: memtraced needs root, or the capabilities "
		"CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE (try sudo)");
	return -1;
}

/* Reads the state and flags fields of /proc/PID/stat. */
static int read_stat(pid_t pid, char *state, unsigned long *flags)
{
	char buf[1024];
	int fd = door_proc_open(pid, "stat", false);
	if (fd < 0) return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0) return -1;
	buf[n] = '\0';
	/* the command name may hold spaces and parentheses: fields start after the last ')' */
	char *p = strrchr(buf, ')');
	if (!p) return -1;
	int ppid, pgrp, session, tty, tpgid;
	if (sscanf(p + 1, " %c %d %d %d %d %d %lu", state, &ppid, &pgrp, &session, &tty, &tpgid,
		   flags) != 7)
		return -1;
	return 0;
}

int target_check_pid(pid_t pid, char *err, size_t errlen)
{
	if (pid == getpid()) {
		set_err(err, errlen, "PID %d is memtraced itself", (int)pid);
		return -1;
	}
	if (kill(pid, 0) < 0 && errno == ESRCH) {
		set_err(err, errlen, "no process with PID %d", (int)pid);
		return -1;
	}
	char state;
	unsigned long flags;
	if (read_stat(pid, &state, &flags) < 0) {
		set_err(err, errlen, "no process with PID %d (cannot read /proc/%d/stat)", (int)pid,
			(int)pid);
		return -1;
	}
	if (flags & PF_KTHREAD) {
		set_err(err, errlen, "PID %d is a kernel thread: it has no user-space allocator to trace",
			(int)pid);
		return -1;
	}
	if (state == 'Z' || state == 'X') {
		set_err(err, errlen, "PID %d has already exited (zombie)", (int)pid);
		return -1;
	}
	/* a thread id is accepted by kill() and /proc, but the probes filter on the process */
	char line[256];
	FILE *f = door_proc_fopen(pid, "status");
	int tgid = (int)pid;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "Tgid: %d", &tgid) == 1) break;
	if (f) fclose(f);
	if (tgid != (int)pid) {
		set_err(err, errlen, "%d is a thread of process %d: give the process id", (int)pid, tgid);
		return -1;
	}
	char exe[PATH_MAX];
	target_exe_path(pid, exe, sizeof exe);
	if (!exe[0]) {
		set_err(err, errlen, "cannot read the executable of PID %d (/proc/%d/exe): %s", (int)pid,
			(int)pid, strerror(errno));
		return -1;
	}
	return 0;
}

void target_exe_path(pid_t pid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
	ssize_t n = readlink(path, buf, len - 1);
	buf[n > 0 ? n : 0] = '\0';
}

/* execvp's lookup: a name with a '/' is taken as is, else the first executable in PATH. */
static int resolve_command(const char *name, char *out, size_t outlen, int *status_hint,
			   char *err, size_t errlen)
{
	struct stat st;
	if (strchr(name, '/')) {
		if (stat(name, &st) < 0) {
			set_err(err, errlen, "cannot run '%s': %s", name, strerror(errno));
			*status_hint = 127;
			return -1;
		}
		if (!S_ISREG(st.st_mode) || access(name, X_OK) < 0) {
			set_err(err, errlen, "cannot run '%s': not an executable file", name);
			*status_hint = 126;
			return -1;
		}
		snprintf(out, outlen, "%s", name);
		return 0;
	}
	const char *path = getenv("PATH");
	if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
	bool found_not_exec = false;
	for (const char *p = path;; ) {
		const char *colon = strchr(p, ':');
		size_t dl = colon ? (size_t)(colon - p) : strlen(p);
		int n = snprintf(out, outlen, "%.*s%s%s", (int)dl, p, dl ? "/" : "", name);
		if (n > 0 && (size_t)n < outlen && stat(out, &st) == 0 && S_ISREG(st.st_mode)) {
			if (access(out, X_OK) == 0) return 0;
			found_not_exec = true;
		}
		if (!colon) break;
		p = colon + 1;
	}
	set_err(err, errlen, "cannot run '%s': %s", name,
		found_not_exec ? "permission denied" : "command not found in PATH");
	*status_hint = found_not_exec ? 126 : 127;
	return -1;
}

int target_spawn(char *const argv[], struct spawned *sp, int *status_hint, char *err, size_t errlen)
{
	int go[2], ex[2];
	*status_hint = 1;
	memset(sp, 0, sizeof *sp);
	sp->pid = -1;
	if (resolve_command(argv[0], sp->exe, sizeof sp->exe, status_hint, err, errlen) < 0) return -1;
	if (pipe2(go, O_CLOEXEC) < 0 || pipe2(ex, O_CLOEXEC) < 0) {
		set_err(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		set_err(err, errlen, "fork: %s", strerror(errno));
		close(go[0]); close(go[1]); close(ex[0]); close(ex[1]);
		return -1;
	}
	if (pid == 0) {
		/* Child: wait until the probes are in place, then become CMD. Both pipes are
		 * close-on-exec, so a successful exec shows as EOF on the error pipe. */
		close(go[1]);
		close(ex[0]);
		char c;
		ssize_t n;
		while ((n = read(go[0], &c, 1)) < 0 && errno == EINTR) {}
		if (n != 1) _exit(127); /* memtraced went away without releasing us */
		execv(sp->exe, argv);
		int e = errno;
		(void)!write(ex[1], &e, sizeof e);
		_exit(e == ENOENT ? 127 : 126);
	}
	close(go[0]);
	close(ex[1]);
	sp->pid = pid;
	sp->go_fd = go[1];
	sp->err_fd = ex[0];
	return 0;
}

int target_release(struct spawned *sp, char *err, size_t errlen)
{
	char c = 'g';
	int rc = 0;
	if (write(sp->go_fd, &c, 1) != 1) {
		set_err(err, errlen, "cannot release the command: %s", strerror(errno));
		rc = -1;
	}
	close(sp->go_fd);
	sp->go_fd = -1;
	int e;
	ssize_t n;
	while ((n = read(sp->err_fd, &e, sizeof e)) < 0 && errno == EINTR) {}
	close(sp->err_fd);
	sp->err_fd = -1;
	if (rc == 0 && n == (ssize_t)sizeof e) {
		set_err(err, errlen, "cannot run '%s': %s", sp->exe, strerror(e));
		rc = -1;
	}
	return rc;
}

void target_abort(struct spawned *sp)
{
	if (sp->pid <= 0) return;
	kill(sp->pid, SIGKILL);
	while (waitpid(sp->pid, NULL, 0) < 0 && errno == EINTR) {}
	if (sp->go_fd >= 0) close(sp->go_fd);
	if (sp->err_fd >= 0) close(sp->err_fd);
	sp->go_fd = sp->err_fd = -1;
	sp->pid = -1;
}

int target_pidfd(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	return -1;
#endif
}

int target_exit_status(int wstatus)
{
	if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
	return 1;
}

const char *target_started_as(const char *name, const char *exe, char *buf, size_t len)
{
	size_t n = strlen(name), e = strlen(exe);
	if (!e || n < e + 3 || strncmp(name + n - e - 1, exe, e) != 0 || name[n - 1] != ')' ||
	    strncmp(name + n - e - 3, " (", 2) != 0)
		return NULL;
	snprintf(buf, len, "%.*s", (int)(n - e - 3), name);
	return buf;
}

void target_program_name(pid_t pid, const char *argv0, const char *exe, char *buf, size_t len)
{
	char cmd[256] = "";
	if (!argv0) {
		int fd = door_proc_open(pid, "cmdline", false);
		if (fd >= 0) {
			ssize_t n = read(fd, cmd, sizeof cmd - 1);
			cmd[n > 0 ? n : 0] = '\0'; /* the first NUL ends argv0 */
			close(fd);
		}
		argv0 = cmd;
	}
	const char *name = strrchr(argv0, '/') ? strrchr(argv0, '/') + 1 : argv0;
	const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
	if (!*name || !*exe || strcmp(name, base) == 0) snprintf(buf, len, "%s", exe);
	else snprintf(buf, len, "%.200s (%.3800s)", name, exe);
}

/* ld.so's options that take a value (ld.so --help, glibc 2.36) */
static const char *const ldso_value_options[] = {"--library-path", "--glibc-hwcaps-prefix",
	"--glibc-hwcaps-mask", "--inhibit-rpath", "--audit", "--preload", "--argv0", NULL};

bool target_is_ldso(const char *exe)
{
	const char *base = strrchr(exe, '/');
	base = base ? base + 1 : exe;
	return (strncmp(base, "ld-", 3) == 0 || strncmp(base, "ld.so", 5) == 0) && strstr(base, ".so");
}

bool target_ldso_program(const char *exe, char *const argv[], char *prog, size_t len)
{
	if (!target_is_ldso(exe)) return false;
	for (int i = 1; argv[0] && argv[i]; i++) {
		if (strncmp(argv[i], "--", 2) != 0) {
			snprintf(prog, len, "%s", argv[i]);
			return true;
		}
		for (int k = 0; ldso_value_options[k]; k++)
			if (strcmp(argv[i], ldso_value_options[k]) == 0 && argv[i + 1]) {
				i++;
				break;
			}
	}
	return false;
}
