/* The processes memtraced traces: outputs, sessions, snapshots, finishing (see targets.h). */
#include "targets.h"

#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/msg.h"
#include "out_file.h"
#include "output/snapshot.h"
#include "output/trace_out.h"

struct target *targets_add(struct targets *ts, pid_t pid)
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

void targets_forget(struct targets *ts, struct target *t)
{
	for (int i = ts->n - 1; i >= 0; i--) {
		if (ts->t[i] != t) continue;
		memmove(&ts->t[i], &ts->t[i + 1], (size_t)(ts->n - i - 1) * sizeof ts->t[0]);
		ts->n--;
		free(t);
		return;
	}
}

int targets_count_active(const struct targets *ts)
{
	int n = 0;
	for (int i = 0; i < ts->n; i++) n += ts->t[i]->active;
	return n;
}

struct target *targets_find_active(const struct targets *ts, pid_t pid)
{
	for (int i = 0; i < ts->n; i++)
		if (ts->t[i]->active && ts->t[i]->pid == pid) return ts->t[i];
	return NULL;
}

void targets_drop_finished(struct targets *ts, bool *all_ok)
{
	int k = 0, dropped = 0;
	for (int i = 0; i < ts->n; i++) {
		struct target *t = ts->t[i];
		if (t->active) {
			ts->t[k++] = t;
			continue;
		}
		*all_ok = *all_ok && t->ok;
		target_release_outputs(ts, t, false);
		free(t);
		dropped++;
	}
	ts->n = k;
	/* A session's records are allocated on its intake thread and freed on ours: the freed
	 * memory sits in that thread's malloc arena, held by the live sessions' blocks around it.
	 * A host service sees processes come and go for months: give it back to the system. */
	if (dropped) malloc_trim(0);
}

int target_prepare_outputs(struct targets *ts, struct target *t)
{
	const struct cli_opts *o = ts->o;
	char err[4200];
	if (o->snapshot_dir && !o->probe_floor && !t->snap) {
		struct snapshot_opts so = {.dir = o->snapshot_dir, .keep = o->snapshot_keep,
					   .file_mode = (mode_t)o->file_mode, .create = true};
		t->snap = snapshot_open(&so, t->pid, err, sizeof err);
		if (!t->snap) {
			msg_error("%s", err);
			return 2;
		}
	}
	/* an exec'd program's path is chosen by follow_exec (the -o path, the last program's) */
	if (!t->out_path[0] && cli_output_path(o, t->pid, t->out_path, sizeof t->out_path)) {
		msg_error("the trace file name is too long");
		return 2;
	}
	if (!t->execs) snprintf(t->base_path, sizeof t->base_path, "%s", t->out_path);
	if (!o->probe_floor && !o->no_trace) {
		/* made new, never through what another user put at the name (issue 46) */
		t->out_fd = mt_out_create(t->out_path, o->file_mode, "trace file", err, sizeof err);
		if (t->out_fd < 0) {
			msg_error("%s", err);
			return 1;
		}
		struct stat st;
		t->out_regular = fstat(t->out_fd, &st) == 0 && S_ISREG(st.st_mode);
	}
	return 0;
}

static uint64_t exec_time_of(void *ctx, pid_t pid) { return lifecycle_exec_time(ctx, pid); }

/* -- CMD: holds the command at its exit until its session has read its records (and prepared
 * its unwinder from its mappings: a command of a few ms is gone before the first drain). */
static void child_exiting(void *ctx)
{
	struct target *t = ctx;
	inject_mode_source_calls(t->sampler, t->s); /* its memory is there at the exit-stop */
	session_target_exiting(t->s, 1000);
}

