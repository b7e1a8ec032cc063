/* The agent's machine code (see agent.h): copied by memtraced into a code cave of the target
 * (the unused tail of an executable segment's last page, written through /proc/PID/mem), with
 * its data block right after it.
 *
 * The stub runs on an application thread whose registers memtraced left as they were but for
 * rip (here) and rax (the value the program must see at its resume address). It needs nothing
 * from memtraced once it runs: it saves every register, the flags and the FP/SSE/AVX state on
 * the thread's own stack below the red zone, blocks all signals but glibc's SIGCANCEL and
 * SIGSETXID, does one operation (a raw
 * mmap or munmap, or pthread_create of the agent thread with a 256 KiB stack), puts the signal mask, the FP state,
 * the registers and the flags back, and returns to the resume address with `ret 128`, which
 * also gives back the red zone. Its data block is read only before the operation's visible
 * effect, so memtraced may write the next one as soon as it sees that effect.
 *
 * The worker is the agent thread's start routine (rdi = the region, include/inject_agent.h):
 * it detaches itself, dlopens the library, finds memtraced_sampler_agent, calls it with the
 * region, copies dlerror() on failure, and writes the job number to region->done. The thread
 * starts with every signal blocked but glibc's two (the stub's mask), so none of the
 * program's handlers runs on it. */
#include "agent.h"
#include "inject_agent.h"

#define XSTR(x) STR(x)
#define STR(x) #x

