/* What each record does to a session's trie and trace (see session.h, session_int.h):
 * allocations, frees, and anonymous memory mappings, whose pieces an unmap may leave. */
#include "session_int.h"

#include <stdio.h>
#include <string.h>

#include "common/msg.h"
#include "model/trie.h"
#include "parser/rstacks.h"

/* Trace time (wall-clock us) of a CLOCK_MONOTONIC timestamp: the trace's own clock, or with
 * no trace one of ours that works the same way (never goes backwards). */
static uint64_t time_of(struct session *s, uint64_t mono_ns)
{
	if (s->out) return trace_out_time_us(s->out, mono_ns);
	uint64_t us = mono_ns > s->mono_ns0 ? s->wall_us0 + (mono_ns - s->mono_ns0) / 1000 : s->wall_us0;
	if (us < s->last_us) us = s->last_us;
	s->last_us = us;
	return us;
}

/* A write to the trace failed (disk full...). Without snapshots the session stops (the trace is
 * cut back to its last whole packet when it is closed). With snapshots only the trace stops:
 * it is closed at once (cut back the same way), that is reported once, and the trie goes on
 * with ids from a counter, so later snapshots work when space frees. */
void session_trace_write_failed(struct session *s)
{
	snprintf(s->error, sizeof s->error, "writing the trace failed: %s", trace_out_error(s->out));
	if (!s->trace_optional) {
		s->failed = true;
		return;
	}
	s->written_allocs = trace_out_allocs(s->out);
	s->written_collects = trace_out_collects(s->out);
	s->next_id = s->written_allocs;
	s->last_us = trace_out_time_us(s->out, 0); /* our clock goes on from the trace's */
	trace_out_close(s->out, NULL, 0);
	s->out = NULL;
	s->no_trace = true;
	s->trace_lost = true;
	msg_say("PID %d: %s; the trace stops here (it ends with its last whole packet), tracing and "
		"snapshots go on", (int)s->pid, s->error);
}

/* Tells the tracer where the thread's stack ends, when that changed (or forgets it when a copy
 * was cut short): its next copies are no longer than its stack. */
static void note_stack_end(struct session *s, uint32_t tid)
{
	uint64_t end;
	bool truncated;
	if (!s->stacks || !s->tracer) return;
	rstacks_last_extent(s->stacks, &end, &truncated);
	struct stack_end_hint *h = &s->stack_end_hints[tid % STACK_END_HINTS];
	if (truncated) {
		if (h->tid == tid && h->end) tracer_set_stack_end(s->tracer, tid, 0);
		h->tid = tid;
		h->end = 0;
		return;
	}
	/* only ever raised: an unwind that went off the frames (no CFI, a frame-pointer guess)
	 * can end early and look complete; the true end is the highest one seen */
	if (!end || (h->tid == tid && h->end >= end)) return;
	tracer_set_stack_end(s->tracer, tid, end);
	h->tid = tid;
	h->end = end;
}

/* ---- anonymous mappings ---- */

void session_note_allocator(struct session *s, const struct alloc_sites *sites)
{
	for (int i = 0; sites && i < sites->n && s->nalloc_objs < MAX_ALLOCATOR_OBJECTS; i++) {
		struct stat st;
		if (stat(sites->sites[i].path, &st) < 0) continue;
		bool known = false;
		for (int k = 0; k < s->nalloc_objs && !known; k++)
			known = s->alloc_dev[k] == st.st_dev && s->alloc_ino[k] == st.st_ino;
		if (known) continue;
		s->alloc_dev[s->nalloc_objs] = st.st_dev;
		s->alloc_ino[s->nalloc_objs++] = st.st_ino;
	}
}

/* The rule for mappings an allocator makes for its own blocks (and memtraced's sampler) (glibc's mmap of a large malloc,
 * jemalloc's extents), whose blocks the probes count already: a mapping whose system call was
 * made from code in an object that holds a probed allocation function (the caller of the mmap
 * function, frame 1, lies in one) is the allocator's, and left out. So are the other mappings
 * such an object makes for itself (glibc's thread stacks); a program with its allocator linked
 * in (a static one) has all of its own mappings left out by this rule. */
static bool mapping_is_allocators(struct session *s, int nframes)
{
	/* our in-process sampler's own table (--inject) is not the program's either */
	for (int i = 0; i < 2 && i < nframes; i++) {
		const char *f = rstacks_last_frame_file(s->stacks, i);
		const char *base = f ? strrchr(f, '/') : NULL;
		if (base && strcmp(base + 1, "libmemtraced_sampler.so") == 0) return true;
	}
	const char *file = nframes > 1 ? rstacks_last_frame_file(s->stacks, 1) : NULL;
	struct stat st;
	if (!file || stat(file, &st) < 0) return false;
	for (int k = 0; k < s->nalloc_objs; k++)
		if (s->alloc_dev[k] == st.st_dev && s->alloc_ino[k] == st.st_ino) return true;
	return false;
}

