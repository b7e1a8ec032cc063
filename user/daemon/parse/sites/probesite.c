/* Choosing probe sites the x86-64 kernel emulates instead of single-stepping.
 *
 * A uprobe hit traps (int3). The kernel then either emulates the original instruction
 * (arch/x86/kernel/uprobes.c: branch_setup_xol_ops for nop/jmp/call/jcc, push_setup_xol_ops
 * for push reg) or copies it to an out-of-line slot and single-steps it, a second trap: on
 * this machine an emulated hit costs ~6-7 us, a single-stepped one ~24 us (kernel-facts.md).
 *
 * Allocating functions need a return probe, which must be planted at the entry (the return
 * address is at [rsp] only there), so they are probed at their entry whatever it is. free needs
 * no return probe: glibc's free starts with `test %rdi,%rdi` (single-stepped) then `je`; the
 * instruction after the branch (free+9 in glibc 2.36, a `push %rbp`) is emulated, and free(NULL)
 * then never traps at all. %rdi is unchanged there, so the probe still sees the pointer.
 * Other free-likes (jemalloc's free starts with `mov %rdi,%rax`, tcmalloc's with a load) get
 * the first emulated instruction of their straight-line start: the first conditional branch
 * (jemalloc free+0x30, tcmalloc free+0xa), a push or a call. */
#include <capstone/capstone.h>
#include <string.h>

#include "probesite.h"

/* Legacy prefixes the kernel refuses outright (is_prefix_bad): no uprobe can go there. */
static bool prefix_is_bad(uint8_t b)
{
	return b == 0x26 || b == 0x2e || b == 0x36 || b == 0x3e || b == 0xf0;
}

static bool is_legacy_prefix(uint8_t b)
{
	return prefix_is_bad(b) || b == 0x64 || b == 0x65 || b == 0x66 || b == 0x67 || b == 0xf2 ||
	       b == 0xf3;
}

bool probe_insn_emulated(const uint8_t *insn, size_t len)
{
	size_t i = 0;
	bool opsize = false, rep = false;
	uint8_t rex = 0;

	while (i < len && is_legacy_prefix(insn[i])) {
		if (prefix_is_bad(insn[i])) return false;
		if (insn[i] == 0x66) opsize = true;
		if (insn[i] == 0xf3) rep = true;
		i++;
	}
	if (i < len && (insn[i] & 0xf0) == 0x40) rex = insn[i++];
	if (i >= len) return false;
	uint8_t op = insn[i];

	/* nop: "prefix* + nop; same as jmp with .offs = 0". 41 90 is xchg %eax,%r8d and f3 90 is
	 * pause, not nops. Multi-byte nops (0f 1f) are emulated only by kernels with
	 * insn_is_nop(); counted as single-stepped to stay on the safe side. */
	if (op == 0x90) return !(rex & 1) && !rep;

	/* Branches: jmp rel8/rel32, call rel32, jcc rel8/rel32; a 0x66 prefix is rejected. */
	bool branch = op == 0xeb || op == 0xe9 || op == 0xe8 || (op >= 0x70 && op <= 0x7f) ||
	              (op == 0x0f && i + 1 < len && insn[i + 1] >= 0x80 && insn[i + 1] <= 0x8f);
	if (branch) return !opsize;

	/* push reg: one byte, or two with exactly the REX prefix 0x41 (push %r8..%r15). */
	if (op >= 0x50 && op <= 0x57) return len == 1 || (len == 2 && i == 1 && rex == 0x41);
	return false;
}

static bool is_endbr64(const cs_insn *in)
{
	static const uint8_t endbr64[4] = { 0xf3, 0x0f, 0x1e, 0xfa };
	return in->size == 4 && memcmp(in->bytes, endbr64, 4) == 0;
}

static bool is_test_rdi_rdi(const cs_insn *in)
{
	if (in->id != X86_INS_TEST || !in->detail) return false;
	const cs_x86 *x = &in->detail->x86;
	return x->op_count == 2 && x->operands[0].type == X86_OP_REG &&
	       x->operands[0].reg == X86_REG_RDI && x->operands[1].type == X86_OP_REG &&
	       x->operands[1].reg == X86_REG_RDI;
}

static bool is_direct_je(const cs_insn *in)
{
	return in->id == X86_INS_JE && in->detail && in->detail->x86.op_count == 1 &&
	       in->detail->x86.operands[0].type == X86_OP_IMM;
}

/* Does any direct jump or call decoded in the function land in [lo, hi]? A site at hi,
 * after straight-line code from lo, would then also be reached on that path (e.g. a loop
 * back), more than once per call. Linear sweep; it stops at the first byte capstone cannot
 * decode. */
static bool function_branches_into(csh cs, const uint8_t *code, size_t len, uint64_t vaddr,
                                   uint64_t lo, uint64_t hi)
{
	cs_insn *in = cs_malloc(cs);
	const uint8_t *p = code;
	size_t left = len;
	uint64_t addr = vaddr;
	bool found = false;
	if (!in) return true;   /* cannot check: be conservative */
	while (!found && cs_disasm_iter(cs, &p, &left, &addr, in)) {
		if (!in->detail) continue;
		bool is_branch = false;
		for (int g = 0; g < in->detail->groups_count; g++) {
			uint8_t grp = in->detail->groups[g];
			if (grp == CS_GRP_JUMP || grp == CS_GRP_CALL) is_branch = true;
		}
		const cs_x86 *x = &in->detail->x86;
		if (is_branch && x->op_count == 1 && x->operands[0].type == X86_OP_IMM &&
		    (uint64_t)x->operands[0].imm >= lo && (uint64_t)x->operands[0].imm <= hi)
			found = true;
	}
	cs_free(in, 1);
	return found;
}

