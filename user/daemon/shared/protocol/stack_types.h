/* What a sample and an unwinder's counters look like on both sides of the parser's
 * protocol: the registers a sample carries, where they were taken, the counters. */
#ifndef MEMTRACED_PROTOCOL_STACK_TYPES_H
#define MEMTRACED_PROTOCOL_STACK_TYPES_H
#include <stddef.h>
#include <stdint.h>

/* rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip: DWARF order */
#define STACKS_NREGS 17

/* Where the registers of a sample were taken. */
enum stacks_start {
	STACKS_AT_ENTRY,   /* an allocation function's entry: its frame is left out (stacks_unwind) */
	STACKS_IN_SAMPLER, /* a probe site inside an in-process sampler: the leading frames in the
			      sampler's object are left out, codes[0] is the allocation call site */
	STACKS_AT_SYSCALL, /* a system call (mmap): the function that made it is codes[0] */
};
/* The parser's memory caps (issue 35), named in the daemon's summary: distinct codes per
 * process (stacks_limits.max_symbolized's default) and of all processes together; the bytes
 * the names and line tables of Python code objects may take per process and in all. */
#define STACKS_CODES_PER_PROCESS (UINT64_C(1) << 20)
#define STACKS_ALL_CODES_CAP (UINT64_C(4) << 20)
#define PY_BUDGET_PROCESS ((size_t)64 << 20)
#define PY_BUDGET_ALL ((size_t)256 << 20)

/* Counters, for the daemon's summary and the benches. */
struct stacks_stats {
	uint64_t samples;        /* stacks_unwind calls */
	uint64_t frames;         /* codes returned */
	uint64_t truncated;      /* samples whose stack was deeper than the copy */
	uint64_t remembered;     /* samples whose unwind was an earlier one's (unwind_memo.h) */
	uint64_t unwind_errors;  /* samples whose stack did not reach its end for another reason:
				  * libdw stopped before a process's or thread's entry point */
	uint64_t codes;          /* distinct codes (= symbolizations done) */
	uint64_t refreshes;      /* re-reads of the mappings (explicit + automatic) */
	uint64_t unknown_pcs;    /* frames whose pc lay in no object even after a refresh */
	uint64_t jit_frames;     /* frames in anonymous executable memory (JIT code), per pc */
	uint64_t jit_named;      /* of which named by the program's perf map */
	uint64_t unnamed_codes;  /* distinct codes left without a name: object+0xOFFSET (no
				    symbol, no debug info) */
	uint64_t capped_stacks;  /* samples cut at the frame cap (or the caller's max_codes) */
	uint64_t capped_objects; /* objects over the debug-info, symbol or time cap */
	uint64_t py_samples;     /* samples with Python frames */
	uint64_t py_frames;      /* Python frames in them */
	uint64_t py_arenas;      /* of them the interpreter's own mappings (pymalloc arenas), charged
				    to the innermost Python line (stacks.c: frames_to_codes) */
	uint64_t py_cut;         /* samples whose Python stack was cut at MT_PY_MAX_FRAMES */
	uint64_t py_no_thread;   /* samples of a thread without a Python thread state */
	uint64_t py_failed;      /* samples whose walk failed midway (a read of the target) */
	uint64_t py_gone;        /* frames whose code object had changed when it was read */
	char capped_note[160];   /* which: "libfoo.so (time), libbar.so (debug info)" */
	uint64_t capped_codes;   /* distinct codes of such objects, named from their symbols
				    or object+0xOFFSET only */
	uint64_t over_cap_frames; /* frames named "[over the cap of distinct frames]": the process
				     (or the parser in all) had as many distinct codes as allowed */
	uint64_t py_over_budget; /* Python frames named "[over the Python names' memory budget]" */
};
#endif
