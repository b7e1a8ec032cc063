/* Allocation functions that only forward to another one (sites/ private). */
#ifndef MEMTRACED_SITES_FORWARDER_H
#define MEMTRACED_SITES_FORWARDER_H
#include "alloc_defs.h"

/* The allocation function (another one than fn) that defs[fn] calls or jumps to, directly,
 * through the PLT or through the GOT: then fn only forwards and is not probed. -1 if none. */
int alloc_forwarding_target(const struct elfobj *o, const struct fn_def defs[AF_COUNT],
			    enum alloc_fn fn);

#endif
