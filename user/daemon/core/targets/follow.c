/* Following what the traced processes do besides allocating (see process/lifecycle.h): an exec
 * starts a new trace for the new program, a fork (--follow-forks) a trace for the child, a
 * dlopen'ed allocator gets probes. */
#include "targets.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "door/door.h"
#include "parser/parser.h"
#include "common/msg.h"
#include "output/trace_out.h"

static void say_note(const char *note)
{
	if (note[0]) msg_note("%s", note);
}

/* Does pid map every object of sites already (its ld.so has loaded the libraries)? */
static bool sites_mapped(pid_t pid, const struct alloc_sites *sites)
{
	char line[4352];
	bool found[MAX_PROBE_SITES] = {false};
	FILE *f = door_proc_fopen(pid, "maps");
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

/* The program pid runs now, after a chain of execs that may be over by now (#!/usr/bin/env
 * script -> env -> interpreter): the programs exec'd since are gone, the one running now is
 * resolved (read after the queue: an exec not queued yet would make a session for a program
 * cut at once). Returns whether n->exe and n->sites are known; *skipped counts the programs
 * gone meanwhile. */
static bool resolve_exec_chain(struct targets *ts, struct target *n, unsigned *skipped, char *err,
			       size_t errlen)
{
	bool ok = false;
	for (int tries = 0; tries < 16; tries++) {
		while (lifecycle_take_exec(ts->lc, n->pid)) (*skipped)++;
		target_exe_path(n->pid, n->exe, sizeof n->exe);
		ok = n->exe[0] != 0;
		if (!ok) snprintf(err, errlen, "its executable cannot be read (exited?)");
		/* The new image is mapped but its ld.so has not loaded the libraries yet: resolve
		 * them the way it will. */
		if (ok && psites_for_exec(n->exe, n->pid, &n->sites, err, errlen) < 0) ok = false;
		if (!ok || !lifecycle_exec_time(ts->lc, n->pid)) break;
	}
	return ok;
}

/* The trace at the -o path is the last program's: the trace of the program before (t, still
 * being written through its fd) moves aside to FILE.execN.ctf, N the number of execs before it.
 * Returns false when it cannot: then the new program's trace gets the numbered name. */
static bool move_trace_aside(struct targets *ts, struct target *t)
{
	if (ts->o->no_trace || ts->o->probe_floor || t->out_fd < 0) return true;
	if (!t->out_regular) return false; /* /dev/null or a FIFO: never renamed */
	char aside[4096];
	if (cli_exec_output_path(t->base_path, t->execs, aside, sizeof aside) < 0) return false;
	if (rename(t->out_path, aside) < 0) {
		msg_warn("PID %d: cannot move %s to %s: %s", (int)t->pid, t->out_path, aside,
			 strerror(errno));
		return false;
	}
	snprintf(t->out_path, sizeof t->out_path, "%s", aside);
	return true;
}

/* t exec'd a new program: its trace ends, a new session follows the new program into
 * FILE.execN.ctf (same snapshotter). The new session is attached before the old one detaches:
 * records stamped after the exec go to the new one only (see session_opts.exec_time). */
static void follow_exec(struct targets *ts, struct target *t, uint64_t exec_ns)
{
	session_exec_at(t->s, exec_ns); /* the event is consumed: the session cannot ask any more */
	char err[1024] = "";
	struct target *n = targets_add(ts, t->pid);
	if (!n) {
		target_finish(ts, t, FINISH_EXEC, NULL);
		msg_error("PID %d: out of memory, not following its exec", (int)t->pid);
		return;
	}
	n->our_child = t->our_child;
	n->selected = t->selected;
	n->hold = t->hold;
	snprintf(n->base_path, sizeof n->base_path, "%s", t->base_path);
	unsigned skipped = 0;
	bool ok;
	/* Prepared while the process was held at this exec (exec_prep.h): one per exec, in order. */
	struct exec_prepared *pe = t->hold ? exec_prep_take(ts->prep, t->pid, 2000) : NULL;
	if (pe) {
		snprintf(n->exe, sizeof n->exe, "%s", pe->exe);
		snprintf(n->name, sizeof n->name, "%s", pe->name);
		n->sites = pe->sites;
		n->begun = pe->s;
		pe->s = NULL;
		ok = n->begun != NULL;
		if (!ok) snprintf(err, sizeof err, "%s", pe->err);
	} else {
		ok = resolve_exec_chain(ts, n, &skipped, err, sizeof err);
		if (ok) target_program_name(n->pid, NULL, n->exe, n->name, sizeof n->name);
	}
	n->execs = t->execs + 1 + skipped;
	if (ok && !t->out_regular && t->out_fd >= 0) {
		/* /dev/null or a FIFO: the new program writes there too (nothing is renamed or
		 * created beside a device) */
		snprintf(n->out_path, sizeof n->out_path, "%s", t->out_path);
	} else if (ok && !move_trace_aside(ts, t) &&
		   cli_exec_output_path(n->base_path, n->execs, n->out_path, sizeof n->out_path) < 0) {
		snprintf(err, sizeof err, "the trace file name is too long");
		ok = false;
	}
	if (ok && !n->out_path[0]) snprintf(n->out_path, sizeof n->out_path, "%s", n->base_path);
	if (skipped)
		msg_note("PID %d exec'd %u program%s gone before %s could be followed: not traced",
			 (int)t->pid, skipped, skipped > 1 ? "s" : "", skipped > 1 ? "they" : "it");
	n->snap = t->snap; /* handed over below: prepare_outputs must not open a second one */
	if (ok && target_prepare_outputs(ts, n) != 0) {
		snprintf(err, sizeof err, "cannot prepare the trace of the new program");
		ok = false;
	}
	/* The unwinder is prepared at the first record, when ld.so is done (the BPF watcher sees
	 * the exec before ld.so runs; mappings read while it maps the libraries mislead the
	 * unwinder), or at once when the libraries are there already: the /proc fallback sees the
	 * exec late, and the new program may be gone before its first record is read. */
	bool early = !lifecycle_uses_bpf(ts->lc) && sites_mapped(n->pid, &n->sites);
	if (ok && target_start_session(ts, n, !early, err, sizeof err) < 0) ok = false;
	if (n->begun) session_close(n->begun); /* not taken over */
	n->begun = NULL;
	exec_prepared_free(pe); /* its exit hook is set now: the exit gate opens */
	if (!ok) n->snap = NULL;
	target_finish(ts, t, FINISH_EXEC, ok ? &n->snap : NULL);
	n->pidfd = t->pidfd;
	t->pidfd = -1;
	if (!ok) {
		msg_error("PID %d exec'd %s: not followed: %s", (int)n->pid, n->exe[0] ? n->exe : "?",
			  err);
		target_release_outputs(ts, n, true);
		n->active = false;
		n->ok = false;
		lifecycle_unwatch(ts->lc, n->pid);
		return;
	}
	char note[512];
	lifecycle_watch(ts->lc, n->pid, note, sizeof note); /* the new ld.so */
	say_note(note);
}

/* A BPF program loaded ahead for n (a fork's child, a selected program at its exec), attached
 * to its sites now: only the attach waits (issue 36: pick-up latency). Without one, or when the
 * attach fails, the session loads its own. Not with --inject (its sampler's probes). */
static void take_spare(struct targets *ts, struct target *n, pid_t pid)
{
	if (ts->o->inject) return;
	char e[256];
	n->attached = exec_prep_take_spare(ts->prep, pid);
	if (n->attached && tracer_attach(n->attached, &n->sites, e, sizeof e) < 0) {
		tracer_close(n->attached);
		n->attached = NULL;
	}
}

/* --follow-forks: parent forked child, a new process with the parent's mappings. */
static int count_selected(const struct targets *ts);

/* Forked children traced now that no selection counts (-p PID or -- CMD --follow-forks):
 * --max-processes bounds them too, so that a fork loop cannot drive the daemon's memory up
 * with a session per child (issue 46: 1.15 GB at 1000 forks a second). */
static int count_forked(const struct targets *ts)
{
	int n = 0;
	for (int i = 0; i < ts->n; i++) n += ts->t[i]->active && ts->t[i]->forked && !ts->t[i]->selected;
	return n;
}

#define NOT_FOLLOWED_SAID 5               /* lines said in full per window ... */
#define NOT_FOLLOWED_WINDOW_NS 10000000000ULL /* ... of 10 s; the rest in one line a window */

/* A forked child not followed: counted, said in full for the first few of each window, the
 * others summed up in one line when the window ends (a fork loop printed 11-18k lines every
 * 20 s). */
static void child_not_followed(struct targets *ts, pid_t parent, pid_t child, const char *why)
{
	ts->forks_not_followed++;
	uint64_t now = trace_out_mono_now_ns();
	if (now - ts->nf_window_ns >= NOT_FOLLOWED_WINDOW_NS) {
		targets_say_not_followed(ts);
		ts->nf_window_ns = now;
		ts->nf_said = 0;
	}
	if (ts->nf_said < NOT_FOLLOWED_SAID) {
		ts->nf_said++;
		msg_say("PID %d forked PID %d: not followed: %s%s", (int)parent, (int)child, why,
			ts->nf_said == NOT_FOLLOWED_SAID ? " (more such lines are summed up every 10 s)" : "");
		return;
	}
	ts->nf_unsaid++;
	snprintf(ts->nf_last, sizeof ts->nf_last, "PID %d: %.200s", (int)child, why);
}

void targets_forks_left_at_end(struct targets *ts)
{
	if (!ts->lc || !ts->o->follow_forks) return;
	lifecycle_drain(ts->lc);
	struct lifecycle_event ev;
	uint64_t n = 0;
	while (lifecycle_next(ts->lc, &ev)) n += ev.kind == LC_FORK;
	if (!n) return;
	ts->forks_not_followed += n;
	msg_say("%llu forked children came as tracing ended: not followed",
		(unsigned long long)n);
}

void targets_say_not_followed(struct targets *ts)
{
	if (!ts->nf_unsaid) return;
	msg_say("%llu more forked children not followed in the last %llu s (the last: %s); %llu in all",
		(unsigned long long)ts->nf_unsaid,
		(unsigned long long)((trace_out_mono_now_ns() - ts->nf_window_ns) / 1000000000ULL),
		ts->nf_last, (unsigned long long)ts->forks_not_followed);
	ts->nf_unsaid = 0;
}

static void follow_fork(struct targets *ts, pid_t parent, pid_t child)
{
	if (targets_find_active(ts, child)) return; /* adopted already (adopt_children) */
	char err[1024] = "";
	struct target *sp = targets_find_active(ts, parent);
	bool selected = sp && sp->selected;
	if (selected ? count_selected(ts) >= ts->o->select.max_processes
		     : ts->o->select.max_processes && count_forked(ts) >= ts->o->select.max_processes) {
		ts->refused_max_processes++;
		char why[96];
		snprintf(why, sizeof why, "--max-processes %d %s traced already",
			 ts->o->select.max_processes, selected ? "are" : "forked children are");
		child_not_followed(ts, parent, child, why);
		lifecycle_unwatch(ts->lc, child);
		return;
	}
	struct target *n = targets_add(ts, child);
	if (!n) {
		msg_error("out of memory, not following PID %d", (int)child);
		return;
	}
	struct target *p = targets_find_active(ts, parent);
	n->hold = p ? p->hold : NULL; /* held at its start by its parent's hold */
	/* a selected server's worker: counted by --max-processes, let go at an exec of a program
	 * that is not selected, like its parent */
	n->selected = p && p->selected;
	n->forked = true;
	if (p && p->sampler && p->sampler->started) /* it inherited the redirected GOT */
		snprintf(n->inherited_sampler, sizeof n->inherited_sampler, "%s", p->sampler->path);
	bool ok = target_check_pid(child, err, sizeof err) == 0;
	if (ok) {
		target_exe_path(child, n->exe, sizeof n->exe);
		target_program_name(child, NULL, n->exe, n->name, sizeof n->name);
		ok = psites_for_pid(child, &n->sites, err, sizeof err) == 0;
	}
	if (ok) take_spare(ts, n, child);
	if (ok && target_prepare_outputs(ts, n) != 0) {
		snprintf(err, sizeof err, "cannot prepare its trace");
		ok = false;
	}
	if (ok && target_start_session(ts, n, false, err, sizeof err) < 0) ok = false;
	if (!ok) {
		child_not_followed(ts, parent, child, err);
		tracer_close(n->attached);
		n->attached = NULL;
		target_release_outputs(ts, n, true);
		targets_forget(ts, n); /* a child gone at once is no failure of ours */
		lifecycle_unwatch(ts->lc, child);
		return;
	}
	n->pidfd = target_pidfd(child);
	char note[512];
	lifecycle_watch(ts->lc, child, note, sizeof note);
	say_note(note);
}

/* The children pid forked before it was watched (a prefork server forks its workers at once,
 * before its exec is even seen): followed as if their forks were seen now. */
static void adopt_children(struct targets *ts, pid_t pid)
{
	DIR *d = door_proc_opendir(pid, "task");
	for (struct dirent *e; d && (e = readdir(d));) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
		FILE *f = door_proc_fopen(pid, "task/%s/children", e->d_name);
		for (int child; f && fscanf(f, "%d", &child) == 1;) follow_fork(ts, pid, (pid_t)child);
		if (f) fclose(f);
	}
	if (d) closedir(d);
}

