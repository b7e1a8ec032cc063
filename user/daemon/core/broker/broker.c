/* The privileged file broker (see broker.h): the parser's open, stat, access and readlink
 * calls, stopped by its seccomp filter, are checked and done here, as root.
 *
 * The rule: the parser may read ELF files (checked by their content once opened, wherever
 * they are: a target's objects and debug files), ld.so's cache and preload list, the /proc
 * files of the processes memtraced traces, their own perf maps, and what the policy adds;
 * nothing else. A path under /proc/PID/root/ is resolved inside that root (openat2
 * RESOLVE_IN_ROOT) and opened with the credentials of process PID (door_open_file_as): the
 * kernel refuses what that process's user may not read. Metadata (stat, access,
 * readlink) is answered for any path: it tells the parser what exists, never what a file
 * holds. Every answer is checked to still be wanted (the notification id) before it is given,
 * and the path is read from the parser's memory once, into our own buffer. */
#include "broker.h"
#include "door/door.h"

#include <elfutils/debuginfod.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <seccomp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

struct broker {
	int notify_fd, peer_pidfd, stop_pipe[2];
	pid_t peer;
	struct broker_policy policy;
	pthread_t thread;
	pthread_mutex_t lock;
	struct broker_stats stats;
	debuginfod_client *debuginfod;
	/* the credentials last seen of the processes the parser asked about (creds_of) */
	struct {
		pid_t pid;
		struct door_creds creds;
	} seen[32];
	unsigned next_seen;
};

/* ---- the parser's memory ---- */

static int read_string(pid_t tid, uint64_t addr, char *buf, size_t len)
{
	/* page by page: a string near the end of a mapping is still read */
	size_t got = 0;
	while (got < len - 1) {
		size_t chunk = 4096 - ((addr + got) & 4095);
		if (chunk > len - 1 - got) chunk = len - 1 - got;
		struct iovec l = {buf + got, chunk}, r = {(void *)(uintptr_t)(addr + got), chunk};
		ssize_t n = process_vm_readv(tid, &l, 1, &r, 1, 0);
		if (n <= 0) return -1;
		if (memchr(buf + got, '\0', (size_t)n)) return 0;
		got += (size_t)n;
	}
	return -1; /* too long */
}

static int read_mem(pid_t tid, uint64_t addr, void *buf, size_t len)
{
	struct iovec l = {buf, len}, r = {(void *)(uintptr_t)addr, len};
	return process_vm_readv(tid, &l, 1, &r, 1, 0) == (ssize_t)len ? 0 : -1;
}

static int write_mem(pid_t tid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec l = {(void *)buf, len}, r = {(void *)(uintptr_t)addr, len};
	return process_vm_writev(tid, &l, 1, &r, 1, 0) == (ssize_t)len ? 0 : -1;
}

/* ---- paths ---- */

/* "/proc/self/..." and "/proc/thread-self/..." name the parser, not us. */
static void own_proc_path(const struct broker *b, pid_t tid, const char *in, char *out, size_t len)
{
	if (strncmp(in, "/proc/self/", 11) == 0 || strcmp(in, "/proc/self") == 0)
		snprintf(out, len, "/proc/%d%s", (int)b->peer, in + 10);
	else if (strncmp(in, "/proc/thread-self/", 18) == 0)
		snprintf(out, len, "/proc/%d/task/%d%s", (int)b->peer, (int)tid, in + 17);
	else
		snprintf(out, len, "%s", in);
}

/* "/proc/PID/REST": PID, and REST in *rest (NULL for "/proc/PID"); 0 if not such a path. */
static pid_t proc_pid_of(const char *path, const char **rest)
{
	if (strncmp(path, "/proc/", 6) != 0) return 0;
	char *end;
	long pid = strtol(path + 6, &end, 10);
	if (end == path + 6 || pid <= 0 || (*end && *end != '/')) return 0;
	*rest = *end ? end + 1 : NULL;
	return (pid_t)pid;
}

