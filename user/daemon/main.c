/* memtraced: trace the allocations of processes into memtrace traces and heap snapshots.
 *
 *   memtraced -p PID [-p PID2 ...] [-o FILE|none] [--rate R] [--duration SEC]
 *             [--snapshot-dir DIR [--snapshot-interval SEC] [--snapshot-keep N]]
 *   memtraced [options] -- CMD [ARGS...]
 *
 * Everything that can be checked is checked before anything is attached: options, privileges,
 * the PIDs, the snapshot directory, the output files. In -- CMD mode the command is forked and
 * held before its exec until the probes are in place, so the trace starts with its first
 * allocation.
 *
 * Each traced process has its own session (probes, unwinder, trie), trace file and snapshots;
 * they all run on this thread, polled in turn. A process that exits is finished on its own
 * (final snapshot, trace closed, summary) while the others go on. */
#include "allocsyms.h"
#include "cli.h"
#include "session.h"
#include "snapshot.h"
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define POLL_MS 100
#define MIN_POLL_MS 10

static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t snapshot_requested;

static void on_stop_signal(int sig) { stop_signal = sig; }
/* Only a flag: the main loop writes the snapshot (never from a signal handler). */
static void on_snapshot_signal(int sig) { snapshot_requested = 1; }

static void install_signals(void)
{
	struct sigaction sa = {.sa_handler = on_stop_signal}; /* no SA_RESTART: wake the poll */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = on_snapshot_signal;
	sigaction(SIGUSR1, &sa, NULL);
	/* a closed stderr must not kill us before the trace is closed (the command, forked
	 * before this, keeps the default) */
	signal(SIGPIPE, SIG_IGN);
}

static void die_msg(const char *msg) { fprintf(stderr, "memtraced: error: %s\n", msg); }

/* One traced process. */
struct target {
	pid_t pid;
	char exe[4096];
	struct alloc_sites sites; /* the session points into it: lives as long as the session */
	char out_path[4096];
	int out_fd;
	struct snapshotter *snap;
	struct session *s;
	int pidfd;
	bool active;   /* session open and not finished */
	bool ok;       /* trace (if any) written completely */
};

/* Opens (creates or truncates) the trace file before anything is attached, with exactly the
 * permissions `mode` (fchmod: neither the umask nor an older file's mode changes them). */
static int open_output(const char *path, unsigned mode, char *err, size_t errlen)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0) {
		snprintf(err, errlen, "cannot write the trace file '%s': %s", path, strerror(errno));
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "cannot write the trace file '%s': not a regular file", path);
		close(fd);
		return -1;
	}
	if (fchmod(fd, mode) < 0) {
		snprintf(err, errlen, "cannot set mode %04o on the trace file '%s': %s", mode, path,
			 strerror(errno));
		close(fd);
		return -1;
	}
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

/* One snapshot of t; a failure (full disk, vanished directory...) is reported once, here, and
 * tracing goes on. */
static void take_snapshot(struct target *t, bool say_it)
{
	if (!t->snap || !t->s) return;
	char err[512] = "";
	uint64_t seq = snapshot_next_seq(t->snap);
	status_line_clear(); /* a message while tracing: not behind the status line */
	if (session_snapshot(t->s, t->snap, err, sizeof err) < 0)
		fprintf(stderr, "memtraced: PID %d: snapshot failed (tracing goes on): %s\n", (int)t->pid,
			err);
	else if (say_it)
		fprintf(stderr, "memtraced: PID %d: snapshot %s/memtrace-%d-%llu.ctf written\n",
			(int)t->pid, snapshot_dir(t->snap), (int)t->pid, (unsigned long long)seq);
}

/* Frees what was prepared for t (nothing attached, or the session is already finished). */
static void release_target(struct target *t, bool remove_output)
{
	if (t->s) session_close(t->s);
	t->s = NULL;
	if (t->out_fd >= 0) {
		if (close(t->out_fd) < 0 && !remove_output) {
			fprintf(stderr, "memtraced: error: closing '%s': %s\n", t->out_path, strerror(errno));
			t->ok = false;
		}
		if (remove_output) unlink(t->out_path);
	}
	t->out_fd = -1;
	if (t->snap) snapshot_close(t->snap);
	t->snap = NULL;
	if (t->pidfd >= 0) close(t->pidfd);
	t->pidfd = -1;
}

/* Tracing of t ends: the last drain and reconcile, the final snapshot, the trace closed, the
 * summary. */