static void say_tracing(const struct targets *ts, const struct target *t)
{
	const struct cli_opts *o = ts->o;
	char what[4200];
	if (o->probe_floor) snprintf(what, sizeof what, "probe floor: no trace");
	else if (o->no_trace) snprintf(what, sizeof what, "no trace");
	else snprintf(what, sizeof what, "trace %s", t->out_path);
	char attached[64] = "";
	if (t->initial) /* from memtraced's start to the probes in place */
		snprintf(attached, sizeof attached, ", attached in %.1f ms",
			 (trace_out_mono_now_ns() - ts->start_ns) / 1e6);
	msg_info("tracing PID %d (%s), allocator %s, rate %g, %s%s%s%s", (int)t->pid,
		 t->name[0] ? t->name : t->exe[0] ? t->exe : "?", t->sites.allocator[0] ? t->sites.allocator : "unknown",
		 o->rate, what, t->snap ? ", snapshots in " : "", t->snap ? snapshot_dir(t->snap) : "",
		 attached);
	if (t->sites.notes[0]) msg_note("%s", t->sites.notes);
}
#define ENTRY_STACKS_WAIT_MS 3000 /* a loaded machine: the unwinder took 0.2-3.2 s to open */

/* -- CMD: on the hold's thread, at the program's entry point (its session is open by then):
 * under --inject the sampler placed, and the session told where its thinning is; then its
 * unwinder prepared and its Python interpreter found before its first line runs (else a
 * Python program's first second, on a loaded machine, had no Python frames: issue 38). */
static void target_at_entry(void *ctx, pid_t pid, long ptrace_options)
{
	struct target *t = ctx;
	struct session *s = __atomic_load_n(&t->s, __ATOMIC_ACQUIRE);
	if (t->sampler) {
		inject_mode_at_entry(t->sampler, pid, ptrace_options);
		if (s && t->sampler->started) session_set_source_thin(s, t->sampler->thin);
	}
	if (s && !session_prepare_stacks(s, ENTRY_STACKS_WAIT_MS))
		msg_warn("PID %d: its unwinder was not ready in %d ms: it runs on, its first "
			 "samples may lack Python frames", (int)pid, ENTRY_STACKS_WAIT_MS);
}


/* The trace file emptied for a session that starts over (nothing of the closed one kept):
 * false when it cannot be (a FIFO took the bytes already). */
static bool restart_output(struct target *t)
{
	if (t->out_fd < 0) return true;
	if (!t->out_regular) {
		struct stat st;
		return fstat(t->out_fd, &st) == 0 && S_ISCHR(st.st_mode); /* /dev/null */
	}
	return ftruncate(t->out_fd, 0) == 0 && lseek(t->out_fd, 0, SEEK_SET) == 0;
}

