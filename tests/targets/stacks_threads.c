/* Workload of tests/unit/test_stacks.c: a second thread reaches a known chain and stops the
 * process in fake_alloc (see stacks_fake_alloc.h); its stack is a thread stack (an anonymous
 * mapping), its outer end start_thread and clone3 in libc. Keep the CALL markers on the line
 * of their call. */
#include <pthread.h>

#include "stacks_fake_alloc.h"

NOIPA long thread_leaf(long size)
{
	long r = fake_alloc(size); /* CALL:thread_leaf */
	KEEP(r);
	return r + 1;
}

NOIPA static void *thread_main(void *arg)
{
	long r = thread_leaf((long)arg); /* CALL:thread_main */
	KEEP(r);
	return (void *)r;
}

int main(void)
{
	pthread_t t;
	if (pthread_create(&t, NULL, thread_main, (void *)16) != 0)
		return 1;
	void *res;
	pthread_join(t, &res);
	return 0;
}
