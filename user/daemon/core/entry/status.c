/* The live view: status line and --top table (see status.h). Plain ANSI/VT100 sequences, which
 * every terminal emulator memtraced meets understands: \r + ESC[K to redraw a line in place,
 * the alternate screen (ESC[?1049h/l) so that --top leaves the shell's screen as it was. */
#include "status.h"
#include "door/door.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define LINE_PERIOD_NS 250000000ULL /* the status line: at most 4 redraws a second */
#define RATE_WINDOW_NS 1000000000ULL
#define FRAME_MAX (64u << 10)       /* one --top frame, written at once */
#define HEADER_LINES 4

struct status_view {
	struct status_opts o;
	int out_fd;         /* where we draw: 2, or a /dev/tty we opened */
	bool own_out_fd;
	int key_fd;         /* non-blocking /dev/tty for 'q'/'f', or -1 */
	bool fullscreen;    /* on the alternate screen */
	bool termios_saved;
	struct termios saved;
	bool line_shown;    /* a status line is on screen (must be erased) */
	bool drawn_once;
	uint64_t start_ns, last_draw_ns;
	uint64_t window_ns, window_samples;
	double samples_per_s;
	char comm[32];      /* the target's name, for the --top header */
	char *frame;        /* FRAME_MAX bytes */
};

static volatile sig_atomic_t winch_pending;
static struct status_view *fullscreen_view; /* for the atexit restore */

static void on_winch(int sig) { (void)sig; winch_pending = 1; }

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Writes it all (a terminal write may be short or interrupted); errors are ignored: the live
 * view must never stop the trace. */
static void write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, buf, len);
		if (w < 0 && errno == EINTR) continue;
		if (w <= 0) return;
		buf += w;
		len -= (size_t)w;
	}
}

static void write_str(int fd, const char *s) { write_all(fd, s, strlen(s)); }

static void term_size(int fd, int *rows, int *cols)
{
	struct winsize ws;
	*rows = 24;
	*cols = 80;
	if (ioctl(fd, TIOCGWINSZ, &ws) == 0) {
		if (ws.ws_row > 0) *rows = ws.ws_row;
		if (ws.ws_col > 0) *cols = ws.ws_col;
	}
}

const char *status_format_bytes(double bytes, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	int u = 0;
	while (bytes >= 1024 && u < 5) {
		bytes /= 1024;
		u++;
	}
	if (u == 0) snprintf(buf, len, "%.0f B", bytes);
	else snprintf(buf, len, "%.*f %s", bytes < 10 ? 2 : bytes < 100 ? 1 : 0, bytes, units[u]);
	return buf;
}

/* ---- the top sites ---- */

struct site_list {
	struct status_site *v;
	size_t n, cap;
	uint64_t total;
	bool oom;
};

static int collect_node(void *ctx, uint32_t index, const struct trie_node *node)
{
	struct site_list *l = ctx;
	(void)index;
	if (node->c.live_blocks == 0) return 0;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		struct status_site *v = realloc(l->v, cap * sizeof *v);
		if (!v) {
			l->oom = true;
			return 1;
		}
		l->v = v;
		l->cap = cap;
	}
	struct status_site *s = &l->v[l->n++];
	s->code = node->code;
	s->live_nsamples = node->c.live_nsamples;
	s->live_blocks = node->c.live_blocks;
	s->name[0] = '\0';
	l->total += node->c.live_nsamples;
	return 0;
}

static int by_code(const void *a, const void *b)
{
	uint64_t x = ((const struct status_site *)a)->code, y = ((const struct status_site *)b)->code;
	return x < y ? -1 : x > y;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct status_site *)a)->name, ((const struct status_site *)b)->name);
}

