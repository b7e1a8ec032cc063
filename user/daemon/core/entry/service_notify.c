/* systemd's notification protocol (sd_notify(3)): a datagram of "KEY=value" lines to the
 * AF_UNIX socket $NOTIFY_SOCKET names ('@' first: an abstract name). Written here rather than
 * linked from libsystemd: the protocol is a few lines, stable and documented for reimplementing
 * (sd_notify(3), NOTES), and libsystemd would bring liblz4, libzstd, libgcrypt and libcap into
 * the root daemon and its Debian packages into the demo's set-up. */
#include "service_notify.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_un addr;
static socklen_t addr_len;
static int sock = -1;
static uint64_t watchdog_ns, last_ping_ns;
static char last_status[256];

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static void send_text(const char *text)
{
	if (sock < 0) return;
	/* a full socket buffer or a gone manager is no reason to wait or stop */
	sendto(sock, text, strlen(text), MSG_NOSIGNAL | MSG_DONTWAIT, (struct sockaddr *)&addr,
	       addr_len);
}

void service_notify_init(void)
{
	const char *path = getenv("NOTIFY_SOCKET");
	const char *wd = getenv("WATCHDOG_USEC");
	const char *wd_pid = getenv("WATCHDOG_PID");
	size_t n = path ? strlen(path) : 0;
	if (n >= 2 && n < sizeof addr.sun_path && (path[0] == '/' || path[0] == '@')) {
		addr.sun_family = AF_UNIX;
		memcpy(addr.sun_path, path, n);
		if (path[0] == '@') addr.sun_path[0] = '\0';
		addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
		sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	}
	/* the watchdog is ours unless it names another process */
	if (sock >= 0 && wd && (!wd_pid || atoi(wd_pid) == (int)getpid())) {
		unsigned long long us = strtoull(wd, NULL, 10);
		watchdog_ns = us * 1000ULL;
	}
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
}

void service_ready(const char *status)
{
	char text[300];
	snprintf(text, sizeof text, "READY=1\nSTATUS=%s", status);
	snprintf(last_status, sizeof last_status, "%s", status);
	send_text(text);
	last_ping_ns = now_ns();
}

void service_status(const char *status)
{
	if (sock < 0 || strcmp(status, last_status) == 0) return;
	snprintf(last_status, sizeof last_status, "%s", status);
	char text[300];
	snprintf(text, sizeof text, "STATUS=%s", status);
	send_text(text);
}

void service_watchdog_tick(void)
{
	if (!watchdog_ns) return;
	uint64_t now = now_ns();
	if (now - last_ping_ns < watchdog_ns / 2) return;
	last_ping_ns = now;
	send_text("WATCHDOG=1");
}

void service_stopping(void) { send_text("STOPPING=1"); }
