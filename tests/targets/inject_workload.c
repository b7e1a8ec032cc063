/* A running process for tests/test_inject_trace.sh: what --inject must get exactly right.
 *
 *   inject_workload DIR
 *
 * Before DIR/go (memtraced attaches meanwhile): allocates blocks that stay allocated, and
 * parks three threads in blocking system calls (read on a pipe, epoll_wait, and the main
 * thread in nanosleep) so that the injection stops one of them. After DIR/go: wakes them (each
 * must see exactly its data, never EINTR), frees and reallocs the blocks from before the
 * injection, reallocs a block allocated after it, runs 8 threads with distinct sizes and
 * counts, dlopens PLUGIN.so (argv[2]) and calls its op_plugin_work(), which
 * allocates through its own GOT. Prints "truth op_NAME CALLS WORDS LIVE_WORDS" lines as
 * tests/targets/alloc_workload.cc does (tests/lib/exact.sh), "syscalls ok" when every blocked
 * call returned what it would have, and a checksum of its results; creates DIR/done, waits for
 * DIR/stop, exits 0. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))
#define NPRE 100
#define NTHREADS 8

static void *volatile sink;
static char dir[4096];

struct truth { const char *name; unsigned long calls, words, live_words; };
enum { T_REALLOC_PRE, T_REALLOC_SAMPLED_FROM, T_REALLOC_SAMPLED_TO, T_KEPT,
       T_THREAD_A, T_THREAD_B, T_THREAD_C, T_THREAD_D, T_THREAD_E, T_THREAD_F, T_THREAD_G,
       T_THREAD_H, T_PLUGIN_WORK, T_COUNT };
static struct truth truth[T_COUNT] = {
	{"op_realloc_pre"}, {"op_realloc_sampled_from"}, {"op_realloc_sampled_to"}, {"op_kept"},
	{"op_thread_a"}, {"op_thread_b"}, {"op_thread_c"}, {"op_thread_d"}, {"op_thread_e"},
	{"op_thread_f"}, {"op_thread_g"}, {"op_thread_h"}, {"op_plugin_work"},
};
static pthread_mutex_t truth_lock = PTHREAD_MUTEX_INITIALIZER;

static void account(int t, size_t bytes, int live)
{
	pthread_mutex_lock(&truth_lock);
	truth[t].calls++;
	truth[t].words += (bytes + 7) / 8;
	if (live) truth[t].live_words += (bytes + 7) / 8;
	pthread_mutex_unlock(&truth_lock);
}

static int exists(const char *name)
{
	char p[4200];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

static void touch(const char *name)
{
	char p[4200];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	if (f) fclose(f);
}

/* ---- threads parked in blocking calls while the injection happens ---- */
static int read_pipe[2], epoll_pipe[2];
static volatile int read_ok, epoll_ok;

static void *reader(void *arg)
{
	char c = 0;
	ssize_t n = read(read_pipe[0], &c, 1); /* EINTR would be a bug of the injector */
	read_ok = n == 1 && c == 'r';
	if (!read_ok) fprintf(stderr, "read returned %zd (%s), byte %d\n", n, strerror(errno), c);
	return NULL;
}

static void *epoller(void *arg)
{
	int ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN}, got;
	epoll_ctl(ep, EPOLL_CTL_ADD, epoll_pipe[0], &ev);
	int n = epoll_wait(ep, &got, 1, -1);
	epoll_ok = n == 1;
	if (!epoll_ok) fprintf(stderr, "epoll_wait returned %d (%s)\n", n, strerror(errno));
	return NULL;
}

/* ---- the operations ---- */
static void *pre[NPRE], *pre_big;
static unsigned long checksum;

NOINLINE void *op_realloc_pre(void *p)
{
	p = realloc(p, 2000); /* an unsampled block from before: only the new one is sampled */
	account(T_REALLOC_PRE, 2000, 0);
	return p;
}

