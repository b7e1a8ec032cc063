// SPDX-License-Identifier: GPL-2.0
/* memtraced's lifecycle watcher: what a traced process does besides allocating.
 *
 *   exec    tp_btf/sched_process_exec of a watched process (the new image is mapped, its
 *           ld.so has not run yet); with all_execs, of every process (--match, --cgroup:
 *           userspace decides whether the new program is one to trace)
 *   fork    tp_btf/sched_process_fork of a watched parent creating a new PROCESS (threads
 *           are not reported), only with follow_forks; the child is watched at once, so its
 *           own execs and forks are seen even before userspace has caught up
 *   dlopen  a uprobe on ld.so's _dl_debug_state (the gdb method: ld.so calls it before and
 *           after each change of the link map, dlopen and dlclose), one link per process
 *
 * No kprobes (the kernel has none) and no tracefs: BTF tracepoints and uprobes only. Each
 * event is one small record in the `lc_events` ring buffer (rare: no wakeup batching).
 * Userspace (user/daemon/core/process/lifecycle.c) keeps `watched` up to date.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "lifecycle_events.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 follow_forks = 0;
const volatile __u32 all_execs = 0;

/* Watched processes (tgid -> 1). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} watched SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 << 10);
} lc_events SEC(".maps");

__u64 lost_events;

static __always_inline bool is_watched(__u32 tgid)
{
	return bpf_map_lookup_elem(&watched, &tgid) != NULL;
}

static __always_inline void emit(__u32 kind, __u32 pid, __u32 child)
{
	struct lc_event *e = bpf_ringbuf_reserve(&lc_events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&lost_events, 1);
		return;
	}
	e->kind = kind;
	e->pid = pid;
	e->child = child;
	e->pad = 0;
	e->time_ns = bpf_ktime_get_ns();
	bpf_ringbuf_submit(e, 0);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	if (all_execs || is_watched(tgid))
		emit(LC_EXEC, tgid, 0);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid);
	__u32 cpid = BPF_CORE_READ(child, pid), ctgid = BPF_CORE_READ(child, tgid);
	if (cpid != ctgid || ctgid == ptgid) /* a new thread, not a new process */
		return 0;
	if (!follow_forks || !is_watched(ptgid)) /* forks matter only when followed */
		return 0;
	__u32 one = 1;
	bpf_map_update_elem(&watched, &ctgid, &one, BPF_ANY);
	emit(LC_FORK, ptgid, ctgid);
	return 0;
}

/* _dl_debug_state in the process's ld.so (the link filters on the process). */
SEC("uprobe")
int on_dl_debug_state(struct pt_regs *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (is_watched(tgid))
		emit(LC_DLOPEN, tgid, 0);
	return 0;
}
