/* Creating an output file (a trace, a page, a profile) so that root is never steered by a file
 * another user planted (issue 46): the way memtraced's snapshots are written.
 *
 * - The file is made new, under a temporary dot-name in its directory (O_EXCL|O_NOFOLLOW, with
 *   exactly the permissions asked: the umask does not change them), then renamed to its name.
 *   Nothing that was at the name is ever opened, truncated or chmod'ed: a symbolic link there
 *   is never followed, a file of another user never written into.
 * - What may already be at the name: a regular file of ours (the euid's, or of the user who
 *   ran sudo: SUDO_UID) is replaced by the rename (a rerun's old trace), as is nothing else: a
 *   symbolic link, a directory or another user's file is refused with a message that says so.
 * - A character device or a FIFO of ours (-o /dev/null, a named pipe to a reader) is written as
 *   it is; /dev/stdout, /dev/stderr and /dev/fd/N are our own descriptors.
 * - Run as root, the directory must be one no other user may write (owned by root or by the
 *   sudo user, not writable by group or others), or sticky as /tmp is: a user who may write it
 *   could swap the name between two steps, as ssh refuses keys in such a directory.
 *
 * Pure C and POSIX/Linux calls only: it is in the format library so that the daemon and every
 * tool share it. */
#ifndef MEMTRACE_OUT_FILE_H
#define MEMTRACE_OUT_FILE_H

#include <stddef.h>

/* Creates path for writing as above with permissions mode (0 = 0600). Returns a descriptor
 * (O_CLOEXEC) or -1 with a message in err ("cannot write the ... 'path': why"), `what` naming
 * the file ("trace file", "page"). */
int mt_out_create(const char *path, unsigned mode, const char *what, char *err, size_t errlen);

/* path's directory into dir ("." for a bare name, "/" for "/name") and where its last name
 * starts in path: 0, or -1 when it is too long for dir. */
int mt_path_split(const char *path, char *dir, size_t dirlen, const char **base);

/* A fresh file in dirfd for the final name base, under the dot-name ".BASE.tmp-PID-N" that
 * nothing else uses (O_EXCL|O_NOFOLLOW, exactly the permissions mode): its descriptor, its
 * name in tmp; -1 with errno. The snapshot writer's too (core/output/snapshot.c). */
int mt_out_create_temp(int dirfd, const char *base, unsigned mode, char *tmp, size_t tmplen);

#endif
