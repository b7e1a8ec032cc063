/* The published documents and the libmicrohttpd daemon that serves them (http.h). */
#include "http.h"

#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct doc {
	char path[HTTP_PATH_LEN], type[HTTP_TYPE_LEN];
	struct MHD_Response *resp; /* reference-counted by libmicrohttpd: a request in flight
				      keeps the one it took */
};

/* A client's address as the limits count it: IPv4 as IPv6 (::ffff:a.b.c.d), and every
 * loopback address (127.0.0.0/8, ::1) as one: a local user could otherwise take the limit of
 * each of 127.0.0.0/8 in turn (issue 46). */
struct addr_key {
	uint8_t b[16];
};

static struct addr_key addr_key_of(const struct sockaddr *sa)
{
	struct addr_key k = {{0}};
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	memcpy(k.b, mapped, 12);
	uint32_t v4 = 0;
	if (sa && sa->sa_family == AF_INET) {
		v4 = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_LOOPBACK(a)) v4 = 0x7f000001;
		else if (IN6_IS_ADDR_V4MAPPED(a)) v4 = ((uint32_t)a->s6_addr[12] << 24) |
						       ((uint32_t)a->s6_addr[13] << 16) |
						       ((uint32_t)a->s6_addr[14] << 8) | a->s6_addr[15];
		else {
			memcpy(k.b, a->s6_addr, 16);
			return k;
		}
	}
	if (v4 >> 24 == 127) v4 = 0x7f000001;
	k.b[12] = (uint8_t)(v4 >> 24);
	k.b[13] = (uint8_t)(v4 >> 16);
	k.b[14] = (uint8_t)(v4 >> 8);
	k.b[15] = (uint8_t)v4;
	return k;
}

static bool same_addr(const struct addr_key *a, const struct addr_key *b)
{
	return memcmp(a->b, b->b, sizeof a->b) == 0;
}

/* A request held (suspended) until the daemon answers it. */
struct pending {
	struct addr_key addr; /* its client's: windows are limited per address */
	bool used, answered, cancelled;
	uint32_t id;
	unsigned seconds; /* a window (?seconds=N): its client is watched while it is held */
	struct MHD_Connection *conn;
	int fd;
	unsigned status;
	struct MHD_Response *resp;
};

/* A connection, from libmicrohttpd's notice of it to its close: when its request is to be
 * whole (HTTP_REQUEST_SECONDS), for the watch thread to cut a slow one (issue 35: 40 slow
 * clients trickling headers kept /metrics from answering). */
struct conn {
	bool used, in_request; /* in_request: its headers came, it is being answered */
	int fd;
	uint64_t due_ns;
	struct addr_key addr;  /* where it comes from (addr_key_of) */
};

static struct {
	pthread_mutex_t lock;
	struct doc docs[HTTP_MAX_DOCS];
	int n;
	struct MHD_Daemon *mhd;
	struct pending held[HTTP_MAX_HELD];
	struct conn conns[HTTP_MAX_CONNECTIONS + 8]; /* (and those accepted past the limit) */
	uint32_t next_id;
	http_ask_fn ask;
	void *ask_ctx;
	pthread_t watch;
	char token[300]; /* "Bearer TOKEN" (--listen-token), or "" */
	unsigned per_address; /* connections from one address at most, or 0 (a loopback listener) */
} H = {.lock = PTHREAD_MUTEX_INITIALIZER};

void http_set_token(const char *token)
{
	snprintf(H.token, sizeof H.token, "%s%s", token[0] ? "Bearer " : "", token);
}

/* Does the request carry the token? (compared in constant time: its length is no secret) */
static bool authorized(struct MHD_Connection *c)
{
	const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	size_t n = strlen(H.token);
	if (!v || strlen(v) != n) return false;
	unsigned char diff = 0;
	for (size_t i = 0; i < n; i++) diff |= (unsigned char)(v[i] ^ H.token[i]);
	return diff == 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define REQUEST_NS ((uint64_t)HTTP_REQUEST_SECONDS * 1000000000ull)

static struct conn *conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return i ? i->socket_context : NULL;
}

