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
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "options/cli.h"
#include "parser/parser.h"
#include "parser/rstacks.h"
#include "process/loop_wake.h"
#include "protocol/protocol.h"
#include "common/msg.h"
#include "output/trace_out.h"
#include "service_life.h"
#include "service_notify.h"
#include "status.h"
#include "targets/targets.h"
#include "tracer/tracer.h"
#include "tracer/kernel_probe.h"

/* The loop's longest sleep: records, lifecycle events, held processes, exits and the
 * parser's death wake it at once; a profile asked over HTTP (the parser's want ring has no
 * file descriptor) waits at most this, as do ticks and snapshots. */
#define POLL_MS 100

static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t snapshot_requested;
static volatile sig_atomic_t reload_requested;
static bool hup_reloads; /* a host service: SIGHUP re-reads its options (service_life.h) */
static int main_argc;
static char **main_argv;

static void on_stop_signal(int sig)
{
	stop_signal = sig;
	loop_wake(); /* one that came just before the loop's wait began */
}
static void on_hangup(int sig)
{
	if (hup_reloads) reload_requested = 1;
	else stop_signal = sig;
	loop_wake();
}
/* Only a flag: the main loop writes the snapshot (never from a signal handler). */
static void on_snapshot_signal(int sig)
{
	snapshot_requested = 1;
	loop_wake();
}

static void install_signals(void)
{
	struct sigaction sa = {.sa_handler = on_stop_signal}; /* no SA_RESTART: wake the poll */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_hangup;
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = on_snapshot_signal;
	sigaction(SIGUSR1, &sa, NULL);
	/* a closed stderr must not kill us before the trace is closed (the command, forked
	 * before this, keeps the default) */
	signal(SIGPIPE, SIG_IGN);
}

/* A set-uid program under ptrace: the kernel grants the set-uid only to a privileged tracer. */
static void warn_if_setuid(const char *exe)
{
	struct stat st;
	if (stat(exe, &st) < 0 || !(st.st_mode & (S_ISUID | S_ISGID))) return;
	msg_warn("%s is a set-%cid program: it runs under memtraced's ptrace (as root, memtraced lets "
		 "the kernel grant its set-%cid; it shows memtraced as its TracerPid)", exe,
		 st.st_mode & S_ISUID ? 'u' : 'g', st.st_mode & S_ISUID ? 'u' : 'g');
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
	warn_if_setuid(sp->exe);
	/* held at its exit (a command of a few ms still gets its stacks), at each exec and, with
	 * --follow-forks, each child at its start, until their probes are in place */
	struct hold_opts ho = {.exit = true, .exec = !ts->o->probe_floor,
			       .forks = ts->o->follow_forks && !ts->o->probe_floor};
	t->hold = hold_start(sp->pid, &ho, err, sizeof err);
	if (t->hold) ts->hold_pids[ts->nholds] = t->pid, ts->holds[ts->nholds++] = t->hold;
	else msg_warn("%s: traced without holding it: what it runs after an exec may be missed at first",
		      err);
	if (!realpath(sp->exe, t->exe)) snprintf(t->exe, sizeof t->exe, "%s", sp->exe);
	target_program_name(t->pid, ts->o->cmd[0], t->exe, t->name, sizeof t->name);
	/* `ld.so PROG` (issue 47): the allocator is the one PROG's libraries bring, which ld.so
	 * alone has none of */
	char prog[4096];
	const char *sites_of = target_ldso_program(sp->exe, ts->o->cmd, prog, sizeof prog) ? prog
												 : sp->exe;
	if (psites_for_exec(sites_of, t->pid, &t->sites, err, sizeof err) < 0) {
		msg_error("cannot find the allocator of '%s': %s", sites_of, err);
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
		target_program_name(t->pid, NULL, t->exe, t->name, sizeof t->name);
		/* a process that has just started may not have loaded its libraries yet: its
		 * ld.so is still at work for a few ms (for 1 s at most, we look again) */
		int rc;
		for (int tries = 0; (rc = psites_for_pid(t->pid, &t->sites, err, sizeof err)) < 0 &&
				    tries < 50 && target_check_pid(t->pid, NULL, 0) == 0; tries++)
			usleep(20000);
		if (rc < 0) {
			msg_error("cannot find the allocator of PID %d: %s", (int)t->pid, err);
			return 1;
		}
		if (!ts->o->hold_exec || ts->o->probe_floor) continue;
		/* held at its exit too: a program it execs may be gone before its first records are read */
		struct hold_opts ho = {.exec = true, .forks = ts->o->follow_forks, .running = true,
				       .exit = true};
		t->hold = hold_start(t->pid, &ho, err, sizeof err);
		if (!t->hold) {
			msg_error("--hold-exec: %s", err);
			return 1;
		}
		ts->hold_pids[ts->nholds] = t->pid;
		ts->holds[ts->nholds++] = t->hold;
	}
	return 0;
}

