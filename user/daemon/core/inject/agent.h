/* The agent: work done inside a target by a thread of its own, so that no application thread
 * ever runs our long calls and nothing needs memtraced to finish once started (issue 20).
 *
 * 1. Its code (agent_code.c: a stub and the agent thread's start routine) is written into a
 *    code cave of the target: the unused tail of an executable segment's last page, through
 *    /proc/PID/mem (the page becomes the process's private copy).
 * 2. A stub on an application thread maps the agent's region (include/inject_agent.h) with a
 *    raw mmap at an address memtraced chose (MAP_FIXED_NOREPLACE) and marks it with a nonce.
 * 3. For each job (place and start the sampler, stop it), memtraced fills the region and a stub
 *    on an application thread at a safe moment (no allocator or loader lock held: unwound and
 *    checked, safe_moment.c) calls pthread_create; the new thread dlopens the library and calls
 *    its memtraced_sampler_agent, then writes the job's number into the region.
 * 4. At the end, a stub unmaps the region.
 *
 * A stub changes only rip (and rax, the value its program must see at the resume address) of
 * the thread memtraced stopped; it saves and restores everything else itself, so memtraced
 * may die at any instant: before the registers are set the thread resumes untouched, after
 * that the stub completes on its own, and the agent thread too. */
#ifndef MEMTRACED_INJECT_AGENT_INT_H
#define MEMTRACED_INJECT_AGENT_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "inject.h"

#define AGENT_DATA_BYTES 56 /* the stub's data block: resume rip, op, a0, a1, a2, fn, FP size */

enum agent_stub_op { AGENT_STUB_MMAP = 1, AGENT_STUB_THREAD = 2, AGENT_STUB_MUNMAP = 3 };

struct inject_agent;

struct inject_agent_result {
	uint64_t handle;     /* dlopen's */
	int64_t ret;         /* the operation's */
	uint64_t version;    /* the library's MEMTRACED_SAMPLER_VERSION */
	uint64_t check_addr; /* its memtraced_sampler_check */
	uint64_t thin_addr;  /* its memtraced_sampler_thin */
	uint64_t stats_addr; /* its memtraced_sampler_stats */
	pid_t stub_tid;      /* the application thread that created the agent thread */
	long safe_wait_ms;   /* time spent waiting for a safe moment */
};

/* Writes the agent's code into pid and maps its region (a stub on any thread that is not
 * confined by seccomp). safe decides which thread may call pthread_create (NULL: any). */
int inject_agent_open(pid_t pid, inject_safe_fn safe, void *safe_ctx, struct inject_agent **out,
		      char *err, size_t errlen);
/* One job on a new thread of the target: dlopen(path, RTLD_NOW) and memtraced_sampler_agent
 * with op (enum inject_agent_op) and its arguments; waits up to timeout_ms for it to finish. */
int inject_agent_run(struct inject_agent *a, const char *path, uint64_t op, uint64_t arg0,
		     uint64_t arg1, long timeout_ms, struct inject_agent_result *res, char *err,
		     size_t errlen);
/* Unmaps the region (a stub, not waited for) and frees a. NULL is allowed. */
void inject_agent_close(struct inject_agent *a);
/* Frees a without touching the target. */
void inject_agent_forget(struct inject_agent *a);

#endif
