/* memtraced's command line. Every value is checked here, before anything is attached. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void cli_usage(FILE *out)
{
	fprintf(out,
		"usage: memtraced -p PID [options]\n"
		"       memtraced --match PATTERN | --cgroup PATH [options]\n"
		"       memtraced [options] -- CMD [ARGS...]\n"
		"Traces the allocations (malloc, free, ...) of a running process, or of CMD from its\n"
		"first allocation, into a memtrace trace (.ctf, format v2). Needs root (or CAP_BPF,\n"
		"CAP_PERFMON and CAP_SYS_PTRACE).\n"
		"\n"
		"  -p, --pid PID        attach to the running process PID\n"
		"  -p PID -p PID2 ...   several processes, each into its own trace and snapshots\n"
		"      --match PATTERN  trace every process whose executable (path or base name)\n"
		"                       matches the shell PATTERN: those that run now and those\n"
		"                       that exec such a program later; repeatable (either\n"
		"                       matches). A base name is any user's to take (a copy of a\n"
		"                       program under that name): a path or --cgroup selects only\n"
		"                       root's programs\n"
		"      --match-argv0    --match also by the name a process was started as and its\n"
		"                       comm (any process may claim those: exec -a NAME)\n"
		"      --cgroup PATH    trace every process in the cgroup v2 subtree PATH (relative\n"
		"                       to /sys/fs/cgroup); with --match: both must hold\n"
		"      --max-processes N  with --match or --cgroup: trace at most N at once (default\n"
		"                       64), warn about the others (with --follow-forks: at most N\n"
		"                       forked children at once too). No continuous trace unless -o\n"
		"                       FILE with %%p: snapshots into --snapshot-dir\n"
		"      --listen [ADDR:]PORT  serve /metrics (Prometheus), /debug/pprof/heap and\n"
		"                       /debug/pprof/allocs (pprof, ?pid=N, ?seconds=N) and an\n"
		"                       index at / over HTTP on ADDR (default 127.0.0.1; IPv6 in\n"
		"                       brackets: [::1]:9464); an\n"
		"                       address that is not loopback also needs --listen-public\n"
		"                       (heap profiles show code paths)\n"
		"      --listen-token FILE  every request must carry 'Authorization: Bearer TOKEN',\n"
		"                       TOKEN the first line of FILE (root's, mode 0600); without it\n"
		"                       profiles leave out processes that run as root\n"
		"      --options-file FILE  options read from FILE first, and again at SIGHUP (the\n"
		"                       unit's environment file: MEMTRACED_SELECT, MEMTRACED_LISTEN,\n"
		"                       MEMTRACED_OPTS); with --match/--cgroup, SIGHUP re-reads it\n"
		"      --listen-root-profiles  without a token, profiles cover processes that run as\n"
		"                       root too: any local user can read them (a host of one user)\n"
		"  -o, --output FILE    trace file (default: memtrace-PID.ctf in the current directory);\n"
		"                       %%p in FILE is replaced by the PID (needed with several -p);\n"
		"                       'none': no continuous trace, only snapshots\n"
		"      --format v2|v3   the trace's memtrace format (default v2; v3: OCaml 5's,\n"
		"                       which the newest memtrace reads; snapshots stay v2)\n"
		"  -r, --rate R         sampling rate per 8-byte word, 0 < R <= 1 (default 1e-5);\n"
		"                       1 records every allocation\n"
		"      --no-mmap        do not trace anonymous memory mappings (mmap, mremap,\n"
		"                       munmap) as allocations\n"
		"      --python=MODE    a CPython 3.11+ process's stacks: 'auto' (default) shows\n"
		"                       its Python frames in place of the eval loop's, 'no' native\n"
		"                       frames only, 'only' hides the interpreter's own C frames\n"
		"  -d, --duration SEC   stop tracing after SEC seconds (default: until the target\n"
		"                       exits, or SIGINT/SIGTERM)\n"
		"  -q, --quiet          no status messages (errors and the final summary only)\n"
		"      --follow-forks   trace each new process the target forks into its own trace\n"
		"                       (-o needs %%p then; default memtrace-CHILDPID.ctf). An exec is\n"
		"                       always followed: the last program's trace is FILE, the ones\n"
		"                       before it FILE with .execN (N execs before it) before .ctf;\n"
		"                       the default with --match and --cgroup (prefork workers)\n"
		"      --no-follow-forks  with --match or --cgroup: not the forked processes\n"
		"      --ring-size BYTES  the BPF ring buffer, a power of two (default 4 MiB)\n"
		"      --stack-bytes N  user stack copied per sample at most, 512 .. 1048576 (the\n"
		"                       default); a copy ends where the thread's stack does, so a\n"
		"                       shallow stack costs only its depth; past 65536 it crosses\n"
		"                       the ring in several records)\n"
		"      --inject[=required|no]  place memtraced's sampler library into the target (the\n"
		"                       default of -p and -- CMD): its allocation calls are sampled\n"
		"                       in the process (a few ns each) and only sampled ones reach\n"
		"                       the tracer; where it cannot be placed, says why and uses\n"
		"                       uprobes (=required: refuses; =no: uprobes).\n"
		"                       A target that carries such a sampler (otel_memory USDT\n"
		"                       probes) is traced through it anyway (=no: with uprobes)\n"
		"      --attach-mode auto|session|multi|perf  how the allocator probes attach:\n"
		"                       session uprobes (Linux 6.13+), uprobe_multi links with return\n"
		"                       probes (6.6+) or perf-event uprobes (any); auto (the default)\n"
		"                       takes the fastest the kernel has and says which\n"
		"      --kernel-check   print what this kernel offers memtraced and exit\n"
		"      --hold-exec      -p: hold the process (ptrace) at each exec until the new\n"
		"                       program's probes are in place, so nothing it allocates is\n"
		"                       missed (-- CMD is always held so)\n"
		"      --snapshot-dir DIR       write heap snapshots (live sampled blocks) into DIR:\n"
		"                               memtrace-PID-SEQ.ctf and memtrace-PID-SEQ.folded, on\n"
		"                               SIGUSR1 and when tracing ends\n"
		"      --snapshot-interval SEC  and every SEC seconds (fractions allowed)\n"
		"      --snapshot-keep N        keep only the newest N snapshots per PID\n"
		"      --file-mode MODE         permissions (octal) of the trace and snapshot files,\n"
		"                               whatever the umask (default 0600)\n"
		"      --no-status      no live status line (shown only when stderr is a terminal)\n"
		"      --top            show a refreshing table of the top live allocation sites\n"
		"                       (on the terminal of stderr, else /dev/tty)\n"
		"      --top-interval SEC  refresh period of --top (default 1)\n"
		"      --top-by site|function  group --top by call site (default) or by function\n"
		"  -h, --help           this help\n"
		"  -V, --version        print the version\n"
		"\n"
		"With -- CMD, memtraced exits with CMD's exit status (128+N if CMD was killed by\n"
		"signal N). Its own messages go to stderr only.\n");
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static bool parse_double(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v)) return false;
	*out = v;
	return true;
}

static bool parse_long(const char *s, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (end == s || *end != '\0' || errno == ERANGE || v < lo || v > hi) return false;
	*out = v;
	return true;
}

/* An octal permission mode: digits 0-7 only, at most 0777. */
static bool parse_mode(const char *s, unsigned *out)
{
	if (!*s || strlen(s) > 4) return false;
	unsigned v = 0;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '7') return false;
		v = v * 8 + (unsigned)(*p - '0');
	}
	if (v > 0777) return false;
	*out = v;
	return true;
}

