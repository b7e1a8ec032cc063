/* libFuzzer target of unwinding a stack copy against a given object (stacks_open_object: the
 * daemon's unwinder and symbolizer, libdw underneath). The input is a sample as the BPF side
 * captures it at an allocation function's entry:
 *   u64 load base of the object | 17 u64 registers (DWARF order) | stack bytes from rsp
 * unwound against build/tests/targets/stacks_deep (FUZZ_UNWIND_OBJECT=path for another one).
 * tests/unit/test_unwind_object --write-seed FILE captures a real one.
 * fuzz_unwind_elf.c builds this with OBJECT_IN_INPUT: the object itself comes first in the
 * input (u32 length, then the ELF file), so its .eh_frame and DWARF are fuzzed too.
 * Any crash, sanitizer report, hang or broken API invariant is a finding. */
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unwind/stacks.h"

#define MAX_CODES 256
#define SAMPLE_HEAD (8 + STACKS_NREGS * 8)

static char object_path[PATH_MAX + 64];

static void broken(const char *what)
{
	fprintf(stderr, "fuzz_unwind: API invariant broken: %s\n", what);
	abort();
}

#ifdef OBJECT_IN_INPUT
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char dir[] = "/tmp/fuzz_unwind.XXXXXX";
	if (!mkdtemp(dir)) abort();
	snprintf(object_path, sizeof object_path, "%s/object", dir);
	return 0;
}

/* Writes the object part of the input to object_path; the rest is the sample. */
static int take_object(const uint8_t **data, size_t *size)
{
	uint32_t len;
	if (*size < 4) return -1;
	memcpy(&len, *data, 4);
	if (len > *size - 4) len = (uint32_t)(*size - 4);
	int fd = open(object_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) return -1;
	int ok = write(fd, *data + 4, len) == (ssize_t)len;
	close(fd);
	*data += 4 + len;
	*size -= 4 + len;
	return ok ? 0 : -1;
}
#else
/* The fixed object: $FUZZ_UNWIND_OBJECT, else tests/targets/stacks_deep of the build this
 * program is in (BUILD/fuzz/fuzz_unwind, BUILD/tests/fuzz/replay_unwind). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *env = getenv("FUZZ_UNWIND_OBJECT");
	if (env) {
		snprintf(object_path, sizeof object_path, "%s", env);
		return 0;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[n > 0 ? n : 0] = 0;
	for (int up = 0; up < 3; up++) {
		char *slash = strrchr(exe, '/');
		if (!slash) break;
		*slash = 0;
		snprintf(object_path, sizeof object_path, "%s/tests/targets/stacks_deep", exe);
		if (access(object_path, R_OK) == 0) return 0;
	}
	fprintf(stderr, "fuzz_unwind: no tests/targets/stacks_deep near %s (FUZZ_UNWIND_OBJECT=)\n", exe);
	abort();
}

static int take_object(const uint8_t **data, size_t *size) { return 0; }
#endif

/* Coverage feedback for depth: libdw is not instrumented, so the fuzzer would not see an
 * input that unwinds one frame deeper as new. One branch per depth tells it. */
static volatile unsigned depth_sink;
#define DEPTH(k) case k: depth_sink += k; break;
static void feel_depth(int n)
{
	switch (n < 24 ? n : 24) {
	DEPTH(0) DEPTH(1) DEPTH(2) DEPTH(3) DEPTH(4) DEPTH(5) DEPTH(6) DEPTH(7) DEPTH(8) DEPTH(9)
	DEPTH(10) DEPTH(11) DEPTH(12) DEPTH(13) DEPTH(14) DEPTH(15) DEPTH(16) DEPTH(17) DEPTH(18)
	DEPTH(19) DEPTH(20) DEPTH(21) DEPTH(22) DEPTH(23) DEPTH(24)
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (take_object(&data, &size) != 0) return 0;
	uint8_t head[SAMPLE_HEAD] = {0};
	memcpy(head, data, size < SAMPLE_HEAD ? size : SAMPLE_HEAD);
	const uint8_t *stack = size > SAMPLE_HEAD ? data + SAMPLE_HEAD : NULL;
	size_t stack_len = size > SAMPLE_HEAD ? size - SAMPLE_HEAD : 0;
	uint64_t base, regs[STACKS_NREGS];
	memcpy(&base, head, 8);
	memcpy(regs, head + 8, sizeof regs);
	base &= UINT64_C(0x00007ffffffff000); /* a page in user space */

	char err[256] = "";
	struct stacks *s = stacks_open_object(object_path, base, err, sizeof err);
	if (!s) {
		if (!err[0]) broken("open failed without a message");
		return 0;
	}
	uint64_t codes[MAX_CODES];
	int n = stacks_unwind(s, 0, regs, stack, stack_len, codes, MAX_CODES);
	if (n < 0 || n > MAX_CODES) broken("frame count");
	feel_depth(n);
	for (int i = 0; i < n; i++) {
		if (!codes[i] || codes[i] >> 62) broken("code 0 or above 2^62");
		const mt_location *locs;
		int nl = stacks_locations(s, codes[i], &locs);
		if (nl < 1 || nl > 255) broken("location count");
		for (int k = 0; k < nl; k++)
			if (!locs[k].filename || !locs[k].defname) broken("NULL location string");
	}
	struct stacks_stats st;
	stacks_get_stats(s, &st);
	if (st.frames != (uint64_t)n || st.samples != 1) broken("stats");
	stacks_close(s);
	return 0;
}
