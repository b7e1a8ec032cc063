/* The Prometheus exposition memtraced renders (core/export/metrics.h): well-formed line by
 * line, each family once with HELP and TYPE before its samples, counters named _total, label
 * values escaped. With a file argument it also writes the text there, for the check with
 * Prometheus's own parser (tests/test_metrics_format.sh). */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "export/metrics.h"

static bool name_ok(const char *s, size_t n)
{
	if (!n || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':')) return false;
	for (size_t i = 1; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':')) return false;
	return true;
}

int main(int argc, char **argv)
{
	struct metrics_proc p[2] = {
		{.pid = 42, .comm = "redis-server", .exe = "/usr/bin/redis-check-rdb",
		 .service = "redis-server.service", .container = "", .live_bytes = 1048576, .live_objects = 1000,
		 .allocated_bytes = 5e9, .samples = 12345, .drop_ringbuf = 3,
		 .over_cap_frames = 7, .py_over_budget = 5},
		{.pid = 43, .comm = "we\"ird\\na\nme", .live_bytes = 0, .samples = 1},
	};
	struct metrics_daemon d = {.processes = 2, .attach_failures = 1, .refused_max_processes = 3, .snapshot_failures = 4, .version = "0.1", .kernel = "6.1.0-57-amd64", .attach_mode = "perf", .cpu_seconds = 1.5,
				   .resident_bytes = 40 << 20, .ringbuf_fill = 0.25};
	size_t len = 0;
	char *text = metrics_render(p, 2, &d, &len);
	CHECK("metrics_rendered", text && len == strlen(text) && len > 0 && text[len - 1] == '\n');
	if (!text) return CHECK_DONE();
	if (argc > 1) {
		FILE *f = fopen(argv[1], "w");
		if (f) fputs(text, f), fclose(f);
	}
	/* line by line: comments, or NAME[{labels}] VALUE */
	char typed[64][96];
	int ntyped = 0;
	bool lines_ok = true, typed_first = true, totals_ok = true, once = true;
	char *save = NULL, *copy = strdup(text);
	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char name[96] = "", type[32] = "";
		if (sscanf(l, "# TYPE %95s %31s", name, type) == 2) {
			for (int i = 0; i < ntyped; i++) once = once && strcmp(typed[i], name) != 0;
			if (ntyped < 64) snprintf(typed[ntyped++], sizeof typed[0], "%s", name);
			if (!strcmp(type, "counter")) totals_ok = totals_ok && strstr(name, "_total");
			continue;
		}
		if (!strncmp(l, "# HELP ", 7)) continue;
		size_t n = strcspn(l, "{ ");
		lines_ok = lines_ok && name_ok(l, n);
		snprintf(name, sizeof name, "%.*s", (int)n, l);
		bool seen = false;
		for (int i = 0; i < ntyped; i++) seen = seen || !strcmp(typed[i], name);
		typed_first = typed_first && seen;
		const char *v = strrchr(l, ' ');
		char *end;
		strtod(v ? v + 1 : "x", &end);
		lines_ok = lines_ok && v && *end == '\0';
	}
	free(copy);
	CHECK("metrics_lines_well_formed", lines_ok);
	CHECK("metrics_type_before_samples", typed_first);
	CHECK("metrics_each_family_once", once);
	CHECK("metrics_counters_end_in_total", totals_ok);
	CHECK("metrics_label_escaped", strstr(text, "comm=\"we\\\"ird\\\\na\\nme\"") != NULL);
	CHECK("metrics_per_process_value",
	      strstr(text, "memtraced_live_bytes{pid=\"42\",comm=\"redis-server\",exe=\"/usr/bin/redis-check-rdb\",service=\"redis-server.service\"} 1048576\n") != NULL);
	CHECK("metrics_drop_reason",
	      strstr(text, "memtraced_dropped_samples_total{pid=\"42\",comm=\"redis-server\",exe=\"/usr/bin/redis-check-rdb\",service=\"redis-server.service\",reason=\"ringbuf_full\"} 3\n") != NULL);
	CHECK("metrics_labels_outlive_the_pid",
	      strstr(text, "memtraced_live_bytes{pid=\"42\",comm=\"redis-server\",exe=\"/usr/bin/redis-check-rdb\",service=\"redis-server.service\"} 1048576\n") != NULL);
	CHECK("metrics_refused_and_snapshot_failures",
	      strstr(text, "memtraced_processes_refused_total{reason=\"max_processes\"} 3\n") &&
	      strstr(text, "memtraced_snapshot_failures_total 4\n"));
	CHECK("metrics_frames_over_cap",
	      strstr(text, "memtraced_frames_over_cap_total{pid=\"42\",comm=\"redis-server\",exe=\"/usr/bin/redis-check-rdb\",service=\"redis-server.service\",cap=\"distinct_frames\"} 7\n") &&
	      strstr(text, "memtraced_frames_over_cap_total{pid=\"42\",comm=\"redis-server\",exe=\"/usr/bin/redis-check-rdb\",service=\"redis-server.service\",cap=\"python_names\"} 5\n"));
	free(text);
	text = metrics_render(NULL, 0, &d, &len);
	CHECK("metrics_no_process_still_renders", text && strstr(text, "memtraced_processes 2\n"));
	free(text);
	return CHECK_DONE();
}
