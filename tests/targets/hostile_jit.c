/* A program with "JIT code" at a fixed address, for a perf map whose lines an attacker writes
 * without knowing where the code lands (issue 35, tests/test_hostile.sh): a frame (push rbp;
 * mov rbp, rsp; call rsi; pop rbp; ret) at 0x3f0000000000 that calls malloc, every millisecond
 * until DIR/stop exists. Writes its pid to DIR/ready once the code is in place. The perf map
 * is the test's to arrange (/tmp/perf-PID.map: the program's own, a symlink, a bind mount).
 * "hostile_jit DIR churn": 65536 copies of the frame, 16 bytes apart, called in turn: a new
 * JIT pc at every allocation, as a JIT that keeps making code would (the distinct-frame cap). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define JIT_AT 0x3f0000000000ul

typedef void *(*alloc_fn)(size_t);
typedef void *(*frame_fn)(size_t, alloc_fn);

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: hostile_jit DIR\n");
		return 2;
	}
	static const unsigned char frame[] = {0x55, 0x48, 0x89, 0xe5, 0xff, 0xd6, 0x5d, 0xc3};
	int copies = argc > 2 && strcmp(argv[2], "churn") == 0 ? 65536 : 1;
	size_t len = (size_t)copies * 16;
	len = (len + 4095) & ~(size_t)4095;
	unsigned char *code = mmap((void *)JIT_AT, len, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (code != (void *)JIT_AT) return 1;
	for (int i = 0; i < copies; i++) memcpy(code + 16 * i, frame, sizeof frame);
	if (mprotect(code, len, PROT_READ | PROT_EXEC) != 0) return 1;
	char path[4096];
	snprintf(path, sizeof path, "%s/ready", argv[1]);
	FILE *f = fopen(path, "w");
	if (!f) return 1;
	fprintf(f, "%d\n", (int)getpid());
	fclose(f);
	snprintf(path, sizeof path, "%s/stop", argv[1]);
	for (unsigned k = 0; access(path, F_OK) != 0;) {
		for (int i = 0; i < 20; i++, k++) free(((frame_fn)(code + 16 * (k % copies)))(1111, malloc));
		usleep(1000);
	}
	return 0;
}
