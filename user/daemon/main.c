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
 * Each traced process has its own session (probes, unwinder, trie), trace file and snapshots
 * (targets.h); they all run on this thread, polled in turn. A process that exits is finished
 * on its own (final snapshot, trace closed, summary) while the others go on. What the
 * processes do besides allocating (exec, fork, dlopen) is followed by follow.c. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cli.h"
#include "common/msg.h"
#include "output/trace_out.h"
#include "status.h"
#include "targets.h"

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

/* -- CMD: forks the command, held before its exec, and finds the allocator it will bind to.
 * 0, or an exit status (message printed). */
static int setup_command(struct targets *ts, struct spawned *sp)
{
	char err[1024] = "";
	struct target *t = ts->t[0];
	int status_hint;
	if (target_spawn(ts->o->cmd, sp, &status_hint, err, sizeof err) < 0) {
		msg_error("%s", err);
		return status_hint;
	}
	t->pid = sp->pid;
	t->our_child = true;
	ts->child_watch = exit_watch_start(sp->pid, err, sizeof err);
	if (!ts->child_watch) /* traced as before: a command of a few ms may get no stacks */
		msg_warn("%s", err);
	if (!realpath(sp->exe, t->exe)) snprintf(t->exe, sizeof t->exe, "%s", sp->exe);
	if (alloc_sites_for_exec(sp->exe, t->pid, &t->sites, err, sizeof err) < 0) {
		msg_error("cannot find the allocator of '%s': %s", sp->exe, err);
		return 1;
	}
	return 0;
}

/* -p PID...: checks each process and finds its allocator. 0, or an exit status. */
static int setup_pids(struct targets *ts)
{
	char err[1024] = "";
	for (int i = 0; i < ts->n; i++) {
		struct target *t = ts->t[i];
		if (target_check_pid(t->pid, err, sizeof err) < 0) {
			msg_error("%s", err);
			return 1;
		}
		target_exe_path(t->pid, t->exe, sizeof t->exe);
		if (alloc_sites_for_pid(t->pid, &t->sites, err, sizeof err) < 0) {
			msg_error("cannot find the allocator of PID %d: %s", (int)t->pid, err);
			return 1;
		}
	}
	return 0;
}

/* The lifecycle watcher, the outputs and the sessions of the initial targets. 0, or an exit
 * status (message printed); *lc_note says why the BPF watcher could not load. */
static int start_tracing(struct targets *ts, bool spawn, char *lc_note, size_t notelen)
{
	char err[1024] = "";
	if (!ts->o->probe_floor) { /* exec, fork and dlopen (not in the benchmarks' probe floor) */
		ts->lc = lifecycle_open(ts->o->follow_forks, lc_note, notelen);
		if (!ts->lc) {
			msg_error("out of memory");
			return 1;
		}
	}
	for (int i = 0; i < ts->n; i++) {
		int rc = target_prepare_outputs(ts, ts->t[i]);
		if (rc) return rc;
	}
	for (int i = 0; i < ts->n; i++) {
		if (target_start_session(ts, ts->t[i], spawn, err, sizeof err) < 0) {
			msg_error("%s", err);
			return 1;
		}
	}
	return 0;
}

/* Nothing traced yet: removes the empty traces we created, detaches what was attached. */
static void abort_tracing(struct targets *ts, struct spawned *sp)
{
	for (int i = 0; i < ts->n; i++) target_release_outputs(ts, ts->t[i], true);
	if (sp->pid > 0) target_abort(sp);
	lifecycle_close(ts->lc);
	ts->lc = NULL;
}

/* The probes are in place: lets the command run (or watches the PIDs' exits) and starts
 * watching exec, fork and dlopen. */
static void let_targets_run(struct targets *ts, struct spawned *sp, bool spawn)
{
	char err[1024] = "";
	if (spawn) {
		if (target_release(sp, err, sizeof err) < 0) msg_error("%s", err); /* exits 127/126 */
		else session_target_started(ts->t[0]->s);
	} else {
		for (int i = 0; i < ts->n; i++) ts->t[i]->pidfd = target_pidfd(ts->t[i]->pid);
	}
	/* after the command's own exec (-- CMD): only later execs are new programs */
	for (int i = 0; i < ts->n && ts->lc; i++) {
		char note[512] = "";
		lifecycle_watch(ts->lc, ts->t[i]->pid, note, sizeof note);
		if (note[0]) msg_note("%s", note);
	}
}

