/* memtraced's command line: parsing and validation of the options (no side effects). */
#ifndef MEMTRACED_CLI_H
#define MEMTRACED_CLI_H

#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <sys/types.h>

#define MEMTRACED_VERSION "0.1"
#define CLI_DEFAULT_RATE 1e-5
#define CLI_DEFAULT_STACK_BYTES 16384u

struct cli_opts {
	pid_t pid;            /* -p PID, 0 when a command is given instead */
	char **cmd;           /* argv after "--" (NULL-terminated), NULL with -p */
	const char *output;   /* -o FILE; NULL = memtrace-PID.ctf in the current directory */
	double rate;          /* --rate: sampling probability per 8-byte word, (0, 1] */
	double duration;      /* --duration SEC; 0 = until the target exits or a signal */
	unsigned stack_bytes; /* --stack-bytes N (hidden, benchmarks) */
	bool probe_floor;     /* --probe-floor (hidden, benchmarks): empty probes, no trace */
	bool quiet;           /* -q: no status messages, only errors and the summary */
	bool no_status;       /* --no-status: no live status line on a terminal (see status.h) */
	bool top;             /* --top: a refreshing table of the top live sites (see status.h) */
	double top_interval;  /* --top-interval SEC: refresh period of --top (default 1) */
	bool top_by_function; /* --top-by function: group the table by function, not call site */
};

enum cli_result { CLI_OK = 0, CLI_EXIT_OK = 1 /* --help/--version printed */, CLI_ERROR = -1 };

/* Parses argv into *o. On CLI_ERROR, err holds a message saying what is wrong. */
enum cli_result cli_parse(int argc, char **argv, struct cli_opts *o, char *err, size_t errlen);
void cli_usage(FILE *out);

#endif
