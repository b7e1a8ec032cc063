/* Unit tests of the lifecycle pieces: the .execN trace names, --follow-forks parsing,
 * alloc_sites_added, and the watcher (the /proc fallback everywhere; the BPF watcher as root:
 * exec and fork events of a watched child, nothing for an unwatched one). */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sites/allocsyms.h"
#include "check.h"
#include "with_parser.h"
#include "options/cli.h"
#include "process/lifecycle.h"

static void test_exec_names(void)
{
	char buf[64];
	CHECK("exec_name_before_ctf", cli_exec_output_path("memtrace-12.ctf", 1, buf, sizeof buf) == 0 &&
					      strcmp(buf, "memtrace-12.exec1.ctf") == 0);
	CHECK("exec_name_dir_kept", cli_exec_output_path("/tmp/a.b/t.ctf", 3, buf, sizeof buf) == 0 &&
					   strcmp(buf, "/tmp/a.b/t.exec3.ctf") == 0);
	CHECK("exec_name_appended", cli_exec_output_path("trace", 2, buf, sizeof buf) == 0 &&
					   strcmp(buf, "trace.exec2") == 0);
	CHECK("exec_name_too_long", cli_exec_output_path("0123456789.ctf", 1, buf, 12) == -1);
}

static enum cli_result parse(struct cli_opts *o, char *err, int n, ...)
{
	char *argv[16] = {"memtraced"};
	va_list ap;
	va_start(ap, n);
	for (int i = 0; i < n; i++) argv[i + 1] = va_arg(ap, char *);
	va_end(ap);
	return cli_parse(n + 1, argv, o, err, 256);
}

static void test_cli(void)
{
	struct cli_opts o;
	char err[256] = "";
	CHECK("follow_forks_parsed", parse(&o, err, 3, "--follow-forks", "-p", "1") == CLI_OK &&
				     o.follow_forks);
	CHECK("follow_forks_with_percent_p",
	      parse(&o, err, 5, "--follow-forks", "-o", "t-%p.ctf", "-p", "1") == CLI_OK);
	CHECKF("follow_forks_output_without_percent_p",
	       parse(&o, err, 5, "--follow-forks", "-o", "t.ctf", "-p", "1") == CLI_ERROR &&
		       strstr(err, "%p"), "err: %s", err);
	CHECK("no_follow_forks_by_default", parse(&o, err, 2, "-p", "1") == CLI_OK && !o.follow_forks);
}

static void test_sites_added(void)
{
	struct alloc_sites have = {0}, *added = calloc(1, sizeof *added);
	char err[512] = "";
	/* nothing probed yet: our own libc's functions are "new" */
	int rc = alloc_sites_added(getpid(), &have, added, err, sizeof err);
	bool libc_malloc = false;
	for (int i = 0; rc == 0 && i < added->n; i++)
		libc_malloc |= added->sites[i].fn == AF_MALLOC && strstr(added->sites[i].path, "libc.so");
	CHECKF("sites_added_finds_libc_malloc", rc == 0 && libc_malloc, "rc %d, %d sites: %s", rc,
	       added->n, err);
	/* the same objects again: nothing new */
	have = *added;
	rc = alloc_sites_added(getpid(), &have, added, err, sizeof err);
	CHECKF("sites_added_nothing_new", rc == 0 && added->n == 0, "rc %d, %d sites (first %s)", rc,
	       added->n, added->n ? added->sites[0].path : "");
	/* the same files under other names (/lib -> /usr/lib on merged-/usr): nothing new either */
	for (int i = 0; i < have.n; i++) {
		char real[4096];
		if (strncmp(have.sites[i].path, "/usr/lib/", 9) == 0) {
			snprintf(real, sizeof real, "/lib/%s", have.sites[i].path + 9);
			if (access(real, R_OK) == 0) snprintf(have.sites[i].path, sizeof have.sites[i].path, "%s", real);
		}
	}
	rc = alloc_sites_added(getpid(), &have, added, err, sizeof err);
	CHECKF("sites_added_same_file_other_name", rc == 0 && added->n == 0, "rc %d, %d sites", rc,
	       added->n);
	rc = alloc_sites_added(999999999, &have, added, err, sizeof err);
	CHECKF("sites_added_gone_process", rc == -1 && strstr(err, "gone"), "rc %d: %s", rc, err);
	free(added);
}

