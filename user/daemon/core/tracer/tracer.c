/* Loading and attaching the BPF program (bpf/memtraced.bpf.c); stats; closing.
 *
 * Mode: session uprobes (kernel 6.10+: one program sees entry and return, and the entry
 * decides whether the return probe is set) attached through raw uprobe_multi links; where the
 * kernel lacks them, plain uprobes + uretprobes through perf events (libbpf), where every
 * allocation call pays a return probe.
 */
#include <errno.h>
#include <pthread.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <sys/mount.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "memtraced_events.h"
#include "memtraced.skel.h"
#include "tracer_internal.h"
#include "door/door.h"
#include "uprobe_link.h"

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

const char *tracer_mode_name(enum tracer_mode mode)
{
	return mode == TRACER_MODE_SESSION ? "session uprobes"
	     : mode == TRACER_MODE_USDT ? "in-process sampler (USDT)" : "uprobe + uretprobe";
}

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
	if (*stack_bytes > MT_STACK_BYTES_MAX || *stack_bytes < 64) {
		snprintf(err, errlen, "stack copy size %u bytes is out of range: it must be in [64, %u]",
		         *stack_bytes, MT_STACK_BYTES_MAX);
		return -1;
	}
	*stack_bytes = (*stack_bytes + 7) & ~7u;
	*ring_bytes = o->ringbuf_bytes ? o->ringbuf_bytes : default_ring_bytes(o->rate);
	unsigned record = sizeof(struct mt_alloc_record) + *stack_bytes + 8;
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

/* Exponential gaps with mean `mean` bytes: the quantiles at (i + 0.5) / N, scaled so that the
 * table's mean is exactly `mean`. The BPF side picks entries with bpf_get_prandom_u32. */
static void fill_exp_table(volatile __u64 *table, double mean)
{
	double sum = 0, raw[MT_EXP_TABLE];
	for (int i = 0; i < MT_EXP_TABLE; i++) {
		raw[i] = -log1p(-(i + 0.5) / MT_EXP_TABLE);
		sum += raw[i];
	}
	double scale = mean * MT_EXP_TABLE / sum;
	for (int i = 0; i < MT_EXP_TABLE; i++) {
		double g = raw[i] * scale + 0.5;
		table[i] = g < 1 ? 1 : g > 1e18 ? (__u64)1e18 : (__u64)g;
	}
}

#define MAPPING_PROGS(sk) {(sk)->progs.mmap_enter, (sk)->progs.munmap_enter, (sk)->progs.mremap_enter, \
			   (sk)->progs.mprotect_enter, (sk)->progs.madvise_enter, (sk)->progs.mapping_exit}
/* mapping_exit is attached to these five (its SEC names the first) */
static const char *const mapping_exits[] = {"sys_exit_mmap", "sys_exit_munmap", "sys_exit_mremap",
					    "sys_exit_mprotect", "sys_exit_madvise"};

/* libbpf finds a tracepoint's id in tracefs: mount it where it is missing (as perf and bcc do;
 * a system that mounts it already is left as it is). */
static int tracefs_ready(char *err, size_t errlen)
{
	if (access("/sys/kernel/tracing/events", F_OK) == 0 ||
	    access("/sys/kernel/debug/tracing/events", F_OK) == 0)
		return 0;
	if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL) == 0) return 0;
	snprintf(err, errlen, "the system call tracepoints need tracefs, which is not mounted and "
		 "cannot be (mount -t tracefs nodev /sys/kernel/tracing: %s); --no-mmap goes without",
		 strerror(errno));
	return -1;
}

static void set_autoload(struct memtraced_bpf *sk, enum tracer_mode mode, bool floor,
			 bool no_mappings)
{
	bool session = mode == TRACER_MODE_SESSION;
	bool usdt = mode == TRACER_MODE_USDT;
	floor = floor && !usdt;
	bpf_program__set_autoload(sk->progs.alloc_session, session && !floor);
	bpf_program__set_autoload(sk->progs.alloc_entry, !session && !usdt && !floor);
	bpf_program__set_autoload(sk->progs.alloc_return, !session && !usdt && !floor);
	bpf_program__set_autoload(sk->progs.free_probe, !usdt && !floor);
	bpf_program__set_autoload(sk->progs.floor_session, session && floor);
	bpf_program__set_autoload(sk->progs.floor_entry, !session && !usdt && floor);
	bpf_program__set_autoload(sk->progs.floor_return, !session && !usdt && floor);
	bpf_program__set_autoload(sk->progs.floor_free, floor);
	bpf_program__set_autoload(sk->progs.usdt_alloc, usdt);
	bpf_program__set_autoload(sk->progs.usdt_free, usdt);
	bool mappings = !floor && !no_mappings;
	struct bpf_program *map_progs[] = MAPPING_PROGS(sk);
	for (size_t i = 0; i < sizeof map_progs / sizeof map_progs[0]; i++)
		bpf_program__set_autoload(map_progs[i], mappings);
	if (session) {
		bpf_program__set_expected_attach_type(sk->progs.alloc_session, UPROBE_ATTACH_SESSION);
		bpf_program__set_expected_attach_type(sk->progs.floor_session, UPROBE_ATTACH_SESSION);
		bpf_program__set_expected_attach_type(sk->progs.free_probe, UPROBE_ATTACH_MULTI);
		bpf_program__set_expected_attach_type(sk->progs.floor_free, UPROBE_ATTACH_MULTI);
	}
}

