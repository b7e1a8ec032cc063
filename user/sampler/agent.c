/* The entry point memtraced's agent thread calls (include/inject_agent.h): the operation a job
 * asks for, on a thread of the target's own that memtraced created for it, so that no thread
 * of the program runs it and it completes without memtraced. */
#include "internal.h"
#include "inject_agent.h"

long memtraced_sampler_start(unsigned long mean_gap_bytes, unsigned long flags);
long memtraced_sampler_stop(void);

__attribute__((visibility("default")))
void memtraced_sampler_agent(struct inject_agent_region *r)
{
	switch (r->op) {
	case INJECT_AGENT_START:
		r->ret = memtraced_sampler_start(r->arg0, r->arg1);
		break;
	case INJECT_AGENT_STOP:
		r->ret = memtraced_sampler_stop();
		break;
	default:
		r->ret = 0;
	}
	r->version = MEMTRACED_SAMPLER_VERSION;
	r->check_addr = (uintptr_t)&memtraced_sampler_check;
	r->thin_addr = (uintptr_t)&memtraced_sampler_thin;
	r->stats_addr = (uintptr_t)&memtraced_sampler_stats;
}