static int by_size(const void *a, const void *b)
{
	const struct status_site *x = a, *y = b;
	if (x->live_nsamples != y->live_nsamples) return x->live_nsamples > y->live_nsamples ? -1 : 1;
	if (x->live_blocks != y->live_blocks) return x->live_blocks > y->live_blocks ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Merges neighbours that compare equal (the array is sorted with cmp). */
static size_t merge_equal(struct status_site *v, size_t n, int (*cmp)(const void *, const void *))
{
	size_t out = 0;
	for (size_t i = 0; i < n; i++) {
		if (out > 0 && cmp(&v[out - 1], &v[i]) == 0) {
			v[out - 1].live_nsamples += v[i].live_nsamples;
			v[out - 1].live_blocks += v[i].live_blocks;
		} else {
			v[out++] = v[i];
		}
	}
	return out;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* The innermost frame of code: "function file:line" (by function: "function file"). */
static void name_site(struct status_site *s, mt_locations_fn locs, void *const *ctx, int nctx,
		      bool by_function)
{
	const mt_location *l = NULL;
	int n = -1;
	for (int i = 0; s->code != 0 && locs && n <= 0 && i < nctx; i++)
		if (ctx[i]) n = locs(ctx[i], s->code, &l);
	if (s->code == 0) {
		snprintf(s->name, sizeof s->name, "<no stack>");
		return;
	}
	if (n <= 0 || !l) {
		snprintf(s->name, sizeof s->name, "<unknown code %#llx>", (unsigned long long)s->code);
		return;
	}
	const mt_location *inner = &l[n - 1]; /* lists are outermost first */
	const char *fn = inner->defname && inner->defname[0] ? inner->defname : "??";
	const char *file = base_name(inner->filename ? inner->filename : "");
	if (by_function || inner->line == 0)
		snprintf(s->name, sizeof s->name, "%s%s%s", fn, file[0] ? " " : "", file);
	else
		snprintf(s->name, sizeof s->name, "%s %s:%u", fn, file, inner->line);
}

long status_top_sites(const struct trie *const *t, void *const *locs_ctx, int n, mt_locations_fn locs,
		      bool by_function, struct status_site **out, uint64_t *total_nsamples)
{
	struct site_list l = {0};
	*out = NULL;
	*total_nsamples = 0;
	for (int i = 0; i < n && !l.oom; i++)
		if (t[i]) trie_for_each_node(t[i], collect_node, &l);
	if (l.oom) {
		free(l.v);
		return -1;
	}
	/* contexts sharing a leaf code first (few distinct codes: names are made once per code) */
	if (l.n > 1) qsort(l.v, l.n, sizeof *l.v, by_code);
	l.n = merge_equal(l.v, l.n, by_code);
	for (size_t i = 0; i < l.n; i++) name_site(&l.v[i], locs, locs_ctx, n, by_function);
	if (by_function) {
		if (l.n > 1) qsort(l.v, l.n, sizeof *l.v, by_name);
		l.n = merge_equal(l.v, l.n, by_name);
	}
	if (l.n > 1) qsort(l.v, l.n, sizeof *l.v, by_size);
	*out = l.v;
	*total_nsamples = l.total;
	return (long)l.n;
}

/* ---- the view ---- */

static void restore_terminal(struct status_view *v)
{
	if (v->fullscreen) {
		write_str(v->out_fd, "\033[?25h\033[?1049l"); /* cursor back, leave the alternate screen */
		v->fullscreen = false;
	}
	if (v->termios_saved) {
		tcsetattr(v->key_fd, TCSANOW, &v->saved);
		v->termios_saved = false;
	}
	if (fullscreen_view == v) fullscreen_view = NULL;
}

static void restore_at_exit(void)
{
	if (fullscreen_view) restore_terminal(fullscreen_view);
}

int status_open(const struct status_opts *o, struct status_view **out, char *err, size_t errlen)
{
	*out = NULL;
	int out_fd = -1;
	bool own = false;
	if (o->top) {
		if (isatty(2)) {
			out_fd = 2;
		} else {
			out_fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
			if (out_fd < 0) {
				snprintf(err, errlen, "--top needs a terminal: stderr is not one and /dev/tty "
					 "cannot be opened (%s)", strerror(errno));
				return -1;
			}
			own = true;
		}
	} else if (o->line && isatty(2)) {
		out_fd = 2;
	} else {
		return 0; /* nothing to show: tests and logs stay clean */
	}
	struct status_view *v = calloc(1, sizeof *v);
	char *frame = o->top ? malloc(FRAME_MAX) : NULL;
	if (!v || (o->top && !frame)) {
		free(v);
		free(frame);
		if (own) close(out_fd);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	v->o = *o;
	if (!(v->o.top_interval > 0)) v->o.top_interval = 1;
	v->out_fd = out_fd;
	v->own_out_fd = own;
	v->frame = frame;
	v->key_fd = -1;
	if (o->top && o->keys) v->key_fd = open("/dev/tty", O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (o->top) {
		/* SA_RESTART: a resize must not interrupt the session's waits */
		struct sigaction sa = {.sa_handler = on_winch, .sa_flags = SA_RESTART};
		sigemptyset(&sa.sa_mask);
		sigaction(SIGWINCH, &sa, NULL);
	}
	*out = v;
	return 0;
}

/* Enters the full screen at the first table, not at open: errors printed before tracing
 * starts must stay visible. */
static void enter_fullscreen(struct status_view *v)
{
	static bool atexit_done;
	if (!atexit_done) {
		atexit(restore_at_exit);
		atexit_done = true;
	}
	/* only in the foreground: tcsetattr from a background job would stop us (SIGTTOU) */
	if (v->key_fd >= 0 && tcgetpgrp(v->key_fd) != getpgrp()) {
		close(v->key_fd);
		v->key_fd = -1;
	}
	if (v->key_fd >= 0 && tcgetattr(v->key_fd, &v->saved) == 0) {
		struct termios raw = v->saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO); /* ISIG stays: Ctrl-C still stops us */
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		if (tcsetattr(v->key_fd, TCSANOW, &raw) == 0) v->termios_saved = true;
	}
	write_str(v->out_fd, "\033[?1049h\033[?25l\033[H\033[2J");
	v->fullscreen = true;
	fullscreen_view = v;
}

/* Returns 1 on 'q'; 'f' toggles the grouping and asks for a redraw. */
static int read_keys(struct status_view *v, bool *redraw)
{
	if (v->key_fd < 0 || !v->fullscreen) return 0;
	char buf[64];
	ssize_t n = read(v->key_fd, buf, sizeof buf);
	for (ssize_t i = 0; i < n; i++) {
		if (buf[i] == 'q' || buf[i] == 'Q') return 1;
		if (buf[i] == 'f' || buf[i] == 'F') {
			v->o.top_by_function = !v->o.top_by_function;
			*redraw = true;
		}
	}
	return 0;
}

static int sum_live(void *ctx, uint32_t index, const struct trie_node *node)
{
	uint64_t *sum = ctx;
	(void)index;
	*sum += node->c.live_nsamples;
	return 0;
}

/* The traced sessions, as given to status_update. */
struct targets {
	struct session *const *s;
	const pid_t *pids;
	int n;
};

struct numbers {
	uint64_t samples, drops, live_blocks;
	double live_est;    /* bytes */
	double rate;
	int nsessions;
};

static void read_numbers(struct status_view *v, const struct targets *tg, uint64_t now,
			 struct numbers *n)
{
	memset(n, 0, sizeof *n);
	uint64_t live = 0;
	for (int i = 0; i < tg->n; i++) {
		if (!tg->s[i]) continue;
		struct session_totals t;
		session_get_totals(tg->s[i], &t);
		n->nsessions++;
		n->samples += t.samples;
		n->drops += t.drop_ringbuf + t.drop_map_full + t.drop_stack_copy;
		n->live_blocks += t.live_blocks;
		const struct trie *trie = session_trie(tg->s[i]);
		if (trie) {
			n->rate = trie_rate(trie); /* one --rate for all */
			trie_for_each_node(trie, sum_live, &live);
		}
	}
	n->live_est = n->rate > 0 ? (double)live / n->rate * 8 : 0;
	if (v->window_ns == 0 || n->samples < v->window_samples) { /* first, or a session went away */
		v->window_ns = now;
		v->window_samples = n->samples;
	} else if (now - v->window_ns >= RATE_WINDOW_NS) {
		v->samples_per_s = (double)(n->samples - v->window_samples) * 1e9 / (double)(now - v->window_ns);
		v->window_ns = now;
		v->window_samples = n->samples;
	}
}

static struct status_view *line_view; /* the view showing a status line, for status_line_clear */

static void draw_line(struct status_view *v, const struct targets *tg, uint64_t now)
{
	struct numbers n;
	read_numbers(v, tg, now, &n);
	char live[32], text[512], out[600];
	int rows, cols;
	term_size(v->out_fd, &rows, &cols);
	snprintf(text, sizeof text, "memtraced: %llu samples (%.0f/s), live ~%s in %llu blocks, %llu dropped",
		 (unsigned long long)n.samples, v->samples_per_s,
		 status_format_bytes(n.live_est, live, sizeof live), (unsigned long long)n.live_blocks,
		 (unsigned long long)n.drops);
	/* never wrap: a wrapped line cannot be redrawn in place with \r */
	if (cols > 1 && strlen(text) >= (size_t)cols) text[cols - 1] = '\0';
	int len = snprintf(out, sizeof out, "\r%s\033[K", text);
	write_all(v->out_fd, out, (size_t)len);
	v->line_shown = true;
	line_view = v;
}

void status_line_clear(void)
{
	struct status_view *v = line_view;
	if (!v || !v->line_shown) return;
	write_str(v->out_fd, "\r\033[K");
	v->line_shown = false;
}

/* Appends one screen line, cut to cols, cleared to its end. */
static void frame_line(char *frame, size_t *len, int cols, bool last, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static void frame_line(char *frame, size_t *len, int cols, bool last, const char *fmt, ...)
{
	char text[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	if (cols > 0 && strlen(text) > (size_t)cols) text[cols] = '\0';
	size_t room = FRAME_MAX - *len;
	int w = snprintf(frame + *len, room, "%s\033[K%s", text, last ? "" : "\r\n");
	if (w > 0) *len += (size_t)w < room ? (size_t)w : room - 1;
}

static void read_comm(pid_t pid, char *comm, size_t len) { door_proc_line(pid, "comm", comm, len); }

/* "PID 123 (name)" for one process, "PIDs 123 456 ..." for several. */
static void describe_targets(struct status_view *v, const struct targets *tg, char *buf, size_t len)
{
	int first = -1, count = 0;
	for (int i = 0; i < tg->n; i++)
		if (tg->s[i]) {
			if (first < 0) first = i;
			count++;
		}
	if (count == 0) {
		snprintf(buf, len, "no process");
		return;
	}
	if (count == 1) {
		if (!v->comm[0]) read_comm(tg->pids[first], v->comm, sizeof v->comm);
		snprintf(buf, len, "PID %d (%s)", (int)tg->pids[first], v->comm[0] ? v->comm : "?");
		return;
	}
	size_t off = (size_t)snprintf(buf, len, "PIDs");
	for (int i = 0; i < tg->n && off < len; i++)
		if (tg->s[i]) off += (size_t)snprintf(buf + off, len - off, " %d", (int)tg->pids[i]);
}

static void draw_top(struct status_view *v, const struct targets *tg, uint64_t now)
{
	if (!v->fullscreen) enter_fullscreen(v);
	struct numbers n;
	read_numbers(v, tg, now, &n);
	int rows, cols;
	term_size(v->out_fd, &rows, &cols);
	const struct trie *tries[tg->n > 0 ? tg->n : 1];
	void *ctxs[tg->n > 0 ? tg->n : 1];
	for (int i = 0; i < tg->n; i++) {
		tries[i] = tg->s[i] ? session_trie(tg->s[i]) : NULL;
		ctxs[i] = tg->s[i];
	}
	struct status_site *sites = NULL;
	uint64_t total = 0;
	long nsites = status_top_sites(tries, ctxs, tg->n, session_locations, v->o.top_by_function,
				       &sites, &total);
	char live[32], elapsed[32], who[256];
	double secs = (double)(now - v->start_ns) / 1e9;
	snprintf(elapsed, sizeof elapsed, "%d:%02d:%02d", (int)(secs / 3600), (int)(secs / 60) % 60,
		 (int)secs % 60);
	describe_targets(v, tg, who, sizeof who);

	size_t len = (size_t)snprintf(v->frame, FRAME_MAX, "\033[H");
	frame_line(v->frame, &len, cols, false,
		   "memtraced --top  %s  elapsed %s  samples %llu (%.0f/s)  drops %llu", who, elapsed,
		   (unsigned long long)n.samples, v->samples_per_s, (unsigned long long)n.drops);
	frame_line(v->frame, &len, cols, false,
		   "live ~%s in %llu sampled blocks, %ld %s, rate %g%s",
		   status_format_bytes(n.live_est, live, sizeof live), (unsigned long long)n.live_blocks,
		   nsites < 0 ? 0 : nsites, v->o.top_by_function ? "functions" : "sites", n.rate,
		   v->key_fd >= 0 ? "   (q quit, f site/function)" : "");
	frame_line(v->frame, &len, cols, false, "%s", "");
	/* reverse video for the column titles, as top(1) does */
	char title[256];
	snprintf(title, sizeof title, "%10s %9s %6s  %s", "LIVE EST", "BLOCKS", "%",
		 v->o.top_by_function ? "FUNCTION (innermost frame)" : "ALLOCATION SITE (innermost frame)");
	if (cols > 0 && strlen(title) > (size_t)cols) title[cols] = '\0';
	frame_line(v->frame, &len, 0, rows <= HEADER_LINES, "\033[7m%-*s\033[m", cols, title);
	int room = rows - HEADER_LINES;
	if (nsites < 0) {
		frame_line(v->frame, &len, cols, true, "(out of memory)");
	} else {
		for (long i = 0; i < nsites && i < room; i++) {
			const struct status_site *site = &sites[i];
			double est = n.rate > 0 ? (double)site->live_nsamples / n.rate * 8 : 0;
			char b[32];
			frame_line(v->frame, &len, cols, i + 1 == room || i + 1 == nsites, "%10s %9llu %5.1f%%  %s",
				   status_format_bytes(est, b, sizeof b), (unsigned long long)site->live_blocks,
				   total ? 100.0 * (double)site->live_nsamples / (double)total : 0.0, site->name);
		}
	}
	free(sites);
	if (len + 4 < FRAME_MAX) len += (size_t)snprintf(v->frame + len, FRAME_MAX - len, "\033[J");
	write_all(v->out_fd, v->frame, len);
}

int status_update(struct status_view *v, struct session *const *sessions, const pid_t *pids, int n)
{
	if (!v || !sessions || n <= 0) return 0;
	struct targets tg = {.s = sessions, .pids = pids, .n = n};
	uint64_t now = now_ns();
	if (!v->drawn_once) v->start_ns = now;
	bool due = !v->drawn_once;
	if (v->o.top) {
		if (read_keys(v, &due)) return 1;
		if (winch_pending) {
			winch_pending = 0;
			due = true;
		}
		if (now - v->last_draw_ns >= (uint64_t)(v->o.top_interval * 1e9)) due = true;
	} else if (now - v->last_draw_ns >= LINE_PERIOD_NS || !v->line_shown) {
		due = true; /* also at once after a status_line_clear */
	}
	if (!due) return 0;
	v->drawn_once = true;
	v->last_draw_ns = now;
	if (v->o.top) draw_top(v, &tg, now);
	else draw_line(v, &tg, now);
	return 0;
}

void status_close(struct status_view *v)
{
	if (!v) return;
	if (v->line_shown) write_str(v->out_fd, "\r\033[K"); /* the summary starts on a clean line */
	if (line_view == v) line_view = NULL;
	restore_terminal(v);
	if (v->o.top) signal(SIGWINCH, SIG_DFL);
	if (v->key_fd >= 0) close(v->key_fd);
	if (v->own_out_fd) close(v->out_fd);
	free(v->frame);
	free(v);
}