/* One round: polls each active target, finishes those that exited or failed. */
static void poll_targets(struct targets *ts, struct status_view **view, bool *cmd_exited,
			 int *wstatus)
{
	int nactive = targets_count_active(ts);
	int slice = POLL_MS / nactive < MIN_POLL_MS ? MIN_POLL_MS : POLL_MS / nactive;
	for (int i = 0; i < ts->n; i++) {
		struct target *t = ts->t[i];
		if (!t->active) continue;
		bool ended = false;
		enum finish_why why = FINISH_EXIT;
		if (session_poll(t->s, slice) < 0 && !stop_signal) {
			ended = true;
			why = FINISH_ERROR;
		} else if (target_has_exited(ts, t, wstatus)) {
			ended = true;
			*cmd_exited = *cmd_exited || t->our_child;
		}
		if (!ended) continue;
		if (targets_count_active(ts) == 1) { /* the last one: its summary goes after the view */
			status_close(*view);
			*view = NULL;
		}
		target_finish(ts, t, why, NULL);
		if (ts->lc) lifecycle_unwatch(ts->lc, t->pid);
	}
}

/* Should tracing of every target end now (signal, --duration, 'q' in --top)? */
static bool all_must_stop(struct targets *ts, struct status_view *view, uint64_t start,
			  enum finish_why *why)
{
	if (stop_signal) {
		ts->stop_signal = stop_signal;
		*why = FINISH_SIGNAL;
		return true;
	}
	if (ts->o->duration > 0 && (trace_out_mono_now_ns() - start) / 1e9 >= ts->o->duration) {
		*why = FINISH_DURATION;
		return true;
	}
	if (ts->n == 0) return false;
	struct session *live_s[ts->n];
	pid_t live_pids[ts->n];
	for (int i = 0; i < ts->n; i++) {
		live_s[i] = ts->t[i]->active ? ts->t[i]->s : NULL;
		live_pids[i] = ts->t[i]->pid;
	}
	*why = FINISH_QUIT;
	return status_update(view, live_s, live_pids, ts->n) != 0;
}

/* Snapshots asked with SIGUSR1 or due by --snapshot-interval. */
static void snapshots_if_due(struct targets *ts, uint64_t interval_ns, uint64_t *next_snapshot)
{
	bool asked = snapshot_requested;
	uint64_t now = trace_out_mono_now_ns();
	if (!asked && !(interval_ns && now >= *next_snapshot)) return;
	snapshot_requested = 0;
	for (int i = 0; i < ts->n; i++)
		if (ts->t[i]->active) target_snapshot(ts->t[i], asked && !ts->o->quiet);
	if (interval_ns && now >= *next_snapshot) {
		/* the next one on the grid; skip the ones a slow snapshot missed */
		*next_snapshot += interval_ns;
		if (*next_snapshot <= now) *next_snapshot = now + interval_ns;
	}
}

/* Traces until every target is finished. Returns whether every trace was written completely. */
static bool trace_until_done(struct targets *ts, struct status_view *view, bool *cmd_exited,
			     int *wstatus)
{
	uint64_t start = trace_out_mono_now_ns();
	uint64_t interval_ns = (uint64_t)(ts->o->snapshot_interval * 1e9);
	uint64_t next_snapshot = start + interval_ns;
	bool all_ok = true;
	while (targets_count_active(ts) > 0) {
		poll_targets(ts, &view, cmd_exited, wstatus);
		targets_follow_lifecycle(ts);
		targets_drop_finished(ts, &all_ok);
		enum finish_why why;
		if (all_must_stop(ts, view, start, &why)) {
			status_close(view); /* before the summaries */
			view = NULL;
			for (int i = 0; i < ts->n; i++) target_finish(ts, ts->t[i], why, NULL);
			break;
		}
		snapshots_if_due(ts, interval_ns, &next_snapshot);
	}
	status_close(view);
	targets_drop_finished(ts, &all_ok); /* all finished by now */
	return all_ok;
}

