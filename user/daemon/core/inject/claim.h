/* One --inject session per process (issue 34): two memtraced placing and driving the sampler
 * of one process would each restore the GOT under the other. A session claims its target
 * first; the claim is a lock (an open file description's, F_OFD_SETLK) on a file named after
 * the target (its pid and start time) in root's CLAIM_DIR, which only root may write: the
 * kernel drops it when that memtraced exits, however it ends, and the file holds the
 * holder's pid for a second one's message. It used to be an abstract unix socket, which any
 * process of the network namespace could bind first (issue 46: a user who owns nothing made
 * root's --inject fail, and its full backlog blocked root's connect). */
#ifndef MEMTRACED_INJECT_CLAIM_H
#define MEMTRACED_INJECT_CLAIM_H
#include <stddef.h>
#include <sys/types.h>

/* The claim's fd (close it to give the target up), or -1 with a message: held by memtraced
 * PID N already (*holder = N), or the claim could not be made (*holder = 0). */
int inject_claim(pid_t pid, pid_t *holder, char *err, size_t errlen);
/* Gives the claim up: its file removed, its lock dropped (a claimer that raced us takes the
 * next file: inject_claim checks that its lock is on the file at the name). */
void inject_claim_release(int fd);

#define CLAIM_DIR "/run/memtraced"
#endif
