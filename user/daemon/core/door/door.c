/* The door to the targets' files (door.h). */
#include "door.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* "/proc/PID/NAME" into buf; false for a name that could leave the process's directory. */
static bool proc_path(char *buf, size_t len, pid_t pid, const char *name)
{
	if (pid <= 0 || !name || !*name || name[0] == '/' || strstr(name, "..")) return false;
	int n = snprintf(buf, len, "/proc/%d/%s", (int)pid, name);
	return n > 0 && (size_t)n < len;
}

FILE *door_proc_fopen(pid_t pid, const char *name_fmt, ...)
{
	char name[256], path[320];
	va_list ap;
	va_start(ap, name_fmt);
	int n = vsnprintf(name, sizeof name, name_fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof name || !proc_path(path, sizeof path, pid, name)) {
		errno = EINVAL;
		return NULL;
	}
	return fopen(path, "re");
}

bool door_proc_line(pid_t pid, const char *name, char *buf, size_t len)
{
	FILE *f = door_proc_fopen(pid, "%s", name);
	char line[4096];
	bool ok = f && fgets(line, (int)(len < sizeof line ? len : sizeof line), f);
	if (f) fclose(f);
	if (ok) {
		line[strcspn(line, "\n")] = '\0';
		snprintf(buf, len, "%s", line);
	}
	return ok;
}

int door_proc_open(pid_t pid, const char *name, bool writable)
{
	char path[320];
	if (!proc_path(path, sizeof path, pid, name) || (writable && strcmp(name, "mem") != 0)) {
		errno = EINVAL;
		return -1;
	}
	return open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
}

DIR *door_proc_opendir(pid_t pid, const char *name)
{
	char path[320];
	if (!proc_path(path, sizeof path, pid, name)) {
		errno = EINVAL;
		return NULL;
	}
	return opendir(path);
}

