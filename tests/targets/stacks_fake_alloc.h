/* fake_alloc(): stands for an allocation function probed at its entry, for the stacks test
 * workloads. It stops the whole process (tgkill(getpid(), gettid(), SIGSTOP) by raw syscalls:
 * sent to the calling thread, so that this thread, not another one, takes the signal and stops
 * right here; a process-wide kill() would let it run on while another thread handles the
 * stop) without touching the stack: at the stop rsp is exactly as at its entry, with the caller's return
 * address at [rsp], which is what the BPF probe on malloc's entry captures. */
#ifndef STACKS_FAKE_ALLOC_H
#define STACKS_FAKE_ALLOC_H

#ifdef __cplusplus
extern "C" long fake_alloc(long size);
#else
long fake_alloc(long size);
#endif

__asm__(".text\n"
	".globl fake_alloc\n"
	".type fake_alloc, @function\n"
	"fake_alloc:\n"
	".cfi_startproc\n"
	"	mov %rdi, %r8\n"
	"	mov $39, %eax\n" /* getpid */
	"	syscall\n"
	"	mov %eax, %r9d\n"
	"	mov $186, %eax\n" /* gettid */
	"	syscall\n"
	"	mov %eax, %esi\n"
	"	mov %r9d, %edi\n"
	"	mov $19, %edx\n" /* SIGSTOP */
	"	mov $234, %eax\n" /* tgkill */
	"	syscall\n"
	"	mov %r8, %rax\n"
	"	ret\n"
	".cfi_endproc\n"
	".size fake_alloc, .-fake_alloc\n");

/* Keeps the compiler from folding calls into tail calls or accumulator loops. */
#define KEEP(x) __asm__ volatile("" : "+r"(x))
#define NOIPA __attribute__((noipa))

#endif
