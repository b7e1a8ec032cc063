/* --inject at the entry: our sampler placed into a target, the tracer of its USDT probes, and
 * putting its GOT back at the end. */
#ifndef MEMTRACED_INJECT_MODE_H
#define MEMTRACED_INJECT_MODE_H
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>


#include "options/cli.h"
#include "inject/sampler_ctl.h"

struct tracer;
struct session;

/* Places the sampler into pid and loads + attaches a tracer of its probes (not started yet);
 * exe: its program (-- CMD: checked before its exec).
 * 0: *ctl (malloc'ed) and *tracer are set. 1: it cannot be placed and o->inject is auto: the
 * reason was said, trace with uprobes (*ctl and *tracer NULL). -1: an error (message in err). */
int inject_mode_prepare(const struct cli_opts *o, pid_t pid, bool spawned, const char *exe,
			struct sampler_ctl **ctl,
			struct tracer **tracer, char *err, size_t errlen);
/* spawned (-- CMD, held before its exec): the library is placed and started at its entry
 * point, by this hold_set_entry_fn function (ctx: the sampler_ctl of inject_mode_prepare);
 * inject_mode_start is not called then. */
void inject_mode_at_entry(void *ctl, pid_t pid, long ptrace_options);
/* The session is open: the sampler starts redirecting (says how many GOT entries). */
int inject_mode_start(struct sampler_ctl *ctl, const struct cli_opts *o, char *err, size_t errlen);
/* After a dlopen of a process the sampler traces, and at its stop: a library loaded with
 * dlmopen into another link-map namespace since is said, once (its allocations never reach
 * the sampler). */
void inject_mode_after_dlopen(struct sampler_ctl *ctl);
/* A forked child of a process whose sampler is started: it inherited the redirected GOT and
 * the sampler's state; the tracer of the library's probes for it, or NULL (uprobes then, with
 * a message). */
struct tracer *inject_mode_child_tracer(const struct cli_opts *o, pid_t pid, const char *path);
/* Plain -p: a target that carries an in-process sampler of its own (carried_sampler.h) is
 * traced through its otel_memory probes: 1 and *tracer (attached), else 0 (uprobes). */
int inject_mode_use_carried(const struct cli_opts *o, pid_t pid, struct tracer **tracer);
/* The end: the GOT back, the library left in place, inert (alive false: the process has
 * exited, nothing to put back); frees ctl. NULL is allowed. */
void inject_mode_stop(struct sampler_ctl *ctl, bool alive, struct session *s);
/* At rate 1 the sampler counts every allocation call itself: its count since its start to s
 * (the summary says it beside the probes'). inject_mode_stop does it once stopped; a command
 * held at its exit-stop (our child, whose GOT stays redirected) has it read there. */
void inject_mode_source_calls(const struct sampler_ctl *ctl, struct session *s);

#endif
