/* --inject (see inject_mode.h). */
#include "inject_mode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/msg.h"
#include "inject/carried_sampler.h"
#include "inject/claim.h"
#include "inject/inject.h"
#include "process/session.h"
#include "tracer/tracer.h"

/* The tracer of the sampler's probes in pid, loaded before anything is placed in it: a
 * kernel that refuses the BPF program leaves the target as it was. */
static struct tracer *usdt_tracer(const struct cli_opts *o, pid_t pid, char *err, size_t errlen)
{
	struct tracer_opts to = {.rate = o->rate, .stack_bytes = o->stack_bytes,
				 .ringbuf_bytes = o->ring_bytes, .usdt = true,
				 .no_mappings = o->no_mmap};
	char e[1024] = "";
	struct tracer *t = tracer_load(pid, &to, e, sizeof e);
	if (!t) snprintf(err, errlen, "PID %d: the sampler's probes cannot be traced: %s", (int)pid, e);
	return t;
}

/* ... and attached once the library is there (the path as the target sees it). */
static int usdt_attach(struct tracer *t, pid_t pid, const char *path, char *err, size_t errlen)
{
	char e[1024] = "";
	if (tracer_attach_usdt(t, path, e, sizeof e) == 0) return 0;
	snprintf(err, errlen, "PID %d: the sampler's probes cannot be traced: %s", (int)pid, e);
	return -1;
}

/* Both at once: a sampler that is in the process already. */
static struct tracer *usdt_tracer_attached(const struct cli_opts *o, pid_t pid, const char *path,
					   char *err, size_t errlen)
{
	struct tracer *t = usdt_tracer(o, pid, err, errlen);
	if (t && usdt_attach(t, pid, path, err, errlen)) {
		tracer_close(t);
		t = NULL;
	}
	return t;
}

/* The sampler cannot be used for pid: uprobes trace it, said in one line (an information
 * when the sampler was only the default, a warning when --inject asked for it). Returns 1. */
static int use_uprobes(const struct cli_opts *o, pid_t pid, const char *why)
{
	if (o->inject_default)
		msg_info("PID %d: traced with uprobes: %s (the in-process sampler, the default, "
			 "cannot be used)", (int)pid, why);
	else
		msg_warn("--inject: %s: tracing it with uprobes", why);
	return 1;
}

/* -- CMD, before its exec: what placing the sampler at its entry point would refuse (a
 * static program, a tight RLIMIT_AS), checked now, while uprobes can still trace it. */
static int spawned_can_take_sampler(pid_t pid, const char *exe, char *why, size_t whylen)
{
	if (exe && exe[0] && inject_check_exe(pid, exe, false, why, whylen) != 0) return -1;
	return inject_check_address_space(pid, why, whylen);
}

int inject_mode_prepare(const struct cli_opts *o, pid_t pid, bool spawned, const char *exe,
			struct sampler_ctl **ctl,
			struct tracer **tracer, char *err, size_t errlen)
{
	*ctl = NULL;
	*tracer = NULL;
	char why[4400] = "", path[4096];
	struct sampler_ctl *c = calloc(1, sizeof *c);
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* one --inject session per process: a second is refused, or traces with uprobes */
	pid_t holder;
	c->claim_fd = inject_claim(pid, &holder, why, sizeof why);
	if (c->claim_fd < 0) {
		sampler_ctl_free(c, true);
		if (o->inject == CLI_INJECT_REQUIRED || holder == 0) {
			snprintf(err, errlen, "--inject%s: %.4000s",
				 o->inject == CLI_INJECT_REQUIRED ? "=required" : "", why);
			return -1;
		}
		return use_uprobes(o, pid, why);
	}
	int placed = sampler_library_path(path, sizeof path, why, sizeof why);
	if (placed == 0 && spawned && o->inject != CLI_INJECT_REQUIRED)
		placed = spawned_can_take_sampler(pid, exe, why, sizeof why);
	struct tracer *t = NULL;
	if (placed == 0 && !(t = usdt_tracer(o, pid, err, errlen))) {
		sampler_ctl_free(c, true);
		if (o->inject == CLI_INJECT_REQUIRED) return -1;
		return use_uprobes(o, pid, err);
	}
	if (placed == 0 && spawned) { /* placed at its entry point (inject_mode_at_entry) */
		c->pid = pid;
		snprintf(c->path, sizeof c->path, "%s", path);
	} else if (placed == 0) {
		placed = sampler_place(pid, path, c, why, sizeof why);
	}
	c->rate = o->rate;
	if (placed == 0) {
		if (usdt_attach(t, pid, c->path, err, errlen)) {
			tracer_close(t);
			sampler_ctl_free(c, true);
			return -1;
		}
		c->by_default = o->inject_default;
		*tracer = t;
		*ctl = c;
		return 0;
	}
	tracer_close(t);
	sampler_ctl_free(c, true);
	if (o->inject == CLI_INJECT_REQUIRED) {
		snprintf(err, errlen, "--inject=required: cannot place the sampler into PID %d: %.4000s",
			 (int)pid, why);
		return -1;
	}
	char e[4500];
	snprintf(e, sizeof e, "cannot place the sampler into PID %d (%.4000s)", (int)pid, why);
	return use_uprobes(o, pid, e);
}

