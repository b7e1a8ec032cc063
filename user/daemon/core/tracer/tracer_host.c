/* One BPF object shared by the tracers of the same options (tracer_host.h): loading it, its
 * slots, its ring-buffer thread and the inboxes it fills. */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "memtraced_events.h"
#include "python_frames.h"
#include "memtraced.skel.h"
#include "tracer_host.h"
#include "tracer_internal.h"
#include "kernel_probe.h"
#include "uprobe_link.h"
#include "verifier_log.h"

/* Records come without wakeups (but past a fill threshold): the ring is read every 20 ms while
 * they come, up to every 160 ms after passes that found none (idle processes cost ~0: the
 * 50 passes a second were a quarter of the idle daemon's CPU). A sync asks for a pass now. */
#define HOST_POLL_MS 20
#define HOST_POLL_IDLE_MS 160
#define RING_THREAD_NICE (-10)
#define INBOX_MAX_BYTES (64u << 20) /* a tracer whose thread stalls loses records beyond it */
#define SYNC_TIMEOUT_S 10

struct tracer_host {
	struct tracer_host *next;
	struct host_key key;
	enum tracer_mode mode;             /* what it loaded */
	struct memtraced_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link *map_links[10];    /* the mapping tracepoints (5 enters, 5 exits), attached once */
	int nmap_links;
	const volatile unsigned long *ring_pos[2];
	int nused;                         /* slots taken (under hosts_lock) */
	/* under lock: who holds each slot, the generation handed out last */
	pthread_mutex_t lock;
	/* libbpf's USDT manager (one per bpf_object: the spec ids handed out and given back) has
	 * no lock of its own: every USDT attach and USDT link destroy on this host holds this one.
	 * A child's tracer closed on a thread of its own (tracer_close_later) while the main
	 * thread attached another child's corrupted the heap ("realloc(): invalid next size"). */
	pthread_mutex_t usdt_lock;
	struct tracer *holder[MT_MAX_SLOTS];
	uint32_t owner[MT_MAX_SLOTS];
	uint16_t gen[MT_MAX_SLOTS];
	/* the ring-buffer thread; a sync asks it for a pass (kick_fd) and waits for `passed` */
	pthread_t thread;
	int epfd, kick_fd;
	atomic_bool stop;
	atomic_uint_fast64_t asked;
	uint64_t passed;                   /* under lock */
	pthread_cond_t passed_cond;
	atomic_uint_fast64_t stray;        /* records of no current owner (a slot just given back) */
};

static pthread_mutex_t hosts_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tracer_host *hosts;

static bool same_key(const struct host_key *a, const struct host_key *b)
{
	return a->mode == b->mode && a->floor == b->floor && a->no_mappings == b->no_mappings &&
	       a->rate == b->rate && a->stack_bytes == b->stack_bytes && a->ring_bytes == b->ring_bytes;
}

/* ---- loading ---- */

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

static void set_autoload(struct memtraced_bpf *sk, enum tracer_mode mode, bool floor,
			 bool no_mappings)
{
	bool session = mode == TRACER_MODE_SESSION;
	bool usdt = mode == TRACER_MODE_USDT;
	bool multi = mode == TRACER_MODE_MULTI;
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
	if (multi) { /* the perf mode's programs, attached through uprobe_multi links */
		struct bpf_program *p[] = {sk->progs.alloc_entry, sk->progs.alloc_return,
			sk->progs.free_probe, sk->progs.floor_entry, sk->progs.floor_return,
			sk->progs.floor_free};
		for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
			bpf_program__set_expected_attach_type(p[i], UPROBE_ATTACH_MULTI);
	}
}

/* libbpf's messages while a BPF object loads: the verifier's log of a program it refuses runs
 * to a thousand lines, which go to a file, not the terminal (load_failed). Loads are made
 * under hosts_lock, one at a time. */
static char load_log[1 << 20];
static size_t load_log_len;

static int keep_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (load_log_len < sizeof load_log - 1) {
		int n = vsnprintf(load_log + load_log_len, sizeof load_log - load_log_len, fmt, ap);
		if (n > 0) load_log_len += (size_t)n;
		if (load_log_len > sizeof load_log - 1) load_log_len = sizeof load_log - 1;
	}
	return 0;
}

