/* One --inject session per process (claim.h). */
#include "claim.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "door/door.h"

/* The target's start time (/proc/PID/stat, field 22): with the pid, names this process and no
 * later one that reuses its pid. */
static unsigned long long start_time(pid_t pid)
{
	char buf[1024] = "";
	FILE *f = door_proc_fopen(pid, "stat");
	if (!f) return 0;
	bool ok = fgets(buf, sizeof buf, f) != NULL;
	fclose(f);
	const char *p = ok ? strrchr(buf, ')') : NULL;
	unsigned long long t = 0;
	/* after the command: state (3) ... starttime (22) */
	if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
			"%*d %*d %llu", &t) != 1)
		t = 0;
	return t;
}

int inject_claim(pid_t pid, pid_t *holder, char *err, size_t errlen)
{
	*holder = 0;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	/* abstract: a leading NUL, no file */
	int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "memtraced-inject/%d/%llu", (int)pid,
			 start_time(pid));
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "cannot claim PID %d for --inject: %s", (int)pid, strerror(errno));
		return -1;
	}
	if (bind(fd, (struct sockaddr *)&a, len) == 0 && listen(fd, 4) == 0) return fd;
	int e = errno;
	close(fd);
	if (e != EADDRINUSE) {
		snprintf(err, errlen, "cannot claim PID %d for --inject: %s", (int)pid, strerror(e));
		return -1;
	}
	/* who holds it: the credentials of the listening socket's owner */
	int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct ucred cred = {0};
	socklen_t clen = sizeof cred;
	if (c >= 0 && connect(c, (struct sockaddr *)&a, len) == 0 &&
	    getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0)
		*holder = cred.pid;
	if (c >= 0) close(c);
	if (*holder > 0)
		snprintf(err, errlen, "PID %d is traced with --inject by memtraced PID %d already (one "
			 "--inject session per process)", (int)pid, (int)*holder);
	else
		snprintf(err, errlen, "PID %d is traced with --inject by another memtraced already (one "
			 "--inject session per process)", (int)pid);
	*holder = *holder > 0 ? *holder : -1;
	return -1;
}
