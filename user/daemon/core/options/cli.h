/* memtraced's command line: parsing and validation of the options (no side effects). */
#ifndef MEMTRACED_CLI_H
#define MEMTRACED_CLI_H

#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/msg.h" /* MEMTRACED_VERSION */
#include "select/select.h"
#include "protocol/python.h"
#include "tracer/tracer.h" /* enum tracer_attach */
#include "options_file.h"

#define CLI_DEFAULT_RATE 1e-5
#define CLI_DEFAULT_STACK_BYTES 1048576u
#define CLI_MAX_STACK_BYTES 1048576u

#define CLI_MAX_PIDS 64

enum cli_inject {
	CLI_INJECT_NO = 0,     /* allocator uprobes (--match, --cgroup, --probe-floor; --inject=no) */
	CLI_INJECT_AUTO,       /* --inject, the default of -p and -- CMD: our in-process sampler,
	                        * else uprobes (saying why) */
	CLI_INJECT_REQUIRED,   /* --inject=required: the sampler or nothing */
};

struct cli_opts {
	pid_t pid;            /* the first -p PID, 0 when a command is given instead */
	pid_t pids[CLI_MAX_PIDS]; /* every -p PID (repeatable), in order, no duplicates */
	int npids;
	char **cmd;           /* argv after "--" (NULL-terminated), NULL with -p */
	const char *output;   /* -o FILE ("%p" = the PID); NULL = memtrace-PID.ctf in the current
	                         directory; see no_trace */
	bool no_trace;        /* -o none: no continuous trace (snapshots only) */
	double rate;          /* --rate: sampling probability per 8-byte word, (0, 1] */
	double duration;      /* --duration SEC; 0 = until the target exits or a signal */
	unsigned stack_bytes; /* --stack-bytes N: user stack copied per sample at most */
	unsigned ring_bytes;  /* --ring-size BYTES: the BPF ring buffer (0: the default, 4 MiB) */
	bool probe_floor;     /* --probe-floor (hidden, benchmarks): empty probes, no trace */
	bool quiet;           /* -q: no status messages, only errors and the summary */
	bool no_status;       /* --no-status: no live status line on a terminal (see status.h) */
	bool top;             /* --top: a refreshing table of the top live sites (see status.h) */
	double top_interval;  /* --top-interval SEC: refresh period of --top (default 1) */
	bool top_by_function; /* --top-by function: group the table by function, not call site */
	const char *snapshot_dir;  /* --snapshot-dir DIR, NULL = no snapshots */
	double snapshot_interval;  /* --snapshot-interval SEC; 0 = only on SIGUSR1 and at the end */
	unsigned snapshot_keep;    /* --snapshot-keep N; 0 = keep all */
	unsigned file_mode;        /* --file-mode MODE: trace and snapshot files (default 0600) */
	bool follow_forks;         /* --follow-forks: trace forked processes too, each on its own
				      (the default with --match and --cgroup) */
	bool no_follow_forks;      /* --no-follow-forks */
	enum cli_inject inject;    /* --inject[=required|no], or the default (cli.c: default_inject) */
	bool inject_default;       /* inject is AUTO by default, not by --inject */
	int format_version;        /* --format v2|v3: the continuous trace's format (default 2) */
	bool no_mmap;              /* --no-mmap: anonymous memory mappings are not traced */
	enum py_mode python;       /* --python (protocol/python.h) */
	bool no_carried;           /* --inject=no: uprobes even if the target carries a sampler */
	bool hold_exec;            /* --hold-exec (-p): ptrace-hold the process at each exec until the
				      new program's probes are in place (-- CMD always is) */
	const char *listen;        /* --listen [ADDR:]PORT: serve /metrics and / (NULL: no) */
	bool listen_public;        /* --listen-public: an address that is not loopback is allowed */
	const char *listen_token;  /* --listen-token FILE: the bearer token every request carries */
	bool listen_root_profiles; /* --listen-root-profiles: root's processes' profiles without it */
	enum tracer_attach attach; /* --attach-mode auto|session|multi|perf (tracer/kernel_probe.h) */
	bool kernel_check;         /* --kernel-check: print what the kernel offers, trace nothing */
	struct select_opts select; /* --match, --cgroup, --max-processes: processes found by name or
				      cgroup, now and as they exec (select.h) */
	const char *options_file;  /* --options-file FILE: its options come first (before the
				      command line's), read again at SIGHUP (options_file.h) */
	char **argv_owned;         /* the command line with FILE's options in it (cli_free) */
	struct options_words file_words;
};

#define CLI_DEFAULT_FILE_MODE 0600

/* The trace file of pid: o->output with every "%p" replaced by pid ("%%" is a "%"), or
 * memtrace-PID.ctf. Returns 0, or -1 if it does not fit in len. */
int cli_output_path(const struct cli_opts *o, pid_t pid, char *buf, size_t len);
/* The trace of the n-th program pid exec'd (n >= 1): base with ".execN" before its ".ctf"
 * (trace.ctf -> trace.exec1.ctf), or appended when base does not end in ".ctf". 0, or -1 if
 * it does not fit in len. */
int cli_exec_output_path(const char *base, unsigned n, char *buf, size_t len);

enum cli_result { CLI_OK = 0, CLI_EXIT_OK = 1 /* --help/--version printed */, CLI_ERROR = -1 };

/* Parses argv into *o. On CLI_ERROR, err holds a message saying what is wrong. */
enum cli_result cli_parse(int argc, char **argv, struct cli_opts *o, char *err, size_t errlen);
/* What cli_parse allocated (--options-file): o's strings point into it. */
void cli_free(struct cli_opts *o);
void cli_usage(FILE *out);

#endif