/* The error of a load that failed: the program libbpf names, the verifier's last line, and
 * the file that holds the whole log. */
static void load_failed(enum tracer_mode mode, int e, char *err, size_t errlen)
{
	char prog[64] = "", last[200] = "", path[] = "/tmp/memtraced-bpf-load-XXXXXX.log";
	const char *p = strstr(load_log, "prog '");
	if (p) sscanf(p, "prog '%63[^']'", prog);
	verifier_reason(load_log, last, sizeof last); /* its reason, not its statistics */
	int fd = mkstemps(path, 4);
	bool saved = fd >= 0 && write(fd, load_log, load_log_len) == (ssize_t)load_log_len;
	if (fd >= 0) close(fd);
	const struct kernel_features *f = kernel_features();
	snprintf(err, errlen, "kernel %s refused the BPF program%s%s%s (%s mode): %s%s%s%s%s",
	         f->release, prog[0] ? " '" : "", prog, prog[0] ? "'" : "", tracer_mode_name(mode),
	         strerror(e), last[0] ? "; the verifier: " : "", last,
	         saved ? "; its whole log: " : "", saved ? path : "");
}

static struct memtraced_bpf *load(const struct host_key *k, enum tracer_mode mode, char *err,
				  size_t errlen)
{
	struct memtraced_bpf *sk = memtraced_bpf__open();
	if (!sk) {
		snprintf(err, errlen, "cannot open the BPF program: %s", strerror(errno));
		return NULL;
	}
	sk->rodata->sample_all = k->rate >= 1;
	sk->rodata->mean_gap = k->rate >= 1 ? 8 : (__u64)llround(8 / k->rate);
	sk->rodata->stack_bytes = k->stack_bytes;
	/* tests: the copy in pieces that a faulty long copy falls back to (docs/kernels.md),
	 * taken by every record */
	const char *pieces = getenv("MEMTRACED_TEST_STACK_PIECES");
	sk->rodata->stacks_in_pieces = pieces && strcmp(pieces, "1") == 0;
	sk->rodata->wakeup_bytes = k->ring_bytes / 8; /* leave room for wakeup latency */
	fill_exp_table(sk->rodata->exp_gaps, k->rate >= 1 ? 8 : 8 / k->rate);
	bpf_map__set_max_entries(sk->maps.events, k->ring_bytes);
	/* Live sampled blocks: at the default rate a few thousand even for a large heap (1 GiB at
	 * 1e-5: ~1,300); the kernel zeroes a bucket per entry at creation (1M: ~12 ms), so size
	 * the map by the rate. A block that does not fit is counted as drop_map_full. */
	bpf_map__set_max_entries(sk->maps.live, k->rate >= 1e-3 ? 1u << 20 : 1u << 17);
	int ncpus = libbpf_num_possible_cpus();
	bpf_map__set_max_entries(sk->maps.scratch, ncpus > 0 ? (unsigned)ncpus : 1);
	set_autoload(sk, mode, k->floor, k->no_mappings);
	load_log_len = 0;
	load_log[0] = 0;
	libbpf_print_fn_t old = libbpf_set_print(keep_libbpf);
	int e = memtraced_bpf__load(sk);
	libbpf_set_print(old);
	if (e) {
		load_failed(mode, -e, err, errlen);
		memtraced_bpf__destroy(sk);
		return NULL;
	}
	return sk;
}

/* ---- the ring-buffer thread ---- */

/* The owner a record names, or 0 when it is too short to name one (intake_record judges). */
static uint32_t record_owner(const void *data, size_t len)
{
	uint32_t type, owner = 0;
	if (len < sizeof(type)) return 0;
	memcpy(&type, data, sizeof(type));
	if (type == MT_REC_ALLOC || type == MT_REC_ALLOC_USDT || type == MT_REC_MAP) {
		if (len >= sizeof(struct mt_alloc_record))
			memcpy(&owner, (const char *)data + offsetof(struct mt_alloc_record, owner), 4);
	} else if (type == MT_REC_STACK_MORE) {
		if (len >= sizeof(struct mt_stack_more_record))
			memcpy(&owner, (const char *)data + offsetof(struct mt_stack_more_record, owner), 4);
	} else if (type == MT_REC_FREE) {
		if (len >= sizeof(struct mt_free_record))
			memcpy(&owner, (const char *)data + offsetof(struct mt_free_record, owner), 4);
	} else if (type == MT_REC_UNMAP) {
		if (len >= sizeof(struct mt_unmap_record))
			memcpy(&owner, (const char *)data + offsetof(struct mt_unmap_record, owner), 4);
	}
	return owner;
}

