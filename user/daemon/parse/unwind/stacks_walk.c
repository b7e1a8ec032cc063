/* One walk of a sample's stack into s->frames: an earlier sample's remembered (unwind_memo.h),
 * else libdw's (dwfl_getthread_frames through the callbacks of stacks_dwfl.c), remembered when
 * its frames' CFI allows. */
#include "stacks_int.h"

#include <stdlib.h>
#include <string.h>

/* How the frame at pc finds its CFA: 1 stack pointer + constant, 2 frame pointer + constant,
 * 0 otherwise or not known (cached per pc, forgotten with the memo). */
static int cfa_kind(struct stacks *s, uint64_t pc)
{
	uint64_t got = u64map_get(&s->cfa_kinds, pc);
	if (got) return (int)got - 1;
	int kind = 0;
	Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, pc);
	Dwarf_Addr bias = 0;
	Dwarf_CFI *cfis[2] = {mod ? dwfl_module_eh_cfi(mod, &bias) : NULL, NULL};
	Dwarf_Addr bias2 = 0;
	if (mod) cfis[1] = dwfl_module_dwarf_cfi(mod, &bias2);
	for (int i = 0; i < 2 && !kind; i++) {
		Dwarf_Frame *f = NULL;
		if (!cfis[i] || dwarf_cfi_addrframe(cfis[i], pc - (i ? bias2 : bias), &f) != 0) continue;
		Dwarf_Op *ops = NULL;
		size_t nops = 0;
		if (dwarf_frame_cfa(f, &ops, &nops) == 0 && nops == 1) {
			/* libdw gives a register + offset rule as DW_OP_bregx reg, offset */
			int reg = ops[0].atom == DW_OP_bregx ? (int)ops[0].number
				  : ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31 ? ops[0].atom - DW_OP_breg0
				  : -1;
			kind = reg == 7 ? 1 : reg == 6 ? 2 : 0;
		}
		free(f);
		break; /* the CFI libdw would use (eh_frame first) */
	}
	u64map_put(&s->cfa_kinds, pc, (uint64_t)kind + 1);
	return kind;
}

/* Whether, and how, the unwind just made can be remembered (unwind_memo.h). */
static enum memo_keep memo_how(struct stacks *s)
{
	int n;
	const uint64_t *pcs = memo_visits(&s->memo, &n);
	if (!pcs) return MEMO_DONT;
	enum memo_keep how = MEMO_BY_SP;
	for (int i = 0; i < n; i++) {
		int k = cfa_kind(s, pcs[i]);
		if (k == 0) return MEMO_DONT;
		if (k == 2) how = MEMO_BY_SP_AND_FP;
	}
	return how;
}

int stacks_walk(struct stacks *s)
{
	s->truncated = false;
	s->frames_capped = false;
	s->frame_index = 0;
	s->nframes = 0;
	s->hidden = NULL;
	s->max_read = 0;
	_Static_assert(sizeof(struct frame_pc) == sizeof(uint64_t), "frames are their pcs");
	uint64_t pc = s->regs[16], sp = s->regs[7], fp = s->regs[6];
	struct memo_result r = {.pcs = (uint64_t *)s->frames};
	static int memo_off = -1; /* MEMTRACED_UNWIND_MEMO=off: every sample walked (tests compare) */
	if (memo_off < 0) {
		const char *v = getenv("MEMTRACED_UNWIND_MEMO");
		memo_off = v && strcmp(v, "off") == 0;
	}
	if (memo_off) return dwfl_getthread_frames(s->dwfl, s->tid, stacks_cb_frame, s);
	if (memo_replay(&s->memo, (int)s->start, pc, sp, fp, s->stack, s->stack_len, &r, MAX_FRAMES)) {
		s->frames_capped = r.frames_capped;
		s->max_read = r.max_read;
		s->nframes = r.nframes;
		s->stats.remembered++;
		return r.rc;
	}
	memo_begin(&s->memo);
	int rc = dwfl_getthread_frames(s->dwfl, s->tid, stacks_cb_frame, s);
	r = (struct memo_result){.rc = rc, .frames_capped = s->frames_capped, .max_read = s->max_read,
				 .nframes = s->nframes, .pcs = (uint64_t *)s->frames};
	memo_end(&s->memo, (int)s->start, pc, sp, fp, &r, memo_how(s));
	return rc;
}

/* Is pc in a process's or a thread's first function? libdw may fail to go past one (no CFI
 * that says "outermost", a frame pointer of 0): the stack reached its end all the same. */
bool stacks_at_entry_point(struct stacks *s, Dwarf_Addr pc)
{
	static const char *const entries[] = {"_start", "_dl_start_user", "__clone3", "__clone",
					      "clone3", "clone", "start_thread", NULL};
	Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, pc);
	struct object *o = mod ? stacks_module_object(s, mod) : NULL;
	if (!o || o->depth == SYMBOLIZE_OFFSET)
		return false;
	symindex_build(&o->syms, mod);
	const char *name = symindex_find(&o->syms, pc);
	for (int i = 0; name && entries[i]; i++)
		if (strcmp(name, entries[i]) == 0)
			return true;
	return false;
}
