/* One traced process (see session.h): tracer records -> unwind -> trie + ids -> trace.
 *
 * Two threads: the intake thread drives the tracer (drains the ring buffer every few ms into a
 * bounded queue of copies, reconciles lost frees once a second), so that the kernel's ring
 * buffer does not overflow while the session thread is busy unwinding or symbolizing a library
 * for the first time; the session thread (the caller's) turns the queued records into the
 * trie and the trace. Records keep their ring-buffer order through the queue. */
#include "session.h"
#include "door/door.h"
#include "session_int.h"
#include "common/deadline.h"
#include "common/msg.h"
#include "record_queue.h"
#include "output/snapshot.h"
#include "parser/parser.h"
#include "parser/rstacks.h"
#include "output/trace_out.h"
#include "tracer/tracer.h"
#include "model/trie.h"

#include <errno.h>
#include <pthread.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* The writer's mt_locations_fn: the unwinder may be prepared after the writer. */
int session_locations(void *ctx, uint64_t code, const mt_location **locs)
{
	struct session *s = ctx;
	return s->stacks ? rstacks_locations(s->stacks, code, locs) : -1;
}

uint64_t session_clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The target's mappings, read while it is held at its exit: a library it dlopen'ed just before
 * may be met by the unwinder only after it is gone. */
static char *read_maps(pid_t pid)
{
	FILE *f = door_proc_fopen(pid, "maps");
	if (!f) return NULL;
	size_t len = 0, cap = 0;
	char *buf = NULL, chunk[8192];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && len < (16u << 20)) {
		if (len + n + 1 > cap) {
			cap = (len + n + 1) * 2;
			char *grown = realloc(buf, cap);
			if (!grown) break;
			buf = grown;
		}
		memcpy(buf + len, chunk, n);
		len += n;
		buf[len] = '\0';
	}
	fclose(f);
	return buf;
}

void session_target_exiting(struct session *s, int timeout_ms)
{
	char *maps = read_maps(s->pid);
	char *expected = NULL;
	if (maps && !atomic_compare_exchange_strong(&s->final_maps, &expected, maps)) free(maps);
	struct timespec until = deadline_after_ms(timeout_ms);
	pthread_mutex_lock(&s->drain_lock);
	uint64_t req = atomic_fetch_add(&s->drain_req, 1) + 1;
	session_intake_wake(s);
	while (!s->intake_over && s->drain_done < req &&
	       pthread_cond_timedwait(&s->drain_cond, &s->drain_lock, &until) == 0) {}
	pthread_mutex_unlock(&s->drain_lock);
	/* Python frames are named from the process's memory, which goes with it: the samples
	 * queued are handled first (a few seconds at most) */
	for (int i = 0; i < PY_EXIT_WAIT_MS / 2 && atomic_load(&s->py_active) && !s->failed &&
			atomic_load(&s->allocs_handled) < atomic_load(&s->allocs_queued); i++)
		usleep(2000);
}

