/* The door to the targets' files (door.h). */
#include "door.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdint.h>
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

static int read_only_flags(int flags)
{
	return O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (flags & (O_DIRECTORY | O_NOFOLLOW));
}

static int keep_regular(int fd, bool regular)
{
	struct stat st;
	if (fd < 0 || !regular) return fd;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) return fd;
	close(fd);
	errno = EINVAL;
	return -1;
}

int door_open_at(int dir, const char *path, int flags, bool in_root)
{
	struct open_how how = {.flags = (uint64_t)read_only_flags(flags),
			       .resolve = (in_root ? RESOLVE_IN_ROOT : 0) | RESOLVE_NO_MAGICLINKS};
	return (int)syscall(SYS_openat2, dir, path, &how, sizeof how);
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

int door_open_file(const char *path, int flags, bool regular)
{
	/* /proc/PID/root/REST: REST inside that root */
	if (strncmp(path, "/proc/", 6) == 0) {
		char *end;
		long pid = strtol(path + 6, &end, 10);
		if (end != path + 6 && pid > 0 && strncmp(end, "/root/", 6) == 0) {
			int root = door_proc_root((pid_t)pid);
			if (root < 0) return -1;
			const char *rest = in_root_path(root, end + 5);
			int fd = door_open_at(root, rest, flags, true);
			int e = errno;
			close(root);
			errno = e;
			return keep_regular(fd, regular);
		}
	}
	return keep_regular(open(path, read_only_flags(flags)), regular);
}

const char *door_probe_path(const char *path, int *fd, char *buf, size_t len)
{
	*fd = door_open_file(path, 0, true);
	if (*fd < 0) return path;
	snprintf(buf, len, "/proc/self/fd/%d", *fd);
	return buf;
}
