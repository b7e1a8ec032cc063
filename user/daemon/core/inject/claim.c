/* One --inject session per process (claim.h). */
#include "claim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
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

/* Root's directory of claims, made if missing; refused when another user could write in it. */
static int claim_dir(char *err, size_t errlen)
{
	if (mkdir(CLAIM_DIR, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot make %s: %s", CLAIM_DIR, strerror(errno));
		return -1;
	}
	int d = open(CLAIM_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (d < 0 || fstat(d, &st) < 0) {
		snprintf(err, errlen, "cannot open %s: %s", CLAIM_DIR, strerror(errno));
		if (d >= 0) close(d);
		return -1;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 022)) {
		snprintf(err, errlen, "%s belongs to uid %u with mode %04o: another user could take "
			 "claims there; it must be ours and written by us only", CLAIM_DIR,
			 (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
		close(d);
		return -1;
	}
	return d;
}

int inject_claim(pid_t pid, pid_t *holder, char *err, size_t errlen)
{
	*holder = 0;
	char name[96], e[512];
	snprintf(name, sizeof name, "inject-%d-%llu", (int)pid, start_time(pid));
	int d = claim_dir(e, sizeof e);
	if (d < 0) {
		snprintf(err, errlen, "cannot claim PID %d for --inject: %s", (int)pid, e);
		return -1;
	}
	for (int attempt = 0; attempt < 100; attempt++) {
		int fd = openat(d, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0) break;
		struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
		if (fcntl(fd, F_OFD_SETLK, &l) < 0) {
			int en = errno;
			char buf[24] = "";
			ssize_t n = pread(fd, buf, sizeof buf - 1, 0); /* the holder wrote its pid */
			close(fd);
			close(d);
			if (en != EAGAIN && en != EACCES) {
				snprintf(err, errlen, "cannot claim PID %d for --inject: %s", (int)pid,
					 strerror(en));
				return -1;
			}
			long h = n > 0 ? strtol(buf, NULL, 10) : 0;
			*holder = h > 0 ? (pid_t)h : -1;
			if (h > 0)
				snprintf(err, errlen, "PID %d is traced with --inject by memtraced PID %ld "
					 "already (one --inject session per process)", (int)pid, h);
			else
				snprintf(err, errlen, "PID %d is traced with --inject by another memtraced "
					 "already (one --inject session per process)", (int)pid);
			return -1;
		}
		/* a releaser unlinks before it closes: a lock on a file no longer at the name is
		 * not the claim; take the new file */
		struct stat a, b;
		if (fstat(fd, &a) == 0 && fstatat(d, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
			char buf[24];
			int n = snprintf(buf, sizeof buf, "%d\n", (int)getpid());
			if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
				/* only the message of a second memtraced loses the pid */
			}
			close(d);
			return fd;
		}
		close(fd);
	}
	int en = errno;
	close(d);
	snprintf(err, errlen, "cannot claim PID %d for --inject: %s/%s: %s", (int)pid, CLAIM_DIR, name,
		 strerror(en));
	return -1;
}

void inject_claim_release(int fd)
{
	if (fd < 0) return;
	char self[64], path[256];
	snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
	ssize_t n = readlink(self, path, sizeof path - 1);
	if (n > 0) {
		path[n] = '\0';
		if (!strncmp(path, CLAIM_DIR "/inject-", sizeof CLAIM_DIR + 7)) unlink(path);
	}
	close(fd);
}
