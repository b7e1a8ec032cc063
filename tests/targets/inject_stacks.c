/* Threads with little or unknown stack room below rsp while memtraced --inject attaches
 * (issue 34): the agent's stub must not run on them.
 *   inject_stacks MODE STOPFILE
 *   small_stack  the main thread runs on a 16 KiB stack with a guard page below, about 2.5 KB
 *                of it left, in a sleep loop (it ranks first as the thread to stop);
 *   user_stack   the same on a stack without a guard, 16 KiB of canary bytes below it;
 *   altstack     the main thread sleeps in a signal handler on an 8 KiB sigaltstack inside a
 *                malloc'd block, 8 KiB of canary bytes below it.
 * A helper thread sleeps on a stack of normal size. Prints "ready" once in place, then
 * "result MODE ok" and exits 0 when STOPFILE appears, the canaries intact. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define SMALL (16 * 1024)
#define LEAVE 2560
#define CANARY 0x5a

static const char *mode, *stop_file;
static volatile int done;
static ucontext_t main_ctx, small_ctx;
static char *low_mark; /* the stack's lowest usable byte */

static void nap(void)
{
	struct timespec ts = {0, 2 * 1000 * 1000};
	nanosleep(&ts, NULL);
}

static void wait_stop(void)
{
	/* write, access and nanosleep: little stack (printf would take more than is left) */
	if (write(1, "ready\n", 6) != 6) _exit(4);
	while (access(stop_file, F_OK) != 0) nap();
}

/* Recurses until about LEAVE bytes of the stack are left, then waits there. */
static __attribute__((noinline)) void deep(void)
{
	volatile char pad[256];
	pad[0] = 1;
	char *sp = (char *)__builtin_frame_address(0);
	if (sp - low_mark > LEAVE + 512) deep();
	else wait_stop();
	pad[1] = pad[0];
}

static void on_small_stack(void) { deep(); }

static void *helper(void *arg)
{
	(void)arg;
	while (!done) nap();
	return NULL;
}

static int check_canary(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != CANARY) {
			printf("result %s FAILED canary overwritten at %zu bytes below the stack\n", mode, n - i);
			return 1;
		}
	return 0;
}

static void on_signal(int sig)
{
	(void)sig;
	deep();
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: inject_stacks small_stack|user_stack|altstack STOPFILE\n");
		return 2;
	}
	mode = argv[1];
	stop_file = argv[2];
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* bind write, access and nanosleep now: a lazy binding's resolver takes kilobytes of stack */
	if (write(1, "", 0) != 0 || access(stop_file, F_OK) == 0) return 2;
	nap();
	pthread_t h;
	pthread_create(&h, NULL, helper, NULL);
	int bad = 0;
	if (!strcmp(mode, "small_stack") || !strcmp(mode, "user_stack")) {
		int guard = !strcmp(mode, "small_stack");
		size_t below = guard ? 4096 : SMALL;
		unsigned char *m = mmap(NULL, below + SMALL, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED) return 3;
		memset(m, CANARY, below);
		if (guard) mprotect(m, below, PROT_NONE);
		low_mark = (char *)m + below;
		getcontext(&small_ctx);
		small_ctx.uc_stack.ss_sp = m + below;
		small_ctx.uc_stack.ss_size = SMALL;
		small_ctx.uc_link = &main_ctx;
		makecontext(&small_ctx, on_small_stack, 0);
		swapcontext(&main_ctx, &small_ctx);
		if (!guard) bad = check_canary(m, below);
	} else if (!strcmp(mode, "altstack")) {
		size_t alt = 8192;
		unsigned char *m = malloc(alt * 2);
		memset(m, CANARY, alt);
		stack_t ss = {.ss_sp = m + alt, .ss_size = alt, .ss_flags = 0};
		low_mark = (char *)m + alt;
		sigaltstack(&ss, NULL);
		struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_ONSTACK};
		sigaction(SIGUSR1, &sa, NULL);
		raise(SIGUSR1);
		bad = check_canary(m, alt);
	} else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	done = 1;
	pthread_join(h, NULL);
	if (bad) return 1;
	printf("result %s ok\n", mode);
	return 0;
}