static double map_uniform(void *ctx)
{
	struct session *s = ctx;
	uint64_t x = s->map_rng ? s->map_rng : 0x9e3779b97f4a7c15ull;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	s->map_rng = x;
	return (double)(x >> 11) / 9007199254740992.0;
}

static void map_gone(void *ctx, const struct mapping *mp)
{
	struct session *s = ctx;
	struct trie_block b;
	if (!trie_block_free(s->trie, mp->key, &b)) return;
	if (s->out && trace_out_collect(s->out, s->unmap_time_ns, b.id) < 0) session_trace_write_failed(s);
}

/* A part of an unmapped mapping that stays mapped: a new block of the same stack, with the
 * share of the sample points that fall in it. */
static void map_keep(void *ctx, const struct mapping *was, struct mapping *piece)
{
	struct session *s = ctx;
	piece->nsamples = mappings_piece_samples(was->nsamples, piece->len, was->len, map_uniform, s);
	if (!piece->nsamples || s->failed) return;
	const struct trie_node *nd = trie_node(s->trie, piece->node);
	size_t depth = nd ? nd->depth : 0;
	if (depth > MAX_CODES) depth = MAX_CODES;
	for (uint32_t k = piece->node; depth && k != TRIE_NONE; ) { /* outermost first */
		const struct trie_node *x = trie_node(s->trie, k);
		if (!x || !x->depth) break;
		s->bt[x->depth - 1] = x->code;
		k = x->parent;
	}
	piece->key = (1ull << 63) | ++s->map_key;
	int64_t id = s->out ? trace_out_alloc(s->out, s->unmap_time_ns, piece->len, piece->nsamples,
					      s->bt, depth)
			    : (int64_t)s->next_id++;
	if (id < 0) {
		session_trace_write_failed(s);
		if (s->failed) return;
		id = (int64_t)s->next_id++;
	}
	if (trie_block_alloc(s->trie, piece->key, (uint64_t)id, piece->node, piece->len,
			     piece->nsamples) == 0)
		trie_block_set_time(s->trie, piece->key, time_of(s, s->unmap_time_ns));
}

static enum stacks_start start_of(const struct tracer_alloc *a)
{
	return a->origin == TRACER_FROM_SAMPLER ? STACKS_IN_SAMPLER
	     : a->origin == TRACER_FROM_MAPPING ? STACKS_AT_SYSCALL : STACKS_AT_ENTRY;
}

/* Would session_on_alloc unwind it now (with the unwinder there is now)? */
static bool will_unwind(const struct session *s, const struct tracer_alloc *a)
{
	return !s->failed && !s->floor && (s->out || s->no_trace) && a->pid == (uint32_t)s->pid &&
	       !(s->exec_ns && a->time_ns > s->exec_ns) && s->stacks;
}

void session_python_start(struct session *s)
{
	if (s->py_started || !s->stacks || s->stacks_provisional || !s->tracer) return;
	s->py_started = true;
	s->py = *rstacks_python(s->stacks);
	if (s->py.usable && tracer_set_python(s->tracer, &s->py.layout) < 0) {
		s->py.usable = false;
		snprintf(s->py.note, sizeof s->py.note, "the BPF program's layout map could not be set");
	}
	atomic_store(&s->py_active, s->py.usable);
}

static struct rstacks_py py_of(const struct tracer_alloc *a)
{
	return (struct rstacks_py){.frames = a->py, .n = a->py ? a->py_n : 0, .status = a->py_status,
				   .codes = a->py_codes, .ncodes = a->py_codes ? a->py_ncodes : 0};
}

void session_unwind_ahead(struct session *s, struct rq_item **next)
{
	/* in bursts: sent one at a time, each would wake a parser that has caught up */
	if (s->stacks && !rstacks_ahead_low(s->stacks)) return;
	bool sent = false;
	for (; *next; *next = (*next)->next) {
		const struct rq_item *it = *next;
		if (it->is_free || !will_unwind(s, &it->a)) continue;
		const struct tracer_alloc *a = &it->a;
		struct rstacks_py py = py_of(a);
		if (!rstacks_prefetch(s->stacks, a, (pid_t)a->tid, a->regs, a->stack, a->stack_len,
				      &py, start_of(a), a->origin == TRACER_FROM_MAPPING))
			break;
		sent = true;
	}
	if (sent) rstacks_ahead_sent(s->stacks);
}

