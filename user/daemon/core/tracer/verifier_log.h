/* The reason in a BPF verifier's log (verifier_log.c). */
#ifndef MEMTRACED_VERIFIER_LOG_H
#define MEMTRACED_VERIFIER_LOG_H

#include <stddef.h>

/* The verifier's reason for refusing a program, from libbpf's load messages (log): the last
 * line of the program's log that is not one of the verifier's statistics ("processed 84
 * insns ...", "verification time", "stack depth"), which end every log and say nothing of the
 * cause. "" when the log holds none. */
void verifier_reason(const char *log, char *out, size_t outlen);

#endif
