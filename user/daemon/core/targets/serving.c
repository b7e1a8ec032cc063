/* --listen: what the daemon publishes for the parser's HTTP server, once a second (targets.h):
 * /metrics (core/export/metrics.h) and an index page at /; and the heap profiles it asks for
 * (core/export/heap_profile.h). Built from the sessions' counters and tries; the process
 * names are read through the door. */
#include "targets.h"
#include "door/door.h"
#include "export/heap_profile.h"
#include "export/labels.h"
#include "export/metrics.h"
#include "model/trie.h"
#include "output/trace_out.h"
#include "parser/parser.h"
#include "protocol/protocol.h"
#include "tracer/kernel_probe.h"
#include "common/msg.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

struct live_sum {
	uint64_t nsamples, alloc_nsamples;
	double objects;  /* estimated: each live sampled block stands for 1/P(sampled) blocks */
};

static int add_node(void *ctx, uint32_t index, const struct trie_node *node)
{
	(void)index;
	struct live_sum *s = ctx;
	s->nsamples += node->c.live_nsamples;
	s->alloc_nsamples += node->c.alloc_nsamples;
	s->objects += node->c.live_objects_est;
	return 0;
}

/* The CPU seconds of pid from /proc/PID/stat (utime + stime), 0 if gone. */
static double cpu_of(pid_t pid)
{
	char buf[1024] = "";
	door_proc_line(pid, "stat", buf, sizeof buf);
	const char *p = strrchr(buf, ')');
	unsigned long long ut = 0, st = 0;
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void daemon_figures(const struct targets *ts, struct metrics_daemon *d)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	d->cpu_seconds = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
			 (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	if (parser_pid() > 0) d->cpu_seconds += cpu_of(parser_pid());
	pid_t who[2] = {getpid(), parser_pid()};
	d->resident_bytes = 0;
	for (int i = 0; i < 2; i++) { /* the daemon's and the parser's, as the CPU time above */
		FILE *f = who[i] > 0 ? door_proc_fopen(who[i], "statm") : NULL;
		unsigned long long size = 0, rss = 0;
		if (f) {
			if (fscanf(f, "%llu %llu", &size, &rss) != 2) rss = 0;
			fclose(f);
		}
		d->resident_bytes += rss * (uint64_t)sysconf(_SC_PAGESIZE);
	}
	d->ringbuf_fill = -1;
	for (int i = 0; i < ts->n; i++) { /* the fullest of the processes' rings */
		double f = ts->t[i]->active && ts->t[i]->s ? session_ring_fill(ts->t[i]->s) : -1;
		if (f > d->ringbuf_fill) d->ringbuf_fill = f;
	}
}

/* The labels service and container of pid, from its cgroup path ("" where none). */
struct unit {
	char service[256], container[80];
};
static void unit_of(pid_t pid, struct unit *u)
{
	char cgroup[4096];
	u->service[0] = u->container[0] = '\0';
	if (door_proc_line(pid, "cgroup", cgroup, sizeof cgroup) && strncmp(cgroup, "0::", 3) == 0)
		labels_from_cgroup(cgroup + 3, u->service, sizeof u->service, u->container,
				   sizeof u->container);
}

/* The label comm of pid: its /proc comm, "?" once it is gone. */
static void comm_of(pid_t pid, char out[64])
{
	if (!door_proc_line(pid, "comm", out, 64)) snprintf(out, 64, "?");
}

/* 1.5 GiB, 12.0 MiB, 3.4 KiB, 12 B */
static void human_bytes(double b, char *out, size_t len)
{
	if (b >= 1 << 30) snprintf(out, len, "%.1f GiB", b / (1 << 30));
	else if (b >= 1 << 20) snprintf(out, len, "%.1f MiB", b / (1 << 20));
	else if (b >= 1 << 10) snprintf(out, len, "%.1f KiB", b / (1 << 10));
	else snprintf(out, len, "%.0f B", b);
}

/* HTML-escaped s into out. */
static void html(char *out, size_t len, const char *s)
{
	size_t k = 0;
	for (; *s && k + 7 < len; s++) {
		const char *e = *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '&' ? "&amp;" :
				*s == '"' ? "&quot;" : NULL;
		if (e) k += (size_t)snprintf(out + k, len - k, "%s", e);
		else out[k++] = *s;
	}
	out[k] = '\0';
}

void targets_publish(struct targets *ts)
{
	int n = 0;
	for (int i = 0; i < ts->n; i++) n += ts->t[i]->active && ts->t[i]->s;
	struct metrics_proc *p = calloc((size_t)n + 1, sizeof *p);
	char (*comm)[64] = calloc((size_t)n + 1, sizeof *comm);
	struct unit *unit = calloc((size_t)n + 1, sizeof *unit);
	size_t page_cap = 8192 + (size_t)n * 16000, plen = 0;
	char *page = malloc(page_cap);
	if (!p || !comm || !unit || !page) goto out;
	uint64_t up_s = (trace_out_mono_now_ns() - ts->start_ns) / 1000000000ULL;
	enum tracer_mode amode;
	char e[256];
	const char *mode_s = kernel_attach_mode(kernel_attach(), &amode, e, sizeof e) == 0
				     ? tracer_mode_short(amode) : "?";
	plen += (size_t)snprintf(page, page_cap, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
				 "<title>memtraced</title></head><body><h1>memtraced</h1>\n"
				 "<p>memtraced %s on Linux %s (%s probes), up %llu h %02llu min. "
				 "%d processes traced; %llu refused (--max-processes), %llu could not be "
				 "traced; the parser restarted %llu times; %llu snapshots failed.</p>\n",
				 MEMTRACED_VERSION, kernel_features()->release, mode_s,
				 (unsigned long long)(up_s / 3600), (unsigned long long)(up_s / 60 % 60), n,
				 (unsigned long long)ts->refused_max_processes,
				 (unsigned long long)ts->attach_failures,
				 (unsigned long long)ts->parser_restarts,
				 (unsigned long long)ts->snapshot_failures);
	plen += (size_t)snprintf(page + plen, page_cap - plen, "%s",
				 "<ul><li><a href=\"/metrics\">/metrics</a>: Prometheus text exposition</li>"
				 "<li><a href=\"/debug/pprof/heap\">/debug/pprof/heap</a>: live heap "
				 "(pprof; ?pid=N one process, ?seconds=N what the next N seconds "
				 "allocate)</li><li><a href=\"/debug/pprof/allocs\">/debug/pprof/allocs"
				 "</a>: the same, allocated bytes by default</li>"
				 "</ul>\n<h2>Traced processes</h2>\n<table><tr><th>pid</th><th>program"
				 "</th><th>live (estimated)</th><th>allocated</th><th>samples</th>"
				 "<th>dropped</th><th>profiles</th></tr>\n");
	int k = 0;
	for (int i = 0; i < ts->n && k < n; i++) {
		struct target *t = ts->t[i];
		if (!t->active || !t->s) continue;
		struct session_totals tot;
		session_get_totals(t->s, &tot);
		struct trie *tr = session_trie(t->s);
		struct live_sum ls = {0};
		if (tr) trie_for_each_node(tr, add_node, &ls);
		double per_sample = tr ? 8.0 / trie_rate(tr) : 0;
		comm_of(t->pid, comm[k]);
		unit_of(t->pid, &unit[k]);
		p[k] = (struct metrics_proc){.pid = t->pid, .comm = comm[k], .exe = t->exe,
			.service = unit[k].service, .container = unit[k].container,
			.live_bytes = ls.nsamples * per_sample, .live_objects = ls.objects,
			.allocated_bytes = ls.alloc_nsamples * per_sample, .samples = tot.samples,
			.drop_ringbuf = tot.drop_ringbuf, .drop_map_full = tot.drop_map_full,
			.drop_stack_copy = tot.drop_stack_copy, .over_cap_frames = tot.over_cap_frames,
			.py_over_budget = tot.py_over_budget, .thinned = tot.thinned,
			.sampler_thin = tot.src_thin ? tot.src_thin : 1};
		/* The program, never its arguments: a command line holds what its owner did not mean
		 * to publish (a data directory, a client's address, a password: issue 46). */
		char name[8192], svc[1400] = "", esc[1300], size[32], alloc[32];
		html(name, sizeof name, t->exe);
		html(esc, sizeof esc, unit[k].service); /* a delegated cgroup's name is a user's */
		if (unit[k].service[0] || unit[k].container[0])
			snprintf(svc, sizeof svc, " (%s%s%.12s)", esc,
				 unit[k].service[0] && unit[k].container[0] ? ", container " : unit[k].container[0] ? "container " : "",
				 unit[k].container);
		human_bytes(p[k].live_bytes, size, sizeof size);
		human_bytes(p[k].allocated_bytes, alloc, sizeof alloc);
		unsigned long long dropped = tot.drop_ringbuf + tot.drop_map_full + tot.drop_stack_copy;
		if (plen < page_cap)
			plen += (size_t)snprintf(page + plen, page_cap - plen,
						 "<tr><td>%d</td><td>%s%s</td><td>%s</td>"
						 "<td>%s</td><td>%llu</td><td>%llu</td><td>"
						 "<a href=\"/debug/pprof/heap?pid=%d\">heap</a> "
						 "<a href=\"/debug/pprof/allocs?pid=%d\">allocs</a>"
						 "</td></tr>\n",
						 (int)t->pid, name, svc, size, alloc,
						 (unsigned long long)tot.samples, dropped, (int)t->pid,
						 (int)t->pid);
		k++;
	}
	if (plen < page_cap) plen += (size_t)snprintf(page + plen, page_cap - plen, "</table></body></html>\n");
	if (plen >= page_cap) plen = page_cap - 1;
	struct metrics_daemon d = {.processes = (uint64_t)k, .attach_failures = ts->attach_failures,
		.refused_max_processes = ts->refused_max_processes,
		.snapshot_failures = ts->snapshot_failures, .parser_restarts = ts->parser_restarts,
		.version = MEMTRACED_VERSION, .kernel = kernel_features()->release,
		.attach_mode = strcmp(mode_s, "?") ? mode_s : NULL};
	daemon_figures(ts, &d);
	size_t len;
	char *text = metrics_render(p, (size_t)k, &d, &len);
	if (text) parser_publish("/metrics", "text/plain; version=0.0.4; charset=utf-8", text, len);
	parser_publish("/", "text/html; charset=utf-8", page, plen);
	/* a health check's: the daemon published within the last second or so (the server is
	 * the parser's: it answers only while both live) */
	char health[96];
	int hl = snprintf(health, sizeof health, "ok: %d processes traced\n", k);
	parser_publish("/healthz", "text/plain; charset=utf-8", health, (size_t)hl);
	free(text);
out:
	free(p);
	free(comm);
	free(unit);
	free(page);
}

/* ---- profiles ---- */

/* A profile request held for its window (?seconds=N): the bases taken at its start. */
struct window {
	bool used;
	struct pr_want w;
	uint64_t due_ns;
	int n;
	struct profile_base *bases;
};
static struct window windows[WANT_MAX_PENDING];

static void answer_text(uint32_t id, unsigned status, const char *text)
{
	parser_answer(id, status, "", text, strlen(text));
}

/* Does t run as root? Its profile goes only to a request that carried the token: without
 * one any local user could read root's processes' code paths (issue 35). Any of its real,
 * effective, saved and filesystem uids: a daemon that drops its euid for a while is root's
 * still (issue 46). */
static bool runs_as_root(const struct target *t)
{
	struct door_creds c;
	return !door_creds_of(t->pid, &c) || c.any_root; /* unknown: as root */
}

static bool root_profiles; /* --listen-root-profiles */

void targets_serve_root_profiles(bool yes) { root_profiles = yes; }

static bool wanted(const struct target *t, const struct pr_want *w)
{
	return t->active && t->s && session_trie(t->s) && (!w->pid || t->pid == w->pid) &&
	       (w->all_users || root_profiles || !runs_as_root(t));
}

static void answer_profile(struct targets *ts, const struct pr_want *w, const struct window *win)
{
	struct profile_proc *p = calloc((size_t)ts->n + 1, sizeof *p);
	char (*comm)[64] = calloc((size_t)ts->n + 1, sizeof *comm);
	struct unit *unit = calloc((size_t)ts->n + 1, sizeof *unit);
	if (!p || !comm || !unit) goto oom;
	size_t n = 0;
	for (int i = 0; i < ts->n; i++) {
		struct target *t = ts->t[i];
		if (!wanted(t, w)) continue;
		comm_of(t->pid, comm[n]);
		unit_of(t->pid, &unit[n]);
		p[n] = (struct profile_proc){.pid = t->pid, .comm = comm[n], .exe = t->exe,
			.service = unit[n].service, .container = unit[n].container,
			.trie = session_trie(t->s), .locs = session_locations, .locs_ctx = t->s};
		for (int k = 0; win && k < win->n; k++)
			if (win->bases[k].trie == p[n].trie && win->bases[k].pid == t->pid)
				p[n].base = &win->bases[k];
		n++;
	}
	if (w->pid && n == 0) {
		char text[160];
		bool root = false;
		for (int i = 0; i < ts->n && !root; i++)
			root = ts->t[i]->pid == w->pid && ts->t[i]->active && !w->all_users && !root_profiles;
		if (root) {
			snprintf(text, sizeof text, "pid %d runs as root: its profile needs the token "
				 "(memtraced --listen-token FILE)\n", (int)w->pid);
			answer_text(w->id, 403, text);
		} else {
			snprintf(text, sizeof text, "pid %d is not traced\n", (int)w->pid);
			answer_text(w->id, 404, text);
		}
		goto out;
	}
	uint8_t *prof = NULL;
	size_t len = 0;
	if (heap_profile(p, n, w->kind == WANT_ALLOCS, w->seconds, &prof, &len) < 0) goto oom;
	if (parser_answer(w->id, 200, "application/octet-stream", prof, len) < 0)
		answer_text(w->id, 503, "the profile is too large to hand over\n");
	free(prof);
	goto out;
oom:
	answer_text(w->id, 503, "out of memory\n");
out:
	free(p);
	free(comm);
	free(unit);
}

static void end_window(struct window *win)
{
	for (int k = 0; k < win->n; k++) profile_base_free(&win->bases[k]);
	free(win->bases);
	memset(win, 0, sizeof *win);
}

/* Takes the bases of the processes a window covers. */
static void begin_window(struct targets *ts, const struct pr_want *w)
{
	struct window *win = NULL;
	for (int i = 0; i < WANT_MAX_PENDING && !win; i++)
		if (!windows[i].used) win = &windows[i];
	if (!win) { /* the parser holds at most as many */
		answer_text(w->id, 503, "too many profiles asked for at once\n");
		return;
	}
	win->bases = calloc((size_t)ts->n + 1, sizeof *win->bases);
	if (!win->bases) {
		answer_text(w->id, 503, "out of memory\n");
		return;
	}
	win->used = true;
	win->w = *w;
	win->due_ns = trace_out_mono_now_ns() + (uint64_t)w->seconds * 1000000000ULL;
	for (int i = 0; i < ts->n; i++)
		if (wanted(ts->t[i], w) && profile_base_take(&win->bases[win->n], session_trie(ts->t[i]->s)) == 0)
			win->bases[win->n++].pid = ts->t[i]->pid;
}

void targets_forget_wants(void)
{
	for (int i = 0; i < WANT_MAX_PENDING; i++)
		if (windows[i].used) end_window(&windows[i]);
}

void targets_serve_profiles(struct targets *ts)
{
	struct pr_want w;
	while (parser_next_want(&w) > 0) {
		if (w.kind == WANT_CANCEL) { /* its client is gone: no answer, its slot free */
			for (int i = 0; i < WANT_MAX_PENDING; i++)
				if (windows[i].used && windows[i].w.id == w.id) end_window(&windows[i]);
		} else if (w.seconds) begin_window(ts, &w);
		else answer_profile(ts, &w, NULL);
	}
	uint64_t now = trace_out_mono_now_ns();
	for (int i = 0; i < WANT_MAX_PENDING; i++) {
		if (!windows[i].used || now < windows[i].due_ns) continue;
		answer_profile(ts, &windows[i].w, &windows[i]);
		end_window(&windows[i]);
	}
}

/* [ADDR:]PORT: ADDR an IPv4 address, localhost, or an IPv6 one in brackets ([::1]:9464). */
static int listen_address(const char *spec, struct sockaddr_storage *ss, socklen_t *len,
			  bool *loopback)
{
	char host[256] = "127.0.0.1";
	const char *port_s = spec, *colon = strrchr(spec, ':');
	if (colon) {
		const char *h = spec;
		size_t hl = (size_t)(colon - spec);
		if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') h++, hl -= 2; /* [IPv6] */
		else if (memchr(spec, ':', hl)) return -1; /* an IPv6 address needs its brackets */
		if (hl == 0 || hl >= sizeof host) return -1;
		memcpy(host, h, hl);
		host[hl] = '\0';
		port_s = colon + 1;
	}
	char *end;
	long port = strtol(port_s, &end, 10);
	if (!*port_s || *end || port < 1 || port > 65535) return -1;
	memset(ss, 0, sizeof *ss);
	struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, strcmp(host, "localhost") ? host : "127.0.0.1", &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)port);
		*len = sizeof *v4;
		*loopback = (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
		return 0;
	}
	if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)port);
		*len = sizeof *v6;
		*loopback = IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
		return 0;
	}
	return -1;
}

int targets_listen(const char *spec, bool allow_public, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl = 0;
	bool loopback = false;
	if (listen_address(spec, &ss, &sl, &loopback) < 0) {
		snprintf(err, errlen, "invalid --listen '%s': expected [ADDR:]PORT, ADDR an IPv4 "
			 "address (default 127.0.0.1), localhost or an IPv6 address in brackets "
			 "([::1]:9464), PORT 1 .. 65535", spec);
		return -2;
	}
	if (!loopback && !allow_public) {
		snprintf(err, errlen, "--listen %s is not a loopback address: heap profiles show code "
			 "paths; give --listen-public too to serve them there", spec);
		return -2;
	}
	if (!loopback)
		msg_warn("--listen %s: anyone who reaches this address sees the traced processes' "
			 "code paths and memory figures", spec);
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	/* [::]:PORT serves IPv6 only: 0.0.0.0:PORT is another --listen's business */
	if (fd >= 0 && ss.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 64) < 0) {
		snprintf(err, errlen, "cannot listen on %s: %s", spec, strerror(errno));
		if (fd >= 0) close(fd);
		return -1;
	}
	return fd;
}
