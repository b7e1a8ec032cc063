/* The parser's side of the protocol (shared/protocol/protocol.h): memtraced-parse, started
 * by the daemon (core/parser/parser.h) with its control socket on PARSER_CTL_FD. It confines
 * itself, then serves each channel the daemon sends on a thread of its own: allocator
 * discovery, an object's facts, a process's unwinder. Never returns. */
#ifndef MEMTRACED_SERVE_H
#define MEMTRACED_SERVE_H
#include <stdbool.h>
#include <sys/types.h>

/* serving_http: --listen, the seccomp filter lets it serve HTTP on a socket it is given. */
void parser_serve(int ctl_fd, pid_t daemon, bool serving_http);

#endif
