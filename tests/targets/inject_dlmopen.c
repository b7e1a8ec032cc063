/* A plugin loaded with dlmopen into a new link-map namespace (tests/test_inject_safety.sh,
 * issue 34): it calls its own copy of libc's malloc, which no GOT slot the sampler redirects
 * leads to, so --inject must not say its check passed.
 *
 *   inject_dlmopen DIR PLUGIN.so [later]
 *
 * dlmopen(LM_ID_NEWLM) PLUGIN.so, prints "ready", then until DIR/stop exists calls its
 * op_plugin_work() (20 mallocs) every 10 ms; prints "result ok CALLS" and exits 0. With
 * "later" (issue 47: a dlmopen after the placement), prints "waiting" and does the dlmopen
 * once DIR/go exists. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 3) return 2;
	if (argc > 3 && strcmp(argv[3], "later") == 0) {
		char go[4096];
		snprintf(go, sizeof go, "%s/go", argv[1]);
		printf("waiting\n");
		fflush(stdout);
		while (access(go, F_OK) != 0) usleep(10000);
	}
	void *h = dlmopen(LM_ID_NEWLM, argv[2], RTLD_NOW);
	if (!h) {
		printf("result FAILED dlmopen: %s\n", dlerror());
		return 1;
	}
	unsigned long (*work)(void) = (unsigned long (*)(void))dlsym(h, "op_plugin_work");
	if (!work) return 1;
	char stop[4096];
	snprintf(stop, sizeof stop, "%s/stop", argv[1]);
	printf("ready\n");
	fflush(stdout);
	unsigned long calls = 0;
	while (access(stop, F_OK) != 0) {
		work();
		calls += 20;
		usleep(10000);
	}
	printf("result ok %lu\n", calls);
	return 0;
}