/* Session thread: handle the queued records. */
static void handle_items(struct session *s, struct rq_item *list)
{
	/* The process's first allocation is queued: the intake thread prepares its unwinder
	 * now (it looks every ms), and the records must wait for it: up to 15 s (the parser
	 * reads the program's objects; 2 s ran out once in a kernel VM without KVM, and every
	 * stack of the trace was left empty). Only a command memtraced started waits so. */
	for (int i = 0; i < 15000 && s->lazy_stacks && atomic_load(&s->record_seen) &&
			!atomic_load(&s->early_done) && !atomic_load(&s->intake_failed); i++)
		usleep(1000);
	if (s->lazy_stacks && atomic_load(&s->early_done)) { /* the intake thread's unwinder */
		s->lazy_stacks = false;
		if (s->stacks && s->stacks_provisional && s->early_stacks) { /* read too early */
			rstacks_close(s->stacks);
			s->stacks = NULL;
		}
		if (!s->stacks) {
			s->stacks = s->early_stacks;
			s->stacks_provisional = false;
		} else if (s->early_stacks) {
			rstacks_close(s->early_stacks);
		}
		if (!s->stacks && !s->stacks_error[0])
			snprintf(s->stacks_error, sizeof s->stacks_error, "%s", s->early_error);
	}
	char *maps = atomic_load(&s->final_maps);
	if (maps && s->stacks && s->final_maps_given != s->stacks) { /* it keeps a copy */
		rstacks_set_final_maps(s->stacks, maps);
		s->final_maps_given = s->stacks;
	}
	/* taken before asking: an exec before any record of the list is known by now */
	if (list && s->exec_time && !s->exec_ns) s->exec_ns = s->exec_time(s->exec_ctx, s->pid);
	struct rq_item *ahead = list;
	for (struct rq_item *it = list; it; it = it->next) {
		session_unwind_ahead(s, &ahead);
		if (it->is_free) {
			session_on_free(s, &it->f);
		} else {
			session_on_alloc(s, &it->a);
			atomic_fetch_add(&s->allocs_handled, 1);
		}
		if (ahead == it) ahead = it->next;
	}
	if (s->stacks) rstacks_drop_ahead(s->stacks);
	if (!s->error[0] && s->stacks && rstacks_broken(s->stacks)) {
		const char *why = parser_gone();
		snprintf(s->error, sizeof s->error, "the unprivileged parser is gone (%s): the "
			 "trace ends here", why ? why : "it broke the protocol");
		s->failed = true;
	}
	rq_recycle(s->queue, list);
}

static uint64_t total_drops(const struct tracer_stats *st)
{
	return st->drop_ringbuf + st->drop_map_full + st->drop_stack_copy;
}

struct session *session_begin(const struct session_opts *o, char *err, size_t errlen)
{
	struct session *s = calloc(1, sizeof *s);
	if (!s) {
		tracer_close(o->tracer);
		set_err(err, errlen, "out of memory");
		return NULL;
	}
	s->tracer = o->tracer; /* ours from here on, closed by session_close */
	pthread_mutex_init(&s->drain_lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->drain_cond, &ca);
	pthread_mutex_init(&s->wake_lock, NULL);
	pthread_mutex_init(&s->thin_lock, NULL);
	pthread_cond_init(&s->wake_cond, &ca);
	pthread_condattr_destroy(&ca);
	s->pid = o->pid;
	s->floor = o->floor;
	s->out_fd = -1;
	s->mono_ns0 = session_clock_ns(CLOCK_MONOTONIC);
	s->wall_us0 = s->last_us = session_clock_ns(CLOCK_REALTIME) / 1000;
	char e[512] = "";
	if (!o->floor) {
		s->trie = trie_new(o->rate);
		s->thin_off = o->rate >= 1;
		if (!s->trie) {
			set_err(err, errlen, "out of memory");
			goto fail;
		}
		/* A child held before its exec still has our mappings: its unwinder is prepared at
		 * its first sample, when its allocator is mapped (stacks' own automatic refresh is
		 * rate-limited and would lose the first samples). */
		s->lazy_stacks = s->intake_opens_stacks = o->spawned && !o->floor;
		if (!o->spawned) {
			s->stacks = rstacks_open(o->pid, e, sizeof e);
			if (!s->stacks) {
				set_err(err, errlen, "cannot prepare the unwinder for PID %d: %s",
					(int)o->pid, e);
				goto fail;
			}
		}
	}
	session_note_allocator(s, o->sites);
	struct tracer_opts topts = {.rate = o->rate, .stack_bytes = o->stack_bytes,
				    .ringbuf_bytes = o->ring_bytes, .floor = o->floor,
				    .no_mappings = o->no_mappings};
	if (!s->tracer) s->tracer = tracer_open(o->pid, o->sites, &topts, e, sizeof e);
	if (!s->tracer) {
		set_err(err, errlen, "cannot attach to PID %d: %s", (int)o->pid, e);
		goto fail;
	}
	s->probes = tracer_mode_name(tracer_mode(s->tracer));
	/* the BPF countdown samples (not an in-process sampler's probes): it can thin itself */
	s->src_bpf = !o->floor && !s->thin_off && tracer_mode(s->tracer) != TRACER_MODE_USDT;
	session_python_start(s);
	s->last_tick_ns = trace_out_mono_now_ns();
	/* Records are queued from now on; they are handled once the trace is started. */
	/* (a test makes it small, to see the backpressure: tests/test_backpressure.sh) */
	const char *qb = getenv("MEMTRACED_TEST_QUEUE_BYTES");
	s->queue = rq_new(qb && atol(qb) > 0 ? (size_t)atol(qb) : QUEUE_MAX_BYTES);
	if (s->queue) {
		rq_never_wait(s->queue);
		tracer_set_sink(s->tracer, &session_queue_callbacks, s);
	}
	if (!s->queue || pthread_create(&s->intake, NULL, session_intake_main, s) != 0) {
		set_err(err, errlen, "cannot start the intake thread");
		goto fail;
	}
	pthread_setname_np(s->intake, "mt-intake");
	s->intake_started = true;
	return s;
fail:
	session_close(s);
	return NULL;
}

