/* stacks_bench: cost of unwinding + symbolizing samples with stacks.h (no BPF).
 *
 *   stacks_bench [ITERATIONS]      (default 20000)
 *
 * Runs the test workload build/tests/targets/stacks_deep up to its first two self-stops (a
 * 12-frame chain, then a 10-frame chain through qsort), captures registers and 16 KiB of stack
 * with ptrace + process_vm_readv as the BPF side would, then times:
 *   setup_ms              stacks_open (reading the maps, attaching the unwinder)
 *   first_unwind_ms       the first unwind: loading CFI and DWARF, symbolizing every frame
 *   unwind_us_per_sample  later unwinds of the two samples in turn (hot caches: known pcs)
 * Output: key=value lines. */
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "unwind/stacks.h"

#define STACK_COPY 16384

struct sample {
	uint64_t regs[STACKS_NREGS];
	uint8_t stack[STACK_COPY];
	size_t len;
};

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int capture_at_stop(pid_t pid, struct sample *s)
{
	int st;
	if (waitpid(pid, &st, WUNTRACED) != pid || !WIFSTOPPED(st))
		return -1;
	if (ptrace(PTRACE_SEIZE, pid, 0, 0) != 0)
		return -1;
	ptrace(PTRACE_INTERRUPT, pid, 0, 0);
	do {
		if (waitpid(pid, &st, __WALL) != pid)
			return -1;
	} while (!WIFSTOPPED(st));
	struct user_regs_struct r;
	int rc = ptrace(PTRACE_GETREGS, pid, 0, &r);
	ptrace(PTRACE_DETACH, pid, 0, 0);
	if (rc != 0)
		return -1;
	const uint64_t regs[STACKS_NREGS] = {r.rax, r.rdx, r.rcx, r.rbx, r.rsi, r.rdi, r.rbp, r.rsp, r.r8,
					     r.r9,  r.r10, r.r11, r.r12, r.r13, r.r14, r.r15, r.rip};
	memcpy(s->regs, regs, sizeof regs);
	struct iovec local = {s->stack, STACK_COPY}, remote = {(void *)(uintptr_t)r.rsp, STACK_COPY};
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	s->len = n > 0 ? (size_t)n : 0;
	return n > 0 ? 0 : -1;
}

static struct sample samples[2];

int main(int argc, char **argv)
{
	long iterations = argc > 1 ? atol(argv[1]) : 20000;
	if (iterations <= 0) {
		fprintf(stderr, "usage: stacks_bench [ITERATIONS > 0]\n");
		return 2;
	}
	char exe[PATH_MAX], path[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[n > 0 ? n : 0] = '\0';
	for (int i = 0; i < 2; i++) /* BUILD/bench/stacks_bench -> BUILD */
		if (strrchr(exe, '/'))
			*strrchr(exe, '/') = '\0';
	snprintf(path, sizeof path, "%s/tests/targets/stacks_deep", exe);
	if (access(path, X_OK) != 0) {
		fprintf(stderr, "stacks_bench: %s missing (make all builds it)\n", path);
		return 1;
	}
	pid_t pid = fork();
	if (pid == 0) {
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	char err[256];
	struct stacks *st = NULL;
	double t0 = 0, t_setup = 0;
	int ok = capture_at_stop(pid, &samples[0]) == 0;
	if (ok) {
		t0 = now_us();
		st = stacks_open(pid, err, sizeof err);
		t_setup = now_us() - t0;
		kill(pid, SIGCONT);
		ok = st && capture_at_stop(pid, &samples[1]) == 0 && /* second loop round */
		     (kill(pid, SIGCONT), capture_at_stop(pid, &samples[1]) == 0); /* qsort */
	}
	if (!ok) {
		fprintf(stderr, "stacks_bench: could not capture the workload's samples%s%s\n",
			st ? "" : ": ", st ? "" : err);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		stacks_close(st);
		return 1;
	}
	uint64_t codes[256];
	t0 = now_us();
	int frames0 = stacks_unwind(st, pid, samples[0].regs, samples[0].stack, samples[0].len, codes, 256);
	int frames1 = stacks_unwind(st, pid, samples[1].regs, samples[1].stack, samples[1].len, codes, 256);
	double t_first = now_us() - t0;
	long frames = 0;
	t0 = now_us();
	for (long i = 0; i < iterations; i++) {
		const struct sample *s = &samples[i & 1];
		frames += stacks_unwind(st, pid, s->regs, s->stack, s->len, codes, 256);
	}
	double t_hot = now_us() - t0;
	struct stacks_stats stats;
	stacks_get_stats(st, &stats);
	printf("setup_ms=%.3f\n", t_setup / 1e3);
	printf("first_unwind_ms=%.3f\n", t_first / 1e3);
	printf("unwind_us_per_sample=%.2f\n", t_hot / iterations);
	printf("frames_per_sample=%.1f\n", (double)frames / iterations);
	printf("frames_first=%d,%d\n", frames0, frames1);
	printf("distinct_codes=%llu\n", (unsigned long long)stats.codes);
	printf("iterations=%ld\n", iterations);
	stacks_close(st);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return 0;
}