/* A request's headers came: it is not cut while it is answered (a window may be held 60 s). */
static void request_began(struct MHD_Connection *c)
{
	pthread_mutex_lock(&H.lock);
	struct conn *k = conn_of(c);
	if (k) k->in_request = true;
	pthread_mutex_unlock(&H.lock);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	(void)cls;
	pthread_mutex_lock(&H.lock);
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		struct conn *k = NULL;
		for (size_t n = 0; n < sizeof H.conns / sizeof H.conns[0] && !k; n++)
			if (!H.conns[n].used) k = &H.conns[n];
		const union MHD_ConnectionInfo *a = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		if (k && i) *k = (struct conn){.used = true, .fd = i->connect_fd, .due_ns = now_ns() + REQUEST_NS,
					       .addr = addr_key_of(a ? a->client_addr : NULL)};
		*socket_context = k;
	} else if (*socket_context) { /* closed: libmicrohttpd closes its socket after this */
		*(struct conn *)*socket_context = (struct conn){0};
		*socket_context = NULL;
	}
	pthread_mutex_unlock(&H.lock);
}

/* Twice a second: a connection whose request has not all come in time is shut down (its
 * thread sees the end and closes it); a window whose client hung up is answered at once and
 * the daemon told, so that neither its slot nor the daemon's work outlive the client. */
static void *watch(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec half = {0, 500000000};
		nanosleep(&half, NULL);
		uint32_t gone[HTTP_MAX_HELD];
		int ngone = 0;
		pthread_mutex_lock(&H.lock);
		uint64_t now = now_ns();
		for (size_t n = 0; n < sizeof H.conns / sizeof H.conns[0]; n++) {
			struct conn *k = &H.conns[n];
			if (k->used && !k->in_request && now > k->due_ns) {
				shutdown(k->fd, SHUT_RDWR);
				k->due_ns = UINT64_MAX; /* once */
			}
		}
		for (int i = 0; i < HTTP_MAX_HELD; i++) {
			struct pending *p = &H.held[i];
			if (!p->used || p->answered || p->cancelled || !p->seconds) continue;
			struct pollfd pf = {.fd = p->fd, .events = POLLRDHUP};
			if (poll(&pf, 1, 0) == 1 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
				p->cancelled = true;
				gone[ngone++] = p->id;
			}
		}
		for (int i = 0; i < ngone && H.ask; i++) {
			struct http_want w = {.id = gone[i], .kind = HTTP_WANT_CANCEL};
			H.ask(H.ask_ctx, &w);
		}
		pthread_mutex_unlock(&H.lock);
		for (int i = 0; i < ngone; i++) http_answer(gone[i], 499, "", "", 0);
	}
	return NULL;
}

#define FIRST_CALL ((void *)&H) /* *state after the headers were seen */

static struct MHD_Response *text_response(const char *text, const char *type)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text,
								 MHD_RESPMEM_PERSISTENT);
	if (r) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	return r;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *text)
{
	struct MHD_Response *r = text_response(text, "text/plain; charset=utf-8");
	if (!r) return MHD_NO;
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	enum MHD_Result rc = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return rc;
}

/* A query argument that must be a decimal number in 0 .. max (absent: *out = 0): false if not. */
static bool number_arg(struct MHD_Connection *c, const char *name, unsigned long max, unsigned long *out)
{
	const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
	*out = 0;
	if (!v) return true;
	if (!*v || strlen(v) > 10 || strspn(v, "0123456789") != strlen(v)) return false;
	*out = strtoul(v, NULL, 10);
	return *out <= max;
}

/* /debug/pprof/heap and /allocs: held until the daemon answers (http_answer). */
static enum MHD_Result ask_daemon(struct MHD_Connection *c, int kind, void **state)
{
	unsigned long pid, seconds;
	if (!number_arg(c, "pid", 4194304, &pid))
		return reply(c, MHD_HTTP_BAD_REQUEST, "pid=N: N a process id\n");
	if (!number_arg(c, "seconds", HTTP_MAX_SECONDS, &seconds)) /* not cut silently */
		return reply(c, MHD_HTTP_BAD_REQUEST, "seconds=N: N a whole number of seconds, at most 60\n");
	pthread_mutex_lock(&H.lock);
	struct pending *p = NULL;
	const struct conn *k = conn_of(c);
	struct addr_key from = k ? k->addr : addr_key_of(NULL);
	int windows = 0, mine = 0;
	for (int i = 0; i < HTTP_MAX_HELD; i++) {
		if (!H.held[i].used && !p) p = &H.held[i];
		if (H.held[i].used && H.held[i].seconds) {
			windows++;
			mine += same_addr(&H.held[i].addr, &from);
		}
	}
	if (seconds && mine >= HTTP_MAX_WINDOWS_PER_ADDRESS) { /* one client took them all */
		pthread_mutex_unlock(&H.lock);
		return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "too many windows (?seconds=N) from your "
			     "address at once\n");
	}
	if (seconds && windows >= HTTP_MAX_WINDOWS) {
		pthread_mutex_unlock(&H.lock);
		return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "too many windows (?seconds=N) at once\n");
	}
	if (!p || !H.ask) {
		pthread_mutex_unlock(&H.lock);
		return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, H.ask ? "too many profiles asked for at once\n"
						: "not ready yet: try again in a second\n");
	}
	const union MHD_ConnectionInfo *fdi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	*p = (struct pending){.used = true, .id = ++H.next_id, .conn = c, .seconds = (unsigned)seconds,
			      .addr = from,
			      .fd = fdi ? fdi->connect_fd : -1};
	*state = p;
	struct http_want w = {.id = p->id, .kind = kind, .pid = (int)pid, .all_users = H.token[0] != 0,
			      .seconds = seconds > HTTP_MAX_SECONDS ? HTTP_MAX_SECONDS : (unsigned)seconds};
	MHD_suspend_connection(c);
	int rc = H.ask(H.ask_ctx, &w);
	pthread_mutex_unlock(&H.lock);
	if (rc < 0) http_answer(w.id, MHD_HTTP_SERVICE_UNAVAILABLE, "", "the daemon is busy\n", 19);
	return MHD_YES;
}

