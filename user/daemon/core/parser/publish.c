/* What the daemon hands to the parser's HTTP server (parser.h): the listening socket, then the
 * documents it renders. The server is the parser's: no request reaches the daemon. */
#include "parser.h"
#include "protocol/protocol.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static struct pchan *pub_chan;

int parser_listen(int fd, char *err, size_t errlen)
{
	if (parser_send_fd(fd, PARSER_TAG_LISTEN) < 0) {
		snprintf(err, errlen, "cannot hand the listening socket to the parser");
		return -1;
	}
	close(fd); /* the parser's now: the daemon holds no socket a client reaches */
	return 0;
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
