/* Does an allocation function only forward to another one? libstdc++'s operator new calls
 * malloc (through the PLT), jemalloc's operator delete is `jmp free@plt`, mimalloc's sized
 * delete jumps to mi_free (the same entry as its free). Probing both the forwarder and the
 * callee would trap twice per call and count the allocation twice unless the nest guard
 * catches it; the callee's probe alone sees every call, so forwarders are not probed.
 *
 * The function's code is swept linearly (capstone); a forwarder has a call or jump to
 * - the entry of another allocation function defined in the same object (static programs:
 *   operator new calling malloc directly), or
 * - a PLT stub or GOT slot (-fno-plt) whose relocation names an allocation function, or a
 *   function of this object at the entry of one (mi_free is free).
 * */
#include <capstone/capstone.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "forwarder.h"

struct got_slot {
	uint64_t addr;
	const char *name;   /* owned by libelf, valid while the object is open */
	uint64_t value;     /* the symbol's own definition in this object, or 0 */
};

struct slots {
	struct got_slot *s;
	size_t n, cap;
};

/* R_X86_64_JUMP_SLOT and R_X86_64_GLOB_DAT relocations: GOT slot -> symbol. */
static void read_slots(const struct elfobj *o, struct slots *out)
{
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(o->elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || sh.sh_entsize == 0) continue;
		Elf_Scn *symscn = elf_getscn(o->elf, sh.sh_link);
		GElf_Shdr symsh;
		Elf_Data *rel = elf_getdata(scn, NULL), *syms = symscn ? elf_getdata(symscn, NULL) : NULL;
		if (!rel || !syms || !gelf_getshdr(symscn, &symsh)) continue;
		size_t n = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; i < n; i++) {
			GElf_Rela r;
			GElf_Sym sym;
			if (!gelf_getrela(rel, i, &r)) break;
			unsigned type = GELF_R_TYPE(r.r_info);
			if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
			if (!gelf_getsym(syms, GELF_R_SYM(r.r_info), &sym)) continue;
			const char *name = elf_strptr(o->elf, symsh.sh_link, sym.st_name);
			if (!name || !name[0]) continue;
			if (out->n == out->cap) {
				size_t cap = out->cap ? out->cap * 2 : 256;
				struct got_slot *grown = realloc(out->s, cap * sizeof(*grown));
				if (!grown) return;
				out->s = grown;
				out->cap = cap;
			}
			out->s[out->n++] = (struct got_slot){ .addr = r.r_offset, .name = name,
			                                      .value = sym.st_shndx != SHN_UNDEF ? sym.st_value : 0 };
		}
	}
}

static int by_addr(const void *a, const void *b)
{
	uint64_t x = ((const struct got_slot *)a)->addr, y = ((const struct got_slot *)b)->addr;
	return x < y ? -1 : x > y;
}

/* Sorted by address: a target's file sets how many slots there are and how many branches
 * look one up, so each lookup is a binary search. */
static const struct got_slot *slot_at(const struct slots *sl, uint64_t addr)
{
	struct got_slot key = { .addr = addr };
	return sl->n ? bsearch(&key, sl->s, sl->n, sizeof(key), by_addr) : NULL;
}

/* A PLT stub at vaddr: [endbr64] [bnd] jmp *disp(%rip). Returns the GOT slot, or 0. */
static uint64_t plt_stub_slot(const struct elfobj *o, uint64_t vaddr)
{
	uint64_t off;
	uint8_t b[16];
	if (elfobj_vaddr_to_offset(o, vaddr, &off) != 0 || pread(o->fd, b, sizeof(b), off) != sizeof(b))
		return 0;
	size_t i = 0;
	static const uint8_t endbr64[4] = { 0xf3, 0x0f, 0x1e, 0xfa };
	if (memcmp(b, endbr64, 4) == 0) i = 4;
	if (b[i] == 0xf2) i++;   /* bnd prefix (MPX-era PLTs) */
	if (b[i] != 0xff || b[i + 1] != 0x25) return 0;
	int32_t disp;
	memcpy(&disp, b + i + 2, 4);
	return vaddr + i + 6 + (int64_t)disp;
}

/* Is addr the entry of an allocation function of this object other than fn? */
static int def_at(const struct fn_def defs[AF_COUNT], enum alloc_fn fn, uint64_t addr)
{
	for (int k = 0; k < AF_COUNT; k++)
		if (k != (int)fn && defs[k].found && !defs[k].ifunc && defs[k].vaddr == addr) return k;
	return -1;
}

static int alloc_fn_named(const char *name)
{
	for (int k = 0; k < AF_COUNT; k++)
		if (strcmp(name, alloc_fn_name(k)) == 0) return k;
	return -1;
}

/* The allocation function reached through GOT slot `slot`, or -1. */
static int slot_target(const struct slots *sl, const struct fn_def defs[AF_COUNT],
                       enum alloc_fn fn, uint64_t slot)
{
	const struct got_slot *g = slot_at(sl, slot);
	if (!g) return -1;
	int k = alloc_fn_named(g->name);
	if (k >= 0 && k != (int)fn) return k;
	return g->value ? def_at(defs, fn, g->value) : -1;
}

int alloc_forwarding_target(const struct elfobj *o, const struct fn_def defs[AF_COUNT],
                             enum alloc_fn fn)
{
	const struct fn_def *d = &defs[fn];
	if (!d->found || d->ifunc) return -1;
	size_t len = d->size && d->size <= 65536 ? d->size : 64;
	uint8_t *code = malloc(len);
	ssize_t got = code ? pread(o->fd, code, len, d->offset) : -1;
	csh cs;
	if (got <= 0 || cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK) {
		free(code);
		return -1;
	}
	cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
	struct slots sl = { 0 };
	read_slots(o, &sl);
	if (sl.n) qsort(sl.s, sl.n, sizeof(*sl.s), by_addr);
	cs_insn *in = cs_malloc(cs);
	const uint8_t *p = code;
	size_t left = (size_t)got;
	uint64_t addr = d->vaddr;
	int target = -1;
	while (in && target < 0 && cs_disasm_iter(cs, &p, &left, &addr, in)) {
		if (!in->detail) continue;
		bool branch = false;
		for (int g = 0; g < in->detail->groups_count; g++)
			branch |= in->detail->groups[g] == CS_GRP_JUMP || in->detail->groups[g] == CS_GRP_CALL;
		const cs_x86 *x = &in->detail->x86;
		if (!branch || x->op_count != 1) continue;
		const cs_x86_op *op = &x->operands[0];
		if (op->type == X86_OP_IMM) {
			uint64_t t = (uint64_t)op->imm;
			target = def_at(defs, fn, t);
			if (target < 0) {
				uint64_t slot = plt_stub_slot(o, t);
				if (slot) target = slot_target(&sl, defs, fn, slot);
			}
		} else if (op->type == X86_OP_MEM && op->mem.base == X86_REG_RIP &&
		           op->mem.index == X86_REG_INVALID) {
			target = slot_target(&sl, defs, fn, in->address + in->size + op->mem.disp);
		}
	}
	if (in) cs_free(in, 1);
	cs_close(&cs);
	free(sl.s);
	free(code);
	return target;
}
