/* A library whose constructor sleeps 1.5 s: dlopen holds ld.so's load lock meanwhile, so any
 * other dlopen in the process waits that long (tests/targets/inject_hostile.c, slow_dlopen). */
#include <unistd.h>

__attribute__((constructor)) static void slow_start(void)
{
	usleep(1500000);
}

int slow_ctor_marker(void)
{
	return 42;
}
