/* The in-process sampler's frames. Its wrappers take the place of the allocation functions in
 * the program's GOT and are left out of the stacks; but the program called operator new there,
 * and under uprobes its stacks show operator new's frame (the probe is on the malloc it calls).
 * The rule that folds an allocating wrapper into its callers (user/format/heapview_wrappers.c)
 * needs that frame: without it the same program ranked its sites differently in the two modes
 * (issue 38). So the wrapper's frame is replaced by operator new's (STACKS_SAMPLER_FRAME in
 * stacks_int.h, put by stacks_dwfl.c, named by stacks.c); the C functions' probes sit on their
 * entry in both modes, whose frame neither shows. */
#ifndef MEMTRACED_STACKS_SAMPLER_H
#define MEMTRACED_STACKS_SAMPLER_H

/* The operator new that the sampler's function of this name stands for (an index), or -1. */
int sampler_new_index(const char *symbol);
/* Its name, as libstdc++ names it; NULL for no such index. */
const char *sampler_new_name(int i);

#endif