static void inbox_push(struct tracer *t, const void *data, size_t len)
{
	pthread_mutex_lock(&t->inbox_lock);
	struct inbox_item *it = t->inbox_bytes + len <= INBOX_MAX_BYTES
			      ? malloc(sizeof(*it) + len) : NULL;
	if (!it) {
		uint32_t type = 0;
		memcpy(&type, data, len < sizeof(type) ? len : sizeof(type));
		__atomic_fetch_add(&t->inbox_dropped, 1, __ATOMIC_RELAXED);
		if (type == MT_REC_ALLOC || type == MT_REC_ALLOC_USDT || type == MT_REC_MAP)
			__atomic_fetch_add(&t->inbox_dropped_samples, 1, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&t->inbox_lock);
		return;
	}
	it->next = NULL;
	it->len = len;
	memcpy(it->data, data, len);
	if (t->inbox_tail) t->inbox_tail->next = it;
	else t->inbox_head = it;
	t->inbox_tail = it;
	t->inbox_bytes += len;
	pthread_cond_signal(&t->inbox_cond);
	pthread_mutex_unlock(&t->inbox_lock);
}

static int dispatch(void *ctx, void *data, size_t len)
{
	struct tracer_host *h = ctx;
	uint32_t owner = record_owner(data, len);
	uint32_t slot = MT_OWNER_SLOT(owner);
	pthread_mutex_lock(&h->lock);
	struct tracer *t = h->owner[slot] == owner ? h->holder[slot] : NULL;
	if (t && t->has_sink) { /* set under h->lock: read safely here */
		pthread_mutex_lock(&t->lock);
		t->intake(t, data, len);
		pthread_mutex_unlock(&t->lock);
	} else if (t) {
		inbox_push(t, data, len);
	} else {
		atomic_fetch_add(&h->stray, 1);
	}
	pthread_mutex_unlock(&h->lock);
	return 0;
}

static void *host_main(void *arg)
{
	struct tracer_host *h = arg;
	int wait_ms = HOST_POLL_MS;
	/* Ahead of busy threads: a pass is short (copies into the queues), but a ring that is not
	 * read for a few ms on a loaded machine fills and drops (node under --inject beside two
	 * busy loops: 13% of its samples). Not allowed (no CAP_SYS_NICE): as it was. */
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), RING_THREAD_NICE) != 0) {}
	while (!atomic_load(&h->stop)) {
		struct epoll_event ev[2];
		int n = epoll_wait(h->epfd, ev, 2, wait_ms);
		uint64_t asked = atomic_load(&h->asked); /* before reading: what it covers */
		if (n > 0) {
			uint64_t v;
			if (read(h->kick_fd, &v, sizeof v) < 0) {} /* nonblocking: may be empty */
		}
		int got = ring_buffer__consume(h->rb);
		wait_ms = got != 0 ? HOST_POLL_MS : wait_ms * 2 > HOST_POLL_IDLE_MS ? HOST_POLL_IDLE_MS
										  : wait_ms * 2;
		pthread_mutex_lock(&h->lock);
		h->passed = asked;
		pthread_cond_broadcast(&h->passed_cond);
		pthread_mutex_unlock(&h->lock);
	}
	return NULL;
}

/* ---- the host's life ---- */

