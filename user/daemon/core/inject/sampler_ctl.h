/* Our in-process sampler (user/sampler/, libmemtraced_sampler.so) in a running target: placing
 * it (the injector's dlopen), starting it (its GOT redirections) and stopping it (the GOT put
 * back; the library stays loaded, inert). The BPF side that records its USDT probes is the
 * tracer's (tracer_attach_usdt). */
#ifndef MEMTRACED_SAMPLER_CTL_H
#define MEMTRACED_SAMPLER_CTL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sampler_check.h"

#define SAMPLER_LIB_NAME "libmemtraced_sampler.so"
#define SAMPLER_VERSION 6 /* MEMTRACED_SAMPLER_VERSION of user/sampler/sampler.h (tests/test_layout.sh) */
#define SAMPLER_FLAG_ALL_WORDS 1 /* MEMTRACED_SAMPLER_ALL_WORDS of user/sampler/sampler.h */
#define SAMPLER_FLAG_LEASED 2    /* MEMTRACED_SAMPLER_LEASED */
#define SAMPLER_STATS_OFF_CALLS 16 /* MEMTRACED_SAMPLER_STATS_OFF_CALLS */

struct sampler_ctl {
	pid_t pid;
	char path[4096];        /* the library, as both we and the target see it */
	uint64_t start, stop;   /* its functions' addresses in the target */
	uint64_t check;         /* its memtraced_sampler_check, in the target */
	uint64_t thin;          /* its memtraced_sampler_thin, in the target */
	uint64_t stats;         /* its memtraced_sampler_stats, in the target */
	uint64_t calls_at_start; /* stats.calls when it started (a reused library counted before) */
	bool counting;          /* calls_at_start read: sampler_calls counts from there */
	long version;
	double rate;            /* the sampling rate to start it at */
	bool reused;            /* it was loaded already (an earlier --inject) */
	bool started;
	struct inject_agent *agent; /* placed with -p: the agent that runs our jobs (agent.h) */
	struct safe_moment *safety; /* its check of the thread that creates the agent thread */
	long safe_wait_ms;      /* the last job's wait for a safe moment */
	pid_t agent_stub_tid;   /* the thread that created its agent thread */
	int claim_fd;           /* this session's claim of the process (claim.h), -1: none */
	bool by_default;        /* placed because it is the default, not asked for by --inject */
	int copies_said;        /* files mapped twice said so far (sampler_second_copies) */
};

/* The library memtraced places: $MEMTRACED_SAMPLER, else ../lib/libmemtraced_sampler.so next to
 * memtraced's own executable (the build tree and `make install` both lay it out so). 0, or -1
 * with a message. */
int sampler_library_path(char *out, size_t outlen, char *err, size_t errlen);
/* Loads the library into pid (dlopen in the target: the same handle again if an earlier
 * --inject left it there) and finds its functions. Refuses what the injector refuses, and a
 * target whose root is not ours (a container: the library is not visible there). The work is
 * done by the agent (agent.h): a thread of the target's own, created at a safe moment by an
 * application thread that runs a self-restoring stub; memtraced may die at any instant. */
int sampler_place(pid_t pid, const char *path, struct sampler_ctl *c, char *err, size_t errlen);
/* The allocation calls the started sampler counted since its start (at rate 1 every one, its
 * nested calls once: issue 47, the trace's counts fall short by what the pipeline dropped).
 * false when it cannot be read. */
bool sampler_calls(const struct sampler_ctl *c, uint64_t *calls);
/* For a child held by our own ptrace at its program's entry point (hold_set_entry_fn):
 * loads the library on thread tid and starts it at rate, in one stop (c->pid and c->path set
 * by the caller). */
int sampler_place_held(pid_t pid, pid_t tid, long ptrace_options, struct sampler_ctl *c,
		       double rate, long *slots, char *err, size_t errlen);
/* Starts sampling at rate (per 8-byte word; 1 = every word): *slots is the number of GOT
 * entries it redirected. */
int sampler_start(struct sampler_ctl *c, double rate, long *slots, char *err, size_t errlen);
/* The library's check of its GOT redirections, read from the target's memory (after a start). */
int sampler_read_check(const struct sampler_ctl *c, struct memtraced_sampler_check *out,
		       char *err, size_t errlen);
/* The file mapped at addr in pid (for a missed slot), or "?" */
void sampler_slot_object(pid_t pid, uint64_t addr, char *out, size_t outlen);
/* The files pid maps twice from their start: each a copy loaded into another link-map
 * namespace (dlmopen), whose objects call their own copy of the allocator, past every slot
 * the sampler redirects. Their count; the first one's path in first. */
int sampler_second_copies(pid_t pid, char *first, size_t firstlen);
/* Puts the GOT back (a process that has exited: nothing to do, 0). */
int sampler_stop(struct sampler_ctl *c, char *err, size_t errlen);
/* Frees c and its agent (the agent's region unmapped when alive). NULL is allowed. */
void sampler_ctl_free(struct sampler_ctl *c, bool alive);
/* The sampler's mean gap between sample points in bytes for rate, and its flags (bit 0: every
 * word); the BPF side reads nsamples = weight / gap back. */
uint64_t sampler_mean_gap(double rate, uint64_t *flags);

#endif