/* -- CMD: the command's exit status is ours; keeps waiting for it after a detach, passing
 * SIGTERM on. */
static int wait_command(struct targets *ts, pid_t pid, bool exited, int wstatus)
{
	if (stop_signal == SIGTERM && !exited) kill(pid, SIGTERM); /* pass it on */
	if (!exited && ts->child_watch) {
		if (stop_signal == SIGTERM) stop_signal = 0; /* passed on just above */
		while (!exit_watch_exited(ts->child_watch, &wstatus, 100)) {
			if (stop_signal == SIGTERM) {
				kill(pid, SIGTERM);
				stop_signal = 0; /* a new SIGTERM is passed on again */
			}
		}
	} else if (!exited) {
		while (waitpid(pid, &wstatus, 0) < 0) {
			if (errno != EINTR) {
				wstatus = 1 << 8;
				break;
			}
			if (stop_signal == SIGTERM) kill(pid, SIGTERM);
		}
	}
	exit_watch_free(ts->child_watch);
	ts->child_watch = NULL;
	return target_exit_status(wstatus);
}

/* Options, privileges and the live view: an exit status, or -1 to go on. */
static int parse_and_check(int argc, char **argv, struct cli_opts *o, struct status_view **view)
{
	char err[1024] = "";
	switch (cli_parse(argc, argv, o, err, sizeof err)) {
	case CLI_EXIT_OK: return 0;
	case CLI_ERROR: msg_error("%s", err); return 2;
	case CLI_OK: break;
	}
	msg_set_quiet(o->quiet);
	if (target_check_privileges(err, sizeof err) < 0) {
		msg_error("%s", err);
		return 1;
	}
	/* the live view (status line, --top): checked now, drawn once tracing runs */
	struct status_opts vo = {.line = !o->no_status && !o->quiet, .top = o->top,
		.top_interval = o->top_interval, .top_by_function = o->top_by_function, .keys = !o->cmd};
	if (status_open(&vo, view, err, sizeof err) < 0) {
		msg_error("%s", err);
		return 1;
	}
	msg_set_before_print(status_line_clear); /* messages are not drawn behind the status line */
	return -1;
}

int main(int argc, char **argv)
{
	static struct cli_opts o;
	struct status_view *view = NULL;
	int rc = parse_and_check(argc, argv, &o, &view);
	if (rc >= 0) return rc;

	bool spawn = o.cmd != NULL;
	/* static: what it holds stays reachable on early error exits (LeakSanitizer) */
	static struct targets ts;
	ts.o = &o;
	for (int i = 0; i < (spawn ? 1 : o.npids); i++) {
		if (!targets_add(&ts, spawn ? -1 : o.pids[i])) {
			msg_error("out of memory");
			return 1;
		}
	}
	struct spawned sp = {.pid = -1, .go_fd = -1, .err_fd = -1};
	rc = spawn ? setup_command(&ts, &sp) : setup_pids(&ts);
	if (spawn && sp.pid <= 0) return rc; /* the command could not even be forked */
	/* From here on a signal (SIGUSR1 included, whose default would kill us) only sets a flag;
	 * the command, if any, is forked already and keeps the default actions. */
	install_signals();
	char lc_note[512] = "";
	if (!rc) rc = start_tracing(&ts, spawn, lc_note, sizeof lc_note);
	if (rc) {
		abort_tracing(&ts, &sp);
		return rc;
	}
	if (lc_note[0]) msg_note("%s", lc_note);
	if (o.follow_forks && ts.lc && !lifecycle_uses_bpf(ts.lc))
		msg_warn("--follow-forks needs the BPF lifecycle watcher: forks are not followed");
	let_targets_run(&ts, &sp, spawn);

	int wstatus = 0;
	bool exited = false;
	bool all_ok = trace_until_done(&ts, view, &exited, &wstatus);
	free(ts.t);
	lifecycle_close(ts.lc);
	if (!spawn) return all_ok ? 0 : 1;
	return wait_command(&ts, sp.pid, exited, wstatus);
}
