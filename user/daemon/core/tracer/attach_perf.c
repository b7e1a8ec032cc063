/* Perf-event uprobes and uretprobes (any kernel memtraced runs on): libbpf makes one perf
 * event per site and kind; every allocation call pays its return probe. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "attach_modes.h"
#include "memtraced_events.h"
#include "python_frames.h"
#include "memtraced.skel.h"
#include "tracer_host.h"
#include "door/door.h"

static int attach_one(struct tracer *t, struct bpf_program *prog, const struct probe_site *p,
                      uint64_t offset, bool retprobe, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = MT_COOKIE(p->fn, t->owner),
		    .retprobe = retprobe);
	char pbuf[64];
	int pfd;
	const char *path = door_probe_path(p->path, &pfd, pbuf, sizeof pbuf);
	struct bpf_link *l = bpf_program__attach_uprobe_opts(prog, t->pid, path, offset, &uo);
	int e = errno;
	if (pfd >= 0) close(pfd);
	errno = e;
	if (!l) {
		snprintf(err, errlen, "cannot attach a %s on %s at %s+0x%llx for pid %d: %s",
		         retprobe ? "uretprobe" : "uprobe", alloc_fn_name(p->fn), p->path,
		         (unsigned long long)offset, (int)t->pid, strerror(errno));
		return -1;
	}
	t->links[t->nlinks++] = l;
	return 0;
}

int attach_perf(struct tracer *t, const struct alloc_sites *s, char *err, size_t errlen)
{
	struct memtraced_bpf *sk = host_skel(t);
	for (int i = 0; i < s->n; i++) {
		const struct probe_site *p = &s->sites[i];
		int rc;
		if (alloc_fn_is_free(p->fn)) {
			rc = attach_one(t, t->floor ? sk->progs.floor_free : sk->progs.free_probe, p,
			                p->probe_offset, false, err, errlen);
		} else {
			rc = attach_one(t, t->floor ? sk->progs.floor_entry : sk->progs.alloc_entry, p,
			                p->probe_offset, false, err, errlen);
			if (!rc)
				rc = attach_one(t, t->floor ? sk->progs.floor_return : sk->progs.alloc_return,
				                p, p->probe_offset, true, err, errlen);
		}
		if (rc)
			return -1;
	}
	return 0;
}
