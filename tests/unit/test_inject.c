/* The injector (user/daemon/core/inject/) against real processes: tests/targets/inject_block
 * blocks in one system call (epoll_wait, read, nanosleep, futex, read with busy threads),
 * the library tests/plugins/inject_probe.so is placed into it meanwhile, and the target then
 * reports what its call returned and whether its registers survived (see inject_block.c).
 * Also the refusals: static, no dlopen, seccomp, already traced, stopped, foreign
 * architecture.
 * Needs root (ptrace of a non-child and /proc/PID/mem). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "with_parser.h"
#include "inject/inject.h"

static char probe[PATH_MAX], tmpdir[64];

struct target {
	pid_t pid;
	int in, out;            /* its stdin (write end), its stdout (read end) */
	char mark[PATH_MAX];    /* where the probe's constructor writes */
	char output[4096];
	int status;
};

static const char *build_dir(void)
{
	const char *b = getenv("BUILD");
	return b && b[0] ? b : "build";
}

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

/* The system call the thread is blocked in (/proc/.../syscall), -1 if running. */
static long blocked_in(pid_t pid, pid_t tid)
{
	char path[96], buf[64] = "";
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	FILE *f = fopen(path, "r");
	if (!f) return -2;
	if (!fgets(buf, sizeof(buf), f)) buf[0] = 0;
	fclose(f);
	return strncmp(buf, "running", 7) == 0 || !buf[0] ? -1 : strtol(buf, NULL, 10);
}

