/* Runs a libFuzzer target's LLVMFuzzerTestOneInput once on each file named on the command
 * line, without libFuzzer: the BUILD/tests/fuzz/replay_X programs that tests/test_fuzz_replay.sh
 * runs on the kept findings (tests/fuzz/regressions/) in every test run, built like the daemon
 * (with sanitizers under `make test SANITIZE=1`). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

int main(int argc, char **argv)
{
	if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		if (!f) {
			fprintf(stderr, "%s: cannot open %s\n", argv[0], argv[i]);
			return 2;
		}
		size_t cap = 1 << 16, n = 0, got;
		uint8_t *buf = malloc(cap);
		while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0)
			if ((n += got) == cap) buf = realloc(buf, cap *= 2);
		fclose(f);
		if (!buf) return 2;
		LLVMFuzzerTestOneInput(buf, n);
		free(buf);
		printf("replayed %s (%zu bytes)\n", argv[i], n);
	}
	return 0;
}