NOINLINE void *op_realloc_sampled_from(void) { void *p = malloc(64); account(T_REALLOC_SAMPLED_FROM, 64, 0); return p; }
NOINLINE void *op_realloc_sampled_to(void *p) { p = realloc(p, 4096); account(T_REALLOC_SAMPLED_TO, 4096, 0); return p; }
NOINLINE void *op_kept(void) { void *p = calloc(3, 40); account(T_KEPT, 120, 1); return p; }

#define THREAD_OP(letter, idx)                                                  \
	NOINLINE void op_thread_##letter(void)                                  \
	{                                                                       \
		size_t size = 16 * (idx + 1);                                   \
		for (int i = 0; i < 50 * (idx + 1); i++) {                      \
			char *p = malloc(size);                                 \
			sink = p; /* escapes: the compiler keeps the pair */    \
			p[0] = (char)i;                                         \
			__atomic_fetch_add(&checksum, (unsigned char)p[0], __ATOMIC_RELAXED); \
			account(T_THREAD_A + idx, size, 0);                     \
			free(p);                                                \
		}                                                               \
	}
THREAD_OP(a, 0) THREAD_OP(b, 1) THREAD_OP(c, 2) THREAD_OP(d, 3)
THREAD_OP(e, 4) THREAD_OP(f, 5) THREAD_OP(g, 6) THREAD_OP(h, 7)
static void (*const thread_ops[NTHREADS])(void) = {
	op_thread_a, op_thread_b, op_thread_c, op_thread_d,
	op_thread_e, op_thread_f, op_thread_g, op_thread_h,
};
static void *worker(void *arg)
{
	thread_ops[(long)arg]();
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: inject_workload DIR PLUGIN.so\n");
		return 2;
	}
	snprintf(dir, sizeof dir, "%s", argv[1]);
	for (int i = 0; i < NPRE; i++) pre[i] = malloc(40 + i);
	pre_big = malloc(1000);
	if (pipe(read_pipe) || pipe(epoll_pipe)) return 2;
	pthread_t tr, te;
	pthread_create(&tr, NULL, reader, NULL);
	pthread_create(&te, NULL, epoller, NULL);
	touch("ready");
	int slept_ok = 1;
	while (!exists("go")) { /* the main thread is in nanosleep most of the time */
		struct timespec ts = {0, 20 * 1000 * 1000};
		if (nanosleep(&ts, NULL) != 0) slept_ok = 0; /* EINTR would be the injector's */
	}
	if (write(read_pipe[1], "r", 1) != 1 || write(epoll_pipe[1], "e", 1) != 1) return 2;
	pthread_join(tr, NULL);
	pthread_join(te, NULL);

	for (int i = 0; i < NPRE; i++) free(pre[i]); /* allocated before: nothing to record */
	pre_big = op_realloc_pre(pre_big);
	free(pre_big);
	void *p = op_realloc_sampled_to(op_realloc_sampled_from());
	free(p);
	sink = op_kept();
	pthread_t w[NTHREADS];
	for (long i = 0; i < NTHREADS; i++) pthread_create(&w[i], NULL, worker, (void *)i);
	for (int i = 0; i < NTHREADS; i++) pthread_join(w[i], NULL);
	void *h = dlopen(argv[2], RTLD_NOW);
	unsigned long (*work)(void) = h ? (unsigned long (*)(void))dlsym(h, "op_plugin_work") : NULL;
	if (!work) {
		fprintf(stderr, "cannot load %s: %s\n", argv[2], dlerror());
		return 2;
	}
	unsigned long words = work();
	truth[T_PLUGIN_WORK].calls = 20;
	truth[T_PLUGIN_WORK].words = words;

	for (int t = 0; t < T_COUNT; t++)
		printf("truth %s %lu %lu %lu\n", truth[t].name, truth[t].calls, truth[t].words,
		       truth[t].live_words);
	printf("syscalls %s\n", read_ok && epoll_ok && slept_ok ? "ok" : "interrupted");
	printf("checksum %lu\n", checksum);
	fflush(stdout);
	touch("done");
	while (!exists("stop")) usleep(20000);
	return 0;
}