/* Selected processes traced now (--max-processes counts these, not the -p ones). */
static int count_selected(const struct targets *ts)
{
	int n = 0;
	for (int i = 0; i < ts->n; i++) n += ts->t[i]->active && ts->t[i]->selected;
	return n;
}

/* --match, --cgroup: traces pid, found running (just_execd false) or at the exec of a program
 * that is selected, like a -p PID; its libraries are resolved as ld.so will load them when it
 * has just exec'd. Quiet when it is gone already (a short program). */
static void follow_selected(struct targets *ts, pid_t pid, bool just_execd, const char *why)
{
	if (count_selected(ts) >= ts->o->select.max_processes) {
		ts->refused_max_processes++;
		msg_warn("PID %d (%s) not traced: --max-processes %d are traced already", (int)pid, why,
			 ts->o->select.max_processes);
		return;
	}
	char err[1024] = "";
	struct target *n = targets_add(ts, pid);
	if (!n) {
		msg_error("out of memory, not tracing PID %d", (int)pid);
		return;
	}
	n->selected = true;
	bool ok = target_check_pid(pid, err, sizeof err) == 0;
	if (ok) {
		target_exe_path(pid, n->exe, sizeof n->exe);
		target_program_name(pid, NULL, n->exe, n->name, sizeof n->name);
		ok = (just_execd ? psites_for_exec(n->exe, pid, &n->sites, err, sizeof err)
				 : psites_for_pid(pid, &n->sites, err, sizeof err)) == 0;
	}
	if (ok) take_spare(ts, n, pid);
	if (ok && target_prepare_outputs(ts, n) != 0) {
		snprintf(err, sizeof err, "cannot prepare its trace");
		ok = false;
	}
	if (ok && target_start_session(ts, n, just_execd, err, sizeof err) < 0) ok = false;
	if (!ok) {
		if (target_check_pid(pid, NULL, 0) == 0) {
			msg_say("PID %d (%s): not traced: %s", (int)pid, why, err);
			ts->attach_failures++;
		}
		tracer_close(n->attached);
		n->attached = NULL;
		target_release_outputs(ts, n, true);
		n->ok = true; /* a process gone at once is no failure of ours */
		return;
	}
	msg_info("PID %d (%s) traced: %s", (int)pid, n->exe, why);
	ts->selected_traced++;
	n->pidfd = target_pidfd(pid);
	char note[512];
	if (ts->lc) lifecycle_watch(ts->lc, pid, note, sizeof note);
	say_note(note);
	if (ts->o->follow_forks) adopt_children(ts, pid);
}