static void finish_target(struct target *t, const char *why, const struct cli_opts *o)
{
	if (!t->active) return;
	t->active = false;
	status_line_clear();
	bool error = strcmp(why, "error") == 0;
	if (error) fprintf(stderr, "memtraced: error: PID %d: %s\n", (int)t->pid, session_error(t->s));
	if (!o->quiet) {
		if (strcmp(why, "signal") == 0)
			fprintf(stderr, "memtraced: %s received, detaching from PID %d\n",
				strsignal(stop_signal), (int)t->pid);
		else if (strcmp(why, "exit") == 0)
			fprintf(stderr, "memtraced: PID %d exited\n", (int)t->pid);
		else if (strcmp(why, "duration") == 0)
			fprintf(stderr, "memtraced: %g s elapsed, detaching from PID %d\n", o->duration,
				(int)t->pid);
		else if (strcmp(why, "quit") == 0)
			fprintf(stderr, "memtraced: quit from --top, detaching from PID %d\n", (int)t->pid);
	}
	t->ok = session_finish(t->s) == 0 && !error;
	if (!t->ok && !error) fprintf(stderr, "memtraced: error: %s\n", session_error(t->s));
	take_snapshot(t, false); /* the heap at the end, after the final drain and reconcile */
	session_print_summary(t->s, stderr, o->no_trace || o->probe_floor ? NULL : t->out_path);
	if (t->snap)
		fprintf(stderr, "memtraced: PID %d: %llu snapshots written, %llu failed, in %s\n",
			(int)t->pid, (unsigned long long)snapshot_written(t->snap),
			(unsigned long long)snapshot_failures(t->snap), snapshot_dir(t->snap));
	release_target(t, false);
}

