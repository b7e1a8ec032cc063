/* A target for the injector tests (tests/unit/test_inject.c): it prints "ready PID", blocks
 * in one system call, then prints what that call returned:
 *   RESULT mode=M r=R errno=E elapsed_ms=T regs=ok|changed loaded=0|1 ctor_runs=N
 * Modes: epoll (epoll_wait on an empty set, 3 s timeout), read (one byte from stdin),
 * nanosleep (2 s), futex (sem_wait, posted by a thread once it reads a byte from stdin),
 * threads (read on stdin while two threads count; "INJECT_PROBE_COUNTERS" tells the probe
 * library where the counters are), seccomp (read, under an allow-everything seccomp filter).
 * epoll, read, nanosleep and threads make the call with known values in registers
 * (inject_regs.h). loaded/ctor_runs: is $INJECT_PROBE_PATH loaded now, and how many times
 * its constructor ran. */
#include <dlfcn.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "inject_regs.h"

static volatile unsigned long counters[2];
static volatile int stop_workers;
static sem_t sem;

/* SIGUSR1 (threads mode): what the handler saw, to check a signal that arrives during an
 * injected call is delivered after it, once, with its siginfo intact */
static volatile int usr1_count, usr1_code, usr1_pid, usr1_value;
static void on_usr1(int sig, siginfo_t *si, void *uc)
{
	usr1_count++;
	usr1_code = si->si_code;
	usr1_pid = si->si_pid;
	usr1_value = si->si_value.sival_int;
}

static void *worker(void *arg)
{
	volatile unsigned long *c = arg;
	while (!stop_workers) (*c)++;
	return NULL;
}

static void *poster(void *arg)
{
	char ch;
	if (read(0, &ch, 1) == 1) sem_post(&sem);
	return NULL;
}

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

static int allow_all_seccomp(void)
{
	struct sock_filter f[] = { BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW) };
	struct sock_fprog prog = { 1, f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "read";
	int intact = 1, checked = 0, epfd = epoll_create1(0);
	struct epoll_event ev;
	char ch = 0;
	pthread_t th[2];
	if (strcmp(mode, "seccomp") == 0 && allow_all_seccomp() != 0) {
		perror("seccomp");
		return 3;
	}
	if (strcmp(mode, "futex") == 0) {
		sem_init(&sem, 0, 0);
		pthread_create(&th[0], NULL, poster, NULL);
	}
	if (strcmp(mode, "threads") == 0) {
		char env[64];
		snprintf(env, sizeof(env), "%lx 2", (unsigned long)counters);
		setenv("INJECT_PROBE_COUNTERS", env, 1);
		/* SA_RESTART: the read goes on after the handler. Workers block SIGUSR1, so it is
		 * the main thread's (the one stopped by the injector). */
		struct sigaction sa = { .sa_sigaction = on_usr1, .sa_flags = SA_SIGINFO | SA_RESTART };
		sigaction(SIGUSR1, &sa, NULL);
		sigset_t usr1, old;
		sigemptyset(&usr1);
		sigaddset(&usr1, SIGUSR1);
		pthread_sigmask(SIG_BLOCK, &usr1, &old);
		for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, worker, (void *)&counters[i]);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	long t0 = now_ms(), r;
	if (strcmp(mode, "epoll") == 0) {
		r = checked_syscall(SYS_epoll_wait, epfd, (long)&ev, 1, 3000, &intact);
		checked = 1;
	} else if (strcmp(mode, "nanosleep") == 0) {
		struct timespec t = { 2, 0 };
		r = checked_syscall(SYS_nanosleep, (long)&t, 0, 0, 0, &intact);
		checked = 1;
	} else if (strcmp(mode, "futex") == 0) {
		r = sem_wait(&sem);
		r = r < 0 ? -errno : 0;
	} else {
		r = checked_syscall(SYS_read, 0, (long)&ch, 1, 0, &intact);
		checked = 1;
	}
	long elapsed = now_ms() - t0;
	if (strcmp(mode, "threads") == 0) {
		stop_workers = 1;
		for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
	}
	if (strcmp(mode, "futex") == 0) pthread_join(th[0], NULL);
	int loaded = 0, runs = -1;
	const char *probe = getenv("INJECT_PROBE_PATH");
	void *h = probe ? dlopen(probe, RTLD_NOW | RTLD_NOLOAD) : NULL;
	if (h) {
		loaded = 1;
		int *p = dlsym(h, "inject_probe_ctor_runs");
		runs = p ? *p : -2;
		dlclose(h);
	}
	printf("RESULT mode=%s r=%ld errno=%ld elapsed_ms=%ld regs=%s loaded=%d ctor_runs=%d "
	       "byte=%d usr1=%d code=%d pid=%d value=%d\n", mode, r < 0 ? -1 : r, r < 0 ? -r : 0,
	       elapsed, !checked ? "unchecked" : intact ? "ok" : "changed", loaded, runs, ch,
	       usr1_count, usr1_code, usr1_pid, usr1_value);
	return 0;
}