void targets_select_running(struct targets *ts)
{
	const struct select_opts *so = &ts->o->select;
	if (!select_active(so)) return;
	pid_t *pids = calloc(4096, sizeof *pids);
	int n = pids ? select_scan(so, pids, 4096) : 0;
	for (int i = 0; i < n; i++) {
		if (targets_find_active(ts, pids[i])) continue; /* a -p PID */
		struct select_proc p;
		char why[700] = "";
		if (select_describe(pids[i], &p) == 0 && select_matches(so, &p, why, sizeof why))
			follow_selected(ts, pids[i], false, why);
	}
	free(pids);
}

/* An exec outside the traced processes (--match, --cgroup see them all): a selected program? */
static void exec_elsewhere(struct targets *ts, pid_t pid)
{
	struct select_proc p;
	char why[700] = "";
	if (select_describe(pid, &p) == 0 && select_matches(&ts->o->select, &p, why, sizeof why))
		follow_selected(ts, pid, true, why);
}

/* A selected process exec'd: traced on if the new program is selected too. */
static bool still_selected(struct targets *ts, struct target *t)
{
	struct select_proc p;
	if (!t->selected || select_describe(t->pid, &p) < 0 ||
	    select_matches(&ts->o->select, &p, NULL, 0))
		return true; /* gone: its exit ends it */
	msg_info("PID %d exec'd %s, which --match/--cgroup do not select: no longer traced",
		 (int)t->pid, p.exe);
	return false;
}

