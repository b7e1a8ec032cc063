/* Raw BPF_LINK_CREATE for uprobe_multi / uprobe session links (see uprobe_link.h). */
#include "uprobe_link.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/bpf.h>

/* The link_create part of union bpf_attr for uprobe_multi (include/uapi/linux/bpf.h, 6.6+);
 * Debian 12's uapi headers (6.1) predate it. */
struct link_create_uprobe_multi {
	uint32_t prog_fd;
	uint32_t target_fd;
	uint32_t attach_type;
	uint32_t flags;
	uint64_t path;
	uint64_t offsets;
	uint64_t ref_ctr_offsets;
	uint64_t cookies;
	uint32_t cnt;
	uint32_t uprobe_flags;    /* BPF_F_UPROBE_MULTI_RETURN (1) */
	uint32_t pid;
};

int uprobe_multi_link_create(int prog_fd, int attach_type, const char *path,
                             const uint64_t *offsets, const uint64_t *cookies, unsigned cnt,
                             pid_t pid, bool retprobe, char *err, size_t errlen)
{
	union {
		struct link_create_uprobe_multi um;
		union bpf_attr attr; /* the kernel wants the whole (zeroed) union size */
		char pad[256];
	} a;
	memset(&a, 0, sizeof(a));
	a.um.prog_fd = prog_fd;
	a.um.attach_type = attach_type;
	a.um.path = (uintptr_t)path;
	a.um.offsets = (uintptr_t)offsets;
	a.um.cookies = (uintptr_t)cookies;
	a.um.cnt = cnt;
	a.um.pid = pid;
	a.um.uprobe_flags = retprobe ? 1 : 0;
	int fd = syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a.attr));
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "cannot attach %s uprobes (%u sites) in %s for pid %d: %s%s",
		         attach_type == UPROBE_ATTACH_SESSION ? "session" : retprobe ? "multi return"
		                                                          : "multi", cnt, path,
		         (int)pid, strerror(e),
		         e == EINVAL ? " (if dmesg says \"ref_ctr_offset mismatch\", another tool holds a "
		                       "uprobe with a USDT semaphore at the same place)" : "");
		errno = e;
		return -1;
	}
	return fd;
}