static struct memtraced_bpf *load(pid_t pid, const struct tracer_opts *o, unsigned stack_bytes,
                                  unsigned ring_bytes, enum tracer_mode mode, char *err,
                                  size_t errlen)
{
	struct memtraced_bpf *sk = memtraced_bpf__open();
	if (!sk) {
		snprintf(err, errlen, "cannot open the BPF program: %s", strerror(errno));
		return NULL;
	}
	sk->rodata->sample_all = o->rate >= 1;
	sk->rodata->mean_gap = o->rate >= 1 ? 8 : (__u64)llround(8 / o->rate);
	sk->rodata->stack_bytes = stack_bytes;
	sk->rodata->wakeup_bytes = ring_bytes / 8; /* leave room for wakeup latency */
	fill_exp_table(sk->rodata->exp_gaps, o->rate >= 1 ? 8 : 8 / o->rate);
	bpf_map__set_max_entries(sk->maps.events, ring_bytes);
	/* Live sampled blocks: at the default rate a few thousand even for a large heap (1 GiB at
	 * 1e-5: ~1,300); the kernel zeroes a bucket per entry at creation (1M: ~12 ms), so size
	 * the map by the rate. A block that does not fit is counted as drop_map_full. */
	bpf_map__set_max_entries(sk->maps.live, o->rate >= 1e-3 ? 1u << 20 : 1u << 17);
	int ncpus = libbpf_num_possible_cpus();
	bpf_map__set_max_entries(sk->maps.scratch, ncpus > 0 ? (unsigned)ncpus : 1);
	set_autoload(sk, mode, o->floor, o->no_mappings);
	int e = memtraced_bpf__load(sk);
	if (e) {
		snprintf(err, errlen, "cannot load the BPF program (%s mode): %s (run as root, on a "
		         "kernel with BTF; details in libbpf's messages above)",
		         tracer_mode_name(mode), strerror(-e));
		memtraced_bpf__destroy(sk);
		return NULL;
	}
	sk->bss->target_tgid = (__u32)pid;
	return sk;
}

static int attach_session(struct tracer *t, const struct alloc_sites *s, char *err, size_t errlen)
{
	int alloc_prog = bpf_program__fd(t->floor ? t->skel->progs.floor_session : t->skel->progs.alloc_session);
	int free_prog = bpf_program__fd(t->floor ? t->skel->progs.floor_free : t->skel->progs.free_probe);
	bool done[MAX_PROBE_SITES] = { false };
	/* One link per (object, kind): uprobe_multi takes one path and many offsets. */
	for (int i = 0; i < s->n; i++) {
		if (done[i])
			continue;
		uint64_t aoff[MAX_PROBE_SITES], acookie[MAX_PROBE_SITES];
		uint64_t foff[MAX_PROBE_SITES], fcookie[MAX_PROBE_SITES];
		unsigned na = 0, nf = 0;
		for (int j = i; j < s->n; j++) {
			const struct probe_site *p = &s->sites[j];
			if (done[j] || strcmp(p->path, s->sites[i].path))
				continue;
			done[j] = true;
			if (alloc_fn_is_free(p->fn)) {
				foff[nf] = p->probe_offset;
				fcookie[nf++] = p->fn;
			} else {
				/* the entry or a later emulated site where %rsp has not moved: the
				 * return address is at [rsp] for the session return */
				aoff[na] = p->probe_offset;
				acookie[na++] = p->fn;
			}
		}
		char pbuf[64];
		int pfd;
		const char *path = door_probe_path(s->sites[i].path, &pfd, pbuf, sizeof pbuf);
		int rc = 0;
		if (na) {
			int fd = uprobe_multi_link_create(alloc_prog, UPROBE_ATTACH_SESSION, path, aoff,
			                                  acookie, na, t->pid, err, errlen);
			if (fd < 0) rc = -1;
			else t->link_fds[t->nlink_fds++] = fd;
		}
		if (nf && rc == 0) {
			int fd = uprobe_multi_link_create(free_prog, UPROBE_ATTACH_MULTI, path, foff,
			                                  fcookie, nf, t->pid, err, errlen);
			if (fd < 0) rc = -1;
			else t->link_fds[t->nlink_fds++] = fd;
		}
		if (pfd >= 0) close(pfd);
		if (rc) return -1;
	}
	return 0;
}

