/* Loading and attaching the BPF program (bpf/memtraced.bpf.c); stats; closing.
 *
 * Mode: the fastest the kernel has (kernel_probe.h), attached by attach_modes.h: session
 * uprobes (6.13+: one program sees entry and return, and the entry decides whether the return
 * probe is set), else uprobe_multi links with return probes (6.6+), else perf-event uprobes and
 * uretprobes; in the last two every allocation call pays a return probe.
 *
 * The BPF object itself is shared by the tracers of the same options (tracer_host.c): a
 * tracer is a slot there, its links (per process, carrying its owner in their cookies) and
 * its view of the blocks it reported.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "memtraced_events.h"
#include "memtraced.skel.h"
#include "tracer_host.h"
#include "tracer_internal.h"
#include "door/door.h"
#include "attach_modes.h"
#include "kernel_probe.h"

#define SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME(MT_FN_MALLOC, AF_MALLOC) && SAME(MT_FN_CALLOC, AF_CALLOC) &&
               SAME(MT_FN_REALLOC, AF_REALLOC) && SAME(MT_FN_REALLOCARRAY, AF_REALLOCARRAY) &&
               SAME(MT_FN_FREE, AF_FREE) && SAME(MT_FN_POSIX_MEMALIGN, AF_POSIX_MEMALIGN) &&
               SAME(MT_FN_ALIGNED_ALLOC, AF_ALIGNED_ALLOC) && SAME(MT_FN_MEMALIGN, AF_MEMALIGN) &&
               SAME(MT_FN_VALLOC, AF_VALLOC) && SAME(MT_FN_PVALLOC, AF_PVALLOC) &&
               SAME(MT_FN_NEW, AF_NEW) && SAME(MT_FN_NEW_ARRAY_ALIGNED_NOTHROW, AF_NEW_ARRAY_ALIGNED_NOTHROW) &&
               SAME(MT_FN_DELETE_FIRST, AF_DELETE) &&
               SAME(MT_FN_DELETE_LAST, AF_DELETE_ARRAY_ALIGNED_NOTHROW) &&
               SAME(MT_FN_MALLOCX, AF_MALLOCX) && SAME(MT_FN_RALLOCX, AF_RALLOCX) &&
               SAME(MT_FN_XALLOCX, AF_XALLOCX) && SAME(MT_FN_DALLOCX, AF_DALLOCX) &&
               SAME(MT_FN_SDALLOCX, AF_SDALLOCX) && SAME(MT_FN_CFREE, AF_CFREE) &&
               SAME(MT_FN_REALLOCF, AF_REALLOCF) && SAME(MT_FN_COUNT, AF_COUNT),
               "enum mt_fn (include/memtraced_events.h) must match enum alloc_fn");

#define DEFAULT_RINGBUF_BYTES (4u << 20)

enum tracer_mode tracer_mode(const struct tracer *t)
{
	return t->mode;
}

static bool is_pow2(unsigned x) { return x && !(x & (x - 1)); }

/* The ring buffer by the rate: a high rate samples most calls of a burst, and the ring must
 * hold what comes while the intake thread is not scheduled (a few ms with every CPU busy). Its
 * pages cost ~5 us each at their first touch (kernel-facts.md), so a low rate keeps it small. */
static unsigned default_ring_bytes(double rate)
{
	return rate >= 0.5 ? 32u << 20 : rate >= 0.01 ? 16u << 20 : DEFAULT_RINGBUF_BYTES;
}

static int check_opts(const struct tracer_opts *o, unsigned *stack_bytes, unsigned *ring_bytes,
                      char *err, size_t errlen)
{
	if (!(o->rate > 0 && o->rate <= 1)) {
		snprintf(err, errlen, "sampling rate %g is out of range: it must be in (0, 1]", o->rate);
		return -1;
	}
	*stack_bytes = o->stack_bytes ? o->stack_bytes : MT_STACK_BYTES_DEFAULT;
	if (*stack_bytes > MT_STACK_BYTES_LIMIT || *stack_bytes < 64) {
		snprintf(err, errlen, "stack copy size %u bytes is out of range: it must be in [64, %u]",
		         *stack_bytes, MT_STACK_BYTES_LIMIT);
		return -1;
	}
	*stack_bytes = (*stack_bytes + 7) & ~7u;
	*ring_bytes = o->ringbuf_bytes ? o->ringbuf_bytes : default_ring_bytes(o->rate);
	/* a deep stack's pieces past the first record may find the ring full: it is cut there */
	unsigned record = sizeof(struct mt_alloc_record) + 8 +
			  (*stack_bytes < MT_STACK_BYTES_MAX ? *stack_bytes : MT_STACK_BYTES_MAX);
	if (!is_pow2(*ring_bytes) || *ring_bytes < (unsigned)getpagesize() ||
	    *ring_bytes < 4 * record) {
		snprintf(err, errlen, "ring buffer size %u bytes is invalid: it must be a power of two, "
		         "at least a page and at least 4 records (%u bytes each with a %u-byte stack copy)",
		         *ring_bytes, record, *stack_bytes);
		return -1;
	}
	return 0;
}