/* Starts `exe mode`, waits for "ready" and until its main thread sits in syscall nr. */
static int start(const char *exe, const char *mode, long nr, struct target *t)
{
	int in[2], out[2];
	memset(t, 0, sizeof(*t));
	snprintf(t->mark, sizeof(t->mark), "%s/mark.%s", tmpdir, mode);
	unlink(t->mark);
	if (pipe(in) || pipe(out)) return -1;
	t->pid = fork();
	if (t->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		setenv("INJECT_PROBE_MARK", t->mark, 1);
		setenv("INJECT_PROBE_PATH", probe, 1);
		execl(exe, exe, mode, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	t->in = in[1];
	t->out = out[0];
	char line[64] = "";
	struct pollfd p = { t->out, POLLIN, 0 };
	if (poll(&p, 1, 5000) != 1 || read(t->out, line, sizeof(line) - 1) <= 0 ||
	    strncmp(line, "ready", 5) != 0)
		return -1;
	for (long until = now_ms() + 3000; now_ms() < until; usleep(10000))
		if (blocked_in(t->pid, t->pid) == nr) {
			usleep(50000); /* surely asleep in it */
			return 0;
		}
	return -1;
}

/* Lets a target waiting on stdin go (byte >= 0), collects its output and exit status. */
static void finish(struct target *t, int byte)
{
	if (byte >= 0) {
		char c = (char)byte;
		if (write(t->in, &c, 1) != 1) {}
	}
	size_t got = 0;
	struct pollfd p = { t->out, POLLIN, 0 };
	while (got + 1 < sizeof(t->output) && poll(&p, 1, 15000) == 1) {
		ssize_t n = read(t->out, t->output + got, sizeof(t->output) - 1 - got);
		if (n <= 0) break;
		got += n;
	}
	t->output[got] = 0;
	close(t->in);
	close(t->out);
	if (waitpid(t->pid, &t->status, 0) != t->pid) t->status = -1;
}

static long field(const struct target *t, const char *key)
{
	char k[64];
	snprintf(k, sizeof(k), " %s=", key);
	const char *p = strstr(t->output, k);
	return p ? strtol(p + strlen(k), NULL, 10) : LONG_MIN;
}

static bool regs_ok(const struct target *t)
{
	return strstr(t->output, "regs=ok") != NULL;
}

static bool exited_0(const struct target *t)
{
	return WIFEXITED(t->status) && WEXITSTATUS(t->status) == 0;
}

static bool mark_has(const struct target *t, const char *text)
{
	char buf[1024] = "";
	FILE *f = fopen(t->mark, "r");
	if (!f) return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = 0;
	fclose(f);
	return strstr(buf, text) != NULL;
}

static void ctor_checks(const char *mode, const struct target *t)
{
	char name[128], text[64];
	snprintf(text, sizeof(text), "ctor pid=%d runs=1", (int)t->pid);
	snprintf(name, sizeof(name), "inject_%s_constructor_ran_in_target", mode);
	CHECKF(name, mark_has(t, text) && field(t, "loaded") == 1 && field(t, "ctor_runs") == 1,
	       "mark %s, output: %s", t->mark, t->output);
	snprintf(name, sizeof(name), "inject_%s_exit_0_regs_intact", mode);
	CHECKF(name, exited_0(t) && (regs_ok(t) || strstr(t->output, "regs=unchecked")),
	       "status 0x%x, output: %s", t->status, t->output);
}

/* epoll_wait (3 s timeout): a session does dlopen, dlsym and a call during one stop. */
static void test_epoll(const char *exe)
{
	struct target t;
	char err[512] = "";
	if (start(exe, "epoll", SYS_epoll_wait, &t) != 0) {
		CHECK("inject_epoll_target_blocks", 0);
		return;
	}
	long t0 = now_ms();
	struct inject_session *s = NULL;
	uint64_t handle = 0, fn = 0, ret = 0, arg = 5;
	int rc = inject_attach(t.pid, &s, err, sizeof(err));
	if (rc == 0) rc = inject_session_dlopen(s, probe, &handle, err, sizeof(err));
	if (rc == 0) rc = inject_session_dlsym(s, handle, "inject_probe_value", &fn, err, sizeof(err));
	if (rc == 0) rc = inject_session_call(s, fn, &arg, 1, &ret, err, sizeof(err));
	if (s && inject_detach(s, rc == 0 ? err : NULL, sizeof(err)) != 0) rc = -1;
	long held = now_ms() - t0;
	CHECKF("inject_epoll_session_call_returns_value", rc == 0 && handle && ret == 22,
	       "rc %d handle 0x%llx ret %llu: %s", rc, (unsigned long long)handle,
	       (unsigned long long)ret, err);
	finish(&t, -1);
	ctor_checks("epoll", &t);
	/* no EINTR: the wait restarted and timed out (with its whole 3 s again at most) */
	long el = field(&t, "elapsed_ms");
	CHECKF("inject_epoll_wait_times_out_without_eintr",
	       field(&t, "r") == 0 && field(&t, "errno") == 0 && el >= 3000 && el < 6500 + held,
	       "output: %s", t.output);
}

/* read on a pipe: two one-shot dlopens (same handle, one constructor run), a failing one. */
static void test_read(const char *exe)
{
	struct target t;
	char err[512] = "";
	if (start(exe, "read", SYS_read, &t) != 0) {
		CHECK("inject_read_target_blocks", 0);
		return;
	}
	uint64_t h1 = 0, h2 = 0, h3 = 0;
	int rc1 = inject_dlopen(t.pid, probe, &h1, err, sizeof(err));
	CHECKF("inject_read_dlopen", rc1 == 0 && h1, "%s", err);
	int rc2 = inject_dlopen(t.pid, probe, &h2, err, sizeof(err));
	CHECKF("inject_read_second_dlopen_same_handle", rc2 == 0 && h2 == h1,
	       "0x%llx then 0x%llx: %s", (unsigned long long)h1, (unsigned long long)h2, err);
	int rc3 = inject_dlopen(t.pid, "/nonexistent/libnothing.so", &h3, err, sizeof(err));
	CHECKF("inject_read_dlopen_error_is_dlerror",
	       rc3 != 0 && strstr(err, "cannot open shared object file"), "rc %d: %s", rc3, err);
	finish(&t, 'x');
	ctor_checks("read", &t);
	CHECKF("inject_read_returns_data_not_eintr", field(&t, "r") == 1 && field(&t, "byte") == 'x',
	       "output: %s", t.output);
}

static void test_nanosleep(const char *exe)
{
	struct target t;
	char err[512] = "";
	if (start(exe, "nanosleep", SYS_nanosleep, &t) != 0) {
		CHECK("inject_nanosleep_target_blocks", 0);
		return;
	}
	uint64_t h = 0;
	int rc = inject_dlopen(t.pid, probe, &h, err, sizeof(err));
	CHECKF("inject_nanosleep_dlopen", rc == 0 && h, "%s", err);
	finish(&t, -1);
	ctor_checks("nanosleep", &t);
	/* restart_syscall: the remaining time only, not 2 s again */
	long el = field(&t, "elapsed_ms");
	CHECKF("inject_nanosleep_full_time_no_eintr",
	       field(&t, "r") == 0 && field(&t, "errno") == 0 && el >= 2000 && el < 2500,
	       "output: %s", t.output);
}

static void test_futex(const char *exe)
{
	struct target t;
	char err[512] = "";
	if (start(exe, "futex", SYS_futex, &t) != 0) {
		CHECK("inject_futex_target_blocks", 0);
		return;
	}
	uint64_t h = 0;
	int rc = inject_dlopen(t.pid, probe, &h, err, sizeof(err));
	CHECKF("inject_futex_dlopen", rc == 0 && h, "%s", err);
	finish(&t, 'y');
	ctor_checks("futex", &t);
	CHECKF("inject_futex_sem_wait_returns_0", field(&t, "r") == 0 && field(&t, "errno") == 0,
	       "output: %s", t.output);
}

struct sender { pid_t pid; int delay_ms; };
static void *send_usr1(void *arg)
{
	struct sender *s = arg;
	usleep(s->delay_ms * 1000);
	union sigval v = { .sival_int = 4242 };
	sigqueue(s->pid, SIGUSR1, v);
	return NULL;
}

/* Busy threads keep counting while the probe's constructor holds the stopped thread for
 * 200 ms; a SIGUSR1 queued meanwhile is delivered after the call, once, unchanged. */
static void test_threads(const char *exe)
{
	struct target t;
	char err[512] = "";
	if (start(exe, "threads", SYS_read, &t) != 0) {
		CHECK("inject_threads_target_blocks", 0);
		return;
	}
	struct sender snd = { t.pid, 100 };
	pthread_t th;
	pthread_create(&th, NULL, send_usr1, &snd);
	uint64_t h = 0;
	long t0 = now_ms();
	int rc = inject_dlopen(t.pid, probe, &h, err, sizeof(err));
	long held = now_ms() - t0;
	pthread_join(th, NULL);
	CHECKF("inject_threads_dlopen", rc == 0 && h && held >= 150, "held %ld ms: %s", held, err);
	CHECKF("inject_threads_others_kept_running", mark_has(&t, "workers advanced=2 of 2"),
	       "mark %s", t.mark);
	usleep(100000);
	finish(&t, 'z');
	ctor_checks("threads", &t);
	CHECKF("inject_threads_read_returns_data", field(&t, "r") == 1 && field(&t, "byte") == 'z',
	       "output: %s", t.output);
	CHECKF("inject_threads_signal_delivered_once_unchanged",
	       field(&t, "usr1") == 1 && field(&t, "code") == SI_QUEUE &&
	       field(&t, "pid") == getpid() && field(&t, "value") == 4242, "output: %s", t.output);
}

/* A refused injection leaves the target alone: its read still returns the byte. */
static void refused(const char *name, struct target *t, const char *want)
{
	char err[512] = "", cname[128];
	uint64_t h = 0;
	int rc = inject_dlopen(t->pid, probe, &h, err, sizeof(err));
	CHECKF(name, rc != 0 && strstr(err, want), "rc %d, message: %s", rc, err);
	finish(t, 'r');
	snprintf(cname, sizeof(cname), "%s_target_unharmed", name);
	CHECKF(cname, exited_0(t) && field(t, "r") == 1 && field(t, "loaded") == 0,
	       "status 0x%x output: %s", t->status, t->output);
}

static void test_refusals(const char *exe, const char *static_exe, const char *nolibc_exe)
{
	struct target t;
	if (start(nolibc_exe, "read", SYS_read, &t) == 0) {
		char err[512] = "";
		uint64_t h;
		int rc = inject_dlopen(t.pid, probe, &h, err, sizeof(err));
		CHECKF("inject_refuses_no_dlopen", rc != 0 && strstr(err, "exports dlopen"),
		       "rc %d: %s", rc, err);
		finish(&t, 'r');
		CHECKF("inject_refuses_no_dlopen_target_unharmed", exited_0(&t), "status 0x%x", t.status);
	} else {
		CHECK("inject_nolibc_target_blocks", 0);
	}
	if (start(static_exe, "read", SYS_read, &t) == 0) refused("inject_refuses_static", &t, "statically linked");
	else CHECK("inject_static_target_blocks", 0);

	if (start(exe, "seccomp", SYS_read, &t) == 0) refused("inject_refuses_seccomp", &t, "seccomp");
	else CHECK("inject_seccomp_target_blocks", 0);

	if (start(exe, "read", SYS_read, &t) == 0) {
		/* someone else (here: us, without the injector) already traces it */
		int st;
		bool seized = ptrace(PTRACE_SEIZE, t.pid, NULL, NULL) == 0;
		char err[512] = "";
		uint64_t h;
		int rc = inject_dlopen(t.pid, probe, &h, err, sizeof(err));
		CHECKF("inject_refuses_traced", seized && rc != 0 && strstr(err, "already traced"),
		       "rc %d: %s", rc, err);
		if (seized && ptrace(PTRACE_INTERRUPT, t.pid, NULL, NULL) == 0 &&
		    waitpid(t.pid, &st, __WALL) == t.pid)
			ptrace(PTRACE_DETACH, t.pid, NULL, NULL);
		finish(&t, 'r');
		CHECKF("inject_refuses_traced_target_unharmed", exited_0(&t) && field(&t, "r") == 1,
		       "output: %s", t.output);
	}

	if (start(exe, "read", SYS_read, &t) == 0) {
		kill(t.pid, SIGSTOP);
		for (int i = 0; i < 100 && blocked_in(t.pid, t.pid) != -2; i++) {
			char path[64], st[256] = "";
			snprintf(path, sizeof(path), "/proc/%d/stat", (int)t.pid);
			FILE *f = fopen(path, "r");
			if (f) { if (!fgets(st, sizeof(st), f)) st[0] = 0; fclose(f); }
			char *c = strrchr(st, ')');
			if (c && c[2] == 'T') break;
			usleep(10000);
		}
		char err[512] = "";
		uint64_t h;
		int rc = inject_dlopen(t.pid, probe, &h, err, sizeof(err));
		CHECKF("inject_refuses_stopped", rc != 0 && strstr(err, "stopped"), "rc %d: %s", rc, err);
		kill(t.pid, SIGCONT);
		finish(&t, 'r');
		CHECKF("inject_refuses_stopped_target_unharmed", exited_0(&t) && field(&t, "r") == 1,
		       "output: %s", t.output);
	}

	/* foreign architecture: an x86-64 program whose ELF header says aarch64 */
	char fake[PATH_MAX], err[512] = "";
	snprintf(fake, sizeof(fake), "%s/aarch64-prog", tmpdir);
	char cmd[2 * PATH_MAX];
	snprintf(cmd, sizeof(cmd), "cp %s %s", exe, fake);
	int fd = system(cmd) == 0 ? open(fake, O_WRONLY) : -1;
	uint16_t em_aarch64 = 183;
	bool patched = fd >= 0 && pwrite(fd, &em_aarch64, 2, 18) == 2; /* e_machine */
	if (fd >= 0) close(fd);
	int rc = inject_check_exe(getpid(), fake, false, err, sizeof(err));
	CHECKF("inject_refuses_foreign_arch", patched && rc != 0 && strstr(err, "x86-64"),
	       "rc %d: %s", rc, err);
	rc = inject_check_exe(getpid(), exe, false, err, sizeof(err));
	CHECKF("inject_accepts_dynamic_x86_64", rc == 0, "%s", err);
	/* `ld.so PROG` (issue 47): the dynamic linker as the executable is no static program;
	 * running, it has loaded one; started by us, its entry point comes before any library */
	const char *ldso = "/lib64/ld-linux-x86-64.so.2";
	rc = inject_check_exe(getpid(), ldso, false, err, sizeof(err));
	CHECKF("inject_ldso_started_said", rc != 0 && strstr(err, "the dynamic linker itself") &&
	       !strstr(err, "statically linked"), "rc %d: %s", rc, err);
	rc = inject_check_exe(getpid(), ldso, true, err, sizeof(err));
	CHECKF("inject_ldso_running_said", rc != 0 && strstr(err, "the dynamic linker itself"),
	       "rc %d: %s", rc, err);
}

int main(int argc, char **argv)
{
	if (geteuid() != 0) {
		printf("SKIP inject: needs root (ptrace of other processes, /proc/PID/mem)\n");
		return 0;
	}
	with_parser(argc, argv); /* it reads the targets' files for the daemon */
	char exe[PATH_MAX], static_exe[PATH_MAX], nolibc_exe[PATH_MAX], rel[PATH_MAX];
	snprintf(rel, sizeof(rel), "%s/tests/plugins/inject_probe.so", build_dir());
	if (!realpath(rel, probe)) {
		printf("FAIL inject_built: missing %s (run make)\n", rel);
		return 1;
	}
	snprintf(rel, sizeof(rel), "%s/tests/targets/inject_block", build_dir());
	if (!realpath(rel, exe)) exe[0] = 0;
	snprintf(rel, sizeof(rel), "%s/tests/targets/inject_block_static", build_dir());
	if (!realpath(rel, static_exe)) static_exe[0] = 0;
	snprintf(rel, sizeof(rel), "%s/tests/targets/inject_nolibc", build_dir());
	if (!realpath(rel, nolibc_exe)) nolibc_exe[0] = 0;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/memtraced-inject.XXXXXX");
	if (!exe[0] || !static_exe[0] || !nolibc_exe[0] || !mkdtemp(tmpdir)) {
		printf("FAIL inject_built: missing targets or no temporary directory\n");
		return 1;
	}
	test_epoll(exe);
	test_read(exe);
	test_nanosleep(exe);
	test_futex(exe);
	test_threads(exe);
	test_refusals(exe, static_exe, nolibc_exe);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd) != 0) {}
	return CHECK_DONE();
}