int session_start_trace(struct session *s, const struct session_opts *o, char *err, size_t errlen)
{
	s->no_trace = o->no_trace && !o->floor;
	s->trace_optional = o->trace_optional;
	s->out_fd = o->floor || o->no_trace ? -1 : o->out_fd;
	s->exec_time = o->exec_time;
	s->exec_ctx = o->exec_ctx;
	s->info = (struct trace_out_info){
		.pid = o->pid,
		.rate = o->rate,
		.executable = o->executable,
		.started_as = o->started_as,
		.allocator = o->sites->allocator,
		.format_version = o->format_version,
	};
	if (!o->floor && !o->no_trace) {
		char e[512] = "";
		struct tracer_stats st;
		tracer_get_stats(s->tracer, &st);
		struct trace_out_info info = s->info;
		info.drops = total_drops(&st);
		s->out = trace_out_open(o->out_fd, &info, session_locations, s, e, sizeof e);
		if (!s->out) {
			set_err(err, errlen, "%s", e);
			return -1;
		}
	}
	return 0;
}

struct session *session_open(const struct session_opts *o, char *err, size_t errlen)
{
	struct session *s = session_begin(o, err, errlen);
	if (s && session_start_trace(s, o, err, errlen) < 0) {
		session_close(s);
		return NULL;
	}
	return s;
}

void session_mute(struct session *s)
{
	atomic_store(&s->muted, true);
	tracer_mute(s->tracer);
}

void session_target_gone(struct session *s)
{
	atomic_store(&s->gone, true);
}

void session_set_exec_clock(struct session *s, uint64_t (*fn)(void *ctx, pid_t pid), void *ctx)
{
	s->exec_time = fn;
	s->exec_ctx = ctx;
}

void session_target_started(struct session *s)
{
	(void)s; /* the unwinder is prepared at the first sample (see session_open) */
}

int session_add_sites(struct session *s, const struct alloc_sites *added, char *err, size_t errlen)
{
	if (s->finished || !s->tracer) {
		snprintf(err, errlen, "the session is finished");
		return -1;
	}
	int rc = tracer_attach_sites(s->tracer, added, err, errlen);
	session_refresh_mappings(s);
	return rc;
}

void session_exec_at(struct session *s, uint64_t mono_ns)
{
	if (!s->exec_ns || mono_ns < s->exec_ns) s->exec_ns = mono_ns;
}

void session_refresh_mappings(struct session *s)
{
	if (s->stacks) rstacks_refresh(s->stacks);
}

static void tick(struct session *s)
{
	uint64_t now = trace_out_mono_now_ns();
	if (now - s->last_tick_ns < TICK_NS) return;
	s->last_tick_ns = now;
	if (s->floor) return;
	if (!s->failed && s->out && trace_out_tick(s->out) < 0) session_trace_write_failed(s);
}

int session_poll(struct session *s, int timeout_ms)
{
	if (s->finished) return -1;
	bool closed;
	handle_items(s, rq_take_all(s->queue, timeout_ms, &closed));
	tick(s);
	if (atomic_load(&s->intake_failed) && !s->failed) {
		snprintf(s->error, sizeof s->error, "reading the tracer's records failed");
		return -1;
	}
	return s->failed ? -1 : 0;
}

