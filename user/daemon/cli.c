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
		"       memtraced [options] -- CMD [ARGS...]\n"
		"Traces the allocations (malloc, free, ...) of a running process, or of CMD from its\n"
		"first allocation, into a memtrace trace (.ctf, format v2). Needs root (or CAP_BPF,\n"
		"CAP_PERFMON and CAP_SYS_PTRACE).\n"
		"\n"
		"  -p, --pid PID        attach to the running process PID\n"
		"  -o, --output FILE    trace file (default: memtrace-PID.ctf in the current directory)\n"
		"  -r, --rate R         sampling rate per 8-byte word, 0 < R <= 1 (default 1e-5);\n"
		"                       1 records every allocation\n"
		"  -d, --duration SEC   stop tracing after SEC seconds (default: until the target\n"
		"                       exits, or SIGINT/SIGTERM)\n"
		"  -q, --quiet          no status messages (errors and the final summary only)\n"
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

enum { OPT_PROBE_FLOOR = 256, OPT_STACK_BYTES, OPT_NO_STATUS, OPT_TOP, OPT_TOP_INTERVAL, OPT_TOP_BY };

enum cli_result cli_parse(int argc, char **argv, struct cli_opts *o, char *err, size_t errlen)
{
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
		{"no-status", no_argument, NULL, OPT_NO_STATUS},
		{"top", no_argument, NULL, OPT_TOP},
		{"top-interval", required_argument, NULL, OPT_TOP_INTERVAL},
		{"top-by", required_argument, NULL, OPT_TOP_BY},
		{NULL, 0, NULL, 0},
	};
	*o = (struct cli_opts){.rate = CLI_DEFAULT_RATE, .stack_bytes = CLI_DEFAULT_STACK_BYTES,
			       .top_interval = 1};
	bool have_pid = false;
	long l;
	int c;

	opterr = 0;
	optind = 1;
	/* "+": stop at the first non-option, so that CMD's own options are left alone. */
	while ((c = getopt_long(argc, argv, "+:p:o:r:d:qhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (!parse_long(optarg, 1, INT_MAX, &l)) {
				set_err(err, errlen, "invalid PID '%s': expected a positive process id", optarg);
				return CLI_ERROR;
			}
			o->pid = (pid_t)l;
			have_pid = true;
			break;
		case 'o':
			if (optarg[0] == '\0') {
				set_err(err, errlen, "invalid output file: empty name");
				return CLI_ERROR;
			}
			o->output = optarg;
			break;
		case 'r':
			if (!parse_double(optarg, &o->rate) || !(o->rate > 0) || o->rate > 1) {
				set_err(err, errlen, "invalid rate '%s': expected a number with 0 < rate <= 1 "
					"(sampling probability per 8-byte word, e.g. 1e-5)", optarg);
				return CLI_ERROR;
			}
			break;
		case 'd':
			if (!parse_double(optarg, &o->duration) || !(o->duration > 0) || o->duration > 1e9) {
				set_err(err, errlen, "invalid duration '%s': expected a positive number of seconds",
					optarg);
				return CLI_ERROR;
			}
			break;
		case 'q': o->quiet = true; break;
		case 'h': cli_usage(stdout); return CLI_EXIT_OK;
		case 'V': printf("memtraced %s\n", MEMTRACED_VERSION); return CLI_EXIT_OK;
		case OPT_PROBE_FLOOR: o->probe_floor = true; break;
		case OPT_STACK_BYTES:
			/* A user stack copy: at least a few frames, at most what a BPF record can carry. */
			if (!parse_long(optarg, 512, 65536, &l)) {
				set_err(err, errlen, "invalid --stack-bytes '%s': expected 512 .. 65536", optarg);
				return CLI_ERROR;
			}
			o->stack_bytes = (unsigned)l;
			break;
		case OPT_NO_STATUS: o->no_status = true; break;
		case OPT_TOP: o->top = true; break;
		case OPT_TOP_INTERVAL:
			if (!parse_double(optarg, &o->top_interval) || !(o->top_interval >= 0.1) ||
			    o->top_interval > 3600) {
				set_err(err, errlen, "invalid --top-interval '%s': expected seconds, 0.1 .. 3600",
					optarg);
				return CLI_ERROR;
			}
			break;
		case OPT_TOP_BY:
			if (strcmp(optarg, "site") != 0 && strcmp(optarg, "function") != 0) {
				set_err(err, errlen, "invalid --top-by '%s': expected 'site' or 'function'",
					optarg);
				return CLI_ERROR;
			}
			o->top_by_function = strcmp(optarg, "function") == 0;
			break;
		case ':':
			set_err(err, errlen, "option '%s' needs a value", argv[optind - 1]);
			return CLI_ERROR;
		default:
			set_err(err, errlen, "unknown option '%s' (try --help)", argv[optind - 1]);
			return CLI_ERROR;
		}
	}
	if (optind < argc) o->cmd = &argv[optind];
	if (have_pid && o->cmd) {
		set_err(err, errlen, "give either -p PID or -- CMD, not both");
		return CLI_ERROR;
	}
	if (!have_pid && !o->cmd) {
		set_err(err, errlen, "nothing to trace: give -p PID or -- CMD [ARGS...] (try --help)");
		return CLI_ERROR;
	}
	return CLI_OK;
}
