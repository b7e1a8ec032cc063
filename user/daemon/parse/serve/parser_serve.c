/* The parser's side (see parser.h): the forked child confines itself, hands the daemon its
 * seccomp notification fd, then serves each channel the daemon opens on a thread of its own,
 * with the same allocator discovery and unwinder code the daemon would run in-process. */
#include "serve.h"
#include "protocol/protocol.h"
#include "confine/confine.h"
#include "elf/objfacts.h"
#include "http/http.h"
#include "protocol/shm_ring.h"
#include "sites/allocsyms.h"
#include "unwind/stacks.h"
#include "unwind/u64map.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static pid_t daemon_pid;
static long test_syscall_after = -1; /* MEMTRACED_TEST_PARSER_SYSCALL: the test-only hook */

struct chan {
	void *mem;
	size_t bytes;
	struct shm_ring req, res;
	struct stacks *st;
	struct u64map sent;     /* codes whose locations the daemon has */
	char *maps;             /* PQ_FINAL_MAPS so far */
	size_t maps_len;
	uint64_t unwinds;
};

static void daemon_gone_check(void)
{
	if (getppid() != daemon_pid) _exit(0);
}

static struct shm_msg *reserve(struct chan *c, uint32_t type, uint32_t len)
{
	struct shm_msg *m;
	while (!(m = shm_ring_reserve(&c->res, type, len))) {
		shm_ring_flush(&c->res);
		if (!shm_ring_wait_space(&c->res, len, 200)) daemon_gone_check();
	}
	return m;
}

/* ---- replies ---- */

static void reply_sites(struct chan *c, uint32_t type, const struct shm_msg *m)
{
	if (m->len != sizeof(struct pq_sites)) _exit(3);
	const struct pq_sites *q = (const void *)m->payload;
	struct shm_msg *r = reserve(c, PR_SITES, sizeof(struct pr_sites));
	struct pr_sites *s = (void *)r->payload;
	memset(s, 0, sizeof *s);
	char exe[PARSER_FILE_LEN];
	snprintf(exe, sizeof exe, "%s", q->exe);
	if (type == PQ_SITES_PID)
		s->rc = alloc_sites_for_pid(q->pid, &s->sites, s->err, sizeof s->err);
	else if (type == PQ_SITES_EXEC)
		s->rc = alloc_sites_for_exec(exe, q->pid, &s->sites, s->err, sizeof s->err);
	else
		s->rc = alloc_sites_added(q->pid, &q->have, &s->sites, s->err, sizeof s->err);
	shm_ring_commit(&c->res, r);
}

static void reply_facts(struct chan *c, const struct shm_msg *m)
{
	if (m->len != sizeof(struct pq_facts)) _exit(3);
	const struct pq_facts *q = (const void *)m->payload;
	char path[PARSER_FILE_LEN], symbol[sizeof q->symbol];
	snprintf(path, sizeof path, "%s", q->path);
	snprintf(symbol, sizeof symbol, "%s", q->symbol);
	struct shm_msg *r = reserve(c, PR_FACTS, sizeof(struct pr_facts));
	struct pr_facts *f = (void *)r->payload;
	memset(f, 0, sizeof *f);
	f->rc = elf_facts_of(path, symbol, &f->facts, f->err, sizeof f->err);
	shm_ring_commit(&c->res, r);
}

/* A profile request of the HTTP server, to the daemon on the channel its documents come on
 * (its thread, under the server's lock; the channel's own thread never replies there). */
static int ask(void *ctx, const struct http_want *w)
{
	struct chan *c = ctx;
	struct shm_msg *r = shm_ring_reserve(&c->res, PR_WANT, sizeof(struct pr_want));
	if (!r) return -1; /* the daemon has not taken the last ones: it is busy */
	struct pr_want *q = (void *)r->payload;
	*q = (struct pr_want){.id = w->id, .kind = w->kind == HTTP_WANT_ALLOCS   ? WANT_ALLOCS
						      : w->kind == HTTP_WANT_CANCEL ? WANT_CANCEL
										    : WANT_HEAP,
			      .pid = w->pid, .seconds = w->seconds, .all_users = w->all_users ? 1 : 0};
	shm_ring_commit(&c->res, r);
	shm_ring_flush(&c->res);
	return 0;
}

static void answer(const struct shm_msg *m)
{
	if (m->len < sizeof(struct pq_answer)) _exit(3);
	const struct pq_answer *q = (const void *)m->payload;
	if (q->len > m->len - sizeof *q || !memchr(q->type, 0, sizeof q->type)) _exit(3);
	http_answer(q->id, q->status, q->type, q + 1, q->len);
}