static int attach_one(struct tracer *t, struct bpf_program *prog, const struct probe_site *p,
                      uint64_t offset, bool retprobe, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = p->fn, .retprobe = retprobe);
	char pbuf[64];
	int pfd;
	const char *path = door_probe_path(p->path, &pfd, pbuf, sizeof pbuf);
	struct bpf_link *l = bpf_program__attach_uprobe_opts(prog, t->pid, path, offset, &uo);
	int e = errno;
	if (pfd >= 0) close(pfd);
	errno = e;
	if (!l) {
		snprintf(err, errlen, "cannot attach a %s on %s at %s+0x%llx for pid %d: %s",
		         retprobe ? "uretprobe" : "uprobe", alloc_fn_name(p->fn), p->path,
		         (unsigned long long)offset, (int)t->pid, strerror(errno));
		return -1;
	}
	t->links[t->nlinks++] = l;
	return 0;
}

static int attach_fallback(struct tracer *t, const struct alloc_sites *s, char *err, size_t errlen)
{
	struct memtraced_bpf *sk = t->skel;
	for (int i = 0; i < s->n; i++) {
		const struct probe_site *p = &s->sites[i];
		int rc;
		if (alloc_fn_is_free(p->fn)) {
			rc = attach_one(t, t->floor ? sk->progs.floor_free : sk->progs.free_probe, p,
			                p->probe_offset, false, err, errlen);
		} else {
			rc = attach_one(t, t->floor ? sk->progs.floor_entry : sk->progs.alloc_entry, p,
			                p->probe_offset, false, err, errlen);
			if (!rc)
				rc = attach_one(t, t->floor ? sk->progs.floor_return : sk->progs.alloc_return,
				                p, p->probe_offset, true, err, errlen);
		}
		if (rc)
			return -1;
	}
	return 0;
}

static int silent_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
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
	t->mode = opts->usdt ? TRACER_MODE_USDT
	        : opts->no_session ? TRACER_MODE_UPROBE_URETPROBE : TRACER_MODE_SESSION;
	if (t->mode == TRACER_MODE_SESSION) {
		/* A kernel without session uprobes rejects the program: quietly fall back. */
		libbpf_print_fn_t old = libbpf_set_print(silent_libbpf);
		t->skel = load(pid, opts, stack_bytes, ring_bytes, t->mode, err, errlen);
		libbpf_set_print(old);
		if (!t->skel)
			t->mode = TRACER_MODE_UPROBE_URETPROBE;
	}
	if (!t->skel)
		t->skel = load(pid, opts, stack_bytes, ring_bytes, t->mode, err, errlen);
	if (!t->skel) {
		tracer_close(t);
		return NULL;
	}
	return t;
}

/* The mapping programs (tracepoints of the system calls, global), when loaded. */
static int attach_mappings(struct tracer *t, char *err, size_t errlen)
{
	struct bpf_program *progs[] = MAPPING_PROGS(t->skel);
	if (bpf_program__autoload(progs[0]) && tracefs_ready(err, errlen) < 0) return -1;
	for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
		if (!bpf_program__autoload(progs[i])) continue;
		bool exits = progs[i] == t->skel->progs.mapping_exit;
		for (size_t k = 0; k < (exits ? sizeof mapping_exits / sizeof mapping_exits[0] : 1); k++) {
			struct bpf_link *l = exits ? bpf_program__attach_tracepoint(progs[i], "syscalls",
										   mapping_exits[k])
						   : bpf_program__attach(progs[i]);
			if (!l) {
				snprintf(err, errlen, "cannot attach %s (memory mappings; --no-mmap goes "
					 "without): %s", bpf_program__name(progs[i]), strerror(errno));
				return -1;
			}
			t->links[t->nlinks++] = l;
		}
	}
	return 0;
}

