/* The main loop's one wait (see loop_wake.h): an eventfd that every producer writes to. */
#include "loop_wake.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

static int wake_fd = -1;

/* Before main: no thread races its creation, and loop_wake stays async-signal-safe. */
__attribute__((constructor)) static void open_fd(void)
{
	wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

void loop_wake(void)
{
	if (wake_fd < 0) return; /* no eventfd: the wait's timeout still bounds the delay */
	uint64_t one = 1;
	int saved = errno;
	ssize_t w = write(wake_fd, &one, sizeof one); /* EAGAIN only at 2^64-2 pending */
	(void)w;
	errno = saved;
}

void loop_wait(const int *fds, int nfds, int timeout_ms, bool *ready)
{
	struct pollfd p[1 + nfds];
	int at[1 + nfds]; /* p[k] is fds[at[k]] (-1: the wake) */
	int n = 0;
	if (wake_fd >= 0) at[n] = -1, p[n++] = (struct pollfd){.fd = wake_fd, .events = POLLIN};
	for (int i = 0; i < nfds; i++) {
		ready[i] = false;
		if (fds[i] >= 0) at[n] = i, p[n++] = (struct pollfd){.fd = fds[i], .events = POLLIN};
	}
	if (n == 0) {
		usleep((useconds_t)timeout_ms * 1000);
		return;
	}
	if (poll(p, (nfds_t)n, timeout_ms) <= 0) return;
	for (int k = 0; k < n; k++) {
		if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
		if (at[k] >= 0) {
			ready[at[k]] = true;
		} else {
			uint64_t v;
			ssize_t r = read(wake_fd, &v, sizeof v); /* resets it: the next wait sleeps */
			(void)r;
		}
	}
}
