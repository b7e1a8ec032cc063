/* Targets that --inject must not harm (tests/test_inject_safety.sh, issue 20). Each prints
 * "ready PID", runs until the file named by argv[2] exists, then prints "result MODE ok ..."
 * and exits 0, or "result MODE FAILED why" and exits 1. Modes:
 *   thread_seccomp  a worker installs a seccomp filter on itself only (no TSYNC) that kills
 *                   the process on openat, then waits in read(); the main thread computes
 *   malloc_loop     the main thread loops on malloc/free of 1-60 KiB blocks, three threads
 *                   wait in pthread_cond_wait: no thread sits in a non-futex system call
 *   recv accept read_sock poll select msgrcv clock_nanosleep inotify
 *                   the main thread blocks in that call (the socket ones with SO_RCVTIMEO, 60 s)
 *                   until a helper thread, seeing the stop file, lets it go; any EINTR fails
 *   io_uring        the main thread waits in io_uring_enter(GETEVENTS) for the completion of a
 *                   read of a pipe that the helper writes (issue 34: a bare EINTR there)
 *   deepbind        a plugin loaded with RTLD_DEEPBIND has its own malloc/free; blocks it
 *                   allocated before the injection are freed by it after, and the reverse
 *   slow_dlopen     a thread dlopens and dlcloses argv[3] again and again, whose constructor
 *                   sleeps 1.5 s holding ld.so's lock; the main thread waits in read() */
#include <dlfcn.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static const char *stop_file, *mode;
static int fds[2];          /* the pair the main thread waits on and the helper writes */
static int lfd, port, msqid; /* accept: the listening socket; msgrcv: the queue */
static char watch_dir[256];

static int stopped(void)
{
	return access(stop_file, F_OK) == 0;
}

static void wait_stop(void)
{
	while (!stopped()) usleep(20000);
}

static int fail(const char *what, int err)
{
	printf("result %s FAILED %s: %s\n", mode, what, strerror(err));
	return 1;
}

/* ---- thread_seccomp ---- */
/* Confines the calling thread only (no TSYNC): openat kills the process. */
static void confine_thread_openat(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { 4, f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
		perror("seccomp");
		exit(3);
	}
}

static void *confined_worker(void *arg)
{
	confine_thread_openat();
	char c;
	return (void *)(long)read(fds[0], &c, 1);
}

static int run_thread_seccomp(void)
{
	pthread_t th;
	if (pipe(fds) != 0) return fail("pipe", errno);
	pthread_create(&th, NULL, confined_worker, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	volatile double x = 1;
	while (!stopped())
		for (int i = 0; i < 1000000; i++) x = x * 1.0000001 + 1e-9;
	if (write(fds[1], "x", 1) != 1) return fail("write", errno);
	void *r;
	pthread_join(th, &r);
	if ((long)r != 1) return fail("worker read", EIO);
	printf("result %s ok\n", mode);
	return 0;
}

/* ---- malloc_loop ---- */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int done;

static void *cond_waiter(void *arg)
{
	pthread_mutex_lock(&mu);
	while (!done) pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	return NULL;
}

static int run_malloc_loop(void)
{
	pthread_t th[3];
	for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, cond_waiter, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	unsigned long n = 0, seed = 12345;
	void *keep[64] = { 0 };
	while (!stopped()) {
		for (int i = 0; i < 10000; i++, n++) {
			seed = seed * 6364136223846793005UL + 1442695040888963407UL;
			size_t size = 1024 + (seed >> 33) % (60 * 1024);
			unsigned k = (seed >> 20) % 64;
			free(keep[k]);
			keep[k] = malloc(size);
			if (!keep[k]) return fail("malloc", ENOMEM);
			((char *)keep[k])[0] = (char)k;
			((char *)keep[k])[size - 1] = (char)k;
		}
	}
	for (int k = 0; k < 64; k++) free(keep[k]);
	pthread_mutex_lock(&mu);
	done = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
	printf("result %s ok %lu\n", mode, n);
	return 0;
}

/* ---- blocking calls that return a bare EINTR when merely woken ---- */
static void *releaser(void *arg)
{
	wait_stop();
	if (strcmp(mode, "accept") == 0) {
		int c = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
		                         .sin_addr.s_addr = htonl(0x7f000001) };
		if (connect(c, (void *)&a, sizeof a) != 0) perror("connect");
		sleep(1);
		close(c);
	} else if (strcmp(mode, "msgrcv") == 0) {
		struct { long type; char text[8]; } m = { 1, "go" };
		msgsnd(msqid, &m, sizeof m.text, 0);
	} else if (strcmp(mode, "inotify") == 0) {
		char p[300];
		snprintf(p, sizeof p, "%s/new", watch_dir);
		FILE *f = fopen(p, "w");
		if (f) fclose(f);
	} else if (write(fds[1], "x", 1) != 1) {
		perror("write");
	}
	return NULL;
}

/* A read of fds[0] through an io_uring of raw system calls (no liburing), waited for in
 * io_uring_enter: its result, or -1 with errno (EINTR included: a wake-up we caused). */