int target_start_session(struct targets *ts, struct target *t, bool before_exec, char *err,
			 size_t errlen)
{
	const struct cli_opts *o = ts->o;
	char started_as[256];
	struct session_opts so = {
		.pid = t->pid, .rate = o->rate, .stack_bytes = o->stack_bytes,
		.ring_bytes = o->ring_bytes, .floor = o->probe_floor, .no_mappings = o->no_mmap,
		.format_version = o->format_version,
		.out_fd = t->out_fd, .no_trace = o->no_trace, .trace_optional = t->snap != NULL,
		.executable = t->exe, .started_as = target_started_as(t->name, t->exe, started_as, sizeof started_as),
		.sites = &t->sites, .spawned = before_exec,
		.exec_time = ts->lc ? exec_time_of : NULL, .exec_ctx = ts->lc};
	if (o->inject && !t->begun && t->initial && !t->inject_failed) { /* forks and execs: uprobes */
		int rc = inject_mode_prepare(o, t->pid, before_exec, t->exe, &t->sampler, &so.tracer, err,
					     errlen);
		if (rc < 0) return -1;
	} else if (o->inject && t->inherited_sampler[0] && !t->begun) {
		so.tracer = inject_mode_child_tracer(o, t->pid, t->inherited_sampler);
	} else if (!o->inject && !o->no_carried && !o->probe_floor && !t->begun && t->initial && !before_exec) {
		inject_mode_use_carried(o, t->pid, &so.tracer);
	}
	if (t->attached) { /* a spare attached at its fork: the session takes it */
		if (so.tracer) tracer_close(t->attached);
		else so.tracer = t->attached;
		t->attached = NULL;
	}
	if (t->begun) { /* prepared while the process was held at its exec */
		t->s = t->begun;
		t->begun = NULL;
		if (session_start_trace(t->s, &so, err, errlen) < 0) {
			session_close(t->s);
			t->s = NULL;
		}
	} else {
		t->s = session_open(&so, err, errlen);
	}
	if (!t->s) {
		inject_mode_stop(t->sampler, true, NULL);
		t->sampler = NULL;
		return -1;
	}
	if (t->sampler && !before_exec && inject_mode_start(t->sampler, o, err, errlen) < 0) {
		session_close(t->s);
		t->s = NULL;
		sampler_ctl_free(t->sampler, true); /* the agent's region unmapped; the library, not
						       started, costs the program nothing */
		t->sampler = NULL;
		/* The fallback docs/inject.md promises (issue 47: "no thread was at a safe moment"
		 * for the start made memtraced exit 1): the same process with uprobes, its trace
		 * begun anew. */
		if (o->inject != CLI_INJECT_REQUIRED && !t->inject_failed && restart_output(t)) {
			msg_warn("PID %d: the sampler could not start (%.3000s): tracing it with uprobes",
				 (int)t->pid, err);
			t->inject_failed = true;
			return target_start_session(ts, t, before_exec, err, errlen);
		}
		return -1;
	}
	if (t->sampler && !before_exec) session_set_source_thin(t->s, t->sampler->thin);
	/* -- CMD under --inject: the sampler goes in, and the unwinder is prepared, at its entry
	 * point. (With uprobes too, a kernel 6.1 VM's -- CMD traces had one-frame stacks in 2 of
	 * 5 runs, not understood yet: not held there.) */
	if (before_exec && t->hold && t->initial && t->sampler) {
		t->at_entry = true;
		hold_set_entry_fn(t->hold, target_at_entry, t);
	}
	if (t->hold) exec_prep_watch(ts->prep, t->pid, t->s); /* muted at its exec */
	t->active = true;
	t->ok = true;
	if (t->hold) hold_set_exit_hook(t->hold, t->pid, child_exiting, t);
	say_tracing(ts, t);
	return 0;
}

void target_use_lifecycle(struct targets *ts, struct target *t)
{
	if (t->s && ts->lc) session_set_exec_clock(t->s, exec_time_of, ts->lc);
}

bool target_has_exited(const struct targets *ts, const struct target *t, int *wstatus)
{
	if (t->our_child && t->hold) return hold_exited(t->hold, wstatus, 0);
	if (t->our_child) {
		pid_t r = waitpid(t->pid, wstatus, WNOHANG);
		return r == t->pid || (r < 0 && errno == ECHILD);
	}
	if (t->pidfd >= 0) {
		struct pollfd p = {.fd = t->pidfd, .events = POLLIN};
		return poll(&p, 1, 0) > 0;
	}
	return kill(t->pid, 0) < 0 && errno == ESRCH;
}

void target_snapshot(struct targets *ts, struct target *t, bool say_it)
{
	if (!t->snap || !t->s) return;
	char err[512] = "";
	uint64_t seq = snapshot_next_seq(t->snap);
	if (session_snapshot(t->s, t->snap, err, sizeof err) < 0) {
		/* once, not at every interval (a full disk: 170 lines in 25 s for 7 processes);
		 * counted in memtraced_snapshot_failures_total */
		ts->snapshot_failures++;
		if (!t->snap_failing)
			msg_say("PID %d: snapshot failed (tracing goes on; said once until one is "
				"written again): %s", (int)t->pid, err);
		t->snap_failing = true;
		return;
	}
	if (t->snap_failing)
		msg_say("PID %d: snapshots written again (%s/memtrace-%d-%llu.ctf)", (int)t->pid,
			snapshot_dir(t->snap), (int)t->pid, (unsigned long long)seq);
	t->snap_failing = false;
	if (say_it)
		msg_say("PID %d: snapshot %s/memtrace-%d-%llu.ctf written", (int)t->pid,
			snapshot_dir(t->snap), (int)t->pid, (unsigned long long)seq);
}

