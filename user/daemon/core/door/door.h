/* The one door to what a target controls: every file the daemon opens that belongs to, or
 * was named by, a traced process goes through here (tests/test_layout.sh fails when another
 * object of the daemon calls open, fopen or opendir, besides the few that open our own
 * outputs and the terminal). The checks live in one place:
 *
 * - a process's /proc files (maps, status, stat, auxv, comm, cmdline, mem, task/TID/...):
 *   opened by name under /proc/PID/, a name without "..";
 * - a file of a target (an object it maps, a path the parser named): found with O_PATH,
 *   which opens nothing, and opened for reading only when it is a regular file (or a
 *   directory where asked for): a FIFO or a device planted there is never opened (its writer
 *   released, its driver called); a path under /proc/PID/root/ is resolved inside that root (openat2 with
 *   RESOLVE_IN_ROOT and no magic links): a container's symlink cannot lead out of it.
 *
 * The daemon parses none of these files' contents but the kernel's own /proc text; the
 * parser reads the targets' files through the broker (core/broker/), which opens them here. */
#ifndef MEMTRACED_DOOR_H
#define MEMTRACED_DOOR_H
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

/* /proc/PID/NAME (NAME printf-style, e.g. "task/%d/stat"), read-only text; NULL with errno. */
FILE *door_proc_fopen(pid_t pid, const char *name_fmt, ...) __attribute__((format(printf, 2, 3)));
/* The first line of /proc/PID/NAME (comm, stat...) into buf, without its newline. false when
 * it cannot be read (buf is then left as it was). */
bool door_proc_line(pid_t pid, const char *name, char *buf, size_t len);
/* /proc/PID/NAME as an fd: read-only, or read-write for "mem" when writable (--inject, the
 * entry break). -1 with errno. */
int door_proc_open(pid_t pid, const char *name, bool writable);
/* A /proc/PID/NAME directory (task). NULL with errno. */
DIR *door_proc_opendir(pid_t pid, const char *name);
/* The link /proc/PID/NAME (exe, cwd...) into buf, NUL-terminated: its length, or -1. */
ssize_t door_proc_readlink(pid_t pid, const char *name, char *buf, size_t len);
/* /proc itself, to list the processes. NULL with errno. */
DIR *door_proc_list(void);
/* /proc/PID/root as an O_PATH directory, to resolve a target's paths in. -1 with errno. */
int door_proc_root(pid_t pid);

/* A file of a target at path, read-only (O_NONBLOCK, O_NOCTTY, O_CLOEXEC, plus O_DIRECTORY or
 * O_NOFOLLOW from flags): under /proc/PID/root/ resolved inside that root. regular: refuse
 * anything but a regular file (EINVAL). -1 with errno. */
int door_open_file(const char *path, int flags, bool regular);
/* The credentials a process opens files with, from /proc/PID/status: its filesystem uid
 * and gid, its groups (as seen from our user namespace: a process in a user namespace of
 * its own shows the ids it really has); euid, for the owner of what it writes. */
#define DOOR_MAX_GROUPS 256
struct door_creds {
	uid_t uid, euid; /* the filesystem uid (what opens files), the effective uid */
	bool any_root;   /* any of its real, effective, saved, filesystem uids is 0 */
	gid_t gid;
	int ngroups;
	gid_t groups[DOOR_MAX_GROUPS];
};
/* false when the process is gone or has more groups than DOOR_MAX_GROUPS. */
bool door_creds_of(pid_t pid, struct door_creds *c);
/* door_open_file with the credentials c on this thread while it opens (issue 35): the kernel
 * refuses what that process's user may not read, even where root could (a root-only file
 * bind-mounted into a target's mount namespace). */
int door_open_file_as(const char *path, int flags, bool regular, const struct door_creds *c);
/* path relative to the directory dir (a target's root the parser was given) or absolute,
 * read-only as door_open_file; in_root: resolved inside dir (RESOLVE_IN_ROOT). -1 with errno. */
int door_open_at(int dir, const char *path, int flags, bool in_root);

/* Where to attach a uprobe on a target's file at path. The kernel resolves a uprobe's path
 * itself, from our root: an absolute symlink inside a container's /proc/PID/root/ would lead
 * it to a file of the host. So the file is opened here (resolved inside that root, a regular
 * file) and the probe goes on "/proc/self/fd/N", that very file: *fd, to close after the
 * attach (-1 and path itself when it cannot be opened: the attach says what is wrong). */
const char *door_probe_path(const char *path, int *fd, char *buf, size_t len);

#endif
