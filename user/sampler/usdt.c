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
 * arguments are pinned in the registers the note names (asm constraints D, S, d).
 *
 * A forked child (issue 47: PostgreSQL's backends died of SIGSEGV at once, and the server shut
 * down): a kernel that optimizes the uprobe makes the site a `call` into its
 * [uprobes-trampoline] page, which fork does not copy (seen on 6.18). The child inherits the
 * call without the page: its first probe jumped to an unmapped page-aligned address. So from
 * fork's prepare to the child's handler no probe fires (mts_usdt_held), and the child's handler
 * puts the nop back where the call leads nowhere (the kernel puts its own breakpoint there
 * again if the child is traced). */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
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

#define NOP5(site) ".globl " site "\n.hidden " site "\n" site ":\n" \
	"990: .byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"

volatile int mts_usdt_held;

__attribute__((noinline, noclone, used, visibility("hidden")))
void mts_usdt_alloc(uint64_t ptr, uint64_t size, uint64_t weight)
{
	if (unlikely(mts_usdt_held))
		return;
	__asm__ volatile(NOP5("mts_usdt_alloc_site")
			 SDT_NOTE("alloc", "mts_alloc_sem", "8@%%rdi 8@%%rsi 8@%%rdx")
			 : : "D"(ptr), "S"(size), "d"(weight) : "memory");
}

__attribute__((noinline, noclone, used, visibility("hidden")))
void mts_usdt_free(uint64_t ptr)
{
	if (unlikely(mts_usdt_held))
		return;
	__asm__ volatile(NOP5("mts_usdt_free_site") SDT_NOTE("free", "mts_free_sem", "8@%%rdi")
			 : : "D"(ptr) : "memory");
}

extern const unsigned char mts_usdt_alloc_site[] HIDDEN, mts_usdt_free_site[] HIDDEN;

/* The 5 bytes at site put back to the nop when the kernel made the site a call into a page this
 * process does not have. /proc/self/mem writes through the text's protection (as a debugger
 * does); else the page is made writable for the write. */
static void unoptimize(const unsigned char *site)
{
	static const unsigned char nop5[5] = {0x0f, 0x1f, 0x44, 0x00, 0x00};
	if (site[0] != 0xe8)
		return; /* the nop, or the kernel's int3: the kernel handles those in a child */
	int32_t rel;
	memcpy(&rel, site + 1, 4);
	uintptr_t target = (uintptr_t)site + 5 + (intptr_t)rel;
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char v;
	if (mincore((void *)(target & ~(uintptr_t)(pg - 1)), 1, &v) == 0)
		return; /* the trampoline is mapped here: the call works */
	int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	bool done = fd >= 0 && pwrite(fd, nop5, 5, (off_t)(uintptr_t)site) == 5;
	if (fd >= 0)
		close(fd);
	if (done)
		return;
	void *page = (void *)((uintptr_t)site & ~(uintptr_t)(pg - 1));
	size_t len = ((uintptr_t)site + 5 - (uintptr_t)page + pg - 1) & ~(size_t)(pg - 1);
	if (mprotect(page, len, PROT_READ | PROT_WRITE | PROT_EXEC) == 0) {
		memcpy((void *)site, nop5, 5);
		mprotect(page, len, PROT_READ | PROT_EXEC);
	}
}

void mts_usdt_fork_child(void)
{
	unoptimize(mts_usdt_alloc_site);
	unoptimize(mts_usdt_free_site);
}
