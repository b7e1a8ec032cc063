/* What the running kernel offers memtraced, probed once (BPF map types, helpers and link
 * types are loaded or created for real, not guessed from the version), and the attach mode
 * that follows: the one place that knows kernel versions (docs/kernels.md).
 *
 * Attach modes, fastest first (docs/kernel-facts.md: cost per malloc/free pair):
 *   session  session uprobes (6.13+): one program sees entry and return, and only a sampled
 *            call pays the return probe
 *   multi    uprobe_multi links (6.6+) for entries and for return probes: every allocation
 *            call pays a return probe, the links are made per object, not per site
 *   perf     perf-event uprobes and uretprobes (any kernel): a return probe per call, a link
 *            per site */
#ifndef MEMTRACED_KERNEL_PROBE_H
#define MEMTRACED_KERNEL_PROBE_H
#include <stdbool.h>
#include <stddef.h>

#include "tracer.h"

struct kernel_features {
	char release[65];          /* uname -r */
	int major, minor;
	bool btf;                  /* /sys/kernel/btf/vmlinux */
	bool ringbuf;              /* BPF_MAP_TYPE_RINGBUF, 5.8 */
	bool task_storage;         /* BPF_MAP_TYPE_TASK_STORAGE, 5.11 */
	bool current_task_btf;     /* bpf_get_current_task_btf, 5.11 */
	bool attach_cookie;        /* bpf_get_attach_cookie, 5.15 */
	bool task_pt_regs;         /* bpf_task_pt_regs, 5.15 */
	bool bpf_loop;             /* bpf_loop, 5.17 */
	bool find_vma;             /* bpf_find_vma, 5.17 */
	bool uprobe_multi;         /* BPF_TRACE_UPROBE_MULTI links, 6.6 */
	bool uprobe_session;       /* BPF_TRACE_UPROBE_SESSION links, 6.13 */
	bool seccomp_addfd_send;   /* SECCOMP_ADDFD_FLAG_SEND, 5.14 (the parser's file broker) */
	bool bpf_capable;          /* our effective capabilities load BPF tracing programs:
	                            * CAP_SYS_ADMIN, or CAP_BPF with CAP_PERFMON */
	char lockdown[24];         /* /sys/kernel/security/lockdown's selected level ("" unknown) */
	bool probe_read_kernel;    /* bpf_probe_read_kernel (lockdown=confidentiality withholds it) */
	int ptrace_scope;          /* Yama's kernel.yama.ptrace_scope, -1 without Yama */
};

/* The level selected in a lockdown file's text ("none integrity [confidentiality]"), into
 * out; "" when none is marked. */
void kernel_lockdown_level(const char *text, char *out, size_t outlen);

/* Probed at the first call (thread-safe), the same answer after. Needs root for the BPF
 * parts; without it they read as missing. */
const struct kernel_features *kernel_features(void);

/* The fastest attach mode this kernel has. */
enum tracer_mode kernel_best_mode(void);
/* Whether mode can work here; if not, *why says which kernel feature is missing. */
bool kernel_has_mode(enum tracer_mode mode, const char **why);

/* What a kernel that cannot run memtraced at all lacks, as one line ("kernel 5.10.0-46-amd64
 * lacks BPF task storage (5.11+), ...: memtraced needs 5.17 or later"); false when it has
 * everything. */
bool kernel_lacks(char *buf, size_t len);

/* One line for the start, the summary and /metrics: the mode in use and, when it is not the
 * fastest memtraced has, why ("uprobe_multi + uretprobes (kernel 6.12 has no session uprobes,
 * 6.13+: a return probe on every call, about 1.2x the cost of a malloc/free pair; --inject
 * avoids it)"). */
void kernel_mode_line(enum tracer_mode mode, bool forced, char *buf, size_t len);
/* The attach mode of this run's allocator probes (--attach-mode; default auto): tracers whose
 * options say TRACER_ATTACH_AUTO take it. */
void kernel_set_attach(enum tracer_attach a);
enum tracer_attach kernel_attach(void);
/* The mode that the allocator probes of this run get: 0, or -1 with a message naming what
 * the kernel lacks. */
int kernel_attach_mode(enum tracer_attach a, enum tracer_mode *mode, char *err, size_t errlen);
/* A mode's short name, as --attach-mode takes it: session, multi, perf, usdt. */
const char *tracer_mode_short(enum tracer_mode mode);
#endif
