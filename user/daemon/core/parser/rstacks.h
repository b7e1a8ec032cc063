/* A process's unwinder as the daemon uses it: the parser's (through a channel of its own,
 * see parser.h), or, without a parser (unit tests), a struct stacks in-process. The calls
 * mean what the stacks.h calls of the same names mean; in addition an unwind can be asked
 * for ahead (rstacks_prefetch) so that the parser works on the next samples while the daemon
 * writes the trace of this one.
 *
 * One thread at a time uses an rstacks (it may be handed to another thread). */
#ifndef MEMTRACED_PARSER_RSTACKS_H
#define MEMTRACED_PARSER_RSTACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "memtrace.h"
#include "protocol/python.h"
#include "protocol/stack_types.h"

struct rstacks;

struct rstacks *rstacks_open(pid_t pid, char *err, size_t errlen);
/* --python: what the unwinders opened from now on look for and show (PY_MODE_AUTO first). */
void rstacks_set_python_mode(enum py_mode mode);
/* The process's CPython interpreter, as the parser found it when r was opened. */
const struct py_found *rstacks_python(const struct rstacks *r);
void rstacks_refresh(struct rstacks *r);
void rstacks_set_final_maps(struct rstacks *r, const char *maps);
/* A sample's Python frames (include/python_frames.h): frames must lie right after its stack
 * bytes, at stack + stack_len rounded up to 8 (as a record queue's items hold them), or
 * they are not sent. */
struct rstacks_py {
	const struct mt_py_frame *frames;
	uint16_t n, status;
	const struct mt_py_code *codes; /* right after the frames, or not sent */
	uint16_t ncodes;
};
/* Sends the unwind of a sample ahead, keyed by key (the record): the rstacks_unwind_from
 * with the same key takes its result. false when it was not sent (no room now). */
bool rstacks_prefetch(struct rstacks *r, const void *key, pid_t tid, const uint64_t regs[STACKS_NREGS],
		      const uint8_t *stack, size_t stack_len, const struct rstacks_py *py,
		      enum stacks_start start, bool want_files);
/* The unwinds asked ahead since the last call are all sent: the parser may start (it is not
 * woken for each: rstacks_prefetch sends quietly). */
void rstacks_ahead_sent(struct rstacks *r);
/* Few unwinds asked ahead are still out (half the most): time to ask for more, together. */
bool rstacks_ahead_low(const struct rstacks *r);
/* stacks_unwind_from; want_files: rstacks_last_frame_file is asked for frames 0 and 1.
 * -1 when the parser is gone (rstacks_broken). */
int rstacks_unwind_from(struct rstacks *r, const void *key, pid_t tid,
			const uint64_t regs[STACKS_NREGS], const uint8_t *stack, size_t stack_len,
			const struct rstacks_py *py, enum stacks_start start, bool want_files,
			uint64_t *codes, int max_codes);
/* Results asked for ahead and not taken are thrown away. */
void rstacks_drop_ahead(struct rstacks *r);
void rstacks_last_extent(const struct rstacks *r, uint64_t *end, bool *truncated);
const char *rstacks_last_frame_file(struct rstacks *r, int i); /* i < 2 */
int rstacks_locations(void *r, uint64_t code, const mt_location **locs);
void rstacks_get_stats(const struct rstacks *r, struct stacks_stats *out);
/* The parser is gone: nothing more can be unwound (parser_gone says why). */
bool rstacks_broken(const struct rstacks *r);
void rstacks_close(struct rstacks *r);

#endif