/* The /proc files of an allowed process that may be read as they are. */
static bool proc_file_ok(const char *rest)
{
	static const char *const files[] = {"maps", "mem", "auxv", "status", "stat", "comm",
					    "cmdline", "exe", "task", "ns/mnt", "root", NULL};
	if (!rest) return true;
	for (int i = 0; files[i]; i++)
		if (strcmp(rest, files[i]) == 0) return true;
	if (strncmp(rest, "task/", 5) == 0 && !strstr(rest, "..")) {
		const char *f = strchr(rest + 5, '/');
		return !f || strcmp(f, "/stat") == 0 || strcmp(f, "/status") == 0 ||
		       strcmp(f, "/comm") == 0;
	}
	return false;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* A JIT's perf map ("/tmp/perf-N.map", or under /proc/PID/root/): text the unwinder names JIT
 * code from. The process it belongs to: PID of /proc/PID/root/, else N (a process of our
 * root); 0 when path is not a perf map. */
static pid_t perf_map_owner(const char *path)
{
	const char *base = strrchr(path, '/');
	if (!base || base - path < 4 || strncmp(base - 4, "/tmp/", 5) != 0 || strncmp(base, "/perf-", 6) != 0)
		return 0;
	char *end;
	long n = strtol(base + 6, &end, 10);
	if (end == base + 6 || n <= 0 || strcmp(end, ".map") != 0) return 0;
	const char *rest;
	pid_t pid = proc_pid_of(path, &rest);
	if (pid) return rest && strncmp(rest, "root/tmp/perf-", 14) == 0 ? pid : 0;
	return strncmp(path, "/tmp/perf-", 10) == 0 ? (pid_t)n : 0;
}

/* A process's credentials to open its files with. Read anew while it lives (they change);
 * a process gone since keeps the ones last seen: the perf map of a program that ran to its
 * end is read after it exited. */
static bool creds_of(struct broker *b, pid_t pid, struct door_creds *c)
{
	size_t n = sizeof b->seen / sizeof b->seen[0];
	if (door_creds_of(pid, c)) {
		size_t i = 0;
		while (i < n && b->seen[i].pid != pid) i++;
		if (i == n) i = b->next_seen++ % n;
		b->seen[i].pid = pid;
		b->seen[i].creds = *c;
		return true;
	}
	char dir[32];
	struct stat st;
	snprintf(dir, sizeof dir, "/proc/%d", (int)pid);
	if (stat(dir, &st) == 0) return false; /* there, but its status unreadable */
	for (size_t i = 0; i < n; i++)
		if (b->seen[i].pid == pid) {
			*c = b->seen[i].creds;
			return true;
		}
	return false;
}

static bool creds_known(const struct broker *b, pid_t pid)
{
	for (size_t i = 0; i < sizeof b->seen / sizeof b->seen[0]; i++)
		if (b->seen[i].pid == pid) return true;
	return false;
}

/* How a file was opened for the parser, for the rules on what it holds. */
struct opened {
	pid_t as;                /* opened with this process's credentials (0: as root) */
	struct door_creds creds; /* those credentials */
	bool nofollow;           /* a symlink as the last component was refused */
};

/* A file opened for the parser on a path that is not an allowed /proc file: an ELF file, one
 * of ld.so's, a script's #! line, a perf map, or one the policy allows. The rules are about
 * the opened file (issue 35: a name rule let a symlink named /tmp/perf-N.map lead to
 * /etc/shadow, and a root-only #! script be read). */
static bool content_ok(struct broker *b, int fd, const char *path, const struct opened *o,
		       const char **why)
{
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		*why = "not a regular file";
		return false;
	}
	if (ends_with(path, "/etc/ld.so.cache") || ends_with(path, "/etc/ld.so.preload")) return true;
	unsigned char magic[4];
	ssize_t got = pread(fd, magic, 4, 0);
	if (got == 4 && memcmp(magic, "\177ELF", 4) == 0) return true;
	/* a script's #! line (which interpreter a command runs): an executable one, which its
	 * target's user could read, or anyone could */
	if (got >= 2 && magic[0] == '#' && magic[1] == '!' && (st.st_mode & 0111) &&
	    (o->as || (st.st_mode & S_IROTH)))
		return true;
	/* a perf map: its process's own file, written by it (owned by its user), opened with
	 * its credentials, not through a symlink */
	pid_t owner = perf_map_owner(path);
	if (owner && o->as == owner && o->nofollow &&
	    (st.st_uid == o->creds.euid || st.st_uid == o->creds.uid))
		return true;
	if (b->policy.path_allowed && b->policy.path_allowed(b->policy.ctx, path)) return true;
	*why = owner ? "not a perf map of its process (owned by its user, not a symlink)" : "not an ELF file";
	return false;
}

