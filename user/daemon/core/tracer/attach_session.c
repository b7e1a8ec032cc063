/* Session uprobes (6.13+): one program sees a call's entry and its return, and the entry
 * decides whether the return probe runs, so an unsampled call pays one trap. */
#include <stdio.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "attach_modes.h"
#include "memtraced_events.h"
#include "python_frames.h"
#include "memtraced.skel.h"
#include "tracer_host.h"
#include "door/door.h"
#include "uprobe_link.h"

int attach_session(struct tracer *t, const struct alloc_sites *s, char *err, size_t errlen)
{
	struct memtraced_bpf *sk = host_skel(t);
	int alloc_prog = bpf_program__fd(t->floor ? sk->progs.floor_session : sk->progs.alloc_session);
	int free_prog = bpf_program__fd(t->floor ? sk->progs.floor_free : sk->progs.free_probe);
	bool done[MAX_PROBE_SITES] = {false};
	struct object_sites o;
	while (object_sites_next(s, done, t->owner, &o)) {
		char pbuf[64];
		int pfd;
		const char *path = door_probe_path(o.path, &pfd, pbuf, sizeof pbuf);
		int rc = 0;
		if (o.na) {
			int fd = uprobe_multi_link_create(alloc_prog, UPROBE_ATTACH_SESSION, path, o.aoff,
			                                  o.acookie, o.na, t->pid, false, err, errlen);
			if (fd < 0) rc = -1;
			else tracer_add_link_fd(t, fd);
		}
		if (o.nf && rc == 0) {
			int fd = uprobe_multi_link_create(free_prog, UPROBE_ATTACH_MULTI, path, o.foff,
			                                  o.fcookie, o.nf, t->pid, false, err, errlen);
			if (fd < 0) rc = -1;
			else tracer_add_link_fd(t, fd);
		}
		if (pfd >= 0) close(pfd);
		if (rc) return -1;
	}
	return 0;
}