/* The sampler's own check of its redirections (include/sampler_check.h), said in the summary:
 * a slot that still leads to the traced allocator is a call path never sampled. */
static int check_slots(struct sampler_ctl *ctl, bool required, char *err, size_t errlen)
{
	struct memtraced_sampler_check ck;
	char e[512] = "";
	if (sampler_read_check(ctl, &ck, e, sizeof e) < 0 || ck.walks == 0) {
		msg_warn("PID %d: the GOT redirections cannot be checked (%s)", (int)ctl->pid,
			 e[0] ? e : "no check made");
		return 0;
	}
	if (ck.other_ns) {
		/* calls that no redirected slot sees: the check cannot pass */
		snprintf(e, sizeof e, "%lu objects of PID %d were loaded with dlmopen into another "
			 "link-map namespace, where they call their own copy of the allocator: their "
			 "allocations never reach the sampler (--inject=no traces them with uprobes)",
			 ck.other_ns, (int)ctl->pid);
		if (required) {
			snprintf(err, errlen, "--inject=required: %s", e);
			char e2[256];
			sampler_stop(ctl, e2, sizeof e2);
			return -1;
		}
		msg_warn("PID %d: GOT check failed: %s", (int)ctl->pid, e);
	}
	if (ck.missed == 0 && !ck.other_ns) {
		msg_info("PID %d: GOT check passed: all %lu slots of the allocation functions lead to "
			 "the sampler%s", (int)ctl->pid, ck.checked - ck.own,
			 ck.own ? "" : " (none bound to another allocator)");
		if (ck.own)
			msg_info("PID %d: %lu slots left to their object's own allocator (not traced)",
				 (int)ctl->pid, ck.own);
		return 0;
	}
	if (ck.missed == 0) return 0;
	char names[1600] = "";
	size_t len = 0;
	for (unsigned long i = 0; i < ck.missed && i < SAMPLER_CHECK_KEEP; i++) {
		char obj[320];
		sampler_slot_object(ctl->pid, ck.missed_slot[i], obj, sizeof obj);
		len += snprintf(names + len, sizeof names - len, "%s0x%lx in %s", i ? ", " : "",
				ck.missed_slot[i], obj);
		if (len >= sizeof names) break;
	}
	if (required) {
		snprintf(err, errlen, "--inject=required: %lu GOT slots of PID %d still lead to the "
			 "allocator, not to the sampler (%s)", ck.missed, (int)ctl->pid, names);
		char e2[256];
		sampler_stop(ctl, e2, sizeof e2);
		return -1;
	}
	msg_warn("PID %d: GOT check failed: %lu slots still lead to the allocator, their calls are "
		 "not traced (%s)", (int)ctl->pid, ck.missed, names);
	return 0;
}

