/* The intake thread of a session (session_int.h): it drives the tracer for the session
 * thread. Records reach the session's queue through the tracer's sink, on the thread that
 * reads the ring buffer for every traced process; this thread answers drain requests,
 * prepares a just-started program's unwinder at its first record, and reconciles lost frees
 * once a second, and sleeps in between (an idle process costs nothing: issue 36). */
#include "session_int.h"
#include "common/deadline.h"
#include "parser/rstacks.h"
#include "output/trace_out.h"
#include "record_queue.h"
#include "tracer/tracer.h"
#include "sampler_thin.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <time.h>

/* Intake thread: the unwinder of a just-started program, once, handed to the session thread
 * through early_done. */
static void open_early_stacks(struct session *s)
{
	if (!s->intake_opens_stacks || s->early_tried) return;
	s->early_tried = true;
	s->early_stacks = rstacks_open(s->pid, s->early_error, sizeof s->early_error);
	/* Python frames from now on, not from when the session thread takes this unwinder over
	 * (a just-started Python program runs its first functions meanwhile) */
	const struct py_found *py = s->early_stacks ? rstacks_python(s->early_stacks) : NULL;
	if (py && py->usable) tracer_set_python(s->tracer, &py->layout);
	atomic_store(&s->early_done, true);
}

/* Backpressure (issue 37). When the session thread falls behind (a program at full speed
 * under --inject, a busy machine), the queue fills, and a full queue dropped samples: a sixth
 * of node's at rate 1e-3. Instead, past half of the queue each sample is kept with
 * probability 1/k and its sample count multiplied by k: every estimate (bytes allocated and
 * live, per call site) stays unbiased, with more variance, and the session thread's work
 * (unwinding most) drops k-fold. k doubles each time the room left halves: 2 from a half, 4
 * from 3/4, 8 from 7/8..., up to THIN_MAX when full. A kept record goes in past the bound
 * (rq_push_alloc_over): found the queue full, it was dropped with the weight of the k-1 left
 * out for it (two thirds of the weight lost so on a busy machine). */
static unsigned thin_factor(unsigned fill_permille)
{
	unsigned room = fill_permille >= 1000 ? 0 : 1000 - fill_permille, k = 1;
	for (unsigned from = 1000 - THIN_FROM_PERMILLE; room < from && k < THIN_MAX; from /= 2) k *= 2;
	return k;
}

