/* Unwinds remembered (parse/unwind/unwind_memo.c): an unwind is given back only to a sample
 * with its pc and stack pointer (and frame pointer, when a frame's CFA used it) whose stack
 * holds the same return addresses (every word read, when a frame's CFA was at the frame
 * pointer); one that read outside the copy is never kept. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "unwind/unwind_memo.h"

static struct unwind_memo m;

/* An unwind of the sample (pc, sp, fp, stack) that reads words at offs. */
static void record(uint64_t pc, uint64_t sp, uint64_t fp, const uint8_t *stack,
		   const uint64_t *offs, int n, bool outside, enum memo_keep how)
{
	memo_begin(&m);
	for (int i = 0; i < n; i++) {
		uint64_t w;
		memcpy(&w, stack + offs[i], 8);
		memo_read(&m, true, offs[i], w);
		memo_visit(&m, 0x1000 + (uint64_t)i);
		if (i != 1) memo_return_address(&m, true, offs[i]); /* offs[1]: a saved register */
	}
	if (outside) memo_read(&m, false, 0, 0);
	uint64_t pcs[3] = {0x401000, 0x402000, 0x403000};
	struct memo_result r = {.rc = 0, .max_read = sp + offs[n - 1] + 8, .nframes = 3, .pcs = pcs};
	memo_end(&m, 0, pc, sp, fp, &r, how);
}

static bool replay(uint64_t pc, uint64_t sp, uint64_t fp, const uint8_t *stack, size_t len,
		   uint64_t *pcs, int *n, uint64_t *max_read)
{
	struct memo_result r = {.pcs = pcs};
	if (!memo_replay(&m, 0, pc, sp, fp, stack, len, &r, 16)) return false;
	*n = r.nframes;
	*max_read = r.max_read;
	return true;
}

int main(void)
{
	uint8_t stack[512], other[512];
	for (int i = 0; i < 512; i++) stack[i] = (uint8_t)(i * 7);
	const uint64_t offs[] = {8, 64, 200};
	uint64_t pcs[16], max_read;
	int n = 0;
	const uint64_t pc = 0x7f0000001000, sp = 0x7ffd0000, fp = 0x1234;

	record(pc, sp, fp, stack, offs, 3, false, MEMO_BY_SP);
	CHECK("memo_same_sample_replayed", replay(pc, sp, fp, stack, sizeof stack, pcs, &n, &max_read) &&
		      n == 3 && pcs[0] == 0x401000 && pcs[2] == 0x403000 && max_read == sp + 208);
	/* -O2 code keeps anything in rbp: not compared when no frame's CFA used it */
	CHECK("memo_fp_not_compared_by_sp", replay(pc, sp, 0x9999, stack, sizeof stack, pcs, &n, &max_read));
	memcpy(other, stack, sizeof other);
	other[300] ^= 1; /* a word the unwind never read */
	CHECK("memo_unread_word_ignored", replay(pc, sp, fp, other, sizeof other, pcs, &n, &max_read));
	other[65] ^= 1; /* a saved register it read (a loop's counter): frames from the stack pointer do not depend on it */
	CHECK("memo_saved_register_ignored_by_sp", replay(pc, sp, fp, other, sizeof other, pcs, &n, &max_read));
	other[9] ^= 1; /* a return address */
	CHECK("memo_return_address_differs_missed", !replay(pc, sp, fp, other, sizeof other, pcs, &n, &max_read));
	CHECK("memo_other_sp_missed", !replay(pc, sp + 16, fp, stack, sizeof stack, pcs, &n, &max_read));
	CHECK("memo_other_pc_missed", !replay(pc + 1, sp, fp, stack, sizeof stack, pcs, &n, &max_read));
	CHECK("memo_shorter_copy_missed", !replay(pc, sp, fp, stack, 200, pcs, &n, &max_read));

	record(pc, sp, fp, stack, offs, 3, false, MEMO_BY_SP_AND_FP);
	CHECK("memo_fp_compared_when_used", replay(pc, sp, fp, stack, sizeof stack, pcs, &n, &max_read) &&
		      !replay(pc, sp, fp + 8, stack, sizeof stack, pcs, &n, &max_read));
	memcpy(other, stack, sizeof other);
	other[65] ^= 1; /* with a CFA at the frame pointer, every word read counts */
	CHECK("memo_saved_register_compared_by_fp", !replay(pc, sp, fp, other, sizeof other, pcs, &n, &max_read));

	memo_clear(&m);
	record(pc, sp, fp, stack, offs, 3, true, MEMO_BY_SP);
	CHECK("memo_read_outside_copy_not_kept", !replay(pc, sp, fp, stack, sizeof stack, pcs, &n, &max_read));
	record(pc, sp, fp, stack, offs, 3, false, MEMO_DONT);
	CHECK("memo_frame_without_simple_cfa_not_kept", !replay(pc, sp, fp, stack, sizeof stack, pcs, &n, &max_read));
	record(pc, sp, fp, stack, offs, 3, false, MEMO_BY_SP);
	memo_clear(&m);
	CHECK("memo_cleared", !replay(pc, sp, fp, stack, sizeof stack, pcs, &n, &max_read));
	return CHECK_DONE();
}
