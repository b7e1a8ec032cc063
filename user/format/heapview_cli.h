/* Command-line plumbing shared by the heapview tools (memtrace-report, memtrace-diff,
 * memtrace-flamegraph, memtrace-pprof): number options, operands, the time window, loading a
 * trace, byte columns. Every message goes to stderr as "PROG: what is wrong"; the tools exit
 * with 2 on bad usage and 1 on a trace they cannot read. */
#ifndef MEMTRACE_HEAPVIEW_CLI_H
#define MEMTRACE_HEAPVIEW_CLI_H

#include <stdio.h>
#include "heapview.h"

/* Parses s, the value of option opt, as a finite number >= 0 into *out; else says so and
 * returns -1. */
int hv_cli_number(const char *prog, const char *opt, const char *s, double *out);

/* Parses s, the value of --group, into *g; else says which values there are and returns -1. */
int hv_cli_group(const char *prog, const char *s, enum hv_group *g);

/* 0 if there are nargs == want operands; else prints "PROG: expected WHAT" and the usage to
 * stderr and returns -1. */
int hv_cli_operands(const char *prog, int nargs, int want, const char *what,
		    void (*usage)(FILE *));

/* 0 if the --from/--to window is not empty; else says so and returns -1. */
int hv_cli_window(const char *prog, const hv_options *opt);

/* hv_load, or NULL after printing "PROG: why". */
hv_heap *hv_cli_load(const char *prog, const char *path, const hv_options *opt);

/* --at peak|SEC: the moment whose live blocks a tool shows. */
typedef struct hv_cli_at {
	int set, peak; /* given; "peak" */
	double sec;    /* else: seconds since the trace's start */
} hv_cli_at;
/* Parses --at's value; -1 with a message. */
int hv_cli_parse_at(const char *prog, const char *s, hv_cli_at *at);
/* hv_cli_load with the window ending at that moment ("live at the end" is live then): for the
 * peak of the window, a first pass finds it and a second one stops there. */
hv_heap *hv_cli_load_at(const char *prog, const char *path, const hv_options *opt,
			const hv_cli_at *at);

/* --wrapper NAME (repeatable, a shell pattern) and --keep-wrappers of the tools. */
#define HV_CLI_MAX_WRAPPERS 64
typedef struct hv_cli_wrappers {
	const char *extra[HV_CLI_MAX_WRAPPERS];
	int n;
	int keep;
} hv_cli_wrappers;
/* Adds a --wrapper; -1 with a message when there are too many. */
int hv_cli_add_wrapper(const char *prog, hv_cli_wrappers *w, const char *name);
/* Applies them to h (hv_apply_wrappers); says on `out` (a "# " line) when frames without a name
 * were taken as wrappers. -1 with a message when out of memory. */
int hv_cli_apply_wrappers(const char *prog, hv_heap *h, const hv_cli_wrappers *w, FILE *out);
/* A warning on stderr when the trace says its tracer dropped samples (memtraced's "drops: N"
 * in the context string), with the share lost out of those and the `samples` the trace has. */
void hv_cli_warn_drops(const char *prog, const mt_trace_info *info, uint64_t samples);

/* Where a tool's document goes (-o FILE, "-" or none: standard output, but not onto a terminal,
 * where hint says what to give). NULL with a message. */
FILE *hv_cli_open_output(const char *prog, const char *output, const char *hint);
/* Creates the file at path (never through a link or into another user's file: out_file.h),
 * opened with fopen's mode fmode; NULL with a message. */
FILE *hv_cli_create(const char *prog, const char *path, const char *fmode);
/* Closes it (not standard output); -1 with a message when the writing failed. */
int hv_cli_close_output(const char *prog, FILE *o, const char *output);

/* A byte count for a table: exact ("1234") when raw, else human ("1.2 KiB"). buf holds 32
 * chars. */
const char *hv_cli_bytes(double bytes, int raw, char *buf);
/* A row's title: its key, or with by_stack (--group stack) its innermost frame and how many
 * frames the stack has ("f <- ... (N frames, below)"), written into buf when shortened. */
const char *hv_cli_row_title(const char *key, int by_stack, char *buf, size_t len);

#endif