void session_on_alloc(struct session *s, const struct tracer_alloc *a)
{
	if (s->failed || s->floor || (!s->out && !s->no_trace)) return;
	if (a->pid != (uint32_t)s->pid) { /* a forked child: never mix it into this trace */
		s->other_pid++;
		return;
	}
	if (s->exec_ns && a->time_ns > s->exec_ns) { /* the new program's: its own session */
		s->after_exec++;
		return;
	}
	/* A just-started program's unwinder is the intake thread's, prepared at its first
	 * allocation record (see session.c); a mapping before it (the program's own, or ld.so's
	 * while it maps the libraries) gets one of the session thread's, read now, later. */
	if (!s->stacks && (!s->lazy_stacks || a->origin == TRACER_FROM_MAPPING)) {
		char e[256];
		s->stacks = rstacks_open(s->pid, e, sizeof e);
		s->stacks_provisional = s->lazy_stacks; /* the intake thread's replaces it */
		if (!s->stacks && !s->stacks_error[0])
			snprintf(s->stacks_error, sizeof s->stacks_error, "%s", e);
	}
	session_python_start(s);
	struct rstacks_py py = py_of(a);
	int n = s->stacks ? rstacks_unwind_from(s->stacks, a, (pid_t)a->tid, a->regs, a->stack,
						a->stack_len, &py, start_of(a),
						a->origin == TRACER_FROM_MAPPING, s->codes, MAX_CODES) : 0;
	if (n < 0) { /* the parser is gone: the session ends (handle_items says why) */
		s->failed = true;
		return;
	}
	/* (not from a mapping's stack: ld.so's first mappings are unwound through its
	 * bootstrap code, whose frames can end early and look complete) */
	if (a->origin != TRACER_FROM_MAPPING) note_stack_end(s, a->tid);
	if (a->origin == TRACER_FROM_MAPPING && mapping_is_allocators(s, n)) {
		s->allocator_mappings++;
		return;
	}
	/* stacks give innermost first; memtrace backtraces and the trie are outermost first */
	for (int i = 0; i < n; i++) s->bt[i] = s->codes[n - 1 - i];
	uint32_t node = trie_intern(s->trie, s->bt, (size_t)n);
	if (node == TRIE_NONE) node = TRIE_ROOT; /* out of memory: still account the block */
	/* the block's time for snapshots: the time the trace gives it (same clamped clock) */
	uint64_t time_us = time_of(s, a->time_ns);
	int64_t id = s->out ? trace_out_alloc(s->out, a->time_ns, a->size, a->nsamples, s->bt,
					      (size_t)n)
			    : (int64_t)s->next_id++;
	if (id < 0) {
		session_trace_write_failed(s);
		if (s->failed) return;
		id = (int64_t)s->next_id++; /* the trace stopped, the trie goes on */
	}
	if (trie_block_alloc(s->trie, a->seq, (uint64_t)id, node, a->size, a->nsamples) == 0)
		trie_block_set_time(s->trie, a->seq, time_us);
	if (a->origin == TRACER_FROM_MAPPING) {
		struct mapping mp = {.addr = a->addr, .len = a->size, .key = a->seq,
				     .nsamples = a->nsamples, .node = node};
		s->mappings_traced++;
		s->unmap_time_ns = a->time_ns;
		mappings_unmap(&s->maps, mp.addr, mp.len, map_gone, map_keep, s); /* stale (lost unmap) */
		if (mappings_add(&s->maps, &mp) < 0) s->map_lost++;
	}
}

void session_on_free(struct session *s, const struct tracer_free *f)
{
	if (f->unmap) {
		if (s->failed || s->floor || (!s->out && !s->no_trace)) return;
		if (s->exec_ns && f->time_ns > s->exec_ns) return;
		s->unmap_time_ns = f->time_ns;
		mappings_unmap(&s->maps, f->addr, f->len, map_gone, map_keep, s);
		return;
	}
	if (s->failed || s->floor || (!s->out && !s->no_trace)) return;
	if (s->exec_ns && f->time_ns > s->exec_ns) { /* the old heap is gone with its image */
		s->after_exec++;
		return;
	}
	struct trie_block b;
	if (!trie_block_free(s->trie, f->seq, &b)) return; /* not a block of ours (or already freed) */
	if (s->out && trace_out_collect(s->out, f->time_ns, b.id) < 0) session_trace_write_failed(s);
}

