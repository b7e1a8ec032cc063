/* The traced process (see target.h). */
#include "target.h"

#include <errno.h>
#include <pthread.h>
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
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
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
	FILE *f = fopen("/proc/self/status", "r");
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
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
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
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
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

/* ---- exit watch: the -- CMD child held at its exit (ptrace exit-stop) ----
 * A thread of its own, because ptrace requests come from the thread that attached and every
 * signal the child gets stops it until that thread passes it on: it must answer at once. */
struct exit_watch {
	pid_t pid;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int state;                 /* 0 starting, 1 seized, -1 seize failed, 2 exited */
	int seize_errno;
	int wstatus;
	void (*hook)(void *ctx);   /* called at the exit-stop, under hook_lock */
	void *hook_ctx;
	pthread_mutex_t hook_lock;
};

static void watch_set_state(struct exit_watch *w, int state)
{
	pthread_mutex_lock(&w->lock);
	w->state = state;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static bool is_stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

static void *watch_main(void *arg)
{
	struct exit_watch *w = arg;
	/* SEIZE (unlike ATTACH) neither stops the child nor makes its exec send a SIGTRAP */
	if (ptrace(PTRACE_SEIZE, w->pid, NULL, (void *)(long)PTRACE_O_TRACEEXIT) < 0) {
		w->seize_errno = errno;
		watch_set_state(w, -1);
		return NULL;
	}
	watch_set_state(w, 1);
	for (;;) {
		int st;
		pid_t r = waitpid(w->pid, &st, __WALL);
		if (r < 0) {
			if (errno == EINTR) continue;
			st = 1 << 8; /* cannot happen: the child is ours; say "exited 1" */
		}
		if (r < 0 || WIFEXITED(st) || WIFSIGNALED(st)) {
			pthread_mutex_lock(&w->lock);
			w->wstatus = st;
			w->state = 2;
			pthread_cond_broadcast(&w->cond);
			pthread_mutex_unlock(&w->lock);
			return NULL;
		}
		if (!WIFSTOPPED(st)) continue;
		int sig = WSTOPSIG(st), event = (unsigned)st >> 16;
		if (event == PTRACE_EVENT_EXIT) {
			/* its memory and mappings are still there: let the hook read them */
			pthread_mutex_lock(&w->hook_lock);
			if (w->hook) w->hook(w->hook_ctx);
			pthread_mutex_unlock(&w->hook_lock);
			ptrace(PTRACE_CONT, w->pid, NULL, NULL);
		} else if (event == PTRACE_EVENT_STOP) {
			/* group-stop: stay stopped as without us (until SIGCONT); else an interrupt */
			if (is_stop_signal(sig)) ptrace(PTRACE_LISTEN, w->pid, NULL, NULL);
			else ptrace(PTRACE_CONT, w->pid, NULL, NULL);
		} else if (event) {
			ptrace(PTRACE_CONT, w->pid, NULL, NULL);
		} else {
			/* signal-delivery-stop: deliver it unchanged */
			ptrace(PTRACE_CONT, w->pid, NULL, (void *)(long)sig);
		}
	}
}

struct exit_watch *exit_watch_start(pid_t pid, char *err, size_t errlen)
{
	struct exit_watch *w = calloc(1, sizeof *w);
	if (!w) {
		set_err(err, errlen, "out of memory");
		return NULL;
	}
	w->pid = pid;
	pthread_mutex_init(&w->lock, NULL);
	pthread_mutex_init(&w->hook_lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	/* signals are for the main thread (its handlers only set flags it polls) */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int e = pthread_create(&w->thread, NULL, watch_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (e) {
		set_err(err, errlen, "cannot start the thread watching PID %d: %s", (int)pid, strerror(e));
		free(w);
		return NULL;
	}
	pthread_mutex_lock(&w->lock);
	while (w->state == 0) pthread_cond_wait(&w->cond, &w->lock);
	int state = w->state;
	pthread_mutex_unlock(&w->lock);
	if (state < 0) {
		set_err(err, errlen, "cannot watch the exit of PID %d (ptrace): %s", (int)pid,
			strerror(w->seize_errno));
		pthread_join(w->thread, NULL);
		free(w);
		return NULL;
	}
	return w;
}

void exit_watch_set_hook(struct exit_watch *w, void (*fn)(void *ctx), void *ctx)
{
	if (!w) return;
	pthread_mutex_lock(&w->hook_lock);
	w->hook = fn;
	w->hook_ctx = ctx;
	pthread_mutex_unlock(&w->hook_lock);
}

void exit_watch_clear_hook(struct exit_watch *w, void *ctx)
{
	if (!w) return;
	pthread_mutex_lock(&w->hook_lock); /* waits for a hook running now */
	if (w->hook_ctx == ctx) w->hook = NULL, w->hook_ctx = NULL;
	pthread_mutex_unlock(&w->hook_lock);
}

bool exit_watch_exited(struct exit_watch *w, int *wstatus, int timeout_ms)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
	pthread_mutex_lock(&w->lock);
	while (w->state != 2 && timeout_ms > 0 &&
	       pthread_cond_timedwait(&w->cond, &w->lock, &until) == 0) {}
	bool done = w->state == 2;
	if (done && wstatus) *wstatus = w->wstatus;
	pthread_mutex_unlock(&w->lock);
	return done;
}

void exit_watch_free(struct exit_watch *w)
{
	if (!w) return;
	pthread_join(w->thread, NULL); /* the child has exited: the thread is done */
	pthread_mutex_destroy(&w->lock);
	pthread_mutex_destroy(&w->hook_lock);
	pthread_cond_destroy(&w->cond);
	free(w);
}