/* Stops the intake thread after its final drain and reconciliation, handling what it queues. */
static void stop_intake(struct session *s)
{
	if (!s->intake_started) return;
	atomic_store(&s->intake_stop, true);
	session_intake_wake(s);
	bool closed = false;
	while (!closed) handle_items(s, rq_take_all(s->queue, 100, &closed));
	pthread_join(s->intake, NULL);
	s->intake_started = false;
	session_source_thin_off(s);
}

/* An in-process sampler passes on only the calls it samples: below rate 1 the probes do not
 * see the others (at rate 1 it samples, and so passes on, every one). */
static bool calls_uncounted(const struct session *s)
{
	return tracer_mode(s->tracer) == TRACER_MODE_USDT && !(s->trie && trie_rate(s->trie) >= 1);
}

int session_finish(struct session *s)
{
	if (s->finished) return s->failed || s->trace_lost ? -1 : 0;
	s->finished = true;
	/* Probes off first (the target runs on without them), then the final drain and reconcile,
	 * then the counters: no record can arrive after the final drain, and every sample counted
	 * has been read (or counted as a drop). */
	bool muted = atomic_load(&s->muted) || atomic_load(&s->gone);
	trace_out_mark_end(s->out, trace_out_mono_now_ns()); /* detaching takes a while */
	if (!muted) tracer_detach(s->tracer);
	stop_intake(s);
	tracer_get_stats(s->tracer, &s->final_stats);
	s->calls_uncounted = calls_uncounted(s);
	/* muted (its process exec'd) or gone: nothing more comes, the slow detach (~0.5 s of
	 * uprobe unregistering) goes to the background */
	if (muted) tracer_close_later(s->tracer);
	else tracer_close(s->tracer);
	s->tracer = NULL;
	if (s->out) {
		/* the file says how many samples were lost, as of its end */
		trace_out_set_drops(s->out, total_drops(&s->final_stats));
		/* keep the counts the summary needs before the writer goes away */
		struct trace_out *out = s->out;
		s->written_allocs = trace_out_allocs(out);
		s->written_collects = trace_out_collects(out);
		char e[256] = "";
		int rc = trace_out_close(out, e, sizeof e);
		s->out = NULL;
		if (rc < 0 && !s->failed) {
			snprintf(s->error, sizeof s->error, "%s", e);
			s->failed = true;
		}
	}
	return s->failed || s->trace_lost ? -1 : 0;
}