/* The outputs and the sessions of the initial targets, then the lifecycle watcher (after the
 * probes are live: loading it takes tens of ms). 0, or an exit status (message printed);
 * *lc_note says why the BPF watcher could not load. */
static int start_tracing(struct targets *ts, bool spawn, char *lc_note, size_t notelen)
{
	char err[1024] = "";
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
	if (!ts->o->probe_floor) { /* exec, fork and dlopen (not in the benchmarks' probe floor) */
		ts->lc = lifecycle_open(ts->o->follow_forks, select_active(&ts->o->select), lc_note,
					notelen);
		if (!ts->lc) {
			msg_error("out of memory");
			return 1;
		}
		for (int i = 0; i < ts->n; i++) target_use_lifecycle(ts, ts->t[i]);
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

/* The probes are in place: lets the command run (or watches the PIDs' exits), watching exec,
 * fork and dlopen first: a command held before its exec gets its dlopen probe before it runs
 * (its ld.so is, in all likelihood, the file ours maps, probed for its pid as it maps it), so
 * a dlopen in its first milliseconds is not missed. */
static void let_targets_run(struct targets *ts, struct spawned *sp, bool spawn)
{
	char err[1024] = "";
	for (int i = 0; i < ts->n && ts->lc; i++) {
		char note[512] = "";
		lifecycle_watch(ts->lc, ts->t[i]->pid, note, sizeof note);
		if (note[0]) msg_note("%s", note);
	}
	if (spawn) {
		if (target_release(sp, err, sizeof err) < 0) msg_error("%s", err); /* exits 127/126 */
		else session_target_started(ts->t[0]->s);
		/* the command's own exec is not a new program (its event is queued: the release
		 * returns once the exec succeeded); the watch renewed for its image */
		if (ts->lc) {
			char note[512] = "";
			lifecycle_take_exec(ts->lc, sp->pid);
			lifecycle_watch(ts->lc, sp->pid, note, sizeof note);
			if (note[0]) msg_note("%s", note);
		}
	} else {
		for (int i = 0; i < ts->n; i++) ts->t[i]->pidfd = target_pidfd(ts->t[i]->pid);
	}
}

/* Is a process held (at a fork or an exec) waiting for the main loop? It goes first: the
 * other targets' records wait in their queues meanwhile. */
static bool hold_waiting(const struct targets *ts)
{
	struct hold_event ev;
	for (int i = 0; i < ts->nholds; i++)
		if (hold_pending(ts->holds[i], &ev)) return true;
	return false;
}

/* One round: takes what each active target's queue holds (no wait), finishes those that
 * exited or failed, then, if none had anything, waits once for the next record, lifecycle
 * event or held process (loop_wake.h): a pass no longer waits on each process in turn. */
static void poll_targets(struct targets *ts, struct status_view **view, bool *cmd_exited,
			 int *wstatus)
{
	bool polled = false;
	for (int i = 0; i < ts->n; i++) {
		struct target *t = ts->t[i];
		if (!t->active) continue;
		if (polled && hold_waiting(ts)) return; /* it goes first; the others' turn comes next */
		polled = true;
		bool ended = false;
		enum finish_why why = FINISH_EXIT;
		/* a process with a pidfd is looked at when the wait saw it readable (a poll each
		 * per pass was most of the cost of 64 idle processes) */
		bool look = t->pidfd < 0 || t->our_child || t->exit_seen;
		t->exit_seen = false;
		if (session_poll(t->s, 0) < 0 && !stop_signal) {
			ended = true;
			why = FINISH_ERROR;
		} else if (look && target_has_exited(ts, t, wstatus)) {
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
	if (hold_waiting(ts)) return;
	int fds[ts->n + 2];
	bool ready[ts->n + 2];
	fds[0] = lifecycle_fd(ts->lc);
	fds[1] = parser_gone() ? -1 : parser_pidfd(); /* its death is seen at once */
	for (int i = 0; i < ts->n; i++) /* readable at its exit */
		fds[2 + i] = ts->t[i]->active && !ts->t[i]->our_child ? ts->t[i]->pidfd : -1;
	loop_wait(fds, ts->n + 2, POLL_MS, ready);
	for (int i = 0; i < ts->n; i++) ts->t[i]->exit_seen = ready[2 + i];
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
		if (ts->t[i]->active) target_snapshot(ts, ts->t[i], asked && !ts->o->quiet);
	if (interval_ns && now >= *next_snapshot) {
		/* the next one on the grid; skip the ones a slow snapshot missed */
		*next_snapshot += interval_ns;
		if (*next_snapshot <= now) *next_snapshot = now + interval_ns;
	}
}

/* systemd's status line (Type=notify): how many processes are traced. */
static void say_service_status(struct targets *ts, bool ready)
{
	char st[128];
	int n = targets_count_active(ts);
	snprintf(st, sizeof st, "tracing %d process%s%s", n, n == 1 ? "" : "es",
		 ts->parser_restarts ? ", parser restarted" : "");
	if (ready) service_ready(st);
	else service_status(st);
}

/* Traces until every target is finished. Returns whether every trace was written completely. */
static bool trace_until_done(struct targets *ts, struct status_view *view, bool *cmd_exited,
			     int *wstatus)
{
	uint64_t start = trace_out_mono_now_ns();
	uint64_t interval_ns = (uint64_t)(ts->o->snapshot_interval * 1e9);
	uint64_t next_snapshot = start + interval_ns;
	uint64_t next_publish = start;
	bool all_ok = true;
	bool selecting = select_active(&ts->o->select);
	while (targets_count_active(ts) > 0 || selecting) {
		service_watchdog_tick(); /* a loop stuck for WatchdogSec gets memtraced restarted */
		poll_targets(ts, &view, cmd_exited, wstatus);
		targets_follow_lifecycle(ts);
		targets_drop_finished(ts, &all_ok);
		const char *gone = selecting ? parser_gone() : NULL;
		if (gone && !service_parser_died(ts, &view, gone)) {
			all_ok = false;
			break;
		}
		enum finish_why why;
		if (all_must_stop(ts, view, start, &why)) {
			service_stopping(); /* the final drains and snapshots take a while */
			status_close(view); /* before the summaries */
			view = NULL;
			for (int i = 0; i < ts->n; i++) target_finish(ts, ts->t[i], why, NULL);
			break;
		}
		if (reload_requested) {
			reload_requested = 0;
			service_reload(ts, main_argc, main_argv);
			interval_ns = (uint64_t)(ts->o->snapshot_interval * 1e9);
			next_snapshot = trace_out_mono_now_ns() + interval_ns;
		}
		snapshots_if_due(ts, interval_ns, &next_snapshot);
		if (ts->o->listen) targets_serve_profiles(ts);
		if (ts->o->listen && trace_out_mono_now_ns() >= next_publish) {
			targets_publish(ts); /* a process gone meanwhile has no series any more */
			next_publish = trace_out_mono_now_ns() + 1000000000ULL;
		}
		say_service_status(ts, false);
	}
	status_close(view);
	targets_drop_finished(ts, &all_ok); /* all finished by now */
	return all_ok;
}

/* -- CMD: the command's exit status is ours; keeps waiting for it after a detach, passing
 * SIGTERM on. */
static int wait_command(struct targets *ts, pid_t pid, bool exited, int wstatus)
{
	struct hold *h = ts->nholds ? ts->holds[0] : NULL;
	if (stop_signal == SIGTERM && !exited) kill(pid, SIGTERM); /* pass it on */
	if (!exited && h) {
		if (stop_signal == SIGTERM) stop_signal = 0; /* passed on just above */
		while (!hold_exited(h, &wstatus, 100)) {
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
	return target_exit_status(wstatus);
}

/* Execs of held processes are prepared on the holds' threads (exec_prep.h). Called after
 * start_tracing made the lifecycle watcher (no exec follows in the probe floor). */
static void prepare_execs(struct targets *ts)
{
	struct tracer_opts to = {.rate = ts->o->rate, .stack_bytes = ts->o->stack_bytes,
				 .ringbuf_bytes = ts->o->ring_bytes, .no_mappings = ts->o->no_mmap};
	ts->prep = exec_prep_new(&to);
	for (int i = 0; ts->prep && i < ts->n; i++) /* muted at their exec */
		if (ts->t[i]->hold && ts->t[i]->s) exec_prep_watch(ts->prep, ts->t[i]->pid, ts->t[i]->s);
	for (int i = 0; ts->prep && i < ts->nholds; i++) {
		hold_set_exec_fn(ts->holds[i], exec_prep_on_exec, exec_prep_after_exec, ts->prep);
		/* ready for the first exec (for -- CMD: before the command runs) */
		exec_prep_refill(ts->prep, ts->hold_pids[i]);
		hold_set_exit_gate(ts->holds[i], exec_prep_pending, ts->prep);
	}
	/* a fork's child takes one at its start, and another at its exec (more: their loading
	 * competes for the CPU with the target; measured worse with 4) */
	if (ts->o->follow_forks) exec_prep_keep_spares(ts->prep, 2);
}

/* The processes are let go (-p --hold-exec: detached, they run on); how long they were held. */
static void release_holds(struct targets *ts)
{
	for (int i = 0; i < ts->nholds; i++) {
		double total, max;
		unsigned n;
		hold_stats(ts->holds[i], &total, &max, &n);
		if (n)
			msg_info("PID %d: held %u time%s at an exec or a fork until the probes were in "
				 "place: %.1f ms in all, %.1f ms at most", (int)ts->hold_pids[i], n,
				 n > 1 ? "s" : "", total, max);
		hold_free(ts->holds[i]);
		ts->holds[i] = NULL;
	}
	ts->nholds = 0;
}

/* --kernel-check: what the kernel offers, a line each, and the attach mode; 0 when memtraced
 * can trace here, 1 when not (the line that says why). */
static int kernel_check(void)
{
	const struct kernel_features *f = kernel_features();
	printf("kernel %s\n", f->release);
	const struct { const char *name; bool have; } feats[] = {
		{"btf", f->btf}, {"ringbuf", f->ringbuf}, {"task_storage", f->task_storage},
		{"current_task_btf", f->current_task_btf}, {"attach_cookie", f->attach_cookie},
		{"task_pt_regs", f->task_pt_regs}, {"bpf_loop", f->bpf_loop}, {"find_vma", f->find_vma},
		{"uprobe_multi", f->uprobe_multi}, {"uprobe_session", f->uprobe_session},
		{"seccomp_addfd_send", f->seccomp_addfd_send},
	};
	for (size_t i = 0; i < sizeof feats / sizeof feats[0]; i++)
		printf("feature %s %s\n", feats[i].name, feats[i].have ? "yes" : "no");
	printf("feature probe_read_kernel %s\n", f->probe_read_kernel ? "yes" : "no");
	printf("lockdown %s\n", f->lockdown[0] ? f->lockdown : "unknown");
	printf("capabilities to load BPF %s\n", f->bpf_capable ? "yes" : "no");
	printf("ptrace_scope %d\n", f->ptrace_scope);
	char buf[512];
	enum tracer_mode mode;
	if (kernel_attach_mode(kernel_attach(), &mode, buf, sizeof buf) < 0) {
		printf("cannot trace: %s\n", buf);
		return 1;
	}
	kernel_mode_line(mode, kernel_attach() != TRACER_ATTACH_AUTO, buf, sizeof buf);
	printf("mode %s: %s\n", tracer_mode_short(mode), buf);
	return 0;
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
	kernel_set_attach(o->attach);
	if (o->kernel_check) return kernel_check();
	/* Whether this kernel can trace, and how: said once, before anything is placed in a
	 * target (--inject) or a process is selected (--match) */
	enum tracer_mode mode;
	if (kernel_attach_mode(o->attach, &mode, err, sizeof err) < 0) {
		msg_error("%s", err);
		return 1;
	}
	char line[300];
	kernel_mode_line(mode, o->attach != TRACER_ATTACH_AUTO, line, sizeof line);
	msg_info("allocator probes: %s", line);
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
	/* One malloc arena: each session's records are allocated on its intake thread and freed
	 * on this one, so with an arena per thread the memory freed sat in arenas that the live
	 * sessions' blocks kept from shrinking: a host service whose processes came and went grew
	 * by about 1 MB per process (tests/test_select_churn.sh). */
	mallopt(M_ARENA_MAX, 1);
	service_notify_init(); /* before anything is forked: they do not inherit $NOTIFY_SOCKET */
	main_argc = argc;
	main_argv = argv;
	int rc = parse_and_check(argc, argv, &o, &view);
	if (rc >= 0) return rc;
	/* the files and stacks of the targets are parsed by an unprivileged child, forked now
	 * while this process has one thread (sandbox/sandbox.h) */
	char perr[512] = "";
	if (parser_start(o.listen != NULL, perr, sizeof perr) < 0) {
		msg_error("cannot start the unprivileged parser: %s", perr);
		return 1;
	}
	atexit(parser_stop); /* reaped at the end: its CPU time counts as ours (bench) */
	rstacks_set_python_mode(o.python);
	if (o.listen) { /* the socket is ours (a port below 1024 too); the server is the parser's */
		targets_serve_root_profiles(o.listen_root_profiles);
		static char token[PARSER_TOKEN_MAX + 1];
		if (o.listen_token && targets_read_token(o.listen_token, token, sizeof token, perr,
							 sizeof perr) < 0) {
			msg_error("%s", perr);
			return 2;
		}
		int lfd = targets_listen(o.listen, o.listen_public, perr, sizeof perr);
		if (lfd < 0 || parser_listen(lfd, o.listen_token ? token : NULL, perr, sizeof perr) < 0) {
			msg_error("%s", perr);
			return lfd == -2 ? 2 : 1;
		}
		/* a PORT alone is 127.0.0.1:PORT (it read "on http://9468/") */
		msg_info("serving /metrics, /debug/pprof/heap, /debug/pprof/allocs and / on http://%s%s/",
			 strchr(o.listen, ':') ? "" : "127.0.0.1:", o.listen);
	}

	bool spawn = o.cmd != NULL;
	/* static: what it holds stays reachable on early error exits (LeakSanitizer) */
	static struct targets ts;
	ts.o = &o;
	ts.start_ns = trace_out_mono_now_ns();
	for (int i = 0; i < (spawn ? 1 : o.npids); i++) {
		struct target *t = targets_add(&ts, spawn ? -1 : o.pids[i]);
		if (!t) {
			msg_error("out of memory");
			return 1;
		}
		t->initial = true;
	}
	struct spawned sp = {.pid = -1, .go_fd = -1, .err_fd = -1};
	rc = spawn ? setup_command(&ts, &sp) : setup_pids(&ts);
	if (spawn && sp.pid <= 0) return rc; /* the command could not even be forked */
	/* From here on a signal (SIGUSR1 included, whose default would kill us) only sets a flag;
	 * the command, if any, is forked already and keeps the default actions. */
	hup_reloads = select_active(&o.select);
	install_signals();
	char lc_note[512] = "";
	if (!rc) rc = start_tracing(&ts, spawn, lc_note, sizeof lc_note);
	if (rc) {
		abort_tracing(&ts, &sp);
		release_holds(&ts);
		exec_prep_free(ts.prep);
		return rc;
	}
	if (lc_note[0]) msg_note("%s", lc_note);
	if (ts.nholds && ts.lc) prepare_execs(&ts);
	if (o.follow_forks && ts.lc && !lifecycle_uses_bpf(ts.lc))
		msg_warn("--follow-forks needs the BPF lifecycle watcher: forks are not followed");
	if (select_active(&o.select) && !lifecycle_uses_bpf(ts.lc))
		msg_warn("--match and --cgroup need the BPF lifecycle watcher to see new programs: "
			 "only the processes running now are traced");
	let_targets_run(&ts, &sp, spawn);
	targets_select_running(&ts);
	say_service_status(&ts, true);

	int wstatus = 0;
	bool exited = false;
	bool all_ok = trace_until_done(&ts, view, &exited, &wstatus);
	targets_forks_left_at_end(&ts);
	targets_say_not_followed(&ts);
	if (ts.forks_not_followed)
		msg_say("forked children not followed: %llu in all", (unsigned long long)ts.forks_not_followed);
	if (ts.lc && lifecycle_lost(ts.lc))
		msg_warn("%llu exec, fork or dlopen events came faster than they could be queued: not "
			 "followed", (unsigned long long)lifecycle_lost(ts.lc));
	targets_print_traces(&ts);
	rc = spawn ? wait_command(&ts, sp.pid, exited, wstatus) : all_ok ? 0 : 1;
	if (select_active(&o.select) && !ts.selected_traced && ts.attach_failures) {
		/* a host service that traced nothing it selected has failed, whatever the reason */
		msg_error("none of the %llu processes --match/--cgroup selected could be traced",
			  (unsigned long long)ts.attach_failures);
		rc = 1;
	}
	release_holds(&ts);
	exec_prep_free(ts.prep);
	tracer_close_wait();
	free(ts.t);
	free(ts.traces);
	lifecycle_close(ts.lc);
	return rc;
}