/* Opens what the parser asked for, checked; the fd, or -errno with *why set. */
static int broker_open(struct broker *b, pid_t tid, int dirfd, const char *asked, uint64_t flags,
		       uint64_t resolve, const char **why)
{
	if ((flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC | O_APPEND)) ||
	    (flags & __O_TMPFILE) == __O_TMPFILE) {
		*why = "not read-only";
		return -EACCES;
	}
	/* never O_PATH: the kernel does not hand such an fd over (a directory is opened for
	 * reading instead, which lets the parser list it: names only); read-only, never
	 * blocking, whatever was asked (door/door.h) */
	int ours = (int)(flags & (O_DIRECTORY | O_NOFOLLOW));
	char path[4096];
	own_proc_path(b, tid, asked, path, sizeof path);
	if (dirfd != AT_FDCWD && ((resolve & RESOLVE_IN_ROOT) || path[0] != '/')) {
		/* a target's file is asked for by its /proc/PID/root/ path, which names the
		 * process whose credentials open it; a directory fd does not */
		*why = "relative to a directory (ask by /proc/PID/root/PATH)";
		return -EACCES;
	}
	struct opened o = {0};
	const char *rest;
	pid_t pid = proc_pid_of(path, &rest);
	pid_t perf_pid = perf_map_owner(path);
	bool own = pid == b->peer;
	int fd;
	if (perf_pid && !(b->policy.pid_allowed && b->policy.pid_allowed(b->policy.ctx, perf_pid))) {
		*why = "a perf map of a process not traced";
		return -EACCES;
	}
	if (perf_pid) {
		/* as its process, never through a symlink */
		if (!creds_of(b, perf_pid, &o.creds)) return -ESRCH;
		o.as = perf_pid;
		o.nofollow = true;
		fd = door_open_file_as(path, ours | O_NOFOLLOW, false, &o.creds);
		if (fd < 0) return -errno;
	} else if (pid && (own || (b->policy.pid_allowed && b->policy.pid_allowed(b->policy.ctx, pid)))) {
		if (!own && !creds_known(b, pid)) creds_of(b, pid, &o.creds); /* while it lives */
		if (rest && strncmp(rest, "root/", 5) == 0 && !own) {
			/* resolved inside that root, with that process's credentials */
			if (!creds_of(b, pid, &o.creds)) return -ESRCH;
			o.as = pid;
			fd = door_open_file_as(path, ours, false, &o.creds);
			if (fd < 0) return -errno;
		} else if (proc_file_ok(rest) && (!own || (rest && strcmp(rest, "ns/mnt") == 0))) {
			fd = door_open_file(path, ours, false);
			return fd < 0 ? -errno : fd; /* as they are */
		} else {
			fd = door_open_file(path, ours & ~O_DIRECTORY, false);
			if (fd < 0) return -errno;
		}
	} else if (pid || strncmp(path, "/proc/", 6) == 0 || strncmp(path, "/sys/", 5) == 0 ||
		   strncmp(path, "/dev/", 5) == 0) {
		*why = "not a traced process's file";
		return -EACCES;
	} else if (b->debuginfod && strncmp(path, BROKER_DEBUGINFOD_PREFIX,
					    strlen(BROKER_DEBUGINFOD_PREFIX)) == 0) {
		const char *hex = path + strlen(BROKER_DEBUGINFOD_PREFIX);
		unsigned char id[64];
		size_t n = 0;
		while (n < sizeof id && sscanf(hex + 2 * n, "%2hhx", &id[n]) == 1) n++;
		if (!n) return -ENOENT;
		/* the client is not thread-safe; the broker's thread alone uses it */
		fd = debuginfod_find_debuginfo(b->debuginfod, id, (int)n, NULL);
		if (fd < 0) return fd;
	} else {
		/* a relative path is relative to our directory, which is the parser's (it cannot
		 * change it): checked by content below like any other file */
		fd = door_open_file(path, ours & ~O_DIRECTORY, false);
		if (fd < 0) return -errno;
	}
	if (!content_ok(b, fd, path, &o, why)) {
		close(fd);
		return -EACCES;
	}
	return fd;
}

