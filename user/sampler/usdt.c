/* The USDT probes otel_memory:alloc(ptr, size, weight) and otel_memory:free(ptr), the contract of
 * the OpenTelemetry eBPF profiler's memory design, as SystemTap SDT v3 notes written here.
 *
 * Why not <sys/sdt.h>: its probe instruction is a 1-byte nop, where the kernel can only trap
 * (int3, ~6 us per hit here). On a 5-byte nop (0f 1f 44 00 00) the kernel optimizes the uprobe
 * into a call (~1.5 us). The note format is the same, so every USDT reader (libbpf, bpftrace,
 * readelf -n) finds the probes:
 *   owner "stapsdt", type 3, desc = pc, .stapsdt.base's link-time address, semaphore address,
 *   "provider\0name\0args\0".
 * libbpf (usdt.c) moves pc by (.stapsdt.base's section address - the note's base), wants pc in
 * an executable PT_LOAD and the semaphore in a writable one (its file offset becomes the
 * uprobe's ref_ctr_offset), and parses "8@%rdi" as an 8-byte register argument.
 *
 * Each probe sits in its own noinline function, so there is one site per probe and the
 * arguments are pinned in the registers the note names (asm constraints D, S, d). */
#include "internal.h"

/* The semaphores: a tracer's uprobe ref_ctr raises them; a SIGKILLed tracer's are dropped by
 * the kernel. Section .probes (data, file-backed, writable) as <sys/sdt.h> places them. */
__attribute__((section(".probes"), used, visibility("default")))
volatile unsigned short otel_memory_alloc_semaphore = 0;
__attribute__((section(".probes"), used, visibility("default")))
volatile unsigned short otel_memory_free_semaphore = 0;
extern volatile unsigned short mts_alloc_sem
	__attribute__((alias("otel_memory_alloc_semaphore"), visibility("hidden")));
extern volatile unsigned short mts_free_sem
	__attribute__((alias("otel_memory_free_semaphore"), visibility("hidden")));

/* The prelink marker: one allocated byte whose link-time address every note records. */
__asm__(".pushsection .stapsdt.base,\"a\",@progbits\n"
	".hidden mts_stapsdt_base\n"
	"mts_stapsdt_base: .space 1\n"
	".size mts_stapsdt_base, 1\n"
	".popsection\n");

#define SDT_NOTE(name, sem, args)                                                   \
	".pushsection .note.stapsdt,\"\",@note\n"                                   \
	".balign 4\n"                                                               \
	".4byte 992f-991f, 994f-993f, 3\n"                                          \
	"991: .asciz \"stapsdt\"\n"                                                 \
	"992: .balign 4\n"                                                          \
	"993: .8byte 990b\n"                                                        \
	".8byte mts_stapsdt_base\n"                                                 \
	".8byte " sem "\n"                                                          \
	".asciz \"otel_memory\"\n"                                                  \
	".asciz \"" name "\"\n"                                                     \
	".asciz \"" args "\"\n"                                                     \
	"994: .balign 4\n"                                                          \
	".popsection\n"

#define NOP5 "990: .byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"

__attribute__((noinline, noclone, used, visibility("hidden")))
void mts_usdt_alloc(uint64_t ptr, uint64_t size, uint64_t weight)
{
	__asm__ volatile(NOP5 SDT_NOTE("alloc", "mts_alloc_sem", "8@%%rdi 8@%%rsi 8@%%rdx")
			 : : "D"(ptr), "S"(size), "d"(weight) : "memory");
}

__attribute__((noinline, noclone, used, visibility("hidden")))
void mts_usdt_free(uint64_t ptr)
{
	__asm__ volatile(NOP5 SDT_NOTE("free", "mts_free_sem", "8@%%rdi") : : "D"(ptr) : "memory");
}