static bool is_control_flow(const cs_insn *in)
{
	if (!in->detail) return true;
	for (int g = 0; g < in->detail->groups_count; g++) {
		uint8_t grp = in->detail->groups[g];
		if (grp == CS_GRP_JUMP || grp == CS_GRP_CALL || grp == CS_GRP_RET ||
		    grp == CS_GRP_INT || grp == CS_GRP_IRET)
			return true;
	}
	return false;
}

/* The 64-bit register that reg is a part of (X86_REG_EDI -> X86_REG_RDI...), or reg. */
static unsigned full_reg(unsigned reg)
{
	static const unsigned parts[][5] = {
		{X86_REG_RDI, X86_REG_EDI, X86_REG_DI, X86_REG_DIL, 0},
		{X86_REG_RSI, X86_REG_ESI, X86_REG_SI, X86_REG_SIL, 0},
		{X86_REG_RDX, X86_REG_EDX, X86_REG_DX, X86_REG_DL, X86_REG_DH},
		{X86_REG_RCX, X86_REG_ECX, X86_REG_CX, X86_REG_CL, X86_REG_CH},
		{X86_REG_RSP, X86_REG_ESP, X86_REG_SP, X86_REG_SPL, 0},
	};
	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
		for (int j = 0; j < 5; j++)
			if (parts[i][j] && parts[i][j] == reg) return parts[i][0];
	return reg;
}

/* Does the instruction write one of the registers in `regs` (64-bit names, 0-terminated), or a
 * part of one, explicitly or implicitly (push and call write %rsp)? Unknown: yes. */
static bool writes_any(csh cs, const cs_insn *in, const unsigned *regs)
{
	cs_regs rd, wr;
	uint8_t nrd = 0, nwr = 0;
	if (cs_regs_access(cs, in, rd, &nrd, wr, &nwr) != CS_ERR_OK) return true;
	for (int i = 0; i < nwr; i++)
		for (const unsigned *r = regs; *r; r++)
			if (full_reg(wr[i]) == *r) return true;
	return false;
}

static bool writes_rdi(csh cs, const cs_insn *in)
{
	static const unsigned rdi[] = {X86_REG_RDI, 0};
	return writes_any(cs, in, rdi);
}

/* What an allocating function's entry probe reads must be as at the entry where it is placed:
 * the arguments (at most four) and %rsp, where the return address is that the session return
 * probe replaces. */
static bool writes_entry_state(csh cs, const cs_insn *in)
{
	static const unsigned state[] = {X86_REG_RDI, X86_REG_RSI, X86_REG_RDX, X86_REG_RCX,
					 X86_REG_RSP, 0};
	return writes_any(cs, in, state);
}

/* How far a free-like probe may move from the entry (instructions, bytes decoded). */
#define SCAN_INSNS 24
#define SCAN_BYTES 128

uint64_t probe_site_choose(enum alloc_fn fn, const uint8_t *code, size_t len,
                           uint64_t entry_vaddr, uint64_t fn_size, bool *emulated)
{
	csh cs;
	cs_insn *insns = NULL;
	uint64_t chosen = 0;
	bool chosen_emulated = false;

	if (emulated) *emulated = false;
	if (!code || len == 0) return 0;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK) return 0;
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);

	size_t head = len < SCAN_BYTES ? len : SCAN_BYTES;
	size_t n = cs_disasm(cs, code, head, entry_vaddr, SCAN_INSNS, &insns);
	if (n == 0) goto out;   /* unknown code: the entry, single-stepped */
	chosen_emulated = probe_insn_emulated(insns[0].bytes, insns[0].size);
	if (chosen_emulated) goto out; /* an emulated entry is already the cheapest site */
	size_t fn_len = fn_size && fn_size < len ? fn_size : len;
	/* Walk the straight-line code from the entry: every call runs it, so the first
	 * instruction the kernel emulates is as good a site as the entry, provided what the probe
	 * reads is still as at the entry and nothing else in the function jumps to it or to the
	 * code leading to it.
	 * - Free-likes: %rdi still holds the pointer. Preferred: the instruction after a
	 *   `test %rdi,%rdi; je` NULL test (free(NULL) then never traps).
	 * - Allocating functions: the argument registers untouched and %rsp unmoved (the return
	 *   address stays at [rsp] for the return probe). jemalloc's malloc begins with `cmp
	 *   $0x1000,%rdi`, single-stepped; its `ja` after it is emulated. */
	bool is_free = alloc_fn_is_free(fn);
	for (size_t i = 0; i < n; i++) {
		const cs_insn *in = &insns[i];
		if (i == 0 && is_endbr64(in)) continue;
		if (is_free && is_test_rdi_rdi(in) && i + 2 < n && is_direct_je(&insns[i + 1]) &&
		    probe_insn_emulated(insns[i + 2].bytes, insns[i + 2].size) &&
		    !function_branches_into(cs, code, fn_len, entry_vaddr, entry_vaddr + 1,
		                            insns[i + 2].address)) {
			chosen = insns[i + 2].address - entry_vaddr;
			chosen_emulated = true;
			break;
		}
		if (probe_insn_emulated(in->bytes, in->size)) {
			if (!function_branches_into(cs, code, fn_len, entry_vaddr, entry_vaddr + 1,
			                            in->address)) {
				chosen = in->address - entry_vaddr;
				chosen_emulated = true;
			}
			break;
		}
		if (is_control_flow(in) || (is_free ? writes_rdi(cs, in) : writes_entry_state(cs, in)))
			break;
	}
out:
	if (insns) cs_free(insns, n);
	cs_close(&cs);
	if (emulated) *emulated = chosen_emulated;
	return chosen;
}