static int check_sites(const struct alloc_sites *s, char *err, size_t errlen)
{
	if (!s || s->n <= 0 || s->n > MAX_PROBE_SITES) {
		snprintf(err, errlen, "no allocation functions to probe (%d sites)", s ? s->n : 0);
		return -1;
	}
	for (int i = 0; i < s->n; i++) {
		const struct probe_site *p = &s->sites[i];
		if ((unsigned)p->fn >= AF_COUNT || !p->path[0] ||
		    !memchr(p->path, 0, sizeof(p->path))) {
			snprintf(err, errlen, "probe site %d is invalid (function %d, path \"%.64s\")", i,
			         (int)p->fn, p->path);
			return -1;
		}
	}
	return 0;
}


/* The attach mode for these options on this kernel: the fastest it has, or the one asked
 * for, which it must have. */
static int choose_mode(const struct tracer_opts *o, enum tracer_mode *mode, char *err, size_t errlen)
{
	if (o->usdt) {
		char lacks[512];
		if (!kernel_lacks(lacks, sizeof lacks)) {
			*mode = TRACER_MODE_USDT;
			return 0;
		}
		snprintf(err, errlen, "%s", lacks);
		return -1;
	}
	return kernel_attach_mode(o->attach, mode, err, errlen);
}

/* The allocator's sites attached in t's mode (attach_modes.h). */
static int attach_sites(struct tracer *t, const struct alloc_sites *sites, char *err, size_t errlen)
{
	switch (t->mode) {
	case TRACER_MODE_SESSION: return attach_session(t, sites, err, errlen);
	case TRACER_MODE_MULTI: return attach_multi(t, sites, err, errlen);
	case TRACER_MODE_PERF: return attach_perf(t, sites, err, errlen);
	default:
		snprintf(err, errlen, "a tracer loaded for USDT probes takes tracer_attach_usdt");
		return -1;
	}
}

struct tracer *tracer_load(pid_t pid, const struct tracer_opts *opts, char *err, size_t errlen)
{
	unsigned stack_bytes, ring_bytes;
	if (pid < 0) {
		snprintf(err, errlen, "invalid pid %d", (int)pid);
		return NULL;
	}
	if (!opts || check_opts(opts, &stack_bytes, &ring_bytes, err, errlen))
		return NULL;
	struct tracer *t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	t->pid = pid;
	t->floor = opts->floor;
	pthread_mutex_init(&t->inbox_lock, NULL);
	pthread_mutex_init(&t->lock, NULL);
	t->intake = intake_record;
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->inbox_cond, &ca);
	pthread_condattr_destroy(&ca);
	enum tracer_mode mode;
	if (choose_mode(opts, &mode, err, errlen)) {
		tracer_close(t);
		return NULL;
	}
	struct host_key k = {
		.mode = mode,
		.floor = opts->floor && !opts->usdt, .no_mappings = opts->no_mappings || opts->floor,
		.rate = opts->rate, .stack_bytes = stack_bytes, .ring_bytes = ring_bytes,
	};
	if (host_take_slot(&k, t, err, errlen)) {
		tracer_close(t);
		return NULL;
	}
	if (pid) host_set_tgid(t, pid);
	return t;
}

int tracer_adopt(struct tracer *t, pid_t pid)
{
	if (!t || t->pid || pid <= 0 || t->nlinks || t->nlink_fds)
		return -1;
	t->pid = pid;
	host_set_tgid(t, pid);
	return 0;
}

