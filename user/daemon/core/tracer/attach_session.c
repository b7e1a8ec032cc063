/* Session uprobes (6.13+): one program sees a call's entry and its return, and the entry
 * decides whether the return probe runs, so an unsampled call pays one trap. */
#include <bpf/libbpf.h>

#include "attach_modes.h"
#include "memtraced_events.h"
#include "python_frames.h"
#include "memtraced.skel.h"
#include "tracer_host.h"
#include "uprobe_link.h"

int attach_session(struct tracer *t, const struct alloc_sites *s, char *err, size_t errlen)
{
	struct memtraced_bpf *sk = host_skel(t);
	const struct object_link links[] = {
		{bpf_program__fd(t->floor ? sk->progs.floor_session : sk->progs.alloc_session),
		 UPROBE_ATTACH_SESSION, false, false},
		{bpf_program__fd(t->floor ? sk->progs.floor_free : sk->progs.free_probe),
		 UPROBE_ATTACH_MULTI, false, true},
	};
	return attach_by_object(t, s, links, 2, err, errlen);
}