/* The link map of t changed: probe the allocation functions of libraries loaded since. */
static void follow_dlopen(struct target *t)
{
	t->dlopen_pending = false;
	inject_mode_after_dlopen(t->sampler);
	struct alloc_sites *added = malloc(sizeof *added);
	char err[512] = "";
	if (!added) return;
	if (psites_added(t->pid, &t->sites, added, err, sizeof err) < 0) {
		msg_note("PID %d: after a dlopen: %s", (int)t->pid, err);
	} else if (added->n == 0) {
		session_refresh_mappings(t->s);
	} else if (t->sites.n + added->n > MAX_PROBE_SITES) {
		msg_say("PID %d: %s defines allocation functions, but more than %d probe sites would be "
			"needed: not probed", (int)t->pid, added->allocator, MAX_PROBE_SITES);
	} else if (session_add_sites(t->s, added, err, sizeof err) < 0) {
		msg_say("PID %d: cannot probe the allocation functions of %s: %s", (int)t->pid,
			added->allocator, err);
	} else {
		memcpy(&t->sites.sites[t->sites.n], added->sites, (size_t)added->n * sizeof added->sites[0]);
		t->sites.n += added->n;
		msg_info("PID %d: dlopen: %d allocation function%s probed in %s", (int)t->pid, added->n,
			 added->n > 1 ? "s" : "", added->allocator);
		if (added->notes[0]) msg_note("%s", added->notes);
	}
	free(added);
}

