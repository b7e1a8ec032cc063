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
 * (final snapshot, trace closed, summary) while the others go on.
 *
 * Lifecycle (lifecycle.h): a traced process that execs gets a new session for its new
 * program, into FILE.execN.ctf (same PID, same snapshotter); a dlopen'ed library that defines
 * allocation functions gets probes; with --follow-forks each forked process gets its own
 * session and trace. */
#include "sites/allocsyms.h"
#include "cli.h"
#include "process/lifecycle.h"
#include "process/session.h"
#include "output/snapshot.h"
#include "status.h"
#include "process/target.h"
#include "output/trace_out.h"

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

/* -- CMD: holds the command at its exit until its session has read its records (and prepared
 * its unwinder from its mappings: a command of a few ms is gone before the first drain). */
static struct exit_watch *child_watch;

static void child_exiting(void *session) { session_target_exiting(session, 1000); }

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
	bool our_child; /* -- CMD: reaped with waitpid */
	unsigned execs; /* programs exec'd since tracing began (the N of .execN) */
	char base_path[4096]; /* the trace path of the first program (before .execN) */
	bool dlopen_pending;  /* the link map changed: look for new allocators */
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
	if (child && child_watch) return exit_watch_exited(child_watch, wstatus, 0);
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
	if (t->s && t->our_child) exit_watch_clear_hook(child_watch, t->s);
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
 * summary. keep_snap (exec): the snapshotter is handed over instead of closed. */
static void finish_target_keep(struct target *t, const char *why, const struct cli_opts *o,
			       struct snapshotter **keep_snap)
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
		else if (strcmp(why, "exec") == 0)
			fprintf(stderr, "memtraced: PID %d exec'd a new program: the trace of %s ends\n",
				(int)t->pid, t->exe[0] ? t->exe : "?");
	}
	if (t->our_child) exit_watch_clear_hook(child_watch, t->s); /* the final drain follows */
	t->ok = session_finish(t->s) == 0 && !error;
	if (!t->ok && !error) fprintf(stderr, "memtraced: error: %s\n", session_error(t->s));
	take_snapshot(t, false); /* the heap at the end, after the final drain and reconcile */
	session_print_summary(t->s, stderr, o->no_trace || o->probe_floor ? NULL : t->out_path);
	if (t->snap)
		fprintf(stderr, "memtraced: PID %d: %llu snapshots written, %llu failed, in %s\n",
			(int)t->pid, (unsigned long long)snapshot_written(t->snap),
			(unsigned long long)snapshot_failures(t->snap), snapshot_dir(t->snap));
	if (keep_snap) {
		*keep_snap = t->snap;
		t->snap = NULL;
	}
	release_target(t, false);
}

static void finish_target(struct target *t, const char *why, const struct cli_opts *o)
{
	finish_target_keep(t, why, o, NULL);
}

/* Prepares the trace file and snapshots of t. Returns 0, or an exit status (message printed). */
static int prepare_outputs(struct target *t, const struct cli_opts *o)
{
	char err[1024];
	if (o->snapshot_dir && !o->probe_floor && !t->snap) {
		struct snapshot_opts so = {.dir = o->snapshot_dir, .keep = o->snapshot_keep,
					   .file_mode = (mode_t)o->file_mode};
		t->snap = snapshot_open(&so, t->pid, err, sizeof err);
		if (!t->snap) {
			die_msg(err);
			return 2;
		}
	}
	if (t->execs ? cli_exec_output_path(t->base_path, t->execs, t->out_path, sizeof t->out_path)
		     : cli_output_path(o, t->pid, t->out_path, sizeof t->out_path)) {
		die_msg("the trace file name is too long");
		return 2;
	}
	if (!t->execs) snprintf(t->base_path, sizeof t->base_path, "%s", t->out_path);
	if (!o->probe_floor && !o->no_trace) {
		t->out_fd = open_output(t->out_path, o->file_mode, err, sizeof err);
		if (t->out_fd < 0) {
			die_msg(err);
			return 1;
		}
	}
	return 0;
}

