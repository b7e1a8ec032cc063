/* The sampler library's check of its own GOT redirections (user/sampler/got.c), read by
 * memtraced through the target's memory at the exported data symbol memtraced_sampler_check
 * (user/daemon/core/inject/sampler_ctl.c). Its layout is part of MEMTRACED_SAMPLER_VERSION. */
#ifndef MEMTRACED_SAMPLER_CHECK_H
#define MEMTRACED_SAMPLER_CHECK_H

#define SAMPLER_CHECK_KEEP 4

/* After each walk that redirected slots (start, a dlopen): the slots of the loaded objects
 * that name a wrapped function, and among them those that still lead to a traced function
 * (its definition, the program's canonical PLT address for it, or a lazy-binding stub that
 * ld.so will bind to it) instead of to the sampler. */
struct memtraced_sampler_check {
	unsigned long walks;      /* checks done (0: never started) */
	unsigned long checked;    /* slots naming a wrapped function */
	unsigned long missed;     /* ... still leading to the traced function: not sampled */
	unsigned long own;        /* ... bound to their own object's definition (a plugin with an
	                           * allocator of its own, RTLD_DEEPBIND): left alone on purpose */
	unsigned long missed_slot[SAMPLER_CHECK_KEEP]; /* the first missed slots' addresses */
	unsigned long other_ns;   /* objects in another link-map namespace (dlmopen): not in
	                           * dl_iterate_phdr's list, calling their own copy of the
	                           * allocator, never through a slot the sampler redirects */
};

#endif
