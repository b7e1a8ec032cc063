/* The published documents and the libmicrohttpd daemon that serves them (http.h). */
#include "http.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct doc {
	char path[HTTP_PATH_LEN], type[HTTP_TYPE_LEN];
	struct MHD_Response *resp; /* reference-counted by libmicrohttpd: a request in flight
				      keeps the one it took */
};

static struct {
	pthread_mutex_t lock;
	struct doc docs[HTTP_MAX_DOCS];
	int n;
	struct MHD_Daemon *mhd;
} H = {.lock = PTHREAD_MUTEX_INITIALIZER};

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

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **state)
{
	(void)cls, (void)version, (void)upload;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
	if (!*state) { /* first call: the headers; a body would follow in later calls */
		*state = (void *)1;
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if ((cl && strcmp(cl, "0") != 0) ||
		    MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
			return reply(c, MHD_HTTP_CONTENT_TOO_LARGE, "no request body\n");
		return MHD_YES;
	}
	if (*upload_size) return reply(c, MHD_HTTP_CONTENT_TOO_LARGE, "no request body\n");
	struct MHD_Response *r = NULL;
	pthread_mutex_lock(&H.lock);
	for (int i = 0; i < H.n && !r; i++)
		if (strcmp(H.docs[i].path, url) == 0) r = H.docs[i].resp;
	/* taken while locked: a publish may replace it meanwhile, the queue keeps it alive */
	enum MHD_Result rc = r ? MHD_queue_response(c, MHD_HTTP_OK, r) : MHD_NO;
	pthread_mutex_unlock(&H.lock);
	return r ? rc : reply(c, MHD_HTTP_NOT_FOUND, "no such page: see /\n");
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
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	H.mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL,
				 MHD_OPTION_LISTEN_SOCKET, (MHD_socket)listen_fd,
				 MHD_OPTION_CONNECTION_LIMIT, (unsigned)32,
				 MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)8,
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
