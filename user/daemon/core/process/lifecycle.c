/* The lifecycle watcher (see lifecycle.h): BPF events, or the /proc fallback. */
#include "lifecycle.h"
#include "door/door.h"
#include "target.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "lifecycle.skel.h"
#include "common/msg.h"
#include "protocol/facts.h"
#include "parser/parser.h"
#include "parser/protocol_check.h"

#define MAX_WATCHED 4096
#define FALLBACK_PERIOD_NS 200000000ULL /* /proc checks at most every 200 ms */

struct watched {
	pid_t pid;
	struct bpf_link *dl_link;  /* uprobe on its ld.so's _dl_debug_state */
	int dl_tries;              /* attempts left to find its ld.so (an exec in progress has
	                              not mapped it yet), 0: attached or given up */
	uint64_t dl_last_try_ns;
	dev_t dl_dev;              /* the ld.so file dl_link probes */
	ino_t dl_ino;
	dev_t exe_dev;             /* fallback: identity of /proc/PID/exe ... */
	ino_t exe_ino;
	uint64_t maps_sig;         /* ... and of the set of mapped files */
};

struct lifecycle {
	struct lifecycle_bpf *skel;   /* NULL: the /proc fallback */
	struct ring_buffer *rb;
	struct watched *w;
	int nw, capw;
	struct lifecycle_event *q;    /* queue: q[head..n) */
	size_t head, n, cap;
	uint64_t lost;                /* events past LC_QUEUE_MAX */
	uint64_t last_fallback_ns;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Events between two drains: past this many (a fork loop while the main loop was busy) the
 * rest are counted as lost instead of growing the queue without bound (issue 46). */
#define LC_QUEUE_MAX 65536

static void push(struct lifecycle *lc, enum lc_kind kind, pid_t pid, pid_t child, uint64_t t)
{
	if (lc->head > 0 && lc->head == lc->n) lc->head = lc->n = 0;
	if (lc->n - lc->head >= LC_QUEUE_MAX) {
		lc->lost++;
		return;
	}
	if (lc->n == lc->cap) {
		size_t cap = lc->cap ? lc->cap * 2 : 64;
		struct lifecycle_event *q = realloc(lc->q, cap * sizeof(*q));
		if (!q) return; /* out of memory: the event is lost */
		lc->q = q;
		lc->cap = cap;
	}
	lc->q[lc->n++] = (struct lifecycle_event){.kind = kind, .pid = pid, .child = child,
						  .time_ns = t};
}

static int on_record(void *ctx, void *data, size_t len)
{
	struct lifecycle *lc = ctx;
	const struct lc_event *e = data;
	if (len < sizeof(*e) || e->kind < LC_EXEC || e->kind > LC_DLOPEN) return 0;
	push(lc, (enum lc_kind)e->kind, (pid_t)e->pid, (pid_t)e->child, e->time_ns);
	return 0;
}

static int quiet_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap) { return 0; }

struct lifecycle *lifecycle_open(bool follow_forks, bool all_execs, char *note, size_t notelen)
{
	if (notelen) note[0] = 0;
	struct lifecycle *lc = calloc(1, sizeof(*lc));
	if (!lc) return NULL;
	const char *force = getenv("MEMTRACED_LIFECYCLE");
	if (force && strcmp(force, "proc") == 0) {
		snprintf(note, notelen, "lifecycle: /proc fallback forced (MEMTRACED_LIFECYCLE=proc)");
		return lc;
	}
	libbpf_print_fn_t old = libbpf_set_print(quiet_libbpf);
	struct lifecycle_bpf *sk = lifecycle_bpf__open();
	int e = sk ? 0 : -errno;
	if (sk) {
		sk->rodata->follow_forks = follow_forks;
		sk->rodata->all_execs = all_execs;
		/* the dlopen probe is attached per process (lifecycle_watch) */
		e = lifecycle_bpf__load(sk);
		if (!e) {
			sk->links.on_exec = bpf_program__attach(sk->progs.on_exec);
			sk->links.on_fork = bpf_program__attach(sk->progs.on_fork);
			if (!sk->links.on_exec || !sk->links.on_fork) e = -errno;
		}
	}
	libbpf_set_print(old);
	if (!e) {
		lc->rb = ring_buffer__new(bpf_map__fd(sk->maps.lc_events), on_record, lc, NULL);
		if (!lc->rb) e = -errno;
	}
	if (e) {
		snprintf(note, notelen, "lifecycle: the BPF watcher cannot run (%s): exec and dlopen "
			 "are detected by polling /proc, forks are not seen", strerror(-e));
		lifecycle_bpf__destroy(sk);
		return lc;
	}
	lc->skel = sk;
	return lc;
}