/* The traced processes: grows with forks and execs (a struct target never moves: its session
 * points into it). */
struct targets {
	struct target **t;
	int n, cap;
};

static struct target *add_target(struct targets *ts, pid_t pid)
{
	if (ts->n == ts->cap) {
		int cap = ts->cap ? 2 * ts->cap : 8;
		struct target **grown = realloc(ts->t, (size_t)cap * sizeof *grown);
		if (!grown) return NULL;
		ts->t = grown;
		ts->cap = cap;
	}
	struct target *t = calloc(1, sizeof *t);
	if (!t) return NULL;
	t->out_fd = -1;
	t->pidfd = -1;
	t->pid = pid;
	ts->t[ts->n++] = t;
	return t;
}

/* Frees the finished targets (a pre-fork server followed with --follow-forks has many over
 * time); *all_ok collects whether their traces were written completely. */
static void drop_finished(struct targets *ts, bool *all_ok)
{
	int k = 0;
	for (int i = 0; i < ts->n; i++) {
		struct target *t = ts->t[i];
		if (t->active) {
			ts->t[k++] = t;
			continue;
		}
		*all_ok = *all_ok && t->ok;
		release_target(t, false);
		free(t);
	}
	ts->n = k;
}

static int count_active(const struct targets *ts)
{
	int n = 0;
	for (int i = 0; i < ts->n; i++) n += ts->t[i]->active;
	return n;
}

static struct target *active_target(const struct targets *ts, pid_t pid)
{
	for (int i = 0; i < ts->n; i++)
		if (ts->t[i]->active && ts->t[i]->pid == pid) return ts->t[i];
	return NULL;
}

static uint64_t exec_time_of(void *ctx, pid_t pid) { return lifecycle_exec_time(ctx, pid); }

/* Opens t's session (sites and outputs ready) and says so. 0, or -1 with a message in err. */
static int start_session(struct target *t, const struct cli_opts *o, bool before_exec,
			 struct lifecycle *lc, char *err, size_t errlen)
{
	struct session_opts so = {
		.pid = t->pid, .rate = o->rate, .stack_bytes = o->stack_bytes, .floor = o->probe_floor,
		.out_fd = t->out_fd, .no_trace = o->no_trace, .trace_optional = t->snap != NULL,
		.executable = t->exe, .sites = &t->sites, .spawned = before_exec,
		.exec_time = lc ? exec_time_of : NULL, .exec_ctx = lc};
	t->s = session_open(&so, err, errlen);
	if (!t->s) return -1;
	t->active = true;
	t->ok = true;
	if (t->our_child) exit_watch_set_hook(child_watch, child_exiting, t->s);
	if (!o->quiet) {
		char what[4200];
		if (o->probe_floor) snprintf(what, sizeof what, "probe floor: no trace");
		else if (o->no_trace) snprintf(what, sizeof what, "no trace");
		else snprintf(what, sizeof what, "trace %s", t->out_path);
		status_line_clear();
		fprintf(stderr, "memtraced: tracing PID %d (%s), allocator %s, rate %g, %s%s%s\n",
			(int)t->pid, t->exe[0] ? t->exe : "?",
			t->sites.allocator[0] ? t->sites.allocator : "unknown", o->rate, what,
			t->snap ? ", snapshots in " : "", t->snap ? snapshot_dir(t->snap) : "");
		if (t->sites.notes[0]) fprintf(stderr, "memtraced: note: %s\n", t->sites.notes);
	}
	return 0;
}

static void lifecycle_note(const char *note, const struct cli_opts *o)
{
	if (note[0] && !o->quiet) {
		status_line_clear();
		fprintf(stderr, "memtraced: note: %s\n", note);
	}
}