static void publish(struct chan *c, const struct shm_msg *m)
{
	static bool asking;
	if (!asking) { /* the daemon publishes on one channel: profiles are asked for there */
		asking = true;
		http_set_asker(ask, c);
	}
	if (m->len < sizeof(struct pq_publish)) _exit(3);
	const struct pq_publish *q = (const void *)m->payload;
	if (q->len > m->len - sizeof *q || !memchr(q->path, 0, sizeof q->path) ||
	    !memchr(q->type, 0, sizeof q->type))
		_exit(3);
	http_publish(q->path, q->type, q + 1, q->len);
}

static void reply_open(struct chan *c, const struct shm_msg *m)
{
	if (m->len != sizeof(struct pq_open)) _exit(3);
	const struct pq_open *q = (const void *)m->payload;
	if (c->st) stacks_close(c->st);
	struct shm_msg *r = reserve(c, PR_OPENED, sizeof(struct pr_opened));
	struct pr_opened *o = (void *)r->payload;
	memset(o, 0, sizeof *o);
	c->st = stacks_open(q->pid, o->err, sizeof o->err);
	o->ok = c->st != NULL;
	if (c->st && q->python <= PY_MODE_ONLY) stacks_find_python(c->st, (enum py_mode)q->python, &o->python);
	if (c->st) stacks_get_stats(c->st, &o->stats);
	shm_ring_commit(&c->res, r);
}

static size_t loc_bytes(size_t a, size_t b) { return (sizeof(struct pr_loc) + a + b + 3) & ~(size_t)3; }

static size_t cut(const char *s) { size_t n = s ? strlen(s) : 0; return n > PARSER_MAX_LOC_STRING ? PARSER_MAX_LOC_STRING : n; }

/* The locations of a code the daemon has not been told of. */
static void send_locs(struct chan *c, uint64_t code)
{
	const mt_location *locs;
	int n = stacks_locations(c->st, code, &locs);
	if (n < 0) n = 0;
	if (n > PARSER_MAX_LOCS) n = PARSER_MAX_LOCS;
	size_t len = offsetof(struct pr_locs, data);
	for (int i = 0; i < n; i++) len += loc_bytes(cut(locs[i].filename), cut(locs[i].defname));
	struct shm_msg *r = reserve(c, PR_LOCS, (uint32_t)len);
	struct pr_locs *pl = (void *)r->payload;
	pl->code = code;
	pl->nlocs = (uint32_t)n;
	uint8_t *p = pl->data;
	for (int i = 0; i < n; i++) {
		struct pr_loc l = {.line = locs[i].line, .start_char = locs[i].start_char,
				   .end_char = locs[i].end_char,
				   .filename_len = (uint16_t)cut(locs[i].filename),
				   .defname_len = (uint16_t)cut(locs[i].defname)};
		memcpy(p, &l, sizeof l);
		if (l.filename_len) memcpy(p + sizeof l, locs[i].filename, l.filename_len);
		if (l.defname_len) memcpy(p + sizeof l + l.filename_len, locs[i].defname, l.defname_len);
		p += loc_bytes(l.filename_len, l.defname_len);
	}
	shm_ring_commit(&c->res, r);
	u64map_put(&c->sent, code, 1);
}

