/* A single-threaded program that reports glibc's single-thread mode (tests/test_inject_harm.sh,
 * issue 47): it mallocs and frees in a loop and, each time DIR/ask appears, writes DIR/mode
 * "single=S libc=L tcb=M threads=T" (__libc_single_threaded as the program reads it: a copy
 * in the executable; libc's own, which malloc reads; the TCB's multiple_threads; the kernel's
 * thread count) and removes DIR/ask. DIR/ready once started; DIR/stop ends it.
 *   single_mode DIR */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <unistd.h>

static int threads(void)
{
	char line[256];
	int n = -1;
	FILE *f = fopen("/proc/self/status", "r");
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "Threads: %d", &n) == 1) break;
	if (f) fclose(f);
	return n;
}

int main(int argc, char **argv)
{
	if (argc < 2) return 2;
	char ask[4096], mode[4096], tmp[4096], stop[4096], ready[4096];
	snprintf(ask, sizeof ask, "%s/ask", argv[1]);
	snprintf(mode, sizeof mode, "%s/mode", argv[1]);
	snprintf(tmp, sizeof tmp, "%s/mode.tmp", argv[1]);
	snprintf(stop, sizeof stop, "%s/stop", argv[1]);
	snprintf(ready, sizeof ready, "%s/ready", argv[1]);
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	/* libc's own definition: looked up in libc, not bound through the executable's copy */
	volatile char *own = libc ? dlsym(libc, "__libc_single_threaded") : NULL;
	fclose(fopen(ready, "w"));
	while (access(stop, F_OK) != 0) {
		for (int i = 0; i < 100; i++) {
			void *volatile p = malloc(64 + (size_t)i);
			free(p);
		}
		if (access(ask, F_OK) == 0) {
			int tcb;
			__asm__ volatile("movl %%fs:0x18, %0" : "=r"(tcb)); /* tcbhead_t.multiple_threads */
			FILE *f = fopen(tmp, "w");
			if (f) {
				fprintf(f, "single=%d libc=%d tcb=%d threads=%d\n", (int)__libc_single_threaded,
					own ? (int)*own : -1, tcb, threads());
				fclose(f);
				rename(tmp, mode);
			}
			unlink(ask);
		}
		usleep(2000);
	}
	return 0;
}