void target_release_outputs(struct targets *ts, struct target *t, bool remove_output)
{
	if (t->s) exec_prep_unwatch(ts->prep, t->s);
	if (t->s && t->hold) hold_clear_exit_hook(t->hold, t);
	if (t->at_entry && t->hold) hold_set_entry_fn(t->hold, NULL, NULL);
	t->at_entry = false;
	inject_mode_stop(t->sampler, !t->our_child, NULL);
	t->sampler = NULL;
	if (t->s) session_close(t->s);
	t->s = NULL;
	if (t->out_fd >= 0) {
		if (close(t->out_fd) < 0 && !remove_output) {
			msg_error("closing '%s': %s", t->out_path, strerror(errno));
			t->ok = false;
		}
		if (remove_output && t->out_regular) unlink(t->out_path);
	}
	t->out_fd = -1;
	if (t->snap) snapshot_close(t->snap);
	t->snap = NULL;
	if (t->pidfd >= 0) close(t->pidfd);
	t->pidfd = -1;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* Keeps the trace of t for the final list; the trace of a program that exec'd another one
 * without a single sample is not left behind. */
static void note_trace(struct targets *ts, struct target *t, enum finish_why why)
{
	if (ts->o->no_trace || ts->o->probe_floor || t->out_fd < 0) return;
	struct session_totals tot;
	session_get_totals(t->s, &tot);
	if (why == FINISH_EXEC && tot.written_allocs == 0 && t->out_regular) {
		if (unlink(t->out_path) == 0)
			msg_info("PID %d: %s allocated nothing sampled: its trace %s is not kept", (int)t->pid,
				 t->exe[0] ? base_name(t->exe) : "?", t->out_path);
		return;
	}
	if (ts->ntraces == ts->traces_cap) {
		int cap = ts->traces_cap ? 2 * ts->traces_cap : 8;
		struct trace_record *grown = realloc(ts->traces, (size_t)cap * sizeof *grown);
		if (!grown) return;
		ts->traces = grown;
		ts->traces_cap = cap;
	}
	struct trace_record *r = &ts->traces[ts->ntraces++];
	r->pid = t->pid;
	r->records = tot.written_allocs;
	r->samples = tot.nsamples;
	snprintf(r->path, sizeof r->path, "%s", t->out_path);
	/* "redis-server (/usr/bin/redis-check-rdb)" when started by another name, else the file */
	bool renamed = t->name[0] && strcmp(t->name, t->exe) != 0;
	snprintf(r->program, sizeof r->program, "%.255s",
		 renamed ? t->name : t->exe[0] ? base_name(t->exe) : "?");
}

void targets_print_traces(const struct targets *ts)
{
	if (ts->ntraces < 2) return; /* one trace: the summary named it */
	const int most = 32; /* a fork loop's thousands of children: the first ones, then a count */
	for (int i = 0; i < ts->ntraces; i++) {
		if (i == most) {
			msg_say("... and %d traces more (%d in all)", ts->ntraces - most, ts->ntraces);
			break;
		}
		const struct trace_record *r = &ts->traces[i];
		/* an exec renames the trace of the program before: say where it is now */
		msg_say("trace %s: PID %d, %s, %llu records holding %llu samples", r->path, (int)r->pid,
			r->program, (unsigned long long)r->records, (unsigned long long)r->samples);
	}
}

static void say_why(const struct targets *ts, const struct target *t, enum finish_why why)
{
	switch (why) {
	case FINISH_SIGNAL:
		msg_info("%s received, detaching from PID %d", strsignal(ts->stop_signal), (int)t->pid);
		break;
	case FINISH_EXIT: msg_info("PID %d exited", (int)t->pid); break;
	case FINISH_DURATION:
		msg_info("%g s elapsed, detaching from PID %d", ts->o->duration, (int)t->pid);
		break;
	case FINISH_QUIT: msg_info("quit from --top, detaching from PID %d", (int)t->pid); break;
	case FINISH_EXEC:
		msg_info("PID %d exec'd a new program: the trace of %s ends", (int)t->pid,
			 t->exe[0] ? t->exe : "?");
		break;
	case FINISH_ERROR: break;
	case FINISH_RELOAD:
		msg_info("PID %d: its trace ends with the options it was traced with (SIGHUP)",
			 (int)t->pid);
		break;
	case FINISH_PARSER_DIED:
		msg_info("PID %d: its trace ends with the parser; it is traced anew by the next one",
			 (int)t->pid);
		break;
	}
}

void target_finish(struct targets *ts, struct target *t, enum finish_why why,
		   struct snapshotter **keep_snap)
{
	const struct cli_opts *o = ts->o;
	if (!t->active) return;
	t->active = false;
	bool error = why == FINISH_ERROR;
	if (error) msg_error("PID %d: %s", (int)t->pid, session_error(t->s));
	say_why(ts, t, why);
	if (t->hold) hold_clear_exit_hook(t->hold, t); /* the final drain follows */
	exec_prep_unwatch(ts->prep, t->s);
	/* the GOT back before the probes go (frees of sampled blocks are seen until then) */
	/* (-- CMD is under our ptrace hold: its GOT stays redirected, the sampler passes its
	 * calls through once the probes are gone) */
	if (t->at_entry && t->hold) hold_set_entry_fn(t->hold, NULL, NULL); /* waits if it runs */
	t->at_entry = false;
	inject_mode_stop(t->sampler, why != FINISH_EXIT && !t->our_child, t->s);
	t->sampler = NULL;
	if (why == FINISH_EXIT) session_target_gone(t->s);
	t->ok = session_finish(t->s) == 0 && !error;
	if (!t->ok && !error) msg_error("%s", session_error(t->s));
	target_snapshot(ts, t, false); /* the heap at the end, after the final drain and reconcile */
	session_print_summary(t->s, msg_stream(), o->no_trace || o->probe_floor ? NULL : t->out_path);
	note_trace(ts, t, why);
	if (t->snap)
		msg_say("PID %d: %llu snapshots written, %llu failed, in %s", (int)t->pid,
			(unsigned long long)snapshot_written(t->snap),
			(unsigned long long)snapshot_failures(t->snap), snapshot_dir(t->snap));
	if (keep_snap) {
		*keep_snap = t->snap;
		t->snap = NULL;
	}
	if (why != FINISH_EXEC) exec_prep_forget(ts->prep, t->pid); /* the process is done */
	target_release_outputs(ts, t, false);
}

int targets_read_token(const char *path, char *token, size_t len, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		snprintf(err, errlen, "--listen-token %s: %s", path, strerror(errno));
		if (fd >= 0) close(fd);
		return -1;
	}
	const char *bad = !S_ISREG(st.st_mode)				  ? "not a regular file"
			  : (st.st_mode & 077)				  ? "readable by others than its owner (chmod 600)"
			  : st.st_uid != 0 && st.st_uid != geteuid() ? "owned by another user than root"
								  : NULL;
	char buf[4096];
	ssize_t n = bad ? 0 : read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n < 0) bad = strerror(errno);
	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	size_t k = strlen(buf);
	for (size_t i = 0; i < k && !bad; i++)
		if (buf[i] <= ' ' || buf[i] > '~') bad = "its token holds a space or a character that is not printable ASCII";
	if (!bad && (k < 16 || k >= len)) bad = "its token (the first line) must be 16 to 256 characters";
	if (bad) {
		snprintf(err, errlen, "--listen-token %s: %s", path, bad);
		return -1;
	}
	memcpy(token, buf, k + 1);
	return 0;
}