bool lifecycle_uses_bpf(const struct lifecycle *lc) { return lc && lc->skel; }

int lifecycle_fd(const struct lifecycle *lc)
{
	return lc && lc->rb ? ring_buffer__epoll_fd(lc->rb) : -1;
}

static struct watched *find(struct lifecycle *lc, pid_t pid)
{
	for (int i = 0; i < lc->nw; i++)
		if (lc->w[i].pid == pid) return &lc->w[i];
	return NULL;
}

/* Fallback signature of the mapped files: a hash of their names (order-independent enough:
 * maps lists them by address, which only changes when mappings do). */
static uint64_t maps_signature(pid_t pid)
{
	FILE *f = door_proc_fopen(pid, "maps");
	if (!f) return 0;
	uint64_t h = 1469598103934665603ULL;
	char line[4352];
	while (fgets(line, sizeof line, f)) {
		char *p = strchr(line, '/');
		if (!p) continue;
		for (; *p && *p != '\n'; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
		h = (h ^ '\n') * 1099511628211ULL;
	}
	fclose(f);
	return h;
}

/* The identity of pid's executable; 0 while it is still ours (-- CMD: its exec in progress). */
static void exe_identity(pid_t pid, dev_t *dev, ino_t *ino)
{
	char path[64];
	struct stat st, self;
	snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
	if (stat(path, &st) == 0) {
		bool ours = stat("/proc/self/exe", &self) == 0 && self.st_dev == st.st_dev &&
			    self.st_ino == st.st_ino;
		*dev = ours ? 0 : st.st_dev;
		*ino = ours ? 0 : st.st_ino;
	}
}

/* The ld.so pid maps: the mapped file whose name starts with "ld-" (ld-linux-x86-64.so.2). */
static int find_ldso(pid_t pid, char *out, size_t outlen)
{
	FILE *f = door_proc_fopen(pid, "maps");
	if (!f) return -1;
	char line[4352];
	int rc = -1;
	while (rc && fgets(line, sizeof line, f)) {
		char *p = strchr(line, '/');
		if (!p) continue;
		p[strcspn(p, "\n")] = 0;
		const char *base = strrchr(p, '/') + 1;
		if (strncmp(base, "ld-", 3) == 0 && strstr(base, ".so") && !strstr(p, " (deleted)")) {
			snprintf(out, outlen, "/proc/%d/root%s", (int)pid, p);
			rc = 0;
		}
	}
	fclose(f);
	return rc;
}

#define DL_TRIES 40                    /* ... every 50 ms: 2 s */
#define DL_RETRY_NS 50000000ULL

/* The dlopen probe of w. An exec still in progress (-- CMD just released) has not mapped its
 * ld.so yet: tried again from lifecycle_drain. A static executable never maps one. */
static int attach_dl(struct lifecycle *lc, struct watched *w, char *note, size_t notelen)
{
	char ldso[4200];
	w->dl_last_try_ns = mono_ns();
	if (find_ldso(w->pid, ldso, sizeof ldso) < 0) {
		if (--w->dl_tries > 0) return 0;
		snprintf(note, notelen, "PID %d maps no ld.so (static executable?): dlopen not followed",
			 (int)w->pid);
		return 0;
	}
	w->dl_tries = 0;
	/* the file itself, opened through the door (resolved inside the target's root): the
	 * checks below and the probe are on that very file */
	char pbuf[64];
	int pfd;
	const char *at = door_probe_path(ldso, &pfd, pbuf, sizeof pbuf);
	struct stat st;
	bool known = pfd >= 0 && fstat(pfd, &st) == 0;
	/* After an exec that maps the same ld.so file the probe is still in place: it filters on
	 * the task, whose new image the kernel probes as it maps the file (and -- CMD is probed
	 * before its exec through the ld.so it inherits from us). Renewing it would cost two
	 * uprobe (un)registrations, and miss a dlopen made meanwhile. */
	if (w->dl_link && known && st.st_dev == w->dl_dev && st.st_ino == w->dl_ino) goto out;
	bpf_link__destroy(w->dl_link);
	w->dl_link = NULL;
	w->dl_dev = known ? st.st_dev : 0;
	w->dl_ino = known ? st.st_ino : 0;
	/* the parser finds the function in ld.so's file (libbpf would parse it here, as root);
	 * the daemon puts the probe there only inside the file's code */
	struct elf_facts facts;
	char ferr[256] = "";
	if (pfacts_of(w->pid, ldso, "_dl_debug_state", &facts, ferr, sizeof ferr) != 0 ||
	    !facts.sym_found || !known || !elf_offset_is_code(pfd, facts.sym_offset)) {
		snprintf(note, notelen, "cannot find _dl_debug_state in %s (%s): dlopen not followed "
			 "for PID %d", ldso, ferr[0] ? ferr : "no such function in its code", (int)w->pid);
		goto out;
	}
	libbpf_print_fn_t old = libbpf_set_print(quiet_libbpf);
	w->dl_link = bpf_program__attach_uprobe_opts(lc->skel->progs.on_dl_debug_state, w->pid,
						     at, facts.sym_offset, NULL);
	int e = errno;
	libbpf_set_print(old);
	if (!w->dl_link)
		snprintf(note, notelen, "cannot probe _dl_debug_state in %s (%s): dlopen not followed "
			 "for PID %d", ldso, strerror(e), (int)w->pid);
out:
	if (pfd >= 0) close(pfd);
	/* a process that is gone follows no dlopen: nothing to say (a fork loop's children, each
	 * gone before its probe, said a line each) */
	char gone[160];
	if (notelen && note[0] && target_check_pid(w->pid, gone, sizeof gone) != 0) note[0] = 0;
	return 0;
}

int lifecycle_watch(struct lifecycle *lc, pid_t pid, char *note, size_t notelen)
{
	if (notelen) note[0] = 0;
	struct watched *w = find(lc, pid);
	if (!w) {
		if (lc->nw == MAX_WATCHED) {
			snprintf(note, notelen, "more than %d processes watched", MAX_WATCHED);
			return -1;
		}
		if (lc->nw == lc->capw) {
			int cap = lc->capw ? lc->capw * 2 : 16;
			struct watched *grown = realloc(lc->w, cap * sizeof(*grown));
			if (!grown) {
				snprintf(note, notelen, "out of memory");
				return -1;
			}
			lc->w = grown;
			lc->capw = cap;
		}
		w = &lc->w[lc->nw++];
		memset(w, 0, sizeof(*w));
		w->pid = pid;
	}
	exe_identity(pid, &w->exe_dev, &w->exe_ino);
	w->maps_sig = maps_signature(pid);
	if (!lc->skel) return 0;
	__u32 key = (__u32)pid, one = 1;
	if (bpf_map_update_elem(bpf_map__fd(lc->skel->maps.watched), &key, &one, BPF_ANY) < 0) {
		snprintf(note, notelen, "cannot watch PID %d: %s", (int)pid, strerror(errno));
		return -1;
	}
	w->dl_tries = DL_TRIES; /* after an exec: the new image's ld.so (attach_dl keeps the same) */
	return attach_dl(lc, w, note, notelen);
}

/* Removing a uprobe takes 100-200 ms (the kernel waits for a grace period): a process that
 * exited has its watch removed on a thread of its own, not in the main loop, where a fork's
 * child waited for it, held. lifecycle_close waits for them. */
static pthread_mutex_t destroy_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t destroy_done = PTHREAD_COND_INITIALIZER;
static int destroying;

static void *destroy_main(void *link)
{
	bpf_link__destroy(link);
	pthread_mutex_lock(&destroy_lock);
	destroying--;
	pthread_cond_broadcast(&destroy_done);
	pthread_mutex_unlock(&destroy_lock);
	return NULL;
}

static void destroy_later(struct bpf_link *link)
{
	if (!link) return;
	pthread_attr_t a;
	pthread_t th;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_mutex_lock(&destroy_lock);
	destroying++;
	pthread_mutex_unlock(&destroy_lock);
	if (pthread_create(&th, &a, destroy_main, link) != 0) destroy_main(link);
	pthread_attr_destroy(&a);
}

void lifecycle_unwatch(struct lifecycle *lc, pid_t pid)
{
	struct watched *w = find(lc, pid);
	if (lc->skel) {
		__u32 key = (__u32)pid;
		bpf_map_delete_elem(bpf_map__fd(lc->skel->maps.watched), &key);
	}
	if (!w) return;
	destroy_later(w->dl_link); /* no event of pid's is passed on any more (the map above) */
	*w = lc->w[--lc->nw];
}

static void fallback_poll(struct lifecycle *lc)
{
	uint64_t now = mono_ns();
	if (now - lc->last_fallback_ns < FALLBACK_PERIOD_NS) return;
	lc->last_fallback_ns = now;
	for (int i = 0; i < lc->nw; i++) {
		struct watched *w = &lc->w[i];
		dev_t dev = w->exe_dev;
		ino_t ino = w->exe_ino;
		exe_identity(w->pid, &dev, &ino);
		uint64_t sig = maps_signature(w->pid);
		if (!w->exe_ino) { /* not known yet */
			w->exe_dev = dev;
			w->exe_ino = ino;
		} else if (dev != w->exe_dev || ino != w->exe_ino) {
			w->exe_dev = dev;
			w->exe_ino = ino;
			w->maps_sig = sig;
			push(lc, LC_EXEC, w->pid, 0, now);
		} else if (sig && sig != w->maps_sig) {
			w->maps_sig = sig;
			push(lc, LC_DLOPEN, w->pid, 0, now);
		}
	}
}

void lifecycle_drain(struct lifecycle *lc)
{
	if (!lc->rb) {
		fallback_poll(lc);
		return;
	}
	ring_buffer__consume(lc->rb);
	uint64_t now = mono_ns();
	for (int i = 0; i < lc->nw; i++) {
		struct watched *w = &lc->w[i];
		char note[512] = "";
		if (w->dl_tries > 0 && now - w->dl_last_try_ns >= DL_RETRY_NS) {
			attach_dl(lc, w, note, sizeof note);
			if (note[0]) msg_say("note: %s", note);
		}
	}
}

uint64_t lifecycle_exec_time(struct lifecycle *lc, pid_t pid)
{
	lifecycle_drain(lc);
	for (size_t i = lc->head; i < lc->n; i++)
		if (lc->q[i].kind == LC_EXEC && lc->q[i].pid == pid) return lc->q[i].time_ns;
	return 0;
}

uint64_t lifecycle_take_exec(struct lifecycle *lc, pid_t pid)
{
	lifecycle_drain(lc);
	for (size_t i = lc->head; i < lc->n; i++) {
		if (lc->q[i].kind != LC_EXEC || lc->q[i].pid != pid) continue;
		uint64_t t = lc->q[i].time_ns;
		memmove(&lc->q[i], &lc->q[i + 1], (lc->n - i - 1) * sizeof(lc->q[0]));
		lc->n--;
		return t;
	}
	return 0;
}

bool lifecycle_next(struct lifecycle *lc, struct lifecycle_event *ev)
{
	if (lc->head == lc->n) return false;
	*ev = lc->q[lc->head++];
	return true;
}

uint64_t lifecycle_lost(const struct lifecycle *lc)
{
	return (lc->skel ? lc->skel->bss->lost_events : 0) + lc->lost;
}

void lifecycle_close(struct lifecycle *lc)
{
	if (!lc) return;
	for (int i = 0; i < lc->nw; i++) bpf_link__destroy(lc->w[i].dl_link);
	pthread_mutex_lock(&destroy_lock);
	while (destroying) pthread_cond_wait(&destroy_done, &destroy_lock);
	pthread_mutex_unlock(&destroy_lock);
	free(lc->w);
	ring_buffer__free(lc->rb);
	lifecycle_bpf__destroy(lc->skel);
	free(lc->q);
	free(lc);
}