static void destroy(struct tracer_host *h)
{
	if (!h) return;
	if (h->thread) {
		atomic_store(&h->stop, true);
		uint64_t one = 1;
		if (write(h->kick_fd, &one, sizeof one) < 0) {}
		pthread_join(h->thread, NULL);
	}
	for (int i = 0; i < h->nmap_links; i++) bpf_link__destroy(h->map_links[i]);
	for (int i = 0; i < 2; i++)
		if (h->ring_pos[i]) munmap((void *)h->ring_pos[i], (size_t)sysconf(_SC_PAGESIZE));
	ring_buffer__free(h->rb);
	if (h->epfd >= 0) close(h->epfd);
	if (h->kick_fd >= 0) close(h->kick_fd);
	memtraced_bpf__destroy(h->skel);
	pthread_mutex_destroy(&h->lock);
	pthread_mutex_destroy(&h->usdt_lock);
	pthread_cond_destroy(&h->passed_cond);
	free(h);
}

static struct tracer_host *create(const struct host_key *k, char *err, size_t errlen)
{
	struct tracer_host *h = calloc(1, sizeof(*h));
	if (!h) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	h->key = *k;
	h->epfd = h->kick_fd = -1;
	pthread_mutex_init(&h->lock, NULL);
	pthread_mutex_init(&h->usdt_lock, NULL);
	pthread_cond_init(&h->passed_cond, NULL);
	h->mode = k->mode; /* chosen by probing the kernel (tracer_load): no quiet fallback */
	h->skel = load(k, h->mode, err, errlen);
	if (!h->skel) goto fail;
	h->rb = ring_buffer__new(bpf_map__fd(h->skel->maps.events), dispatch, h, NULL);
	h->epfd = epoll_create1(EPOLL_CLOEXEC);
	h->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!h->rb || h->epfd < 0 || h->kick_fd < 0) {
		snprintf(err, errlen, "cannot set up the ring buffer consumer: %s", strerror(errno));
		goto fail;
	}
	struct epoll_event ring = {.events = EPOLLIN, .data.u32 = 0};
	struct epoll_event kick = {.events = EPOLLIN, .data.u32 = 1};
	if (epoll_ctl(h->epfd, EPOLL_CTL_ADD, ring_buffer__epoll_fd(h->rb), &ring) ||
	    epoll_ctl(h->epfd, EPOLL_CTL_ADD, h->kick_fd, &kick)) {
		snprintf(err, errlen, "cannot set up the ring buffer consumer: %s", strerror(errno));
		goto fail;
	}
	int e = pthread_create(&h->thread, NULL, host_main, h);
	if (!e) pthread_setname_np(h->thread, "mt-ring"); /* top -H, and the bench's stages */
	if (e) {
		h->thread = 0;
		snprintf(err, errlen, "cannot start the ring buffer thread: %s", strerror(e));
		goto fail;
	}
	return h;
fail:
	destroy(h);
	return NULL;
}

/* Zeroes a slot's per-CPU counters. */
static void zero_counts(struct tracer_host *h, uint32_t slot)
{
	int ncpus = libbpf_num_possible_cpus();
	if (ncpus <= 0) return;
	void *zeros = calloc((size_t)ncpus, sizeof(struct mt_counts));
	if (!zeros) return;
	bpf_map_update_elem(bpf_map__fd(h->skel->maps.slot_counts), &slot, zeros, BPF_ANY);
	free(zeros);
}

int host_take_slot(const struct host_key *k, struct tracer *t, char *err, size_t errlen)
{
	pthread_mutex_lock(&hosts_lock);
	struct tracer_host *h = hosts;
	while (h && !(same_key(&h->key, k) && h->nused < MT_MAX_SLOTS)) h = h->next;
	if (!h) {
		h = create(k, err, errlen);
		if (!h) {
			pthread_mutex_unlock(&hosts_lock);
			return -1;
		}
		h->next = hosts;
		hosts = h;
	}
	pthread_mutex_lock(&h->lock);
	uint32_t slot = 0;
	while (h->holder[slot]) slot++; /* nused < MT_MAX_SLOTS: there is one */
	uint16_t gen = (uint16_t)(h->gen[slot] + 1);
	if (!gen) gen = 1;
	h->gen[slot] = gen;
	uint32_t owner = slot | (uint32_t)gen << 16;
	h->holder[slot] = t;
	h->owner[slot] = owner;
	h->nused++;
	zero_counts(h, slot);
	struct mt_slot *sl = (struct mt_slot *)&h->skel->bss->slots[slot];
	__atomic_store_n(&sl->muted, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&sl->mapping_sampled, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&sl->thin, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&sl->tgid, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&sl->owner, owner, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&h->lock);
	pthread_mutex_unlock(&hosts_lock);
	t->host = h;
	t->owner = owner;
	t->mode = h->mode;
	return 0;
}

