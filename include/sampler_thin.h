/* Backpressure at the source (issue 37): the word through which memtraced lowers the in-process
 * sampler's rate (user/sampler/record.c reads it, user/daemon/core/process/session_intake.c
 * writes it into the target's memory). Exported by the library as the data symbol
 * `memtraced_sampler_thin`. Part of MEMTRACED_SAMPLER_VERSION. */
#ifndef MEMTRACED_SAMPLER_THIN_H
#define MEMTRACED_SAMPLER_THIN_H

/* "mtmdthin": memtraced writes k only where it reads this first (a process that has just
 * exec'd has another program at that address) */
#define MEMTRACED_SAMPLER_THIN_MAGIC 0x6e696874646d746dULL

struct memtraced_sampler_thin {
	unsigned long long magic;
	volatile unsigned int k; /* at offset 8: 1 in k samples kept, weight x k; 1 = all */
};

#endif
