/* The main loop's one wait. It used to wait on each traced process's record queue in turn
 * (10 ms each): with 64 idle processes a pass took 640 ms, and a process exec'ing meanwhile
 * was picked up that late (issue 36). Now it takes what every queue holds without waiting,
 * then sleeps once, here, until something comes: a queue that was empty gets a record, a
 * process is held at an exec or fork, or another file descriptor (the lifecycle ring, the
 * parser's socket) is readable. */
#ifndef MEMTRACED_LOOP_WAKE_H
#define MEMTRACED_LOOP_WAKE_H

#include <stdbool.h>

/* From any thread, async-signal-safe: the main loop's wait returns now. */
void loop_wake(void);
/* The main loop: waits up to timeout_ms for loop_wake() or one of fds (-1 entries are
 * skipped) becoming readable, and sets ready[i] for those readable. Returns at once when a
 * wake came since the last wait. */
void loop_wait(const int *fds, int nfds, int timeout_ms, bool *ready);

#endif
