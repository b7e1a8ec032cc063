/* Prometheus text exposition (metrics.h). Each family once, HELP and TYPE first, then one
 * sample per process; label values escaped as the format says (\\, \" and \n). */
#include "metrics.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct out {
	char *buf;
	size_t len, cap;
	bool failed;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	for (int tries = 0; tries < 2 && !o->failed; tries++) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
		va_end(ap);
		if (n < 0) break;
		if ((size_t)n < o->cap - o->len) {
			o->len += (size_t)n;
			return;
		}
		size_t cap = 2 * (o->cap + (size_t)n);
		char *grown = realloc(o->buf, cap);
		if (!grown) break;
		o->buf = grown;
		o->cap = cap;
	}
	o->failed = true;
}

/* A label value: \ " and newline escaped, other bytes as they are (the format is UTF-8; a
 * comm that is not stays readable as bytes). */
static void put_label(struct out *o, const char *v)
{
	char esc[2 * 4096 + 1];
	size_t k = 0;
	for (const char *c = v ? v : ""; *c && k + 2 < sizeof esc; c++) {
		if (*c == '\\' || *c == '"') esc[k++] = '\\', esc[k++] = *c;
		else if (*c == '\n') esc[k++] = '\\', esc[k++] = 'n';
		else esc[k++] = *c;
	}
	esc[k] = '\0';
	put(o, "%s", esc);
}

/* NAME{pid="..",comm="..",exe="..",service="..",container=".." (each of the last three
 * when known), without the closing brace: a reason or a cap may follow. */
static void proc_labels(struct out *o, const char *name, const struct metrics_proc *p)
{
	put(o, "%s{pid=\"%d\",comm=\"", name, (int)p->pid);
	put_label(o, p->comm);
	put(o, "\"");
	const char *names[] = {"exe", "service", "container"};
	const char *values[] = {p->exe, p->service, p->container};
	for (int i = 0; i < 3; i++) {
		if (!values[i] || !values[i][0]) continue;
		put(o, ",%s=\"", names[i]);
		put_label(o, values[i]);
		put(o, "\"");
	}
}