int tracer_attach(struct tracer *t, const struct alloc_sites *sites, char *err, size_t errlen)
{
	if (!t->pid) {
		snprintf(err, errlen, "a tracer loaded for no process takes tracer_adopt first");
		return -1;
	}
	if (t->mode == TRACER_MODE_USDT) {
		snprintf(err, errlen, "a tracer loaded for USDT probes takes tracer_attach_usdt");
		return -1;
	}
	if (check_sites(sites, err, errlen))
		return -1;
	if (attach_sites(t, sites, err, errlen))
		return -1;
	return host_start(t, err, errlen);
}

static int attach_usdt_probe(struct tracer *t, struct bpf_program *prog, const char *path,
                             const char *name, char *err, size_t errlen)
{
	host_usdt_lock(t);
	struct bpf_link *l = bpf_program__attach_usdt(prog, t->pid, path, TRACER_USDT_PROVIDER,
	                                              name, NULL);
	int e = errno;
	host_usdt_unlock(t);
	errno = e;
	if (!l) {
		snprintf(err, errlen, "cannot attach to the USDT probe %s:%s in %s for pid %d: %s",
		         TRACER_USDT_PROVIDER, name, path, (int)t->pid, strerror(errno));
		return -1;
	}
	t->links[t->nlinks++] = l;
	return 0;
}

int tracer_attach_usdt(struct tracer *t, const char *path, char *err, size_t errlen)
{
	if (t->mode != TRACER_MODE_USDT || !t->pid) {
		snprintf(err, errlen, "%s", t->pid ? "this tracer was not loaded for USDT probes"
						   : "a tracer loaded for no process takes tracer_adopt first");
		return -1;
	}
	struct memtraced_bpf *sk = host_skel(t);
	if (attach_usdt_probe(t, sk->progs.usdt_alloc, path, "alloc", err, errlen) ||
	    attach_usdt_probe(t, sk->progs.usdt_free, path, "free", err, errlen))
		return -1;
	return host_start(t, err, errlen);
}

struct tracer *tracer_open(pid_t pid, const struct alloc_sites *sites, const struct tracer_opts *opts,
                           char *err, size_t errlen)
{
	if (check_sites(sites, err, errlen))
		return NULL;
	struct tracer *t = tracer_load(pid, opts, err, errlen);
	if (t && tracer_attach(t, sites, err, errlen) < 0) {
		tracer_close(t);
		return NULL;
	}
	return t;
}

/* Probes more sites (a library dlopen'ed since tracer_open; LIFECYCLE). The sites must not be
 * probed already: each call adds links, nothing checks for duplicates. */
int tracer_attach_sites(struct tracer *t, const struct alloc_sites *sites, char *err, size_t errlen)
{
	if (!t || check_sites(sites, err, errlen))
		return -1;
	if (t->mode == TRACER_MODE_USDT)
		return 0; /* the sampler patches objects loaded later itself */
	int links = t->nlink_fds + t->nlinks;
	int need = 2 * sites->n; /* at most: an entry and a return (or free) link per site */
	if (links + need > TRACER_MAX_LINKS) {
		snprintf(err, errlen, "too many probe links (%d in place, %d more needed)", links, need);
		return -1;
	}
	return attach_sites(t, sites, err, errlen);
}

void tracer_set_thin(struct tracer *t, unsigned k)
{
	if (t) host_set_thin(t, k);
}

void tracer_mute(struct tracer *t)
{
	if (t) host_mute(t);
}

int tracer_live_map_fd(struct tracer *t)
{
	return bpf_map__fd(host_skel(t)->maps.live);
}

uint32_t tracer_owner(const struct tracer *t)
{
	return t->owner;
}

void tracer_set_stack_end(struct tracer *t, uint32_t tid, uint64_t end)
{
	if (!t || !t->host) return;
	int fd = bpf_map__fd(host_skel(t)->maps.stack_ends);
	if (end) bpf_map_update_elem(fd, &tid, &end, BPF_ANY);
	else bpf_map_delete_elem(fd, &tid);
}

