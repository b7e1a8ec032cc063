/* Probe sites: where the daemon puts the uprobes of one process, as the parser found them
 * (parse/sites/allocsyms.h) and the daemon checked them (core/parser/parser.c). */
#ifndef MEMTRACED_PROTOCOL_SITES_H
#define MEMTRACED_PROTOCOL_SITES_H
#include <stdbool.h>
#include <stdint.h>

#include "protocol/allocfn.h"

struct probe_site {
	enum alloc_fn fn;
	char path[4096];        /* object file as reachable from us (through /proc/PID/root/...) */
	uint64_t entry_offset;  /* file offset of the function's entry (what uprobes take) */
	uint64_t probe_offset;  /* file offset where the probe goes: == entry_offset, or a later
	                           instruction the kernel emulates (see probe_site_choose) */
	bool emulated;          /* the kernel emulates the instruction at probe_offset (no
	                           single-step): informational */
};

#define MAX_PROBE_SITES 64
struct alloc_sites {
	struct probe_site sites[MAX_PROBE_SITES];
	int n;
	char allocator[128];    /* e.g. "glibc 2.36 (/usr/lib/x86_64-linux-gnu/libc.so.6)" */
	char notes[1024];       /* what was skipped and why (deleted mappings, unreadable or
	                           missing objects, ifuncs...), "; "-separated, maybe empty */
};

#endif
