/* The records of the lifecycle watcher (bpf/lifecycle.bpf.c -> user/daemon/core/process/lifecycle.c). */
#ifndef MEMTRACED_LIFECYCLE_EVENTS_H
#define MEMTRACED_LIFECYCLE_EVENTS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

enum lc_kind {
	LC_EXEC = 1,    /* pid exec'd a new program */
	LC_FORK = 2,    /* pid forked a new process: child */
	LC_DLOPEN = 3,  /* pid's ld.so changed its link map (dlopen, dlclose) */
};

struct lc_event {
	__u32 kind;     /* enum lc_kind */
	__u32 pid;      /* the watched process (tgid) */
	__u32 child;    /* LC_FORK: the new process */
	__u32 pad;
	__u64 time_ns;  /* bpf_ktime_get_ns (CLOCK_MONOTONIC) */
};

#endif
