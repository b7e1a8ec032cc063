/* Output files that a planted link or file cannot steer (see out_file.h). */
#include "out_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (err && errlen) vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* The user who ran sudo (its uid, gid), or -1: a file or directory of theirs is theirs to have
 * us write. The variable is root's own environment: only who could run root can set it. */
static long sudo_id(const char *name)
{
	const char *s = getenv(name);
	if (!s || !*s) return -1;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	return errno || *end || v < 0 ? -1 : v;
}

static int ours(uid_t uid)
{
	long su = sudo_id("SUDO_UID");
	return uid == geteuid() || uid == 0 || (su >= 0 && (uid_t)su == uid);
}

/* Our own descriptors under a name: nothing another user can plant. */
static int own_fd_name(const char *path)
{
	if (!strcmp(path, "/dev/stdout") || !strcmp(path, "/dev/stderr")) return 1;
	const char *n = !strncmp(path, "/dev/fd/", 8) ? path + 8
		      : !strncmp(path, "/proc/self/fd/", 14) ? path + 14 : NULL;
	if (!n || !*n) return 0;
	for (; *n; n++)
		if (*n < '0' || *n > '9') return 0;
	return 1;
}

/* Run as root: may any user other than root (and the sudo user) write in the directory? */
static int dir_unsafe(int dirfd, const char *dir, const char *path, const char *what, char *err,
		      size_t errlen)
{
	struct stat st;
	if (fstat(dirfd, &st) < 0)
		return fail(err, errlen, "cannot write the %s '%.3000s': its directory: %s", what, path,
			    strerror(errno));
	if (geteuid() != 0 || (st.st_mode & S_ISVTX)) return 0; /* sticky: names are their owner's */
	long sg = sudo_id("SUDO_GID");
	int group_ok = st.st_gid == 0 || (sg >= 0 && (gid_t)sg == st.st_gid);
	if (!ours(st.st_uid))
		return fail(err, errlen, "will not write the %s '%.3000s' as root: its directory %.1000s "
			    "belongs to uid %u, who could put a link there to a file of root's; give a "
			    "path in a directory of root's (or of the user running sudo)", what, path,
			    dir, (unsigned)st.st_uid);
	if ((st.st_mode & S_IWOTH) || ((st.st_mode & S_IWGRP) && !group_ok))
		return fail(err, errlen, "will not write the %s '%.3000s' as root: its directory %.1000s "
			    "may be written by %s (mode %04o) and is not sticky, so another user could "
			    "put a link there to a file of root's; give a path in a directory only root "
			    "may write", what, path, dir,
			    (st.st_mode & S_IWOTH) ? "every user" : "its group", st.st_mode & 07777);
	return 0;
}

/* What is at `base` now: 0 = nothing or ours to replace, 1 = a device or FIFO of ours to
 * write as it is, -1 = refused (message). */
static int existing(int dirfd, const char *base, const char *path, const char *what, char *err,
		    size_t errlen)
{
	struct stat st;
	if (fstatat(dirfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT) return 0;
		return fail(err, errlen, "cannot write the %s '%.3000s': %s", what, path, strerror(errno));
	}
	if (S_ISLNK(st.st_mode))
		return fail(err, errlen, "will not write the %s '%.3000s': it is a symbolic link (of uid "
			    "%u); remove it or give another path", what, path, (unsigned)st.st_uid);
	if (!ours(st.st_uid))
		return fail(err, errlen, "will not write the %s '%.3000s': it exists and belongs to uid "
			    "%u; remove it or give another path", what, path, (unsigned)st.st_uid);
	if (S_ISREG(st.st_mode)) return 0;
	if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return 1;
	return fail(err, errlen, "cannot write the %s '%.3000s': not a regular file, a character "
		    "device or a FIFO", what, path);
}

int mt_out_create_temp(int dirfd, const char *base, unsigned mode, char *tmp, size_t tmplen)
{
	static unsigned counter;
	for (int attempt = 0; attempt < 100; attempt++) {
		snprintf(tmp, tmplen, ".%.200s.tmp-%d-%u", base, (int)getpid(),
			 __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
		int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (fd >= 0) {
			if (fchmod(fd, mode) < 0) { /* ours: the umask must not change the mode */
				int e = errno;
				close(fd);
				unlinkat(dirfd, tmp, 0);
				errno = e;
				return -1;
			}
			return fd;
		}
		if (errno != EEXIST) return -1;
	}
	errno = EEXIST;
	return -1;
}

int mt_path_split(const char *path, char *dir, size_t dirlen, const char **base)
{
	size_t len = strlen(path);
	if (len >= dirlen || dirlen < 2) return -1;
	memcpy(dir, path, len + 1);
	char *slash = strrchr(dir, '/');
	*base = slash ? path + (slash - dir) + 1 : path;
	if (!slash) snprintf(dir, dirlen, ".");
	else if (slash == dir) dir[1] = '\0';
	else *slash = '\0';
	return 0;
}

int mt_out_create(const char *path, unsigned mode, const char *what, char *err, size_t errlen)
{
	if (!mode) mode = 0600;
	if (!path || !*path) return fail(err, errlen, "no path for the %s", what);
	if (own_fd_name(path)) {
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return fail(err, errlen, "cannot write the %s '%.3000s': %s", what, path,
				    strerror(errno));
		return fd;
	}
	/* the directory, then the name in it: each step on the directory fd */
	char dir[4096];
	const char *base;
	if (mt_path_split(path, dir, sizeof dir, &base) < 0)
		return fail(err, errlen, "the %s's path is too long", what);
	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return fail(err, errlen, "cannot write the %s '%.3000s': not a file name", what, path);
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return fail(err, errlen, "cannot write the %s '%.3000s': its directory: %s", what, path,
			    strerror(errno));
	int fd = -1;
	if (dir_unsafe(dirfd, dir, path, what, err, errlen) < 0) goto out;
	int kind = existing(dirfd, base, path, what, err, errlen);
	if (kind < 0) goto out;
	if (kind == 1) { /* a device or FIFO of ours: written as it is, never created */
		fd = openat(dirfd, base, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (fd >= 0 && (fstat(fd, &st) < 0 || !(S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)))) {
			close(fd);
			fd = -1;
			errno = EEXIST; /* swapped under us */
		}
		if (fd < 0)
			fail(err, errlen, "cannot write the %s '%.3000s': %s", what, path, strerror(errno));
		goto out;
	}
	char tmp[300];
	fd = mt_out_create_temp(dirfd, base, mode & 07777, tmp, sizeof tmp);
	if (fd < 0) {
		fail(err, errlen, "cannot write the %s '%.3000s': %s", what, path, strerror(errno));
		goto out;
	}
	/* Replaces only a name: what was there (a rerun's trace, or a link swapped in since we
	 * looked) is unlinked, never written; an entry turned into a directory fails. */
	if (renameat(dirfd, tmp, dirfd, base) < 0) {
		int e = errno;
		unlinkat(dirfd, tmp, 0);
		close(fd);
		fd = -1;
		fail(err, errlen, "cannot write the %s '%.3000s': %s", what, path, strerror(e));
	}
out:
	close(dirfd);
	return fd;
}
