/* The sampler's own thread for the walks that follow a dlopen it could not wrap (issue 34).
 *
 * A dlopen by a bare name from an object with a search path of its own tail-jumps to the real
 * dlopen (dlopen_hook.c), so nothing of ours runs once it returns. Its new objects' slots were
 * patched at the next slow path, on whichever thread took it: a thread confined by a seccomp
 * filter of its own too, where the walk's open of /proc/self/maps killed the process (SIGSYS).
 * Now the dlopen wakes this thread (a futex wake, on the thread that is about to dlopen anyway)
 * and the walk runs here only. It cannot know when that dlopen is done, so it walks a few
 * times, 2 ms to 1 s after the wake (a walk redirects only slots not yet redirected); a
 * second wake starts the series again.
 *
 * Created by the first start with every signal blocked (none of the program's handlers runs
 * here) and a 128 KiB stack of its own above a guard page; stopped and joined by
 * stop before it takes the patch lock. Waiting in futex costs nothing while no dlopen comes.
 * A child forked from the process has no such thread: there the slow path walks, as before. */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "internal.h"
#include "walker.h"

#define WALKER_STACK (128 * 1024)
#define WALKER_GUARD 4096

static pthread_t walker;
static int walker_pid;            /* the process it runs in (0: none) */
static volatile uint32_t wakes;   /* bumped by each wake: the futex word */
static volatile int quit;

static void futex_wait(volatile uint32_t *word, uint32_t seen, const struct timespec *t)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, t, NULL, 0);
}

static void *walker_main(void *arg)
{
	(void)arg;
	static const long delays_ms[] = {2, 20, 200, 1000};
	uint32_t seen = wakes;
	while (!quit) {
		futex_wait(&wakes, seen, NULL);
		for (int i = 0; i < 4 && !quit; i++) {
			if (wakes != seen) {
				seen = wakes;
				i = 0;
			}
			struct timespec ts = {delays_ms[i] / 1000, delays_ms[i] % 1000 * 1000000L};
			/* waits the delay, or less when woken again or told to quit */
			futex_wait(&wakes, seen, &ts);
			if (!quit && mts_config.active)
				mts_patch_all(true);
		}
	}
	return NULL;
}

bool mts_walker_here(void)
{
	return walker_pid != 0 && walker_pid == getpid();
}

static void *stack; /* the walker's, reused by a later start after a stop's join */

int mts_walker_start(void)
{
	if (mts_walker_here())
		return 0;
	/* A stack of our own, mapped once and kept for later starts: pthread_create's own stack
	 * and guard (mmap, mprotect from libc's code) would be traced as the program's mappings. */
	if (!stack) {
		void *m = mmap(NULL, WALKER_STACK + WALKER_GUARD, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m == MAP_FAILED)
			return -ENOMEM;
		if (mprotect((char *)m + WALKER_GUARD, WALKER_STACK, PROT_READ | PROT_WRITE) != 0) {
			munmap(m, WALKER_STACK + WALKER_GUARD);
			return -ENOMEM;
		}
		stack = (char *)m + WALKER_GUARD;
	}
	pthread_attr_t a;
	if (pthread_attr_init(&a) != 0)
		return -ENOMEM;
	pthread_attr_setstack(&a, stack, WALKER_STACK);
	quit = 0;
	/* every signal blocked on it, whichever thread starts the sampler (the agent thread has
	 * them all blocked already; a start at a program's entry does not) */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&walker, &a, walker_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&a);
	if (rc != 0)
		return -rc;
	pthread_setname_np(walker, "memtraced-walk");
	walker_pid = getpid();
	return 0;
}

void mts_walker_wake(void)
{
	if (!mts_walker_here())
		return;
	__atomic_fetch_add(&wakes, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &wakes, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void mts_walker_quit(void)
{
	if (!mts_walker_here())
		return;
	stack = NULL; /* still the quitting thread's until it is gone: a later start maps anew */
	quit = 1;
	__atomic_fetch_add(&wakes, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &wakes, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	pthread_detach(walker);
	walker_pid = 0;
}

void mts_walker_stop(void)
{
	if (!mts_walker_here())
		return;
	quit = 1;
	__atomic_fetch_add(&wakes, 1, __ATOMIC_RELEASE);
	syscall(SYS_futex, &wakes, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	pthread_join(walker, NULL);
	walker_pid = 0;
}
