/* The published documents and the libmicrohttpd daemon that serves them (http.h). */
#include "http.h"

#include <microhttpd.h>
#include <pthread.h>
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

/* A request held (suspended) until the daemon answers it. */
struct pending {
	bool used, answered;
	uint32_t id;
	struct MHD_Connection *conn;
	unsigned status;
	struct MHD_Response *resp;
};

static struct {
	pthread_mutex_t lock;
	struct doc docs[HTTP_MAX_DOCS];
	int n;
	struct MHD_Daemon *mhd;
	struct pending held[HTTP_MAX_HELD];
	uint32_t next_id;
	http_ask_fn ask;
	void *ask_ctx;
} H = {.lock = PTHREAD_MUTEX_INITIALIZER};

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
	if (!number_arg(c, "seconds", 4294967295UL, &seconds))
		return reply(c, MHD_HTTP_BAD_REQUEST, "seconds=N: N a whole number of seconds\n");
	pthread_mutex_lock(&H.lock);
	struct pending *p = NULL;
	for (int i = 0; i < HTTP_MAX_HELD && !p; i++)
		if (!H.held[i].used) p = &H.held[i];
	if (!p || !H.ask) {
		pthread_mutex_unlock(&H.lock);
		return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, H.ask ? "too many profiles asked for at once\n"
						: "not ready yet: try again in a second\n");
	}
	*p = (struct pending){.used = true, .id = ++H.next_id, .conn = c};
	*state = p;
	struct http_want w = {.id = p->id, .kind = kind, .pid = (int)pid,
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
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if ((cl && strcmp(cl, "0") != 0) ||
		    MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
			return reply(c, MHD_HTTP_CONTENT_TOO_LARGE, "no request body\n");
		return MHD_YES;
	}
	if (*upload_size) return reply(c, MHD_HTTP_CONTENT_TOO_LARGE, "no request body\n");
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
	(void)cls, (void)c, (void)why;
	if (!is_held(*state)) return;
	struct pending *p = *state;
	pthread_mutex_lock(&H.lock);
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
		if (p->resp) {
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

int http_start(int listen_fd, char *err, size_t errlen)
{
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
			 MHD_ALLOW_SUSPEND_RESUME;
	H.mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL,
				 MHD_OPTION_LISTEN_SOCKET, (MHD_socket)listen_fd,
				 MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
				 /* no limit per address: a scraper on this host shares 127.0.0.1
				  * with whatever else connects; the total and the timeout bound them */
				 MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNECTIONS,
				 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
				 /* request line, headers and buffers of one connection */
				 MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384,
				 MHD_OPTION_END);
	if (!H.mhd) {
		snprintf(err, errlen, "libmicrohttpd would not start on the socket");
		return -1;
	}
	return 0;
}
