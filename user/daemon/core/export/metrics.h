/* The Prometheus text exposition (format 0.0.4) of what memtraced measures, for a host
 * service's /metrics (issue 24): per traced process (labels pid and comm) its estimated live
 * bytes and objects, bytes allocated and samples since attach, drops by reason; daemon-wide
 * the processes traced, attach failures, memtraced's own CPU seconds and resident bytes, and
 * how full its ring buffers are. Names and types follow Prometheus's conventions (base units,
 * counters end in _total). Rendered by the daemon from numbers it keeps; no request data
 * reaches this code. */
#ifndef MEMTRACED_EXPORT_METRICS_H
#define MEMTRACED_EXPORT_METRICS_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct metrics_proc {
	pid_t pid;
	const char *comm;          /* any bytes: escaped as a label value */
	/* labels that outlive the pid (NULL or "": left out): its executable, its systemd
	 * service unit and its container id (export/labels.h) */
	const char *exe, *service, *container;
	double live_bytes;         /* estimated from the live sampled blocks */
	double live_objects;
	double allocated_bytes;    /* estimated, since attach */
	uint64_t samples;          /* sampled allocations since attach */
	uint64_t drop_ringbuf, drop_map_full, drop_stack_copy;
	/* frames the parser named for its memory caps (protocol/stack_types.h): past the
	 * distinct-frame cap, past the Python names' budget */
	uint64_t over_cap_frames, py_over_budget;
	uint64_t thinned; /* samples left out under backpressure, their weight on the kept ones */
	unsigned sampler_thin; /* the in-process sampler keeps 1 in this many now (1: all) */
};

struct metrics_daemon {
	uint64_t processes;        /* traced now */
	uint64_t attach_failures;  /* processes selected or named that could not be traced */
	uint64_t refused_max_processes; /* selected processes left untraced by --max-processes */
	uint64_t snapshot_failures; /* snapshots that could not be written (a full disk...) */
	uint64_t parser_restarts;  /* the unprivileged parser died and was started again */
	double cpu_seconds;        /* memtraced's user + system time, its parser's included */
	uint64_t resident_bytes;   /* the daemon's and its parser's together */
	double ringbuf_fill;       /* the fullest ring buffer's fill, 0 .. 1; < 0: not known (left out) */
	const char *version, *kernel; /* memtraced_build_info's labels (NULL: left out) */
	const char *attach_mode;   /* how the allocator probes attach: session, multi, perf */
};

/* The exposition of n processes and the daemon, NUL-terminated and malloc'ed (*len bytes
 * without the NUL), or NULL when out of memory. */
char *metrics_render(const struct metrics_proc *p, size_t n, const struct metrics_daemon *d,
		     size_t *len);

#endif