/* Prepares the trace file and snapshots of t. Returns 0, or an exit status (message printed). */
static int prepare_outputs(struct target *t, const struct cli_opts *o)
{
	char err[1024];
	if (o->snapshot_dir && !o->probe_floor) {
		struct snapshot_opts so = {.dir = o->snapshot_dir, .keep = o->snapshot_keep,
					   .file_mode = (mode_t)o->file_mode};
		t->snap = snapshot_open(&so, t->pid, err, sizeof err);
		if (!t->snap) {
			die_msg(err);
			return 2;
		}
	}
	if (cli_output_path(o, t->pid, t->out_path, sizeof t->out_path) < 0) {
		die_msg("the trace file name is too long");
		return 2;
	}
	if (!o->probe_floor && !o->no_trace) {
		t->out_fd = open_output(t->out_path, o->file_mode, err, sizeof err);
		if (t->out_fd < 0) {
			die_msg(err);
			return 1;
		}
	}
	return 0;
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

	bool spawn = o.cmd != NULL;
	int ntargets = spawn ? 1 : o.npids;
	struct target *targets = calloc((size_t)ntargets, sizeof *targets);
	if (!targets) {
		die_msg("out of memory");
		return 1;
	}
	for (int i = 0; i < ntargets; i++) {
		targets[i].out_fd = -1;
		targets[i].pidfd = -1;
		targets[i].pid = spawn ? -1 : o.pids[i];
	}

	struct spawned sp = {.pid = -1, .go_fd = -1, .err_fd = -1};
	int rc = 0;
	if (spawn) {
		struct target *t = &targets[0];
		int status_hint;
		if (target_spawn(o.cmd, &sp, &status_hint, err, sizeof err) < 0) {
			die_msg(err);
			free(targets);
			return status_hint;
		}
		t->pid = sp.pid;
		if (!realpath(sp.exe, t->exe)) snprintf(t->exe, sizeof t->exe, "%s", sp.exe);
		if (alloc_sites_for_exec(sp.exe, t->pid, &t->sites, err, sizeof err) < 0) {
			fprintf(stderr, "memtraced: error: cannot find the allocator of '%s': %s\n", sp.exe, err);
			rc = 1;
		}
	} else {
		for (int i = 0; i < ntargets && !rc; i++) {
			struct target *t = &targets[i];
			if (target_check_pid(t->pid, err, sizeof err) < 0) {
				die_msg(err);
				rc = 1;
				break;
			}
			target_exe_path(t->pid, t->exe, sizeof t->exe);
			if (alloc_sites_for_pid(t->pid, &t->sites, err, sizeof err) < 0) {
				fprintf(stderr, "memtraced: error: cannot find the allocator of PID %d: %s\n",
					(int)t->pid, err);
				rc = 1;
			}
		}
	}
	/* From here on a signal (SIGUSR1 included, whose default would kill us) only sets a flag;
	 * the command, if any, is forked already and keeps the default actions. */
	install_signals();
	for (int i = 0; i < ntargets && !rc; i++) rc = prepare_outputs(&targets[i], &o);
	for (int i = 0; i < ntargets && !rc; i++) {
		struct target *t = &targets[i];
		struct session_opts so = {
			.pid = t->pid, .rate = o.rate, .stack_bytes = o.stack_bytes, .floor = o.probe_floor,
			.out_fd = t->out_fd, .no_trace = o.no_trace, .trace_optional = t->snap != NULL,
			.executable = t->exe,
			.sites = &t->sites, .spawned = spawn};
		t->s = session_open(&so, err, sizeof err);
		if (!t->s) {
			die_msg(err);
			rc = 1;
			break;
		}
		t->active = true;
		t->ok = true;
		if (!o.quiet) {
			char what[4200];
			if (o.probe_floor) snprintf(what, sizeof what, "probe floor: no trace");
			else if (o.no_trace) snprintf(what, sizeof what, "no trace");
			else snprintf(what, sizeof what, "trace %s", t->out_path);
			fprintf(stderr, "memtraced: tracing PID %d (%s), allocator %s, rate %g, %s%s%s\n",
				(int)t->pid, t->exe[0] ? t->exe : "?",
				t->sites.allocator[0] ? t->sites.allocator : "unknown", o.rate, what,
				t->snap ? ", snapshots in " : "", t->snap ? snapshot_dir(t->snap) : "");
			if (t->sites.notes[0]) fprintf(stderr, "memtraced: note: %s\n", t->sites.notes);
		}
	}
	if (rc) {
		/* nothing traced yet: remove the empty traces we created, detach what was attached */
		for (int i = 0; i < ntargets; i++) release_target(&targets[i], true);
		if (spawn && sp.pid > 0) target_abort(&sp);
		free(targets);
		return rc;
	}

	int wstatus = 0;
	bool exited = false;
	if (spawn) {
		if (target_release(&sp, err, sizeof err) < 0) {
			die_msg(err); /* exec failed: the child exits 127/126 */
		} else {
			session_target_started(targets[0].s);
		}
	} else {
		for (int i = 0; i < ntargets; i++) targets[i].pidfd = target_pidfd(targets[i].pid);
	}

	uint64_t start = trace_out_mono_now_ns();
	uint64_t interval_ns = (uint64_t)(o.snapshot_interval * 1e9);
	uint64_t next_snapshot = start + interval_ns;
	int nactive = ntargets;
	while (nactive > 0) {
		int slice = POLL_MS / nactive < MIN_POLL_MS ? MIN_POLL_MS : POLL_MS / nactive;
		for (int i = 0; i < ntargets; i++) {
			struct target *t = &targets[i];
			if (!t->active) continue;
			const char *why = NULL;
			if (session_poll(t->s, slice) < 0 && !stop_signal) why = "error";
			else if (target_gone(t->pid, spawn, t->pidfd, &wstatus)) {
				why = "exit";
				exited = spawn;
			}
			if (why) {
				if (nactive == 1) { /* the last one: its summary goes after the live view */
					status_close(view);
					view = NULL;
				}
				finish_target(t, why, &o);
				nactive--;
			}
		}
		const char *why_all = NULL;
		if (stop_signal) why_all = "signal";
		else if (o.duration > 0 && (trace_out_mono_now_ns() - start) / 1e9 >= o.duration)
			why_all = "duration";
		else {
			struct session *live_s[ntargets];
			pid_t live_pids[ntargets];
			for (int i = 0; i < ntargets; i++) {
				live_s[i] = targets[i].active ? targets[i].s : NULL;
				live_pids[i] = targets[i].pid;
			}
			if (status_update(view, live_s, live_pids, ntargets)) why_all = "quit";
		}
		if (why_all) {
			status_close(view); /* before the summaries */
			view = NULL;
			for (int i = 0; i < ntargets; i++) finish_target(&targets[i], why_all, &o);
			break;
		}
		bool asked = snapshot_requested;
		uint64_t now = trace_out_mono_now_ns();
		if (asked || (interval_ns && now >= next_snapshot)) {
			snapshot_requested = 0;
			for (int i = 0; i < ntargets; i++)
				if (targets[i].active) take_snapshot(&targets[i], asked && !o.quiet);
			if (interval_ns && now >= next_snapshot) {
				/* the next one on the grid; skip the ones a slow snapshot missed */
				next_snapshot += interval_ns;
				if (next_snapshot <= now) next_snapshot = now + interval_ns;
			}
		}
	}
	bool all_ok = true;
	for (int i = 0; i < ntargets; i++) all_ok = all_ok && targets[i].ok;
	free(targets);

	if (!spawn) return all_ok ? 0 : 1;
	pid_t pid = sp.pid;
	if (stop_signal == SIGTERM && !exited) kill(pid, SIGTERM); /* pass it on */
	/* -- CMD: the command's exit status is ours; keep waiting for it after a detach */
	if (!exited) {
		while (waitpid(pid, &wstatus, 0) < 0) {
			if (errno != EINTR) { wstatus = 1 << 8; break; }
			if (stop_signal == SIGTERM) kill(pid, SIGTERM);
		}
	}
	return target_exit_status(wstatus);
}