static bool is_held(void *state)
{
	return state >= (void *)&H.held[0] && state < (void *)&H.held[HTTP_MAX_HELD];
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **state)
{
	(void)cls, (void)version, (void)upload;
	if (is_held(*state)) { /* resumed: the daemon answered */
		struct pending *p = *state;
		pthread_mutex_lock(&H.lock);
		enum MHD_Result rc = p->resp ? MHD_queue_response(c, p->status, p->resp) : MHD_NO;
		pthread_mutex_unlock(&H.lock);
		return rc;
	}
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
	if (!*state) { /* first call: the headers; a body would follow in later calls */
		*state = FIRST_CALL;
		request_began(c);
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if ((cl && strcmp(cl, "0") != 0) ||
		    MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
			return reply(c, MHD_HTTP_CONTENT_TOO_LARGE, "no request body\n");
		return MHD_YES;
	}
	if (*upload_size) return reply(c, MHD_HTTP_CONTENT_TOO_LARGE, "no request body\n");
	/* /healthz tells nothing but that memtraced lives: a health check needs no token */
	if (H.token[0] && strcmp(url, "/healthz") != 0 && !authorized(c)) {
		struct MHD_Response *r = text_response("this server needs its token: Authorization: Bearer TOKEN\n",
						       "text/plain; charset=utf-8");
		if (!r) return MHD_NO;
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"memtraced\"");
		enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_UNAUTHORIZED, r);
		MHD_destroy_response(r);
		return rc;
	}
	if (strcmp(url, "/debug/pprof/heap") == 0) return ask_daemon(c, HTTP_WANT_HEAP, state);
	if (strcmp(url, "/debug/pprof/allocs") == 0) return ask_daemon(c, HTTP_WANT_ALLOCS, state);
	struct MHD_Response *r = NULL;
	pthread_mutex_lock(&H.lock);
	for (int i = 0; i < H.n && !r; i++)
		if (strcmp(H.docs[i].path, url) == 0) r = H.docs[i].resp;
	/* taken while locked: a publish may replace it meanwhile, the queue keeps it alive */
	enum MHD_Result rc = r ? MHD_queue_response(c, MHD_HTTP_OK, r) : MHD_NO;
	pthread_mutex_unlock(&H.lock);
	return r ? rc : reply(c, MHD_HTTP_NOT_FOUND, "no such page: see /\n");
}

/* The request is done (answered, or its client went away): its slot is free again. */
static void on_completed(void *cls, struct MHD_Connection *c, void **state,
			 enum MHD_RequestTerminationCode why)
{
	(void)cls, (void)why;
	pthread_mutex_lock(&H.lock);
	struct conn *k = conn_of(c);
	if (k && k->used) { /* kept alive: its next request has its own time */
		k->in_request = false;
		k->due_ns = now_ns() + REQUEST_NS;
	}
	if (!is_held(*state)) {
		pthread_mutex_unlock(&H.lock);
		return;
	}
	struct pending *p = *state;
	if (p->resp) MHD_destroy_response(p->resp);
	*p = (struct pending){0};
	pthread_mutex_unlock(&H.lock);
	*state = NULL;
}

void http_set_asker(http_ask_fn fn, void *ctx)
{
	pthread_mutex_lock(&H.lock);
	H.ask = fn;
	H.ask_ctx = ctx;
	pthread_mutex_unlock(&H.lock);
}

