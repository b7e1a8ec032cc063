/* memtraced: trace the allocations of a process into a memtrace trace.
 *
 *   memtraced -p PID [-o FILE] [--rate R] [--duration SEC]
 *   memtraced [options] -- CMD [ARGS...]
 *
 * Everything that can be checked is checked before anything is attached: options, privileges,
 * the PID, the output file. In -- CMD mode the command is forked and held before its exec
 * until the probes are in place, so the trace starts with its first allocation. */
#include "allocsyms.h"
#include "cli.h"
#include "session.h"
#include "status.h"
#include "target.h"
#include "trace_out.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define POLL_MS 100

static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) { stop_signal = sig; }

static void install_signals(void)
{
	struct sigaction sa = {.sa_handler = on_stop_signal}; /* no SA_RESTART: wake the poll */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	/* a closed stderr must not kill us before the trace is closed (the command, forked
	 * before this, keeps the default) */
	signal(SIGPIPE, SIG_IGN);
}

static void die_msg(const char *msg) { fprintf(stderr, "memtraced: error: %s\n", msg); }

/* Opens (creates or truncates) the trace file before anything is attached. */
static int open_output(const char *path, char *err, size_t errlen)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) snprintf(err, errlen, "cannot write the trace file '%s': %s", path, strerror(errno));
	return fd;
}

/* Has the traced process exited? For our child, reaps it and stores its status. */
static bool target_gone(pid_t pid, bool child, int pidfd, int *wstatus)
{
	if (child) {
		pid_t r = waitpid(pid, wstatus, WNOHANG);
		return r == pid || (r < 0 && errno == ECHILD);
	}
	if (pidfd >= 0) {
		struct pollfd p = {.fd = pidfd, .events = POLLIN};
		return poll(&p, 1, 0) > 0;
	}
	return kill(pid, 0) < 0 && errno == ESRCH;
}