/* Does pid map every object of sites already (its ld.so has loaded the libraries)? */
static bool sites_mapped(pid_t pid, const struct alloc_sites *sites)
{
	char path[64], line[4352];
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	bool found[MAX_PROBE_SITES] = {false};
	FILE *f = fopen(path, "re");
	if (!f) return false;
	while (fgets(line, sizeof line, f)) {
		char *p = strchr(line, '/');
		if (!p) continue;
		p[strcspn(p, "\n")] = 0;
		size_t pl = strlen(p);
		for (int i = 0; i < sites->n; i++) {
			size_t sl = strlen(sites->sites[i].path); /* maybe /proc/PID/root + p */
			found[i] = found[i] || (sl >= pl && strcmp(sites->sites[i].path + sl - pl, p) == 0);
		}
	}
	fclose(f);
	for (int i = 0; i < sites->n; i++)
		if (!found[i]) return false;
	return sites->n > 0;
}

/* t exec'd a new program: its trace ends, a new session follows the new program into
 * FILE.execN.ctf (same snapshotter). The new session is attached before the old one detaches:
 * records stamped after the exec go to the new one only (see session_opts.exec_time). */
static void follow_exec(struct targets *ts, struct target *t, uint64_t exec_ns,
			const struct cli_opts *o, struct lifecycle *lc)
{
	session_exec_at(t->s, exec_ns); /* the event is consumed: the session cannot ask any more */
	char err[1024] = "";
	struct target *n = add_target(ts, t->pid);
	if (!n) {
		finish_target(t, "exec", o);
		fprintf(stderr, "memtraced: error: PID %d: out of memory, not following its exec\n",
			(int)t->pid);
		return;
	}
	n->our_child = t->our_child;
	snprintf(n->base_path, sizeof n->base_path, "%s", t->base_path);
	/* A chain of execs (#!/usr/bin/env script -> env -> interpreter) may be over by now: the
	 * programs exec'd since are gone, the one running now is followed (read after the queue:
	 * an exec not queued yet would make a session for a program cut at once). */
	unsigned skipped = 0;
	bool ok = false;
	for (int tries = 0; tries < 16; tries++) {
		while (lifecycle_take_exec(lc, t->pid)) skipped++;
		target_exe_path(n->pid, n->exe, sizeof n->exe);
		ok = n->exe[0] != 0;
		if (!ok) snprintf(err, sizeof err, "its executable cannot be read (exited?)");
		/* The new image is mapped but its ld.so has not loaded the libraries yet: resolve
		 * them the way it will. */
		if (ok && alloc_sites_for_exec(n->exe, n->pid, &n->sites, err, sizeof err) < 0)
			ok = false;
		if (!ok || !lifecycle_exec_time(lc, t->pid)) break;
	}
	n->execs = t->execs + 1 + skipped;
	if (skipped && !o->quiet) {
		status_line_clear();
		fprintf(stderr, "memtraced: note: PID %d exec'd %u program%s gone before %s could be "
			"followed: not traced\n", (int)t->pid, skipped, skipped > 1 ? "s" : "",
			skipped > 1 ? "they" : "it");
	}
	n->snap = t->snap; /* handed over below: prepare_outputs must not open a second one */
	if (ok && prepare_outputs(n, o) != 0) {
		snprintf(err, sizeof err, "cannot prepare the trace of the new program");
		ok = false;
	}
	/* The unwinder is prepared at the first record, when ld.so is done (the BPF watcher sees
	 * the exec before ld.so runs; mappings read while it maps the libraries mislead the
	 * unwinder), or at once when the libraries are there already: the /proc fallback sees the
	 * exec late, and the new program may be gone before its first record is read. */
	bool early = !lifecycle_uses_bpf(lc) && sites_mapped(n->pid, &n->sites);
	if (ok && start_session(n, o, !early, lc, err, sizeof err) < 0) ok = false;
	if (!ok) n->snap = NULL;
	finish_target_keep(t, "exec", o, ok ? &n->snap : NULL);
	n->pidfd = t->pidfd;
	t->pidfd = -1;
	if (!ok) {
		status_line_clear();
		fprintf(stderr, "memtraced: error: PID %d exec'd %s: not followed: %s\n", (int)n->pid,
			n->exe[0] ? n->exe : "?", err);
		release_target(n, true);
		n->active = false;
		n->ok = false;
		lifecycle_unwatch(lc, n->pid);
		return;
	}
	char note[512];
	lifecycle_watch(lc, n->pid, note, sizeof note); /* the new ld.so */
	lifecycle_note(note, o);
}