static long uring_read(char *buf)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof p);
	int rfd = (int)syscall(SYS_io_uring_setup, 4, &p);
	if (rfd < 0) return -1;
	size_t sq_sz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	size_t cq_sz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	int single = p.features & IORING_FEAT_SINGLE_MMAP;
	if (single) sq_sz = cq_sz = sq_sz > cq_sz ? sq_sz : cq_sz;
	char *sq = mmap(NULL, sq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, rfd,
			IORING_OFF_SQ_RING);
	char *cq = single ? sq : mmap(NULL, cq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
				      rfd, IORING_OFF_CQ_RING);
	struct io_uring_sqe *sqes = mmap(NULL, p.sq_entries * sizeof *sqes, PROT_READ | PROT_WRITE,
					 MAP_SHARED | MAP_POPULATE, rfd, IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) return -1;
	unsigned *tail = (unsigned *)(sq + p.sq_off.tail), mask = *(unsigned *)(sq + p.sq_off.ring_mask);
	unsigned t = *tail, i = t & mask;
	memset(&sqes[i], 0, sizeof sqes[i]);
	sqes[i].opcode = IORING_OP_READ;
	sqes[i].fd = fds[0];
	sqes[i].addr = (unsigned long)buf;
	sqes[i].len = 1;
	((unsigned *)(sq + p.sq_off.array))[i] = i;
	__atomic_store_n(tail, t + 1, __ATOMIC_RELEASE);
	if (syscall(SYS_io_uring_enter, rfd, 1, 0, 0, NULL, 0) != 1) return -1;
	long r = syscall(SYS_io_uring_enter, rfd, 0, 1, IORING_ENTER_GETEVENTS, NULL, 0);
	if (r < 0) return -1;
	unsigned head = *(unsigned *)(cq + p.cq_off.head);
	if (head == __atomic_load_n((unsigned *)(cq + p.cq_off.tail), __ATOMIC_ACQUIRE)) {
		errno = ENODATA; /* woken with no completion: not what the program asked for */
		return -1;
	}
	struct io_uring_cqe *c = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	r = c[head & *(unsigned *)(cq + p.cq_off.ring_mask)].res;
	if (r < 0) { errno = (int)-r; return -1; }
	return r;
}