void host_set_tgid(struct tracer *t, pid_t pid)
{
	struct mt_slot *sl = (struct mt_slot *)&t->host->skel->bss->slots[MT_OWNER_SLOT(t->owner)];
	__atomic_store_n(&sl->tgid, (uint32_t)pid, __ATOMIC_RELEASE);
}

int host_set_python(struct tracer *t, const struct mt_py_layout *layout)
{
	if (!t->host) return -1;
	uint32_t slot = MT_OWNER_SLOT(t->owner);
	struct mt_py_layout l = *layout;
	l.owner = t->owner;
	return bpf_map_update_elem(bpf_map__fd(t->host->skel->maps.py_layout), &slot, &l, BPF_ANY);
}

void host_set_thin(struct tracer *t, unsigned k)
{
	if (!t->host) return;
	struct mt_slot *sl = (struct mt_slot *)&t->host->skel->bss->slots[MT_OWNER_SLOT(t->owner)];
	__atomic_store_n(&sl->thin, k, __ATOMIC_RELAXED);
}

void host_mute(struct tracer *t)
{
	if (!t->host) return;
	struct mt_slot *sl = (struct mt_slot *)&t->host->skel->bss->slots[MT_OWNER_SLOT(t->owner)];
	__atomic_store_n(&sl->muted, 1, __ATOMIC_RELEASE);
}

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

/* The mapping programs (tracepoints of the system calls: global, they find their slot by
 * tgid), attached by the host's first tracer. Under hosts_lock. */
static int attach_mappings(struct tracer_host *h, char *err, size_t errlen)
{
	struct bpf_program *progs[] = MAPPING_PROGS(h->skel);
	if (h->nmap_links || !bpf_program__autoload(progs[0])) return 0;
	if (tracefs_ready(err, errlen) < 0) return -1;
	for (size_t i = 0; i < sizeof progs / sizeof progs[0]; i++) {
		bool exits = progs[i] == h->skel->progs.mapping_exit;
		for (size_t k = 0; k < (exits ? sizeof mapping_exits / sizeof mapping_exits[0] : 1); k++) {
			struct bpf_link *l = exits ? bpf_program__attach_tracepoint(progs[i], "syscalls",
										   mapping_exits[k])
						   : bpf_program__attach(progs[i]);
			if (!l) {
				snprintf(err, errlen, "cannot attach %s (memory mappings; --no-mmap goes "
					 "without): %s", bpf_program__name(progs[i]), strerror(errno));
				for (int j = 0; j < h->nmap_links; j++) bpf_link__destroy(h->map_links[j]);
				h->nmap_links = 0;
				return -1;
			}
			h->map_links[h->nmap_links++] = l;
		}
	}
	return 0;
}

int host_start(struct tracer *t, char *err, size_t errlen)
{
	struct tracer_host *h = t->host;
	pthread_mutex_lock(&hosts_lock);
	int rc = attach_mappings(h, err, errlen);
	pthread_mutex_unlock(&hosts_lock);
	if (rc) return -1;
	uint32_t tgid = (uint32_t)t->pid;
	pthread_mutex_lock(&h->lock);
	rc = bpf_map_update_elem(bpf_map__fd(h->skel->maps.tgid_owner), &tgid, &t->owner, BPF_ANY);
	pthread_mutex_unlock(&h->lock);
	if (rc) {
		snprintf(err, errlen, "cannot register pid %d with the BPF program: %s", (int)t->pid,
			 strerror(errno));
		return -1;
	}
	t->started = true;
	return 0;
}

