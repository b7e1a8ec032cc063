/* Command-line plumbing shared by the heapview tools (see heapview_cli.h). */
#include "heapview_cli.h"
#include "out_file.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int hv_cli_number(const char *prog, const char *opt, const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);
	if (!*s || *end || !isfinite(v) || v < 0) {
		fprintf(stderr, "%s: %s wants a number >= 0, not \"%s\"\n", prog, opt, s);
		return -1;
	}
	*out = v;
	return 0;
}

int hv_cli_group(const char *prog, const char *s, enum hv_group *g)
{
	if (hv_parse_group(s, g) == 0) return 0;
	fprintf(stderr, "%s: --group wants function, line or stack, not \"%s\"\n", prog, s);
	return -1;
}

int hv_cli_operands(const char *prog, int nargs, int want, const char *what,
		    void (*usage)(FILE *))
{
	if (nargs == want) return 0;
	fprintf(stderr, "%s: expected %s\n", prog, what);
	usage(stderr);
	return -1;
}

int hv_cli_window(const char *prog, const hv_options *opt)
{
	if (opt->to_s < 0 || opt->to_s >= opt->from_s) return 0;
	fprintf(stderr, "%s: --to (%g) is before --from (%g)\n", prog, opt->to_s, opt->from_s);
	return -1;
}

void hv_cli_warn_drops(const char *prog, const mt_trace_info *info, uint64_t samples)
{
	uint64_t d;
	if (!info || !mt_context_drops(info->context, &d) || d == 0) return;
	fprintf(stderr, "%s: warning: the tracer dropped %llu samples (%.1f%% of %llu): allocated "
		"and live totals are underestimated\n", prog, (unsigned long long)d,
		100.0 * (double)d / (double)(d + samples), (unsigned long long)(d + samples));
}

hv_heap *hv_cli_load(const char *prog, const char *path, const hv_options *opt)
{
	char *err = NULL;
	hv_heap *h = hv_load(path, opt, &err);
	if (!h) fprintf(stderr, "%s: %s\n", prog, err ? err : "cannot read trace");
	else hv_cli_warn_drops(prog, hv_info(h), hv_total(h)->alloc_events);
	free(err);
	return h;
}

FILE *hv_cli_open_output(const char *prog, const char *output, const char *hint)
{
	if (!output || strcmp(output, "-") == 0) {
		if (!output && isatty(STDOUT_FILENO)) {
			fprintf(stderr, "%s: standard output is a terminal: give %s\n", prog, hint);
			return NULL;
		}
		return stdout;
	}
	return hv_cli_create(prog, output, "w");
}

FILE *hv_cli_create(const char *prog, const char *path, const char *fmode)
{
	char err[4400];
	int fd = mt_out_create(path, 0644, "output", err, sizeof err);
	if (fd < 0) {
		fprintf(stderr, "%s: %s\n", prog, err);
		return NULL;
	}
	FILE *o = fdopen(fd, fmode);
	if (!o) {
		fprintf(stderr, "%s: %s: cannot write it: %s\n", prog, path, strerror(errno));
		close(fd);
	}
	return o;
}

int hv_cli_close_output(const char *prog, FILE *o, const char *output)
{
	int bad = ferror(o) || (o == stdout ? fflush(o) != 0 : fclose(o) != 0);
	if (bad) fprintf(stderr, "%s: %s: write failed\n", prog, output ? output : "standard output");
	return bad ? -1 : 0;
}

int hv_cli_parse_at(const char *prog, const char *s, hv_cli_at *at)
{
	at->set = 1;
	at->peak = strcmp(s, "peak") == 0;
	if (at->peak) return 0;
	if (hv_cli_number(prog, "--at", s, &at->sec) < 0) {
		fprintf(stderr, "%s: --at wants \"peak\" or seconds since the trace's start\n", prog);
		return -1;
	}
	return 0;
}

hv_heap *hv_cli_load_at(const char *prog, const char *path, const hv_options *opt,
			const hv_cli_at *at)
{
	if (!at || !at->set) return hv_cli_load(prog, path, opt);
	if (!at->peak) {
		hv_options o = *opt;
		o.to_s = at->sec;
		o.until_us = 0;
		return hv_cli_load(prog, path, &o);
	}
	/* the peak: one pass finds it, a second one stops there */
	hv_heap *h = hv_cli_load(prog, path, opt);
	if (!h) return NULL;
	uint64_t t = hv_get_peak(h).time_us;
	hv_free(h);
	char *err = NULL;
	h = hv_load_at(path, opt, t, &err);
	if (!h) fprintf(stderr, "%s: %s\n", prog, err ? err : "cannot read trace");
	free(err);
	return h;
}

const char *hv_cli_bytes(double bytes, int raw, char *buf)
{
	if (!raw) return hv_human_bytes(bytes, buf);
	snprintf(buf, 32, "%.0f", bytes);
	return buf;
}

int hv_cli_add_wrapper(const char *prog, hv_cli_wrappers *w, const char *name)
{
	if (w->n == HV_CLI_MAX_WRAPPERS) {
		fprintf(stderr, "%s: more than %d --wrapper\n", prog, HV_CLI_MAX_WRAPPERS);
		return -1;
	}
	w->extra[w->n++] = name;
	return 0;
}

int hv_cli_apply_wrappers(const char *prog, hv_heap *h, const hv_cli_wrappers *w, FILE *out)
{
	hv_wrapper_report rep;
	if (hv_apply_wrappers(h, w->extra, w->n, w->keep, &rep) < 0) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return -1;
	}
	if (rep.unnamed_folded && out)
		fprintf(out, "# %u frame%s without a name taken as allocation wrapper%s (each called "
			"from several places, calling only allocation functions), e.g. %s; "
			"--keep-wrappers to keep them\n", rep.unnamed_folded,
			rep.unnamed_folded > 1 ? "s" : "", rep.unnamed_folded > 1 ? "s" : "", rep.example);
	return 0;
}

/* A row's title: its key, but for a whole stack (--group stack) only its innermost frame and
 * how many there are: the stack itself is printed below the row, one line per frame (a key
 * of a deep C++ stack runs to thousands of characters). */
const char *hv_cli_row_title(const char *key, int by_stack, char *buf, size_t len)
{
	const char *sep = by_stack ? strstr(key, " <- ") : NULL;
	if (!sep) return key;
	unsigned frames = 1;
	for (const char *p = key; (p = strstr(p, " <- ")); p += 4) frames++;
	snprintf(buf, len, "%.*s <- ... (%u frames, below)", (int)(sep - key < 400 ? sep - key : 400),
		 key, frames);
	return buf;
}