static void set_timeout(int fd)
{
	struct timeval tv = { 60, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static int run_blocking(void)
{
	int sock = !strcmp(mode, "recv") || !strcmp(mode, "read_sock");
	if (sock ? socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0 : pipe(fds) != 0)
		return fail("pipe", errno);
	if (sock) set_timeout(fds[0]);
	if (!strcmp(mode, "accept")) {
		lfd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
		socklen_t len = sizeof a;
		if (bind(lfd, (void *)&a, sizeof a) != 0 || listen(lfd, 4) != 0 ||
		    getsockname(lfd, (void *)&a, &len) != 0)
			return fail("listen", errno);
		port = ntohs(a.sin_port);
		set_timeout(lfd);
	}
	if (!strcmp(mode, "msgrcv") && (msqid = msgget(IPC_PRIVATE, 0600)) < 0)
		return fail("msgget", errno);
	int ino = -1;
	if (!strcmp(mode, "inotify")) {
		snprintf(watch_dir, sizeof watch_dir, "%s.dir", stop_file);
		ino = inotify_init1(0);
		if (ino < 0 || inotify_add_watch(ino, watch_dir, IN_CREATE) < 0)
			return fail("inotify", errno);
	}
	pthread_t th;
	pthread_create(&th, NULL, releaser, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	long r;
	char buf[sizeof(struct inotify_event) + 256];
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!strcmp(mode, "recv")) r = recv(fds[0], buf, 1, 0);
	else if (!strcmp(mode, "read_sock")) r = read(fds[0], buf, 1);
	else if (!strcmp(mode, "accept")) r = accept(lfd, NULL, NULL);
	else if (!strcmp(mode, "poll")) {
		struct pollfd p = { fds[0], POLLIN, 0 };
		r = poll(&p, 1, -1);
	} else if (!strcmp(mode, "select")) {
		fd_set s;
		FD_ZERO(&s);
		FD_SET(fds[0], &s);
		r = select(fds[0] + 1, &s, NULL, NULL, NULL);
	} else if (!strcmp(mode, "msgrcv")) {
		struct { long type; char text[8]; } m;
		r = msgrcv(msqid, &m, sizeof m.text, 0, 0);
		msgctl(msqid, IPC_RMID, NULL);
	} else if (!strcmp(mode, "clock_nanosleep")) {
		/* sleeps until the stop file is there: 0.5 s at a time, each one whole */
		r = 0;
		while (!stopped()) {
			struct timespec t = { 0, 500000000 };
			int e = clock_nanosleep(CLOCK_MONOTONIC, 0, &t, NULL);
			if (e != 0) { r = -1; errno = e; break; }
		}
		if (r == 0) r = read(fds[0], buf, 1);
	} else if (!strcmp(mode, "inotify")) r = read(ino, buf, sizeof buf);
	else if (!strcmp(mode, "io_uring")) r = uring_read(buf);
	else return fail("unknown mode", EINVAL);
	int e = errno;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (r < 0) return fail(mode, e);
	pthread_join(th, NULL);
	printf("result %s ok r=%ld\n", mode, r);
	return 0;
}

/* ---- slow_dlopen ---- */
static const char *slow_plugin;

static void *slow_loader(void *arg)
{
	while (!stopped()) {
		void *h = dlopen(slow_plugin, RTLD_NOW);
		if (!h) {
			fprintf(stderr, "dlopen: %s\n", dlerror());
			return (void *)1L;
		}
		dlclose(h);
	}
	return NULL;
}

static int run_slow_dlopen(const char *plugin)
{
	slow_plugin = plugin;
	if (pipe(fds) != 0) return fail("pipe", errno);
	pthread_t th, rel;
	pthread_create(&th, NULL, slow_loader, NULL);
	pthread_create(&rel, NULL, releaser, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	char c;
	long r = read(fds[0], &c, 1);
	int e = errno;
	void *lr;
	pthread_join(th, &lr);
	pthread_join(rel, NULL);
	if (r != 1) return fail("read", r < 0 ? e : EIO);
	if (lr) return fail("dlopen", EIO);
	printf("result %s ok\n", mode);
	return 0;
}

/* ---- seccomp_dlopen ---- */
/* A thread confined by a filter that kills on openat allocates all along, while the main
 * thread, once STOPFILE.go appears, dlopens PLUGIN (built with DT_RUNPATH $ORIGIN), which
 * dlopens libsampler_plugin_leaf.so by bare name: the sampler cannot wrap that call, and the
 * walk for the leaf must not run on the confined thread (issue 34). */
static void *confined_allocator(void *arg)
{
	(void)arg;
	confine_thread_openat();
	while (!stopped()) {
		for (int i = 0; i < 100; i++) {
			char *volatile p = malloc(4096 + i); /* volatile: the pair is not elided */
			p[0] = 1;
			free(p);
		}
		usleep(1000);
	}
	return (void *)1L;
}

static int run_seccomp_dlopen(const char *plugin)
{
	char go[300];
	snprintf(go, sizeof go, "%s.go", stop_file);
	pthread_t th;
	pthread_create(&th, NULL, confined_allocator, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (access(go, F_OK) != 0 && !stopped()) usleep(2000);
	void *h = dlopen(plugin, RTLD_LAZY); /* its jemalloc calls resolve only with jemalloc */
	void *(*load)(const char *) = h ? (void *(*)(const char *))dlsym(h, "sampler_plugin_dlopen") : NULL;
	if (!load) {
		printf("result %s FAILED dlopen: %s\n", mode, dlerror());
		return 1;
	}
	if (!load("libsampler_plugin_leaf.so")) return fail("dlopen leaf", ENOENT);
	printf("loaded\n");
	fflush(stdout);
	wait_stop();
	void *r;
	pthread_join(th, &r);
	if ((long)r != 1) return fail("confined thread", EIO);
	printf("result %s ok\n", mode);
	return 0;
}

/* ---- deepbind ---- */
static int run_deepbind(const char *plugin)
{
	void *h = dlopen(plugin, RTLD_NOW | RTLD_DEEPBIND);
	if (!h) {
		printf("result %s FAILED dlopen: %s\n", mode, dlerror());
		return 1;
	}
	void *(*keep)(size_t) = (void *(*)(size_t))dlsym(h, "own_alloc_keep");
	int (*release)(void) = (int (*)(void))dlsym(h, "own_alloc_release");
	long (*own_count)(void) = (long (*)(void))dlsym(h, "own_alloc_count");
	if (!keep || !release || !own_count) return fail("dlsym", ENOENT);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	unsigned long rounds = 0;
	/* blocks kept across the attach and the detach: each released by the plugin's free */
	while (!stopped()) {
		for (int i = 0; i < 200; i++)
			if (!keep(16 + (i * 37) % 3000)) return fail("own_alloc_keep", ENOMEM);
		usleep(100000); /* held: the attach and the detach fall between keep and release */
		if (release() != 0) return fail("own_alloc_release", EINVAL);
		rounds++;
	}
	if (release() != 0) return fail("own_alloc_release", EINVAL);
	printf("result %s ok rounds=%lu own_allocs=%ld\n", mode, rounds, own_count());
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s MODE STOP_FILE [PLUGIN]\n", argv[0]);
		return 2;
	}
	mode = argv[1];
	stop_file = argv[2];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "thread_seccomp")) return run_thread_seccomp();
	if (!strcmp(mode, "malloc_loop")) return run_malloc_loop();
	if (!strcmp(mode, "deepbind")) return run_deepbind(argc > 3 ? argv[3] : "");
	if (!strcmp(mode, "slow_dlopen")) return run_slow_dlopen(argc > 3 ? argv[3] : "");
	if (!strcmp(mode, "seccomp_dlopen")) return run_seccomp_dlopen(argc > 3 ? argv[3] : "");
	return run_blocking();
}