/* --follow-forks: parent forked child, a new process with the parent's mappings. */
static void follow_fork(struct targets *ts, pid_t parent, pid_t child, const struct cli_opts *o,
			struct lifecycle *lc)
{
	char err[1024] = "";
	struct target *n = add_target(ts, child);
	if (!n) {
		fprintf(stderr, "memtraced: error: out of memory, not following PID %d\n", (int)child);
		return;
	}
	bool ok = target_check_pid(child, err, sizeof err) == 0;
	if (ok) {
		target_exe_path(child, n->exe, sizeof n->exe);
		ok = alloc_sites_for_pid(child, &n->sites, err, sizeof err) == 0;
	}
	if (ok && prepare_outputs(n, o) != 0) {
		snprintf(err, sizeof err, "cannot prepare its trace");
		ok = false;
	}
	if (ok && start_session(n, o, false, lc, err, sizeof err) < 0) ok = false;
	if (!ok) {
		status_line_clear();
		fprintf(stderr, "memtraced: PID %d forked PID %d: not followed: %s\n", (int)parent,
			(int)child, err);
		release_target(n, true);
		n->ok = true; /* a child gone at once is no failure of ours */
		lifecycle_unwatch(lc, child);
		return;
	}
	n->pidfd = target_pidfd(child);
	char note[512];
	lifecycle_watch(lc, child, note, sizeof note);
	lifecycle_note(note, o);
}

/* The link map of t changed: probe the allocation functions of libraries loaded since. */
static void follow_dlopen(struct target *t, const struct cli_opts *o)
{
	t->dlopen_pending = false;
	struct alloc_sites *added = malloc(sizeof *added);
	char err[512] = "";
	if (!added) return;
	if (alloc_sites_added(t->pid, &t->sites, added, err, sizeof err) < 0) {
		if (!o->quiet) fprintf(stderr, "memtraced: note: PID %d: after a dlopen: %s\n",
				       (int)t->pid, err);
	} else if (added->n == 0) {
		session_refresh_mappings(t->s);
	} else if (t->sites.n + added->n > MAX_PROBE_SITES) {
		status_line_clear();
		fprintf(stderr, "memtraced: PID %d: %s defines allocation functions, but more than %d "
			"probe sites would be needed: not probed\n", (int)t->pid, added->allocator,
			MAX_PROBE_SITES);
	} else if (session_add_sites(t->s, added, err, sizeof err) < 0) {
		status_line_clear();
		fprintf(stderr, "memtraced: PID %d: cannot probe the allocation functions of %s: %s\n",
			(int)t->pid, added->allocator, err);
	} else {
		memcpy(&t->sites.sites[t->sites.n], added->sites, (size_t)added->n * sizeof added->sites[0]);
		t->sites.n += added->n;
		if (!o->quiet) {
			status_line_clear();
			fprintf(stderr, "memtraced: PID %d: dlopen: %d allocation function%s probed in %s\n",
				(int)t->pid, added->n, added->n > 1 ? "s" : "", added->allocator);
			if (added->notes[0]) fprintf(stderr, "memtraced: note: %s\n", added->notes);
		}
	}
	free(added);
}