static int start_intake(struct tracer *t, char *err, size_t errlen)
{
	if (attach_mappings(t, err, errlen) < 0) return -1;
	t->rb = ring_buffer__new(bpf_map__fd(t->skel->maps.events), intake_record, t, NULL);
	if (!t->rb) {
		snprintf(err, errlen, "cannot set up the ring buffer consumer: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int tracer_adopt(struct tracer *t, pid_t pid)
{
	if (!t || t->pid || pid <= 0 || t->nlinks || t->nlink_fds)
		return -1;
	t->pid = pid;
	__atomic_store_n(&t->skel->bss->target_tgid, (__u32)pid, __ATOMIC_RELEASE);
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
	int rc = t->mode == TRACER_MODE_SESSION ? attach_session(t, sites, err, errlen)
	                                        : attach_fallback(t, sites, err, errlen);
	if (rc)
		return -1;
	return start_intake(t, err, errlen);
}

static int attach_usdt_probe(struct tracer *t, struct bpf_program *prog, const char *path,
                             const char *name, char *err, size_t errlen)
{
	struct bpf_link *l = bpf_program__attach_usdt(prog, t->pid, path, TRACER_USDT_PROVIDER,
	                                              name, NULL);
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
	if (attach_usdt_probe(t, t->skel->progs.usdt_alloc, path, "alloc", err, errlen) ||
	    attach_usdt_probe(t, t->skel->progs.usdt_free, path, "free", err, errlen))
		return -1;
	return start_intake(t, err, errlen);
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
	int links = t->mode == TRACER_MODE_SESSION ? t->nlink_fds : t->nlinks;
	int need = 2 * sites->n; /* at most: an entry and a return (or free) link per site */
	if (links + need > TRACER_MAX_LINKS) {
		snprintf(err, errlen, "too many probe links (%d in place, %d more needed)", links, need);
		return -1;
	}
	return t->mode == TRACER_MODE_SESSION ? attach_session(t, sites, err, errlen)
	                                      : attach_fallback(t, sites, err, errlen);
}

void tracer_mute(struct tracer *t)
{
	if (t && t->skel && t->skel->bss) __atomic_store_n(&t->skel->bss->muted, 1, __ATOMIC_RELEASE);
}

int tracer_live_map_fd(struct tracer *t)
{
	return bpf_map__fd(t->skel->maps.live);
}

void tracer_set_stack_end(struct tracer *t, uint32_t tid, uint64_t end)
{
	if (!t || !t->skel) return;
	int fd = bpf_map__fd(t->skel->maps.stack_ends);
	if (end) bpf_map_update_elem(fd, &tid, &end, BPF_ANY);
	else bpf_map_delete_elem(fd, &tid);
}

void tracer_get_stats(struct tracer *t, struct tracer_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!t || !t->skel)
		return;
	for (int i = 0; i < MT_MAX_CPUS; i++) {
		const volatile struct mt_cpu_state *c = &t->skel->bss->cpu_state[i];
		out->alloc_calls += c->alloc_calls;
		out->free_calls += c->free_calls;
		out->samples += c->samples;
		out->nested_skipped += c->nested_skipped;
		out->map_calls += c->map_calls;
		out->drop_ringbuf += c->drop_ringbuf;
		out->drop_map_full += c->drop_map_full;
		out->drop_stack_copy += c->drop_stack_copy;
	}
	out->reconciled_frees = __atomic_load_n(&t->reconciled_frees, __ATOMIC_RELAXED);
	out->bad_records = __atomic_load_n(&t->bad_records, __ATOMIC_RELAXED);
	out->record_bytes = __atomic_load_n(&t->record_bytes, __ATOMIC_RELAXED);
	out->max_record_bytes = __atomic_load_n(&t->max_record_bytes, __ATOMIC_RELAXED);
	out->live_reported = __atomic_load_n(&t->live_count, __ATOMIC_RELAXED);
}

void tracer_detach(struct tracer *t)
{
	if (!t)
		return;
	/* Closing a link removes its breakpoints from the target; once the close returns, no
	 * probe of that link runs any more (the kernel waits for running handlers). */
	for (int i = 0; i < t->nlink_fds; i++)
		close(t->link_fds[i]);
	t->nlink_fds = 0;
	for (int i = 0; i < t->nlinks; i++)
		bpf_link__destroy(t->links[i]);
	t->nlinks = 0;
}

double tracer_ring_fill(struct tracer *t)
{
	if (!t || !t->skel) return -1;
	int fd = bpf_map__fd(t->skel->maps.events);
	long page = sysconf(_SC_PAGESIZE);
	for (int i = 0; i < 2 && fd >= 0; i++) { /* page 0: consumer position, page 1: producer */
		if (t->ring_pos[i]) continue;
		void *p = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd, i * page);
		if (p == MAP_FAILED) return -1;
		t->ring_pos[i] = p;
	}
	unsigned long cons = t->ring_pos[0][0], prod = t->ring_pos[1][0];
	double size = (double)bpf_map__max_entries(t->skel->maps.events);
	return size > 0 && prod >= cons ? (double)(prod - cons) / size : 0;
}

void tracer_close(struct tracer *t)
{
	if (!t)
		return;
	tracer_detach(t); /* links first: that removes the breakpoints from the target */
	for (int i = 0; i < 2; i++)
		if (t->ring_pos[i]) munmap((void *)t->ring_pos[i], (size_t)sysconf(_SC_PAGESIZE));
	ring_buffer__free(t->rb);
	memtraced_bpf__destroy(t->skel);
	seq_table_free(&t->visible);
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
