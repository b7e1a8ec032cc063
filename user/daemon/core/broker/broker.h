/* The privileged file broker that serves the unprivileged parser (its confinement is
 * parse/confine/confine.h).
 *
 * memtraced runs as root but parses files its targets control (ELF, DWARF, .eh_frame, their
 * memory). That parsing runs in a separate process, the parser, which sandbox_confine() (parse/confine/confine.h) turns
 * into a task with no privileges: no capabilities, uid/gid nobody, no_new_privs, and a
 * seccomp filter that kills it on any system call it has no use for. It cannot open a file
 * (or stat, readlink, access one) by itself: those calls are sent to the privileged daemon
 * through seccomp's user notification, where the broker thread checks each one against its
 * policy, does it itself (paths under /proc/PID/root resolved with RESOLVE_IN_ROOT) and hands
 * the result back (a file descriptor placed into the parser, a struct stat or a link written
 * into its memory), or refuses it with an errno. */
#ifndef MEMTRACED_BROKER_H
#define MEMTRACED_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "protocol/protocol.h"

/* What the broker lets the parser reach besides ELF files (checked after it opened them:
 * regular files starting with the ELF magic, anywhere) and ld.so's own files
 * (/etc/ld.so.cache, /etc/ld.so.preload, also under /proc/PID/root/): */
struct broker_policy {
	/* /proc/PID/... of this process may be read (maps, mem, auxv, exe, root/..., status,
	 * task/...): a process memtraced traces. Called on the broker thread. */
	bool (*pid_allowed)(void *ctx, pid_t pid);
	/* another regular file that may be opened (a script whose #! line is read). */
	bool (*path_allowed)(void *ctx, const char *path);
	void *ctx;
};

struct broker_stats {
	uint64_t granted, refused;
	char last_refused[512];  /* "openat /etc/shadow: not an ELF file", for messages */
};

struct broker;
/* Serves the notifications of the parser (process peer) from notify_fd, which it takes over,
 * on a thread of its own until broker_stop. NULL with a message on error. */
struct broker *broker_start(int notify_fd, pid_t peer, const struct broker_policy *policy,
			    char *err, size_t errlen);
void broker_get_stats(struct broker *b, struct broker_stats *out);
void broker_stop(struct broker *b);

#endif
