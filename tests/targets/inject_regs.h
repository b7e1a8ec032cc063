/* A system call made with known values in registers the kernel preserves across it: rbx,
 * r12-r15, xmm0-xmm15 and MXCSR (round toward zero, not the default). If an injector
 * stops the thread in this call and does not put its state back exactly, the values read
 * after the call differ. */
#ifndef INJECT_REGS_H
#define INJECT_REGS_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct regblk {
	uint64_t gpr_in[5], gpr_out[5];
	uint8_t xmm_in[16][16], xmm_out[16][16];
	uint32_t mxcsr_in, mxcsr_out, mxcsr_saved;
};

#define XIN(n) "movdqu " #n "*16+%c[xi](%[b]), %%xmm" #n "\n\t"
#define XOUT(n) "movdqu %%xmm" #n ", " #n "*16+%c[xo](%[b])\n\t"

/* syscall(nr, a1, a2, a3, a4); *intact = 1 when every register came back unchanged. */
static long checked_syscall(long nr, long a1, long a2, long a3, long a4, int *intact)
{
	static struct regblk blk;
	struct regblk *b = &blk;
	for (int i = 0; i < 5; i++) b->gpr_in[i] = 0x1111111111111111ULL * (i + 1) ^ 0x0123456789abcdefULL;
	for (int i = 0; i < 16; i++)
		for (int k = 0; k < 16; k++) b->xmm_in[i][k] = (uint8_t)(i * 17 + k * 5 + 1);
	b->mxcsr_in = 0x1f80 | 0x6000; /* all exceptions masked, RC = toward zero */
	register long r10 __asm__("r10") = a4;
	long ret = nr;
	__asm__ volatile(
		"stmxcsr %c[ms](%[b])\n\t"
		"ldmxcsr %c[mi](%[b])\n\t"
		XIN(0) XIN(1) XIN(2) XIN(3) XIN(4) XIN(5) XIN(6) XIN(7)
		XIN(8) XIN(9) XIN(10) XIN(11) XIN(12) XIN(13) XIN(14) XIN(15)
		"mov 0+%c[gi](%[b]), %%rbx\n\t"
		"mov 8+%c[gi](%[b]), %%r12\n\t"
		"mov 16+%c[gi](%[b]), %%r13\n\t"
		"mov 24+%c[gi](%[b]), %%r14\n\t"
		"mov 32+%c[gi](%[b]), %%r15\n\t"
		"syscall\n\t"
		"mov %%rbx, 0+%c[go](%[b])\n\t"
		"mov %%r12, 8+%c[go](%[b])\n\t"
		"mov %%r13, 16+%c[go](%[b])\n\t"
		"mov %%r14, 24+%c[go](%[b])\n\t"
		"mov %%r15, 32+%c[go](%[b])\n\t"
		XOUT(0) XOUT(1) XOUT(2) XOUT(3) XOUT(4) XOUT(5) XOUT(6) XOUT(7)
		XOUT(8) XOUT(9) XOUT(10) XOUT(11) XOUT(12) XOUT(13) XOUT(14) XOUT(15)
		"stmxcsr %c[mo](%[b])\n\t"
		"ldmxcsr %c[ms](%[b])\n\t"
		: "+a"(ret), "+r"(r10)
		: "D"(a1), "S"(a2), "d"(a3), [b] "r"(b),
		  [gi] "i"(offsetof(struct regblk, gpr_in)), [go] "i"(offsetof(struct regblk, gpr_out)),
		  [xi] "i"(offsetof(struct regblk, xmm_in)), [xo] "i"(offsetof(struct regblk, xmm_out)),
		  [mi] "i"(offsetof(struct regblk, mxcsr_in)), [mo] "i"(offsetof(struct regblk, mxcsr_out)),
		  [ms] "i"(offsetof(struct regblk, mxcsr_saved))
		: "rcx", "r11", "rbx", "r12", "r13", "r14", "r15", "memory", "cc",
		  "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
		  "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
	*intact = memcmp(b->gpr_in, b->gpr_out, sizeof(b->gpr_in)) == 0 &&
	          memcmp(b->xmm_in, b->xmm_out, sizeof(b->xmm_in)) == 0 &&
	          b->mxcsr_in == b->mxcsr_out;
	return ret;
}
#endif
