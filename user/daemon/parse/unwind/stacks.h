/* Unwinding and symbolizing one process's allocation samples.
 *
 * A sample is what the BPF side captured at the allocation function's ENTRY: the 17 registers
 * in DWARF order (rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip) and a copy of the user stack
 * starting at rsp. stacks_unwind() walks it with libdw's DWARF CFI unwinder (.eh_frame /
 * .debug_frame, no frame pointers needed) and turns every frame into a location code;
 * stacks_locations() describes a code for the trace writer (it is an mt_locations_fn).
 *
 * Location codes are a stable function of (object, offset in the object): the object is its
 * build-id and path (the path alone when it has no build-id), the offset is the ELF virtual
 * address of the call site. Codes are never 0 and stay below 2^62. Each distinct code is symbolized once, when it
 * is first seen, and its location list lives as long as the struct stacks.
 *
 * Not thread-safe: one struct stacks is used by one thread at a time.
 */
#ifndef MEMTRACED_STACKS_H
#define MEMTRACED_STACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "memtrace.h"

#include "protocol/python.h"
#include "protocol/stack_types.h"

/* Location written for the outermost code of a stack deeper than its copy. */
#define STACKS_TRUNCATED_FILE "<truncated>"
/* Location of a pc that lies in no mapped object (JIT code, unmapped after the sample). */
#define STACKS_UNKNOWN_FILE "<unknown>"

struct stacks;

/* Reads /proc/PID/maps and prepares the unwinder. NULL on error, with a message in err.
 * Objects are opened as the target names them; for a target in another mount namespace or
 * root (a container) under /proc/PID/root, whose handle is kept so that objects still load
 * after the target has exited. DWARF split off into a debug file is found by libdw's standard
 * search: /usr/lib/debug/.build-id/xx/yyyy.debug, then the .gnu_debuglink name next to the
 * object, in its .debug/ and under /usr/lib/debug/DIR. */
struct stacks *stacks_open(pid_t pid, char *err, size_t errlen);
/* For tests and fuzzing: unwinds against one ELF file loaded at base (its load bias), as if
 * a process mapped only it; no process is read (memory outside the stack copy is unreadable,
 * so no truncation marks). tid in stacks_unwind is ignored. */
struct stacks *stacks_open_object(const char *path, uint64_t base, char *err, size_t errlen);
/* Re-reads the process's mappings (dlopen, exec). Also done automatically, rate-limited, when a
 * pc falls in no known object. */
void stacks_refresh(struct stacks *s);
/* The target's /proc/PID/maps text, read at its exit while it was held there: used when the
 * mappings must be re-read after it is gone (a library it dlopen'ed shortly before). */
void stacks_set_final_maps(struct stacks *s, const char *maps);
/* Unwinds a sample (regs/stack as in struct tracer_alloc) and returns location codes,
 * INNERMOST FIRST, n >= 0. The allocation function's own frame (rip = its entry) is left out:
 * codes[0] is the call site in its caller (return address - 1). A stack deeper than the copy
 * ends in a code whose location says it was truncated (file STACKS_TRUNCATED_FILE).
 * Codes are stable functions of (object build-id, offset), never 0, < 2^62. */
int stacks_unwind(struct stacks *s, pid_t tid, const uint64_t regs[STACKS_NREGS],
		  const uint8_t *stack, size_t stack_len, uint64_t *codes, int max_codes);
int stacks_unwind_from(struct stacks *s, pid_t tid, const uint64_t regs[STACKS_NREGS],
		       const uint8_t *stack, size_t stack_len, enum stacks_start start,
		       uint64_t *codes, int max_codes);
/* The last unwind: *end is the address past the highest stack byte it read when it reached
 * the outermost frame (the thread's stack ends there: later copies need nothing above it),
 * else 0; *truncated when the stack went on past the copy. */
void stacks_last_extent(const struct stacks *s, uint64_t *end, bool *truncated);
/* The file of the object that frame i (codes[i]) of the last unwind lies in, as opened
 * (maybe under /proc/PID/root), or NULL. */
const char *stacks_last_frame_file(struct stacks *s, int i);
/* mt_locations_fn for the writer: the location list of a code (outermost first). Returns the
 * number of locations (the array lives as long as s), or -1 for a code s never handed out. */
int stacks_locations(void *stacks, uint64_t code, const mt_location **locs);
void stacks_close(struct stacks *s);

void stacks_get_stats(const struct stacks *s, struct stacks_stats *out);

/* Python (stacks_python.c): the process's interpreter (python/pyproc.h, taken over; NULL:
 * none) and what its stacks show (enum py_mode). */
struct pyproc;
void stacks_set_python(struct stacks *s, struct pyproc *py, enum py_mode mode);
/* Finds the process's interpreter (unless mode is PY_MODE_NO) and sets it: *found says what
 * was found, and why it cannot be used when it cannot. */
void stacks_find_python(struct stacks *s, enum py_mode mode, struct py_found *found);
/* The Python frames of the next sample stacks_unwind_from unwinds (frames lives until then):
 * its eval-loop activations are replaced by them; codes: the names of ncodes code objects
 * its process's samples had not shown before. */
void stacks_python_sample(struct stacks *s, const struct mt_py_frame *frames, int n, int status,
			  const struct mt_py_code *codes, int ncodes);

/* Caps on the work one target's files can cause, the defaults in parentheses. Past the debug
 * info cap an object's frames are named from its symbols; past the symbol, time or code cap,
 * object+0xOFFSET. A stack past the frame cap ends in a "[stack cut at N frames]" marker
 * (file STACKS_TRUNCATED_FILE). All counted in struct stacks_stats. */
struct stacks_limits {
	int max_frames;            /* frames per stack (2048, also the most there can be) */
	uint64_t max_debug_bytes;  /* DWARF per object: its .debug_* sections, or the size of
				      its separate debug file (1 GiB) */
	uint64_t max_symbols;      /* symbol table entries per object (4 Mi) */
	uint64_t max_symbolize_ns; /* time spent symbolizing one object's frames (10 s) */
	uint64_t max_symbolized;   /* distinct codes symbolized per process (1 Mi); past it an
				      object's new frames are object+0xOFFSET, past 4x that and
				      for any other kind of frame (JIT, Python, unknown) past it,
				      "[over the cap of distinct frames]" */
};
/* Past STACKS_ALL_CODES_CAP distinct codes of all processes of the parser together
 * (protocol/stack_types.h), every process's new frames are "[over the cap of distinct
 * frames]". */
/* Debug files that libdw's standard search does not find are opened as PREFIX<build-id in
 * hex> (the sandboxed parser's broker fetches them from a debuginfod server). Process-wide,
 * set once before any unwinder is opened. */
void stacks_fetch_debuginfo_from(const char *prefix);

/* For tests: other caps than the defaults. */
void stacks_set_limits(struct stacks *s, const struct stacks_limits *limits);

#endif