static void family(struct out *o, const char *name, const char *type, const char *help)
{
	put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

enum value_kind { V_LIVE_BYTES, V_LIVE_OBJECTS, V_ALLOCATED, V_SAMPLES };

static void per_process(struct out *o, const struct metrics_proc *p, size_t n, const char *name,
			const char *type, const char *help, enum value_kind k)
{
	family(o, name, type, help);
	for (size_t i = 0; i < n; i++) {
		proc_labels(o, name, &p[i]);
		switch (k) {
		case V_LIVE_BYTES: put(o, "} %.0f\n", p[i].live_bytes); break;
		case V_LIVE_OBJECTS: put(o, "} %.0f\n", p[i].live_objects); break;
		case V_ALLOCATED: put(o, "} %.0f\n", p[i].allocated_bytes); break;
		case V_SAMPLES: put(o, "} %llu\n", (unsigned long long)p[i].samples); break;
		}
	}
}

char *metrics_render(const struct metrics_proc *p, size_t n, const struct metrics_daemon *d,
		     size_t *len)
{
	struct out o = {.cap = 4096};
	o.buf = malloc(o.cap);
	if (!o.buf) return NULL;
	o.buf[0] = '\0';
	per_process(&o, p, n, "memtraced_live_bytes", "gauge",
		    "Heap bytes live in the process, estimated from its live sampled blocks.",
		    V_LIVE_BYTES);
	per_process(&o, p, n, "memtraced_live_objects", "gauge",
		    "Heap blocks live in the process, estimated from its live sampled blocks.",
		    V_LIVE_OBJECTS);
	per_process(&o, p, n, "memtraced_allocated_bytes_total", "counter",
		    "Heap bytes allocated by the process since memtraced attached, estimated.",
		    V_ALLOCATED);
	per_process(&o, p, n, "memtraced_samples_total", "counter",
		    "Sampled allocations of the process since memtraced attached.", V_SAMPLES);
	family(&o, "memtraced_dropped_samples_total", "counter",
	       "Sampled allocations lost before memtraced read them, by process and reason.");
	static const char *const reason[] = {"ringbuf_full", "live_map_full", "stack_copy"};
	for (size_t i = 0; i < n; i++) {
		uint64_t v[3] = {p[i].drop_ringbuf, p[i].drop_map_full, p[i].drop_stack_copy};
		for (int r = 0; r < 3; r++) {
			proc_labels(&o, "memtraced_dropped_samples_total", &p[i]);
			put(&o, ",reason=\"%s\"} %llu\n", reason[r], (unsigned long long)v[r]);
		}
	}
	family(&o, "memtraced_frames_over_cap_total", "counter",
	       "Frames named for the parser's memory caps instead of by their code, by process and "
	       "cap: distinct frames per process or in all, the Python names' memory budget.");
	for (size_t i = 0; i < n; i++) {
		static const char *const cap[] = {"distinct_frames", "python_names"};
		uint64_t v[2] = {p[i].over_cap_frames, p[i].py_over_budget};
		for (int c = 0; c < 2; c++) {
			proc_labels(&o, "memtraced_frames_over_cap_total", &p[i]);
			put(&o, ",cap=\"%s\"} %llu\n", cap[c], (unsigned long long)v[c]);
		}
	}
	family(&o, "memtraced_thinned_samples_total", "counter",
	       "Samples left out while the pipeline fell behind, by process: the kept ones weigh "
	       "as much more, so estimates stay unbiased (not drops).");
	for (size_t i = 0; i < n; i++) {
		proc_labels(&o, "memtraced_thinned_samples_total", &p[i]);
		put(&o, "} %llu\n", (unsigned long long)p[i].thinned);
	}
	family(&o, "memtraced_sampler_thin_factor", "gauge",
	       "The in-process sampler's rate lowered this many-fold now, by process, while the "
	       "pipeline falls behind (1: the rate asked for); its samples weigh as much more.");
	for (size_t i = 0; i < n; i++) {
		proc_labels(&o, "memtraced_sampler_thin_factor", &p[i]);
		put(&o, "} %u\n", p[i].sampler_thin ? p[i].sampler_thin : 1);
	}
	if (d->version && d->kernel && d->attach_mode) {
		family(&o, "memtraced_build_info", "gauge",
		       "memtraced's version, the kernel it runs on and how its allocator probes attach.");
		put(&o, "memtraced_build_info{version=\"");
		put_label(&o, d->version);
		put(&o, "\",kernel=\"");
		put_label(&o, d->kernel);
		put(&o, "\",attach_mode=\"");
		put_label(&o, d->attach_mode);
		put(&o, "\"} 1\n");
	}
	family(&o, "memtraced_processes", "gauge", "Processes memtraced traces now.");
	put(&o, "memtraced_processes %llu\n", (unsigned long long)d->processes);
	family(&o, "memtraced_attach_failures_total", "counter",
	       "Processes memtraced was to trace and could not.");
	put(&o, "memtraced_attach_failures_total %llu\n", (unsigned long long)d->attach_failures);
	family(&o, "memtraced_processes_refused_total", "counter",
	       "Selected processes memtraced did not trace, by reason.");
	put(&o, "memtraced_processes_refused_total{reason=\"max_processes\"} %llu\n",
	    (unsigned long long)d->refused_max_processes);
	family(&o, "memtraced_snapshot_failures_total", "counter",
	       "Heap snapshots that could not be written (a full disk, a removed directory...).");
	put(&o, "memtraced_snapshot_failures_total %llu\n", (unsigned long long)d->snapshot_failures);
	family(&o, "memtraced_parser_restarts_total", "counter",
	       "Times the unprivileged parser died and was started again (every process traced anew).");
	put(&o, "memtraced_parser_restarts_total %llu\n", (unsigned long long)d->parser_restarts);
	if (d->ringbuf_fill >= 0) {
		family(&o, "memtraced_ringbuf_fill_ratio", "gauge",
		       "How full the fullest BPF ring buffer is, 0 to 1.");
		put(&o, "memtraced_ringbuf_fill_ratio %.4f\n", d->ringbuf_fill);
	}
	family(&o, "process_cpu_seconds_total", "counter",
	       "Total user and system CPU time of memtraced (its parser included) in seconds.");
	put(&o, "process_cpu_seconds_total %.3f\n", d->cpu_seconds);
	family(&o, "process_resident_memory_bytes", "gauge",
	       "memtraced's resident memory in bytes (its parser's included, as its CPU time).");
	put(&o, "process_resident_memory_bytes %llu\n", (unsigned long long)d->resident_bytes);
	if (o.failed) {
		free(o.buf);
		return NULL;
	}
	*len = o.len;
	return o.buf;
}
