/* Where to put a uprobe in an allocation function: an instruction the kernel emulates
 * (no single-step) reached by every call with the arguments intact. capstone decodes. */
#ifndef MEMTRACED_SITES_PROBESITE_H
#define MEMTRACED_SITES_PROBESITE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/allocfn.h"

/* Where to probe a function whose code (len bytes read from its entry, at virtual address
 * entry_vaddr, size of the function fn_size or 0 if unknown) is given. Returns the offset from
 * the entry: 0 when the entry is emulated or nothing better is found; for a free-like function
 * the instruction after a leading `test %rdi,%rdi; je` when the kernel emulates it, else the
 * first emulated instruction reached by every call with %rdi intact; for an allocating
 * function the first emulated instruction reached by every call with the argument registers
 * and %rsp intact (its return address still at [rsp]: the session return probe works there).
 * Never a site that something else in the function jumps to. *emulated tells whether the
 * kernel emulates the chosen instruction. */
uint64_t probe_site_choose(enum alloc_fn fn, const uint8_t *code, size_t len,
                           uint64_t entry_vaddr, uint64_t fn_size, bool *emulated);

/* Does the x86-64 kernel emulate this instruction instead of single-stepping it?
 * (arch/x86/kernel/uprobes.c: branch_setup_xol_ops, push_setup_xol_ops) */
bool probe_insn_emulated(const uint8_t *insn, size_t len);

#endif