void session_get_totals(struct session *s, struct session_totals *t)
{
	struct tracer_stats st = s->final_stats;
	if (s->tracer) tracer_get_stats(s->tracer, &st);
	if (s->tracer) s->calls_uncounted = calls_uncounted(s);
	memset(t, 0, sizeof *t);
	t->calls_counted = !s->calls_uncounted;
	t->src_calls_known = s->src_calls_known;
	t->src_calls = s->src_calls;
	t->alloc_calls = t->calls_counted ? st.alloc_calls : 0;
	t->free_calls = t->calls_counted ? st.free_calls : 0;
	t->samples = st.samples;
	t->drop_ringbuf = st.drop_ringbuf;
	t->drop_queue = st.drop_queue;
	t->thinned = atomic_load(&s->thinned);
	unsigned src_k = atomic_load(&s->src_k);
	t->src_thin = src_k > 1 ? src_k : 1;
	t->src_thin_max = atomic_load(&s->src_k_max);
	t->thin_max = atomic_load(&s->thin_max);
	t->drop_busy = st.drop_busy;
	t->stack_recopied = st.stack_recopied;
	t->drop_map_full = st.drop_map_full;
	t->drop_stack_copy = st.drop_stack_copy;
	t->reconciled_frees = st.reconciled_frees;
	t->map_calls = st.map_calls;
	t->record_bytes = st.record_bytes;
	t->max_record_bytes = st.max_record_bytes;
	t->mappings_traced = s->mappings_traced;
	t->allocator_mappings = s->allocator_mappings;
	t->other_pid = s->other_pid;
	t->after_exec = s->after_exec;
	t->written_allocs = s->out ? trace_out_allocs(s->out) : s->no_trace ? s->next_id
							      : s->written_allocs;
	if (s->trace_lost) t->written_allocs = s->next_id; /* samples recorded in all */
	t->written_collects = s->out ? trace_out_collects(s->out) : s->written_collects;
	if (s->trie) {
		t->live_blocks = trie_live_count(s->trie);
		t->contexts = trie_node_count(s->trie) - 1;
		t->stacks = trie_stack_count(s->trie);
		t->nsamples = trie_sample_count(s->trie);
	}
	if (s->stacks) {
		struct stacks_stats ss;
		rstacks_get_stats(s->stacks, &ss);
		t->unwind_truncated = ss.truncated;
		t->unwinds = ss.samples;
		t->unwinds_remembered = ss.remembered;
		t->unwind_errors = ss.unwind_errors;
		t->unnamed_frames = ss.unnamed_codes;
		t->jit_frames = ss.jit_frames;
		t->jit_named = ss.jit_named;
		t->capped_stacks = ss.capped_stacks;
		t->capped_objects = ss.capped_objects;
		t->capped_frames = ss.capped_codes;
		t->over_cap_frames = ss.over_cap_frames;
		t->py_over_budget = ss.py_over_budget;
		snprintf(t->capped_note, sizeof t->capped_note, "%s", ss.capped_note);
	}
	struct stat sb;
	if (s->out) t->trace_bytes = trace_out_bytes(s->out);
	else if ((!s->no_trace || s->trace_lost) && s->out_fd >= 0 && fstat(s->out_fd, &sb) == 0) t->trace_bytes = (uint64_t)sb.st_size;
}

/* What its Python frames came to, or why there are none. */
static void print_python(struct session *s, FILE *out)
{
	const struct py_found *p = &s->py;
	if (!p->found) return;
	fprintf(out, "; CPython %u.%u (%s", p->version >> 8, p->version & 0xff, p->object);
	if (!p->usable) {
		fprintf(out, "): native frames only, %s", p->note);
		return;
	}
	struct stacks_stats ss = {0};
	if (s->stacks) rstacks_get_stats(s->stacks, &ss);
	fprintf(out, ", layout from %s): %llu samples with Python frames (%llu frames)",
		p->source, (unsigned long long)ss.py_samples, (unsigned long long)ss.py_frames);
	if (ss.py_arenas) fprintf(out, ", %llu of the interpreter's arenas charged to the Python "
				  "line that needed them", (unsigned long long)ss.py_arenas);
	if (ss.py_cut) fprintf(out, ", %llu cut at %d frames", (unsigned long long)ss.py_cut,
			       MT_PY_MAX_FRAMES);
	if (ss.py_no_thread) fprintf(out, ", %llu in threads without a Python thread state",
				     (unsigned long long)ss.py_no_thread);
	if (ss.py_failed) fprintf(out, ", %llu walks failed (a read of the interpreter)",
				  (unsigned long long)ss.py_failed);
	if (ss.py_gone) fprintf(out, ", %llu frames of code objects gone before they were named",
				(unsigned long long)ss.py_gone);
}

