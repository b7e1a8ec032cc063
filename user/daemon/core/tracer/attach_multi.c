/* uprobe_multi links (6.6+) for entries and returns: the perf mode's programs, but one link
 * per object and kind instead of one perf event per site. */
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
#include "uprobe_link.h"

bool object_sites_next(const struct alloc_sites *s, bool *done, uint32_t owner,
                       struct object_sites *o)
{
	int i = 0;
	while (i < s->n && done[i]) i++;
	if (i == s->n) return false;
	o->path = s->sites[i].path;
	o->na = o->nf = 0;
	for (int j = i; j < s->n; j++) {
		const struct probe_site *p = &s->sites[j];
		if (done[j] || strcmp(p->path, o->path))
			continue;
		done[j] = true;
		/* the entry or a later emulated site where %rsp has not moved: the return address is
		 * at [rsp] for the return probe */
		if (alloc_fn_is_free(p->fn)) {
			o->foff[o->nf] = p->probe_offset;
			o->fcookie[o->nf++] = MT_COOKIE(p->fn, owner);
		} else {
			o->aoff[o->na] = p->probe_offset;
			o->acookie[o->na++] = MT_COOKIE(p->fn, owner);
		}
	}
	return true;
}

int attach_by_object(struct tracer *t, const struct alloc_sites *s,
                     const struct object_link *links, int n, char *err, size_t errlen)
{
	bool done[MAX_PROBE_SITES] = {false};
	struct object_sites o;
	while (object_sites_next(s, done, t->owner, &o)) {
		char pbuf[64];
		int pfd;
		const char *path = door_probe_path(o.path, &pfd, pbuf, sizeof pbuf);
		int rc = 0;
		for (int k = 0; k < n && rc == 0; k++) {
			unsigned cnt = links[k].frees ? o.nf : o.na;
			if (!cnt) continue;
			int fd = uprobe_multi_link_create(links[k].prog, links[k].attach_type, path,
			                                  links[k].frees ? o.foff : o.aoff,
			                                  links[k].frees ? o.fcookie : o.acookie, cnt,
			                                  t->pid, links[k].retprobe, err, errlen);
			if (fd < 0) rc = -1;
			else t->link_fds[t->nlink_fds++] = fd;
		}
		if (pfd >= 0) close(pfd);
		if (rc) return -1;
	}
	return 0;
}

int attach_multi(struct tracer *t, const struct alloc_sites *s, char *err, size_t errlen)
{
	struct memtraced_bpf *sk = host_skel(t);
	/* the return link first: an entry that records a call whose return is not probed yet
	 * would leave it in flight */
	const struct object_link links[] = {
		{bpf_program__fd(t->floor ? sk->progs.floor_return : sk->progs.alloc_return),
		 UPROBE_ATTACH_MULTI, true, false},
		{bpf_program__fd(t->floor ? sk->progs.floor_entry : sk->progs.alloc_entry),
		 UPROBE_ATTACH_MULTI, false, false},
		{bpf_program__fd(t->floor ? sk->progs.floor_free : sk->progs.free_probe),
		 UPROBE_ATTACH_MULTI, false, true},
	};
	return attach_by_object(t, s, links, 3, err, errlen);
}