void targets_follow_lifecycle(struct targets *ts)
{
	if (!ts->lc) return;
	/* A process held at an exec or at its start (hold.h) was announced by the lifecycle
	 * watcher before it stopped: the events below follow it, then it is let go. */
	struct hold_event held[CLI_MAX_PIDS];
	bool is_held[CLI_MAX_PIDS];
	for (int i = 0; i < ts->nholds; i++) is_held[i] = hold_pending(ts->holds[i], &held[i]);
	lifecycle_drain(ts->lc);
	struct lifecycle_event ev;
	while (lifecycle_next(ts->lc, &ev)) {
		struct target *t = targets_find_active(ts, ev.pid);
		if (!t && ev.kind == LC_EXEC && select_active(&ts->o->select)) exec_elsewhere(ts, ev.pid);
		if (!t) continue;
		if (ev.kind == LC_EXEC && !still_selected(ts, t)) {
			session_exec_at(t->s, ev.time_ns);
			target_finish(ts, t, FINISH_EXEC, NULL);
			lifecycle_unwatch(ts->lc, t->pid);
		} else if (ev.kind == LC_EXEC) follow_exec(ts, t, ev.time_ns);
		else if (ev.kind == LC_FORK && ts->o->follow_forks) follow_fork(ts, ev.pid, ev.child);
		else if (ev.kind == LC_DLOPEN) t->dlopen_pending = true;
	}
	/* coalesced: ld.so announces each dlopen twice (before and after mapping) */
	for (int i = 0; i < ts->n; i++)
		if (ts->t[i]->active && ts->t[i]->dlopen_pending) follow_dlopen(ts->t[i]);
	for (int i = 0; i < ts->nholds; i++)
		if (is_held[i]) hold_release(ts->holds[i], held[i].pid);
}