static void reply_unwind(struct chan *c, const struct shm_msg *m)
{
	if (m->len < sizeof(struct pq_unwind)) _exit(3);
	const struct pq_unwind *q = (const void *)m->payload;
	if (q->stack_len > m->len - sizeof *q || q->max_codes < 0 || q->max_codes > 4096) _exit(3);
	if (test_syscall_after >= 0 && (long)++c->unwinds > test_syscall_after)
		syscall(SYS_socket, AF_INET, SOCK_STREAM, 0); /* forbidden: the filter kills us */
	static _Thread_local uint64_t codes[4096];
	static _Thread_local struct mt_py_frame py[MT_PY_MAX_FRAMES];
	static _Thread_local struct mt_py_code pycodes[MT_PY_MAX_NEW];
	size_t py_at = sizeof *q + (((size_t)q->stack_len + 7) & ~(size_t)7);
	size_t codes_at = py_at + q->py_n * sizeof *py;
	if (q->py_n > MT_PY_MAX_FRAMES || q->py_codes > MT_PY_MAX_NEW ||
	    (q->py_n && codes_at + q->py_codes * sizeof *pycodes > m->len)) _exit(3);
	memcpy(py, (const uint8_t *)q + py_at, q->py_n * sizeof *py);
	uint16_t ncodes = q->py_n ? q->py_codes : 0;
	memcpy(pycodes, (const uint8_t *)q + codes_at, ncodes * sizeof *pycodes);
	if (c->st) stacks_python_sample(c->st, py, q->py_n, q->py_status, pycodes, ncodes);
	int n = c->st ? stacks_unwind_from(c->st, q->tid, q->regs, (const uint8_t *)(q + 1), q->stack_len,
					   (enum stacks_start)q->start, codes, q->max_codes) : 0;
	if (n < 0) n = 0;
	for (int i = 0; i < n; i++)
		if (!u64map_get(&c->sent, codes[i])) send_locs(c, codes[i]);
	const char *files[2] = {NULL, NULL};
	size_t flen[2] = {0, 0};
	for (int i = 0; i < 2 && q->want_files && c->st && i < n; i++) {
		files[i] = stacks_last_frame_file(c->st, i);
		flen[i] = files[i] ? strlen(files[i]) : 0;
		if (flen[i] >= PARSER_FILE_LEN) flen[i] = 0;
	}
	size_t len = sizeof(struct pr_unwind) + (size_t)n * 8 + flen[0] + flen[1];
	struct shm_msg *r = reserve(c, PR_UNWIND, (uint32_t)len);
	struct pr_unwind *u = (void *)r->payload;
	memset(u, 0, sizeof *u);
	u->n = n;
	if (c->st) {
		stacks_last_extent(c->st, &u->end, &u->truncated);
		stacks_get_stats(c->st, &u->stats);
	}
	u->file_len[0] = (uint16_t)flen[0];
	u->file_len[1] = (uint16_t)flen[1];
	memcpy(u->codes, codes, (size_t)n * 8);
	uint8_t *p = (uint8_t *)(u->codes + n);
	if (flen[0]) memcpy(p, files[0], flen[0]);
	if (flen[1]) memcpy(p + flen[0], files[1], flen[1]);
	shm_ring_commit(&c->res, r);
}

static void final_maps(struct chan *c, const struct shm_msg *m)
{
	if (m->len < sizeof(struct pq_final_maps)) _exit(3);
	const struct pq_final_maps *q = (const void *)m->payload;
	if (q->len > m->len - sizeof *q) _exit(3);
	char *grown = realloc(c->maps, c->maps_len + q->len + 1);
	if (!grown) return;
	c->maps = grown;
	memcpy(c->maps + c->maps_len, (const char *)(q + 1), q->len);
	c->maps_len += q->len;
	c->maps[c->maps_len] = '\0';
	if (!q->last) return;
	if (c->st) stacks_set_final_maps(c->st, c->maps);
	free(c->maps);
	c->maps = NULL;
	c->maps_len = 0;
}

static void *serve_channel(void *arg)
{
	struct chan *c = arg;
	for (;;) {
		struct shm_msg *m = shm_ring_peek(&c->req);
		if (!m) {
			shm_ring_flush(&c->res); /* idle: the daemon has all there is */
			if (shm_ring_is_closed(&c->req) && !shm_ring_peek(&c->req)) break;
			if (!shm_ring_wait_msg(&c->req, 1, 200)) daemon_gone_check();
			continue;
		}
		switch (m->type) {
		case PQ_SITES_PID: case PQ_SITES_EXEC: case PQ_SITES_ADDED:
			reply_sites(c, m->type, m);
			break;
		case PQ_FACTS: reply_facts(c, m); break;
		case PQ_PUBLISH: publish(c, m); break;
		case PQ_ANSWER: answer(m); break;
		case PQ_OPEN: reply_open(c, m); break;
		case PQ_UNWIND: reply_unwind(c, m); break;
		case PQ_REFRESH: if (c->st) stacks_refresh(c->st); break;
		case PQ_FINAL_MAPS: final_maps(c, m); break;
		default: _exit(3);
		}
		shm_ring_release(&c->req, m);
	}
	if (c->st) stacks_close(c->st);
	u64map_free(&c->sent);
	free(c->maps);
	munmap(c->mem, c->bytes);
	free(c);
	return NULL;
}

/* ---- the process ---- */

static int recv_fd(int sock, char *tag_out)
{
	char tag = 0, buf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&tag, 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = buf,
			    .msg_controllen = sizeof buf};
	ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	if (n <= 0) return -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	if (!cm || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN(sizeof(int))) return -2;
	int fd;
	memcpy(&fd, CMSG_DATA(cm), sizeof fd);
	*tag_out = tag;
	return fd;
}

