/* Unit tests of daemon code that asks the unprivileged parser (parser/parser.h): the test
 * binary is re-executed as the parser (it links both sides; memtraced starts memtraced-parse). Call first thing in main. */
#ifndef MEMTRACED_TEST_WITH_PARSER_H
#define MEMTRACED_TEST_WITH_PARSER_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parser/parser.h"
#include "protocol/protocol.h"
#include "serve/serve.h"

static inline void with_parser(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], PARSER_ARG) == 0) parser_serve(PARSER_CTL_FD, atoi(argv[2]), false);
	if (geteuid() != 0) return; /* it confines itself as nobody: root only */
	char err[512];
	parser_set_exe("/proc/self/exe");
	if (parser_start(false, err, sizeof err) < 0) {
		printf("FAIL parser_started: %s\n", err);
		exit(1);
	}
	atexit(parser_stop);
}
#endif