/* A child shell that waits for a line on its stdin, runs /bin/true (a fork) and execs
 * /bin/sleep 5. Returns once the child runs the shell (its own exec is not an event). */
static pid_t start_child(int *go_fd)
{
	int p[2];
	*go_fd = -1;
	if (pipe(p) < 0) return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(p[1]);
		dup2(p[0], 0);
		execl("/bin/sh", "sh", "-c", "read x; /bin/true; exec /bin/sleep 5", (char *)NULL);
		_exit(127);
	}
	close(p[0]);
	*go_fd = p[1];
	char exe[64], self[4096], target[4096];
	snprintf(exe, sizeof exe, "/proc/%d/exe", (int)pid);
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	self[n > 0 ? n : 0] = 0;
	for (int i = 0; i < 500; i++) { /* up to 5 s */
		n = readlink(exe, target, sizeof target - 1);
		target[n > 0 ? n : 0] = 0;
		if (n > 0 && strcmp(target, self) != 0) break;
		usleep(10000);
	}
	return pid;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Watches a child (or not), lets it fork and exec, collects events for up to 5 s (a bound,
 * not a timing assertion). */
static void run_watcher(const char *prefix, bool proc_mode, bool watch)
{
	if (proc_mode) setenv("MEMTRACED_LIFECYCLE", "proc", 1);
	else unsetenv("MEMTRACED_LIFECYCLE");
	char note[512] = "", name[128];
	struct lifecycle *lc = lifecycle_open(true, false, note, sizeof note);
	snprintf(name, sizeof name, "%s_opens", prefix);
	CHECKF(name, lc && lifecycle_uses_bpf(lc) == !proc_mode, "note: %s", note);
	if (!lc || lifecycle_uses_bpf(lc) == proc_mode) {
		lifecycle_close(lc);
		return;
	}
	int go;
	pid_t pid = start_child(&go);
	if (watch) lifecycle_watch(lc, pid, note, sizeof note);
	(void)!write(go, "g\n", 2);
	close(go);
	bool exec_seen = false, fork_seen = false, other = false, child_exec = false;
	pid_t child = 0;
	for (double end = now_s() + 5;
	     now_s() < end && !(exec_seen && (proc_mode || (fork_seen && child_exec)));) {
		usleep(20000);
		lifecycle_drain(lc);
		struct lifecycle_event ev;
		while (lifecycle_next(lc, &ev)) {
			if (child && ev.pid == child) child_exec |= ev.kind == LC_EXEC; /* /bin/true */
			else if (ev.pid != pid) other = true;
			else if (ev.kind == LC_EXEC) exec_seen = true;
			else if (ev.kind == LC_FORK && ev.child > 0 && ev.child != pid) {
				fork_seen = true;
				child = ev.child;
			}
		}
		if (!watch && now_s() > end - 4.5) break; /* half a second is plenty for nothing */
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	lifecycle_unwatch(lc, pid);
	lifecycle_close(lc);
	snprintf(name, sizeof name, "%s_exec_event", prefix);
	CHECKF(name, exec_seen == watch && !other, "exec seen %d (want %d), other pid %d", exec_seen,
	       watch, other);
	if (!proc_mode) {
		snprintf(name, sizeof name, "%s_fork_event", prefix);
		CHECKF(name, fork_seen == watch, "fork seen %d (want %d)", fork_seen, watch);
		/* follow_forks: the watcher watches the forked child at once (its exec of /bin/true) */
		snprintf(name, sizeof name, "%s_forked_child_watched", prefix);
		CHECKF(name, child_exec == watch, "exec of the forked child seen %d (want %d)",
		       child_exec, watch);
	}
}

int main(int argc, char **argv)
{
	with_parser(argc, argv); /* it finds _dl_debug_state for the BPF watcher's dlopen watch */
	test_exec_names();
	test_cli();
	test_sites_added();
	run_watcher("watcher_proc", true, true);
	if (geteuid() == 0 && access("/sys/kernel/btf/vmlinux", R_OK) == 0) {
		run_watcher("watcher_bpf", false, true);
		run_watcher("watcher_bpf_unwatched", false, false);
	} else {
		const char *ci = getenv("CI");
		printf("%s watcher_bpf: needs root and BTF\n", ci && !strcmp(ci, "true") ? "FAIL" : "SKIP");
		if (ci && !strcmp(ci, "true")) check_failures++;
	}
	return CHECK_DONE();
}
