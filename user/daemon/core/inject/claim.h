/* One --inject session per process (issue 34): two memtraced placing and driving the sampler
 * of one process would each restore the GOT under the other. A session claims its target
 * first; the claim is an abstract unix socket named after the target (its pid and start
 * time), bound and listened on by the memtraced that holds it, so the kernel drops it when
 * that memtraced exits, however it ends, and a second one learns its PID (SO_PEERCRED). */
#ifndef MEMTRACED_INJECT_CLAIM_H
#define MEMTRACED_INJECT_CLAIM_H
#include <stddef.h>
#include <sys/types.h>

/* The claim's fd (close it to give the target up), or -1 with a message: held by memtraced
 * PID N already (*holder = N), or the claim could not be made (*holder = 0). */
int inject_claim(pid_t pid, pid_t *holder, char *err, size_t errlen);
#endif