void http_answer(uint32_t id, unsigned status, const char *type, const void *bytes, size_t len)
{
	pthread_mutex_lock(&H.lock);
	for (int i = 0; i < HTTP_MAX_HELD; i++) {
		struct pending *p = &H.held[i];
		if (!p->used || p->answered || p->id != id) continue;
		p->resp = MHD_create_response_from_buffer(len, (void *)bytes, MHD_RESPMEM_MUST_COPY);
		if (p->resp && p->cancelled) MHD_add_response_header(p->resp, MHD_HTTP_HEADER_CONNECTION, "close");
		else if (p->resp) {
			MHD_add_response_header(p->resp, MHD_HTTP_HEADER_CONTENT_TYPE,
						status == MHD_HTTP_OK && type[0] ? type : "text/plain; charset=utf-8");
			MHD_add_response_header(p->resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
			if (status == MHD_HTTP_OK)
				MHD_add_response_header(p->resp, MHD_HTTP_HEADER_CONTENT_DISPOSITION,
							"attachment; filename=\"profile\"");
		}
		p->status = status;
		p->answered = true;
		MHD_resume_connection(p->conn);
		break;
	}
	pthread_mutex_unlock(&H.lock);
}

void http_publish(const char *path, const char *type, const void *bytes, size_t len)
{
	struct MHD_Response *r = NULL;
	if (len || (type && type[0])) {
		r = MHD_create_response_from_buffer(len, (void *)bytes, MHD_RESPMEM_MUST_COPY);
		if (!r) return;
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
		MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	}
	pthread_mutex_lock(&H.lock);
	int i = 0;
	while (i < H.n && strcmp(H.docs[i].path, path) != 0) i++;
	if (i == H.n && r && H.n < HTTP_MAX_DOCS) {
		snprintf(H.docs[i].path, sizeof H.docs[i].path, "%s", path);
		H.docs[i].resp = NULL;
		H.n++;
	}
	if (i < H.n) {
		if (H.docs[i].resp) MHD_destroy_response(H.docs[i].resp);
		H.docs[i].resp = r;
		r = NULL;
		if (!H.docs[i].resp) H.docs[i] = H.docs[--H.n]; /* removed */
	}
	pthread_mutex_unlock(&H.lock);
	if (r) MHD_destroy_response(r); /* no room */
}

/* Does listen_fd listen on a loopback address (127.0.0.0/8, ::1)? */
static bool loopback(int listen_fd)
{
	struct sockaddr_storage a;
	socklen_t len = sizeof a;
	if (getsockname(listen_fd, (struct sockaddr *)&a, &len) != 0) return false;
	if (a.ss_family == AF_INET)
		return (ntohl(((struct sockaddr_in *)&a)->sin_addr.s_addr) >> 24) == 127;
	if (a.ss_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&a)->sin6_addr);
	return false;
}

/* A new client, before libmicrohttpd takes it: refused when its address (loopback as one)
 * has HTTP_MAX_PER_ADDRESS connections already. libmicrohttpd's own limit counted each of
 * 127.0.0.0/8 apart. Its one polling thread accepts: the count cannot move meanwhile. */
static enum MHD_Result accept_policy(void *cls, const struct sockaddr *sa, socklen_t len)
{
	(void)cls;
	(void)len;
	if (!H.per_address) return MHD_YES;
	struct addr_key from = addr_key_of(sa);
	unsigned n = 0;
	pthread_mutex_lock(&H.lock);
	for (size_t i = 0; i < sizeof H.conns / sizeof H.conns[0]; i++)
		n += H.conns[i].used && same_addr(&H.conns[i].addr, &from);
	pthread_mutex_unlock(&H.lock);
	return n < H.per_address ? MHD_YES : MHD_NO;
}

int http_start(int listen_fd, char *err, size_t errlen)
{
	/* A limit per address where clients come from their own addresses; on loopback every
	 * local client shares 127.0.0.1 with the scraper, and a limit there would let one of
	 * them lock the scraper out (docs/security.md: the token and the request deadline). */
	H.per_address = loopback(listen_fd) ? 0 : HTTP_MAX_PER_ADDRESS;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
			 MHD_ALLOW_SUSPEND_RESUME;
	H.mhd = MHD_start_daemon(flags, 0, accept_policy, NULL, on_request, NULL,
				 MHD_OPTION_LISTEN_SOCKET, (MHD_socket)listen_fd,
				 MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
				 MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
				 MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNECTIONS,
				 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
				 /* request line, headers and buffers of one connection */
				 MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384,
				 MHD_OPTION_END);
	if (!H.mhd) {
		snprintf(err, errlen, "libmicrohttpd would not start on the socket");
		return -1;
	}
	if (pthread_create(&H.watch, NULL, watch, NULL) != 0) {
		snprintf(err, errlen, "cannot start the HTTP server's watch thread");
		return -1;
	}
	return 0;
}
