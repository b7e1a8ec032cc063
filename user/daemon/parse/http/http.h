/* The HTTP server of a host-wide memtraced (--listen), in the unprivileged parser: it serves
 * documents the daemon rendered and published (/metrics, /), and holds the requests for
 * profiles (/debug/pprof/heap, /allocs) while it asks the daemon for them with a fixed-size
 * want (kind, pid, seconds), checked numbers only: the daemon never sees a request (issue 24;
 * docs/security.md). The daemon opened
 * the listening socket and handed it over. libmicrohttpd parses the requests, on threads of
 * its own: GET and HEAD only, no request body, bounded URLs and headers, a bounded number of
 * connections that time out, so a slow or hostile client cannot hold it. */
#ifndef MEMTRACED_HTTP_H
#define MEMTRACED_HTTP_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_MAX_DOCS 32
#define HTTP_PATH_LEN 64
#define HTTP_TYPE_LEN 64
#define HTTP_MAX_CONNECTIONS 256 /* at most 16 KiB each: 4 MiB */
#define HTTP_MAX_HELD 8        /* profile requests held at once (WANT_MAX_PENDING) */
#define HTTP_MAX_WINDOWS 4     /* of them with ?seconds=N: the others are left to profiles now */
#define HTTP_MAX_WINDOWS_PER_ADDRESS 2 /* of those from one address (loopback as one) */
#define HTTP_MAX_SECONDS 60    /* ?seconds=N is cut to it (WANT_MAX_SECONDS) */
#define HTTP_REQUEST_SECONDS 5 /* a request's line and headers must all come within it (from
				  the connection, or the last answer on it): a slow client
				  (slowloris) trickling bytes is cut */
#define HTTP_MAX_PER_ADDRESS 64 /* connections from one address (all of loopback as one), on
				   a listener that is not loopback (there every local client is
				   127.0.0.1) */

enum { HTTP_WANT_HEAP, HTTP_WANT_ALLOCS, HTTP_WANT_CANCEL /* id's client is gone */ };
struct http_want {
	uint32_t id;
	int kind;         /* HTTP_WANT_* */
	int pid;          /* 0: all */
	unsigned seconds; /* 0: since attach */
	bool all_users;   /* the request carried the token: root's processes too */
};
/* Asks the daemon for a profile (called with the server's lock held: it must not block
 * long): 0, or -1 when it cannot now (the request gets 503). */
typedef int (*http_ask_fn)(void *ctx, const struct http_want *w);

/* Serves on listen_fd (taken over). 0, or -1 with a message. */
int http_start(int listen_fd, char *err, size_t errlen);
/* The document at path is now bytes[0..len) of content type; len 0 with an empty type
 * removes it. Thread-safe. */
void http_publish(const char *path, const char *type, const void *bytes, size_t len);

/* --listen-token: every request must carry "Authorization: Bearer TOKEN" (else 401), and
 * profiles then cover root's processes too; without one they leave them out. Before
 * http_start. */
void http_set_token(const char *token);

/* Where profile requests go; until it is set they get 503. */
void http_set_asker(http_ask_fn fn, void *ctx);
/* The daemon's answer to want id: status (200: bytes of type; else a line of text). An id no
 * longer held (its client left) is ignored. Thread-safe. */
void http_answer(uint32_t id, unsigned status, const char *type, const void *bytes, size_t len);

#endif