int cli_output_path(const struct cli_opts *o, pid_t pid, char *buf, size_t len)
{
	if (len == 0) return -1;
	if (!o->output) {
		int n = snprintf(buf, len, "memtrace-%d.ctf", (int)pid);
		return n < 0 || (size_t)n >= len ? -1 : 0;
	}
	size_t j = 0;
	for (const char *p = o->output; *p; p++) {
		char num[16];
		const char *add = num;
		if (p[0] == '%' && p[1] == 'p') {
			snprintf(num, sizeof num, "%d", (int)pid);
			p++;
		} else if (p[0] == '%' && p[1] == '%') {
			add = "%";
			p++;
		} else {
			num[0] = *p;
			num[1] = '\0';
		}
		size_t k = strlen(add);
		if (j + k >= len) return -1;
		memcpy(buf + j, add, k);
		j += k;
	}
	buf[j] = '\0';
	return 0;
}

int cli_exec_output_path(const char *base, unsigned n, char *buf, size_t len)
{
	size_t bl = strlen(base);
	bool ctf = bl >= 4 && strcmp(base + bl - 4, ".ctf") == 0;
	int k = ctf ? snprintf(buf, len, "%.*s.exec%u.ctf", (int)(bl - 4), base, n)
		    : snprintf(buf, len, "%s.exec%u", base, n);
	return k < 0 || (size_t)k >= len ? -1 : 0;
}

