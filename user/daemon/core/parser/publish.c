/* What the daemon hands to the parser's HTTP server (parser.h): the listening socket, then the
 * documents it renders, and the profiles the server asks for. The server is the parser's: no
 * request reaches the daemon, only a fixed-size want whose every field is checked here. */
#include "parser.h"
#include "protocol/protocol.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static struct pchan *pub_chan;

/* Kept for a restarted parser (parser_relisten): the socket (the daemon never accepts on it)
 * and the token. */
static int kept_fd = -1;
static char kept_token[PARSER_TOKEN_MAX + 1];
static bool have_token;

static int hand_over(int fd, const char *token, char *err, size_t errlen)
{
	if (token) { /* first: the server starts with it (a memfd: bytes, not a name) */
		int t = memfd_create("memtraced-token", MFD_CLOEXEC);
		size_t n = strlen(token);
		bool sent = t >= 0 && write(t, token, n) == (ssize_t)n && lseek(t, 0, SEEK_SET) == 0 &&
			    parser_send_fd(t, PARSER_TAG_TOKEN) == 0;
		if (t >= 0) close(t);
		if (!sent) {
			snprintf(err, errlen, "cannot hand the token to the parser");
			return -1;
		}
	}
	if (parser_send_fd(fd, PARSER_TAG_LISTEN) < 0) {
		snprintf(err, errlen, "cannot hand the listening socket to the parser");
		return -1;
	}
	return 0;
}

int parser_listen(int fd, const char *token, char *err, size_t errlen)
{
	pchan_close(pub_chan); /* a reload's new server (a new parser): a new channel */
	pub_chan = NULL;
	if (kept_fd >= 0) close(kept_fd); /* a reload's new socket replaces it */
	kept_fd = -1;
	have_token = false;
	if (fd < 0) return 0; /* a reload that serves no more */
	if (token && strlen(token) > PARSER_TOKEN_MAX) {
		snprintf(err, errlen, "the token is too long");
		close(fd);
		return -1;
	}
	if (hand_over(fd, token, err, errlen) < 0) {
		close(fd);
		return -1;
	}
	kept_fd = fd;
	have_token = token != NULL;
	if (token) snprintf(kept_token, sizeof kept_token, "%s", token);
	return 0;
}

int parser_relisten(char *err, size_t errlen)
{
	pchan_close(pub_chan); /* the old parser's: broken */
	pub_chan = NULL;
	if (kept_fd < 0) return 0; /* not serving */
	return hand_over(kept_fd, have_token ? kept_token : NULL, err, errlen);
}

int parser_publish(const char *path, const char *type, const void *bytes, size_t len)
{
	char err[256];
	if (!pub_chan && !(pub_chan = pchan_open(err, sizeof err))) return -1;
	struct pq_publish q;
	memset(&q, 0, sizeof q);
	snprintf(q.path, sizeof q.path, "%s", path);
	snprintf(q.type, sizeof q.type, "%s", type);
	q.len = (uint32_t)len;
	/* never waits: a document not handed over now is replaced by the next one */
	return pchan_try_send(pub_chan, PQ_PUBLISH, &q, sizeof q, bytes, len);
}

int parser_next_want(struct pr_want *w)
{
	if (!pub_chan) return 0;
	size_t len = 0;
	int type = pchan_try_recv(pub_chan, w, sizeof *w, &len);
	if (type <= 0) return type;
	if (type != PR_WANT || len != sizeof *w || (w->kind != WANT_HEAP && w->kind != WANT_ALLOCS && w->kind != WANT_CANCEL) ||
	    w->pid < 0 || w->seconds > WANT_MAX_SECONDS || w->all_users > 1) {
		pchan_break(pub_chan, "it asked for a profile that cannot be (bad kind, pid or seconds)");
		return -1;
	}
	return 1;
}

int parser_answer(uint32_t id, unsigned status, const char *type, const void *bytes, size_t len)
{
	if (!pub_chan) return -1;
	struct pq_answer q;
	memset(&q, 0, sizeof q);
	q.id = id;
	q.status = status;
	snprintf(q.type, sizeof q.type, "%s", type);
	q.len = (uint32_t)len;
	if (sizeof q + len > shm_ring_max_payload(&pub_chan->req)) return -1;
	return pchan_send(pub_chan, PQ_ANSWER, &q, sizeof q, bytes, len);
}