__asm__(
	".pushsection .rodata.inject_agent,\"a\"\n"
	".intel_syntax noprefix\n"
	".p2align 6\n"
	".globl inject_agent_blob\n"
	"inject_agent_blob:\n"
	/* ---- the stub ---- */
	"	lea rsp, [rsp - 128]\n"
	"	push qword ptr [rip + .Ldata + 0]\n"  /* the resume address, popped by ret 128 */
	"	pushfq\n"
	"	push rax\n push rcx\n push rdx\n push rbx\n push rbp\n push rsi\n push rdi\n"
	"	push r8\n push r9\n push r10\n push r11\n push r12\n push r13\n push r14\n push r15\n"
	"	mov rbp, rsp\n"
	"	cld\n"
	"	mov r12, [rip + .Ldata + 8]\n"        /* op */
	"	mov r13, [rip + .Ldata + 16]\n"       /* a0 */
	"	mov r14, [rip + .Ldata + 24]\n"       /* a1 */
	"	mov r15, [rip + .Ldata + 32]\n"       /* a2 */
	"	mov rbx, [rip + .Ldata + 40]\n"       /* pthread_create */
	"	mov rcx, [rip + .Ldata + 48]\n"       /* XSAVE area size, 0: FXSAVE */
	"	mov rax, rcx\n"
	"	test rax, rax\n"
	"	jnz 1f\n"
	"	mov eax, 512\n"
	"1:	sub rsp, rax\n"
	"	sub rsp, 64\n"
	"	and rsp, -64\n"
	"	xor eax, eax\n"                        /* XRSTOR wants a clean XSAVE header */
	"	mov [rsp + 512], rax\n mov [rsp + 520], rax\n mov [rsp + 528], rax\n mov [rsp + 536], rax\n"
	"	mov [rsp + 544], rax\n mov [rsp + 552], rax\n mov [rsp + 560], rax\n mov [rsp + 568], rax\n"
	"	test rcx, rcx\n"
	"	jz 2f\n"
	"	mov eax, -1\n"
	"	mov edx, -1\n"
	"	xsave64 [rsp]\n"
	"	jmp 3f\n"
	"2:	fxsave64 [rsp]\n"
	"3:	sub rsp, 16\n"
	"	mov [rsp], rcx\n"
	"	sub rsp, 16\n"
	/* every signal blocked but glibc's own SIGCANCEL (32) and SIGSETXID (33), which glibc never
	 * lets a thread block: a thread in setuid()/seteuid() holds ld.so's stack-cache lock
	 * until every thread took SIGSETXID, and our pthread_create waits for that lock (issue
	 * 47: a daemon that switched its euid during the attach hung for ever) */
	"	mov rax, 0xfffffffe7fffffff\n"
	"	mov [rsp + 8], rax\n"
	"	mov eax, 14\n"                          /* rt_sigprocmask(SIG_SETMASK, &all, &old, 8) */
	"	mov edi, 2\n"
	"	lea rsi, [rsp + 8]\n"
	"	mov rdx, rsp\n"
	"	mov r10d, 8\n"
	"	syscall\n"
	"	cmp r12, 1\n"
	"	jne 4f\n"
	/* mmap(a0, a1, RW, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) */
	"	mov eax, 9\n"
	"	mov rdi, r13\n"
	"	mov rsi, r14\n"
	"	mov edx, 3\n"
	"	mov r10d, 0x100022\n"
	"	mov r8, -1\n"
	"	xor r9d, r9d\n"
	"	syscall\n"
	"	cmp rax, r13\n"
	"	jne 9f\n"
	"	mov [rax], r15\n"                       /* the nonce: the region is memtraced's */
	"	jmp 9f\n"
	"4:	cmp r12, 2\n"
	"	jne 5f\n"
	/* pthread_attr_init(&region->attr); pthread_attr_setstacksize(&region->attr, size);
	 * pthread_create(&region->tid, &region->attr, worker, region); then stub_done = the
	 * job number */
	"	lea rdi, [r13 + " XSTR(INJECT_AGENT_OFF_ATTR) "]\n"
	"	call qword ptr [r13 + " XSTR(INJECT_AGENT_OFF_ATTR_INIT) "]\n"
	"	lea rdi, [r13 + " XSTR(INJECT_AGENT_OFF_ATTR) "]\n"
	"	mov rsi, [r13 + " XSTR(INJECT_AGENT_OFF_STACK_SIZE) "]\n"
	"	call qword ptr [r13 + " XSTR(INJECT_AGENT_OFF_ATTR_SETSTACKSIZE) "]\n"
	"	lea rdi, [r13 + " XSTR(INJECT_AGENT_OFF_TID) "]\n"
	"	lea rsi, [r13 + " XSTR(INJECT_AGENT_OFF_ATTR) "]\n"
	"	lea rdx, [rip + .Lworker]\n"
	"	mov rcx, r13\n"
	"	call rbx\n"
	"	mov [r13 + " XSTR(INJECT_AGENT_OFF_CREATE_RET) "], rax\n"
	"	mov [r13 + " XSTR(INJECT_AGENT_OFF_STUB_DONE) "], r14\n"
	"	jmp 9f\n"
	"5:	cmp r12, 3\n"
	"	jne 9f\n"
	"	mov eax, 11\n"                          /* munmap(a0, a1) */
	"	mov rdi, r13\n"
	"	mov rsi, r14\n"
	"	syscall\n"
	"9:	mov eax, 14\n"                          /* the thread's own mask back */
	"	mov edi, 2\n"
	"	mov rsi, rsp\n"
	"	xor edx, edx\n"
	"	mov r10d, 8\n"
	"	syscall\n"
	"	add rsp, 16\n"
	"	mov rcx, [rsp]\n"
	"	add rsp, 16\n"
	"	test rcx, rcx\n"
	"	jz 6f\n"
	"	mov eax, -1\n"
	"	mov edx, -1\n"
	"	xrstor64 [rsp]\n"
	"	jmp 7f\n"
	"6:	fxrstor64 [rsp]\n"
	"7:	mov rsp, rbp\n"
	"	pop r15\n pop r14\n pop r13\n pop r12\n pop r11\n pop r10\n pop r9\n pop r8\n"
	"	pop rdi\n pop rsi\n pop rbp\n pop rbx\n pop rdx\n pop rcx\n pop rax\n"
	"	popfq\n"
	"	ret 128\n"
	/* ---- the agent thread's start routine ---- */
	".p2align 4\n"
	".Lworker:\n"
	"	push rbx\n push r12\n push r13\n"
	"	mov rbx, rdi\n"
	"	call qword ptr [rbx + " XSTR(INJECT_AGENT_OFF_FNS) "]\n"       /* pthread_self */
	"	mov rdi, rax\n"
	"	call qword ptr [rbx + " XSTR(INJECT_AGENT_OFF_FNS) " + 8]\n"   /* pthread_detach */
	"	lea rdi, [rbx + " XSTR(INJECT_AGENT_OFF_PATH) "]\n"
	"	mov rsi, [rbx + " XSTR(INJECT_AGENT_OFF_DL_FLAGS) "]\n"
	"	call qword ptr [rbx + " XSTR(INJECT_AGENT_OFF_FNS) " + 16]\n"  /* dlopen */
	"	mov [rbx + " XSTR(INJECT_AGENT_OFF_HANDLE) "], rax\n"
	"	test rax, rax\n"
	"	jz 1f\n"
	"	mov rdi, rax\n"
	"	lea rsi, [rbx + " XSTR(INJECT_AGENT_OFF_NAME) "]\n"
	"	call qword ptr [rbx + " XSTR(INJECT_AGENT_OFF_FNS) " + 24]\n"  /* dlsym */
	"	mov [rbx + " XSTR(INJECT_AGENT_OFF_AGENT) "], rax\n"
	"	test rax, rax\n"
	"	jz 1f\n"
	"	mov rdi, rbx\n"
	"	call rax\n"
	"	jmp 2f\n"
	"1:	call qword ptr [rbx + " XSTR(INJECT_AGENT_OFF_FNS) " + 32]\n"  /* dlerror */
	"	test rax, rax\n"
	"	jz 2f\n"
	"	lea rdi, [rbx + " XSTR(INJECT_AGENT_OFF_ERRMSG) "]\n"
	"	mov ecx, 255\n"
	"3:	mov dl, [rax]\n"
	"	mov [rdi], dl\n"
	"	test dl, dl\n"
	"	jz 2f\n"
	"	inc rax\n"
	"	inc rdi\n"
	"	dec ecx\n"
	"	jnz 3b\n"
	"	mov byte ptr [rdi], 0\n"
	"2:	mov rax, [rbx + " XSTR(INJECT_AGENT_OFF_SEQ) "]\n"
	"	mov [rbx + " XSTR(INJECT_AGENT_OFF_DONE) "], rax\n"
	"	pop r13\n pop r12\n pop rbx\n"
	"	xor eax, eax\n"
	"	ret\n"
	".p2align 3\n"
	".Ldata:\n"
	".globl inject_agent_blob_data\n"
	"inject_agent_blob_data:\n"
	"	.zero " XSTR(AGENT_DATA_BYTES) "\n"
	".globl inject_agent_blob_end\n"
	"inject_agent_blob_end:\n"
	".att_syntax prefix\n"
	".popsection\n");