/* Acts on what the traced processes did since the last call. */
static void handle_lifecycle(struct targets *ts, const struct cli_opts *o, struct lifecycle *lc)
{
	if (!lc) return;
	lifecycle_drain(lc);
	struct lifecycle_event ev;
	while (lifecycle_next(lc, &ev)) {
		struct target *t = active_target(ts, ev.pid);
		if (!t) continue;
		if (ev.kind == LC_EXEC) follow_exec(ts, t, ev.time_ns, o, lc);
		else if (ev.kind == LC_FORK && o->follow_forks) follow_fork(ts, ev.pid, ev.child, o, lc);
		else if (ev.kind == LC_DLOPEN) t->dlopen_pending = true;
	}
	/* coalesced: ld.so announces each dlopen twice (before and after mapping) */
	for (int i = 0; i < ts->n; i++)
		if (ts->t[i]->active && ts->t[i]->dlopen_pending) follow_dlopen(ts->t[i], o);
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
	int ninitial = spawn ? 1 : o.npids;
	static struct targets ts; /* static: what it holds stays reachable on early error exits (LeakSanitizer) */
	for (int i = 0; i < ninitial; i++) {
		if (!add_target(&ts, spawn ? -1 : o.pids[i])) {
			die_msg("out of memory");
			return 1;
		}
	}

	struct spawned sp = {.pid = -1, .go_fd = -1, .err_fd = -1};
	int rc = 0;
	if (spawn) {
		struct target *t = ts.t[0];
		int status_hint;
		if (target_spawn(o.cmd, &sp, &status_hint, err, sizeof err) < 0) {
			die_msg(err);
			return status_hint;
		}
		t->pid = sp.pid;
		t->our_child = true;
		child_watch = exit_watch_start(sp.pid, err, sizeof err);
		if (!child_watch) /* traced as before: a command of a few ms may get no stacks */
			fprintf(stderr, "memtraced: warning: %s\n", err);
		if (!realpath(sp.exe, t->exe)) snprintf(t->exe, sizeof t->exe, "%s", sp.exe);
		if (alloc_sites_for_exec(sp.exe, t->pid, &t->sites, err, sizeof err) < 0) {
			fprintf(stderr, "memtraced: error: cannot find the allocator of '%s': %s\n", sp.exe, err);
			rc = 1;
		}
	} else {
		for (int i = 0; i < ninitial && !rc; i++) {
			struct target *t = ts.t[i];
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
	/* exec, fork and dlopen of the targets (not in the benchmarks' probe floor) */
	struct lifecycle *lc = NULL;
	char lc_note[512] = "";
	if (!rc && !o.probe_floor) {
		lc = lifecycle_open(o.follow_forks, lc_note, sizeof lc_note);
		if (!lc) {
			die_msg("out of memory");
			rc = 1;
		}
	}
	for (int i = 0; i < ninitial && !rc; i++) rc = prepare_outputs(ts.t[i], &o);
	for (int i = 0; i < ninitial && !rc; i++) {
		if (start_session(ts.t[i], &o, spawn, lc, err, sizeof err) < 0) {
			die_msg(err);
			rc = 1;
		}
	}
	if (rc) {
		/* nothing traced yet: remove the empty traces we created, detach what was attached */
		for (int i = 0; i < ts.n; i++) release_target(ts.t[i], true);
		if (spawn && sp.pid > 0) target_abort(&sp);
		lifecycle_close(lc);
		return rc;
	}
	lifecycle_note(lc_note, &o);
	if (o.follow_forks && lc && !lifecycle_uses_bpf(lc))
		fprintf(stderr, "memtraced: warning: --follow-forks needs the BPF lifecycle watcher: "
			"forks are not followed\n");

	int wstatus = 0;
	bool exited = false;
	if (spawn) {
		if (target_release(&sp, err, sizeof err) < 0) {
			die_msg(err); /* exec failed: the child exits 127/126 */
		} else {
			session_target_started(ts.t[0]->s);
		}
	} else {
		for (int i = 0; i < ninitial; i++) ts.t[i]->pidfd = target_pidfd(ts.t[i]->pid);
	}
	/* after the command's own exec (-- CMD): only later execs are new programs */
	for (int i = 0; i < ninitial && lc; i++) {
		char note[512];
		lifecycle_watch(lc, ts.t[i]->pid, note, sizeof note);
		lifecycle_note(note, &o);
	}

	uint64_t start = trace_out_mono_now_ns();
	uint64_t interval_ns = (uint64_t)(o.snapshot_interval * 1e9);
	uint64_t next_snapshot = start + interval_ns;
	bool all_ok = true;
	while (count_active(&ts) > 0) {
		int nactive = count_active(&ts);
		int slice = POLL_MS / nactive < MIN_POLL_MS ? MIN_POLL_MS : POLL_MS / nactive;
		for (int i = 0; i < ts.n; i++) {
			struct target *t = ts.t[i];
			if (!t->active) continue;
			const char *why = NULL;
			if (session_poll(t->s, slice) < 0 && !stop_signal) why = "error";
			else if (target_gone(t->pid, t->our_child, t->pidfd, &wstatus)) {
				why = "exit";
				exited = exited || t->our_child;
			}
			if (why) {
				if (count_active(&ts) == 1) { /* the last one: its summary goes after the view */
					status_close(view);
					view = NULL;
				}
				finish_target(t, why, &o);
				if (lc) lifecycle_unwatch(lc, t->pid);
			}
		}
		handle_lifecycle(&ts, &o, lc);
		drop_finished(&ts, &all_ok);
		const char *why_all = NULL;
		if (stop_signal) why_all = "signal";
		else if (o.duration > 0 && (trace_out_mono_now_ns() - start) / 1e9 >= o.duration)
			why_all = "duration";
		else if (ts.n > 0) {
			struct session *live_s[ts.n];
			pid_t live_pids[ts.n];
			for (int i = 0; i < ts.n; i++) {
				live_s[i] = ts.t[i]->active ? ts.t[i]->s : NULL;
				live_pids[i] = ts.t[i]->pid;
			}
			if (status_update(view, live_s, live_pids, ts.n)) why_all = "quit";
		}
		if (why_all) {
			status_close(view); /* before the summaries */
			view = NULL;
			for (int i = 0; i < ts.n; i++) finish_target(ts.t[i], why_all, &o);
			break;
		}
		bool asked = snapshot_requested;
		uint64_t now = trace_out_mono_now_ns();
		if (asked || (interval_ns && now >= next_snapshot)) {
			snapshot_requested = 0;
			for (int i = 0; i < ts.n; i++)
				if (ts.t[i]->active) take_snapshot(ts.t[i], asked && !o.quiet);
			if (interval_ns && now >= next_snapshot) {
				/* the next one on the grid; skip the ones a slow snapshot missed */
				next_snapshot += interval_ns;
				if (next_snapshot <= now) next_snapshot = now + interval_ns;
			}
		}
	}
	status_close(view);
	drop_finished(&ts, &all_ok); /* all finished by now */
	free(ts.t);
	lifecycle_close(lc);

	if (!spawn) return all_ok ? 0 : 1;
	pid_t pid = sp.pid;
	if (stop_signal == SIGTERM && !exited) kill(pid, SIGTERM); /* pass it on */
	/* -- CMD: the command's exit status is ours; keep waiting for it after a detach */
	if (!exited && child_watch) {
		if (stop_signal == SIGTERM) stop_signal = 0; /* passed on just above */
		while (!exit_watch_exited(child_watch, &wstatus, 100)) {
			if (stop_signal == SIGTERM) {
				kill(pid, SIGTERM);
				stop_signal = 0; /* a new SIGTERM is passed on again */
			}
		}
	} else if (!exited) {
		while (waitpid(pid, &wstatus, 0) < 0) {
			if (errno != EINTR) { wstatus = 1 << 8; break; }
			if (stop_signal == SIGTERM) kill(pid, SIGTERM);
		}
	}
	exit_watch_free(child_watch);
	return target_exit_status(wstatus);
}