/* Removes the slot's blocks from the live map. */
static void purge_live(struct tracer_host *h, uint32_t owner)
{
	int fd = bpf_map__fd(h->skel->maps.live);
	struct mt_live_key key, next, *mine = NULL;
	size_t n = 0, cap = 0;
	bool have = false;
	while (bpf_map_get_next_key(fd, have ? &key : NULL, &next) == 0) {
		if (next.owner == owner) {
			if (n == cap) {
				size_t c = cap ? 2 * cap : 256;
				struct mt_live_key *m = realloc(mine, c * sizeof(*m));
				if (!m) break;
				mine = m;
				cap = c;
			}
			mine[n++] = next;
		}
		key = next;
		have = true;
	}
	for (size_t i = 0; i < n; i++) bpf_map_delete_elem(fd, &mine[i]);
	free(mine);
}

void host_release_slot(struct tracer *t)
{
	struct tracer_host *h = t->host;
	if (!h) return;
	uint32_t slot = MT_OWNER_SLOT(t->owner);
	pthread_mutex_lock(&hosts_lock);
	pthread_mutex_lock(&h->lock);
	struct mt_slot *sl = (struct mt_slot *)&h->skel->bss->slots[slot];
	__atomic_store_n(&sl->owner, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&sl->tgid, 0, __ATOMIC_RELEASE);
	h->holder[slot] = NULL;
	h->owner[slot] = 0;
	if (t->started) { /* the process's entry, unless a newer tracer of it took it over */
		uint32_t tgid = (uint32_t)t->pid, o;
		int fd = bpf_map__fd(h->skel->maps.tgid_owner);
		if (bpf_map_lookup_elem(fd, &tgid, &o) == 0 && o == t->owner)
			bpf_map_delete_elem(fd, &tgid);
	}
	pthread_mutex_unlock(&h->lock);
	bool last = --h->nused == 0;
	if (last) {
		struct tracer_host **p = &hosts;
		while (*p != h) p = &(*p)->next;
		*p = h->next;
	}
	pthread_mutex_unlock(&hosts_lock);
	if (last) destroy(h);
	else purge_live(h, t->owner);
	t->host = NULL;
}

void host_lock_delivery(struct tracer *t)
{
	pthread_mutex_lock(&t->host->lock);
}

void host_unlock_delivery(struct tracer *t)
{
	pthread_mutex_unlock(&t->host->lock);
}

int host_sync(struct tracer *t)
{
	struct tracer_host *h = t->host;
	if (!h) return -1;
	uint64_t want = atomic_fetch_add(&h->asked, 1) + 1;
	uint64_t one = 1;
	if (write(h->kick_fd, &one, sizeof one) < 0) return -1;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += SYNC_TIMEOUT_S;
	int rc = 0;
	pthread_mutex_lock(&h->lock);
	while (h->passed < want && rc == 0)
		rc = pthread_cond_timedwait(&h->passed_cond, &h->lock, &until);
	pthread_mutex_unlock(&h->lock);
	return rc == 0 ? 0 : -1;
}

void host_usdt_lock(struct tracer *t)
{
	if (t->host) pthread_mutex_lock(&t->host->usdt_lock);
}

void host_usdt_unlock(struct tracer *t)
{
	if (t->host) pthread_mutex_unlock(&t->host->usdt_lock);
}

struct memtraced_bpf *host_skel(struct tracer *t)
{
	return t->host ? t->host->skel : NULL;
}

double host_ring_fill(struct tracer *t)
{
	struct tracer_host *h = t->host;
	if (!h) return -1;
	int fd = bpf_map__fd(h->skel->maps.events);
	long page = sysconf(_SC_PAGESIZE);
	pthread_mutex_lock(&h->lock);
	for (int i = 0; i < 2 && fd >= 0; i++) { /* page 0: consumer position, page 1: producer */
		if (h->ring_pos[i]) continue;
		void *p = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd, i * page);
		if (p == MAP_FAILED) break;
		h->ring_pos[i] = p;
	}
	pthread_mutex_unlock(&h->lock);
	if (!h->ring_pos[0] || !h->ring_pos[1]) return -1;
	unsigned long cons = h->ring_pos[0][0], prod = h->ring_pos[1][0];
	double size = (double)bpf_map__max_entries(h->skel->maps.events);
	return size > 0 && prod >= cons ? (double)(prod - cons) / size : 0;
}
