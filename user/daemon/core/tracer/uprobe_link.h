/* Raw uprobe_multi links (BPF_LINK_CREATE with attach type BPF_TRACE_UPROBE_MULTI = 48 or
 * BPF_TRACE_UPROBE_SESSION = 57). Debian 12's libbpf 1.1.2 has no API for them; the kernel
 * (6.6+, sessions 6.13+: kernel_probe.c) has. */
#ifndef MEMTRACED_UPROBE_LINK_H
#define MEMTRACED_UPROBE_LINK_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define UPROBE_ATTACH_MULTI 48    /* BPF_TRACE_UPROBE_MULTI */
#define UPROBE_ATTACH_SESSION 57  /* BPF_TRACE_UPROBE_SESSION: entry and return in one program */

/* Attaches prog_fd (loaded with the same expected attach type) at cnt file offsets of path,
 * with one cookie per offset (cookies may be NULL), for process pid only (0: every process);
 * retprobe: return probes (BPF_F_UPROBE_MULTI_RETURN, attach type MULTI only). Returns the
 * link fd (close it to detach), or -1 with a message in err and errno set. */
int uprobe_multi_link_create(int prog_fd, int attach_type, const char *path,
                             const uint64_t *offsets, const uint64_t *cookies, unsigned cnt,
                             pid_t pid, bool retprobe, char *err, size_t errlen);
#endif