/* ---- one notification ---- */

static void note(struct broker *b, bool granted, const char *call, const char *path, const char *why)
{
	pthread_mutex_lock(&b->lock);
	if (granted) b->stats.granted++;
	else {
		b->stats.refused++;
		snprintf(b->stats.last_refused, sizeof b->stats.last_refused, "%s %.400s: %s", call,
			 path, why);
	}
	pthread_mutex_unlock(&b->lock);
}

static int dirfd_of(uint64_t arg) { return (int)(int32_t)arg; }

/* false when the kernel has answered already (a file descriptor sent with its result) */
static bool handle(struct broker *b, struct seccomp_notif *req, struct seccomp_notif_resp *resp)
{
	const __u64 *a = req->data.args;
	int nr = req->data.nr;
	pid_t tid = (pid_t)req->pid;
	resp->id = req->id;
	resp->val = 0;
	resp->error = 0;
	resp->flags = 0;
	bool has_dir = nr == SCMP_SYS(openat) || nr == SCMP_SYS(openat2) ||
		       nr == SCMP_SYS(newfstatat) || nr == SCMP_SYS(statx) ||
		       nr == SCMP_SYS(faccessat) || nr == SCMP_SYS(faccessat2) ||
		       nr == SCMP_SYS(readlinkat);
	int dirfd = has_dir ? dirfd_of(a[0]) : AT_FDCWD;
	char asked[4096], path[4096];
	if (read_string(tid, has_dir ? a[1] : a[0], asked, sizeof asked) < 0) {
		resp->error = -EFAULT;
		return true;
	}
	own_proc_path(b, tid, asked, path, sizeof path);
	const char *why = "";
	if (nr == SCMP_SYS(open) || nr == SCMP_SYS(openat) || nr == SCMP_SYS(openat2)) {
		uint64_t flags = nr == SCMP_SYS(open) ? a[1] : a[2], resolve = 0;
		if (nr == SCMP_SYS(openat2)) {
			struct open_how how;
			if (a[3] < sizeof how || read_mem(tid, a[2], &how, sizeof how) < 0) {
				resp->error = -EINVAL;
				return true;
			}
			flags = how.flags;
			resolve = how.resolve;
		}
		int fd = broker_open(b, tid, dirfd, asked, flags, resolve, &why);
		if (fd < 0) {
			if (*why) note(b, false, "open", path, why);
			resp->error = fd;
			return true;
		}
		note(b, true, "open", path, "");
		if (seccomp_notify_id_valid(b->notify_fd, req->id) != 0) {
			close(fd);
			resp->error = -ENOENT;
			return true;
		}
		struct seccomp_notif_addfd add = {.id = req->id, .flags = SECCOMP_ADDFD_FLAG_SEND,
						  .srcfd = (uint32_t)fd,
						  .newfd_flags = (flags & O_CLOEXEC) ? O_CLOEXEC : 0};
		int got = ioctl(b->notify_fd, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
		close(fd);
		/* answered by the kernel with the new fd (or the parser is gone) */
		if (got >= 0) return false;
		resp->error = -errno;
		return true;
	}
	/* metadata: done as asked, relative to the parser's directory fd if it gave one */
	int dir = AT_FDCWD;
	if (dirfd != AT_FDCWD && path[0] != '/') {
		dir = (int)syscall(SYS_pidfd_getfd, b->peer_pidfd, dirfd, 0);
		if (dir < 0) {
			resp->error = -EBADF;
			return true;
		}
	}
	long rc;
	if (nr == SCMP_SYS(stat) || nr == SCMP_SYS(lstat) || nr == SCMP_SYS(newfstatat)) {
		struct stat st;
		int fl = nr == SCMP_SYS(lstat) ? AT_SYMLINK_NOFOLLOW
			: nr == SCMP_SYS(newfstatat) ? (int)a[3] & AT_SYMLINK_NOFOLLOW : 0;
		uint64_t buf = nr == SCMP_SYS(newfstatat) ? a[2] : a[1];
		rc = fstatat(dir, path, &st, fl) < 0 ? -errno : write_mem(tid, buf, &st, sizeof st) < 0 ? -EFAULT : 0;
	} else if (nr == SCMP_SYS(statx)) {
		struct statx sx;
		rc = statx(dir, path, (int)a[2] & AT_SYMLINK_NOFOLLOW, (unsigned)a[3], &sx) < 0 ? -errno
		     : write_mem(tid, a[4], &sx, sizeof sx) < 0 ? -EFAULT : 0;
	} else if (nr == SCMP_SYS(access) || nr == SCMP_SYS(faccessat) || nr == SCMP_SYS(faccessat2)) {
		int mode = (int)(nr == SCMP_SYS(access) ? a[1] : a[2]);
		rc = faccessat(dir, path, mode & ~W_OK, 0) < 0 ? -errno : (mode & W_OK) ? -EROFS : 0;
	} else { /* readlink, readlinkat */
		uint64_t buf = nr == SCMP_SYS(readlink) ? a[1] : a[2];
		size_t size = (size_t)(nr == SCMP_SYS(readlink) ? a[2] : a[3]);
		char link[4096];
		if (size > sizeof link) size = sizeof link;
		ssize_t n = readlinkat(dir, path, link, size);
		rc = n < 0 ? -errno : write_mem(tid, buf, link, (size_t)n) < 0 ? -EFAULT : n;
	}
	if (dir != AT_FDCWD) close(dir);
	if (rc < 0) resp->error = (int32_t)rc;
	else resp->val = rc;
	return true;
}

static void *broker_main(void *arg)
{
	struct broker *b = arg;
	struct seccomp_notif *req;
	struct seccomp_notif_resp *resp;
	if (seccomp_notify_alloc(&req, &resp) != 0) return NULL;
	for (;;) {
		struct pollfd p[2] = {{b->notify_fd, POLLIN, 0}, {b->stop_pipe[0], POLLIN, 0}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR) continue;
			break;
		}
		if (p[1].revents) break;
		if (p[0].revents & (POLLHUP | POLLERR | POLLNVAL)) break; /* the parser is gone */
		if (!(p[0].revents & POLLIN)) continue;
		memset(req, 0, sizeof *req);
		if (seccomp_notify_receive(b->notify_fd, req) != 0) continue; /* gone meanwhile */
		if (handle(b, req, resp)) seccomp_notify_respond(b->notify_fd, resp);
	}
	seccomp_notify_free(req, resp);
	return NULL;
}