void session_print_summary(struct session *s, FILE *out, const char *trace_path)
{
	struct session_totals t;
	session_get_totals(s, &t);
	/* calls seen by the probes (a realloc of a block counts as an allocation and a free);
	 * sampled calls; allocation records (one per sampled block) and the samples they hold
	 * (sum of nsamples, what memtrace-report counts); distinct stacks and trie nodes */
	if (t.calls_counted)
		fprintf(out, "memtraced: PID %d: %llu allocations and %llu frees seen, %llu sampled",
			(int)s->pid, (unsigned long long)t.alloc_calls, (unsigned long long)t.free_calls,
			(unsigned long long)t.samples);
	else /* only sampled calls reach us: saying how many calls there were would be a guess */
		fprintf(out, "memtraced: PID %d: allocation calls not counted (the in-process sampler "
			"passes on only sampled ones), %llu sampled", (int)s->pid,
			(unsigned long long)t.samples);
	if (t.src_calls_known && t.calls_counted) { /* rate 1: the sampler counted every call */
		fprintf(out, " (the in-process sampler counted %llu allocation calls itself",
			(unsigned long long)t.src_calls);
		if (t.src_calls > t.alloc_calls)
			fprintf(out, ": %llu more than reached the probes, whose count is short by as "
				"many", (unsigned long long)(t.src_calls - t.alloc_calls));
		fprintf(out, ")");
	}
	if (s->floor)
		fprintf(out, " (probe floor: no trace written)");
	else
		fprintf(out, ", %llu records %s (%llu freed, %llu live) holding %llu samples, "
			"%llu distinct stacks (%llu trie nodes)",
			(unsigned long long)t.written_allocs, s->no_trace ? "kept" : "written",
			(unsigned long long)(s->no_trace ? t.written_allocs - t.live_blocks
							 : t.written_collects),
			(unsigned long long)t.live_blocks, (unsigned long long)t.nsamples,
			(unsigned long long)t.stacks, (unsigned long long)t.contexts);
	fprintf(out, "; dropped: %llu ring buffer, %llu live map full, %llu stack copy",
		(unsigned long long)t.drop_ringbuf, (unsigned long long)t.drop_map_full,
		(unsigned long long)t.drop_stack_copy);
	if (t.drop_queue || t.drop_busy) /* the rest: the BPF ring buffer itself was full */
		fprintf(out, " (of the ring buffer's: %llu the session's record queue full, %llu the "
			"CPU's record buffer busy)", (unsigned long long)t.drop_queue,
			(unsigned long long)t.drop_busy);
	if (t.thinned)
		fprintf(out, "; %llu samples thinned while the pipeline fell behind (1 kept in up to "
			"%u, its weight raised as much: estimates unbiased)", (unsigned long long)t.thinned,
			t.thin_max);
	if (t.src_thin_max > 1)
		fprintf(out, "; %s rate lowered up to %u-fold while the pipeline fell behind (1 "
			"sample kept in so many, its weight raised as much)",
			s->src_bpf ? "the BPF probes'" : "the in-process sampler's", t.src_thin_max);
	fprintf(out, "; %llu frees reconciled", (unsigned long long)t.reconciled_frees);
	if (t.stack_recopied)
		fprintf(out, "; %llu stacks copied in pieces (the kernel's long copy read zeros "
			"where the stack has words: docs/kernels.md)", (unsigned long long)t.stack_recopied);
	if (t.samples && t.drop_ringbuf)
		fprintf(out, "; records of %llu bytes on average, %llu at most (--ring-size, "
			"--stack-bytes)", (unsigned long long)(t.record_bytes / (t.samples ? t.samples : 1)),
			(unsigned long long)t.max_record_bytes);
	if (t.map_calls)
		fprintf(out, "; anonymous mappings: %llu made, %llu sampled ones traced, %llu sampled "
			"ones left out as the allocator's own", (unsigned long long)t.map_calls,
			(unsigned long long)t.mappings_traced, (unsigned long long)t.allocator_mappings);
	if (t.unwind_truncated || t.unwind_errors)
		fprintf(out, "; stacks: %llu truncated (deeper than the copy), %llu ended early (the "
			"unwinder stopped before an entry point)",
			(unsigned long long)t.unwind_truncated, (unsigned long long)t.unwind_errors);
	if (t.unwinds_remembered)
		fprintf(out, "; %llu of %llu unwinds remembered (the same stack words as an earlier "
			"sample's)", (unsigned long long)t.unwinds_remembered, (unsigned long long)t.unwinds);
	if (t.unnamed_frames)
		fprintf(out, "; %llu distinct frames without a name (no symbol or debug info: install "
			"the debug files, or set DEBUGINFOD_URLS)", (unsigned long long)t.unnamed_frames);
	if (t.jit_frames)
		fprintf(out, "; JIT code at %llu distinct pcs, %llu of them named from the program's "
			"perf map (/tmp/perf-PID.map)", (unsigned long long)t.jit_frames,
			(unsigned long long)t.jit_named);
	if (t.capped_stacks)
		fprintf(out, "; %llu stacks cut at the frame cap", (unsigned long long)t.capped_stacks);
	if (t.capped_objects)
		fprintf(out, "; %llu objects over the debug-info, symbol or time cap: %s (%llu distinct "
			"frames named from symbols or object+offset)", (unsigned long long)t.capped_objects,
			t.capped_note[0] ? t.capped_note : "?", (unsigned long long)t.capped_frames);
	if (t.over_cap_frames)
		fprintf(out, "; %llu frames named \"[over the cap of distinct frames]\" (the parser "
			"keeps at most %llu distinct frames per process, %llu in all)",
			(unsigned long long)t.over_cap_frames, (unsigned long long)STACKS_CODES_PER_PROCESS,
			(unsigned long long)STACKS_ALL_CODES_CAP);
	if (t.py_over_budget)
		fprintf(out, "; %llu Python frames named \"[over the Python names' memory budget]\" "
			"(%zu MiB per process, %zu MiB in all)", (unsigned long long)t.py_over_budget,
			PY_BUDGET_PROCESS >> 20, PY_BUDGET_ALL >> 20);
	print_python(s, out);
	if (t.other_pid) fprintf(out, "; %llu records of other processes ignored",
				 (unsigned long long)t.other_pid);
	if (!s->stacks && s->stacks_error[0])
		fprintf(out, "; no stacks: %s", s->stacks_error);
	if (t.after_exec) fprintf(out, "; %llu records after the exec ignored (the new program's)",
				  (unsigned long long)t.after_exec);
	if (s->probes) fprintf(out, "; probes: %s", s->probes);
	if (s->trace_lost && trace_path)
		fprintf(out, "; trace %s cut short by a failed write (%llu bytes)", trace_path,
			(unsigned long long)t.trace_bytes);
	else if (!s->floor && !s->no_trace && trace_path)
		fprintf(out, "; trace %s (%llu bytes)", trace_path, (unsigned long long)t.trace_bytes);
	fputc('\n', out);
}

