/* The daemon's side of the parser (see parser.h): starting it, watching it, its channels.
 *
 * What comes back from the parser is data from a process that may have been taken over by a
 * hostile file: each reply is copied out of the shared ring before it is looked at (the
 * parser could change it while we read), and checked against its own length. A parser that
 * dies, stops answering or breaks the protocol ends the parsing for good: the sessions stop
 * with a message that says why, and what they wrote stays readable. */
#include "parser.h"
#include "protocol/protocol.h"
#include "common/msg.h"
#include "broker/broker.h"
#include "door/door.h"
#include "protocol_check.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WAIT_SLICE_MS 100
#define STUCK_MS 60000     /* no reply for this long: the parser is stuck (a hostile loop) */

static struct {
	pid_t pid, daemon;
	int ctl;             /* SOCK_SEQPACKET to the parser's control thread */
	int pidfd;
	struct broker *broker;
	pthread_mutex_t lock; /* ctl, the pid set, gone */
	pid_t *pids;
	size_t npids, cap;
	char gone[256];
	_Atomic bool is_gone;
} P = {.pid = -1, .ctl = -1, .pidfd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

bool parser_started(void) { return P.pid > 0; }
pid_t parser_pid(void) { return P.pid; }
int parser_pidfd(void) { return P.pidfd; }

void parser_allow_pid(pid_t pid)
{
	if (!parser_started() || pid <= 0) return;
	pthread_mutex_lock(&P.lock);
	bool have = false;
	for (size_t i = 0; i < P.npids && !have; i++) have = P.pids[i] == pid;
	if (!have && P.npids == P.cap) {
		size_t cap = P.cap ? 2 * P.cap : 64;
		pid_t *grown = realloc(P.pids, cap * sizeof *grown);
		if (grown) P.pids = grown, P.cap = cap;
	}
	if (!have && P.npids < P.cap) P.pids[P.npids++] = pid;
	pthread_mutex_unlock(&P.lock);
}

static bool policy_pid(void *ctx, pid_t pid)
{
	(void)ctx;
	pthread_mutex_lock(&P.lock);
	bool ok = false;
	for (size_t i = 0; i < P.npids && !ok; i++) ok = P.pids[i] == pid;
	pthread_mutex_unlock(&P.lock);
	return ok;
}

/* Nothing besides what the broker allows anyway. */
static bool policy_path(void *ctx, const char *path)
{
	(void)ctx;
	(void)path;
	return false;
}

/* ---- is it alive ---- */

static void set_gone(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_gone(const char *fmt, ...)
{
	pthread_mutex_lock(&P.lock);
	if (!atomic_load(&P.is_gone)) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(P.gone, sizeof P.gone, fmt, ap);
		va_end(ap);
		atomic_store(&P.is_gone, true);
	}
	pthread_mutex_unlock(&P.lock);
}

/* Looks (without reaping it) whether the parser has exited, and records why. */
static bool check_alive(void)
{
	if (atomic_load(&P.is_gone)) return false;
	siginfo_t si = {0};
	if (waitid(P_PIDFD, (id_t)P.pidfd, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || !si.si_pid)
		return true;
	if (si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED) {
		if (si.si_status == SIGSYS)
			set_gone("killed by SIGSYS: it made a system call its seccomp filter forbids "
				 "(the unprivileged parser is only allowed what parsing needs)");
		else
			set_gone("killed by signal %d (%s)", si.si_status, strsignal(si.si_status));
	} else {
		set_gone("exited with status %d", si.si_status);
	}
	return false;
}

const char *parser_gone(void)
{
	if (!parser_started()) return NULL;
	check_alive();
	return atomic_load(&P.is_gone) ? P.gone : NULL;
}

static void kill_parser(const char *why)
{
	set_gone("%s", why);
	kill(P.pid, SIGKILL);
}

/* ---- start and stop ---- */

static int send_fd(int sock, int fd, char tag)
{
	char buf[CMSG_SPACE(sizeof(int))];
	memset(buf, 0, sizeof buf);
	struct iovec iov = {&tag, 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = buf,
			    .msg_controllen = sizeof buf};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof fd);
	return sendmsg(sock, &mh, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

/* The notification fd from the confined parser, or -1 (its error text in err). */
static int recv_ready(int sock, char *err, size_t errlen)
{
	char text[512] = "";
	char buf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {text, sizeof text - 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = buf,
			    .msg_controllen = sizeof buf};
	ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
	if (cm && cm->cmsg_type == SCM_RIGHTS && cm->cmsg_len == CMSG_LEN(sizeof(int))) {
		int fd;
		memcpy(&fd, CMSG_DATA(cm), sizeof fd);
		return fd;
	}
	text[n > 0 ? n : 0] = '\0';
	snprintf(err, errlen, "the parser could not confine itself: %s",
		 text[0] ? text : "it exited");
	return -1;
}

static char parser_exe[4096 + 32];

void parser_set_exe(const char *path) { snprintf(parser_exe, sizeof parser_exe, "%s", path); }

/* memtraced-parse next to our own executable (build/bin, or where make install put both). */
static int find_parser_exe(char *err, size_t errlen)
{
	if (parser_exe[0]) return 0;
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	char *slash = n > 0 ? memrchr(self, '/', (size_t)n) : NULL;
	if (!slash) {
		snprintf(err, errlen, "cannot find our own executable: %s", strerror(errno));
		return -1;
	}
	*slash = '\0';
	snprintf(parser_exe, sizeof parser_exe, "%s/memtraced-parse", self);
	if (access(parser_exe, X_OK) != 0) {
		snprintf(err, errlen, "%s: %s (it is installed next to memtraced)", parser_exe,
			 strerror(errno));
		parser_exe[0] = '\0';
		return -1;
	}
	return 0;
}

int parser_start(bool serving_http, char *err, size_t errlen)
{
	if (find_parser_exe(err, errlen) < 0) return -1;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(err, errlen, "cannot create the parser's socket: %s", strerror(errno));
		return -1;
	}
	pid_t daemon = getpid();
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "cannot fork the parser: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		/* A program of its own (memtraced-parse): the parser holds no copy of the daemon's
		 * memory, and none of the daemon's code. Its control socket is fd 3. */
		if (sv[1] == PARSER_CTL_FD) fcntl(sv[1], F_SETFD, 0);
		else if (dup2(sv[1], PARSER_CTL_FD) < 0) _exit(127);
		char dpid[24];
		snprintf(dpid, sizeof dpid, "%d", (int)daemon);
		char *args[] = {(char *)"memtraced-parse", (char *)PARSER_ARG, dpid,
				(char *)(serving_http ? PARSER_ARG_HTTP : NULL), NULL};
		execve(parser_exe, args, environ);
		_exit(127);
	}
	close(sv[1]);
	P.pid = pid;
	P.daemon = daemon;
	P.ctl = sv[0];
	P.pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	int nfd = recv_ready(P.ctl, err, errlen);
	if (nfd < 0 || P.pidfd < 0) {
		if (nfd >= 0) close(nfd);
		if (P.pidfd < 0) snprintf(err, errlen, "cannot watch the parser: %s", strerror(errno));
		parser_stop();
		return -1;
	}
	struct broker_policy pol = {.pid_allowed = policy_pid, .path_allowed = policy_path};
	P.broker = broker_start(nfd, pid, &pol, err, errlen);
	if (!P.broker) {
		parser_stop();
		return -1;
	}
	return 0;
}

/* Closes its control socket (it exits then), waits up to wait_ms for that, kills it if it
 * lives on, reaps it and ends its broker. */
static void end_parser(int wait_ms)
{
	pthread_mutex_lock(&P.lock);
	if (P.ctl >= 0) close(P.ctl);
	P.ctl = -1;
	pthread_mutex_unlock(&P.lock);
	for (int i = 0; i < wait_ms / 10 && check_alive(); i++) usleep(10000);
	if (check_alive()) kill(P.pid, SIGKILL);
	waitpid(P.pid, NULL, 0);
	broker_stop(P.broker);
	P.broker = NULL;
	if (P.pidfd >= 0) close(P.pidfd);
	P.pidfd = -1;
	P.pid = -1;
}

void parser_stop(void)
{
	if (P.pid <= 0 || getpid() != P.daemon) return; /* not in a child forked since */
	end_parser(1000);
}

int parser_send_fd(int fd, char tag)
{
	pthread_mutex_lock(&P.lock);
	int rc = P.ctl >= 0 ? send_fd(P.ctl, fd, tag) : -1;
	pthread_mutex_unlock(&P.lock);
	return rc;
}

/* ---- channels ---- */

struct pchan *pchan_open(char *err, size_t errlen)
{
	if (parser_gone()) {
		snprintf(err, errlen, "the parser is gone: %s", P.gone);
		return NULL;
	}
	struct pchan *c = calloc(1, sizeof *c);
	size_t bytes = shm_ring_bytes(PARSER_REQ_RING) + shm_ring_bytes(PARSER_RES_RING);
	int fd = memfd_create("memtraced-channel", MFD_CLOEXEC);
	if (!c || fd < 0 || ftruncate(fd, (off_t)bytes) < 0) goto fail;
	c->mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (c->mem == MAP_FAILED) goto fail;
	c->bytes = bytes;
	shm_ring_attach(&c->req, c->mem, PARSER_REQ_RING);
	shm_ring_attach(&c->res, (char *)c->mem + shm_ring_bytes(PARSER_REQ_RING), PARSER_RES_RING);
	if (parser_send_fd(fd, PARSER_TAG_CHANNEL) < 0) goto fail;
	close(fd);
	return c;
fail:
	snprintf(err, errlen, "cannot open a channel to the parser: %s", strerror(errno));
	if (fd >= 0) close(fd);
	if (c && c->mem && c->mem != MAP_FAILED) munmap(c->mem, bytes);
	free(c);
	return NULL;
}

size_t pchan_max_payload(const struct pchan *c) { return shm_ring_max_payload(&c->req); }

void pchan_close(struct pchan *c)
{
	if (!c) return;
	shm_ring_close(&c->req); /* its thread ends when it has read everything */
	munmap(c->mem, c->bytes);
	free(c);
}

static int put_as(struct pchan *c, uint32_t type, const void *head, size_t len, const void *tail,
		  size_t tail_len, bool quiet)
{
	struct shm_msg *m = shm_ring_reserve(&c->req, type, (uint32_t)(len + tail_len));
	if (!m) return -1;
	if (len) memcpy(m->payload, head, len); /* PQ_REFRESH has none: head may be NULL */
	if (tail_len) memcpy(m->payload + len, tail, tail_len);
	if (quiet) shm_ring_commit_quiet(&c->req, m);
	else shm_ring_commit(&c->req, m);
	return 0;
}

static int put(struct pchan *c, uint32_t type, const void *head, size_t len, const void *tail,
	       size_t tail_len)
{
	return put_as(c, type, head, len, tail, tail_len, false);
}

int pchan_try_send_quiet(struct pchan *c, uint32_t type, const void *head, size_t len,
			 const void *tail, size_t tail_len)
{
	if (c->broken || len + tail_len > shm_ring_max_payload(&c->req)) return -1;
	return put_as(c, type, head, len, tail, tail_len, true);
}

void pchan_flush(struct pchan *c) { shm_ring_flush(&c->req); }

int pchan_try_send(struct pchan *c, uint32_t type, const void *head, size_t len,
		   const void *tail, size_t tail_len)
{
	if (c->broken || len + tail_len > shm_ring_max_payload(&c->req)) return -1;
	return put(c, type, head, len, tail, tail_len);
}

static bool stuck_or_gone(struct pchan *c, int *waited)
{
	*waited += WAIT_SLICE_MS;
	if (!check_alive()) {
		c->broken = true;
		return true;
	}
	if (*waited >= STUCK_MS) {
		kill_parser("it did not answer for 60 s (stuck on an input), and was killed");
		c->broken = true;
		return true;
	}
	return false;
}

int pchan_send(struct pchan *c, uint32_t type, const void *head, size_t len, const void *tail,
	       size_t tail_len)
{
	if (c->broken || len + tail_len > shm_ring_max_payload(&c->req)) return -1;
	int waited = 0;
	while (put(c, type, head, len, tail, tail_len) < 0) {
		shm_ring_flush(&c->req);
		if (!shm_ring_wait_space(&c->req, (uint32_t)(len + tail_len), WAIT_SLICE_MS) &&
		    stuck_or_gone(c, &waited))
			return -1;
	}
	return 0;
}

void pchan_break(struct pchan *c, const char *why)
{
	char msg[256];
	snprintf(msg, sizeof msg, "%s, and was killed", why);
	kill_parser(msg);
	c->broken = true;
}

/* The message m of c's reply ring, read once, then checked: it lies inside the ring and fits
 * buf. Its type, or -1 (the parser is killed, c broken). */
static int take(struct pchan *c, struct shm_msg *m, void *buf, size_t cap, size_t *len)
{
	uint32_t type = m->type, mlen = m->len;
	uint64_t off = (uint64_t)((uint8_t *)m - c->res.data);
	if (mlen > cap || off + sizeof *m + mlen > c->res.size) {
		kill_parser("it broke the protocol (a reply longer than its ring or its kind), and "
			    "was killed");
		c->broken = true;
		return -1;
	}
	memcpy(buf, m->payload, mlen);
	m->len = mlen; /* what the release frees */
	shm_ring_release(&c->res, m);
	*len = mlen;
	return (int)type;
}

int pchan_recv(struct pchan *c, void *buf, size_t cap, size_t *len, uint32_t want)
{
	if (c->broken) return -1;
	int waited = 0;
	struct shm_msg *m;
	while (!(m = shm_ring_peek(&c->res))) {
		shm_ring_flush(&c->req); /* everything sent is there to be read */
		if (!shm_ring_wait_msg(&c->res, want, WAIT_SLICE_MS) && !shm_ring_peek(&c->res) &&
		    stuck_or_gone(c, &waited))
			return -1;
	}
	return take(c, m, buf, cap, len);
}

int pchan_try_recv(struct pchan *c, void *buf, size_t cap, size_t *len)
{
	if (c->broken) return -1;
	struct shm_msg *m = shm_ring_peek(&c->res);
	return m ? take(c, m, buf, cap, len) : 0;
}

/* ---- allocator discovery ---- */

static struct pchan *sites_chan;
static pthread_mutex_t sites_lock = PTHREAD_MUTEX_INITIALIZER;

/* Every path is NUL-terminated, absolute, a regular file; every offset inside it. */
static int check_sites(pid_t pid, struct alloc_sites *s, char *err, size_t errlen)
{
	s->allocator[sizeof s->allocator - 1] = '\0';
	s->notes[sizeof s->notes - 1] = '\0';
	if (s->n < 0 || s->n > MAX_PROBE_SITES) goto bad;
	for (int i = 0; i < s->n; i++) {
		struct probe_site *p = &s->sites[i];
		if (!memchr(p->path, '\0', sizeof p->path) || p->path[0] != '/' ||
		    (unsigned)p->fn >= AF_COUNT)
			goto bad;
		/* the probe goes where the parser says only inside the code of that file: an
		 * executable segment holds the entry and the probe */
		int fd = door_open_file(p->path, 0, true);
		bool ok = fd >= 0 && p->probe_offset >= p->entry_offset &&
			  p->probe_offset - p->entry_offset < 64 &&
			  elf_offset_is_code(fd, p->entry_offset) && elf_offset_is_code(fd, p->probe_offset);
		if (fd >= 0) close(fd);
		if (!ok) goto bad;
	}
	return 0;
bad:
	snprintf(err, errlen, "the parser's answer about PID %d's allocator is not valid (a "
		 "hostile file?): not used", (int)pid);
	return -1;
}

/* One request on the one-shot channel (allocator discovery, object facts), its reply of
 * exactly rlen bytes and type rtype into r. 0, or -1 with a message (the parser is gone). */
int parser_rpc(uint32_t type, const void *q, size_t qlen, uint32_t rtype, void *r, size_t rlen,
	       char *err, size_t errlen)
{
	pthread_mutex_lock(&sites_lock);
	int rc = -1;
	size_t len = 0;
	if (!sites_chan && !(sites_chan = pchan_open(err, errlen))) goto out;
	if (pchan_send(sites_chan, type, q, qlen, NULL, 0) < 0 ||
	    pchan_recv(sites_chan, r, rlen, &len, 1) != (int)rtype || len != rlen) {
		if (!sites_chan->broken) kill_parser("it broke the protocol, and was killed");
		snprintf(err, errlen, "the parser is gone: %s", parser_gone() ? P.gone : "?");
		goto out;
	}
	rc = 0;
out:
	pthread_mutex_unlock(&sites_lock);
	return rc;
}

static int sites_rpc(uint32_t type, pid_t pid, const char *exe, const struct alloc_sites *have,
		     struct alloc_sites *out, char *err, size_t errlen)
{
	parser_allow_pid(pid);
	int rc = -1;
	struct pq_sites *q = calloc(1, sizeof *q);
	struct pr_sites *r = calloc(1, sizeof *r);
	if (!q || !r) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	q->pid = pid;
	if (exe) snprintf(q->exe, sizeof q->exe, "%s", exe);
	if (have) q->have = *have;
	if (parser_rpc(type, q, sizeof *q, PR_SITES, r, sizeof *r, err, errlen) < 0) goto out;
	r->err[sizeof r->err - 1] = '\0';
	if (r->rc < 0) {
		snprintf(err, errlen, "%s", r->err);
		goto out;
	}
	if (check_sites(pid, &r->sites, err, errlen) < 0) goto out;
	*out = r->sites;
	rc = 0;
out:
	free(q);
	free(r);
	return rc;
}

int psites_for_pid(pid_t pid, struct alloc_sites *out, char *err, size_t errlen)
{
	return sites_rpc(PQ_SITES_PID, pid, NULL, NULL, out, err, errlen);
}

int psites_for_exec(const char *exe, pid_t pid, struct alloc_sites *out, char *err, size_t errlen)
{
	return sites_rpc(PQ_SITES_EXEC, pid, exe, NULL, out, err, errlen);
}

int psites_added(pid_t pid, const struct alloc_sites *have, struct alloc_sites *added,
		 char *err, size_t errlen)
{
	return sites_rpc(PQ_SITES_ADDED, pid, NULL, have, added, err, errlen);
}

/* ---- restart ---- */

int parser_restart(bool serving_http, char *err, size_t errlen)
{
	if (getpid() != P.daemon) {
		snprintf(err, errlen, "not the daemon");
		return -1;
	}
	if (P.pid > 0) end_parser(0); /* reaped (a zombie no more), its broker ended */
	pthread_mutex_lock(&sites_lock); /* the old parser's channel is broken for good */
	pchan_close(sites_chan);
	sites_chan = NULL;
	pthread_mutex_unlock(&sites_lock);
	pthread_mutex_lock(&P.lock);
	P.npids = 0; /* the new one may read the files of the processes asked about anew */
	P.gone[0] = '\0';
	atomic_store(&P.is_gone, false);
	pthread_mutex_unlock(&P.lock);
	return parser_start(serving_http, err, errlen);
}