void tracer_get_stats(struct tracer *t, struct tracer_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!t || !t->host)
		return;
	int ncpus = libbpf_num_possible_cpus();
	struct mt_counts *per_cpu = ncpus > 0 ? calloc((size_t)ncpus, sizeof(*per_cpu)) : NULL;
	uint32_t slot = MT_OWNER_SLOT(t->owner);
	if (per_cpu && bpf_map_lookup_elem(bpf_map__fd(host_skel(t)->maps.slot_counts), &slot,
					   per_cpu) == 0) {
		for (int i = 0; i < ncpus; i++) {
			const struct mt_counts *c = &per_cpu[i];
			out->alloc_calls += c->alloc_calls;
			out->free_calls += c->free_calls;
			out->samples += c->samples;
			out->nested_skipped += c->nested_skipped;
			out->map_calls += c->map_calls;
			out->drop_ringbuf += c->drop_ringbuf;
			out->drop_map_full += c->drop_map_full;
			out->drop_stack_copy += c->drop_stack_copy;
			out->drop_busy += c->drop_busy;
			out->stack_recopied += c->stack_recopied;
		}
	}
	free(per_cpu);
	uint64_t dropped = __atomic_load_n(&t->inbox_dropped, __ATOMIC_RELAXED);
	uint64_t dropped_samples = __atomic_load_n(&t->inbox_dropped_samples, __ATOMIC_RELAXED);
	out->drop_ringbuf += dropped;
	out->drop_queue = dropped;
	out->samples -= out->samples < dropped_samples ? out->samples : dropped_samples;
	out->reconciled_frees = __atomic_load_n(&t->reconciled_frees, __ATOMIC_RELAXED);
	out->thinned = __atomic_load_n(&t->thinned, __ATOMIC_RELAXED);
	out->bad_records = __atomic_load_n(&t->bad_records, __ATOMIC_RELAXED);
	out->record_bytes = __atomic_load_n(&t->record_bytes, __ATOMIC_RELAXED);
	out->max_record_bytes = __atomic_load_n(&t->max_record_bytes, __ATOMIC_RELAXED);
	out->live_reported = __atomic_load_n(&t->live_count, __ATOMIC_RELAXED);
}

int tracer_set_python(struct tracer *t, const struct mt_py_layout *layout)
{
	return t ? host_set_python(t, layout) : -1;
}

void tracer_detach(struct tracer *t)
{
	if (!t)
		return;
	/* The shared programs with no link of this tracer's (the system call tracepoints, found
	 * by tgid) stop at once; the links' slow closes give any that was running time to end. */
	host_mute(t);
	/* Closing a link removes its breakpoints from the target; once the close returns, no
	 * probe of that link runs any more (the kernel waits for running handlers). */
	for (int i = 0; i < t->nlink_fds; i++)
		close(t->link_fds[i]);
	t->nlink_fds = 0;
	bool usdt = t->mode == TRACER_MODE_USDT && t->nlinks;
	if (usdt) host_usdt_lock(t); /* the links give their spec ids back to the host's manager */
	for (int i = 0; i < t->nlinks; i++)
		bpf_link__destroy(t->links[i]);
	if (usdt) host_usdt_unlock(t);
	t->nlinks = 0;
}

double tracer_ring_fill(struct tracer *t)
{
	return t ? host_ring_fill(t) : -1;
}

void tracer_close(struct tracer *t)
{
	if (!t)
		return;
	tracer_detach(t); /* links first: that removes the breakpoints from the target */
	host_release_slot(t);
	for (struct inbox_item *it = t->inbox_head, *next; it; it = next) {
		next = it->next;
		free(it);
	}
	pthread_mutex_destroy(&t->inbox_lock);
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->inbox_cond);
	seq_table_free(&t->visible);
	deep_free(&t->deep);
	free(t);
}

/* Closing in the background: unregistering uprobes waits for the kernel (tens of ms here). */
static pthread_mutex_t closers_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t closers_done = PTHREAD_COND_INITIALIZER;
static int closers;

static void *close_main(void *arg)
{
	tracer_close(arg);
	pthread_mutex_lock(&closers_lock);
	closers--;
	pthread_cond_broadcast(&closers_done);
	pthread_mutex_unlock(&closers_lock);
	return NULL;
}

void tracer_close_later(struct tracer *t)
{
	if (!t)
		return;
	pthread_t th;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_mutex_lock(&closers_lock);
	closers++;
	pthread_mutex_unlock(&closers_lock);
	if (pthread_create(&th, &a, close_main, t) != 0)
		close_main(t);
	pthread_attr_destroy(&a);
}

void tracer_close_wait(void)
{
	pthread_mutex_lock(&closers_lock);
	while (closers > 0)
		pthread_cond_wait(&closers_done, &closers_lock);
	pthread_mutex_unlock(&closers_lock);
}