int main(int argc, char **argv)
{
	struct cli_opts o;
	char err[1024] = "";
	switch (cli_parse(argc, argv, &o, err, sizeof err)) {
	case CLI_EXIT_OK: return 0;
	case CLI_ERROR: die_msg(err); return 2;
	case CLI_OK: break;
	}
	if (target_check_privileges(err, sizeof err) < 0) {
		die_msg(err);
		return 1;
	}

	/* the live view (status line, --top): checked now, drawn once tracing runs */
	struct status_opts vo = {.line = !o.no_status && !o.quiet, .top = o.top,
		.top_interval = o.top_interval, .top_by_function = o.top_by_function, .keys = !o.cmd};
	struct status_view *view = NULL;
	if (status_open(&vo, &view, err, sizeof err) < 0) {
		die_msg(err);
		return 1;
	}

	static struct alloc_sites sites;
	struct spawned sp = {.pid = -1, .go_fd = -1, .err_fd = -1};
	bool spawn = o.cmd != NULL;
	pid_t pid = o.pid;
	char exe[4096] = "";
	if (spawn) {
		int status_hint;
		if (target_spawn(o.cmd, &sp, &status_hint, err, sizeof err) < 0) {
			die_msg(err);
			return status_hint;
		}
		pid = sp.pid;
		if (!realpath(sp.exe, exe)) snprintf(exe, sizeof exe, "%s", sp.exe);
		if (alloc_sites_for_exec(sp.exe, pid, &sites, err, sizeof err) < 0) {
			fprintf(stderr, "memtraced: error: cannot find the allocator of '%s': %s\n", sp.exe, err);
			target_abort(&sp);
			return 1;
		}
	} else {
		if (target_check_pid(pid, err, sizeof err) < 0) {
			die_msg(err);
			return 1;
		}
		target_exe_path(pid, exe, sizeof exe);
		if (alloc_sites_for_pid(pid, &sites, err, sizeof err) < 0) {
			fprintf(stderr, "memtraced: error: cannot find the allocator of PID %d: %s\n", (int)pid, err);
			return 1;
		}
	}

	char default_out[64];
	snprintf(default_out, sizeof default_out, "memtrace-%d.ctf", (int)pid);
	const char *out_path = o.output ? o.output : default_out;
	int out_fd = -1;
	if (!o.probe_floor) {
		out_fd = open_output(out_path, err, sizeof err);
		if (out_fd < 0) {
			die_msg(err);
			if (spawn) target_abort(&sp);
			return 1;
		}
	}

	struct session_opts so = {
		.pid = pid, .rate = o.rate, .stack_bytes = o.stack_bytes, .floor = o.probe_floor,
		.out_fd = out_fd, .executable = exe, .sites = &sites, .spawned = spawn};
	struct session *s = session_open(&so, err, sizeof err);
	if (!s) {
		die_msg(err);
		if (out_fd >= 0) {
			close(out_fd);
			unlink(out_path);
		}
		if (spawn) target_abort(&sp);
		return 1;
	}
	if (!o.quiet) {
		fprintf(stderr, "memtraced: tracing PID %d (%s), allocator %s, rate %g, %s%s\n", (int)pid,
			exe[0] ? exe : "?", sites.allocator[0] ? sites.allocator : "unknown", o.rate,
			o.probe_floor ? "probe floor: no trace" : "trace ", o.probe_floor ? "" : out_path);
		if (sites.notes[0]) fprintf(stderr, "memtraced: note: %s\n", sites.notes);
	}
	install_signals();

	int wstatus = 0, rc = 0;
	bool exited = false;
	if (spawn) {
		if (target_release(&sp, err, sizeof err) < 0) {
			die_msg(err); /* exec failed: the child exits 127/126 */
			rc = 127;
		} else {
			session_target_started(s);
		}
	}
	int pidfd = spawn ? -1 : target_pidfd(pid);
	uint64_t start = trace_out_mono_now_ns();
	const char *why = NULL;
	while (!why) {
		if (session_poll(s, POLL_MS) < 0) {
			if (!stop_signal) why = "error";
			/* else: interrupted by the signal, handled below */
		}
		if (stop_signal) why = "signal";
		else if (target_gone(pid, spawn, pidfd, &wstatus)) { why = "exit"; exited = spawn; }
		else if (o.duration > 0 && (trace_out_mono_now_ns() - start) / 1e9 >= o.duration)
			why = "duration";
		else if (status_update(view, s, pid)) why = "quit";
	}
	status_close(view); /* before any message: the summary starts on a clean line */
	if (strcmp(why, "error") == 0) fprintf(stderr, "memtraced: error: %s\n", session_error(s));
	if (spawn && stop_signal == SIGTERM && !exited) kill(pid, SIGTERM); /* pass it on */
	if (!o.quiet) {
		if (strcmp(why, "signal") == 0)
			fprintf(stderr, "memtraced: %s received, detaching\n", strsignal(stop_signal));
		else if (strcmp(why, "exit") == 0)
			fprintf(stderr, "memtraced: PID %d exited\n", (int)pid);
		else if (strcmp(why, "duration") == 0)
			fprintf(stderr, "memtraced: %g s elapsed, detaching\n", o.duration);
		else if (strcmp(why, "quit") == 0)
			fprintf(stderr, "memtraced: quit from --top, detaching\n");
	}
	bool trace_ok = session_finish(s) == 0 && strcmp(why, "error") != 0;
	if (!trace_ok && strcmp(why, "error") != 0)
		fprintf(stderr, "memtraced: error: %s\n", session_error(s));
	session_print_summary(s, stderr, out_path);
	session_close(s);
	if (out_fd >= 0 && close(out_fd) < 0) {
		fprintf(stderr, "memtraced: error: closing '%s': %s\n", out_path, strerror(errno));
		trace_ok = false;
	}
	if (pidfd >= 0) close(pidfd);

	if (!spawn) return trace_ok ? 0 : 1;
	/* -- CMD: the command's exit status is ours; keep waiting for it after a detach */
	if (!exited) {
		while (waitpid(pid, &wstatus, 0) < 0) {
			if (errno != EINTR) { wstatus = 1 << 8; break; }
			if (stop_signal == SIGTERM) kill(pid, SIGTERM);
		}
	}
	(void)rc;
	return target_exit_status(wstatus);
}
