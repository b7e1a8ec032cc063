/* Raw uprobe_multi links (BPF_LINK_CREATE with attach type BPF_TRACE_UPROBE_MULTI = 48 or
 * BPF_TRACE_UPROBE_SESSION = 57). Debian 12's libbpf 1.1.2 has no API for them; the kernel
 * (6.6+, sessions 6.10+) has. */
#ifndef MEMTRACED_UPROBE_LINK_H
#define MEMTRACED_UPROBE_LINK_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define UPROBE_ATTACH_MULTI 48    /* BPF_TRACE_UPROBE_MULTI */
#define UPROBE_ATTACH_SESSION 57  /* BPF_TRACE_UPROBE_SESSION: entry and return in one program */

/* Attaches prog_fd (loaded with the same expected attach type) at cnt file offsets of path,
 * with one cookie per offset, for process pid only. Returns the link fd (close it to detach),
 * or -1 with a message in err. */
int uprobe_multi_link_create(int prog_fd, int attach_type, const char *path,
                             const uint64_t *offsets, const uint64_t *cookies, unsigned cnt,
                             pid_t pid, char *err, size_t errlen);
#endif
