/* A CLOCK_MONOTONIC deadline for pthread_cond_timedwait on a condition variable set up with
 * pthread_condattr_setclock(CLOCK_MONOTONIC). */
#ifndef MEMTRACED_COMMON_DEADLINE_H
#define MEMTRACED_COMMON_DEADLINE_H
#include <time.h>

static inline struct timespec deadline_after_ms(int ms)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

#endif