static uint64_t thin_draw(struct session *s)
{
	uint64_t x = atomic_fetch_add(&s->thin_draws, 1) + 0x9e3779b97f4a7c15ULL; /* splitmix64 */
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* Stratified: the arrivals go in blocks of k (k as the block began), and in each block one,
 * drawn at random, is kept: each is kept with probability 1/k (weight k: unbiased), exactly
 * one in k is (the totals vary little: one kept in a coin toss each varied by 15% at k 512),
 * and no allocation pattern aliases with it. Returns the kept one's k, or 0: thinned. */
static unsigned thin_keeps(struct session *s, unsigned k)
{
	pthread_mutex_lock(&s->thin_lock);
	if (!s->thin_block_left) {
		s->thin_block_k = k;
		s->thin_block_left = k;
		s->thin_pick = k > 1 ? (unsigned)(thin_draw(s) % k) : 0;
	}
	unsigned bk = s->thin_block_k, at = bk - s->thin_block_left--;
	pthread_mutex_unlock(&s->thin_lock);
	return at == s->thin_pick ? bk : 0;
}

#define SRC_RAISE_NS (100ull * 1000000) /* a raise shows in the queue's fill within this */
#define SRC_LOWER_NS (1000ull * 1000000) /* caught up this long: the factor halves */

/* k into the sampler's struct memtraced_sampler_thin at addr (sampler.h), only if its magic
 * is there: a process that has just exec'd (records still come in) has another program at
 * that address, which must never be written. */
static bool write_source_thin(struct session *s, uint64_t addr, unsigned k)
{
	uint64_t magic = 0;
	struct iovec local = {.iov_base = &magic, .iov_len = sizeof magic};
	struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = sizeof magic};
	if (process_vm_readv(s->pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof magic ||
	    magic != MEMTRACED_SAMPLER_THIN_MAGIC)
		return false;
	uint32_t v = k;
	local = (struct iovec){.iov_base = &v, .iov_len = sizeof v};
	remote = (struct iovec){.iov_base = (void *)(uintptr_t)(addr + 8), .iov_len = sizeof v};
	return process_vm_writev(s->pid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof v;
}

/* k to the source: the in-process sampler's word, else the BPF side's slot. */
static bool source_write(struct session *s, unsigned k)
{
	uint64_t addr = atomic_load(&s->src_thin_addr);
	if (addr) {
		if (write_source_thin(s, addr, k)) return true;
		atomic_store(&s->src_thin_addr, 0); /* gone, or not ours to write: the sink thins */
		return false;
	}
	if (!s->src_bpf) return false;
	tracer_set_thin(s->tracer, k);
	return true;
}

/* Thinning at the source: the in-process sampler (or, with uprobes, the BPF countdown) keeps 1
 * in src_k of its samples (weights raised as much, unbiased as the sink's), so the probes, the
 * BPF copies and the ring carry k-fold less. While the queue is past half (the sink thins) and
 * not draining (as full as at the last change, SRC_RAISE_NS ago at least: the queue must first
 * show a raise) the factor doubles, up to SRC_MAX; once the sink has had nothing to thin for
 * SRC_LOWER_NS it halves. Doubling, not multiplying by the sink's factor: both thin the same
 * samples, and a factor higher than needed only adds variance (k 1024 at the source and 512 at
 * the sink left a handful of samples of a 2 s run, its estimate 4% of the truth). */
#define SRC_MAX 256

static void source_thin(struct session *s, unsigned f, unsigned fill)
{
	unsigned k = atomic_load(&s->src_k);
	if (!k) k = 1;
	if ((f <= 1 && k <= 1) || atomic_load(&s->src_off)) return;
	if (!s->src_bpf && !atomic_load(&s->src_thin_addr)) return;
	uint64_t now = trace_out_mono_now_ns();
	unsigned want = k;
	if (f > 1 && now - s->src_changed_ns >= SRC_RAISE_NS && (k == 1 || fill >= s->src_fill))
		want = k * 2 > SRC_MAX ? SRC_MAX : k * 2;
	else if (f > 1)
		s->src_calm_ns = 0;
	else if (k > 1) { /* nothing to thin at the sink: for SRC_LOWER_NS, the factor halves */
		if (!s->src_calm_ns) s->src_calm_ns = now;
		else if (now - s->src_calm_ns >= SRC_LOWER_NS) want = k / 2, s->src_calm_ns = now;
	}
	if (want == k || !source_write(s, want)) return;
	atomic_store(&s->src_k, want);
	s->src_changed_ns = now;
	s->src_fill = fill;
	if (want > atomic_load(&s->src_k_max)) atomic_store(&s->src_k_max, want);
}

void session_set_source_calls(struct session *s, uint64_t calls)
{
	if (!s) return;
	s->src_calls = calls;
	s->src_calls_known = true;
}

void session_set_source_thin(struct session *s, uint64_t addr)
{
	if (s && !s->thin_off) atomic_store(&s->src_thin_addr, addr);
}

/* The session ends: the source is left as it was found (not thinning). The sink's thread
 * stops changing it first (src_off); one already past that check may still write once: the
 * sampler's next start and the BPF slot's next owner set 1 again. */
void session_source_thin_off(struct session *s)
{
	atomic_store(&s->src_off, true);
	if (atomic_load(&s->src_k) > 1) source_write(s, 1);
	atomic_store(&s->src_thin_addr, 0);
	atomic_store(&s->src_k, 1);
}

/* The tracer's sink, on the thread that reads the ring buffer for every traced process:
 * copy the records into the queue, in ring-buffer order, never waiting (a full queue drops
 * the record, which the tracer counts). */
static int queue_alloc(void *ctx, const struct tracer_alloc *a)
{
	struct session *s = ctx;
	/* not at a mapping: ld.so maps memory while it still maps the libraries, whose
	 * mappings read then would mislead the unwinder. The intake thread prepares it. */
	if (a->pid == (uint32_t)s->pid && a->origin != TRACER_FROM_MAPPING &&
	    !atomic_load(&s->record_seen)) {
		atomic_store(&s->record_seen, true);
		if (s->intake_opens_stacks) session_intake_wake(s); /* it prepares the unwinder now */
	}
	atomic_fetch_add(&s->records_in, 1);
	struct tracer_alloc kept;
	bool over = false;
	if (a->origin != TRACER_FROM_MAPPING && !s->thin_off) { /* (a mapping's unmaps need it whole) */
		unsigned fill = rq_fill_permille(s->queue), f = thin_factor(fill);
		source_thin(s, f, fill);
		unsigned k = thin_keeps(s, f);
		if (!k) {
			atomic_fetch_add(&s->thinned, 1);
			return 1; /* thinned, not dropped: the kept ones carry its weight */
		}
		if (k > 1) {
			kept = *a;
			kept.nsamples *= k;
			a = &kept;
			over = true; /* it carries k-1 others' weight: never lost for room */
			if (k > atomic_load(&s->thin_max)) atomic_store(&s->thin_max, k);
		}
	}
	int rc = over ? rq_push_alloc_over(s->queue, a) : rq_push_alloc(s->queue, a);
	if (rc == 0) atomic_fetch_add(&s->allocs_queued, 1);
	return rc;
}

static int queue_free(void *ctx, const struct tracer_free *f)
{
	struct session *s = ctx;
	atomic_fetch_add(&s->records_in, 1);
	return rq_push_free(s->queue, f);
}

const struct tracer_callbacks session_queue_callbacks = {.alloc = queue_alloc, .free = queue_free};

static void drain_answered(struct session *s, uint64_t req, bool over)
{
	pthread_mutex_lock(&s->drain_lock);
	if (req > s->drain_done) s->drain_done = req;
	if (over) s->intake_over = true;
	pthread_cond_broadcast(&s->drain_cond);
	pthread_mutex_unlock(&s->drain_lock);
}

bool session_prepare_stacks(struct session *s, int timeout_ms)
{
	if (!s->intake_opens_stacks) return true;
	atomic_store(&s->early_asked, true);
	session_intake_wake(s);
	for (int ms = 0; !atomic_load(&s->early_done) && ms < timeout_ms; ms++) {
		struct timespec one = {0, 1000000};
		nanosleep(&one, NULL);
	}
	return atomic_load(&s->early_done);
}

void session_intake_wake(struct session *s)
{
	pthread_mutex_lock(&s->wake_lock);
	s->wake = true;
	pthread_cond_signal(&s->wake_cond);
	pthread_mutex_unlock(&s->wake_lock);
}

/* Up to ms, or until intake_wake. */
static void intake_sleep(struct session *s, int ms)
{
	struct timespec until = deadline_after_ms(ms);
	pthread_mutex_lock(&s->wake_lock);
	while (!s->wake && pthread_cond_timedwait(&s->wake_cond, &s->wake_lock, &until) == 0) {}
	s->wake = false;
	pthread_mutex_unlock(&s->wake_lock);
}

void *session_intake_main(void *arg)
{
	struct session *s = arg;
	uint64_t last_reconcile = trace_out_mono_now_ns(), records_then = 0;
	uint64_t answered = 0;
	int early_ms = 1;
	while (!atomic_load(&s->intake_stop) && !atomic_load(&s->intake_failed)) {
		/* a poll that starts after a drain request reads every record sent before it */
		uint64_t req = atomic_load(&s->drain_req);
		/* Records reach the queue through the sink, on the host's thread, as it reads the
		 * ring (every 20 ms); this thread asks it for a pass of its own only when it must
		 * see them sooner: a drain request, and the first record of a just-started program
		 * (its unwinder is prepared then, while it surely runs), looked for a few times
		 * soon after the start; else it sleeps until woken or a second went by. */
		bool early = s->intake_opens_stacks && !s->early_tried && !atomic_load(&s->record_seen);
		int poll_ms = 2; /* no pass of its own: what the inbox holds, after a short wait */
		if (req != answered) {
			poll_ms = 0;
		} else if (early && early_ms <= INTAKE_EARLY_MAX_MS) {
			intake_sleep(s, early_ms);
			early_ms *= 2;
			poll_ms = 0;
		} else if (!atomic_load(&s->record_seen) || s->early_tried || !s->intake_opens_stacks) {
			/* until the next reconciliation is due: a second while records come, ten
			 * while none does (nothing else needs this thread on time) */
			uint64_t due = last_reconcile + (atomic_load(&s->records_in) != records_then
							 ? RECONCILE_NS : RECONCILE_IDLE_NS);
			uint64_t now = trace_out_mono_now_ns();
			int ms = due > now ? (int)((due - now) / 1000000) + 1 : 1; /* at most 10 s */
			intake_sleep(s, ms);
		}
		if (atomic_load(&s->intake_stop)) break;
		if (atomic_load(&s->early_asked)) open_early_stacks(s);
		req = atomic_load(&s->drain_req);
		if (req != answered) poll_ms = 0;
		if (tracer_poll(s->tracer, poll_ms, &session_queue_callbacks, s) < 0) {
			atomic_store(&s->intake_failed, true);
			break;
		}
		/* a drain asked at the target's exit (it is held there, its mappings still
		 * readable): the unwinder of a program that made no allocation record yet (only
		 * mappings, or records still in the ring) is prepared now or never */
		if (req != answered || atomic_load(&s->record_seen)) open_early_stacks(s);
		if (req != answered) drain_answered(s, answered = req, false);
		uint64_t now = trace_out_mono_now_ns();
		uint64_t records = atomic_load(&s->records_in);
		if (!s->floor && now - last_reconcile >= (records != records_then ? RECONCILE_NS
										  : RECONCILE_IDLE_NS)) {
			last_reconcile = now;
			records_then = records;
			tracer_reconcile(s->tracer, &session_queue_callbacks, s);
		}
	}
	if (!atomic_load(&s->intake_failed)) {
		for (int i = 0; i < FINAL_DRAIN_ROUNDS &&
				tracer_poll(s->tracer, 0, &session_queue_callbacks, s) > 0; i++) {}
		if (!s->floor) tracer_reconcile(s->tracer, &session_queue_callbacks, s);
	}
	if (atomic_load(&s->record_seen)) open_early_stacks(s);
	drain_answered(s, 0, true);
	rq_close(s->queue);
	return NULL;
}