struct broker *broker_start(int notify_fd, pid_t peer, const struct broker_policy *policy,
			    char *err, size_t errlen)
{
	struct broker *b = calloc(1, sizeof *b);
	if (!b) {
		snprintf(err, errlen, "out of memory");
		close(notify_fd);
		return NULL;
	}
	b->notify_fd = notify_fd;
	b->peer = peer;
	b->policy = *policy;
	pthread_mutex_init(&b->lock, NULL);
	b->peer_pidfd = (int)syscall(SYS_pidfd_open, peer, 0);
	if (b->peer_pidfd < 0 || pipe2(b->stop_pipe, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "cannot watch the parser: %s", strerror(errno));
		goto fail;
	}
	const char *urls = getenv("DEBUGINFOD_URLS");
	if (urls && *urls) b->debuginfod = debuginfod_begin();
	if (pthread_create(&b->thread, NULL, broker_main, b) != 0) {
		snprintf(err, errlen, "cannot start the file broker");
		goto fail;
	}
	return b;
fail:
	close(notify_fd);
	if (b->peer_pidfd >= 0) close(b->peer_pidfd);
	if (b->debuginfod) debuginfod_end(b->debuginfod);
	free(b);
	return NULL;
}

void broker_get_stats(struct broker *b, struct broker_stats *out)
{
	pthread_mutex_lock(&b->lock);
	*out = b->stats;
	pthread_mutex_unlock(&b->lock);
}

void broker_stop(struct broker *b)
{
	if (!b) return;
	if (write(b->stop_pipe[1], "x", 1) < 0) {}
	pthread_join(b->thread, NULL);
	close(b->stop_pipe[0]);
	close(b->stop_pipe[1]);
	close(b->notify_fd);
	close(b->peer_pidfd);
	if (b->debuginfod) debuginfod_end(b->debuginfod);
	pthread_mutex_destroy(&b->lock);
	free(b);
}
