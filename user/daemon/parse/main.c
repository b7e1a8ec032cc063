/* memtraced-parse: the unprivileged parser (serve/serve.h). memtraced starts it at its own
 * start (core/parser/parser.h) as `memtraced-parse --parser DAEMON_PID`, its control socket on
 * fd 3; it is of no use started any other way. Everything it links parses what a target
 * controls; nothing of it runs in the privileged daemon (tests/test_layout.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/protocol.h"
#include "serve/serve.h"

int main(int argc, char **argv)
{
	char *end = NULL;
	bool http = argc == 4 && strcmp(argv[3], PARSER_ARG_HTTP) == 0;
	long daemon = (argc == 3 || http) && strcmp(argv[1], PARSER_ARG) == 0 ? strtol(argv[2], &end, 10) : 0;
	if (!end || *end || daemon <= 1) {
		fprintf(stderr, "memtraced-parse: memtraced's unprivileged parser, started by memtraced "
			"only (memtraced-parse " PARSER_ARG " DAEMON_PID [" PARSER_ARG_HTTP "], its socket on fd %d)\n",
			PARSER_CTL_FD);
		return 2;
	}
	parser_serve(PARSER_CTL_FD, (pid_t)daemon, http);
	return 0;
}
