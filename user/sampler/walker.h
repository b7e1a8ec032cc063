/* The sampler's own thread for the walks after a dlopen it could not wrap (walker.c). */
#ifndef MEMTRACED_SAMPLER_WALKER_H
#define MEMTRACED_SAMPLER_WALKER_H

#include <stdbool.h>
#include "internal.h"

int mts_walker_start(void) HIDDEN;  /* 0 or -errno; a second start keeps the thread */
void mts_walker_stop(void) HIDDEN;  /* wakes it, joins it; before taking the patch lock */
void mts_walker_quit(void) HIDDEN;  /* tells it to end, no join (a lapse, on any call) */
void mts_walker_wake(void) HIDDEN;  /* a dlopen is under way: walk after it */
bool mts_walker_here(void) HIDDEN;  /* the thread runs in this process (not in a forked child) */
#endif