enum { OPT_PROBE_FLOOR = 256, OPT_STACK_BYTES, OPT_NO_STATUS, OPT_TOP, OPT_TOP_INTERVAL, OPT_TOP_BY,
       OPT_SNAP_DIR, OPT_SNAP_INTERVAL, OPT_SNAP_KEEP, OPT_FILE_MODE, OPT_FOLLOW_FORKS, OPT_NO_FOLLOW_FORKS,
       OPT_HOLD_EXEC, OPT_RING_SIZE, OPT_INJECT, OPT_NO_MMAP, OPT_PYTHON, OPT_FORMAT, OPT_MATCH, OPT_CGROUP,
       OPT_MAX_PROCESSES, OPT_LISTEN, OPT_LISTEN_PUBLIC, OPT_LISTEN_TOKEN, OPT_LISTEN_ROOT, OPT_ATTACH_MODE, OPT_KERNEL_CHECK,
       OPT_OPTIONS_FILE, OPT_MATCH_ARGV0 };

/* Which options were given, for the checks across options. */
struct cli_seen {
	bool pid, interval, keep, inject;
};

static const struct option longopts[] = {
	{"pid", required_argument, NULL, 'p'},
	{"output", required_argument, NULL, 'o'},
	{"rate", required_argument, NULL, 'r'},
	{"duration", required_argument, NULL, 'd'},
	{"quiet", no_argument, NULL, 'q'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{"probe-floor", no_argument, NULL, OPT_PROBE_FLOOR},
	{"stack-bytes", required_argument, NULL, OPT_STACK_BYTES},
	{"snapshot-dir", required_argument, NULL, OPT_SNAP_DIR},
	{"snapshot-interval", required_argument, NULL, OPT_SNAP_INTERVAL},
	{"snapshot-keep", required_argument, NULL, OPT_SNAP_KEEP},
	{"file-mode", required_argument, NULL, OPT_FILE_MODE},
	{"no-status", no_argument, NULL, OPT_NO_STATUS},
	{"top", no_argument, NULL, OPT_TOP},
	{"top-interval", required_argument, NULL, OPT_TOP_INTERVAL},
	{"top-by", required_argument, NULL, OPT_TOP_BY},
	{"follow-forks", no_argument, NULL, OPT_FOLLOW_FORKS},
	{"no-follow-forks", no_argument, NULL, OPT_NO_FOLLOW_FORKS},
	{"hold-exec", no_argument, NULL, OPT_HOLD_EXEC},
	{"ring-size", required_argument, NULL, OPT_RING_SIZE},
	{"inject", optional_argument, NULL, OPT_INJECT},
	{"no-mmap", no_argument, NULL, OPT_NO_MMAP},
	{"python", required_argument, NULL, OPT_PYTHON},
	{"format", required_argument, NULL, OPT_FORMAT},
	{"match", required_argument, NULL, OPT_MATCH},
	{"cgroup", required_argument, NULL, OPT_CGROUP},
	{"max-processes", required_argument, NULL, OPT_MAX_PROCESSES},
	{"match-argv0", no_argument, NULL, OPT_MATCH_ARGV0},
	{"listen", required_argument, NULL, OPT_LISTEN},
	{"listen-public", no_argument, NULL, OPT_LISTEN_PUBLIC},
	{"listen-token", required_argument, NULL, OPT_LISTEN_TOKEN},
	{"listen-root-profiles", no_argument, NULL, OPT_LISTEN_ROOT},
	{"attach-mode", required_argument, NULL, OPT_ATTACH_MODE},
	{"kernel-check", no_argument, NULL, OPT_KERNEL_CHECK},
	{"options-file", required_argument, NULL, OPT_OPTIONS_FILE},
	{NULL, 0, NULL, 0},
};

/* -p PID: positive, not given twice, at most CLI_MAX_PIDS. */
static bool parse_pid_opt(const char *arg, struct cli_opts *o, char *err, size_t errlen)
{
	long l;
	if (!parse_long(arg, 1, INT_MAX, &l)) {
		set_err(err, errlen, "invalid PID '%s': expected a positive process id", arg);
		return false;
	}
	for (int i = 0; i < o->npids; i++)
		if (o->pids[i] == (pid_t)l) {
			set_err(err, errlen, "PID %ld is given twice", l);
			return false;
		}
	if (o->npids == CLI_MAX_PIDS) {
		set_err(err, errlen, "too many -p PIDs (at most %d)", CLI_MAX_PIDS);
		return false;
	}
	o->pids[o->npids++] = (pid_t)l;
	if (o->npids == 1) o->pid = (pid_t)l;
	return true;
}

/* A number of seconds in [lo, hi] (lo excluded when lo_open). */
static bool parse_seconds(const char *arg, double lo, bool lo_open, double hi, double *out)
{
	double v;
	if (!parse_double(arg, &v) || (lo_open ? !(v > lo) : !(v >= lo)) || v > hi) return false;
	*out = v;
	return true;
}

/* Options that take a value and only check it. false with a message in err. */
static bool parse_valued(int c, const char *arg, struct cli_opts *o, struct cli_seen *seen,
			 char *err, size_t errlen)
{
	long l;
	switch (c) {
	case 'o':
		if (arg[0] == '\0') return set_err(err, errlen, "invalid output file: empty name"), false;
		o->output = arg;
		o->no_trace = strcmp(arg, "none") == 0;
		return true;
	case 'r':
		if (parse_seconds(arg, 0, true, 1, &o->rate)) return true;
		set_err(err, errlen, "invalid rate '%s': expected a number with 0 < rate <= 1 "
			"(sampling probability per 8-byte word, e.g. 1e-5)", arg);
		return false;
	case 'd':
		if (parse_seconds(arg, 0, true, 1e9, &o->duration)) return true;
		set_err(err, errlen, "invalid duration '%s': expected a positive number of seconds", arg);
		return false;
	case OPT_STACK_BYTES:
		/* A user stack copy: at least a few frames, at most what the BPF program sends in
		 * pieces (MT_STACK_BYTES_LIMIT; tracer.c checks that they agree). */
		if (!parse_long(arg, 512, CLI_MAX_STACK_BYTES, &l)) {
			set_err(err, errlen, "invalid --stack-bytes '%s': expected 512 .. %u", arg,
				CLI_MAX_STACK_BYTES);
			return false;
		}
		o->stack_bytes = (unsigned)l;
		return true;
	case OPT_RING_SIZE:
		/* a power of two the kernel takes for a BPF ring buffer: 64 KiB .. 1 GiB */
		if (!parse_long(arg, 65536, 1L << 30, &l) || (l & (l - 1))) {
			set_err(err, errlen, "invalid --ring-size '%s': expected a power of two of bytes, "
				"65536 .. 1073741824", arg);
			return false;
		}
		o->ring_bytes = (unsigned)l;
		return true;
	case OPT_INJECT:
		seen->inject = true;
		if (!arg || strcmp(arg, "auto") == 0) o->inject = CLI_INJECT_AUTO;
		else if (strcmp(arg, "required") == 0) o->inject = CLI_INJECT_REQUIRED;
		else if (strcmp(arg, "no") == 0) o->inject = CLI_INJECT_NO, o->no_carried = true;
		else {
			set_err(err, errlen, "invalid --inject='%s': expected --inject, --inject=required "
				"or --inject=no", arg);
			return false;
		}
		return true;
	case OPT_PYTHON:
		if (strcmp(arg, "auto") == 0) o->python = PY_MODE_AUTO;
		else if (strcmp(arg, "no") == 0) o->python = PY_MODE_NO;
		else if (strcmp(arg, "only") == 0) o->python = PY_MODE_ONLY;
		else {
			set_err(err, errlen, "invalid --python '%s': expected auto (the default), no or "
				"only", arg);
			return false;
		}
		return true;
	case OPT_FORMAT:
		if (strcmp(arg, "v2") == 0 || strcmp(arg, "2") == 0) o->format_version = 2;
		else if (strcmp(arg, "v3") == 0 || strcmp(arg, "3") == 0) o->format_version = 3;
		else {
			set_err(err, errlen, "invalid --format '%s': expected v2 (the default) or v3 "
				"(memtrace for OCaml 5)", arg);
			return false;
		}
		return true;
	case OPT_TOP_INTERVAL:
		if (parse_seconds(arg, 0.1, false, 3600, &o->top_interval)) return true;
		set_err(err, errlen, "invalid --top-interval '%s': expected seconds, 0.1 .. 3600", arg);
		return false;
	case OPT_TOP_BY:
		if (strcmp(arg, "site") != 0 && strcmp(arg, "function") != 0) {
			set_err(err, errlen, "invalid --top-by '%s': expected 'site' or 'function'", arg);
			return false;
		}
		o->top_by_function = strcmp(arg, "function") == 0;
		return true;
	case OPT_SNAP_DIR:
		if (arg[0] == '\0') return set_err(err, errlen, "invalid --snapshot-dir: empty name"), false;
		o->snapshot_dir = arg;
		return true;
	case OPT_SNAP_INTERVAL:
		seen->interval = true;
		if (parse_seconds(arg, 0.01, false, 1e7, &o->snapshot_interval)) return true;
		set_err(err, errlen, "invalid --snapshot-interval '%s': expected seconds, 0.01 or more "
			"(fractions allowed)", arg);
		return false;
	case OPT_SNAP_KEEP:
		seen->keep = true;
		if (!parse_long(arg, 1, INT_MAX, &l)) {
			set_err(err, errlen, "invalid --snapshot-keep '%s': expected a positive number of "
				"snapshots", arg);
			return false;
		}
		o->snapshot_keep = (unsigned)l;
		return true;
	case OPT_MATCH:
		if (!arg[0]) return set_err(err, errlen, "invalid --match: empty pattern"), false;
		if (o->select.nmatch == SELECT_MAX)
			return set_err(err, errlen, "too many --match (at most %d)", SELECT_MAX), false;
		o->select.match[o->select.nmatch++] = arg;
		return true;
	case OPT_LISTEN:
		if (!arg[0]) return set_err(err, errlen, "invalid --listen: empty"), false;
		o->listen = arg;
		return true;
	case OPT_OPTIONS_FILE: /* read before the options (options_from_file) */
		if (o->options_file && strcmp(o->options_file, arg) != 0)
			return set_err(err, errlen, "--options-file given twice"), false;
		return true;
	case OPT_LISTEN_TOKEN:
		if (!arg[0]) return set_err(err, errlen, "invalid --listen-token: empty"), false;
		o->listen_token = arg;
		return true;
	case OPT_CGROUP:
		return select_add_cgroup(&o->select, arg, err, errlen);
	case OPT_MAX_PROCESSES:
		if (!parse_long(arg, 1, 4096, &l)) {
			set_err(err, errlen, "invalid --max-processes '%s': expected 1 .. 4096", arg);
			return false;
		}
		o->select.max_processes = (int)l;
		return true;
	case OPT_FILE_MODE:
		if (parse_mode(arg, &o->file_mode)) return true;
		set_err(err, errlen, "invalid --file-mode '%s': expected an octal permission mode such as "
			"0600 or 0640 (at most 0777)", arg);
		return false;
	}
	set_err(err, errlen, "internal error: option %d", c);
	return false;
}

/* One option from getopt_long. */
static enum cli_result parse_option(int c, char **argv, struct cli_opts *o, struct cli_seen *seen,
				    char *err, size_t errlen)
{
	switch (c) {
	case 'p':
		seen->pid = true;
		return parse_pid_opt(optarg, o, err, errlen) ? CLI_OK : CLI_ERROR;
	case 'q': o->quiet = true; return CLI_OK;
	case 'h': cli_usage(stdout); return CLI_EXIT_OK;
	case 'V': printf("memtraced %s\n", MEMTRACED_VERSION); return CLI_EXIT_OK;
	case OPT_PROBE_FLOOR: o->probe_floor = true; return CLI_OK;
	case OPT_NO_STATUS: o->no_status = true; return CLI_OK;
	case OPT_TOP: o->top = true; return CLI_OK;
	case OPT_FOLLOW_FORKS: o->follow_forks = true; return CLI_OK;
	case OPT_NO_FOLLOW_FORKS: o->no_follow_forks = true; return CLI_OK;
	case OPT_HOLD_EXEC: o->hold_exec = true; return CLI_OK;
	case OPT_NO_MMAP: o->no_mmap = true; return CLI_OK;

	case OPT_LISTEN_PUBLIC: o->listen_public = true; return CLI_OK;
	case OPT_LISTEN_ROOT: o->listen_root_profiles = true; return CLI_OK;
	case OPT_MATCH_ARGV0: o->select.by_argv0 = true; return CLI_OK;
	case OPT_KERNEL_CHECK: o->kernel_check = true; return CLI_OK;
	case OPT_ATTACH_MODE: {
		static const char *const names[] = {"auto", "session", "multi", "perf"};
		for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
			if (strcmp(optarg, names[i]) == 0) {
				o->attach = (enum tracer_attach)i;
				return CLI_OK;
			}
		set_err(err, errlen, "invalid --attach-mode '%s': expected auto, session, multi or perf",
			optarg);
		return CLI_ERROR;
	}
	case ':':
		set_err(err, errlen, "option '%s' needs a value", argv[optind - 1]);
		return CLI_ERROR;
	case '?':
		set_err(err, errlen, "unknown option '%s' (try --help)", argv[optind - 1]);
		return CLI_ERROR;
	}
	return parse_valued(c, optarg, o, seen, err, errlen) ? CLI_OK : CLI_ERROR;
}

/* What no single option shows: what to trace, and options that need one another. */
static enum cli_result check_combination(const struct cli_opts *o, const struct cli_seen *seen,
					 char *err, size_t errlen)
{
	if (seen->pid && o->cmd && o->cmd[0][0] && strspn(o->cmd[0], "0123456789") == strlen(o->cmd[0])) {
		set_err(err, errlen, "'%s' after -p %d: give several processes each with its own -p "
			"(-p %d -p %s)", o->cmd[0], (int)o->pids[o->npids - 1], (int)o->pids[o->npids - 1],
			o->cmd[0]);
		return CLI_ERROR;
	}
	bool selecting = select_active(&o->select);
	if ((seen->pid || selecting) && o->cmd) {
		set_err(err, errlen, "give either -p PID (or --match, --cgroup) or -- CMD, not both");
		return CLI_ERROR;
	}
	if (o->kernel_check && (seen->pid || o->cmd || selecting)) {
		set_err(err, errlen, "--kernel-check traces nothing: give it alone");
		return CLI_ERROR;
	}
	if (!seen->pid && !o->cmd && !selecting && !o->kernel_check) {
		set_err(err, errlen, "nothing to trace: give -p PID, --match PATTERN, --cgroup PATH or "
			"-- CMD [ARGS...] (try --help)");
		return CLI_ERROR;
	}
	if ((o->listen_token || o->listen_root_profiles) && !o->listen) {
		set_err(err, errlen, "--listen-token and --listen-root-profiles go with --listen");
		return CLI_ERROR;
	}
	if (o->select.by_argv0 && !o->select.nmatch) {
		set_err(err, errlen, "--match-argv0 goes with --match");
		return CLI_ERROR;
	}
	if (o->select.max_processes && !selecting && !o->follow_forks) {
		set_err(err, errlen, "--max-processes goes with --match, --cgroup or --follow-forks");
		return CLI_ERROR;
	}
	if (selecting && !o->output && !o->snapshot_dir && !o->listen) {
		set_err(err, errlen, "--match and --cgroup write no continuous trace unless -o FILE "
			"(with %%p) is given: give --snapshot-dir DIR, --listen, or -o");
		return CLI_ERROR;
	}
	if (selecting && o->output && !o->no_trace && !strstr(o->output, "%p")) {
		set_err(err, errlen, "with --match or --cgroup, each process needs its own trace: put "
			"%%p (replaced by the PID) in the -o file name, e.g. -o trace-%%p.ctf");
		return CLI_ERROR;
	}
	if (selecting && o->hold_exec) {
		set_err(err, errlen, "--hold-exec goes with -p only for now (processes found by "
			"--match or --cgroup are attached just after their exec)");
		return CLI_ERROR;
	}
	if ((seen->interval || seen->keep) && !o->snapshot_dir) {
		set_err(err, errlen, "%s needs --snapshot-dir DIR",
			seen->interval ? "--snapshot-interval" : "--snapshot-keep");
		return CLI_ERROR;
	}
	if (o->no_trace && !o->snapshot_dir && !o->listen && !o->probe_floor) {
		set_err(err, errlen, "-o none writes no trace: give --snapshot-dir DIR for snapshots, or --listen");
		return CLI_ERROR;
	}
	if (o->npids > 1 && o->output && !o->no_trace && !strstr(o->output, "%p")) {
		set_err(err, errlen, "with several -p, each process needs its own trace: put %%p "
			"(replaced by the PID) in the -o file name, e.g. -o trace-%%p.ctf");
		return CLI_ERROR;
	}
	if (o->inject && o->probe_floor) {
		set_err(err, errlen, "--inject and --probe-floor do not go together (the floor measures "
			"the allocator probes)");
		return CLI_ERROR;
	}
	if (o->follow_forks && o->output && !o->no_trace && !strstr(o->output, "%p")) {
		set_err(err, errlen, "with --follow-forks, each forked process needs its own trace: "
			"put %%p (replaced by the PID) in the -o file name, e.g. -o trace-%%p.ctf");
		return CLI_ERROR;
	}
	return CLI_OK;
}

/* -p and -- CMD trace through the in-process sampler where it can be placed, with uprobes
 * otherwise, saying which and why (issue 34: side by side, uprobes cost clang++ 10-16x its
 * time, the sampler 1.7x). --match, --cgroup and --probe-floor keep uprobes. The environment's
 * MEMTRACED_INJECT=off makes uprobes (or a sampler the target carries) the default instead,
 * as it was: the test suite's checks of the uprobes mode set it. */
static void default_inject(struct cli_opts *o)
{
	const char *env = getenv("MEMTRACED_INJECT");
	if (env && strcmp(env, "off") == 0) return;
	if ((o->npids > 0 || o->cmd) && !select_active(&o->select) && !o->probe_floor) {
		o->inject = CLI_INJECT_AUTO;
		o->inject_default = true;
	}
}

/* --options-file FILE (before "--"): argv becomes argv[0], FILE's options, then the rest of
 * the command line (whose options come later: a --rate there wins over the file's). */
static enum cli_result options_from_file(int *argc, char ***argv, struct cli_opts *o, char *err,
					 size_t errlen)
{
	const char *path = NULL;
	for (int i = 1; i < *argc && strcmp((*argv)[i], "--") != 0; i++) {
		if (strcmp((*argv)[i], "--options-file") == 0 && i + 1 < *argc) path = (*argv)[++i];
		else if (strncmp((*argv)[i], "--options-file=", 15) == 0) path = (*argv)[i] + 15;
	}
	if (!path) return CLI_OK;
	o->options_file = path;
	if (options_file_read(path, &o->file_words, err, errlen) < 0) return CLI_ERROR;
	int n = *argc + o->file_words.n;
	o->argv_owned = calloc((size_t)n + 1, sizeof *o->argv_owned);
	if (!o->argv_owned) return set_err(err, errlen, "out of memory"), CLI_ERROR;
	o->argv_owned[0] = (*argv)[0];
	memcpy(o->argv_owned + 1, o->file_words.w, (size_t)o->file_words.n * sizeof(char *));
	memcpy(o->argv_owned + 1 + o->file_words.n, *argv + 1, (size_t)(*argc - 1) * sizeof(char *));
	*argc = n;
	*argv = o->argv_owned;
	return CLI_OK;
}

void cli_free(struct cli_opts *o)
{
	free(o->argv_owned);
	o->argv_owned = NULL;
	options_words_free(&o->file_words);
}

enum cli_result cli_parse(int argc, char **argv, struct cli_opts *o, char *err, size_t errlen)
{
	*o = (struct cli_opts){.rate = CLI_DEFAULT_RATE, .stack_bytes = CLI_DEFAULT_STACK_BYTES,
			       .top_interval = 1, .file_mode = CLI_DEFAULT_FILE_MODE};
	if (options_from_file(&argc, &argv, o, err, errlen) != CLI_OK) return CLI_ERROR;
	struct cli_seen seen = {0};
	int c;
	opterr = 0;
	optind = 1;
	/* "+": stop at the first non-option, so that CMD's own options are left alone. */
	while ((c = getopt_long(argc, argv, "+:p:o:r:d:qhV", longopts, NULL)) != -1) {
		enum cli_result r = parse_option(c, argv, o, &seen, err, errlen);
		if (r != CLI_OK) return r;
	}
	if (optind < argc) o->cmd = &argv[optind];
	if (!seen.inject) default_inject(o);
	if (select_active(&o->select)) {
		if (!o->select.max_processes) o->select.max_processes = SELECT_DEFAULT_MAX_PROCESSES;
		if (!o->output) o->no_trace = true; /* snapshots only, unless -o */
		/* a selected server's forked workers (nginx, postgres, gunicorn, redis's BGSAVE
		 * child) run its program: they are traced too unless asked not to (issue 36) */
		if (!o->no_follow_forks && !o->probe_floor) o->follow_forks = true;
	}
	/* forked children traced at once are bounded too (issue 46: a fork loop) */
	if (o->follow_forks && !o->select.max_processes)
		o->select.max_processes = SELECT_DEFAULT_MAX_PROCESSES;
	if (o->no_follow_forks) o->follow_forks = false;
	return check_combination(o, &seen, err, errlen);
}