static void send_ready(int sock, int fd, const char *err)
{
	char buf[CMSG_SPACE(sizeof(int))];
	memset(buf, 0, sizeof buf);
	struct iovec iov = {(void *)err, strlen(err) + 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		mh.msg_control = buf;
		mh.msg_controllen = sizeof buf;
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof fd);
	}
	sendmsg(sock, &mh, MSG_NOSIGNAL);
}

/* Test-only: what the broker lets the confined parser open ("A:B:C", reported on stderr):
 * MEMTRACED_TEST_PARSER_OPEN once confined, MEMTRACED_TEST_PARSER_OPEN_TRACED when the first
 * channel comes, a traced process's (the broker allows its files by then): as a parser that
 * was taken over would ask. */
static void try_opens(const char *list)
{
	char buf[4096];
	if (!list || !*list) return;
	snprintf(buf, sizeof buf, "%s", list);
	for (char *save, *p = strtok_r(buf, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		fprintf(stderr, "memtraced parser test: open %s: %s\n", p, fd >= 0 ? "opened" : strerror(errno));
		if (fd >= 0) close(fd);
	}
}

void parser_serve(int ctl, pid_t daemon, bool serving_http)
{
	daemon_pid = daemon;
	/* not in the terminal's process group (^C is the daemon's to handle), and nothing of the
	 * daemon's open files but its control socket and stderr */
	setsid();
	prctl(PR_SET_NAME, "memtraced-parse", 0, 0, 0); /* what ps shows */
	int ign[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2};
	for (size_t i = 0; i < sizeof ign / sizeof ign[0]; i++) signal(ign[i], SIG_IGN);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
	}
	if (ctl > 3) syscall(SYS_close_range, 3, ctl - 1, 0);
	syscall(SYS_close_range, ctl + 1, ~0U, 0);
	const char *hook = getenv("MEMTRACED_TEST_PARSER_SYSCALL");
	if (hook && *hook) test_syscall_after = atol(hook);
	/* libdw's own debuginfod client would need the network: the broker fetches instead */
	const char *urls = getenv("DEBUGINFOD_URLS");
	if (urls && *urls) stacks_fetch_debuginfo_from(BROKER_DEBUGINFOD_PREFIX);
	unsetenv("DEBUGINFOD_URLS");
	char err[512] = "";
	int nfd = sandbox_confine(serving_http, err, sizeof err);
	send_ready(ctl, nfd, err);
	if (nfd < 0) _exit(2);
	close(nfd);
	try_opens(getenv("MEMTRACED_TEST_PARSER_OPEN"));
	for (;;) {
		char tag;
		int fd = recv_fd(ctl, &tag);
		if (fd == -1) _exit(0); /* the daemon is done (or gone) */
		if (fd < 0) continue;
		if (tag == PARSER_TAG_TOKEN) { /* --listen-token: the token, before the socket */
			char token[PARSER_TOKEN_MAX + 1];
			ssize_t n = read(fd, token, PARSER_TOKEN_MAX);
			close(fd);
			token[n > 0 ? n : 0] = '\0';
			http_set_token(token);
			continue;
		}
		if (tag == PARSER_TAG_LISTEN) { /* --listen: the socket the daemon opened */
			char herr[256];
			if (http_start(fd, herr, sizeof herr) < 0) {
				fprintf(stderr, "memtraced: the HTTP server cannot start: %s\n", herr);
				close(fd);
			}
			continue;
		}
		static bool tried;
		if (!tried) try_opens(getenv("MEMTRACED_TEST_PARSER_OPEN_TRACED"));
		tried = true;
		struct chan *c = calloc(1, sizeof *c);
		size_t bytes = shm_ring_bytes(PARSER_REQ_RING) + shm_ring_bytes(PARSER_RES_RING);
		void *mem = c ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
		close(fd);
		if (mem == MAP_FAILED) _exit(4);
		c->mem = mem;
		c->bytes = bytes;
		shm_ring_attach(&c->req, mem, PARSER_REQ_RING);
		shm_ring_attach(&c->res, (char *)mem + shm_ring_bytes(PARSER_REQ_RING), PARSER_RES_RING);
		pthread_t t;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, 8u << 20); /* libdw recurses on deep DWARF */
		if (pthread_create(&t, &attr, serve_channel, c) != 0) _exit(4);
		pthread_attr_destroy(&attr);
	}
}
