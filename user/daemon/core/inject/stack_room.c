/* Room on a stopped thread's stack for the agent's stub (issue 34).
 *
 * The stub runs on the interrupted thread's own stack, below its red zone: the registers, an
 * XSAVE area (2.5 KB with AVX-512) and pthread_create's frames, about 3.2 KB. A thread on a
 * small stack (pthread_attr_setstacksize(16384) with little left), on a user-allocated stack
 * or on a sigaltstack inside a signal handler has less, or an unknown amount: SIGSEGV, or
 * whatever lies below overwritten. The room is known only where the stack's end is:
 *   - the main thread's [stack], which the kernel grows on demand;
 *   - a mapping with a guard page (PROT_NONE) right below it: glibc's thread stacks, and the
 *     guarded stacks of Rust's sigaltstack and most coroutine libraries. The room is rsp down
 *     to the guard.
 * Anything else (a stack or an alternate signal stack inside the heap, a mapping without a
 * guard) has no known end: its thread is not stopped for a stub, another one or a later moment
 * is. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "door/door.h"
#include "inject_int.h"

bool inject_stack_room(pid_t pid, pid_t tid, uint64_t rsp, char *why, size_t whylen)
{
	FILE *f = door_proc_fopen(pid, "task/%d/maps", (int)tid);
	if (!f) {
		inject_err(why, whylen, "thread %d: its mappings cannot be read", (int)tid);
		return false;
	}
	char line[512];
	uint64_t prev_end = 0;
	bool prev_guard = false, found = false, ok = false;
	while (fgets(line, sizeof line, f)) {
		uint64_t lo, hi;
		char perms[8] = "";
		int name_at = 0;
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %*s %*s %*s%n", &lo, &hi, perms,
			   &name_at) < 3)
			continue;
		if (rsp >= lo && rsp < hi) {
			found = true;
			bool main_stack = strstr(line + name_at, "[stack]") != NULL;
			bool guarded = prev_guard && prev_end == lo;
			uint64_t room = rsp - lo;
			if (main_stack || (guarded && room >= INJECT_STUB_STACK_NEED))
				ok = true;
			else if (guarded)
				inject_err(why, whylen, "thread %d has %" PRIu64 " bytes of stack left, the "
					   "stub needs %d", (int)tid, room, INJECT_STUB_STACK_NEED);
			else
				inject_err(why, whylen, "thread %d runs on a stack whose end is unknown "
					   "(a stack of its own or a sigaltstack without a guard page)",
					   (int)tid);
			break;
		}
		prev_end = hi;
		prev_guard = strncmp(perms, "---", 3) == 0;
	}
	fclose(f);
	if (!found)
		inject_err(why, whylen, "thread %d: its stack pointer is in no mapping", (int)tid);
	return ok;
}