int session_snapshot(struct session *s, struct snapshotter *snap, char *err, size_t errlen)
{
	if (!s->trie) {
		snprintf(err, errlen, "no heap to snapshot (probe floor)");
		return -1;
	}
	struct tracer_stats st = s->final_stats;
	if (s->tracer) tracer_get_stats(s->tracer, &st);
	struct trace_out_info info = s->info;
	info.drops = total_drops(&st);
	char host[256], context[512];
	mt_trace_info ti;
	uint64_t now_us = session_clock_ns(CLOCK_REALTIME) / 1000;
	trace_out_fill_info(&info, now_us, &ti, host, sizeof host, context, sizeof context);
	return snapshot_write(snap, s->trie, &ti, session_locations, s, now_us, err, errlen);
}

const char *session_error(const struct session *s) { return s->error; }
struct trie *session_trie(struct session *s) { return s->trie; }
double session_ring_fill(struct session *s) { return s->tracer ? tracer_ring_fill(s->tracer) : -1; }

void session_close(struct session *s)
{
	if (!s) return;
	if (s->intake_started) {
		/* not finished: stop the thread without writing anything more */
		s->failed = true;
		stop_intake(s);
	}
	if (s->tracer) tracer_close(s->tracer);
	rq_destroy(s->queue);
	if (s->out) trace_out_close(s->out, NULL, 0);
	if (s->stacks) rstacks_close(s->stacks);
	if (s->lazy_stacks && atomic_load(&s->early_done) && s->early_stacks)
		rstacks_close(s->early_stacks); /* never handed over */
	trie_free(s->trie);
	free(atomic_load(&s->final_maps));
	mappings_free(&s->maps);
	pthread_mutex_destroy(&s->drain_lock);
	pthread_cond_destroy(&s->drain_cond);
	pthread_mutex_destroy(&s->wake_lock);
	pthread_mutex_destroy(&s->thin_lock);
	pthread_cond_destroy(&s->wake_cond);
	free(s);
}
