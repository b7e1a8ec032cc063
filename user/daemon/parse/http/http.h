/* The HTTP server of a host-wide memtraced (--listen), in the unprivileged parser: it serves
 * documents the daemon rendered and published (/metrics, /), never parses anything for the
 * daemon, and the daemon never sees a request (issue 24; docs/security.md). The daemon opened
 * the listening socket and handed it over. libmicrohttpd parses the requests, on threads of
 * its own: GET and HEAD only, no request body, bounded URLs and headers, a bounded number of
 * connections that time out, so a slow or hostile client cannot hold it. */
#ifndef MEMTRACED_HTTP_H
#define MEMTRACED_HTTP_H
#include <stddef.h>

#define HTTP_MAX_DOCS 32
#define HTTP_PATH_LEN 64
#define HTTP_TYPE_LEN 64

/* Serves on listen_fd (taken over). 0, or -1 with a message. */
int http_start(int listen_fd, char *err, size_t errlen);
/* The document at path is now bytes[0..len) of content type; len 0 with an empty type
 * removes it. Thread-safe. */
void http_publish(const char *path, const char *type, const void *bytes, size_t len);

#endif