int inject_mode_start(struct sampler_ctl *ctl, const struct cli_opts *o, char *err, size_t errlen)
{
	long slots = 0;
	if (sampler_start(ctl, o->rate, &slots, err, errlen) < 0) return -1;
	msg_info("PID %d: sampler %s %s, %ld GOT entries redirected (by a thread of its own, "
		 "created by thread %d after %ld ms waiting for a safe moment)", (int)ctl->pid,
		 ctl->reused ? "already in place (reused):" : "placed:", ctl->path, slots,
		 (int)ctl->agent_stub_tid, ctl->safe_wait_ms);
	if (o->inject_default)
		msg_info("PID %d: traced through the in-process sampler (the default: a few ns per "
			 "allocation call; --inject=no traces with uprobes)", (int)ctl->pid);
	/* a namespace there already is said by the check */
	ctl->copies_said = sampler_second_copies(ctl->pid, NULL, 0);
	return check_slots(ctl, o->inject == CLI_INJECT_REQUIRED, err, errlen);
}

void inject_mode_after_dlopen(struct sampler_ctl *ctl)
{
	if (!ctl || !ctl->started) return;
	char first[4096];
	int n = sampler_second_copies(ctl->pid, first, sizeof first);
	if (n <= ctl->copies_said) return;
	ctl->copies_said = n;
	msg_warn("PID %d: a library was loaded with dlmopen into another link-map namespace (a "
		 "second copy of %s): its objects call their own copy of the allocator, which the "
		 "sampler does not see: their allocations are not traced (--inject=no traces them "
		 "with uprobes)", (int)ctl->pid, first);
}

void inject_mode_stop(struct sampler_ctl *ctl, bool alive, struct session *s)
{
	if (!ctl) return;
	char err[512] = "";
	if (alive) inject_mode_after_dlopen(ctl); /* a dlmopen the dlopen watch did not see yet */
	if (alive && sampler_stop(ctl, err, sizeof err) < 0)
		msg_warn("PID %d: cannot put the GOT entries back (%s); the sampler stays inert "
			 "without a tracer", (int)ctl->pid, err);
	else if (alive) /* stopped: its count of calls is final (issue 47: rate 1's counts) */
		inject_mode_source_calls(ctl, s);
	sampler_ctl_free(ctl, alive);
}

void inject_mode_source_calls(const struct sampler_ctl *ctl, struct session *s)
{
	uint64_t calls;
	if (ctl && s && ctl->rate >= 1 && sampler_calls(ctl, &calls))
		session_set_source_calls(s, calls);
}

void inject_mode_at_entry(void *ctl, pid_t pid, long ptrace_options)
{
	struct sampler_ctl *c = ctl;
	char err[4400] = "";
	long slots = 0;
	if (sampler_place_held(pid, pid, ptrace_options, c, c->rate, &slots, err, sizeof err) < 0) {
		msg_warn("--inject: cannot place the sampler into PID %d at its entry point (%s): its "
			 "allocations are not traced", (int)pid, err);
		return;
	}
	msg_info("PID %d: sampler placed at its entry point: %s, %ld GOT entries redirected",
		 (int)pid, c->path, slots);
	if (c->by_default)
		msg_info("PID %d: traced through the in-process sampler (the default: a few ns per "
			 "allocation call; --inject=no traces with uprobes)", (int)pid);
	check_slots(c, false, err, sizeof err);
}

int inject_mode_use_carried(const struct cli_opts *o, pid_t pid, struct tracer **tracer)
{
	*tracer = NULL;
	char path[4200], err[1200] = "";
	if (carried_sampler_find(pid, path, sizeof path) != 0) return 0;
	*tracer = usdt_tracer_attached(o, pid, path, err, sizeof err);
	if (!*tracer) {
		msg_warn("PID %d carries an in-process sampler (%s) that cannot be traced (%s): "
			 "tracing it with uprobes", (int)pid, path, err);
		return 0;
	}
	msg_info("PID %d carries an in-process sampler (otel_memory probes in %s): tracing through "
		 "it, not with uprobes", (int)pid, path);
	return 1;
}

struct tracer *inject_mode_child_tracer(const struct cli_opts *o, pid_t pid, const char *path)
{
	char err[1200] = "";
	struct tracer *t = usdt_tracer_attached(o, pid, path, err, sizeof err);
	if (!t)
		msg_warn("PID %d (a fork of a process with the sampler): %s; tracing it with uprobes",
			 (int)pid, err);
	else
		msg_info("PID %d: a fork of a process with the sampler in place: traced through it",
			 (int)pid);
	return t;
}
