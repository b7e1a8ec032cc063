/* The parser's confinement: no capabilities, uid/gid nobody, no_new_privs, and a seccomp
 * filter that kills it on any system call it has no use for; the calls that open, stat or
 * read links are sent to the daemon's broker (core/broker/broker.h) through seccomp's user
 * notification. */
#ifndef MEMTRACED_CONFINE_H
#define MEMTRACED_CONFINE_H
#include <stdbool.h>
#include <stddef.h>

/* Files the parser may hold open at once (RLIMIT_NOFILE). */
#define PARSER_MAX_FILES 16384

/* In the parser (single-threaded at that point): drops every
 * privilege and installs the seccomp filter. Returns the filter's notification fd (to be sent
 * to the daemon, then closed here), or -1 with a message in err. */
int sandbox_confine(bool serving_http, char *err, size_t errlen);

#endif
