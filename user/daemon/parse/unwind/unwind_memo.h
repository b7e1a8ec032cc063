/* Unwinds remembered: a sample whose pc, stack pointer and frame pointer are those of an
 * earlier one, and whose stack holds the same words wherever the earlier unwind read it, has
 * the same frames (libdw's walk is a function of those registers and the words it reads), so
 * they are taken from the earlier one, checked word by word, without walking again. A hot
 * loop allocates from one place at one depth: its samples are unwound once. Only unwinds that
 * read nothing but the sample's stack copy are kept (no object memory, no probe past the
 * copy), so nothing else can have changed; the unwinder forgets them all when it re-reads
 * the mappings or its limits change.
 *
 * The unwind of a frame depends on the registers its CFA rule names, and the registers a
 * frame saves are read back from the stack; so an unwind is kept only when every frame it went
 * through had its CFA at the stack pointer plus a constant (then the frame pointer's value is
 * not compared: -O2 code uses it as any other register) or at the frame pointer plus a
 * constant (then it is compared too); a frame with another rule (an expression: a realigned
 * stack) or none (no CFI: libdw follows frame pointers) is not kept. With every CFA at the
 * stack pointer, the frames follow from the pc, the stack pointer and the return addresses
 * alone (a frame's stack pointer is its callee's CFA): only the words the return addresses were
 * read from are compared, not the saved registers (a loop's counter, saved by a callee, changes
 * at every sample). With a CFA at the frame pointer every word read is compared.
 * MEMTRACED_UNWIND_MEMO=off in memtraced's environment walks every sample (tests compare). */
#ifndef MEMTRACED_UNWIND_MEMO_H
#define MEMTRACED_UNWIND_MEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MEMO_SLOTS 256       /* direct-mapped by pc and stack pointer */
#define MEMO_MAX_READS 256   /* an unwind reading more is not kept */
#define MEMO_MAX_FRAMES 128

struct memo_entry;

struct unwind_memo {
	struct memo_entry *slot[MEMO_SLOTS];
	/* the unwind being recorded */
	bool recording, spoiled;
	int nreads, nvisits;
	uint64_t visit[MEMO_MAX_FRAMES];   /* the pcs of the frames it went through */
	int nra;
	uint32_t ra_off[MEMO_MAX_FRAMES];  /* where it read their return addresses */
	uint32_t read_off[MEMO_MAX_READS];
	uint64_t read_val[MEMO_MAX_READS];
	uint64_t hits, stored;
};

/* What an unwind produced (and what a remembered one gives back). */
struct memo_result {
	int rc;
	bool frames_capped;
	uint64_t max_read;   /* absolute, 0 if nothing read */
	int nframes;
	uint64_t *pcs;       /* the caller's array, nframes long (at most max on replay) */
};

/* A remembered unwind of this sample: true and *out filled (out->pcs has room for max). */
bool memo_replay(struct unwind_memo *m, int start, uint64_t pc, uint64_t sp, uint64_t fp,
		 const uint8_t *stack, size_t stack_len, struct memo_result *out, int max);
/* How a kept unwind is matched (what stacks.c found in the frames' CFI): */
enum memo_keep { MEMO_DONT, MEMO_BY_SP, MEMO_BY_SP_AND_FP };
/* Recording the reads of the next unwind. */
void memo_begin(struct unwind_memo *m);
/* A read the unwinder made: inside the copy (its offset from sp and the word), or not (the
 * unwind is then not kept). */
void memo_read(struct unwind_memo *m, bool in_copy, uint64_t off, uint64_t val);
/* A frame it went through (its pc, the call site's for a return address). */
void memo_visit(struct unwind_memo *m, uint64_t pc);
/* The caller's frame was found through a return address at off from the stack pointer (ok:
 * inside the copy). */
void memo_return_address(struct unwind_memo *m, bool ok, uint64_t off);
/* The frames visited, or NULL if the unwind will not be kept anyway (spoiled). */
const uint64_t *memo_visits(const struct unwind_memo *m, int *n);
/* The unwind is done: kept as keep says, unless something spoiled it. */
void memo_end(struct unwind_memo *m, int start, uint64_t pc, uint64_t sp, uint64_t fp,
	      const struct memo_result *r, enum memo_keep keep);
void memo_clear(struct unwind_memo *m);

#endif