ssize_t door_proc_readlink(pid_t pid, const char *name, char *buf, size_t len)
{
	char path[320];
	if (!len || !proc_path(path, sizeof path, pid, name)) {
		errno = EINVAL;
		return -1;
	}
	ssize_t n = readlink(path, buf, len - 1);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

DIR *door_proc_list(void) { return opendir("/proc"); }

int door_proc_root(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/root", (int)pid);
	return pid > 0 ? open(path, O_PATH | O_DIRECTORY | O_CLOEXEC) : (errno = EINVAL, -1);
}

/* Opening is in two steps (issue 35): an O_PATH descriptor first, which opens nothing (a FIFO's
 * writer is not released, a device's driver not called, a symlink as the last component with
 * O_NOFOLLOW is the link itself); then, when fstat says it is a regular file or a directory,
 * the very same inode is opened for reading through /proc/self/fd/N. No FIFO, device or
 * socket of a target is ever opened for reading. */
static int path_flags(int flags) { return O_PATH | O_CLOEXEC | (flags & (O_DIRECTORY | O_NOFOLLOW)); }

static int reopen_for_reading(int pathfd, bool regular)
{
	if (pathfd < 0) return -1;
	struct stat st;
	int fd = -1, e = EINVAL;
	if (fstat(pathfd, &st) != 0) e = errno;
	else if (S_ISLNK(st.st_mode)) e = ELOOP; /* O_NOFOLLOW's own answer */
	else if (S_ISREG(st.st_mode) || (!regular && S_ISDIR(st.st_mode))) {
		char self[48];
		snprintf(self, sizeof self, "/proc/self/fd/%d", pathfd);
		fd = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK |
				(S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
		e = errno;
	}
	close(pathfd);
	errno = e;
	return fd;
}

static int open_at(int dir, const char *path, int flags, bool in_root)
{
	struct open_how how = {.flags = (uint64_t)path_flags(flags),
			       .resolve = (in_root ? RESOLVE_IN_ROOT : 0) | RESOLVE_NO_MAGICLINKS};
	return (int)syscall(SYS_openat2, dir, path, &how, sizeof how);
}

int door_open_at(int dir, const char *path, int flags, bool in_root)
{
	return reopen_for_reading(open_at(dir, path, flags, in_root), false);
}

/* A path the kernel showed us for a process (its maps, its exe) is relative to our root where
 * the file is reachable from it: a process chroot'ed to /srv/jail shows /srv/jail/bin/app,
 * which inside its root is /bin/app (issue 34: "cannot open /proc/PID/root/srv/jail/..."). In
 * another mount namespace its root shows as "/" and paths are its own already. */
static const char *in_root_path(int root, const char *path)
{
	char link[64], where[4096];
	snprintf(link, sizeof link, "/proc/self/fd/%d", root);
	ssize_t n = readlink(link, where, sizeof where - 1);
	if (n <= 1 || where[0] != '/') return path;
	where[n] = 0;
	if (strncmp(path, where, (size_t)n) == 0 && path[n] == '/') return path + n;
	return path;
}

/* path opened in two steps (above); a path under /proc/PID/root/ resolved inside that root. */
static int open_file(const char *path, int flags, bool regular)
{
	/* /proc/PID/root/REST: REST inside that root */
	if (strncmp(path, "/proc/", 6) == 0) {
		char *end;
		long pid = strtol(path + 6, &end, 10);
		if (end != path + 6 && pid > 0 && strncmp(end, "/root/", 6) == 0) {
			int root = door_proc_root((pid_t)pid);
			if (root < 0) return -1;
			const char *rest = in_root_path(root, end + 5);
			int fd = open_at(root, rest, flags, true);
			int e = errno;
			close(root);
			errno = e;
			return reopen_for_reading(fd, regular);
		}
	}
	return reopen_for_reading(open(path, path_flags(flags)), regular);
}

int door_open_file(const char *path, int flags, bool regular) { return open_file(path, flags, regular); }

bool door_creds_of(pid_t pid, struct door_creds *c)
{
	FILE *f = door_proc_fopen(pid, "status");
	if (!f) return false;
	memset(c, 0, sizeof *c);
	bool uid = false, gid = false, groups = false;
	char line[4096];
	while (fgets(line, sizeof line, f)) {
		unsigned long r, e, s, fs;
		if (sscanf(line, "Uid: %lu %lu %lu %lu", &r, &e, &s, &fs) == 4) {
			c->uid = (uid_t)fs;
			c->euid = (uid_t)e;
			c->any_root = r == 0 || e == 0 || s == 0 || fs == 0;
			uid = true;
		} else if (sscanf(line, "Gid: %lu %lu %lu %lu", &r, &e, &s, &fs) == 4) {
			c->gid = (gid_t)fs;
			gid = true;
		} else if (strncmp(line, "Groups:", 7) == 0) {
			groups = true;
			char *p = line + 7, *end;
			for (unsigned long g; (g = strtoul(p, &end, 10)), end != p; p = end) {
				if (c->ngroups == DOOR_MAX_GROUPS) groups = false; /* more than we can take */
				else c->groups[c->ngroups++] = (gid_t)g;
			}
		}
	}
	fclose(f);
	return uid && gid && groups;
}

/* The filesystem credentials of this thread (the raw system calls: glibc's setgroups would
 * change every thread of the daemon) set to c, or back to the saved ones. setfsuid answers
 * with the previous value, never an error: what it holds afterwards is asked back. When the
 * fsuid leaves 0 the kernel drops CAP_DAC_OVERRIDE and the other file capabilities from this
 * thread, and gives them back when it returns to 0. */
struct saved_creds {
	uid_t uid;
	gid_t gid;
	int ngroups;
	gid_t groups[DOOR_MAX_GROUPS];
};

static bool creds_set(const struct door_creds *c, struct saved_creds *old)
{
	old->gid = (gid_t)syscall(SYS_setfsgid, -1);
	old->uid = (uid_t)syscall(SYS_setfsuid, -1);
	if (syscall(SYS_setgroups, c->ngroups, c->groups) != 0) return false;
	syscall(SYS_setfsgid, c->gid);
	syscall(SYS_setfsuid, c->uid);
	return (uid_t)syscall(SYS_setfsuid, -1) == c->uid && (gid_t)syscall(SYS_setfsgid, -1) == c->gid;
}

static void creds_restore(const struct saved_creds *old)
{
	syscall(SYS_setfsuid, old->uid);
	syscall(SYS_setfsgid, old->gid);
	if (syscall(SYS_setgroups, old->ngroups, old->groups) != 0 ||
	    (uid_t)syscall(SYS_setfsuid, -1) != old->uid) {
		/* a thread left with a target's credentials would be wrong from here on */
		fprintf(stderr, "memtraced: cannot restore credentials after opening a file as a target: %s\n",
			strerror(errno));
		abort();
	}
}

int door_open_file_as(const char *path, int flags, bool regular, const struct door_creds *c)
{
	struct saved_creds old;
	old.ngroups = (int)syscall(SYS_getgroups, DOOR_MAX_GROUPS, old.groups);
	if (old.ngroups < 0) return -1;
	int fd = -1, e = EPERM;
	if (creds_set(c, &old)) {
		fd = open_file(path, flags, regular);
		e = errno;
	}
	creds_restore(&old);
	errno = e;
	return fd;
}

const char *door_probe_path(const char *path, int *fd, char *buf, size_t len)
{
	*fd = door_open_file(path, 0, true);
	if (*fd < 0) return path;
	snprintf(buf, len, "/proc/self/fd/%d", *fd);
	return buf;
}
